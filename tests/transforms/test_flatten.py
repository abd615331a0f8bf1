import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import Flatten

from .conftest import errors


def test_nested_structs_flattened_arrays_kept(make_records):
    vt = "struct<a:int,b:struct<c:string,d:struct<e:int>>,arr:array<struct<x:int>>>"
    df = make_records([("k", {"a": 1, "b": {"c": "x", "d": {"e": 2}}, "arr": [{"x": 1}]}),
                       ("k", {"a": 2, "b": None, "arr": None})], value_type=vt)
    out = df.transform(Flatten.Value(delimiter="_"))
    assert out.schema["value"].dataType.simpleString() == \
        "struct<a:int,b_c:string,b_d_e:int,arr:array<struct<x:int>>>"
    rows = [r["value"].asDict() for r in out.collect()]
    assert rows[0] == {"a": 1, "b_c": "x", "b_d_e": 2, "arr": [(1,)]}
    assert rows[1] == {"a": 2, "b_c": None, "b_d_e": None, "arr": None}


def test_default_delimiter_is_dot(make_records):
    df = make_records([("k", {"b": {"c": 1}})], value_type="struct<b:struct<c:int>>")
    assert df.transform(Flatten.Value()).schema["value"].dataType.fieldNames() == ["b.c"]


def test_tombstone_passes_through(make_records):
    df = make_records([("k", None)], value_type="struct<b:struct<c:int>>")
    assert df.transform(Flatten.Value()).collect()[0]["value"] is None


def test_schemaless_nested_maps(make_records):
    df = make_records([("k", {"a": {"x": 1, "y": 2}, "b": None, "c": {}})],
                      value_type="map<string,map<string,bigint>>")
    assert df.transform(Flatten.Value()).collect()[0]["value"] == {"a.x": 1, "a.y": 2, "b": None}


def test_map_inside_struct_fails_every_record_with_a_value(make_records):
    # Kafka fails while building the flattened schema, so a null map fails too (found by the differential fuzzer)
    df = make_records([("k", {"m": {"a": 1}}), ("k", {"m": None}), ("k", None)], value_type="struct<m:map<string,int>>",
                      tolerant=True)
    msgs = errors(df.transform(Flatten.Value()).collect())
    text = "Flatten transformation does not support MAP for record with schemas (for field m)."
    assert text in msgs[0] and text in msgs[1]
    assert msgs[2] is None


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v")], tolerant=True)
    assert errors(df.transform(Flatten.Value()).collect())[0] is not None


def test_key_variant(make_records):
    df = make_records([({"a": {"b": 1}}, "v")], key_type="struct<a:struct<b:int>>")
    row = df.transform(Flatten.Key()).collect()[0]
    assert row["key"]["a.b"] == 1 and row["value"] == "v"


@pytest.mark.parametrize("config, key, fragment", [
    ({"delimeter": "_"}, "delimeter", 'did you mean "delimiter"'),
    ({"delimiter": 5}, "delimiter", "Expected value to be a string"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        Flatten.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


def test_dotted_names_work_in_later_smts(make_records):
    from spark_connect_bridge.transforms import (
        Cast,
        InsertField,
        MaskField,
        ReplaceField,
    )

    df = make_records([("k", {"a": 1, "b": {"c": "x", "d": 2}})],
                      value_type="struct<a:int,b:struct<c:string,d:int>>")
    out = (df.transform(Flatten.Value()).transform(MaskField.Value(fields="b.c"))
           .transform(Cast.Value(spec="b.d:string")).transform(InsertField.Value(static_field="x.y", static_value="s"))
           .transform(ReplaceField.Value(renames="a:z.z", exclude="x.y")))
    assert out.schema["value"].dataType.fieldNames() == ["z.z", "b.c", "b.d"]
    assert out.collect()[0]["value"].asDict() == {"z.z": 1, "b.c": "", "b.d": "2"}
