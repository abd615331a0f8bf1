"""JsonConverter without a declared type: ``schemas.enable=false`` reads a VARIANT (Kafka's schemaless Map, list or
primitive), and Kafka 4.2's ``schema.content`` (KIP-1054) gives bare messages a Connect schema."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructType, VariantType

from spark_connect_bridge.converters import apply_sink_converters, apply_source_converters
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.engine.pipeline import prepare
from spark_connect_bridge.errors import ConfigError

JSON = "org.apache.kafka.connect.json.JsonConverter"
SCHEMALESS = {"value.converter": JSON, "value.converter.schemas.enable": "false"}
MESSAGES = [b'{"id":1,"tags":["a",null],"addr":{"city":"Oslo","zip":null},"x":2.5}', b'[1,2]', b'"s"', b"7",
            b"null", None, b'{"b":true} trailing text']


def test_schemaless_value_is_a_variant_with_no_declared_type(spark, records):
    out = apply_sink_converters(records([(None, m) for m in MESSAGES]), SCHEMALESS)
    assert isinstance(out.schema["value"].dataType, VariantType)
    rows = out.select(F.to_json("value").alias("j")).collect()
    assert [r.j for r in rows] == ['{"addr":{"city":"Oslo","zip":null},"id":1,"tags":["a",null],"x":2.5}', "[1,2]",
                                   '"s"', "7", None, None, '{"b":true}']
    assert out.select(F.variant_get("value", "$.addr.city", "string").alias("c")).first().c == "Oslo"


def test_invalid_json_is_a_record_error_with_kafkas_message(spark, records):
    out = apply_sink_converters(enable_error_column(records([(None, b'{"a":'), (None, b'{"a":1}')])), SCHEMALESS)
    bad, good = out.orderBy("offset").collect()
    assert bad.value is None and bad[ERROR_COL].stage == "VALUE_CONVERTER"
    assert "Converting byte[] to Kafka Connect data failed due to serialization error" in bad[ERROR_COL].message
    assert good[ERROR_COL] is None


@pytest.mark.parametrize("enabled,expected", [
    ("false", ['{"a":[1,{"b":null}],"z":"x"}', "[1,2]", "3.5", None]),
    ("true", ['{"schema":null,"payload":{"a":[1,{"b":null}],"z":"x"}}', '{"schema":null,"payload":[1,2]}',
              '{"schema":null,"payload":3.5}', None]),
])
def test_a_variant_is_written_as_its_json(spark, records, enabled, expected):
    """As Kafka's JsonConverter writes a schemaless value (with schemas.enable, in an envelope whose schema is
    null); a null value is null bytes."""
    parsed = apply_sink_converters(records([(None, m) for m in (b'{"z":"x","a":[1,{"b":null}]}', b"[1,2]", b"3.5",
                                                                   None)]), SCHEMALESS)
    out = apply_source_converters(parsed, {"value.converter": JSON, "value.converter.schemas.enable": enabled})
    values = [r.value for r in out.orderBy("offset").collect()]
    assert [None if v is None else bytes(v).decode() for v in values] == expected


def test_a_sink_config_needs_no_spark_schema():
    prepare({"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x", **SCHEMALESS},
            kind="sink")


def test_an_smt_that_needs_the_fields_types_is_refused_naming_it_and_spark_schema():
    """Our Explode reads an array field's element type: on a VARIANT it is refused before data moves, on its
    ``type`` key, asking for ``value.converter.spark.schema`` (Debezium's SMTs pass a schemaless value, as Debezium
    does: tests/transforms/test_schemaless_variant.py)."""
    with pytest.raises(ConfigError) as raised:
        prepare({"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x", **SCHEMALESS,
                 "transforms": "explode", "transforms.explode.type": "Explode$Value",
                 "transforms.explode.field": "items"}, kind="sink")
    assert [p.key for p in raised.value.problems] == ["transforms.explode.type"]
    assert "value.converter.spark.schema" in str(raised.value)


CONTENT = json.dumps({"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "name", "type": "string", "optional": True}]})


def test_schema_content_reads_bare_messages_with_its_schema(spark, records):
    cfg = {"value.converter": JSON, "value.converter.schema.content": CONTENT}
    out = apply_sink_converters(records([(None, b'{"id":1,"name":"ada"}'), (None, b'{"id":2}'), (None, None)]), cfg)
    value_type = out.schema["value"].dataType
    assert isinstance(value_type, StructType)
    assert [(f.name, f.dataType) for f in value_type.fields] == [("id", LongType()), ("name", StringType())]
    assert [r.value and tuple(r.value) for r in out.orderBy("offset").collect()] == [(1, "ada"), (2, None), None]


def test_schema_content_is_ignored_with_schemas_disabled_as_kafka_does(spark, records):
    out = apply_sink_converters(records([(None, b'{"id":1}')]),
                                {**SCHEMALESS, "value.converter.schema.content": CONTENT})
    assert isinstance(out.schema["value"].dataType, VariantType)


@pytest.mark.parametrize("content", ['{"type": "nosuch"}', "not json", "null", "[1]"])
def test_invalid_schema_content_names_the_key(content):
    with pytest.raises(ConfigError, match=r"value\.converter\.schema\.content") as raised:
        prepare({"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x",
                 "value.converter": JSON, "value.converter.schema.content": content}, kind="sink")
    assert [p.key for p in raised.value.problems] == ["value.converter.schema.content"]
