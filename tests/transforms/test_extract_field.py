import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ExtractField

from .conftest import errors


def test_struct_field_replaces_value(make_records):
    df = make_records([("k", {"id": 3, "n": "x"}), ("k", None)], value_type="struct<id:int,n:string>")
    out = df.transform(ExtractField.Value(field="id"))
    assert out.schema["value"].dataType.simpleString() == "int"
    assert [r["value"] for r in out.collect()] == [3, None]


def test_v2_nested_path_with_backticks(make_records):
    df = make_records([("k", {"a": {"b.c": 5}})], value_type="struct<a:struct<`b.c`:int>>")
    out = df.transform(ExtractField.Value(field="a.`b.c`", field_syntax_version="v2"))
    assert out.collect()[0]["value"] == 5


def test_v1_takes_dotted_name_literally(make_records):
    df = make_records([("k", {"a.b": 1, "a": {"b": 2}})], value_type="struct<`a.b`:int,a:struct<b:int>>")
    assert df.transform(ExtractField.Value(field="a.b")).collect()[0]["value"] == 1
    assert df.transform(ExtractField.Value(field="a.b", field_syntax_version="V2")).collect()[0]["value"] == 2


def test_schemaless_missing_field_is_null(make_records):
    df = make_records([("k", {"a": 1}), ("k", {"b": 2}), ("k", None)], value_type="map<string,bigint>")
    assert [r["value"] for r in df.transform(ExtractField.Value(field="a")).collect()] == [1, None, None]


def test_schemaless_nested_maps_and_non_map_intermediate(make_records):
    df = make_records([("k", {"a": {"b": 1}})], value_type="map<string,map<string,bigint>>")
    assert df.transform(ExtractField.Value(field="a.b", field_syntax_version="V2")).collect()[0]["value"] == 1
    flat = make_records([("k", {"a": 1}), ("k", {"x": 1})], value_type="map<string,bigint>", tolerant=True)
    msgs = errors(flat.transform(ExtractField.Value(field="a.b", field_syntax_version="V2")).collect())
    assert "non-Map" in msgs[0] and msgs[1] is None


def test_unknown_struct_field_fails_every_record_but_a_tombstone(make_records):
    # Kafka reads a tombstone with a null schema, so its lookup of the field never runs: it passes as null
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="struct<a:int>", tolerant=True)
    msgs = errors(df.transform(ExtractField.Value(field="zz")).collect())
    assert "Unknown field: zz" in msgs[0] and msgs[1] is None


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v"), ("k", None)], tolerant=True)
    msgs = errors(df.transform(ExtractField.Value(field="a")).collect())
    assert msgs[0] is not None and msgs[1] is None


def test_key_variant(make_records):
    df = make_records([({"id": 9}, "v")], key_type="struct<id:int>")
    row = df.transform(ExtractField.Key(field="id")).collect()[0]
    assert row["key"] == 9 and row["value"] == "v"


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "field", "Missing required configuration"),
    ({"field": "a", "field.syntax.version": "V3"}, "field.syntax.version", "String must be one of: V1, V2"),
    ({"field": "`a.b", "field.syntax.version": "V2"}, "field", "Incomplete backtick pair in path: [`a.b]"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        ExtractField.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


@pytest.mark.parametrize("field,version,expected,failed", [
    ("a", "V1", ['{"b":{"c":5}}', '{"b":[1]}', None, None], [None, None, None, "found: java.lang.Long"]),
    ("a.b.c", "V2", ["5", None, None, None],
     [None, "found a non-Map on the path a.b.c", None, "found: java.lang.Long"]),
    ("missing", "V1", [None, None, None, None], [None, None, None, "found: java.lang.Long"]),
])
def test_schemaless_variant_entry_as_kafkas_map(make_records, field, version, expected, failed):
    """A VARIANT value (JsonConverter schemas.enable=false): the entry at the path, null where missing; a value or
    an object on the path that is not an object fails the record; a tombstone stays null."""
    from pyspark.sql import functions as F

    df = make_records([("k", t) for t in ('{"a":{"b":{"c":5}}}', '{"a":{"b":[1]}}', None, "7")], tolerant=True)
    df = df.withColumn("value", F.try_parse_json("value"))
    out = df.transform(ExtractField.Value(field=field, **{"field.syntax.version": version}))
    rows = out.select(F.to_json("value").alias("j"), "_kc_error").orderBy("offset").collect()
    assert [r.j for r in rows] == expected
    assert [m if m is None else next(f for f in failed if f and f in m) for m in errors(rows)] == failed
