import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import SetSchemaMetadata, TopicNameMatches

from .conftest import errors


def test_struct_value_schema_renamed(make_records):
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="struct<a:int>")
    out = df.transform(SetSchemaMetadata.Value(schema_name="com.x.Order", schema_version=3))
    assert out.schema["value"].metadata == {"connect.name": "com.x.Order", "connect.version": 3}
    assert [r["value"] for r in out.collect()][1] is None


def test_primitive_value_and_key_variant(make_records):
    df = make_records([("k", "v")])
    out = df.transform(SetSchemaMetadata.Key(schema_name="K"))
    assert out.schema["key"].metadata == {"connect.name": "K"} and out.schema["value"].metadata == {}
    assert out.collect()[0]["key"] == "k"


def test_schemaless_map_fails_records_but_not_tombstones(make_records):
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="map<string,int>", tolerant=True)
    msgs = errors(df.transform(SetSchemaMetadata.Value(schema_name="x")).collect())
    assert "Schema required" in msgs[0] and msgs[1] is None


def test_cannot_take_a_predicate(make_records):
    df = make_records([("k", "v")])
    with pytest.raises(ConfigError, match="one per column"):
        df.transform(SetSchemaMetadata.Value(schema_name="x", predicate=TopicNameMatches(pattern="t")))


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "", "Neither schema name nor version configured"),
    ({"schema.version": "x"}, "schema.version", "Not a number of type INT"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        SetSchemaMetadata.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)
