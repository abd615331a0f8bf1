"""FileStreamSink's lines: the text Kafka Connect prints for each value (``core/connect_text.py``), type by type.
The differential tests compare whole lines with Kafka Connect's (test_dead_letters, test_schemaless_sink_smts)."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from spark_connect_bridge.connectors.file import _lines
from spark_connect_bridge.core.connect_text import connect_text


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.0"), (1.5, "1.5"), (100.0, "100.0"), (0.001, "0.001"), (2.5e-4, "2.5E-4"), (9999999.0, "9999999.0"),
    (1e7, "1.0E7"), (1e10, "1.0E10"), (1e-5, "1.0E-5"), (-0.0, "-0.0"), (1 / 3, "0.3333333333333333"),
    (float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"),
])
def test_doubles_print_as_javas_double_to_string(value, text):
    assert connect_text(pa.array([value], pa.float64())).to_pylist() == [text]


def test_floats_print_their_own_shortest_digits():
    assert connect_text(pa.array([1 / 3, 123456.789], pa.float32())).to_pylist() == ["0.33333334", "123456.79"]


def test_decimals_print_as_big_decimal_to_string():
    values = [decimal.Decimal("1.50000000"), decimal.Decimal("0.00000010"), decimal.Decimal(0), None]
    assert connect_text(pa.array(values, pa.decimal128(10, 8))).to_pylist() == ["1.50000000", "1.0E-7", "0E-8", None]


def test_dates_and_timestamps_print_as_java_util_date_in_utc():
    dates = pa.array([datetime.date(1970, 1, 1), datetime.date(2024, 2, 29)])
    assert connect_text(dates).to_pylist() == ["Thu Jan 01 00:00:00 UTC 1970", "Thu Feb 29 00:00:00 UTC 2024"]
    stamps = pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5, 999000)], pa.timestamp("us", tz="UTC"))
    assert connect_text(stamps).to_pylist() == ["Tue Jan 02 03:04:05 UTC 2024"]


def test_a_struct_is_connects_struct_text_without_its_null_fields():
    rows = pa.array([{"n": 1, "s": "x", "b": True, "l": [1, None], "inner": {"x": None}},
                     None, {"n": None, "s": None, "b": None, "l": None, "inner": None}])
    assert connect_text(rows).to_pylist() == ["Struct{n=1,s=x,b=true,l=[1, null],inner=Struct{}}", None, "Struct{}"]


def test_a_schemaless_struct_is_the_hash_map_kafkas_json_converter_reads():
    """The order is java.util.HashMap's for these keys (a table of 16): as Kafka Connect 4.3 printed the same
    message in tests/differential/test_schemaless_sink_smts.py."""
    row = {"id": 1, "name": "ada", "ts": 1_700_000_000_000, "tags": ["a", "b"],
           "addr": {"city": "Oslo", "zip": "0150"}, "secret": "s1"}
    assert connect_text(pa.array([row]), schemaless=True).to_pylist() == [
        "{name=ada, id=1, secret=s1, addr={zip=0150, city=Oslo}, ts=1700000000000, tags=[a, b]}"]


def test_maps_and_lists_print_their_entries_with_nulls():
    maps = pa.array([[("a", 1), ("b", None)], None, []], pa.map_(pa.string(), pa.int32()))
    assert connect_text(maps).to_pylist() == ["{a=1, b=null}", None, "{}"]
    lists = pa.array([[], None, [None, "x"]], pa.list_(pa.string()))
    assert connect_text(lists).to_pylist() == ["[]", None, "[null, x]"]


def test_sink_lines_write_null_for_a_null_value_and_binary_as_utf8():
    assert _lines(pa.array([b"caf\xc3\xa9", None]), False) == "café\nnull\n".encode()
    assert _lines(pa.array([{"n": 1}, None]), False) == b"Struct{n=1}\nnull\n"
