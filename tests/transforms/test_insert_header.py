import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import InsertHeader
from spark_connect_bridge.transforms.values import parse_literal_to_string

from .conftest import header_dict


def test_header_appended_to_every_record_tombstones_included(make_records):
    df = make_records([{"key": "k", "value": "v", "headers": [("h", b"0")]},
                       {"key": "k", "value": None, "headers": None}])
    rows = df.transform(InsertHeader(header="h", value_literal="hello")).collect()
    assert header_dict(rows[0]) == [("h", b"0"), ("h", b"hello")]
    assert header_dict(rows[1]) == [("h", b"hello")]


def test_struct_value_untouched(make_records):
    df = make_records([("k", {"a": 1})], value_type="struct<a:int>")
    row = df.transform(InsertHeader(header="n", value_literal="+007")).collect()[0]
    assert header_dict(row) == [("n", b"7")] and row["value"].a == 1


@pytest.mark.parametrize("literal, text", [
    ("1", "1"), ("+007", "7"), ("1.50", "1.5"), ("true", "true"), ("[1, 2]", "[1,2]"), ('{"a": "x"}', '{"a":"x"}'),
    ("hello world", "hello world"), ("2024-01-02", "2024-01-02"),
])
def test_literal_written_as_connect_prints_it(literal, text):
    assert parse_literal_to_string(literal) == text


@pytest.mark.parametrize("config, key", [
    ({"value.literal": "x"}, "header"),
    ({"header": "h"}, "value.literal"),
])
def test_config_errors(config, key):
    with pytest.raises(ConfigError) as e:
        InsertHeader(config)
    assert e.value.keys == [key] and "Missing required configuration" in str(e.value)
