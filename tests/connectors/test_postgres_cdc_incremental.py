"""Incremental snapshots through Debezium's signal table (``signal.data.collection``) against a real throwaway
PostgreSQL: every row arrives as an ``op=r`` ``incremental`` event while changes keep streaming, a mirror
built from all events equals the source, replays are identical and restarts lose and double nothing."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical, dumps
from spark_connect_bridge.errors import ConfigError
from tests.support.postgres import PostgresCluster

SIGNAL = '{"data-collections": ["public.orders"], "type": "incremental"}'


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _db(pg: PostgresCluster, rows: int = 40) -> str:
    name = pg.new_database("incr")
    pg.execute(f"""
        create table orders (id int primary key, note text, qty int);
        create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data varchar);
        insert into orders select g, 'o' || g, g from generate_series(1, {rows}) g;
    """, database=name)
    return name


def _config(pg: PostgresCluster, db: str, **extra: Any) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
            "slot.name": f"slot_{db}", "snapshot.mode": "never", "table.include.list": "public.orders",
            "signal.data.collection": "public.debezium_signal", "incremental.snapshot.chunk.size": "7",
            **pg.connector_config(db), **{k: str(v) for k, v in extra.items()}}


def _signal(pg: PostgresCluster, db: str, data: str = SIGNAL, kind: str = "execute-snapshot") -> None:
    pg.execute("insert into debezium_signal values (%s, %s, %s)", (uuid.uuid4().hex, kind, data), database=db)


def _read(connector: Any, a: dict, b: dict) -> list[dict]:
    a, b = json.loads(dumps(a)), json.loads(dumps(b))
    return [row for t in connector.plan(a, b) for r in t.ranges for batch in connector.read_range(r)
            for row in batch.to_pylist()]


def _mirror(events: list[dict]) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    for e in events:
        v = e["value"]
        if v is None:
            continue
        if v["op"] == "d":
            out.pop(v["before"]["id"], None)
        else:
            out[v["after"]["id"]] = (v["after"]["id"], v["after"]["note"], v["after"]["qty"])
    return out


def _source(pg: PostgresCluster, db: str) -> dict[int, tuple]:
    return {r[0]: tuple(r) for r in pg.execute("select id, note, qty from orders", database=db)}


def _run(src: Any, pos: dict, pg: PostgresCluster, db: str, changes: list[str], max_records: int = 5,
         rounds: int = 60) -> tuple[list[tuple[dict, dict]], list[dict]]:
    """Drive the connector like Spark does (latest_offsets, then read the range), applying one of ``changes``
    to the source before each micro-batch; stop when nothing is left. Nothing is committed, so every range
    can be replayed."""
    ranges, events = [], []
    for i in range(rounds):
        if i < len(changes):
            pg.execute(changes[i], database=db)
        end = canonical(src.latest_offsets(pos, max_records, None))
        if end == pos and i >= len(changes):
            break
        if end != pos:
            ranges.append((pos, end))
            events += _read(src, pos, end)
            pos = end
    return ranges, events


CHANGES = ["insert into orders values (100, 'new', 1)", "update orders set note = 'u3' where id = 3",
           "delete from orders where id = 20", "update orders set qty = -1 where id in (21, 22, 35)",
           "insert into orders values (0, 'zero', 0), (41, 'x', 41)", "delete from orders where id = 39",
           "update orders set id = 1000 where id = 38", "update orders set note = 'again' where id = 3"]


def test_signal_snapshots_every_row_interleaved_with_changes_and_the_mirror_equals_the_source(pg):
    db = _db(pg)
    config = _config(pg, db)
    src = build_connector(config, kind="source")
    pos = canonical(src.initial_offsets())
    pg.execute("insert into orders values (50, 'before signal', 50)", database=db)
    _signal(pg, db)
    ranges, events = _run(src, pos, pg, db, CHANGES)
    incremental = [e for e in events if e["value"] and e["value"]["op"] == "r"]
    assert incremental and all(e["value"]["source"]["snapshot"] == "incremental" for e in incremental)
    assert all(e["topic"] == "shop.public.orders" for e in events)  # signal rows are never events
    snapped = {e["value"]["after"]["id"] for e in incremental}
    # every row the table held while it was snapshotted and that no change touched arrives as op=r
    untouched = set(range(1, 41)) - {3, 20, 21, 22, 35, 38, 39} | {50}
    assert untouched <= snapped
    assert len(incremental) == len(snapped)  # no key read twice
    keys = [e["value"]["after"]["id"] for e in incremental]
    assert keys == sorted(keys)  # chunks in primary-key order
    assert _mirror(events) == _source(pg, db)
    assert "incremental" not in ranges[-1][1][src._key]  # finished: the offsets are plain again
    assert any("incremental" in b[src._key] for _, b in ranges)

    again = build_connector(config, kind="source")
    assert [e for a, b in ranges for e in _read(again, a, b)] == events  # replays are identical


def test_restart_mid_snapshot_resumes_from_the_checkpoint_without_loss_or_duplicates(pg):
    db = _db(pg)
    config = _config(pg, db)
    src = build_connector(config, kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db)
    ranges, events = _run(src, pos, pg, db, CHANGES[:3], rounds=3)
    checkpoint = ranges[-1][1]
    assert "incremental" in checkpoint[src._key]
    # The driver dies after writing the next chunk and choosing a batch Spark never logged.
    src.latest_offsets(checkpoint, 5, None)
    pg.execute("update orders set note = 'while down' where id in (30, 31)", database=db)
    restarted = build_connector(config, kind="source")
    _, more = _run(restarted, checkpoint, pg, db, CHANGES[3:])
    all_events = events + more
    assert _mirror(all_events) == _source(pg, db)
    snapped = [e["value"]["after"]["id"] for e in all_events if e["value"] and e["value"]["op"] == "r"]
    assert len(snapped) == len(set(snapped))
    assert set(range(1, 41)) - {3, 20, 21, 22, 35, 38, 39, 30, 31} <= set(snapped)


def test_bad_signals_are_logged_and_skipped_without_stopping_the_stream(pg, caplog):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, "not json")
    _signal(pg, db, '{"data-collections": ["public.nope"]}')
    _signal(pg, db, '{"data-collections": ["public.orders"], "type": "blocking"}')
    _signal(pg, db, '{"data-collections": []}')
    _signal(pg, db, '{"data-collections": ["public.orders"], "additional-conditions": '
                    '[{"data-collection": "public.orders", "filter": "id > 1 or true"}]}')
    _signal(pg, db, '{"message": "hello"}', kind="reboot")
    pg.execute("insert into orders values (7, 'after bad signals', 7)", database=db)
    with caplog.at_level(logging.WARNING, logger="spark_connect_bridge.connectors.cdc.signals"):
        ranges, events = _run(src, pos, pg, db, [])
    assert [(e["value"]["op"], e["value"]["after"]["id"]) for e in events] == [("c", 7)]
    text = caplog.text
    for reason in ("not JSON", "'public.nope' is not a captured table", "'blocking' is not supported",
                   "non-empty list", "filter 'id > 1 or true' of public.orders is not supported",
                   "'reboot' ignored"):
        assert reason in text
    _signal(pg, db)  # a good signal afterwards still works
    _, events = _run(src, ranges[-1][1], pg, db, [])
    assert sorted(e["value"]["after"]["id"] for e in events if e["value"]["op"] == "r") == [1, 2, 3, 7]


@pytest.mark.parametrize("value", ["orders", "a.b.c", "public. x"])
def test_malformed_signal_collection_is_a_config_error(pg, value):
    with pytest.raises(ConfigError, match=r"signal\.data\.collection"):
        build_connector({**_config(pg, "test"), "signal.data.collection": value}, kind="source")


def test_missing_signal_table_fails_before_data_moves(pg):
    db = _db(pg, rows=1)
    pg.execute("drop table debezium_signal", database=db)
    with pytest.raises(Exception, match=r"signal table public\.debezium_signal .* does not exist"):
        build_connector(_config(pg, db), kind="source").initial_offsets()


def _chunk_window(pg, db, inside) -> None:
    """Write the watermarks of a chunk of orders 1-3 (window ``w``) as the driver does, running ``inside``
    (committed) between them."""
    pg.execute("insert into debezium_signal values ('w-open', 'snapshot-window-open', %s)",
               (json.dumps({"window": "w", "table": "public.orders"}),), database=db)
    inside()
    close = {"window": "w", "table": "public.orders", "columns": ["id", "note", "qty"], "after": "",
             "last": '["3"]', "done": True, "rows": [["1", "o1", "1"], ["2", "o2", "2"], ["3", "o3", "3"]]}
    pg.execute("insert into debezium_signal values ('w-close', 'snapshot-window-close', %s)",
               (json.dumps(close),), database=db)


def test_a_change_inside_the_chunk_window_wins_over_the_chunk_row(pg):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db)
    # A window as the driver writes it, with a change to key 2 committed between the watermarks.
    _chunk_window(pg, db, lambda: pg.execute("update orders set note = 'changed in window' where id = 2",
                                             database=db))
    end = canonical(src.latest_offsets(pos, None, None))
    events = [(e["value"]["op"], e["value"]["after"]["id"], e["value"]["after"]["note"])
              for e in _read(src, pos, end)]
    assert events == [("u", 2, "changed in window"), ("r", 1, "o1"), ("r", 3, "o3")]


def _snapped(events: list[dict], table: str = "shop.public.orders") -> list[int]:
    return [e["value"]["after"]["id"] for e in events
            if e["value"] and e["value"]["op"] == "r" and e["topic"] == table]


def _state(src: Any, offsets: dict) -> dict | None:
    raw = offsets[src._key].get("incremental")
    return json.loads(raw) if raw else None


def test_stop_snapshot_without_collections_stops_the_whole_snapshot(pg):
    db = _db(pg)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db)
    ranges, events = _run(src, pos, pg, db, [], rounds=2)
    assert _snapped(events) == list(range(1, 15))  # two chunks of 7
    _signal(pg, db, '{"type": "incremental"}', kind="stop-snapshot")
    more_ranges, more = _run(src, ranges[-1][1], pg, db, ["insert into orders values (100, 'after stop', 1)"])
    assert [(e["value"]["op"], e["value"]["after"]["id"]) for e in more] == [("c", 100)]  # streaming goes on
    assert _state(src, more_ranges[-1][1]) is None
    assert pg.execute("select count(*) from debezium_signal where type like 'snapshot-window%%'",
                      database=db)[0][0] == 0


def test_stop_snapshot_with_collections_removes_those_tables_from_the_running_snapshot(pg):
    db = _db(pg, rows=20)
    pg.execute("create table items (id int primary key, name text);"
               "insert into items select g, 'i' || g from generate_series(1, 10) g", database=db)
    config = _config(pg, db, **{"table.include.list": "public.orders,public.items"})
    src = build_connector(config, kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, '{"data-collections": ["public.orders", "public.items"], "type": "incremental"}')
    ranges, events = _run(src, pos, pg, db, [], rounds=1)
    assert _snapped(events) == list(range(1, 8))
    assert _state(src, ranges[-1][1])["tables"] == ["public.orders", "public.items"]
    # The table being read leaves at once; the next one starts from its first key.
    _signal(pg, db, '{"data-collections": ["public\\\\.ord.*"], "type": "incremental"}', kind="stop-snapshot")
    more_ranges, more = _run(src, ranges[-1][1], pg, db, [])
    assert _snapped(more) == []
    assert _snapped(more, "shop.public.items") == list(range(1, 11))
    assert _state(src, more_ranges[-1][1]) is None

    # A table that is not the current one is removed without touching the current one's progress.
    _signal(pg, db, '{"data-collections": ["public.orders", "public.items"]}')
    ranges, events = _run(src, more_ranges[-1][1], pg, db, [], rounds=1)
    _signal(pg, db, '{"data-collections": ["public.items"]}', kind="stop-snapshot")
    more_ranges, more = _run(src, ranges[-1][1], pg, db, [])
    assert _snapped(events + more) == list(range(1, 21))
    assert _snapped(events + more, "shop.public.items") == []
    assert _state(src, more_ranges[-1][1]) is None


def test_a_chunk_in_flight_when_its_table_is_stopped_is_neither_emitted_nor_counted(pg):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db)
    # A chunk window as the driver writes it, with a stop-snapshot committed between its watermarks.
    _chunk_window(pg, db, lambda: _signal(pg, db, '{"data-collections": ["public.orders"]}', kind="stop-snapshot"))
    pg.execute("update orders set note = 'streamed' where id = 2", database=db)
    end = canonical(src.latest_offsets(pos, None, None))
    events = [(e["value"]["op"], e["value"]["after"]["id"]) for e in _read(src, pos, end)]
    assert events == [("u", 2)]
    assert _state(src, end) is None


def test_pause_stops_chunks_while_streaming_continues_and_resume_continues_from_the_last_key(pg):
    db = _db(pg)
    config = _config(pg, db)
    src = build_connector(config, kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db)
    ranges, events = _run(src, pos, pg, db, [], rounds=2)
    assert _snapped(events) == list(range(1, 15))
    _signal(pg, db, '{"type": "incremental"}', kind="pause-snapshot")
    paused, during = _run(src, ranges[-1][1], pg, db, CHANGES[:4])
    assert _snapped(during) == []  # no chunk while paused ...
    assert {e["value"]["op"] for e in during if e["value"]} == {"c", "u", "d"}  # ... the stream goes on
    state = _state(src, paused[-1][1])
    assert state == {**_state(src, ranges[-1][1]), "paused": True}  # the pause lives in the offsets
    assert json.loads(dumps(paused[-1][1])) == paused[-1][1]
    _signal(pg, db, '{"data-collections": ["public.orders"]}')  # already running: no new snapshot, still paused
    more, _ = _run(src, paused[-1][1], pg, db, [])
    assert _state(src, more[-1][1])["paused"] is True
    _signal(pg, db, '{"type": "incremental"}', kind="resume-snapshot")
    resumed, after = _run(src, more[-1][1], pg, db, CHANGES[4:])
    keys = _snapped(after)
    assert keys[0] == 15 and keys == sorted(keys)  # continues after the last key read before the pause
    all_events = events + during + after
    snapped = _snapped(all_events)
    assert len(snapped) == len(set(snapped))
    assert set(range(1, 41)) - {3, 20, 21, 22, 35, 38, 39} <= set(snapped)
    assert _mirror(all_events) == _source(pg, db)
    assert _state(src, resumed[-1][1]) is None

    all_ranges = ranges + paused + more + resumed
    again = build_connector(config, kind="source")
    assert [e for a, b in all_ranges for e in _read(again, a, b)] == all_events  # replays are identical


def test_pause_and_resume_without_a_running_snapshot_are_ignored(pg, caplog):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, "", kind="pause-snapshot")
    _signal(pg, db)  # starts, not paused: the pause above found nothing to pause
    with caplog.at_level(logging.INFO, logger="spark_connect_bridge.connectors.cdc.signals"):
        _, events = _run(src, pos, pg, db, [])
    assert _snapped(events) == [1, 2, 3]
    assert "pause-snapshot) ignored: no incremental snapshot is running" in caplog.text


def test_log_signal_logs_its_message_at_info_and_nothing_else(pg, caplog):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, '{"message": "Signal message at offset {}"}', kind="log")
    _signal(pg, db, '{"text": "no message"}', kind="log")
    pg.execute("insert into orders values (4, 'x', 4)", database=db)
    with caplog.at_level(logging.INFO, logger="spark_connect_bridge.connectors.cdc.signals"):
        ranges, events = _run(src, pos, pg, db, [])
    assert [(e["value"]["op"], e["value"]["after"]["id"]) for e in events] == [("c", 4)]
    logged = [r for r in caplog.records if r.getMessage().startswith("Signal message at offset ")]
    assert len(logged) == 1 and logged[0].levelno == logging.INFO
    assert json.loads(logged[0].getMessage().removeprefix("Signal message at offset "))["lsn"] > 0
    assert any(r.levelno == logging.WARNING and "has no 'message'" in r.getMessage() for r in caplog.records)
    assert all(_state(src, b) is None for _, b in ranges)


def _conditions(filter_: str, table: str = "public.orders") -> str:
    return json.dumps({"data-collections": ["public.orders"], "type": "incremental",
                       "additional-conditions": [{"data-collection": table, "filter": filter_}]})


def test_additional_conditions_snapshot_only_the_rows_their_filter_selects(pg):
    db = _db(pg)
    config = _config(pg, db)
    src = build_connector(config, kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, _conditions("qty > 20 AND note NOT IN ('o25', 'o26') and note is not null"))
    ranges, events = _run(src, pos, pg, db, ["update orders set note = null where id = 33"])
    assert _snapped(events) == sorted(set(range(21, 41)) - {25, 26, 33})
    assert any(_state(src, b) and _state(src, b)["filters"] for _, b in ranges)  # the filter is in the offsets
    assert _state(src, ranges[-1][1]) is None
    again = build_connector(config, kind="source")
    assert [e for a, b in ranges for e in _read(again, a, b)] == events


@pytest.mark.parametrize("filter_, reason", [
    ("qty > 30; drop table orders", "unexpected text at '; drop table orders'"),
    ("qty > 30 or true", "expected AND or the end"),
    ("pg_terminate_backend(1) is null", "'pg_terminate_backend' is not a column"),
    ("qty > (select 1)", "expected an operator and a literal"),
    ("qty > 30 -- comment", "unexpected text at '--"),
])
def test_additional_conditions_other_than_plain_conditions_are_rejected(pg, caplog, filter_, reason):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, _conditions(filter_))
    with caplog.at_level(logging.WARNING, logger="spark_connect_bridge.connectors.cdc.signals"):
        _, events = _run(src, pos, pg, db, [])
    assert events == [] and reason in caplog.text
    assert pg.execute("select count(*) from orders", database=db)[0][0] == 3


def test_additional_conditions_for_a_table_not_snapshotted_are_rejected(pg, caplog):
    db = _db(pg, rows=3)
    pg.execute("create table items (id int primary key)", database=db)
    src = build_connector(_config(pg, db, **{"table.include.list": "public.orders,public.items"}), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, _conditions("id > 1", table="public.items"))
    with caplog.at_level(logging.WARNING, logger="spark_connect_bridge.connectors.cdc.signals"):
        _, events = _run(src, pos, pg, db, [])
    assert events == [] and "public.items is not in data-collections" in caplog.text


def test_a_filter_postgres_cannot_apply_stops_that_tables_snapshot_and_the_stream_goes_on(pg, caplog):
    db = _db(pg, rows=3)
    src = build_connector(_config(pg, db), kind="source")
    pos = canonical(src.initial_offsets())
    _signal(pg, db, _conditions("qty > 'many'"))
    with caplog.at_level(logging.ERROR, logger="spark_connect_bridge.connectors.postgres.incremental"):
        ranges, events = _run(src, pos, pg, db, ["insert into orders values (4, 'x', 4)"])
    assert [(e["value"]["op"], e["value"]["after"]["id"]) for e in events] == [("c", 4)]
    assert "invalid input syntax for type integer" in caplog.text
    assert _state(src, ranges[-1][1]) is None
    assert pg.execute("select type from debezium_signal where type <> 'execute-snapshot'",
                      database=db) == [("stop-snapshot",)]  # its low watermark is gone


_DRIVER = textwrap.dedent("""
    import json, os, sys, time
    from pyspark.sql import SparkSession
    config, ckpt, out, marker, stop = json.loads(sys.argv[1]), *sys.argv[2:6]  # out: one dir per run
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    chunks = 0

    def each(df, batch_id):
        global chunks
        rows = df.select("key", "value", "topic", "offset")
        rows.write.mode("overwrite").json(f"{out}/batch={batch_id}")
        chunks += rows.where("value.op = 'r'").limit(1).count()
        if chunks >= 3 and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(600)  # killed here, inside a batch whose output is written but not committed

    q = (spark.readStream.format("kconnect").options(**config).load().writeStream.foreachBatch(each)
         .option("checkpointLocation", ckpt).trigger(processingTime="300 milliseconds").start())
    while not os.path.exists(stop):
        if q.exception() is not None:
            raise q.exception()
        time.sleep(0.3)
    q.stop()
""")


class _Traffic(threading.Thread):
    """Inserts, updates, deletes and primary-key changes on ``orders``, one transaction each, until
    stopped; remembers every key it touched."""

    def __init__(self, pg: PostgresCluster, db: str, rows: int):
        super().__init__(daemon=True)
        self.pg, self.db, self.rows = pg, db, rows
        self.touched: set[int] = set()
        self.halt = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        rng = random.Random(7)
        fresh = 1000
        try:
            while not self.halt.is_set():
                k = rng.randint(1, self.rows + 20)
                kind = rng.random()
                if kind < 0.3:
                    sql = f"insert into orders values ({k}, 'ins', {k}) on conflict (id) do update set note = 'ups'"
                elif kind < 0.65:
                    sql = f"update orders set note = 'upd', qty = qty + 1 where id = {k}"
                elif kind < 0.9:
                    sql = f"delete from orders where id = {k}"
                else:
                    fresh += 1
                    sql = f"update orders set id = {fresh} where id = {k}"
                    self.touched.add(fresh)
                self.touched.add(k)
                self.pg.execute(sql, database=self.db)
                time.sleep(0.15)
        except psycopg.Error as e:  # reported by the test
            self.error = e


def _committed(ckpt: Path) -> dict | None:
    """The offsets of the last batch Spark committed in ``ckpt``."""
    done = [int(p.name) for p in (ckpt / "commits").glob("[0-9]*")]
    if not done:
        return None
    return json.loads((ckpt / "offsets" / str(max(done))).read_text().splitlines()[-1])


def _batches(out: Path) -> dict[int, list[dict]]:
    """batch id -> its events, as one run of the driver wrote them."""
    return {int(b.name.split("=")[1]): [json.loads(line) for f in sorted(b.glob("part-*.json"))
                                        for line in f.read_text().splitlines()]
            for b in out.glob("batch=*")}


def _json_events(*runs: Path) -> list[dict]:
    """Every batch's events in batch order, a batch written by several runs taken from the last (an
    idempotent sink: a replay replaces the first attempt)."""
    batches: dict[int, list[dict]] = {}
    for run in runs:
        batches.update(_batches(run))
    return [e for i in sorted(batches) for e in batches[i]]


def _json_mirror(events: list[dict]) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    for e in events:
        v = e.get("value")
        if v is None:
            continue
        if v["op"] == "d":
            out.pop(v["before"]["id"], None)
        else:
            a = v["after"]
            out[a["id"]] = (a["id"], a.get("note"), a.get("qty"))
    return out


def test_spark_query_killed_mid_incremental_snapshot_resumes_from_its_checkpoint_without_loss(pg, tmp_path):
    """A real streaming query reads an incremental snapshot in many micro-batches while the table changes;
    its driver is killed -9 inside a batch; the restarted query replays that batch from the checkpoint and
    finishes: the mirror equals the table, every untouched row was read once, no chunk repeats a key."""
    rows = 200
    db = _db(pg, rows=rows)
    config = _config(pg, db, **{"incremental.snapshot.chunk.size": 20, "max.records.per.trigger": 500})
    build_connector(config, kind="source").initial_offsets()  # the slot exists before the signal
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    ckpt, marker, stop = tmp_path / "ckpt", tmp_path / "marker", tmp_path / "stop"
    out1, out2 = tmp_path / "run1", tmp_path / "run2"
    args = [sys.executable, str(script), json.dumps(config), str(ckpt), str(out1), str(marker), str(stop)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    traffic = _Traffic(pg, db, rows)
    _signal(pg, db)
    traffic.start()
    proc = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    second = None
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the first run never reached its third chunk"
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = _committed(ckpt)
        assert killed_at is not None and "incremental" in next(iter(killed_at.values()))  # mid-snapshot
        # Replays the batch it was killed in, then goes on; the table keeps changing for a while.
        args[4] = str(out2)
        second = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        time.sleep(10)
        traffic.halt.set()
        traffic.join()
        assert traffic.error is None, traffic.error
        source = _source(pg, db)
        deadline = time.monotonic() + 300
        while True:
            assert second.poll() is None, second.stderr.read().decode()[-3000:]
            pos = _committed(ckpt)
            done = pos is not None and "incremental" not in next(iter(pos.values()))
            if done and _json_mirror(_json_events(out1, out2)) == source:
                break
            assert time.monotonic() < deadline, f"not caught up: offsets {pos}"
            time.sleep(1)
        stop.touch()
        assert second.wait(timeout=120) == 0, second.stderr.read().decode()[-3000:]
    finally:
        traffic.halt.set()
        for p in (proc, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    # The batch the driver was killed in was replayed from the checkpoint's offsets: the same events.
    first, again = _batches(out1), _batches(out2)
    replayed = sorted(set(first) & set(again))
    assert replayed == [max(first)] and any((e.get("value") or {}).get("op") == "r" for e in first[max(first)])
    assert again[max(first)] == first[max(first)]
    events = _json_events(out1, out2)
    assert _json_mirror(events) == _source(pg, db)
    reads = [e for e in events if e.get("value") and e["value"]["op"] == "r"]
    assert reads and all(e["value"]["source"]["snapshot"] == "incremental" for e in reads)
    by_chunk: dict[int, list[int]] = {}
    for e in reads:
        by_chunk.setdefault(e["offset"], []).append(e["value"]["after"]["id"])
    assert len(by_chunk) >= 5
    assert all(len(keys) == len(set(keys)) for keys in by_chunk.values())  # no key twice in a chunk
    snapped = [e["value"]["after"]["id"] for e in reads]
    assert len(snapped) == len(set(snapped))  # nor twice in the snapshot
    assert set(range(1, rows + 1)) - traffic.touched <= set(snapped)  # every row no change touched was read
