"""The storage layer without a store: JSON text as Kafka's JsonConverter writes it, the partitioners' directories,
which records go into which object (flush.size, rotate.interval.ms), and Confluent's object names."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from spark_connect_bridge.connectors.storage.json_lines import json_text
from spark_connect_bridge.connectors.storage.layout import object_key, plan_chunks
from spark_connect_bridge.connectors.storage.partitioners import (
    DefaultPartitioner,
    FieldPartitioner,
    TimeBasedPartitioner,
    joda_to_strftime,
)
from spark_connect_bridge.errors import DataError

HOUR = 3_600_000


def _table(offsets, times_ms, values, partition=0, topic="t"):
    n = len(offsets)
    return pa.table({"topic": [topic] * n, "partition": pa.array([partition] * n, pa.int32()),
                     "offset": pa.array(offsets, pa.int64()),
                     "timestamp": pa.array(times_ms, pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
                     "value": pa.array(values)})


def _chunks(table, encoded, **kwargs):
    return [(c.encoded, c.start_offset, c.rows.tolist()) for c in plan_chunks(table, encoded, **kwargs)]


# ------------------------------------------------------------------------------------------ JSON
@pytest.mark.parametrize(("values", "expected"), [
    (pa.array(['a"b', "back\\slash", "line\nbreak\ttab", "\x01", "é€", None]),
     ['"a\\"b"', '"back\\\\slash"', '"line\\nbreak\\ttab"', '"\\u0001"', '"é€"', "null"]),
    (pa.array(["\x1f\n", "\x0b"]), ['"\\u001F\\n"', '"\\u000B"']),  # Jackson's hex is upper-case
    (pa.array([True, False, None]), ["true", "false", "null"]),
    (pa.array([1.0, 0.5, 1e10, 1e-5, float("nan"), float("inf")]),
     ["1.0", "0.5", "1.0E10", "1.0E-5", '"NaN"', '"Infinity"']),
    (pa.array([b"\x00\xff"]), ['"AP8="']),
    (pa.array([decimal.Decimal("-1.50")], pa.decimal128(5, 2)), ['"/2o="']),
    (pa.array([datetime.datetime(1970, 1, 1, 0, 0, 1, 500, tzinfo=datetime.timezone.utc)],
              pa.timestamp("us", tz="UTC")), ["1000"]),
    (pa.array([datetime.datetime(1969, 12, 31, 23, 59, 59, 999500), None], pa.timestamp("us")), ["-1", "null"]),
    (pa.array([datetime.date(1970, 1, 11)]), ["10"]),
    (pa.array([[1, None], [], None], pa.list_(pa.int32())), ["[1,null]", "[]", "null"]),
    (pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())), ['{"k":1}', "{}"]),
    (pa.array([[(1, "x")]], pa.map_(pa.int32(), pa.string())), ['[[1,"x"]]']),
])
def test_json_text_is_what_kafkas_json_converter_writes_without_schemas(values, expected):
    assert json_text(values).to_pylist() == expected


def test_a_struct_with_a_schema_keeps_its_null_fields_a_schemaless_one_drops_them():
    value = pa.array([{"id": 1, "name": None, "tags": {"a": None}}])
    assert json_text(value).to_pylist() == ['{"id":1,"name":null,"tags":{"a":null}}']
    assert json_text(value, schemaless=True).to_pylist() == ['{"id":1,"tags":{}}']


def test_numeric_decimal_format_writes_numbers():
    values = pa.array([decimal.Decimal("-1.50")], pa.decimal128(5, 2))
    assert json_text(values, decimal_numeric=True).to_pylist() == ["-1.50"]


# ------------------------------------------------------------------------------------------ partitioners
@pytest.mark.parametrize(("joda", "strftime"), [
    ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "year=%Y/month=%m/day=%d/hour=%H"),
    ("yyyy-MM-dd", "%Y-%m-%d"),
    ("'it''s'", "it's"),
    ("'100%'/yy", "100%%/%y"),
])
def test_joda_patterns_become_strftime(joda, strftime):
    assert joda_to_strftime(joda) == strftime


def test_an_unsupported_joda_letter_is_refused_by_name():
    with pytest.raises(ValueError, match="'ww'"):
        joda_to_strftime("YYYY/ww")


def test_time_partitions_floor_in_the_zone_of_the_partitioner():
    # 2024-03-31 00:59:59.999 UTC is 01:59 in Paris (CET, +1), 2024-03-31 01:00 UTC is 03:00 (CEST, +2)
    at = int(datetime.datetime(2024, 3, 31, 0, 59, 59, 999000, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    table = _table([0, 1], [at, at + 1], [{"x": 1}, {"x": 2}])
    daily = TimeBasedPartitioner("YYYY-MM-dd/HH", 86_400_000, "Europe/Paris", "Record")
    hourly = TimeBasedPartitioner("YYYY-MM-dd/HH", HOUR, "Europe/Paris", "Record")
    assert daily.encode(table, 0).to_pylist() == ["2024-03-31/00", "2024-03-31/00"]
    assert hourly.encode(table, 0).to_pylist() == ["2024-03-31/01", "2024-03-31/03"]


def test_the_wallclock_extractor_uses_the_time_of_the_write():
    table = _table([0], [0], [{"x": 1}])
    assert TimeBasedPartitioner("YYYY", HOUR, "UTC", "Wallclock").encode(table, 946_684_800_000).to_pylist() == \
        ["2000"]


def test_a_record_without_its_partition_field_fails_naming_the_field():
    table = _table([0], [0], [{"x": 1}])
    with pytest.raises(DataError, match="no field 'region'"):
        FieldPartitioner(("region",)).encode(table, 0)


def test_a_null_record_time_fails_naming_the_record():
    table = _table([7], [0], [{"at": None}])
    table = table.set_column(4, "value", pa.array([{"at": None}], pa.struct([("at", pa.int64())])))
    with pytest.raises(DataError, match="offset=7"):
        TimeBasedPartitioner("YYYY", HOUR, "UTC", "RecordField", "at").encode(table, 0)


# ------------------------------------------------------------------------------------------ rotation and names
def test_flush_size_commits_every_directory_of_a_partition_together():
    table = _table(range(10, 15), [0] * 5, [{"k": k} for k in "abaab"])
    encoded = FieldPartitioner(("k",)).encode(table, 0)
    assert _chunks(table, encoded, flush_size=3) == [("k=a", 10, [0, 2]), ("k=b", 11, [1]),
                                                     ("k=a", 13, [3]), ("k=b", 14, [4])]


def test_rotate_interval_cuts_on_record_time_and_on_a_new_directory():
    times = [0, HOUR - 1, HOUR + 10, HOUR + 20, 3 * HOUR]
    table = _table(range(5), times, [{"k": 1}] * 5)
    hourly = TimeBasedPartitioner("HH", HOUR, "UTC", "Record")
    # 1 h after the first record of the open file, or a record of another hour: a new file
    assert _chunks(table, hourly.encode(table, 0), flush_size=100, rotate_interval_ms=HOUR,
                   times=hourly.record_times(table, 0)) == [("00", 0, [0, 1]), ("01", 2, [2, 3]), ("03", 4, [4])]
    daily = TimeBasedPartitioner("dd", 86_400_000, "UTC", "Record")
    assert _chunks(table, daily.encode(table, 0), flush_size=100, rotate_interval_ms=HOUR + 15,
                   times=daily.record_times(table, 0)) == [("01", 0, [0, 1, 2]), ("01", 3, [3]), ("01", 4, [4])]


def test_partitions_and_topics_get_their_own_objects():
    table = pa.concat_tables([_table([5, 6], [0, 0], [{"k": 1}] * 2, partition=1),
                              _table([0], [0], [{"k": 1}], partition=0, topic="u")])
    table = table.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    assert _chunks(table, DefaultPartitioner().encode(table, 0), flush_size=10) == [
        ("partition=1", 5, [0, 1]), ("partition=0", 0, [2])]


def test_object_names_are_confluents():
    assert object_key("topics", "orders", "partition=3", 3, 12345, ".snappy.parquet") == \
        "topics/orders/partition=3/orders+3+0000012345.snappy.parquet"
    assert object_key("a/b", "t", "x=1", 0, 7, ".bin", directory_delim="/", file_delim="_", pad_width=3) == \
        "a/b/t/x=1/t_0_007.bin"
    assert object_key("topics", "t", "partition=0", 0, 123456789012, ".json") == \
        "topics/t/partition=0/t+0+123456789012.json"


def test_chunk_rows_are_numpy_indices():
    table = _table([0, 1], [0, 0], [{"k": 1}] * 2)
    chunk = next(plan_chunks(table, DefaultPartitioner().encode(table, 0), flush_size=5))
    assert chunk.rows.dtype == np.int64


def test_a_tasks_records_in_any_order_make_the_same_objects():
    from spark_connect_bridge.connectors.storage.common import StorageLayout, write_objects
    from spark_connect_bridge.connectors.storage.formats import JsonFormat

    layout = StorageLayout(DefaultPartitioner(), JsonFormat(), flush_size=2, rotate_interval_ms=-1,
                           topics_dir="topics", directory_delim="/", file_delim="+", pad_width=10, null_values="fail")
    table = pa.concat_tables([_table([3, 4, 5], [0] * 3, [{"k": i} for i in (3, 4, 5)], partition=1),
                              _table([0, 1], [0] * 2, [{"k": i} for i in (0, 1)], partition=0)])
    written: list[dict[str, bytes]] = []
    for order in (list(range(5)), [4, 0, 3, 1, 2]):
        objects: dict[str, bytes] = {}
        write_objects(iter(table.take(order).to_batches()), layout, objects.__setitem__, 0)
        written.append(objects)
    assert written[0] == written[1] == {
        "topics/t/partition=0/t+0+0000000000.json": b'{"k":0}\n{"k":1}\n',
        "topics/t/partition=1/t+1+0000000003.json": b'{"k":3}\n{"k":4}\n',
        "topics/t/partition=1/t+1+0000000005.json": b'{"k":5}\n'}
