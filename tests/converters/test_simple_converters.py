"""StringConverter, ByteArrayConverter, the primitive converters and SimpleHeaderConverter."""

from __future__ import annotations

import struct

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from spark_connect_bridge.converters import (BooleanConverter, ByteArrayConverter, DoubleConverter, FloatConverter,
                                             IntegerConverter, LongConverter, ShortConverter, SimpleHeaderConverter,
                                             StringConverter, apply_sink_converters, apply_source_converters)
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.record_errors import ERROR_COL, enable_error_column

NUMBERS = [
    (ShortConverter, "smallint", ">h", [0, 1, -1, 32767, -32768]),
    (IntegerConverter, "int", ">i", [0, 1, -1, 2**31 - 1, -(2**31)]),
    (LongConverter, "bigint", ">q", [0, 1, -1, 2**63 - 1, -(2**63)]),
    (FloatConverter, "float", ">f", [0.0, 1.5, -2.25, float("inf")]),
    (DoubleConverter, "double", ">d", [0.0, 1.5, -1e300, 2.0**-1074]),
]


@pytest.mark.parametrize("cls,ddl,fmt,values", NUMBERS, ids=[n[0].__name__ for n in NUMBERS])
def test_number_converters_match_kafka_serializers_both_ways(spark, records, cls, ddl, fmt, values):
    conv = cls()
    df = records([(None, v) for v in values] + [(None, None)], value_type=ddl)
    out = df.select(conv.serialize("value", df.schema["value"].dataType).alias("b")).collect()
    assert [r.b for r in out] == [struct.pack(fmt, v) for v in values] + [None]
    raw = records([(None, struct.pack(fmt, v)) for v in values] + [(None, None)])
    back = raw.select(conv.parse("value").alias("v")).collect()
    assert [r.v for r in back] == values + [None]


def test_boolean_converter_round_trip(spark, records):
    df = records([(None, True), (None, False), (None, None)], value_type="boolean")
    out = apply_source_converters(df, {"value.converter": "org.apache.kafka.connect.converters.BooleanConverter"})
    assert [r.value for r in out.collect()] == [b"\x01", b"\x00", None]
    back = apply_sink_converters(out, {"value.converter": "BooleanConverter"})
    assert [r.value for r in back.collect()] == [True, False, None]


def test_wrong_size_is_a_record_error_strict_and_tolerant(spark, records):
    df = records([(None, b"\x00\x00\x00\x01"), (None, b"\x01\x02")])
    cfg = {"value.converter": "org.apache.kafka.connect.converters.IntegerConverter"}
    with pytest.raises(PySparkException, match=r"Size of data received by IntegerDeserializer is not 4.*offset=1"):
        apply_sink_converters(df, cfg).collect()
    rows = apply_sink_converters(enable_error_column(df), cfg).collect()
    assert rows[0].value == 1 and rows[0][ERROR_COL] is None
    err = rows[1][ERROR_COL]
    assert rows[1].value is None and err.stage == "VALUE_CONVERTER"
    assert err.class_name == "org.apache.kafka.connect.converters.IntegerConverter"


def test_boolean_converter_rejects_other_bytes(spark, records):
    df = enable_error_column(records([(None, b"\x02")]))
    row = apply_sink_converters(df, {"value.converter": "BooleanConverter"}).first()
    assert "unexpected byte 0x02" in row[ERROR_COL].message


def test_string_converter_round_trip_and_malformed_utf8(spark, records):
    df = records([("k", "héllo"), (None, None)], value_type="string", key_type="string")
    cfg = {"key.converter": "StringConverter", "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    out = apply_source_converters(df, cfg)
    assert [(r.key, r.value) for r in out.collect()] == [(b"k", "héllo".encode()), (None, None)]
    assert [r.value for r in apply_sink_converters(out, cfg).collect()] == ["héllo", None]
    bad = records([(None, b"a\xffb")])
    assert apply_sink_converters(bad, cfg).first().value == "a\ufffdb"


def test_string_converter_encoding_and_non_string_values(spark, records):
    conv = StringConverter({"converter.encoding": "UTF-16BE"})
    df = records([(None, "hé")], value_type="string")
    assert df.select(conv.serialize("value", df.schema["value"].dataType).alias("b")).first().b == "hé".encode(
        "utf-16-be")
    assert df.select(conv.parse(F.encode("value", "UTF-16BE")).alias("s")).first().s == "hé"
    typed = records([(None, (1, "x"))], value_type="a INT, b STRING")
    out = apply_source_converters(typed, {"value.converter": "StringConverter"}).first().value
    assert out == b'{"a":1,"b":"x"}'
    ints = records([(None, 42)], value_type="int")
    assert apply_source_converters(ints, {"value.converter": "StringConverter"}).first().value == b"42"


def test_byte_array_converter_passes_bytes_and_rejects_other_types(spark, records):
    df = records([(b"k", b"\x00\x01"), (None, None)])
    cfg = {"key.converter": "ByteArrayConverter", "value.converter": "ByteArrayConverter"}
    assert [r.value for r in apply_sink_converters(df, cfg).collect()] == [b"\x00\x01", None]
    assert [r.value for r in apply_source_converters(df, cfg).collect()] == [b"\x00\x01", None]
    with pytest.raises(ConfigError, match="only serializes binary"):
        apply_source_converters(records([(None, "x")], value_type="string"), cfg)
    assert isinstance(ByteArrayConverter(), ByteArrayConverter)


def test_number_converter_serializes_castable_strings_and_flags_others(spark, records):
    df = enable_error_column(records([(None, " 7 "), (None, "seven")], value_type="string"))
    rows = apply_source_converters(df, {"value.converter": "LongConverter"}).collect()
    assert rows[0].value == struct.pack(">q", 7) and rows[0][ERROR_COL] is None
    assert "cannot serialize" in rows[1][ERROR_COL].message


def test_simple_header_converter_both_ways(spark, records):
    df = records([(None, b"v", [("n", 42), ("m", None)])], headers="int")
    cfg = {"header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}
    out = apply_source_converters(df, cfg).first().headers
    assert [(h.key, h.value) for h in out] == [("n", b"42"), ("m", None)]
    typed = apply_sink_converters(apply_source_converters(df, cfg), {**cfg, "header.converter.spark.schema": "int"})
    assert [(h.key, h.value) for h in typed.first().headers] == [("n", 42), ("m", None)]
    as_text = apply_sink_converters(apply_source_converters(df, cfg), cfg)
    assert [(h.key, h.value) for h in as_text.first().headers] == [("n", "42"), ("m", None)]
    assert SimpleHeaderConverter.plugin_type == "header_converter"


def test_bad_header_value_is_a_header_converter_error(spark, records):
    df = enable_error_column(records([(None, b"v", [("n", b"x1")])]))
    cfg = {"header.converter": "SimpleHeaderConverter", "header.converter.spark.schema": "int"}
    err = apply_sink_converters(df, cfg).first()[ERROR_COL]
    assert err.stage == "HEADER_CONVERTER" and "header n" in err.message


def test_binary_headers_are_left_alone_on_the_source_side(spark, records):
    df = records([(None, b"v", [("a", b"\x01")])])
    out = apply_source_converters(df, {"header.converter": "SimpleHeaderConverter"}).first().headers
    assert out[0].value == b"\x01"


def test_missing_converter_key_leaves_the_column_alone(spark, records):
    df = records([(b"k", b"v")])
    assert apply_sink_converters(df, {}).schema == df.schema
    assert apply_source_converters(df, {"name": "x"}).schema == df.schema


def test_boolean_converter_class_attributes():
    assert BooleanConverter.plugin_type == "converter"
    assert BooleanConverter.class_name.endswith("BooleanConverter")
