import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ReplaceField, apply_transforms

from .conftest import errors

VALUE = "struct<a:int,b:string,c:double>"


def test_struct_value_exclude_include_and_rename(make_records):
    df = make_records([("k", {"a": 1, "b": "x", "c": 2.0})], value_type=VALUE)
    out = df.transform(ReplaceField.Value(exclude=["c"], renames=["a:aa", "b:bb"]))
    assert out.schema["value"].dataType.simpleString() == "struct<aa:int,bb:string>"
    assert out.collect()[0]["value"].asDict() == {"aa": 1, "bb": "x"}


def test_include_keeps_only_listed_and_exclude_wins(make_records):
    df = make_records([("k", {"a": 1, "b": "x", "c": 2.0})], value_type=VALUE)
    out = df.transform(ReplaceField.Value(include="a,b", exclude="b"))
    assert out.collect()[0]["value"].asDict() == {"a": 1}


def test_tombstone_passes_through(make_records):
    df = make_records([("k", None)], value_type=VALUE)
    assert df.transform(ReplaceField.Value(exclude="a")).collect()[0]["value"] is None


def test_key_variant_changes_key_only(make_records):
    df = make_records([({"a": 1, "b": "x", "c": 1.0}, {"a": 2, "b": "y", "c": 2.0})], key_type=VALUE,
                      value_type=VALUE)
    row = df.transform(ReplaceField.Key(exclude=["b", "c"])).collect()[0]
    assert row["key"].asDict() == {"a": 1}
    assert row["value"].asDict() == {"a": 2, "b": "y", "c": 2.0}


def test_schemaless_map_filter_and_rename(make_records):
    df = make_records([("k", {"a": "1", "b": "2", "c": "3"}), ("k", None)], value_type="map<string,string>")
    rows = df.transform(ReplaceField.Value(exclude=["c"], renames=["a:b"])).collect()
    assert rows[0]["value"] == {"b": "1"}
    assert rows[1]["value"] is None


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "plain"), ("k", None)], value_type="string", tolerant=True)
    rows = df.transform(ReplaceField.Value(exclude="a")).collect()
    msgs = errors(rows)
    assert "Only Struct or Map" in msgs[0] and "offset=0" in msgs[0]
    assert msgs[1] is None


def test_from_config_with_kafka_class_name(make_records):
    df = make_records([("k", {"a": 1, "b": "x", "c": 2.0})], value_type=VALUE)
    out = apply_transforms(df, {"transforms": "r",
                                "transforms.r.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
                                "transforms.r.include": "c"})
    assert out.collect()[0]["value"].asDict() == {"c": 2.0}


@pytest.mark.parametrize("config, key, fragment", [
    ({"renames": "a:b:c"}, "renames", "Invalid rename mapping"),
    ({"renames": "ab"}, "renames", "Invalid rename mapping"),
    ({"whitelist": "a", "include": "b"}, "whitelist", "old spelling of include"),
    ({"exclud": "a"}, "exclud", 'did you mean "exclude"'),
    ({"replace.null.with.default": "maybe"}, "replace.null.with.default", "true or false"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        ReplaceField.Value(config)
    assert e.value.keys == [key]
    assert fragment in str(e.value)


def test_old_spellings_whitelist_blacklist_read_as_include_exclude_with_a_warning(caplog):
    smt = ReplaceField.Value({"whitelist": "a,b", "blacklist": "b"})
    assert smt.include == {"a", "b"} and smt.exclude == {"b"}
    assert "whitelist is deprecated" in caplog.text and "read as include" in caplog.text


def test_rename_keeps_field_order_and_metadata(make_records):
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    md = {"connect.name": "org.apache.kafka.connect.data.Time"}
    vt = StructType([StructField("a", IntegerType()), StructField("b", IntegerType(), True, md),
                     StructField("c", StringType()), StructField("d", StringType())])
    df = make_records([("k", {"a": 1, "b": 2, "c": "x", "d": "y"}), ("k", None)], value_type=vt)
    out = df.transform(ReplaceField.Value(renames="b:bb,d:dd", exclude="c"))
    st = out.schema["value"].dataType
    assert st.fieldNames() == ["a", "bb", "dd"] and st["bb"].metadata == md
    assert [r["value"] and r["value"].asDict() for r in out.collect()] == [{"a": 1, "bb": 2, "dd": "y"}, None]


def _json_values(make_records, texts):
    """A record DataFrame whose value is a schemaless VARIANT (JsonConverter schemas.enable=false)."""
    from pyspark.sql import functions as F

    df = make_records([("k", t) for t in texts], value_type="string", tolerant=True)
    return df.withColumn("value", F.try_parse_json("value"))


def test_schemaless_variant_object_filtered_and_renamed_as_kafkas_map(make_records):
    from pyspark.sql import functions as F

    df = _json_values(make_records, ['{"a":1,"b":{"x":null},"c":"3"}', None, "[1,2]"])
    out = df.transform(ReplaceField.Value(exclude=["c"], renames=["a:z"]))
    rows = out.select(F.to_json("value").alias("j"), "_kc_error").orderBy("offset").collect()
    assert [r.j for r in rows] == ['{"b":{"x":null},"z":1}', None, None]
    msgs = errors(rows)
    assert msgs[0] is None and msgs[1] is None
    assert "Only Map objects supported in absence of schema for [field replacement], found: java.util.ArrayList" \
        in msgs[2]
