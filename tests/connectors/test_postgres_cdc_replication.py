"""The PostgreSQL CDC source's kept replication connection (connectors/postgres/replication.py): batches read
over one streaming connection on the driver equal the peek's, the slot moves only with Spark's commits, a
restart from the checkpoint and an ended walsender lose nothing. On the run's shared PostgreSQL server."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.postgres import parse_lsn
from tests.support import servers


@pytest.fixture(scope="module")
def server() -> tuple[str, int]:
    return servers.postgres()


def _sql(server: tuple[str, int], db: str, sql: str, params: Any = None) -> list[tuple]:
    host, port = server
    with psycopg.connect(host=host, port=port, user="postgres", dbname=db, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def _database(server: tuple[str, int]) -> str:
    """A fresh database with a table ``t`` and the connector's slot created before any change."""
    db = f"repl_{uuid.uuid4().hex[:8]}"
    _sql(server, "postgres", f'create database "{db}"')
    _sql(server, db, "create table t (id int primary key, v int, note text)")
    return db


def _config(server: tuple[str, int], db: str, **extra: Any) -> dict[str, str]:
    host, port = server
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
            "slot.name": f"slot_{db}", "snapshot.mode": "no_data", "database.hostname": host,
            "database.port": str(port), "database.user": "postgres", "database.password": "",
            "database.dbname": db, **{k: str(v) for k, v in extra.items()}}


def _slot(server: tuple[str, int], db: str) -> tuple[int, Any]:
    """(confirmed_flush_lsn, active_pid) of the connector's slot."""
    lsn, pid = _sql(server, db, "select confirmed_flush_lsn::text, active_pid from pg_replication_slots "
                                "where slot_name = %s", (f"slot_{db}",))[0]
    return parse_lsn(lsn), pid


def _events(connector: Any, start: dict, end: dict) -> list[dict]:
    out = []
    for task in connector.plan(start, end):
        for rng in task.ranges:
            for batch in connector.read_range(rng):
                out.extend(batch.to_pylist())
    return out


def _drive(connector: Any) -> list[tuple[dict, dict, list[dict], bool]]:
    """Micro-batches of about 4 changes, as Spark runs them on a driver, until nothing is left: (start, end,
    events, whether the kept connection gave the messages), committing each."""
    key = connector.settings.partition_key
    pos = connector.initial_offsets()
    out = []
    while True:
        end = connector.latest_offsets(pos, 4, None)
        if end == pos:
            return out
        kept = all(r.messages is not None for t in connector.plan(pos, end) for r in t.ranges)
        out.append((pos[key], end[key], _events(connector, pos, end), kept))
        connector.commit(end)
        pos = end
    return out


def test_batches_over_the_kept_connection_equal_the_peeks_of_the_same_ranges(server):
    db = _database(server)
    config = _config(server, db)
    _sql(server, db, "select pg_create_logical_replication_slot(%s, 'pgoutput')", (f"ref_{db}",))
    build_connector(config, kind="source").initial_offsets()
    for i in range(1, 7):  # one transaction each
        _sql(server, db, "insert into t values (%s, %s, %s)", (i, i, f"n{i}"))
    # the table changes shape between batches: the walsender sends its relation again, once
    _sql(server, db, "alter table t add column extra text default 'x'")
    _sql(server, db, "update t set v = -v, extra = 'y' where id <= 3; delete from t where id = 6")
    _sql(server, db, "insert into t values (7, 7, 'n7', 'z')")
    kept = build_connector(config, kind="source")
    kept.begin_stream()
    try:
        batches = _drive(kept)
    finally:
        kept.stop()
    assert len(batches) >= 3 and all(b[3] for b in batches)
    # batches 2 and 3 touch table t whose relation the connection sent in batch 1 only (before the alter)
    key = kept.settings.partition_key
    # a batch read's connector on a second slot made at the same point: reads the same ranges by peeks
    peek = build_connector({**config, "slot.name": f"ref_{db}"}, kind="source")
    for start, end, events, _ in batches:
        assert events == _events(peek, {key: start}, {key: end})
    ops = [(e["value"]["op"], (e["value"]["after"] or e["value"]["before"])["id"]) for b in batches
           for e in b[2] if e["value"] is not None]
    assert ops == [("c", i) for i in range(1, 7)] + [("u", 1), ("u", 2), ("u", 3), ("d", 6), ("c", 7)]


def test_slot_moves_only_with_commits_and_is_released_on_stop(server):
    db = _database(server)
    config = _config(server, db)
    connector = build_connector(config, kind="source")
    connector.begin_stream()
    pos = connector.initial_offsets()
    key = connector.settings.partition_key
    for i in range(1, 4):
        _sql(server, db, "insert into t values (%s, 0, null)", (i,))
    try:
        end = connector.latest_offsets(pos, 1, None)
        connector.plan(pos, end)
        before, holder = _slot(server, db)
        assert holder is not None  # the walsender of the kept connection holds the slot
        assert before == pos[key]["lsn"]  # read and planned, not committed: not moved
        connector.commit(end)
        deadline = time.monotonic() + 30
        while _slot(server, db)[0] != end[key]["lsn"]:
            assert time.monotonic() < deadline, "the slot did not move to the committed end"
            time.sleep(0.05)
        end2 = connector.latest_offsets(end, None, None)
        assert end2[key]["lsn"] > end[key]["lsn"]
    finally:
        connector.stop()
    confirmed, holder = _slot(server, db)
    assert holder is None  # released by stop: the next query or a slot drop finds it free
    assert confirmed == end[key]["lsn"]  # the uncommitted batch (end, end2] is read again by the next query


def test_an_ended_walsender_reconnects_from_the_slot_and_loses_nothing(server):
    db = _database(server)
    config = _config(server, db, **{"errors.retry.timeout": 60000})
    connector = build_connector(config, kind="source")
    connector.begin_stream()
    key = connector.settings.partition_key
    pos = connector.initial_offsets()
    seen: list[int] = []
    try:
        for i in range(1, 4):
            _sql(server, db, "insert into t values (%s, 0, null)", (i,))
        end = connector.latest_offsets(pos, 1, None)  # one of three transactions
        seen += [e["key"]["id"] for e in _events(connector, pos, end)]
        connector.commit(end)
        pos = end
        _, walsender = _slot(server, db)
        _sql(server, db, "select pg_terminate_backend(%s)", (walsender,))
        for i in range(4, 6):
            _sql(server, db, "insert into t values (%s, 0, null)", (i,))
        end = connector.latest_offsets(pos, 1, None)  # reconnected: from the slot, which is at pos
        batch = connector.plan(pos, end)[0].ranges[0]
        assert batch.messages is not None
        seen += [e["key"]["id"] for e in _events(connector, pos, end)]
        connector.commit(end)
        pos = end
        _, again = _slot(server, db)
        assert again is not None and again != walsender
        end = connector.latest_offsets(pos, None, None)
        seen += [e["key"]["id"] for e in _events(connector, pos, end)]
        connector.commit(end)
    finally:
        connector.stop()
    assert seen == [1, 2, 3, 4, 5]
    assert _slot(server, db)[0] == end[key]["lsn"]


def test_a_stopped_streaming_query_runs_the_source_s_stop(server, spark, tmp_path):
    """``query.stop()`` ends Spark's streaming runner with SIGTERM; the reader's stop() still runs there
    (engine/datasource.py ``_stop_on_sigterm``): with ``slot.drop.on.stop`` the slot is gone soon after."""
    import spark_connect_bridge as scb

    db = _database(server)
    config = _config(server, db, **{"slot.drop.on.stop": "true", "table.include.list": "public.t"})
    query = (scb.read_stream(spark, config).writeStream.format("memory").queryName(f"q_{db}")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="200 milliseconds").start())
    try:
        deadline, n = time.monotonic() + 120, 0
        while spark.sql(f"select count(*) from q_{db}").first()[0] < 1:  # snapshot.mode no_data: changes after
            n += 1                                                             # the slot's creation
            _sql(server, db, "insert into t values (%s, 0, null)", (n,))
            assert time.monotonic() < deadline and query.isActive, query.exception()
            time.sleep(0.2)
        assert _slot(server, db)[1] is not None  # held by the query's kept replication connection
    finally:
        query.stop()
    deadline = time.monotonic() + 30
    while _sql(server, db, "select 1 from pg_replication_slots where slot_name = %s", (f"slot_{db}",)):
        assert time.monotonic() < deadline, "the stopped query's source did not drop its slot (stop() not run)"
        time.sleep(0.05)
