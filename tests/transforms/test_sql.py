import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import SqlTransform, apply_transforms
from spark_connect_bridge.transforms.sql import split_select

VT = "struct<id:int,name:string>"


def test_filter_and_select_from_config(make_records):
    df = make_records([{"value": {"id": 1, "name": "a"}, "topic": "t"}, {"value": {"id": 2, "name": "b"}},
                       {"value": None}], value_type=VT)
    out = apply_transforms(df, {
        "transforms": "q", "transforms.q.type": "Sql",
        "transforms.q.filter": "value.id > 1 OR value IS NULL",
        "transforms.q.select": "named_struct('id', value.id, 'up', upper(value.name)) AS value, "
                               "concat(topic, '-v2') AS topic"})
    rows = out.collect()
    assert [(r["value"] and r["value"].asDict(), r["topic"]) for r in rows] == [
        ({"id": 2, "up": "B"}, "t-v2"), ({"id": None, "up": None}, "t-v2")]


def test_primitive_key_rewrite(make_records):
    df = make_records([("k", "v")])
    assert df.transform(SqlTransform(select="upper(key) AS key")).collect()[0]["key"] == "K"


def test_split_select_respects_nesting_and_quotes():
    assert split_select("a, f(b, c) AS x, 'x,y' AS z") == ["a", "f(b, c) AS x", "'x,y' AS z"]


def test_non_record_column_and_bad_column_are_config_errors(make_records):
    df = make_records([("k", "v")])
    with pytest.raises(ConfigError, match="not a record column"):
        df.transform(SqlTransform(select="upper(key) AS kk"))
    with pytest.raises(ConfigError) as e:
        apply_transforms(df, {"transforms": "q", "transforms.q.type": "Sql", "transforms.q.filter": "nope > 1"})
    assert e.value.keys == ["transforms.q.filter"]


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "", "Nothing to do"),
    ({"filter": "a >"}, "filter", "Invalid value a > for configuration filter"),
    ({"select": "upper(key AS key"}, "select", "Invalid value upper(key AS key for configuration select"),
])
def test_config_errors(spark, config, key, fragment):
    with pytest.raises(ConfigError) as e:
        SqlTransform(config)
    assert e.value.keys == [key] and fragment in str(e.value)
