"""AvroConverter against the embedded registry with the engine Kafka Connect configs get (``avro.engine=auto``:
Spark's from_avro/to_avro, spark-avro being loaded in the test session): wire format, type mapping,
strategies, config errors, and interoperability with confluent-kafka's own serializers. What both engines must
do alike (types, evolution, bad input) is in test_avro_engines.py; the fastavro batch decoder's fuzz test is here."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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

from spark_connect_bridge.converters import AvroConverter, apply_sink_converters, apply_source_converters
from spark_connect_bridge.converters.avro import decode_batch, native_avro_available
from spark_connect_bridge.converters.avro_data import avro_to_spark, spark_to_avro
from spark_connect_bridge.converters.connect_schema import TIME
from spark_connect_bridge.converters.schema_registry import SchemaRegistryClient
from spark_connect_bridge.errors import ConfigError

AVRO = "io.confluent.connect.avro.AvroConverter"
UTC = dt.timezone.utc

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


def cfg(registry, topic="t", **extra):
    return {"topics": topic, "value.converter": AVRO, "value.converter.schema.registry.url": registry.url,
            **{f"value.converter.{k}": v for k, v in extra.items()}}


def test_round_trip_every_type_through_the_registry(spark, records, registry):
    df = records([(None, ROW), (None, None)], value_type=TYPES, topic="rt")
    c = cfg(registry, topic="rt")
    out = apply_source_converters(df, c)
    raw = [r.value for r in out.collect()]
    assert raw[1] is None
    assert raw[0][0] == 0
    sid = int.from_bytes(raw[0][1:5], "big")
    client = SchemaRegistryClient(registry.url)
    assert client.get_latest("rt-value").id == sid
    schema = json.loads(client.get_schema(sid))
    fields = {f["name"]: f for f in schema["fields"]}
    assert schema["name"] == "ConnectDefault" and schema["namespace"] == "io.confluent.connect.avro"
    assert fields["i8"]["type"][1] == {"type": "int", "connect.type": "int8"}
    assert fields["i32"]["type"] == "int" and fields["i64"]["type"] == ["null", "long"]
    assert fields["dec"]["type"][1]["logicalType"] == "decimal" and fields["dec"]["type"][1]["scale"] == 3
    assert fields["ts"]["type"][1]["logicalType"] == "timestamp-millis"
    assert fields["im"]["type"][1]["items"]["name"] == "MapEntry"
    assert fields["inner"]["type"][1]["name"] == "Inner" and fields["inner"]["type"][1]["namespace"] == "com.acme"
    rec = fastavro.schemaless_reader(io.BytesIO(raw[0][5:]), fastavro.parse_schema(schema))
    assert rec["dec"] == Decimal("-12345.678") and rec["ts"] == dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    back = apply_sink_converters(out, c)  # type from the subject's latest version
    rows = [r.value for r in back.collect()]
    assert tuple(rows[0]) == ROW and rows[1] is None
    assert back.schema["value"].dataType["tod"].metadata["connect.name"] == TIME
    assert back.schema["value"].dataType["i8"].dataType == ByteType()
    explicit = apply_sink_converters(out, c, value_schema=TYPES)
    assert tuple(explicit.first().value) == ROW


def test_primitive_key_and_record_name_strategies(spark, records, registry):
    t = StructType([StructField("id", LongType())])
    df = records([(5, (1,))], value_type=t, key_type="bigint", topic="orders")
    df = df.withMetadata("value", {"connect.name": "com.acme.Order"})
    c = {"key.converter": AVRO, "key.converter.schema.registry.url": registry.url,
         **cfg(registry, topic="orders",
               **{"value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"})}
    out = apply_source_converters(df, c).first()
    client = SchemaRegistryClient(registry.url)
    assert json.loads(client.get_latest("orders-key").schema) == "long"
    assert client.get_latest("orders-com.acme.Order").id == int.from_bytes(out.value[1:5], "big")
    rn = apply_source_converters(df, {**c, "value.converter.value.subject.name.strategy": "RecordNameStrategy"})
    rn.collect()
    assert "com.acme.Order" in client.get_subjects()
    typed = apply_sink_converters(apply_source_converters(df, c), {**c, "value.converter.spark.schema": "id BIGINT"})
    assert [(r.key, tuple(r.value)) for r in typed.collect()] == [(5, (1,))]


def test_schema_evolution_reads_old_records_with_the_latest_schema(spark, records, registry):
    client = SchemaRegistryClient(registry.url)
    v1 = {"type": "record", "name": "E", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "E", "fields": [{"name": "a", "type": "long"},
                                                      {"name": "b", "type": "string", "default": "dflt"}]}
    id1 = client.register("evo-value", json.dumps(v1))
    id2 = client.register("evo-value", json.dumps(v2))
    buf1, buf2 = io.BytesIO(), io.BytesIO()
    fastavro.schemaless_writer(buf1, fastavro.parse_schema(v1), {"a": 1})
    fastavro.schemaless_writer(buf2, fastavro.parse_schema(v2), {"a": 2, "b": "x"})
    msgs = [b"\x00" + id1.to_bytes(4, "big") + buf1.getvalue(), b"\x00" + id2.to_bytes(4, "big") + buf2.getvalue()]
    out = apply_sink_converters(records([(None, m) for m in msgs]), cfg(registry, topic="evo"))
    assert [tuple(r.value) for r in out.collect()] == [(1, "dflt"), (2, "x")]


def test_use_latest_version_and_use_schema_id(spark, records, registry):
    client = SchemaRegistryClient(registry.url)
    sid = client.register("fixed-value", json.dumps({"type": "record", "name": "F", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}))
    df = records([(None, (3, None))], value_type="id BIGINT, note STRING", topic="fixed")
    for extra in ({"use.latest.version": "true", "auto.register.schemas": "false"}, {"use.schema.id": str(sid)}):
        out = apply_source_converters(df, cfg(registry, topic="fixed", **extra)).first().value
        assert int.from_bytes(out[1:5], "big") == sid
    parsed = apply_sink_converters(records([(None, out)]), cfg(registry, topic="x", **{"use.schema.id": sid}))
    assert tuple(parsed.first().value) == (3, None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=40)), max_size=20))
def test_random_bytes_never_crash_the_decoder(registry_url_and_schema, payloads):
    url, text, dt_json, sid = registry_url_and_schema
    # Half of them behind the fuzz schema's header: random payloads that reach fastavro itself.
    blobs = [b"\x00" + sid.to_bytes(4, "big") + p if framed else p for framed, p in payloads]
    out = decode_batch(pa.array(blobs, pa.binary()), ((url,), None, 1000), text, dt_json)
    values, errors = out.field("value").to_pylist(), out.field("error").to_pylist()
    for b, v, e in zip(blobs, values, errors):
        assert (v is None) or (e is None)
        assert (b is None) or (v is not None) or (e is not None)


@pytest.fixture(scope="module")
def registry_url_and_schema(registry):
    schema = {"type": "record", "name": "Fz", "fields": [
        {"name": "s", "type": "string"}, {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}
    client = SchemaRegistryClient(registry.url)
    sid = client.register("fuzz-value", json.dumps(schema))
    # Its own id: the session's registry is shared, and an id another test registered first may be a JSON Schema.
    text = client.get_schema(sid)
    return registry.url, text, avro_to_spark(json.loads(text))[0].json(), sid


BAD_CONFIGS = [
    ({"value.converter.schema.registry.url": None}, "value.converter.schema.registry.url", "Missing required"),
    ({"value.converter.schema.registry.ulr": "http://x"}, "value.converter.schema.registry.ulr",
     'did you mean "value.converter.schema.registry.url"'),
    ({"value.converter.value.subject.name.strategy": "FooStrategy"}, "value.converter.value.subject.name.strategy",
     "TopicNameStrategy"),
    ({"value.converter.basic.auth.credentials.source": "USER_INFO"}, "value.converter.basic.auth.user.info",
     "user:password"),
    ({"value.converter.avro.engine": "jvm"}, "value.converter.avro.engine", "fastavro"),
    ({"value.converter.use.schema.id": "-5"}, "value.converter.use.schema.id", "at least -1"),
]


@pytest.mark.parametrize("extra,key,message", BAD_CONFIGS, ids=[b[1] for b in BAD_CONFIGS])
def test_config_errors(spark, records, registry, extra, key, message):
    c = {**cfg(registry), **extra}
    c = {k: v for k, v in c.items() if v is not None}
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
    conv = AvroConverter({k: v for k, v in c.items() if k != typo}, prefix="value.converter.")
    assert "hunter2" not in repr(conv)


def test_parse_type_needs_a_schema_source(spark, records, registry):
    df = records([(None, b"\x00")])
    with pytest.raises(ConfigError, match=r"value\.converter\.spark\.schema or value\.converter\.use\.schema\.id"):
        apply_sink_converters(df, {**cfg(registry), "topics": "a,b"})
    with pytest.raises(ConfigError, match="not in the registry"):
        apply_sink_converters(df, cfg(registry, topic="never-registered"))


def test_native_engine_is_detected_with_spark_avro_loaded(spark):
    assert native_avro_available(spark) is True


def test_type_mapping_round_trips():
    schema = spark_to_avro(TYPES, {"connect.name": "com.acme.All"})
    back, nullable, meta = avro_to_spark(schema)
    assert back == TYPES and meta["connect.name"] == "com.acme.All" and nullable is False
    fastavro.parse_schema(schema)


# -- interoperability with confluent-kafka's own serializers --------------------------------------------

def test_confluent_kafka_serializer_bytes_decode_and_ours_decode_with_confluent(spark, records, registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = json.dumps({"type": "record", "name": "Payment", "namespace": "io.example", "fields": [
        {"name": "id", "type": "long"}, {"name": "who", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "map", "values": "string"}}]})
    ck = CKClient({"url": registry.url})
    ser = AvroSerializer(ck, schema)
    ctx = SerializationContext("payments", MessageField.VALUE)
    values = [{"id": 1, "who": "ann", "amount": Decimal("12.34"), "at": dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC),
               "day": dt.date(2024, 2, 29), "tags": {"a": "b"}},
              {"id": 2, "who": None, "amount": Decimal("-0.01"), "at": dt.datetime(1970, 1, 1, tzinfo=UTC),
               "day": dt.date(1970, 1, 1), "tags": {}}]
    msgs = [ser(v, ctx) for v in values]
    df = records([(None, m) for m in msgs], topic="payments")
    c = cfg(registry, topic="payments")
    typed = apply_sink_converters(df, c)
    got = [r.value.asDict(recursive=True) for r in typed.collect()]
    for g, v in zip(got, values):
        assert g == {**v, "at": v["at"].replace(tzinfo=None)}
    assert typed.schema["value"].metadata["connect.name"] == "io.example.Payment"
    # ... and back: our bytes, read by confluent-kafka's deserializer.
    ours = [r.value for r in apply_source_converters(typed, c).collect()]
    de = AvroDeserializer(ck)
    decoded = [de(b, ctx) for b in ours]
    assert decoded == values
