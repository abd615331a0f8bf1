"""The S3 source's credentials and buckets over the worker's REST API, attacked as someone with only the REST port
would: the secret never comes back, a masked secret never reads another bucket, region or endpoint, and without
credentials of its own a config reads only the URIs the worker allows (reading is a way out for data too)."""

from __future__ import annotations

import json

import pytest

SOURCE = {"connector.class": "io.confluent.connect.s3.source.S3SourceConnector", "s3.bucket.name": "lake",
          "s3.region": "us-east-1", "store.url": "http://127.0.0.1:9", "aws.access.key.id": "AKIDEXAMPLE",
          "aws.secret.access.key": "source-s3cret", "format.class": "io.confluent.connect.s3.format.json.JsonFormat"}


def test_the_secret_is_masked_everywhere(rest_only):
    _, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "restore", "config": SOURCE, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    shown = api.get("/connectors/restore/config")
    assert shown["aws.secret.access.key"] == "[hidden]"
    for text in (r.text, json.dumps(shown), api.call("GET", "/connectors/restore").text,
                 api.call("GET", "/connectors", expand=["info", "status"]).text,
                 api.call("PUT", "/connector-plugins/S3SourceConnector/config/validate", SOURCE).text):
        assert "source-s3cret" not in text, text


@pytest.mark.parametrize("moved", [{"s3.bucket.name": "attacker-bucket"}, {"s3.region": "eu-west-1"},
                                   {"store.url": "http://attacker.example:9000"}])
def test_a_masked_secret_never_reads_a_new_destination(rest_only, moved):
    worker, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "restore", "config": SOURCE,
                                            "initial_state": "STOPPED"}).status_code == 201
    r = api.call("PUT", "/connectors/restore/config", dict(api.get("/connectors/restore/config"), **moved))
    assert r.status_code == 400 and "aws.secret.access.key" in r.json()["message"], r.text
    assert "source-s3cret" not in r.text
    assert worker.service.raw_config("restore")["aws.secret.access.key"] == "source-s3cret"


def test_the_workers_own_credentials_read_only_the_uris_it_allows(rest_only, tmp_path):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},s3://lake/backups"})
    own = {k: v for k, v in SOURCE.items() if not k.startswith("aws.") and k != "store.url"}
    for config in (own, dict(own, **{"topics.dir": "backups/../private"})):
        r = api.call("POST", "/connectors", {"name": "restore", "config": config, "initial_state": "STOPPED"})
        assert r.status_code == 400 and "s3.bucket.name" in r.json()["message"], r.text
    r = api.call("POST", "/connectors", {"name": "restore", "config": dict(own, **{"topics.dir": "backups/topics"}),
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
