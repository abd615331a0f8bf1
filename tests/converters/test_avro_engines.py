"""The AvroConverter's two engines, one suite: Spark's from_avro/to_avro (``avro.engine=native``, spark-avro is
loaded in the test session) and fastavro (``avro.engine=fastavro``) decode the same Confluent-framed records
to the same rows, and encode the same rows to the same bytes.

The bytes the engines read are written here with fastavro's own ``schemaless_writer`` against the embedded
Schema Registry, as a producer would; the bytes the engines write are compared with that same reference.
Where the engines differ on purpose, the test says so and the README's Avro section explains why.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import uuid
from decimal import Decimal

import fastavro
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
    TimestampNTZType,
    TimestampType,
)

from spark_connect_bridge.converters import apply_sink_converters, apply_source_converters
from spark_connect_bridge.converters.avro_native import nullable_type, plain_logical_types
from spark_connect_bridge.converters.connect_schema import TIME
from spark_connect_bridge.converters.schema_registry import SchemaRegistryClient
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.errors import ConfigError

AVRO = "io.confluent.connect.avro.AvroConverter"
UTC = dt.timezone.utc
ENGINES = ["native", "fastavro"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def avro_cfg(registry, engine, topic, *, key=False, **extra):
    """A connector config with the AvroConverter on the value (and the key), as Confluent's docs write it."""
    out = {"topics": topic}
    for side in (("key", "value") if key else ("value",)):
        out.update({f"{side}.converter": AVRO, f"{side}.converter.schema.registry.url": registry.url,
                    f"{side}.converter.avro.engine": engine,
                    **{f"{side}.converter.{k}": v for k, v in extra.items()}})
    return out


def register(registry, subject, schema) -> int:
    return SchemaRegistryClient(registry.url).register(subject, json.dumps(schema))


def framed(sid: int, schema, datum) -> bytes:
    """What Confluent's KafkaAvroSerializer writes: magic byte 0, the schema id, the Avro binary datum."""
    buf = io.BytesIO()
    buf.write(b"\x00" + sid.to_bytes(4, "big"))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(plain_logical_types(schema)), datum)
    return buf.getvalue()


def values(df):
    return [r.value.asDict(recursive=True) if r.value is not None else None for r in df.collect()]


def field_meta(t, name):
    return t[name].metadata


# -- every Connect type, both directions, key and value ------------------------------------------------------

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
ROWS = [
    (-128, 32767, 7, -(2**62), 1.5, 2.25, True, "hé", b"\x00\x01", ["a", None], {"k": 1}, {1: "one"}, (0.5,),
     Decimal("-12345.678"), dt.date(1969, 12, 31), 86_399_999, dt.datetime(2024, 5, 6, 7, 8, 9, 123000)),
    (None, None, -1, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (1, -1, 0, 0, -0.0, 1e300, False, "", b"", [], {}, {}, (None,), Decimal("0.001"), dt.date(2000, 2, 29), 0,
     dt.datetime(1960, 1, 1, 0, 0, 0, 1000)),
]


def _reference_datum(row):
    """A TYPES row as fastavro writes it for the generated schema (non-string map keys as MapEntry arrays)."""
    d = dict(zip(TYPES.names, row))
    d["im"] = None if d["im"] is None else [{"key": k, "value": v} for k, v in d["im"].items()]
    d["inner"] = None if d["inner"] is None else {"x": d["inner"][0]}
    d["ts"] = None if d["ts"] is None else d["ts"].replace(tzinfo=UTC)
    return d


def test_every_connect_type_encodes_to_the_same_bytes_and_decodes_back(spark, records, registry, engine):
    df = records([(k, row) for k, row in zip([5, None, -7], ROWS)], value_type=TYPES, key_type="bigint",
                 topic="eng_alltypes")
    c = avro_cfg(registry, engine, "eng_alltypes", key=True)
    raw = apply_source_converters(df, c).localCheckpoint()
    got = raw.collect()
    client = SchemaRegistryClient(registry.url)
    value_schema = json.loads(client.get_latest("eng_alltypes-value").schema)
    key_sid = client.get_latest("eng_alltypes-key").id
    vsid = client.get_latest("eng_alltypes-value").id
    assert json.loads(client.get_schema(key_sid)) == "long"
    for r, k, row in zip(got, [5, None, -7], ROWS):
        assert r.key == (None if k is None else framed(key_sid, "long", k))
        assert r.value == framed(vsid, value_schema, _reference_datum(row))
    back = apply_sink_converters(raw, c)  # both types from the subjects' latest versions
    assert [(r.key, tuple(r.value)) for r in back.collect()] == list(zip([5, None, -7], ROWS))
    value_type = back.schema["value"].dataType
    assert nullable_type(value_type) == nullable_type(TYPES)  # same types and field metadata
    assert field_meta(value_type, "tod")["connect.name"] == TIME
    assert field_meta(value_type, "inner")["connect.name"] == "com.acme.Inner"
    explicit = apply_sink_converters(raw, c, value_schema=TYPES)
    assert [tuple(r.value) for r in explicit.collect()] == ROWS


# -- logical types written by other producers (Debezium, plain Avro) -------------------------------------------

LOGICAL = {"type": "record", "name": "Logical", "namespace": "io.example", "fields": [
    {"name": "ts_micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ts_millis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "local_micros", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "local_millis", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_millis", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "t_micros", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "fixed_amount", "type": {"type": "fixed", "name": "Amount8", "size": 8, "logicalType": "decimal",
                                      "precision": 18, "scale": 4}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
    # Debezium's time.precision.mode=adaptive_time_microseconds / connect types, as its AvroConverter writes them
    {"name": "dbz_micro_ts", "type": {"type": "long", "connect.version": 1, "connect.name":
                                      "io.debezium.time.MicroTimestamp"}},
    {"name": "dbz_date", "type": {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}},
    {"name": "dbz_zoned", "type": {"type": "string", "connect.version": 1, "connect.name":
                                   "io.debezium.time.ZonedTimestamp"}},
    {"name": "dbz_vsd", "type": {"type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data",
                                 "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
                                 "connect.version": 1, "connect.name": "io.debezium.data.VariableScaleDecimal"}},
    {"name": "connect_ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis", "connect.version": 1,
                                             "connect.name": "org.apache.kafka.connect.data.Timestamp"}],
     "default": None},
]}
LOGICAL_DATUM = {
    "ts_micros": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    "ts_millis": dt.datetime(1969, 7, 20, 20, 17, 40, 123000, tzinfo=UTC),
    "local_micros": 1_700_000_000_123_456, "local_millis": 1_700_000_000_123,
    "day": dt.date(1900, 1, 1), "t_millis": 45_296_789, "t_micros": 45_296_789_012,
    "amount": Decimal("-1234.56"), "fixed_amount": Decimal("98765.4321"),
    "id": "0b5e0c4e-0b5e-4c4e-8b5e-0c4e0b5e0c4e", "status": "PAID", "digest": b"\x01\x02\x03\x04",
    "dbz_micro_ts": 1_700_000_000_000_001, "dbz_date": 19_700, "dbz_zoned": "2024-01-02T03:04:05.678Z",
    "dbz_vsd": {"scale": 3, "value": b"\x30\x39"}, "connect_ts": None,
}
LOGICAL_ROW = {
    **LOGICAL_DATUM,
    "ts_micros": dt.datetime(2024, 1, 2, 3, 4, 5, 678901), "ts_millis": dt.datetime(1969, 7, 20, 20, 17, 40, 123000),
    "local_micros": dt.datetime(2023, 11, 14, 22, 13, 20, 123456),
    "local_millis": dt.datetime(2023, 11, 14, 22, 13, 20, 123000),
    "id": uuid.UUID("0b5e0c4e-0b5e-4c4e-8b5e-0c4e0b5e0c4e").__str__(),
}
LOGICAL_TYPES = {"ts_micros": TimestampType(), "ts_millis": TimestampType(), "local_micros": TimestampNTZType(),
                 "local_millis": TimestampNTZType(), "day": DateType(), "t_millis": IntegerType(),
                 "t_micros": LongType(), "amount": DecimalType(10, 2), "fixed_amount": DecimalType(18, 4),
                 "id": StringType(), "status": StringType(), "digest": BinaryType(), "dbz_micro_ts": LongType(),
                 "dbz_date": IntegerType(), "dbz_zoned": StringType(),
                 "dbz_vsd": StructType([StructField("scale", IntegerType()), StructField("value", BinaryType())]),
                 "connect_ts": TimestampType()}


def test_logical_types_from_other_producers_decode_alike(spark, records, registry, engine):
    sid = register(registry, "eng_logical-value", LOGICAL)
    second = {**LOGICAL_DATUM, "connect_ts": dt.datetime(2024, 2, 29, 12, 0, tzinfo=UTC), "status": "NEW"}
    df = records([(None, framed(sid, LOGICAL, LOGICAL_DATUM)), (None, framed(sid, LOGICAL, second))],
                 topic="eng_logical")
    typed = apply_sink_converters(df, avro_cfg(registry, engine, "eng_logical"))
    value_type = typed.schema["value"].dataType
    assert {f.name: nullable_type(f.dataType) for f in value_type.fields} == LOGICAL_TYPES
    assert field_meta(value_type, "dbz_micro_ts")["connect.name"] == "io.debezium.time.MicroTimestamp"
    assert value_type["t_millis"].metadata["connect.name"] == TIME
    assert values(typed) == [LOGICAL_ROW, {**LOGICAL_ROW, "connect_ts": dt.datetime(2024, 2, 29, 12, 0),
                                           "status": "NEW"}]


# -- nested records, arrays, maps, optional and null unions, enums ---------------------------------------------

NESTED = {"type": "record", "name": "Order", "namespace": "io.example", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": ["null", {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}}]}],
     "default": None},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
        {"name": "tags", "type": {"type": "array", "items": ["null", "string"]}}]}}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "string"]}},
    {"name": "by_store", "type": {"type": "map", "values": "Address"}},
    {"name": "note", "type": ["string", "null"]},
    {"name": "state", "type": ["null", {"type": "enum", "name": "State", "symbols": ["OPEN", "CLOSED"]}],
     "default": None},
    {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "double"}}},
]}
NESTED_DATA = [
    {"id": 1, "customer": {"name": "Ann", "address": {"city": "Oslo", "zip": "0150"}},
     "lines": [{"sku": "a", "qty": 2, "tags": ["x", None]}, {"sku": "b", "qty": 1, "tags": []}],
     "attrs": {"k": "v", "n": None}, "by_store": {"s1": {"city": "Bergen", "zip": None}}, "note": "rush",
     "state": "OPEN", "matrix": [[1.0, 2.0], []]},
    {"id": 2, "customer": None, "lines": [], "attrs": {}, "by_store": {}, "note": None, "state": None,
     "matrix": []},
]


def test_nested_records_arrays_maps_and_unions_round_trip_byte_for_byte(spark, records, registry, engine):
    sid = register(registry, "eng_nested-value", NESTED)
    msgs = [framed(sid, NESTED, d) for d in NESTED_DATA]
    c = avro_cfg(registry, engine, "eng_nested")
    typed = apply_sink_converters(records([(None, m) for m in msgs], topic="eng_nested"), c)
    assert values(typed) == NESTED_DATA
    assert typed.schema["value"].metadata["connect.name"] == "io.example.Order"
    again = [r.value for r in apply_source_converters(typed, {**c, "value.converter.use.schema.id": str(sid)})
             .collect()]
    if engine == "fastavro":
        assert again == msgs
    else:  # spark-avro reads an Avro map into a Java HashMap: same entries, in hash order (README, Avro section)
        assert again[1] == msgs[1] and again[0] != msgs[0]
        assert fastavro.schemaless_reader(io.BytesIO(again[0][5:]), fastavro.parse_schema(NESTED)) == NESTED_DATA[0]


# -- schema evolution: a reader newer than the writers, several writer ids in one batch ------------------------

EVO = [
    {"type": "record", "name": "Evo", "fields": [{"name": "a", "type": "int"}, {"name": "gone", "type": "string"}]},
    {"type": "record", "name": "Evo", "fields": [{"name": "a", "type": "long"}, {"name": "gone", "type": "string"},
                                                   {"name": "b", "type": "string", "default": "dflt"}]},
    {"type": "record", "name": "Evo", "fields": [{"name": "a", "type": "long"},
                                                   {"name": "b", "type": "string", "default": "dflt"},
                                                   {"name": "c", "type": ["null", "int"], "default": None}]},
]


def test_schema_evolution_reads_every_writer_version_in_one_batch(spark, records, registry, engine):
    ids = [register(registry, "eng_evo-value", s) for s in EVO]
    assert len(set(ids)) == 3
    msgs = [framed(ids[2], EVO[2], {"a": 30, "b": "z", "c": 7}), framed(ids[0], EVO[0], {"a": 1, "gone": "g1"}),
            framed(ids[1], EVO[1], {"a": 2**40, "gone": "g2", "b": "x"}), framed(ids[0], EVO[0], {"a": -1, "gone": ""})]
    typed = apply_sink_converters(records([(None, m) for m in msgs], topic="eng_evo"),
                                  avro_cfg(registry, engine, "eng_evo"))
    assert [f.name for f in typed.schema["value"].dataType.fields] == ["a", "b", "c"]
    assert values(typed) == [{"a": 30, "b": "z", "c": 7}, {"a": 1, "b": "dflt", "c": None},
                             {"a": 2**40, "b": "x", "c": None}, {"a": -1, "b": "dflt", "c": None}]
    # An explicit Spark type reads fields by name from every writer; absent ones are null.
    explicit = apply_sink_converters(records([(None, m) for m in msgs], topic="eng_evo"),
                                     avro_cfg(registry, engine, "eng_evo", **{"spark.schema": "a BIGINT, gone STRING"}))
    assert values(explicit) == [{"a": 30, "gone": None}, {"a": 1, "gone": "g1"}, {"a": 2**40, "gone": "g2"},
                                {"a": -1, "gone": ""}]


def test_use_schema_id_reads_with_that_schema(spark, records, registry, engine):
    ids = [register(registry, "eng_evo-value", s) for s in EVO]
    msgs = [framed(ids[0], EVO[0], {"a": 1, "gone": "g1"}), framed(ids[1], EVO[1], {"a": 2, "gone": "g2", "b": "x"})]
    c = avro_cfg(registry, engine, "eng_elsewhere", **{"use.schema.id": str(ids[1])})
    typed = apply_sink_converters(enable_error_column(records([(None, m) for m in msgs], topic="eng_elsewhere")), c)
    rows = typed.collect()
    assert rows[1].value.asDict() == {"a": 2, "gone": "g2", "b": "x"} and rows[1][ERROR_COL] is None
    if engine == "fastavro":  # any id of the registry, resolved to the use.schema.id schema
        assert rows[0].value.asDict() == {"a": 1, "gone": "g1", "b": "dflt"} and rows[0][ERROR_COL] is None
    else:  # from_avro knows the writer schemas of the plan only: here the one id (README, Avro section)
        assert rows[0].value is None and "Error retrieving Avro schema for id" in rows[0][ERROR_COL].message


# -- tombstones, key and value ---------------------------------------------------------------------------------

KEY = {"type": "record", "name": "OrderKey", "namespace": "io.example", "fields": [{"name": "id", "type": "long"}]}
SMALL = {"type": "record", "name": "Small", "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}]}


def test_tombstones_stay_null_and_keys_decode(spark, records, registry, engine):
    kid = register(registry, "eng_tomb-key", KEY)
    vid = register(registry, "eng_tomb-value", SMALL)
    df = records([(framed(kid, KEY, {"id": 1}), framed(vid, SMALL, {"s": "a", "n": 1})),
                  (framed(kid, KEY, {"id": 1}), None), (None, None)], topic="eng_tomb")
    c = avro_cfg(registry, engine, "eng_tomb", key=True)
    for frame in (df, enable_error_column(df)):
        rows = apply_sink_converters(frame, c).collect()
        assert [(r.key and r.key.asDict(), r.value and r.value.asDict()) for r in rows] == [
            ({"id": 1}, {"s": "a", "n": 1}), ({"id": 1}, None), (None, None)]
        assert all(ERROR_COL not in r or r[ERROR_COL] is None for r in rows)
    typed = apply_sink_converters(df, c)
    assert [r.value for r in apply_source_converters(typed, c).collect()][1:] == [None, None]


def test_optional_primitive_value_null_is_a_value_not_an_error(spark, records, registry, engine):
    sid = register(registry, "eng_optnum-value", ["null", "long"])
    second = register(registry, "eng_optnum2-value", ["long", "null"])
    df = records([(None, framed(sid, ["null", "long"], None)), (None, framed(sid, ["null", "long"], 5)),
                  (None, framed(sid, ["null", "long"], 5)[:-1])], topic="eng_optnum")
    rows = apply_sink_converters(enable_error_column(df), avro_cfg(registry, engine, "eng_optnum")).collect()
    assert [r.value for r in rows] == [None, 5, None]
    assert [r[ERROR_COL] is None for r in rows] == [True, True, False]
    df2 = records([(None, framed(second, ["long", "null"], None)), (None, framed(second, ["long", "null"], -3))],
                  topic="eng_optnum2")
    rows = apply_sink_converters(enable_error_column(df2), avro_cfg(registry, engine, "eng_optnum2")).collect()
    assert [(r.value, r[ERROR_COL]) for r in rows] == [(None, None), (-3, None)]


# -- bad input, errors.tolerance=all and none ------------------------------------------------------------------

def _bad_inputs(sid):
    good = framed(sid, SMALL, {"s": "hello", "n": 42})
    return good, [
        ("wrong magic byte", b"\x01" + good[1:], "Unknown magic byte"),
        ("too short", b"\x00\x00", "Unknown magic byte"),
        ("empty", b"", "Unknown magic byte"),
        ("unknown schema id", b"\x00" + (99999).to_bytes(4, "big") + good[5:],
         "Error retrieving Avro schema for id 99999"),
        ("truncated", good[:-3], f"Error deserializing Avro message for id {sid}"),
        ("header only", good[:5], f"Error deserializing Avro message for id {sid}"),
        ("negative string length", good[:5] + b"\x03", f"Error deserializing Avro message for id {sid}"),
    ]


def test_bad_input_with_errors_tolerance_all_becomes_record_errors(spark, records, registry, engine):
    sid = register(registry, "eng_bad-value", SMALL)
    good, bad = _bad_inputs(sid)
    df = enable_error_column(records([(None, good)] + [(None, b) for _, b, _ in bad], topic="eng_bad"))
    rows = apply_sink_converters(df, avro_cfg(registry, engine, "eng_bad")).collect()
    assert rows[0].value.asDict() == {"s": "hello", "n": 42} and rows[0][ERROR_COL] is None
    for row, (name, _, expected) in zip(rows[1:], bad):
        err = row[ERROR_COL]
        assert row.value is None and err is not None, name
        assert err.stage == "VALUE_CONVERTER" and err.class_name == AVRO, name
        assert expected in err.message, (name, err.message)


@pytest.mark.parametrize("index", [1, 4, 5], ids=["wrong magic byte", "unknown schema id", "truncated"])
def test_bad_input_with_errors_tolerance_none_fails_with_the_record(spark, records, registry, engine, index):
    sid = register(registry, "eng_bad-value", SMALL)
    good, bad = _bad_inputs(sid)
    df = records([(None, good), (None, bad[index - 1][1])], topic="eng_bad")
    with pytest.raises(PySparkException, match=r"VALUE_CONVERTER .*AvroConverter failed: .*offset=1"):
        apply_sink_converters(df, avro_cfg(registry, engine, "eng_bad")).collect()


def test_random_bytes_after_a_valid_header_never_crash_and_never_pass_as_records(spark, records, registry, engine):
    sid = register(registry, "eng_bad-value", SMALL)
    rng = random.Random(15)
    valid = [framed(0, SMALL, {"s": "".join(rng.choices("aé€ z", k=n % 9)), "n": rng.randint(-2**63, 2**63 - 1)})[5:]
             for n in range(20)]
    rnd = ([rng.randbytes(n % 29) for n in range(80)] + valid + [v[:rng.randrange(len(v))] for v in valid]
           + [v + rng.randbytes(1 + n % 3) for n, v in enumerate(valid)]
           + [bytes(b ^ (1 << rng.randrange(8)) if i == rng.randrange(len(v)) else b for i, b in enumerate(v))
              for v in valid])
    df = enable_error_column(records([(None, b"\x00" + sid.to_bytes(4, "big") + b) for b in rnd], topic="eng_bad"))
    rows = apply_sink_converters(df, avro_cfg(registry, engine, "eng_bad")).collect()
    readable = 0
    for b, r in zip(rnd, rows):
        assert (r.value is None) != (r[ERROR_COL] is None)
        fo = io.BytesIO(b)
        try:
            reference, why = fastavro.schemaless_reader(fo, fastavro.parse_schema(SMALL)), None
            if fo.tell() != len(b):
                why = "trailing bytes"
        except UnicodeDecodeError:
            reference, why = None, "invalid UTF-8"
        except Exception:  # noqa: BLE001 - anything fastavro cannot read
            reference, why = None, "unreadable"
        if why is None:
            readable += 1
            assert r.value.asDict() == reference
        elif engine == "fastavro" or why == "unreadable":
            assert r.value is None, (b, why)
        elif why == "trailing bytes":  # spark-avro reads the datum and ignores what follows (README, Avro section)
            assert r.value.asDict() == reference
        # invalid UTF-8: fastavro fails the record; spark-avro keeps the bytes as they are and reads on
    assert readable >= 20 and sum(r.value is None for r in rows) >= 80


def test_trailing_bytes_after_the_datum(spark, records, registry, engine):
    """The one decode difference: fastavro reports bytes left after the datum, spark-avro (like Confluent's
    KafkaAvroDeserializer) reads the datum and ignores them."""
    sid = register(registry, "eng_bad-value", SMALL)
    good, _ = _bad_inputs(sid)
    rows = apply_sink_converters(enable_error_column(records([(None, good + b"\x00\x00")], topic="eng_bad")),
                                 avro_cfg(registry, engine, "eng_bad")).collect()
    if engine == "fastavro":
        assert rows[0].value is None and "2 trailing bytes" in rows[0][ERROR_COL].message
    else:
        assert rows[0].value.asDict() == {"s": "hello", "n": 42} and rows[0][ERROR_COL] is None


# -- encode: registry schemas chosen by config, values that do not fit ------------------------------------------

FIXED = {"type": "record", "name": "Fixed", "namespace": "io.example", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


@pytest.mark.parametrize("how", ["use.latest.version", "use.schema.id"])
def test_encode_with_a_registry_schema_writes_the_same_bytes(spark, records, registry, engine, how):
    sid = register(registry, "eng_fixed-value", FIXED)
    at = dt.datetime(2024, 3, 1, 12, 30, 45, 678000)
    df = records([(None, (3, None, at)), (None, (4, "n", at)), (None, None)],
                 value_type="id BIGINT, note STRING, at TIMESTAMP", topic="eng_fixed")
    extra = {"use.latest.version": "true", "auto.register.schemas": "false"} if how == "use.latest.version" \
        else {"use.schema.id": str(sid)}
    out = apply_source_converters(df, avro_cfg(registry, engine, "eng_fixed", **extra)).collect()
    tz = at.replace(tzinfo=UTC)
    assert [r.value for r in out] == [framed(sid, FIXED, {"id": 3, "note": None, "at": tz}),
                                      framed(sid, FIXED, {"id": 4, "note": "n", "at": tz}), None]


def test_encode_null_into_a_required_field_is_a_record_error(spark, records, registry, engine):
    sid = register(registry, "eng_fixed-value", FIXED)
    df = records([(None, (None, "x", dt.datetime(2024, 1, 1))), (None, (1, None, dt.datetime(2024, 1, 1)))],
                 value_type="id BIGINT, note STRING, at TIMESTAMP", topic="eng_fixed")
    c = avro_cfg(registry, engine, "eng_fixed", **{"use.schema.id": str(sid)})
    rows = apply_source_converters(enable_error_column(df), c).collect()
    assert rows[0].value is None and "Failed to serialize Avro data" in rows[0][ERROR_COL].message
    assert rows[1].value is not None and rows[1][ERROR_COL] is None
    with pytest.raises(PySparkException, match=r"VALUE_CONVERTER .*AvroConverter failed: .*offset=0"):
        apply_source_converters(df, c).collect()


def test_engine_choice_shows_in_the_plan(spark, records, registry, engine):
    sid = register(registry, "eng_bad-value", SMALL)
    df = records([(None, framed(sid, SMALL, {"s": "a", "n": 1}))], topic="eng_bad")
    plan = apply_sink_converters(df, avro_cfg(registry, engine, "eng_bad"))._jdf.queryExecution().optimizedPlan()
    text = plan.toString()
    assert ("from_avro" in text) == (engine == "native")
    assert ("avro_decode" in text) == (engine == "fastavro")
    auto = apply_sink_converters(df, avro_cfg(registry, "auto", "eng_bad"))._jdf.queryExecution().optimizedPlan()
    assert "from_avro" in auto.toString()  # spark-avro is loaded in the test session: auto picks native


def test_tolerant_split_decodes_each_record_once(spark, records, registry, engine):
    """errors.tolerance=all splits good and failed rows with a filter on the error: it must not be pushed below
    the decode, which would then run twice."""
    sid = register(registry, "eng_bad-value", SMALL)
    df = enable_error_column(records([(None, framed(sid, SMALL, {"s": "a", "n": 1})), (None, b"\x01")],
                                     topic="eng_bad"))
    typed = apply_sink_converters(df, avro_cfg(registry, engine, "eng_bad"))
    good = typed.where(F.col(ERROR_COL).isNull()).where(F.col("value.n") > 0)
    plan = good._jdf.queryExecution().executedPlan().toString()
    assert plan.count("from_avro(" if engine == "native" else "ArrowEvalPython") == 1, plan
    assert [r.value.asDict() for r in good.collect()] == [{"s": "a", "n": 1}]


def test_forced_native_engine_needs_the_writer_schemas_when_planned(spark, records, registry):
    df = records([(None, b"\x00")], topic="eng_bad")
    with pytest.raises(ConfigError, match=r"value\.converter\.avro\.engine.*writer schemas when the query is planned"):
        apply_sink_converters(df, {**avro_cfg(registry, "native", "eng_bad,eng_fixed"),
                                   "value.converter.spark.schema": "s STRING"})
    # auto: the same config decodes with fastavro
    auto = apply_sink_converters(df, {**avro_cfg(registry, "auto", "eng_bad,eng_fixed"),
                                      "value.converter.spark.schema": "s STRING"})
    assert "avro_decode" in auto._jdf.queryExecution().optimizedPlan().toString()


def test_forced_native_engine_needs_the_topic_for_use_latest_version(spark, records, registry):
    df = records([(None, (1, None, None))], value_type="id BIGINT, note STRING, at TIMESTAMP", topic="eng_fixed")
    cfg = {**avro_cfg(registry, "native", "eng_fixed", **{"use.latest.version": "true"})}
    del cfg["topics"]  # a source connector's config: no 'topics'
    with pytest.raises(ConfigError, match=r"value\.converter\.avro\.engine.*use\.latest\.version needs the topic"):
        apply_source_converters(df, cfg)


def test_a_corrupt_length_is_a_record_error_not_a_dead_executor(spark, records, registry, engine):
    """A string length of 2^31 - 100 after a valid header: Avro would allocate 2 GiB (OutOfMemoryError kills the
    executor, in local mode the driver); configure_spark sets Avro's own limits, so it fails its record only."""
    sid = register(registry, "eng_bad-value", SMALL)
    huge = (2**31 - 100) * 2  # zig-zag
    length = bytearray()
    while huge >= 0x80:
        length.append((huge & 0x7F) | 0x80)
        huge >>= 7
    length.append(huge)
    items = {"type": "record", "name": "Many", "fields": [{"name": "xs", "type": {"type": "array", "items": "long"}}]}
    many = register(registry, "eng_many-value", items)
    strings = records([(None, framed(sid, SMALL, {"s": "ok", "n": 1})),
                       (None, b"\x00" + sid.to_bytes(4, "big") + bytes(length) + b"ab")], topic="eng_bad")
    rows = apply_sink_converters(enable_error_column(strings), avro_cfg(registry, engine, "eng_bad")).collect()
    assert rows[0].value.asDict() == {"s": "ok", "n": 1} and rows[1].value is None and rows[1][ERROR_COL] is not None
    arrays = records([(None, b"\x00" + many.to_bytes(4, "big") + bytes(length) + b"\x02")], topic="eng_many")
    rows = apply_sink_converters(enable_error_column(arrays), avro_cfg(registry, engine, "eng_many")).collect()
    assert rows[0].value is None and rows[0][ERROR_COL] is not None
