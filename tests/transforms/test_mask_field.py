import datetime as dt
from decimal import Decimal

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import MaskField

from .conftest import errors

VT = ("struct<b:boolean,i:int,l:bigint,d:double,dec:decimal(5,2),s:string,day:date,arr:array<int>,"
      "m:map<string,int>,keep:string,n:string>")
ROW = {"b": True, "i": 5, "l": 6, "d": 1.5, "dec": Decimal("1.25"), "s": "secret", "day": dt.date(2024, 1, 2),
       "arr": [1], "m": {"a": 1}, "keep": "x", "n": None}


def test_struct_fields_masked_per_type_null_stays_null(make_records):
    df = make_records([("k", ROW)], value_type=VT)
    out = df.transform(MaskField.Value(fields="b,i,l,d,dec,s,day,arr,m,n"))
    v = out.collect()[0]["value"].asDict()
    assert v == {"b": False, "i": 0, "l": 0, "d": 0.0, "dec": Decimal("0.00"), "s": "", "day": dt.date(1970, 1, 1),
                 "arr": [], "m": {}, "keep": "x", "n": None}
    assert out.schema["value"].dataType.simpleString() == VT


def test_replacement_parsed_per_type(make_records):
    df = make_records([("k", {"i": 5, "s": "x", "d": 2.0})], value_type="struct<i:int,s:string,d:double>")
    v = df.transform(MaskField.Value(fields="i,s,d", replacement="42")).collect()[0]["value"].asDict()
    assert v == {"i": 42, "s": "42", "d": 42.0}


def test_replacement_that_does_not_parse_fails_records_with_values(make_records):
    df = make_records([("k", {"i": 5, "s": "x"}), ("k", {"i": None, "s": "y"})], value_type="struct<i:int,s:string>",
                      tolerant=True)
    rows = df.transform(MaskField.Value(fields="i,s", replacement="***")).collect()
    msgs = errors(rows)
    assert "Unable to convert *** (int)" in msgs[0] and msgs[1] is None
    assert rows[1]["value"].s == "***"


def test_boolean_with_replacement_and_struct_field_fail(make_records):
    df = make_records([("k", {"b": True, "st": {"a": 1}})], value_type="struct<b:boolean,st:struct<a:int>>",
                      tolerant=True)
    assert "custom replacement" in errors(df.transform(MaskField.Value(fields="b", replacement="x")).collect())[0]
    assert "Cannot mask" in errors(df.transform(MaskField.Value(fields="st")).collect())[0]


def test_tombstone_fails_record(make_records):
    df = make_records([("k", None)], value_type="struct<s:string>", tolerant=True)
    assert "found: null" in errors(df.transform(MaskField.Value(fields="s")).collect())[0]


def test_schemaless_map_adds_missing_fields_as_null(make_records):
    df = make_records([("k", {"a": "x", "b": "y"})], value_type="map<string,string>")
    assert df.transform(MaskField.Value(fields="a,zz")).collect()[0]["value"] == {"a": "", "b": "y", "zz": None}


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v")], tolerant=True)
    assert errors(df.transform(MaskField.Value(fields="a")).collect())[0]


def test_key_variant(make_records):
    df = make_records([({"id": 7}, "v")], key_type="struct<id:int>")
    row = df.transform(MaskField.Key(fields="id")).collect()[0]
    assert row["key"].id == 0 and row["value"] == "v"


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "fields", "Missing required configuration"),
    ({"fields": ""}, "fields", "Empty list"),
    ({"fields": "a", "replacement": ""}, "replacement", "String may not be empty"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        MaskField.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


def test_field_metadata_kept(make_records):
    from pyspark.sql.types import IntegerType, StructField, StructType

    md = {"connect.name": "org.apache.kafka.connect.data.Time"}
    vt = StructType([StructField("t", IntegerType(), True, md), StructField("s", IntegerType())])
    df = make_records([("k", {"t": 5, "s": 1})], value_type=vt)
    out = df.transform(MaskField.Value(fields="t"))
    assert out.schema["value"].dataType["t"].metadata == md
    assert out.collect()[0]["value"].t == 0
