import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import DropHeaders

from .conftest import header_dict


def test_removes_every_occurrence_and_keeps_order(make_records):
    hs = [("a", b"1"), ("b", b"2"), ("a", b"3"), ("c", None)]
    df = make_records([{"key": "k", "value": "v", "headers": hs}, {"key": "k", "value": None, "headers": None}])
    rows = df.transform(DropHeaders(headers="a")).collect()
    assert header_dict(rows[0]) == [("b", b"2"), ("c", None)]
    assert rows[1]["headers"] is None  # a tombstone without headers keeps null headers


def test_struct_value_untouched(make_records):
    df = make_records([{"key": "k", "value": {"x": 1}, "headers": [("x", b"1")]}], value_type="struct<x:int>")
    row = df.transform(DropHeaders(headers=["x", "y"])).collect()[0]
    assert row["value"].x == 1 and row["headers"] == []


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "headers", "Missing required configuration"),
    ({"headers": ""}, "headers", "Empty list"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        DropHeaders(config)
    assert e.value.keys == [key] and fragment in str(e.value)
