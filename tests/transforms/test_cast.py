import math

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import Cast

from .conftest import errors


def test_struct_fields_follow_java_conversions(make_records):
    vt = "struct<big:bigint,d:double,neg:double,f:float,b:boolean,s:string,sb:string,bin:binary,keep:int,dd:double>"
    df = make_records([("k", {"big": 300, "d": 3.99, "neg": -3.99, "f": 1.5, "b": True, "s": "+42", "sb": "TRUE",
                              "bin": b"hi", "keep": 5, "dd": 1e10})], value_type=vt)
    out = df.transform(Cast.Value(spec="big:int8,d:int32,neg:int32,f:string,b:int16,s:int64,sb:boolean,"
                                       "bin:string,dd:string"))
    v = out.collect()[0]["value"].asDict()
    assert v == {"big": 44, "d": 3, "neg": -3, "f": "1.5", "b": 1, "s": 42, "sb": True, "bin": "aGk=",
                 "keep": 5, "dd": "1.0E10"}
    assert out.schema["value"].dataType["big"].dataType.simpleString() == "tinyint"


def test_whole_value_cast_of_a_primitive(make_records):
    df = make_records([("k", "12"), ("k", None)])
    out = df.transform(Cast.Value(spec="int32"))
    assert out.schema["value"].dataType.simpleString() == "int"
    assert [r["value"] for r in out.collect()] == [12, None]


def test_tombstone_passes_through(make_records):
    df = make_records([("k", None)], value_type="struct<a:string>")
    assert df.transform(Cast.Value(spec="a:int8")).collect()[0]["value"] is None


def test_unparseable_string_fails_only_that_record(make_records):
    df = make_records([("k", {"a": "4.5"}), ("k", {"a": "7"}), ("k", {"a": None})], value_type="struct<a:string>",
                      tolerant=True)
    rows = df.transform(Cast.Value(spec="a:int32", alias="c")).collect()
    msgs = errors(rows)
    assert "Cast$Value" in msgs[0] and "(alias c)" in msgs[0] and "offset=0" in msgs[0]
    assert msgs[1:] == [None, None]
    assert rows[1]["value"].a == 7


# (text, target, Java's result: a value, or None where parseXxx throws NumberFormatException)
JAVA_PARSING = [
    (" 7", "int32", None), ("7 ", "int32", None), ("7\n", "int64", None), ("\t7", "int64", None),
    ("+7", "int32", 7), ("-007", "int64", -7), ("\uff17", "int32", 7), ("\u0663\u0660", "int64", 30),
    ("\u0967\u0968", "int16", 12), ("7.0", "int32", None), ("", "int32", None), ("+", "int32", None),
    ("128", "int8", None), ("-128", "int8", -128), ("2147483648", "int32", None),
    ("9223372036854775807", "int64", 2**63 - 1), ("-9223372036854775808", "int64", -2**63),
    ("9223372036854775808", "int64", None), ("-32769", "int16", None), ("1_000", "int32", None),
    ("\U0001d7d5", "int32", None),  # MATHEMATICAL BOLD DIGIT SEVEN: a surrogate pair for Java
    (" 1.5\t", "float64", 1.5), ("1.5d", "float64", 1.5), ("0x1p3", "float64", 8.0), (".5", "float64", 0.5),
    ("-Infinity", "float64", float("-inf")), ("inf", "float64", None), ("nan", "float64", None),
    ("INFINITY", "float64", None), ("\u00a01.5", "float64", None), ("1e", "float64", None), ("2.5f", "float32", 2.5),
]


@pytest.mark.parametrize("text,target,expected", JAVA_PARSING, ids=[f"{t!r}->{to}" for t, to, _ in JAVA_PARSING])
def test_strings_parse_as_javas_parse_methods(make_records, text, target, expected):
    df = make_records([("k", {"a": text})], value_type="struct<a:string>", tolerant=True)
    row = df.transform(Cast.Value(spec=f"a:{target}")).collect()[0]
    if expected is None:
        assert "Unable to parse the string as" in errors([row])[0]
    else:
        assert errors([row]) == [None] and row["value"].a == expected


def test_nan_string_casts_to_a_nan_double(make_records):
    df = make_records([("k", "NaN")])
    assert math.isnan(df.transform(Cast.Value(spec="float64")).collect()[0]["value"])


def test_strict_mode_fails_the_query_naming_the_record(make_records):
    df = make_records([("k", {"a": "x"})], value_type="struct<a:string>")
    with pytest.raises(Exception, match=r"Cast\$Value.*offset=0"):
        df.transform(Cast.Value(spec="a:int32")).collect()


def test_number_to_boolean_and_boolean_to_number(make_records):
    df = make_records([("k", {"i": 0, "j": 5, "d": 0.5})], value_type="struct<i:int,j:int,d:double>")
    v = df.transform(Cast.Value(spec="i:boolean,j:boolean,d:boolean")).collect()[0]["value"]
    assert (v.i, v.j, v.d) == (False, True, False)  # Kafka: longValue() != 0


def test_key_variant(make_records):
    row = make_records([("5", "v")]).transform(Cast.Key(spec="int64")).collect()[0]
    assert row["key"] == 5 and row["value"] == "v"


def test_schemaless_map_adds_missing_field_as_null(make_records):
    df = make_records([("k", {"a": "x"})], value_type="map<string,string>")
    assert df.transform(Cast.Value(spec="a:string,b:string")).collect()[0]["value"] == {"a": "x", "b": None}


def test_schemaless_map_cast_to_other_value_type_is_rejected(make_records):
    df = make_records([("k", {"a": "1"})], value_type="map<string,string>")
    with pytest.raises(ConfigError, match="schemaless Map"):
        df.transform(Cast.Value(spec="a:int32"))


def test_struct_as_whole_value_fails_records(make_records):
    df = make_records([("k", {"a": "1"}), ("k", None)], value_type="struct<a:string>", tolerant=True)
    assert [m is not None for m in errors(df.transform(Cast.Value(spec="string")).collect())] == [True, False]


def test_bytes_cast_to_number_fails_records(make_records):
    df = make_records([("k", b"x")], value_type="binary", tolerant=True)
    assert "BYTES" in errors(df.transform(Cast.Value(spec="int32")).collect())[0]


@pytest.mark.parametrize("spec, fragment", [
    ("", "Empty list"),
    ("a:bytes", "does not support casting to BYTES"),
    ("a:struct", "does not support casting to STRUCT"),
    ("a:int9", "Invalid type found in casting spec: int9"),
    ("a:b:int8", "Invalid rename mapping"),
    ("int8,a:int16", "may only specify a single cast"),
])
def test_config_errors(spec, fragment):
    with pytest.raises(ConfigError) as e:
        Cast.Value(spec=spec)
    assert e.value.keys == ["spec"] and fragment in str(e.value)


def test_missing_spec_is_an_error():
    with pytest.raises(ConfigError, match='Missing required configuration "spec"'):
        Cast.Value()


def test_field_metadata_kept_when_type_unchanged(make_records):
    from pyspark.sql.types import IntegerType, StructField, StructType

    md = {"connect.name": "org.apache.kafka.connect.data.Time"}
    vt = StructType([StructField("t", IntegerType(), True, md), StructField("s", IntegerType(), True, md)])
    df = make_records([("k", {"t": 5, "s": 1})], value_type=vt)
    out = df.transform(Cast.Value(spec="t:int32,s:string"))
    assert out.schema["value"].dataType["t"].metadata == md
    assert out.schema["value"].dataType["s"].metadata == {}
    # A Connect Time cast to string is printed as a time of day, as Kafka does.
    assert out.collect()[0]["value"].asDict() == {"t": 5, "s": "00:00:00.001Z"}
