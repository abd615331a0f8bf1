import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ValueToKey

from .conftest import errors


def test_struct_value_fields_become_key(make_records):
    df = make_records([(None, {"id": 1, "name": "x", "o": 2})], value_type="struct<id:int,name:string,o:int>")
    out = df.transform(ValueToKey(fields="id,o"))
    assert out.schema["key"].dataType.simpleString() == "struct<id:int,o:int>"
    row = out.collect()[0]
    assert row["key"].asDict() == {"id": 1, "o": 2} and row["value"].name == "x"


def test_schemaless_map_missing_field_gives_null_entry(make_records):
    df = make_records([(None, {"id": 1})], value_type="map<string,bigint>")
    assert df.transform(ValueToKey(fields=["id", "zz"])).collect()[0]["key"] == {"id": 1, "zz": None}


def test_tombstone_fails_record(make_records):
    df = make_records([("k", None), ("k", {"id": 1})], value_type="struct<id:int>", tolerant=True)
    msgs = errors(df.transform(ValueToKey(fields="id")).collect())
    assert "found: null" in msgs[0] and msgs[1] is None


def test_missing_struct_field_fails_every_record(make_records):
    df = make_records([("k", {"id": 1})], value_type="struct<id:int>", tolerant=True)
    assert "Field does not exist: zz" in errors(df.transform(ValueToKey(fields="zz")).collect())[0]


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v")], tolerant=True)
    assert errors(df.transform(ValueToKey(fields="a")).collect())[0]


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "fields", "Missing required configuration"),
    ({"fields": ""}, "fields", "Empty list"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        ValueToKey(config)
    assert e.value.keys == [key] and fragment in str(e.value)
