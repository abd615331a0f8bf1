"""Debezium's ExtractChangedRecordState: update events get headers naming their changed and unchanged fields; the
PostgreSQL differential test (tests/differential/test_debezium_postgres.py, "dbz-changed") compares it with
Debezium's own class over a real workload."""

import json

import pytest

from spark_connect_bridge.core.topic_schemas import TABLES_META
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ExtractNewRecordState, apply_transforms
from spark_connect_bridge.transforms.extract_changed_record_state import ExtractChangedRecordState

from .conftest import header_dict

ROW = "struct<id:int,name:string,tags:array<string>,photo:binary>"
ENV = f"struct<before:{ROW},after:{ROW},source:struct<db:string,table:string>,op:string,ts_ms:bigint>"
SRC = {"db": "test", "table": "t"}
BOTH = {"header.changed.name": "changed", "header.unchanged.name": "unchanged"}


def _events(make_records):
    a = {"id": 1, "name": "a", "tags": ["x"], "photo": b"\x01"}
    rows = [
        {"key": "1", "value": {"before": None, "after": a, "source": SRC, "op": "c", "ts_ms": 5}},
        {"key": "1", "value": {"before": a, "after": {**a, "name": "b", "tags": ["x", "y"]}, "source": SRC,
                               "op": "u", "ts_ms": 6}},
        {"key": "1", "value": {"before": a, "after": {**a, "name": None, "photo": b"\x02"}, "source": SRC,
                               "op": "u", "ts_ms": 7}},
        {"key": "1", "value": {"before": None, "after": a, "source": SRC, "op": "u", "ts_ms": 8}},
        {"key": "1", "value": {"before": a, "after": None, "source": SRC, "op": "d", "ts_ms": 9}},
        {"key": "1", "value": None},
    ]
    df = make_records(rows, value_type=ENV)
    return df.withMetadata("value", {"connect.name": "srv.public.t.Envelope"})


def test_updates_get_changed_and_unchanged_field_headers(make_records):
    out = _events(make_records).transform(ExtractChangedRecordState(BOTH))
    empty = [("changed", b"[]"), ("unchanged", b"[]")]
    assert [header_dict(r) for r in out.collect()] == [
        empty, [("changed", b'["name","tags","photo"]'), ("unchanged", b'["id"]')],
        [("changed", b'["name","photo"]'), ("unchanged", b'["id","tags"]')],
        empty, empty, []]  # Debezium 3.6: empty lists for a create, an update without its old row, a delete; none
    # for a tombstone; a bytes field with the same bytes counts as changed (Java compares byte arrays by identity)


def test_bytes_count_as_changed_unless_both_are_null_or_empty(make_records):
    # Debezium compares with Objects.equals: two byte arrays are equal when they are one array, which Kafka's
    # JsonConverter makes of every empty one (seen beside Debezium 3.6.1 by the differential fuzzer)
    rows = [{"key": "1", "value": {"before": {"id": 1, "photo": old}, "after": {"id": 1, "photo": new},
                                   "source": SRC, "op": "u", "ts_ms": 5}}
            for old, new in ((b"\x01", b"\x01"), (b"", b""), (None, None), (b"", None))]
    row = "struct<id:int,photo:binary>"
    df = make_records(rows, value_type=f"struct<before:{row},after:{row},source:struct<db:string,table:string>,"
                                       f"op:string,ts_ms:bigint>").withMetadata(
        "value", {"connect.name": "srv.public.t.Envelope"})
    out = df.transform(ExtractChangedRecordState({"header.changed.name": "changed"})).collect()
    assert [header_dict(r) for r in out] == [[("changed", b'["photo"]')], [("changed", b"[]")],
                                             [("changed", b"[]")], [("changed", b'["photo"]')]]


def test_a_cdc_connectors_tombstone_carries_its_deletes_headers(make_records):
    """Debezium builds a delete's tombstone with the delete's header object and Kafka Connect transforms the delete
    first, so the tombstone carries the delete's (empty) lists; seen beside Debezium 3.6.1 in the PostgreSQL
    differential ("dbz-keys"). A tombstone of any other envelope input keeps its headers."""
    tables = {"public.t": {"topic": "t", "columns": ["id", "name", "tags", "photo"],
                           "fields": ["id", "name", "tags", "photo"], "key": ["id"]}}
    df = _events(make_records).withMetadata("value", {"connect.name": "srv.public.t.Envelope",
                                                      TABLES_META: json.dumps(tables)})
    out = [header_dict(r) for r in df.transform(ExtractChangedRecordState(BOTH)).collect()]
    assert out[-2:] == [[("changed", b"[]"), ("unchanged", b"[]")]] * 2


def test_only_the_configured_header_is_added(make_records):
    out = _events(make_records).transform(ExtractChangedRecordState({"header.unchanged.name": "same"}))
    assert [header_dict(r) for r in out.collect()][:3] == [[("same", b"[]")], [("same", b'["id"]')],
                                                           [("same", b'["id","tags"]')]]
    untouched = _events(make_records).transform(ExtractChangedRecordState({}))
    assert all(header_dict(r) == [] for r in untouched.collect())


def test_extract_new_record_state_drops_the_unchanged_fields_it_lists(make_records):
    """Debezium's documented pair: the unchanged fields listed by this SMT are dropped (here: nulled) by
    ExtractNewRecordState's drop.fields.header.name."""
    out = apply_transforms(_events(make_records), [ExtractChangedRecordState({"header.unchanged.name": "same"}),
                                                   ExtractNewRecordState({"drop.fields.header.name": "same"})])
    rows = {r["offset"]: r["value"] for r in out.collect()}
    assert rows[1].asDict() == {"id": None, "name": "b", "tags": ["x", "y"], "photo": b"\x01"}


def test_values_that_are_not_envelopes_pass_through(make_records):
    df = make_records([{"key": "1", "value": {"id": 1}}], value_type="struct<id:int>")
    assert header_dict(df.transform(ExtractChangedRecordState(BOTH)).first()) == []


def test_an_unknown_key_is_refused_as_a_misspelling():
    with pytest.raises(ConfigError, match=r"header\.changed\.name"):
        ExtractChangedRecordState({"header.changd.name": "x"})
