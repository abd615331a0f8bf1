import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import (
    Filter,
    HasHeaderKey,
    RecordIsTombstone,
    TopicNameMatches,
)


def test_predicates_as_columns(make_records):
    df = make_records([{"value": "v", "topic": "orders", "headers": [("trace", b"1")]},
                       {"value": None, "topic": "orders-dlq", "headers": None},
                       {"value": "v", "topic": None, "headers": [("x", None)]}])
    out = df.select(TopicNameMatches(pattern="orders").test(df).alias("t"),
                    HasHeaderKey(name="trace").test(df).alias("h"),
                    RecordIsTombstone().test(df).alias("ts"))
    assert [tuple(r) for r in out.collect()] == [(True, True, False), (False, False, True), (False, False, False)]


def test_filter_with_predicate_and_negate(make_records):
    df = make_records([{"value": "a", "topic": "keep"}, {"value": "b", "topic": "drop"},
                       {"value": None, "topic": "keep"}])
    kept = df.transform(Filter(predicate=TopicNameMatches(pattern="drop")))
    assert [r["value"] for r in kept.collect()] == ["a", None]
    only = df.transform(Filter(predicate=TopicNameMatches(pattern="drop"), negate=True))
    assert [r["value"] for r in only.collect()] == ["b"]


def test_filter_without_predicate_drops_everything(make_records):
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="struct<a:int>")
    assert df.transform(Filter()).count() == 0


def test_negate_without_predicate_is_an_error():
    with pytest.raises(ConfigError, match="negate is only allowed together with a predicate"):
        Filter(negate=True)


@pytest.mark.parametrize("cls, config, key, fragment", [
    (TopicNameMatches, {}, "pattern", "Missing required configuration"),
    (TopicNameMatches, {"pattern": ""}, "pattern", "String may not be empty"),
    (TopicNameMatches, {"pattern": "(x"}, "pattern", "Invalid regex"),
    (HasHeaderKey, {}, "name", "Missing required configuration"),
    (HasHeaderKey, {"name": " "}, "name", "String may not be empty"),
])
def test_config_errors(spark, cls, config, key, fragment):
    with pytest.raises(ConfigError) as e:
        cls(config)
    assert e.value.keys == [key] and fragment in str(e.value)


@pytest.mark.parametrize("cls", [RecordIsTombstone, Filter])
def test_unknown_key_warns_as_kafka_accepts_it(cls, caplog):
    assert [w.key for w in cls({"x": "1"}).config.warnings] == ["x"]
    assert 'Unknown configuration "x" is ignored' in caplog.text
