"""Converter keys Kafka Connect configs carry beside our converters: sub-keys a converter does not declare warn
(Kafka Connect passes them on unread), Confluent's registry keys that would change the data are refused at any
value but their default, and the registry's older spelling of the credentials is read as the newer one."""

from __future__ import annotations

import pytest

from spark_connect_bridge.converters.avro import AvroConverter
from spark_connect_bridge.converters.json_schema import JsonSchemaConverter
from spark_connect_bridge.converters.simple import StringConverter
from spark_connect_bridge.errors import ConfigError

_URL = {"value.converter.schema.registry.url": "http://127.0.0.1:1"}


def test_schemas_enable_beside_string_converter_warns(caplog):
    conv = StringConverter({"value.converter.schemas.enable": "false"}, prefix="value.converter.")
    assert [w.key for w in conv.config.warnings] == ["value.converter.schemas.enable"]
    # The messages, not caplog.text: in one run of tests/transforms then tests/converters in one process the capture
    # handler's text came out as PySpark's JSON log lines (quotes escaped); the cause was not found.
    assert any('Unknown configuration "value.converter.schemas.enable" is ignored' in m for m in caplog.messages)


@pytest.mark.parametrize("cls", [AvroConverter, JsonSchemaConverter])
@pytest.mark.parametrize("key, value", [("flatten.singleton.unions", "false"), ("rule.executors", "checker"),
                                        ("value.schema.id.serializer", "x.HeaderSchemaIdSerializer")])
def test_registry_key_that_changes_data_is_refused(cls, key, value):
    with pytest.raises(ConfigError) as e:
        cls({**_URL, f"value.converter.{key}": value}, prefix="value.converter.")
    assert e.value.keys == [f"value.converter.{key}"] and "only its default" in str(e.value)


def test_registry_timeouts_have_no_effect_and_bearer_auth_warns(caplog):
    AvroConverter({**_URL, "value.converter.http.read.timeout.ms": "5000",
                   "value.converter.bearer.auth.token": "secret-token"}, prefix="value.converter.")
    assert "value.converter.bearer.auth.token=[hidden] is not supported here" in caplog.text
    assert "secret-token" not in caplog.text and "http.read.timeout.ms" not in caplog.text


def test_old_registry_credentials_key_is_read_as_basic_auth_user_info(caplog):
    conv = AvroConverter({**_URL, "value.converter.basic.auth.credentials.source": "USER_INFO",
                          "value.converter.schema.registry.basic.auth.user.info": "u:p"}, prefix="value.converter.")
    assert conv.config.password("basic.auth.user.info") == "u:p"
    assert "read as value.converter.basic.auth.user.info" in caplog.text
