"""JsonConverter: the envelope both ways, the Connect schema grammar, logical types, bad input."""

from __future__ import annotations

import base64
import copy
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

from spark_connect_bridge.converters import JsonConverter, apply_sink_converters, apply_source_converters
from spark_connect_bridge.converters.connect_schema import TIME, connect_to_spark, spark_to_connect
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.errors import ConfigError

JSON = "org.apache.kafka.connect.json.JsonConverter"
UTC = dt.timezone.utc

ALL_TYPES = StructType([
    StructField("i8", ByteType()), StructField("i16", ShortType()), StructField("i32", IntegerType()),
    StructField("i64", LongType(), False), StructField("f32", FloatType()), StructField("f64", DoubleType()),
    StructField("b", BooleanType()), StructField("s", StringType()), StructField("bytes", BinaryType()),
    StructField("arr", ArrayType(IntegerType())), StructField("m", MapType(StringType(), StringType())),
    StructField("inner", StructType([StructField("x", StringType())]), True, {"connect.name": "my.Inner"}),
    StructField("dec", DecimalType(10, 2)), StructField("day", DateType()),
    StructField("tod", IntegerType(), True, {"connect.name": TIME, "connect.version": 1}),
    StructField("ts", TimestampType()),
    StructField("decs", ArrayType(DecimalType(38, 0))),
])
ROW = (-8, -16, 32, 2**40, 1.5, -2.25, True, "hé", b"\x00\xff", [1, None, 3], {"k": "v"}, ("x",),
       Decimal("10.25"), dt.date(2024, 1, 2), 3_723_004, dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
       [Decimal("-1"), Decimal("99999999999999999999999999999999999999"),
        Decimal("-99999999999999999999999999999999999999"), Decimal("0"), Decimal("128"), Decimal("-129")])
# Spark returns timestamps as naive datetimes in the session time zone (UTC in the tests).
EXPECTED = ROW[:15] + (ROW[15].replace(tzinfo=None),) + ROW[16:]


def _payload(b: bytes):
    return json.loads(b.decode())


def test_envelope_round_trip_with_every_type(spark, records):
    df = records([(None, ROW), (None, None)], value_type=ALL_TYPES)
    cfg = {"value.converter": JSON}
    out = apply_source_converters(df, cfg)
    raw = [r.value for r in out.collect()]
    assert raw[1] is None  # tombstone stays null
    env = _payload(raw[0])
    assert set(env) == {"schema", "payload"}
    p = env["payload"]
    assert p["dec"] == "BAE=" and p["day"] == 19724 and p["ts"] == 1704164645678 and p["tod"] == 3_723_004
    assert p["bytes"] == base64.b64encode(b"\x00\xff").decode() and p["arr"] == [1, None, 3]
    assert p["decs"][0] == "/w==" and p["decs"][4] == "AIA=" and p["decs"][5] == "/38="
    fields = {f["field"]: f for f in env["schema"]["fields"]}
    assert fields["dec"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert fields["dec"]["parameters"]["scale"] == "2"
    assert fields["i64"]["optional"] is False and fields["i8"]["type"] == "int8"
    assert fields["inner"]["name"] == "my.Inner" and fields["tod"]["name"] == TIME
    back = apply_sink_converters(out, cfg, value_schema=ALL_TYPES).collect()
    assert tuple(back[0].value) == EXPECTED and back[1].value is None
    inferred = apply_sink_converters(out, cfg)  # type from the messages' "schema" part
    assert tuple(inferred.first().value) == EXPECTED
    vfield = inferred.schema["value"]
    assert vfield.dataType["tod"].metadata.get("connect.name") == TIME


def test_a_decoded_field_keeps_its_schema_metadata(spark, records):
    # the row of a Debezium envelope holds a Timestamp (decoded after from_json, by withField, which drops the
    # metadata of the field it sets): its struct's name stays, as do a Decimal's extra parameters
    row = {"type": "struct", "optional": True, "name": "srv.public.t.Value", "fields": [
        {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
         "field": "ts"},
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2", "__debezium.source.column.type": "NUMERIC"}, "field": "amount"}]}
    schema = {"type": "struct", "optional": False, "name": "srv.public.t.Envelope", "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {"type": "string", "optional": False, "field": "op"}]}
    msg = {"schema": schema, "payload": {"before": None, "after": {"ts": 1704164645678, "amount": "BAE="}, "op": "c"}}
    df = records([(None, json.dumps(msg).encode())])
    out = apply_sink_converters(df, {"value.converter": JSON})
    env = out.schema["value"].dataType
    assert env["after"].metadata == env["before"].metadata == {"connect.name": "srv.public.t.Value"}
    assert env["after"].dataType["amount"].metadata == {
        "connect.parameters": {"__debezium.source.column.type": "NUMERIC"}}
    [value] = [r.value for r in out.collect()]
    assert value.after.asDict() == {"ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678000), "amount": Decimal("10.25")}
    written = _payload(apply_source_converters(out, {"value.converter": JSON}).first().value)
    after = {f["field"]: f for f in written["schema"]["fields"]}["after"]
    assert after["name"] == "srv.public.t.Value"
    assert after["fields"][1]["parameters"]["__debezium.source.column.type"] == "NUMERIC"


def test_items_keys_and_values_keep_their_optional_flags(spark, records):
    # Kafka's JsonConverter writes an array's items and a map's keys and values as declared (Spark's parse makes
    # them nullable, and a Spark map key is never null): a round trip gives the schema back, a Time item included
    schema = {"type": "struct", "optional": False, "fields": [
        {"type": "array", "optional": True, "field": "req", "items": {"type": "int32", "optional": False}},
        {"type": "array", "optional": False, "field": "times", "items": {
            "type": "int32", "optional": True, "name": TIME, "version": 1}},
        {"type": "map", "optional": True, "field": "m", "keys": {"type": "string", "optional": True},
         "values": {"type": "array", "optional": False, "items": {"type": "string", "optional": False}}}]}
    msg = {"schema": schema, "payload": {"req": [1], "times": [5, None], "m": {"a": ["x"]}}}
    df = records([(None, json.dumps(msg).encode())])
    cfg = {"value.converter": JSON}
    written = _payload(apply_source_converters(apply_sink_converters(df, cfg), cfg).first().value)
    assert written == msg


def test_parses_what_kafka_writes(spark, records):
    msg = {"schema": {"type": "struct", "optional": False, "name": "Order", "fields": [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2"}, "field": "amount"},
        {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
         "field": "at"},
        {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1,
         "field": "day"}]},
        "payload": {"id": 7, "amount": "BAE=", "at": 1704164645678, "day": 19724}}
    numeric = copy.deepcopy(msg)
    numeric["payload"]["amount"] = 10.25
    df = records([(None, json.dumps(m).encode()) for m in (msg, numeric)])
    out = apply_sink_converters(df, {"value.converter": JSON})
    assert out.schema["value"].metadata.get("connect.name") == "Order"
    assert out.schema["value"].dataType["amount"].dataType == DecimalType(38, 2)
    rows = [r.value for r in out.collect()]
    for r in rows:
        assert (r.id, r.amount, r.day) == (7, Decimal("10.25"), dt.date(2024, 1, 2))
        assert r.at == dt.datetime(2024, 1, 2, 3, 4, 5, 678000)


def test_schemas_disabled_round_trip_and_numeric_decimals(spark, records):
    t = StructType([StructField("id", LongType()), StructField("d", DecimalType(5, 1))])
    df = records([(None, (1, Decimal("-2.5")))], value_type=t)
    cfg = {"value.converter": JSON, "value.converter.schemas.enable": "false",
           "value.converter.decimal.format": "NUMERIC", "value.converter.spark.schema": "id BIGINT, d DECIMAL(5,1)"}
    out = apply_source_converters(df, cfg)
    assert out.first().value == b'{"id":1,"d":-2.5}'
    assert tuple(apply_sink_converters(out, cfg).first().value) == (1, Decimal("-2.5"))


def test_primitive_values_with_and_without_envelope(spark, records):
    df = records([("k1", 5), (None, None)], value_type="bigint", key_type="string")
    cfg = {"key.converter": JSON, "key.converter.schemas.enable": "false", "value.converter": JSON}
    out = apply_source_converters(df, cfg).collect()
    assert out[0].key == b'"k1"'
    assert _payload(out[0].value) == {"schema": {"type": "int64", "optional": True}, "payload": 5}
    back = apply_sink_converters(apply_source_converters(df, cfg), {**cfg, "key.converter.spark.schema": "string"})
    assert [(r.key, r.value) for r in back.collect()] == [("k1", 5), (None, None)]


def test_schemaless_map_writes_a_null_schema(spark, records):
    df = records([(None, {"a": 1})], value_type="map<string,bigint>")
    env = _payload(apply_source_converters(df, {"value.converter": JSON}).first().value)
    assert env == {"schema": None, "payload": {"a": 1}}


BAD = [
    ("not json", b"{nope", "invalid JSON"),
    ("plain JSON without envelope", b'{"id":1}', "set schemas.enable=false"),
    ("missing payload", b'{"schema":null}', "requires \"schema\" and \"payload\""),
    ("payload does not fit", b'{"schema":null,"payload":{"id":"abc"}}', "does not fit"),
    ("invalid decimal", b'{"schema":null,"payload":{"id":1,"d":"!!!"}}', "invalid Decimal"),
]


@pytest.mark.parametrize("name,payload,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_value_converter_error_in_tolerant_mode(spark, records, name, payload, expected):
    df = enable_error_column(records([(None, payload)]))
    row = apply_sink_converters(df, {"value.converter": JSON}, value_schema="id BIGINT, d DECIMAL(5,1)").first()
    assert row.value is None
    err = row[ERROR_COL]
    assert err.stage == "VALUE_CONVERTER" and err.class_name == JSON and expected in err.message
    assert "offset=0" in err.message


def test_bad_input_fails_strict_mode_with_the_records_coordinates(spark, records):
    df = records([(None, b'{"schema":null,"payload":1}'), (None, b"garbage")])
    with pytest.raises(PySparkException, match=r"VALUE_CONVERTER .*JsonConverter.*topic=t, partition=0, offset=1"):
        apply_sink_converters(df, {"value.converter": JSON}, value_schema="bigint").collect()


@pytest.mark.parametrize("tolerant", [False, True], ids=["strict", "tolerant"])
def test_one_parse_per_message_even_under_a_later_filter(spark, records, tolerant):
    """from_json, the checks and the message share one projection (subexpression elimination parses once),
    and a filter on the decoded value stays above it instead of being pushed down with a second from_json."""
    df = records([(None, b'{"schema":null,"payload":{"id":5,"at":7}}'), (None, b'{"schema":null,"payload":{"id":1}}')])
    df = enable_error_column(df) if tolerant else df
    cfg = {"value.converter": JSON, "value.converter.spark.schema": "id BIGINT, at TIMESTAMP"}
    out = apply_sink_converters(df, cfg).filter(F.col("value.id") > 3)
    plan = out._jdf.queryExecution().executedPlan().toString().splitlines()
    parsing = [line for line in plan if "from_json(" in line]
    assert len(parsing) == 1, "\n".join(plan)
    # ... and one from_json expression there (not one pruned per extracted field), shared by its references
    assert len({call.split(", false)")[0] for call in parsing[0].split("from_json(")[1:]}) == 1, parsing[0]
    assert not [line for line in plan if "Filter" in line and "from_json(" in line], "\n".join(plan)
    assert [r.value.id for r in out.collect()] == [5]


def test_inference_needs_a_batch_dataframe_or_a_schema(spark):
    stream = spark.readStream.format("rate").load().select(F.lit(b"{}").alias("value"), F.lit("t").alias("topic"))
    with pytest.raises(ConfigError, match="streaming DataFrame"):
        apply_sink_converters(stream, {"value.converter": JSON})


BAD_CONFIGS = [
    ({"value.converter.schemas.enabel": "false"}, "value.converter.schemas.enabel",
     'did you mean "value.converter.schemas.enable"'),
    ({"value.converter.schemas.enable": "maybe"}, "value.converter.schemas.enable", "true or false"),
    ({"value.converter.decimal.format": "HEX"}, "value.converter.decimal.format", "BASE64, NUMERIC"),
    ({"value.converter.schemas.sample.size": "0"}, "value.converter.schemas.sample.size", "at least 1"),
    ({"value.converter.spark.schema": "id BIGINTT"}, "value.converter.spark.schema", "not a Spark DDL"),
]


@pytest.mark.parametrize("extra,key,message", BAD_CONFIGS, ids=[b[1] for b in BAD_CONFIGS])
def test_config_errors_name_the_full_key(spark, records, extra, key, message):
    cfg = {"value.converter": JSON, **extra}
    with pytest.raises(ConfigError) as e:
        apply_sink_converters(records([(None, b"1")]), cfg)
    assert key in e.value.keys and message in str(e.value)


def test_every_problem_is_reported_at_once_and_config_is_not_mutated(spark, records):
    cfg = {"key.converter": "NoSuchConverter", "value.converter": JSON, "value.converter.schemas.enabel": "x",
           "header.converter": JSON, "header.converter.decimal.format": "HEX"}
    before = copy.deepcopy(cfg)
    with pytest.raises(ConfigError) as e:
        apply_source_converters(records([(None, b"1")]), cfg)
    assert set(e.value.keys) == {"key.converter", "value.converter.schemas.enabel",
                                 "header.converter.decimal.format"}
    assert cfg == before


def test_connect_schema_grammar_round_trips():
    schema = spark_to_connect(ALL_TYPES, False, {"connect.name": "r.All", "connect.version": 3,
                                                 "connect.doc": "d", "connect.parameters": {"p": "1"}})
    dt_, nullable, meta = connect_to_spark(json.loads(json.dumps(schema)))
    # a required schema's flag is kept as connect.optional=false (Spark's parse makes every field nullable)
    assert dt_["i64"] == StructField("i64", LongType(), False, {"connect.optional": False})
    assert StructType([f if f.name != "i64" else ALL_TYPES["i64"] for f in dt_.fields]) == ALL_TYPES
    assert nullable is False
    assert meta == {"connect.name": "r.All", "connect.version": 3, "connect.doc": "d", "connect.parameters": {"p": "1"},
                    "connect.optional": False}
    assert spark_to_connect(dt_, nullable, meta) == schema
    assert connect_to_spark({"type": "float"})[0] == FloatType()
    with pytest.raises(Exception, match="Unknown schema type"):
        connect_to_spark({"type": "int128"})


def test_a_decimals_other_parameters_are_kept_beside_scale_and_precision():
    """Debezium's propagated __debezium.source.column.* parameters on a Decimal (column.propagate.source.type):
    written beside scale and connect.decimal.precision, as Debezium's JsonConverter output has them, and read back."""
    propagated = {"__debezium.source.column.type": "NUMERIC", "__debezium.source.column.length": "10",
                  "__debezium.source.column.scale": "2"}
    meta = {"connect.parameters": {"scale": "2", "connect.decimal.precision": "10", **propagated}}
    schema = spark_to_connect(DecimalType(10, 2), True, meta)
    assert schema["parameters"] == {"scale": "2", "connect.decimal.precision": "10", **propagated}
    assert list(schema["parameters"])[:2] == ["scale", "connect.decimal.precision"]
    assert connect_to_spark(schema) == (DecimalType(10, 2), True, {"connect.parameters": propagated})
    assert connect_to_spark(spark_to_connect(DecimalType(10, 2), True)) == (DecimalType(10, 2), True, {})


def test_column_level_api_on_any_dataframe(spark):
    conv = JsonConverter({"schemas.enable": "false"})
    df = spark.createDataFrame([('{"a": 1}',)], "j string")
    out = df.select(conv.parse(F.encode("j", "UTF-8"), "a INT").alias("v"))
    assert out.first().v.a == 1
    back = out.select(conv.serialize("v", out.schema["v"].dataType).alias("b")).first().b
    assert back == b'{"a":1}'


# Kafka's JsonDeserializer (a default Jackson ObjectMapper + ALLOW_LEADING_ZEROS_FOR_NUMBERS, readTree) rejects
# these: each must be a record error (the dead-letter queue with errors.tolerance=all), never a row of nulls.
KAFKA_REJECTS = [
    ("single quotes", b"{'id': 1, 'd': 2.5}"),
    ("NaN", b'{"id": 1, "d": NaN}'),
    ("Infinity", b'{"id": 1, "d": -Infinity}'),
    ("NaN string for a double", b'{"id": 1, "d": "NaN"}'),
    ("comment", b'{"id": 1 /* c */}'),
    ("unquoted field name", b'{id: 1}'),
    ("trailing comma", b'{"id": 1,}'),
    ("number glued to text", b"7x"),
]


@pytest.mark.parametrize("schemas_enable", ["false", "true"])
@pytest.mark.parametrize("name,text", KAFKA_REJECTS, ids=[k[0] for k in KAFKA_REJECTS])
def test_what_kafkas_jackson_rejects_is_a_record_error(spark, records, name, text, schemas_enable):
    if schemas_enable == "true":
        text = b'{"schema": null, "payload": ' + text + b"}"
    df = enable_error_column(records([(None, text)]))
    cfg = {"value.converter": JSON, "value.converter.schemas.enable": schemas_enable}
    row = apply_sink_converters(df, cfg, value_schema="id BIGINT, d DOUBLE").first()
    assert row.value is None and row[ERROR_COL] is not None
    assert row[ERROR_COL].stage == "VALUE_CONVERTER" and "offset=0" in row[ERROR_COL].message


# ... and accepts these, with these values.
KAFKA_ACCEPTS = [
    ("leading zeros", b'{"id": 007, "d": -00.5}', (7, -0.5)),
    ("text after the value", b'{"id": 1, "d": 2.5} trailing text', (1, 2.5)),
    ("a second value after the value", b'{"id": 1, "d": 2.5}{"id": 2}', (1, 2.5)),
    ("closing brace after the value", b'{"id": 1, "d": 2.5}}', (1, 2.5)),
    ("whitespace around the value", b' \n{"id": 1, "d": 2.5}\r\n ', (1, 2.5)),
]


@pytest.mark.parametrize("schemas_enable", ["false", "true"])
@pytest.mark.parametrize("name,text,expected", KAFKA_ACCEPTS, ids=[k[0] for k in KAFKA_ACCEPTS])
def test_what_kafkas_jackson_accepts_is_parsed(spark, records, name, text, expected, schemas_enable):
    if schemas_enable == "true":
        envelope_schema = (b'{"type":"struct","optional":false,"fields":[{"type":"int64","optional":false,'
                           b'"field":"id"},{"type":"double","optional":true,"field":"d"}]}')
        body = text.strip()
        value_end = body.index(b"}") + 1  # the value's own text, then what followed it
        text = b'{"schema": ' + envelope_schema + b', "payload": ' + body[:value_end] + b"}" + body[value_end:]
    df = enable_error_column(records([(None, text)]))
    cfg = {"value.converter": JSON, "value.converter.schemas.enable": schemas_enable}
    row = apply_sink_converters(df, cfg, value_schema="id BIGINT, d DOUBLE").first()
    assert row[ERROR_COL] is None and tuple(row.value) == expected


def test_a_primitive_value_followed_by_text_is_read_as_kafka_does(spark, records):
    df = enable_error_column(records([(None, b"42 and more"), (None, b"042"), (None, b'"s" x')]))
    cfg = {"value.converter": JSON, "value.converter.schemas.enable": "false"}
    rows = apply_sink_converters(df, cfg, value_schema="bigint").collect()
    assert [r.value for r in rows[:2]] == [42, 42] and rows[2][ERROR_COL] is not None


def test_schemaless_struct_reads_json_null_as_a_null_value_and_other_json_types_as_record_errors(spark, records):
    df = enable_error_column(records([(None, b"null"), (None, b" null\n"), (None, b"[1]"), (None, b'"s"'),
                                      (None, b"12"), (None, b'{"id": 3}')]))
    cfg = {"value.converter": JSON, "value.converter.schemas.enable": "false"}
    rows = apply_sink_converters(df, cfg, value_schema="id BIGINT").collect()
    assert [(r.value, r[ERROR_COL] is None) for r in rows[:2]] == [(None, True), (None, True)]
    assert all(r.value is None and "invalid JSON" in r[ERROR_COL].message for r in rows[2:5])
    assert tuple(rows[5].value) == (3,) and rows[5][ERROR_COL] is None
