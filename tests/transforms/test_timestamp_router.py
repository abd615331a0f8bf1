import datetime as dt

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import TimestampRouter

from .conftest import errors


def test_default_format_routes_by_day(make_records):
    df = make_records([{"value": "v", "topic": "orders"}, {"value": None, "topic": "orders",
                                                          "timestamp": dt.datetime(2023, 12, 31, 23, 59,
                                                                                   tzinfo=dt.UTC)}])
    assert [r["topic"] for r in df.transform(TimestampRouter()).collect()] == ["orders-20240506", "orders-20231231"]


def test_every_placeholder_replaced(make_records):
    df = make_records([{"value": {"a": 1}, "topic": "t"}], value_type="struct<a:int>")
    out = df.transform(TimestampRouter(topic_format="${topic}_${timestamp}_${topic}", timestamp_format="yyyy-MM"))
    assert out.collect()[0]["topic"] == "t_2024-05_t"


def test_record_without_timestamp_fails(make_records):
    df = make_records([{"value": "v", "timestamp": None}], tolerant=True)
    assert "Timestamp missing" in errors(df.transform(TimestampRouter()).collect())[0]


@pytest.mark.parametrize("config, key, fragment", [
    ({"timestamp.format": "YYYY"}, "timestamp.format", "week-based year"),
    ({"topic.fromat": "x"}, "topic.fromat", 'did you mean "topic.format"'),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        TimestampRouter(config)
    assert e.value.keys == [key] and fragment in str(e.value)
