"""JsonSchemaConverter against the embedded registry: wire format, the JSON Schema <-> Spark type mapping, subject
strategies, bad input as record errors, config errors, and interoperability with confluent-kafka's own
JSONSerializer / JSONDeserializer."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_connect_bridge.converters import JsonSchemaConverter, apply_sink_converters, apply_source_converters
from spark_connect_bridge.converters.connect_schema import TIME
from spark_connect_bridge.converters.json_schema_data import json_schema_to_spark, spark_to_json_schema
from spark_connect_bridge.converters.schema_registry import SchemaRegistryClient
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.errors import ConfigError, DataError

JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"

TYPES = StructType([
    StructField("i8", ByteType()), StructField("i16", ShortType()), StructField("i32", IntegerType(), False),
    StructField("i64", LongType()), StructField("f32", FloatType()), StructField("f64", DoubleType()),
    StructField("b", BooleanType()), StructField("s", StringType()), StructField("raw", BinaryType()),
    StructField("arr", ArrayType(StringType())), StructField("m", MapType(StringType(), LongType())),
    StructField("im", MapType(IntegerType(), StringType())),
    StructField("inner", StructType([StructField("x", DoubleType())]), True, {"connect.name": "com.acme.Inner"}),
    StructField("dec", DecimalType(12, 3)), StructField("day", DateType()),
    StructField("tod", IntegerType(), True, {"connect.name": TIME, "connect.version": 1}),
    StructField("ts", TimestampType()),
])
ROW = (-128, 32767, 7, -(2**62), 1.5, 2.25, True, "hé", b"\x00\x01", ["a", None], {"k": 1}, {1: "one"}, (0.5,),
       Decimal("-12345.678"), dt.date(1969, 12, 31), 86_399_999, dt.datetime(2024, 5, 6, 7, 8, 9, 123000))


def cfg(registry, topic="t", *, key=False, **extra):
    side = "key" if key else "value"
    return {"topics": topic, f"{side}.converter": JSON_SCHEMA, f"{side}.converter.schema.registry.url": registry.url,
            **{f"{side}.converter.{k}": v for k, v in extra.items()}}


def register(registry, subject, schema) -> int:
    return SchemaRegistryClient(registry.url).register(subject, json.dumps(schema), schema_type="JSON")


def framed(sid: int, value) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + json.dumps(value).encode()


def test_round_trip_every_type_through_the_registry(spark, records, registry):
    df = records([(None, ROW), (None, None)], value_type=TYPES, topic="js_rt")
    c = cfg(registry, topic="js_rt")
    out = apply_source_converters(df, c)
    raw = [r.value for r in out.collect()]
    assert raw[1] is None and raw[0][0] == 0
    sid = int.from_bytes(raw[0][1:5], "big")
    client = SchemaRegistryClient(registry.url)
    latest = client.get_latest("js_rt-value")
    assert (latest.id, latest.schema_type) == (sid, "JSON")
    schema = json.loads(latest.schema)
    props = schema["properties"]
    assert schema["type"] == "object" and "required" not in schema
    assert props["i32"] == {"type": "integer", "connect.type": "int32", "connect.index": 2}
    assert props["i8"] == {"oneOf": [{"type": "null"}, {"type": "integer", "connect.type": "int8"}],
                           "connect.index": 0}
    assert props["im"]["oneOf"][1]["items"]["properties"]["key"]["connect.type"] == "int32"
    assert props["inner"]["oneOf"][1]["title"] == "com.acme.Inner"
    assert props["dec"]["oneOf"][1]["connect.parameters"]["scale"] == "3"
    body = json.loads(raw[0][5:])
    unscaled = base64.b64encode((-12345678).to_bytes(4, "big", signed=True)).decode()  # Kafka's Decimal bytes
    assert body["dec"] == unscaled and body["day"] == -1 and body["ts"] == 1714979289123
    assert body["im"] == [{"key": 1, "value": "one"}] and body["raw"] == "AAE="
    back = apply_sink_converters(out, c)  # the type comes from the subject's latest version
    rows = [r.value for r in back.collect()]
    assert tuple(rows[0]) == ROW and rows[1] is None
    assert back.schema["value"].dataType["tod"].metadata["connect.name"] == TIME
    explicit = apply_sink_converters(out, c, value_schema=TYPES)
    assert tuple(explicit.first().value) == ROW


def test_tombstones_stay_null_and_keys_round_trip(spark, records, registry):
    df = records([("k1", ("a",)), ("k2", None)], key_type="string", value_type="s STRING", topic="js_keys")
    c = {**cfg(registry, topic="js_keys"), **cfg(registry, topic="js_keys", key=True)}
    out = apply_source_converters(df, c)
    assert [json.loads(r.key[5:]) for r in out.collect()] == ["k1", "k2"]
    client = SchemaRegistryClient(registry.url)
    assert json.loads(client.get_latest("js_keys-key").schema) == {"type": "string"}
    back = apply_sink_converters(out, c).collect()
    assert [(r.key, r.value.asDict() if r.value else None) for r in back] == [("k1", {"s": "a"}), ("k2", None)]


def test_decimal_format_numeric_writes_numbers_and_both_forms_read(spark, records, registry):
    df = records([(None, (Decimal("10.25"),))], value_type="d DECIMAL(6,2)", topic="js_dec")
    numeric = apply_source_converters(df, cfg(registry, topic="js_dec", **{"decimal.format": "NUMERIC"}))
    assert json.loads(numeric.first().value[5:]) == {"d": 10.25}
    base64 = apply_source_converters(df, cfg(registry, topic="js_dec"))
    for out in (numeric, base64):
        assert apply_sink_converters(out, cfg(registry, topic="js_dec")).first().value.d == Decimal("10.25")


def test_record_name_strategies_use_the_schema_title(spark, records, registry):
    df = records([(None, (1,))], value_type="id BIGINT", topic="js_orders")
    df = df.withMetadata("value", {"connect.name": "com.acme.Order"})
    strategy = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
    out = apply_source_converters(df, cfg(registry, topic="js_orders", **{"value.subject.name.strategy": strategy}))
    sid = int.from_bytes(out.first().value[1:5], "big")  # registered when the bytes are made
    assert SchemaRegistryClient(registry.url).get_latest("js_orders-com.acme.Order").id == sid
    untitled = records([(None, (1,))], value_type="id BIGINT", topic="js_orders")
    with pytest.raises(ConfigError, match="needs a named schema"):
        apply_source_converters(untitled, cfg(registry, topic="js_orders", **{
            "value.subject.name.strategy": "RecordNameStrategy"}))


def test_use_latest_version_and_use_schema_id_frame_with_that_id(spark, records, registry):
    sid = register(registry, "js_fixed-value", {"type": "object", "properties": {
        "id": {"type": "integer"}, "note": {"type": ["string", "null"]}}, "required": ["id"]})
    df = records([(None, (3, None))], value_type="id BIGINT, note STRING", topic="js_fixed")
    # The records' schema has no "required" (Confluent's fromConnectSchema writes none): only a non-strict
    # use.latest.version takes a latest schema that requires a property.
    latest = {"use.latest.version": "true", "auto.register.schemas": "false", "latest.compatibility.strict": "false"}
    for extra in (latest, {"use.schema.id": str(sid)}):
        out = apply_source_converters(df, cfg(registry, topic="js_fixed", **extra)).first().value
        assert int.from_bytes(out[1:5], "big") == sid
    parsed = apply_sink_converters(records([(None, out)]), cfg(registry, topic="x", **{"use.schema.id": sid}))
    assert tuple(parsed.first().value) == (3, None)


def test_use_latest_version_that_cannot_read_the_records_is_a_record_error(spark, records, registry):
    register(registry, "js_strict-value", {"type": "object", "properties": {"id": {"type": "string"}},
                                           "additionalProperties": False})
    df = enable_error_column(records([(None, (3,))], value_type="id BIGINT", topic="js_strict"))
    c = cfg(registry, topic="js_strict", **{"use.latest.version": "true", "auto.register.schemas": "false"})
    row = apply_source_converters(df, c).first()
    assert row.value is None and "does not accept the records' schema" in row[ERROR_COL].message
    relaxed = apply_source_converters(df, {**c, "value.converter.latest.compatibility.strict": "false"}).first()
    assert relaxed[ERROR_COL] is None and relaxed.value[5:] == b'{"id":3}'


def test_a_new_version_is_read_with_the_plan_time_type(spark, records, registry):
    sid1 = register(registry, "js_evo-value", {"type": "object", "properties": {"a": {"type": "integer"}},
                                               "additionalProperties": False})
    sid2 = register(registry, "js_evo-value", {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": ["string", "null"]}}, "additionalProperties": False})
    df = records([(None, framed(sid1, {"a": 1})), (None, framed(sid2, {"a": 2, "b": "x"}))], topic="js_evo")
    assert [tuple(r.value) for r in apply_sink_converters(df, cfg(registry, topic="js_evo")).collect()] == \
        [(1, None), (2, "x")]


def _bad_inputs(sid):
    return [
        ("wrong magic byte", b"\x01" + framed(sid, {"id": 1})[1:], "Unknown magic byte"),
        ("too short", b"\x00\x00", "Unknown magic byte"),
        ("empty", b"", "Unknown magic byte"),
        ("invalid JSON", framed(sid, {"id": 1})[:-1], "invalid JSON"),
        ("wrong type", framed(sid, {"id": "one"}), "invalid JSON, or a payload that does not fit"),
        ("required field missing", framed(sid, {"tags": {}}), "invalid null value for required field id"),
        ("required field null", framed(sid, {"id": None}), "invalid null value for required field id"),
        ("null key in a map", framed(sid, {"id": 1, "by": [{"key": None, "value": "x"}]}), "null or repeated key"),
        ("repeated map key", framed(sid, {"id": 1, "by": [{"key": 1, "value": "x"}, {"key": 1, "value": "y"}]}),
         "null or repeated key"),
    ]


BAD_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "tags": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
    "by": {"oneOf": [{"type": "null"}, {"type": "array", "connect.type": "map", "items": {
        "type": "object", "properties": {"key": {"type": "integer", "connect.type": "int32"},
                                         "value": {"type": "string"}}}}]}}}


def test_bad_input_with_errors_tolerance_all_becomes_record_errors(spark, records, registry):
    sid = register(registry, "js_bad-value", BAD_SCHEMA)
    bad = _bad_inputs(sid)
    good = framed(sid, {"id": 1, "tags": {"a": "b"}, "by": [{"key": 2, "value": "z"}]})
    df = enable_error_column(records([(None, good), (None, None)] + [(None, b) for _, b, _ in bad], topic="js_bad"))
    rows = apply_sink_converters(df, cfg(registry, topic="js_bad")).collect()
    assert rows[0].value.asDict() == {"id": 1, "tags": {"a": "b"}, "by": {2: "z"}} and rows[0][ERROR_COL] is None
    assert rows[1].value is None and rows[1][ERROR_COL] is None  # a tombstone
    for row, (name, _, expected) in zip(rows[2:], bad):
        err = row[ERROR_COL]
        assert row.value is None and err is not None, name
        assert err.stage == "VALUE_CONVERTER" and err.class_name == JSON_SCHEMA, name
        assert expected in err.message, (name, err.message)


@pytest.mark.parametrize("index", [0, 3, 5], ids=["wrong magic byte", "invalid JSON", "required field missing"])
def test_bad_input_with_errors_tolerance_none_fails_with_the_record(spark, records, registry, index):
    sid = register(registry, "js_bad-value", BAD_SCHEMA)
    df = records([(None, framed(sid, {"id": 1})), (None, _bad_inputs(sid)[index][1])], topic="js_bad")
    with pytest.raises(PySparkException, match=r"VALUE_CONVERTER .*JsonSchemaConverter failed: .*offset=1"):
        apply_sink_converters(df, cfg(registry, topic="js_bad")).collect()


def test_parse_as_a_column_expression(spark, records, registry):
    sid = register(registry, "js_bad-value", BAD_SCHEMA)
    conv = JsonSchemaConverter(cfg(registry, topic="js_bad"), prefix="value.converter.")
    df = records([(None, framed(sid, {"id": 5, "by": [{"key": 1, "value": "a"}]}))])
    assert df.select(conv.parse("value").alias("v")).first().v.asDict() == {"id": 5, "tags": None, "by": {1: "a"}}
    with pytest.raises(PySparkException, match="Unknown magic byte"):
        records([(None, b"\x07")]).select(conv.parse("value", "id BIGINT")).collect()


def test_the_decode_runs_once_when_the_errors_are_split(spark, records, registry):
    sid = register(registry, "js_bad-value", BAD_SCHEMA)
    df = enable_error_column(records([(None, framed(sid, {"id": 1})), (None, b"\x01")], topic="js_bad"))
    typed = apply_sink_converters(df, cfg(registry, topic="js_bad"))
    good = typed.where(F.col(ERROR_COL).isNull()).where(F.col("value.id") > 0)
    plan = good._jdf.queryExecution().executedPlan().toString().splitlines()
    assert len([line for line in plan if "from_json(" in line]) == 1, "\n".join(plan)
    assert not [line for line in plan if "Filter" in line and "from_json(" in line], "\n".join(plan)
    assert not [line for line in plan if "EvalPython" in line], "\n".join(plan)
    assert [r.value.id for r in good.collect()] == [1]


# -- config ------------------------------------------------------------------------------------------------

BAD_CONFIGS = [
    ({"value.converter.schema.registry.url": None}, "value.converter.schema.registry.url", "Missing required"),
    ({"value.converter.schema.registry.ulr": "http://x"}, "value.converter.schema.registry.ulr",
     'did you mean "value.converter.schema.registry.url"'),
    ({"value.converter.value.subject.name.strategy": "FooStrategy"}, "value.converter.value.subject.name.strategy",
     "TopicNameStrategy"),
    ({"value.converter.basic.auth.credentials.source": "USER_INFO"}, "value.converter.basic.auth.user.info",
     "user:password"),
    ({"value.converter.json.fail.invalid.schema": "true"}, "value.converter.json.fail.invalid.schema",
     "per record"),
    ({"value.converter.generalized.sum.type.support": "true"}, "value.converter.generalized.sum.type.support",
     "no Spark type"),
    ({"value.converter.decimal.format": "TEXT"}, "value.converter.decimal.format", "NUMERIC"),
    ({"value.converter.use.schema.id": "-5"}, "value.converter.use.schema.id", "at least -1"),
]


@pytest.mark.parametrize("extra,key,message", BAD_CONFIGS, ids=[b[1] for b in BAD_CONFIGS])
def test_config_errors(spark, records, registry, extra, key, message):
    c = {k: v for k, v in {**cfg(registry), **extra}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        apply_source_converters(records([(None, 1)], value_type="int"), c)
    assert key in e.value.keys and message in str(e.value)


def test_password_never_shows_and_config_is_not_mutated(spark, records, registry):
    c = {**cfg(registry), "value.converter.basic.auth.credentials.source": "USER_INFO",
         "value.converter.basic.auth.user.info": "bob:hunter2",
         "value.converter.auto.register.schema": "1"}  # a misspelling: fails
    before = dict(c)
    with pytest.raises(ConfigError) as e:
        apply_source_converters(records([(None, 1)], value_type="int"), c)
    assert "hunter2" not in str(e.value) and c == before
    typo = "value.converter.auto.register.schema"
    conv = JsonSchemaConverter({k: v for k, v in c.items() if k != typo}, prefix="value.converter.")
    assert "hunter2" not in repr(conv)


def test_parse_type_needs_a_json_schema_in_the_registry(spark, records, registry):
    df = records([(None, b"\x00")])
    with pytest.raises(ConfigError, match=r"value\.converter\.spark\.schema or value\.converter\.use\.schema\.id"):
        apply_sink_converters(df, {**cfg(registry), "topics": "a,b"})
    with pytest.raises(ConfigError, match="not in the registry"):
        apply_sink_converters(df, cfg(registry, topic="js_never_registered"))
    SchemaRegistryClient(registry.url).register("js_avro-value", '"string"')
    with pytest.raises(ConfigError, match="is a AVRO schema; JsonSchemaConverter reads JSON Schema"):
        apply_sink_converters(df, cfg(registry, topic="js_avro"))


# -- the type mapping ----------------------------------------------------------------------------------------

def test_spark_types_map_to_json_schema_and_back():
    schema = spark_to_json_schema(TYPES, {"connect.name": "com.acme.All"})
    assert schema["title"] == "com.acme.All"
    back, nullable, meta = json_schema_to_spark(schema)
    # A required field comes back with Connect's flag beside Spark's nullability (connect.optional: false).
    assert back["i32"].metadata == {"connect.optional": False}
    assert back == TYPES.fromJson({**TYPES.jsonValue(), "fields": [
        {**f, "metadata": {"connect.optional": False}} if f["name"] == "i32" else f
        for f in TYPES.jsonValue()["fields"]]})
    assert meta == {"connect.name": "com.acme.All", "connect.optional": False} and nullable is False


def test_schemas_written_by_hand_map_to_spark_types():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
        "definitions": {"Money": {"type": "object", "properties": {"units": {"type": "integer"},
                                                                   "currency": {"enum": ["EUR", "USD"]}}}},
        "properties": {"id": {"type": "integer"}, "amount": {"$ref": "#/definitions/Money"},
                       "note": {"type": ["string", "null"]}, "extra": {"anyOf": [{"type": "null"}, {"type": "number"}]},
                       "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                       "anything": {}, "flags": {"type": "array", "items": {"type": "boolean"}}},
        "required": ["id"]}
    t, nullable, meta = json_schema_to_spark(schema)
    assert t.simpleString() == ("struct<id:bigint,amount:struct<units:bigint,currency:string>,note:string,"
                                "extra:double,labels:map<string,string>,anything:string,flags:array<boolean>>")
    assert [f.nullable for f in t.fields] == [False, False, True, True, False, True, False]
    assert meta == {"connect.name": "Payment", "connect.optional": False} and nullable is False
    relaxed, _, _ = json_schema_to_spark(schema, optional_for_nonrequired=True)
    assert [f.nullable for f in relaxed.fields] == [False, True, True, True, True, True, True]


@pytest.mark.parametrize("schema,message", [
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "sum type"),
    ({"type": ["string", "integer"]}, "sum type"),
    ({"type": "array"}, "items"),
    ({"$ref": "#/definitions/Nope"}, "points at nothing"),
    ({"$ref": "other.json"}, "not local"),
    ({"definitions": {"N": {"type": "object", "properties": {"next": {"$ref": "#/definitions/N"}}}},
      "$ref": "#/definitions/N"}, "recursive"),
], ids=["oneOf", "type list", "array without items", "dangling ref", "remote ref", "recursive"])
def test_schemas_without_a_spark_type_are_data_errors(schema, message):
    with pytest.raises(DataError, match=message):
        json_schema_to_spark(schema)


# -- interoperability with confluent-kafka's own serializers ----------------------------------------------------

def test_confluent_kafka_json_serializer_bytes_decode_and_ours_decode_with_confluent(spark, records, registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
                         "properties": {"id": {"type": "integer"}, "who": {"type": ["string", "null"]},
                                        "amount": {"type": "number"},
                                        "tags": {"type": "object", "additionalProperties": {"type": "string"}}},
                         "required": ["id", "amount", "tags"]})
    ck = CKClient({"url": registry.url})
    ctx = SerializationContext("js_payments", MessageField.VALUE)
    ser = JSONSerializer(schema, ck)
    values = [{"id": 1, "who": "ann", "amount": 12.5, "tags": {"a": "b"}},
              {"id": 2, "who": None, "amount": -0.25, "tags": {}}]
    df = records([(None, ser(v, ctx)) for v in values], topic="js_payments")
    c = cfg(registry, topic="js_payments")
    typed = apply_sink_converters(df, c)
    assert [r.value.asDict(recursive=True) for r in typed.collect()] == values
    assert typed.schema["value"].metadata["connect.name"] == "Payment"
    # ... and back: our bytes (with our own registered schema), read by confluent-kafka's deserializer.
    out = apply_source_converters(typed.withColumn("topic", F.lit("js_payments_out")), c)
    ours = [r.value for r in out.collect()]
    de = JSONDeserializer(None, schema_registry_client=ck)
    assert [de(b, SerializationContext("js_payments_out", MessageField.VALUE)) for b in ours] == values
