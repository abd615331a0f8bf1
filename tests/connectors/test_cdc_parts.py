"""The database-independent parts of the CDC connectors (connectors/cdc/), without a database: the filter
language, the signal state machine, the executor's chunk windows and the batch-end arithmetic."""

from __future__ import annotations

import json
import logging

import pytest

from spark_connect_bridge.connectors.cdc.batch_end import Heartbeat, end_by_bytes, last_commit_within
from spark_connect_bridge.connectors.cdc.filters import parse_filter
from spark_connect_bridge.connectors.cdc.layout import build_layout
from spark_connect_bridge.connectors.cdc.signals import CLOSE, OPEN, ChunkWindows, fold, state_of, state_text
from spark_connect_bridge.connectors.cdc.types import TypeSpec
from spark_connect_bridge.errors import ConnectError

LAYOUT = build_layout("shop", [
    ("public", "orders", [("id", TypeSpec("int32"), 1), ("status", TypeSpec("string"), 0),
                          ("qty", TypeSpec("int32"), 0)]),
    ("public", "items", [("sku", TypeSpec("string"), 1)]),
    ("public", "log", [("msg", TypeSpec("string"), 0)]),
])
ORDERS = LAYOUT.table("public", "orders")


def _signal(kind: str, data: object = "", sid: str = "s1") -> dict:
    return {"id": sid, "type": kind, "data": data if isinstance(data, str) else json.dumps(data)}


def _execute(*tables: str, **extra: object) -> dict:
    return _signal("execute-snapshot", {"data-collections": list(tables), "type": "incremental", **extra})


@pytest.mark.parametrize("text,conditions", [
    ("qty > 10", [("qty", ">", ["10"])]),
    ("qty != 3 and status = 'it''s'", [("qty", "<>", ["3"]), ("status", "=", ["it's"])]),
    ("status IS NOT NULL AND qty IN (1, 2.5, -3)", [("status", "is not null", []), ("qty", "in", ["1", "2.5", "-3"])]),
    ('"status" not in (\'a\') AND Qty is null', [("status", "not in", ["a"]), ("qty", "is null", [])]),
    ("status = true", [("status", "=", ["true"])]),
])
def test_filters_become_conditions(text, conditions):
    assert parse_filter(text, ORDERS) == (conditions, None)


@pytest.mark.parametrize("text,problem", [
    ("qty > 10 OR true", "expected AND or the end after condition 1"),
    ("price > 1", "'price' is not a column of public.orders"),
    ("qty > (select 1)", "expected an operator and a literal after qty"),
    ("qty in (1; drop table orders)", "unexpected text at ';"),
    ("qty in (1, qty)", "expected a literal in the IN list of qty"),
    ("", "expected a column at condition 1"),
])
def test_filters_other_than_plain_conditions_are_rejected(text, problem):
    conditions, reason = parse_filter(text, ORDERS)
    assert conditions == [] and reason is not None and problem in reason


def test_execute_snapshot_starts_the_state_and_pause_resume_toggle_it():
    state = fold(None, [_execute("public.orders", "public.items")], LAYOUT, name="t")
    assert state == {"signal": "s1", "tables": ["public.orders", "public.items"], "key": ""}
    paused = fold(state, [_signal("pause-snapshot")], LAYOUT, name="t")
    assert paused == {**state, "paused": True}
    assert fold(paused, [_signal("resume-snapshot")], LAYOUT, name="t") == state


def test_stop_snapshot_drops_listed_tables_or_the_whole_snapshot():
    state = fold(None, [_execute("public.orders", "public.items")], LAYOUT, name="t")
    left = fold(state, [_signal("stop-snapshot", {"data-collections": ["public.orders"]})], LAYOUT, name="t")
    assert left == {"signal": "s1", "tables": ["public.items"], "key": ""}
    assert fold(state, [_signal("stop-snapshot")], LAYOUT, name="t") is None


def test_a_high_watermark_moves_the_key_and_finishes_tables():
    state = fold(None, [_execute("public.orders", "public.items")], LAYOUT, name="t")
    chunk = {"window": "w", "table": "public.orders", "after": "", "last": '["7"]', "done": False, "snapshot": "s1"}
    state = fold(state, [_signal(OPEN, {"window": "w"}), _signal(CLOSE, chunk)], LAYOUT, name="t")
    assert state["key"] == '["7"]'
    last = {**chunk, "after": '["7"]', "done": True}
    state = fold(state, [_signal(CLOSE, last)], LAYOUT, name="t")
    assert state == {"signal": "s1", "tables": ["public.items"], "key": ""}
    stale = {**last, "table": "public.items", "after": '["x"]'}  # not where the snapshot stands: ignored
    assert fold(state, [_signal(CLOSE, stale)], LAYOUT, name="t") == state


@pytest.mark.parametrize("signal,reason", [
    (_signal("execute-snapshot", "not json"), "data is not JSON"),
    (_execute("public.nope"), "'public.nope' is not a captured table"),
    (_execute("public.log"), "table public.log has no primary key"),
    (_signal("execute-snapshot", {"data-collections": ["public.orders"], "type": "blocking"}),
     "'blocking' is not supported"),
    (_signal("execute-snapshot", {"data-collections": ["public.orders"], "additional-conditions": [
        {"data-collection": "public.orders", "filter": "id > 1 or true"}]}), "is not supported"),
    (_signal("reboot"), "'reboot' ignored"),
])
def test_bad_signals_are_logged_and_leave_the_state_alone(caplog, signal, reason):
    with caplog.at_level(logging.WARNING, logger="spark_connect_bridge.connectors.cdc.signals"):
        state = fold(None, [signal], LAYOUT, name="t")
    assert state is None and reason in caplog.text


def test_state_text_round_trips_through_offsets():
    state = fold(None, [_execute("public.orders", **{"additional-conditions": [
        {"data-collection": "public.orders", "filter": "qty > 1"}]})], LAYOUT, name="t")
    assert state is not None and state["filters"] == {"public.orders": "qty > 1"}
    assert state_of({"lsn": 1, "incremental": state_text(state)}) == state
    assert state_of({"lsn": 1}) is None


def test_chunk_windows_drop_rows_the_stream_changed_inside_the_window():
    state = fold(None, [_execute("public.orders")], LAYOUT, name="t")
    windows = ChunkWindows(state, LAYOUT, name="t")
    assert windows.signal(_signal(OPEN, {"window": "w", "table": "public.orders"}), "0/1") is None
    assert windows.watches("public.orders") and not windows.watches("public.items")
    windows.touch("public.orders", [("2",)])
    close = {"window": "w", "table": "public.orders", "columns": ["id", "status", "qty"], "after": "",
             "last": '["3"]', "done": True, "snapshot": "s1",
             "rows": [["1", "a", "1"], ["2", "b", "2"], ["3", "c", "3"]]}
    table, columns, rows = windows.signal(_signal(CLOSE, close), "0/2")
    assert table is ORDERS and columns == ["id", "status", "qty"] and rows == [["1", "a", "1"], ["3", "c", "3"]]
    assert windows.state is None  # the only table is done


def test_a_truncate_inside_a_window_drops_its_chunk():
    state = fold(None, [_execute("public.orders")], LAYOUT, name="t")
    windows = ChunkWindows(state, LAYOUT, name="t")
    windows.signal(_signal(OPEN, {"window": "w", "table": "public.orders"}), "0/1")
    windows.truncate("public.orders")
    close = {"window": "w", "table": "public.orders", "columns": ["id"], "after": "", "last": '["1"]',
             "done": True, "snapshot": "s1", "rows": [["1"]]}
    assert windows.signal(_signal(CLOSE, close), "0/2") is None


def test_a_chunk_whose_window_opened_before_the_batch_fails_clearly():
    state = fold(None, [_execute("public.orders")], LAYOUT, name="t")
    close = {"window": "w", "table": "public.orders", "columns": ["id"], "after": "", "last": '["1"]',
             "done": True, "snapshot": "s1", "rows": [["1"]]}
    with pytest.raises(ConnectError, match="window did not open in this batch"):
        ChunkWindows(state, LAYOUT, name="t").signal(_signal(CLOSE, close), "0/2")


def test_the_last_commit_within_the_budget_ends_the_batch():
    commits = [(10, 3, 1, 0), (20, 5, 2, 0), (30, 9, 3, 0)]
    assert last_commit_within(commits, 10, 4) == ((20, 2, 0), True)
    assert last_commit_within(commits, 10, 100) == ((30, 3, 0), False)
    assert last_commit_within(commits, 10, None) == ((30, 3, 0), False)
    assert last_commit_within(commits, 0, 1) == ((10, 1, 0), True)  # never less than one transaction
    assert last_commit_within(commits, 30, 4) == (None, False)


def test_a_byte_bound_end_stays_between_the_first_transaction_and_the_log_end():
    kw = {"least": 128, "most": 4096}
    assert end_by_bytes(start=0, first=50, upto=10**6, max_records=10, per_change=0, **kw) == 1280
    assert end_by_bytes(start=0, first=5000, upto=10**6, max_records=10, per_change=200, **kw) == 5000
    assert end_by_bytes(start=0, first=50, upto=1000, max_records=10, per_change=10**6, **kw) == 1000
    assert end_by_bytes(start=0, first=50, upto=1000, max_records=None, per_change=0, **kw) == 1000


def test_a_heartbeat_is_due_only_with_log_to_move_over():
    beat = Heartbeat(interval_ms=1)
    assert not beat.due(10, 10)
    assert beat.due(10, 20)
    assert not Heartbeat(interval_ms=0).due(10, 20)
