import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import HoistField


def test_primitive_value_wrapped_in_struct(make_records):
    df = make_records([("k", "v")])
    out = df.transform(HoistField.Value(field="line"))
    assert out.schema["value"].dataType.simpleString() == "struct<line:string>"
    assert out.collect()[0]["value"].line == "v"


def test_tombstone_is_wrapped(make_records):
    row = make_records([("k", None)]).transform(HoistField.Value(field="line")).collect()[0]
    assert row["value"] is not None and row["value"].line is None


def test_struct_value_nested(make_records):
    df = make_records([("k", {"a": 1})], value_type="struct<a:int>")
    row = df.transform(HoistField.Value(field="inner")).collect()[0]
    assert row["value"].inner.a == 1


def test_schemaless_map_wrapped_in_map(make_records):
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="map<string,bigint>")
    out = df.transform(HoistField.Value(field="m"))
    assert out.schema["value"].dataType.simpleString() == "map<string,map<string,bigint>>"
    assert [r["value"] for r in out.collect()] == [{"m": {"a": 1}}, {"m": None}]


def test_key_variant(make_records):
    row = make_records([(7, "v")], key_type="int").transform(HoistField.Key(field="id")).collect()[0]
    assert row["key"].id == 7 and row["value"] == "v"


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "field", "Missing required configuration"),
    ({"field": "a", "fields": "b"}, "fields", 'did you mean "field"'),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        HoistField.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


def test_base_class_needs_a_variant():
    with pytest.raises(TypeError, match=r"HoistField.Key or HoistField.Value"):
        HoistField(field="a")
