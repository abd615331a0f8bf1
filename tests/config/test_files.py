"""Config files (.properties, JSON create request, bare JSON map) and config providers."""

from __future__ import annotations

import json

import pytest

from spark_connect_bridge.config import load_config_file, load_config_text, parse_properties, resolve_providers
from spark_connect_bridge.errors import ConfigError

FLAT = {"name": "local-file-source", "connector.class": "FileStreamSource", "tasks.max": "1",
        "file": "test.txt", "topic": "connect-test"}


def test_three_formats_load_to_the_same_config(tmp_path):
    props = tmp_path / "c.properties"
    props.write_text("# Kafka's example\nname=local-file-source\nconnector.class=FileStreamSource\n"
                     "tasks.max=1\nfile=test.txt\ntopic=connect-test\n")
    request = tmp_path / "c.json"
    request.write_text(json.dumps({"name": "local-file-source",
                                   "config": {k: v for k, v in FLAT.items() if k != "name"}}))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(FLAT))
    assert dict(load_config_file(props)) == dict(load_config_file(request)) == dict(load_config_file(bare)) == FLAT


def test_json_values_become_kafka_strings_and_initial_state_is_kept():
    req = load_config_text(json.dumps({"name": "n", "config": {"tasks.max": 2, "x": True, "l": ["a", "b"]},
                                       "initial_state": "PAUSED"}))
    assert dict(req) == {"tasks.max": "2", "x": "true", "l": "a,b", "name": "n"}
    assert req.initial_state == "PAUSED"


def test_name_mismatch_in_create_request_is_an_error():
    with pytest.raises(ConfigError, match="does not match"):
        load_config_text(json.dumps({"name": "a", "config": {"name": "b"}}))


def test_properties_escapes_separators_and_continuations():
    text = ("a = 1\nb:2\nc 3\n! comment\nlong=one,\\\n    two\nkey\\ with\\ spaces=v\nuni=\\u00e9\n"
            "path=C:\\\\dir\n empty=\n")
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "long": "one,two", "key with spaces": "v",
                                      "uni": "é", "path": "C:\\dir", "empty": ""}


def test_env_and_file_providers_resolve(tmp_path, monkeypatch):
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("db.password=s3cret\n")
    monkeypatch.setenv("KC_USER", "alice")
    out = resolve_providers({"user": "${env:KC_USER}", "password": f"${{file:{secrets}:db.password}}",
                             "plain": "x"})
    assert out == {"user": "alice", "password": "s3cret", "plain": "x"}


def test_unresolvable_references_name_the_key_not_a_value(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve_providers({"a": "${env:KC_DOES_NOT_EXIST}", "b": f"${{file:{tmp_path}/nope:k}}"})
    assert info.value.keys == ["a", "b"]


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read config file"):
        load_config_file(tmp_path / "nope.properties")
