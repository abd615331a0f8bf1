"""StringConverter, ByteArrayConverter, the primitive converters and SimpleHeaderConverter."""

from __future__ import annotations

import struct

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from spark_connect_bridge.converters import (
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    SimpleHeaderConverter,
    StringConverter,
    apply_sink_converters,
    apply_source_converters,
)
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.errors import ConfigError

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


#: bytes that are no text of their encoding, and the text Java's new String(bytes, charset) makes of them (Kafka's
#: StringDeserializer; read with jshell, and compared with Kafka's StringConverter by the differential fuzzer)
MALFORMED = [("UTF-8", b"a\xffb", "a\ufffdb"), ("UTF-8", b"\xed\xa0\x80", "\ufffd"),
             ("UTF-8", b"x\xed\xaf", "x\ufffd"), ("US-ASCII", b"a\x80\xff", "a\ufffd\ufffd"),
             ("UTF-16", b"\x00", "\ufffd"), ("UTF-16", b"\x00a\xd8\x00\x00b", "a\ufffd"),
             ("UTF-16", b"\xff\xfeh\x00\x00\xd8", "h\ufffd"), ("UTF-16LE", b"\xff\xfeh\x00", "\ufeffh"),
             ("UTF-32", b"\x00\x00", "\ufffd"), ("ISO-8859-1", b"\xe9\xff", "\xe9\xff")]


def test_string_converter_reads_malformed_bytes_as_java_does(spark, records):
    # Spark 4's decode fails the query on malformed input: a record of another encoding than the converter's would
    # stop the pipeline; Kafka reads it with U+FFFD for each malformed sequence, as Java's decoder does
    for encoding, data, text in MALFORMED:
        cfg = {"value.converter": "StringConverter", "value.converter.converter.encoding": encoding}
        assert apply_sink_converters(records([(None, data)]), cfg).first().value == text, (encoding, data)


def test_string_converter_writes_unmappable_characters_as_java_does(spark, records):
    # Java's String.getBytes writes "?" for a character the charset lacks (one for a surrogate pair); Spark 4's
    # encode fails the query (expected bytes read with jshell)
    df = records([(None, "h\u00e9\U0001F600x\u20ac")], value_type="string")
    for encoding, expected in (("US-ASCII", b"h??x?"), ("ISO-8859-1", b"h\xe9?x?")):
        cfg = {"value.converter": "StringConverter", "value.converter.converter.encoding": encoding}
        assert apply_source_converters(df, cfg).first().value == expected, encoding


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


def test_header_composites_are_written_like_kafka_values_convert_to_string(spark, records):
    """Kafka's Values.convertToString notation: no spaces, nested strings quoted with only \\ and " escaped,
    map keys as values, bytes as quoted Base64, dates/timestamps unquoted (Values.dateFormatFor)."""
    from spark_connect_bridge.converters.header import header_text

    row = spark.sql("""SELECT array(1, 2, null) a, map('k', 1, 'z', null) m, map(1, 'x') mi,
        named_struct('a', 1, 'b', 'q"\\\\', 'c', array('x'), 'd', cast(null AS string)) s,
        array(X'01') b, array(date'2024-01-02') d, named_struct('m', map('n', array(1.5D))) n,
        timestamp'2024-01-02 03:04:05.678' ts, timestamp'2024-01-02 00:00:00' midnight,
        timestamp'1970-01-01 00:00:01' early, array(timestamp'2024-01-02 03:04:05.678') tsa""")
    texts = row.select([header_text(F.col(f.name), f.dataType).alias(f.name) for f in row.schema.fields]).first()
    assert texts.asDict() == {
        "a": "[1,2,null]", "m": '{"k":1,"z":null}', "mi": '{1:"x"}',
        "s": '{"a":1,"b":"q\\"\\\\","c":["x"],"d":null}', "b": '["AQ=="]', "d": "[2024-01-02]",
        "n": '{"m":{"n":[1.5]}}', "ts": "2024-01-02T03:04:05.678Z", "midnight": "2024-01-02",
        "early": "00:00:01.000Z", "tsa": "[2024-01-02T03:04:05.678Z]"}
    tz = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        ts = spark.range(1).select(F.timestamp_millis(F.lit(1704164645678)).alias("ts"),
                                   F.lit("2024-01-02 03:04:05.678").cast("timestamp_ntz").alias("ntz"))
        assert ts.select(header_text(F.col("ts"), ts.schema["ts"].dataType),
                         header_text(F.col("ntz"), ts.schema["ntz"].dataType)).first() == \
            ("2024-01-02T03:04:05.678Z", "2024-01-02T03:04:05.678Z")
    finally:
        spark.conf.set("spark.sql.session.timeZone", tz)
    df = records([(None, b"v", [("h", {"a": [1, 2]}), ("none", None)])], headers="map<string,array<int>>")
    out = apply_source_converters(df, {"header.converter": "SimpleHeaderConverter"}).first().headers
    assert [(h.key, h.value) for h in out] == [("h", b'{"a":[1,2]}'), ("none", None)]


# (text, Python value, first byte of the variant value = its physical type, or None)
INFERRED = [
    ("true", True, None), ("false", False, None), ("null", None, None), ("", "", None),
    ("42", 42, 0x0C), (" 7 ", 7, 0x0C), ("-5", -5, 0x0C), ("1.0", 1, 0x0C), ("1e2", 100, 0x0C),
    ("1000", 1000, 0x10), ("100000", 100000, 0x14), ("10000000000", 10**10, 0x18),
    ("1.5", 1.5, 0x38), ("+.5", 0.5, 0x38), ("1e39", 1e39, 0x1C),
    ("[1,2]", [1, 2], None), ('{"a":"b"}', {"a": "b"}, None),
    ("hello", "hello", None), ("[1,", "[1,", None), ("{1:2}", "{1:2}", None), ("12:30", "12:30", None),
    ("2024-02-30", "2024-02-30", None), ("x 1", "x 1", None),
]


def test_header_strings_are_typed_like_kafka_values_parse_string(spark, records):
    import datetime as dt

    cases = INFERRED + [("2024-01-02", dt.date(2024, 1, 2), None)]
    df = records([(None, b"v", [(str(i), t.encode()) for i, (t, _, _) in enumerate(cases)])])
    cfg = {"header.converter": "SimpleHeaderConverter", "header.converter.spark.schema": "variant"}
    headers = apply_sink_converters(df, cfg).first().headers
    for (text, expected, kind), h in zip(cases, headers, strict=True):
        got = None if h.value is None else h.value.toPython()
        assert got == expected, text
        if kind is not None:
            assert h.value.value[0] == kind, (text, hex(h.value.value[0]))
    back = apply_source_converters(apply_sink_converters(df, cfg), {"header.converter": "SimpleHeaderConverter"})
    written = {h.key: h.value for h in back.first().headers}
    assert [written[str(i)] for i in (0, 4, 12, 15, 17)] == [b"true", b"42", b"1.5", b"[1,2]", b"hello"]
    utc = dt.UTC
    times = records([(None, b"v", [("ts", b"2024-01-02T03:04:05.678Z"), ("t", b"12:34:56.789Z")])])
    ts, t = (h.value.toPython() for h in apply_sink_converters(times, cfg).first().headers)
    assert ts.astimezone(utc) == dt.datetime(2024, 1, 2, 3, 4, 5, 678000, utc)
    assert t.astimezone(utc) == dt.datetime(1970, 1, 1, 12, 34, 56, 789000, utc)
