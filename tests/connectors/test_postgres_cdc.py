"""PostgreSQL CDC against a real throwaway PostgreSQL (wal_level=logical): Debezium-shaped events, a mirror
built from them equals the source, and restarts (query, PostgreSQL, a killed driver) lose and double nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical, dumps
from spark_connect_bridge.connectors.postgres_cdc import table_events
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _db(pg: PostgresCluster) -> str:
    """A fresh database per test: its own tables, publication and slot."""
    return pg.new_database("cdc")


def _config(pg: PostgresCluster, db: str, **extra: Any) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
            "slot.name": f"slot_{db}", "skipped.operations": "none", **pg.connector_config(db),
            **{k: str(v) for k, v in extra.items()}}


def _schema(pg: PostgresCluster, db: str) -> None:
    pg.execute("""
        create table customers (id int primary key, name text, amount numeric(10,2), created timestamptz,
                                born date, tags text[], doc jsonb, photo bytea);
        create table orders (id bigint primary key, customer int, note text);
        alter table orders replica identity full;
        create schema inv;
        create table inv.items (sku text primary key, qty int, id text);
        create table log (n int, msg text);
        insert into customers select g, 'c' || g, g * 1.25,
               timestamptz '2024-01-02 03:04:05.5+00' + g * interval '1 day', date '2000-01-01' + g,
               array['a', null, 'b,' || g], jsonb_build_object('g', g), '\\x01ff'
          from generate_series(1, 8) g;
        insert into orders select g, g % 3, 'o' || g from generate_series(1, 5) g;
        insert into inv.items values ('s1', 1, 'x'), ('s2', 2, 'y');
        insert into log values (1, 'first');
    """, database=db)


def _changes(pg: PostgresCluster, db: str, truncate: bool = True) -> None:
    sql = """
        insert into customers values (100, 'new', 9.99, now(), null, '{}', null, null);
        update customers set name = 'renamed', amount = 0.01 where id = 1;
        update orders set note = 'full' where id = 1;
        delete from orders where id = 2;
        delete from customers where id = 3;
        update inv.items set sku = 's9' where sku = 's2';
        insert into orders values (10, 1, 'ten'), (11, 1, 'eleven');
        truncate log;
        insert into log values (2, 'after truncate');
    """
    if not truncate:  # TRUNCATE is not MVCC-safe: it empties reads of older snapshots too
        sql = sql.replace("truncate log;", "")
    pg.execute(sql, database=db)


def _collect(spark: Any, config: dict, ckpt: str, sink: list) -> None:
    def each(batch_df: Any, batch_id: int) -> None:
        sink.extend((batch_id, r) for r in batch_df.collect())

    q = (spark.readStream.format("kconnect").options(**config).load().writeStream
         .foreachBatch(each).option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()


def _fields(config: dict) -> dict[str, dict[str, str]]:
    """topic -> {column: field of the union row struct} (columns sharing a name but not a type differ)."""
    layout = build_connector(config, kind="source").layout()
    return {t.topic: {c.name: c.field for c in t.columns} for t in layout.tables}


def _mirror(events: list, fields: dict) -> dict[str, dict]:
    """Apply events in order: c/u/r upsert by key, d deletes, t clears the table, tombstones skipped."""
    tables: dict[str, dict] = {}
    for r in events:
        v = r["value"]
        t = tables.setdefault(r["topic"], {})
        if v is None:
            continue
        if v["op"] == "t":
            t.clear()
        elif v["op"] == "d":
            t.pop(_row_key(r["topic"], v["before"], fields), None)
        else:
            t[_row_key(r["topic"], v["after"], fields)] = v["after"]
    return tables


_KEYS = {"shop.public.customers": ("id",), "shop.public.orders": ("id",), "shop.inv.items": ("sku",),
         "shop.public.log": ("n", "msg")}
_COLS = {"shop.public.customers": ("id", "name", "amount"), "shop.public.orders": ("id", "customer", "note"),
         "shop.inv.items": ("sku", "qty"), "shop.public.log": ("n", "msg")}


def _row_key(topic: str, row: Any, fields: dict) -> Any:
    return tuple(row[fields[topic][c]] for c in _KEYS[topic])


def _source_rows(pg: PostgresCluster, db: str) -> dict[str, set]:
    out = {}
    for topic, cols in _COLS.items():
        table = topic.split(".", 1)[1]
        out[topic] = {tuple(r) for r in pg.execute(f"select {', '.join(cols)} from {table}", database=db)}
    return out


def _mirror_rows(mirror: dict[str, dict], fields: dict) -> dict[str, set]:
    return {topic: {tuple(row[fields[topic][c]] for c in cols) for row in mirror.get(topic, {}).values()}
            for topic, cols in _COLS.items()}


def test_snapshot_then_stream_delivers_debezium_events_and_a_mirror_equal_to_the_source(spark, pg, tmp_path):
    db = _db(pg)
    _schema(pg, db)
    config = _config(pg, db, **{"max.records.per.trigger": 4})
    fields = _fields(config)
    f = fields["shop.public.customers"]
    ckpt = str(tmp_path / "ckpt")
    events: list = []
    _collect(spark, config, ckpt, events)
    snapshot = [r for _, r in events]
    assert {r["value"]["op"] for r in snapshot} == {"r"}
    assert len(snapshot) == 8 + 5 + 2 + 1
    assert len({b for b, _ in events}) >= 4  # bounded chunks: 16 rows, at most 4 per batch
    flags = [r["value"]["source"]["snapshot"] for r in snapshot]
    assert flags[0] == "first" and flags[-1] == "last"

    _changes(pg, db)
    _collect(spark, config, ckpt, events)  # restart of the query from its checkpoint
    stream = [r for b, r in events if r["value"] is None or r["value"]["op"] != "r"]
    ops = [(r["topic"], r["value"]["op"] if r["value"] else None) for r in stream]
    assert ops == [
        ("shop.public.customers", "c"), ("shop.public.customers", "u"), ("shop.public.orders", "u"),
        ("shop.public.orders", "d"), ("shop.public.orders", None), ("shop.public.customers", "d"),
        ("shop.public.customers", None),
        # a changed primary key: delete + tombstone of the old key, then create (Debezium's behaviour)
        ("shop.inv.items", "d"), ("shop.inv.items", None), ("shop.inv.items", "c"),
        ("shop.public.orders", "c"), ("shop.public.orders", "c"), ("shop.public.log", "t"), ("shop.public.log", "c"),
    ]
    by_op = {(r["topic"], r["value"]["op"]): r for r in stream if r["value"] is not None}
    ins = by_op[("shop.public.customers", "c")]
    assert ins["key"][f["id"]] == 100 and ins["value"]["before"] is None
    assert ins["value"]["after"]["amount"] == Decimal("9.99") and ins["value"]["after"]["tags"] == []
    src = ins["value"]["source"]
    assert (src["connector"], src["name"], src["db"], src["schema"], src["table"], src["snapshot"]) == \
        ("postgresql", "shop", db, "public", "customers", "false")
    assert src["lsn"] == ins["offset"] and src["txId"] > 0 and src["ts_ms"] == ins["value"]["ts_ms"]
    # default replica identity: no before image; REPLICA IDENTITY FULL: the whole old row
    assert by_op[("shop.public.customers", "u")]["value"]["before"] is None
    full = by_op[("shop.public.orders", "u")]["value"]
    assert full["before"]["note"] == "o1" and full["after"]["note"] == "full"
    deleted = by_op[("shop.public.customers", "d")]["value"]["before"]
    assert deleted[f["id"]] == 3 and deleted["name"] is None  # key-only before image
    tomb = [r for r in stream if r["value"] is None]
    assert all(t["key"] is not None for t in tomb)
    assert by_op[("shop.public.log", "t")]["key"] is None

    # Type mapping of the snapshot rows (Debezium's adaptive mode).
    c1 = next(r for r in snapshot if r["topic"] == "shop.public.customers" and r["key"][f["id"]] == 2)
    c1 = c1["value"]["after"]
    assert c1["created"] == "2024-01-04T03:04:05.500000Z"  # timestamptz(6): six fraction digits, as Debezium
    assert c1["born"] == 10959 and c1["tags"] == ["a", None, "b,2"]
    assert json.loads(c1["doc"]) == {"g": 2} and c1["photo"] == b"\x01\xff"

    assert _mirror_rows(_mirror([r for _, r in events], fields), fields) == _source_rows(pg, db)
    # The slot was advanced (Spark calls commit(end) of a batch when it plans the next one), and never beyond
    # what Spark's checkpoint records as committed.
    confirmed = pg.execute("select confirmed_flush_lsn - '0/0'::pg_lsn from pg_replication_slots where slot_name=%s",
                           (config["slot.name"],))[0][0]
    last = max(int(p.name) for p in (tmp_path / "ckpt" / "commits").glob("[0-9]*"))
    committed = json.loads((tmp_path / "ckpt" / "offsets" / str(last)).read_text().splitlines()[-1])
    committed_lsn = max(int(pos["lsn"]) for pos in committed.values())
    assert 0 < int(confirmed) <= committed_lsn


def test_replayed_ranges_yield_identical_events(pg):
    db = _db(pg)
    _schema(pg, db)
    config = _config(pg, db)
    src = build_connector(config, kind="source")
    start = canonical(src.initial_offsets())
    snap_end = canonical(src.latest_offsets(start, 5, None))
    _changes(pg, db, truncate=False)
    ranges = [(start, snap_end)]
    pos = snap_end
    for _ in range(20):
        end = canonical(src.latest_offsets(pos, 3, None))
        if end == pos:
            break
        ranges.append((pos, end))
        pos = end

    def read(connector: Any, a: dict, b: dict) -> list:
        return [row for t in connector.plan(a, b) for r in t.ranges for batch in connector.read_range(r)
                for row in batch.to_pylist()]

    first = [read(src, json.loads(dumps(a)), json.loads(dumps(b))) for a, b in ranges]
    again = build_connector(config, kind="source")
    second = [read(again, json.loads(dumps(a)), json.loads(dumps(b))) for a, b in ranges]
    assert first == second
    assert sum(map(len, first)) == 16 + 13  # the snapshot, then every change event
    assert all(dumps(json.loads(dumps(b))) == dumps(b) for _, b in ranges)
    # ranges are disjoint and cover every change once
    lsns = [(r["topic"], r["offset"], r["value"] is None) for rows in first[1:] for r in rows
            if r["value"] is None or r["value"]["op"] != "r"]
    assert len(lsns) == len(set((t, o, n, i) for i, (t, o, n) in enumerate(lsns)))
    src.commit(ranges[-1][1])
    assert src.lag(ranges[-1][1]) >= 0


def _read(connector: Any, a: dict, b: dict) -> list:
    return [row for t in connector.plan(a, b) for r in t.ranges for batch in connector.read_range(r)
            for row in batch.to_pylist()]


def test_batches_hold_about_max_records_of_wide_rows(pg):
    """The batch end is placed by the WAL bytes per change measured after the start, not a fixed guess (with
    128 bytes a change, rows of ~700 WAL bytes made batches of one 100-row transaction for 500 asked)."""
    db = _db(pg)
    pg.execute("create table wide (id int primary key, payload text)", database=db)
    src = build_connector(_config(pg, db, **{"snapshot.mode": "no_data"}), kind="source")
    pos = canonical(src.initial_offsets())
    pg.execute("""do $$ begin for i in 0..29 loop
        insert into wide select g, repeat('x', 600) from generate_series(i * 100 + 1, i * 100 + 100) g; commit;
        end loop; end $$""", database=db)
    sizes = []
    while True:
        end = canonical(src.latest_offsets(pos, 500, None))
        if end == pos:
            break
        sizes.append(len(_read(src, pos, end)))
        src.commit(end)
        pos = end
    assert sum(sizes) == 3000
    assert all(300 <= n <= 700 for n in sizes[:-1]), sizes


def test_a_batch_of_skipped_changes_only_yields_no_event(pg):
    """A truncate alone under Debezium's default skipped.operations (t): a batch without events, and the
    stream goes on after it."""
    db = _db(pg)
    pg.execute("create table t (id int primary key, v text)", database=db)
    src = build_connector(_config(pg, db, **{"snapshot.mode": "never", "skipped.operations": "t"}), kind="source")
    start = canonical(src.initial_offsets())
    pg.execute("truncate t", database=db)
    end = canonical(src.latest_offsets(start, None, None))
    assert end != start
    assert _read(src, start, end) == []
    pg.execute("insert into t values (1, 'one')", database=db)
    later = canonical(src.latest_offsets(end, None, None))
    assert [(r["value"]["op"], r["value"]["after"]["id"]) for r in _read(src, end, later)] == [("c", 1)]
    src.stop()


def test_events_carry_empty_header_lists(pg):
    """Headers are empty lists, not nulls: null lists cost O(rows²) per Arrow batch when Spark hands the rows
    to a Python sink. A primary-key change's events carry Debezium's __debezium.oldkey/newkey headers."""
    db = _db(pg)
    _schema(pg, db)
    src = build_connector(_config(pg, db), kind="source")
    start = canonical(src.initial_offsets())
    snap_end = canonical(src.latest_offsets(start, None, None))
    _changes(pg, db, truncate=False)
    end = canonical(src.latest_offsets(snap_end, None, None))
    rows = _read(src, start, snap_end) + _read(src, snap_end, end)
    assert {r["value"]["op"] for r in rows if r["value"]} == {"r", "c", "u", "d"}
    assert all(isinstance(r["headers"], list) for r in rows)
    # only the events of the key change carry headers: Debezium's marks of the other key
    marked = [(r["topic"], [(h["key"], bytes(h["value"])) for h in r["headers"]]) for r in rows if r["headers"]]
    assert marked == [("shop.inv.items", [("__debezium.newkey", b'{"sku":"s9"}')])] * 2 + [
        ("shop.inv.items", [("__debezium.oldkey", b'{"sku":"s2"}')])]


def test_unchanged_toast_values_are_filled_or_marked(pg):
    db = _db(pg)
    pg.execute("""
        create table docs (id int primary key, body text, n int);
        alter table docs alter column body set storage external;
        create table docs_full (id int primary key, body text, n int);
        alter table docs_full alter column body set storage external;
        alter table docs_full replica identity full;
    """, database=db)
    config = _config(pg, db, **{"snapshot.mode": "no_data"})
    src = build_connector(config, kind="source")
    start = canonical(src.initial_offsets())
    big = "x" * 10000
    pg.execute(f"insert into docs values (1, '{big}', 0); insert into docs_full values (1, '{big}', 0);"
               "update docs set n = 1; update docs_full set n = 1;", database=db)
    end = canonical(src.latest_offsets(start, None, None))
    rows = [row for t in src.plan(start, end) for r in t.ranges for b in src.read_range(r) for row in b.to_pylist()]
    updates = {r["topic"]: r["value"]["after"] for r in rows if r["value"]["op"] == "u"}
    assert updates["shop.public.docs"]["body"] == "__debezium_unavailable_value"
    assert updates["shop.public.docs_full"]["body"] == big


def test_table_events_narrow_to_one_table_with_connect_names(spark, pg, tmp_path):
    db = _db(pg)
    _schema(pg, db)
    config = _config(pg, db)
    df = spark.read.format("kconnect").options(**config).load()
    assert df.schema["value"].metadata["connect.name"] == "shop.Envelope"
    orders = table_events(df, "public.orders")
    assert orders.schema["value"].metadata["connect.name"] == "shop.public.orders.Envelope"
    assert orders.schema["key"].metadata["connect.name"] == "shop.public.orders.Key"
    after = orders.schema["value"].dataType["after"]
    assert after.dataType.fieldNames() == ["id", "customer", "note"]
    assert after.metadata["connect.name"] == "shop.public.orders.Value"
    assert sorted(r["key"]["id"] for r in orders.collect()) == [1, 2, 3, 4, 5]
    items = table_events(df, "inv.items")
    assert items.schema["value"].dataType["after"].dataType.fieldNames() == ["sku", "qty", "id"]


def test_unwrapped_events_feed_the_jdbc_sink_mirror(spark, pg, tmp_path):
    """Debezium events -> ExtractNewRecordState -> JDBC sink (upsert + delete), one table."""
    from spark_connect_bridge.transforms import apply_transforms

    db = _db(pg)
    _schema(pg, db)
    mirror_db = _db(pg)
    pg.execute("create table orders_mirror (id bigint primary key, customer int, note text)", database=mirror_db)
    config = _config(pg, db)
    sink = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{mirror_db}", "connection.user": "postgres",
            "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
            "table.name.format": "orders_mirror"}
    unwrap = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
    ckpt = str(tmp_path / "ckpt")

    def run() -> None:
        df = spark.readStream.format("kconnect").options(**config).load()
        out = apply_transforms(table_events(df, "public.orders"), unwrap)
        q = (out.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()

    run()
    _changes(pg, db)
    run()
    want = sorted(pg.execute("select id, customer, note from orders", database=db))
    got = sorted(pg.execute("select id, customer, note from orders_mirror", database=mirror_db))
    assert got == want


def test_postgres_restart_mid_stream_loses_and_doubles_nothing(spark, pg, tmp_path):
    db = _db(pg)
    pg.execute("create table t (id int primary key, v int)", database=db)
    config = _config(pg, db, **{"errors.retry.timeout": 120000, "max.records.per.trigger": 50,
                                "snapshot.mode": "no_data"})
    build_connector(config, kind="source").initial_offsets()  # the slot exists before the changes
    events: list = []

    def each(batch_df: Any, batch_id: int) -> None:
        events.extend(r.asDict(recursive=True) for r in batch_df.select("key", "value", "offset").collect())

    q = (spark.readStream.format("kconnect").options(**config).load().writeStream.foreachBatch(each)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="500 milliseconds").start())
    try:
        pg.execute("insert into t select g, 0 from generate_series(1, 200) g", database=db)
        _wait(lambda: len(events) >= 50, q)
        pg.restart()
        pg.execute("update t set v = 1 where id <= 100", database=db)
        pg.execute("insert into t select g, 2 from generate_series(201, 250) g", database=db)
        _wait(lambda: len(events) >= 350, q)
    finally:
        q.stop()
    mirror = {}
    for e in events:
        mirror[e["key"]["id"]] = e["value"]["after"]["v"]
    assert len(events) == 350
    assert len({(e["offset"], e["key"]["id"]) for e in events}) == 350
    assert mirror == dict(pg.execute("select id, v from t", database=db))


def _wait(cond: Any, q: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if q.exception() is not None:
            raise q.exception()
        assert time.monotonic() < deadline, f"timed out waiting for the stream ({q.lastProgress})"
        time.sleep(0.5)


_DRIVER = textwrap.dedent("""
    import json, os, sys, time
    from pyspark.sql import SparkSession
    config, ckpt, out, marker = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())

    def each(df, batch_id):
        df.select("key", "value", "topic", "offset").write.mode("overwrite").json(f"{out}/batch={batch_id}")
        if batch_id == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(600)  # killed here: batch 2 written but not committed

    q = (spark.readStream.format("kconnect").options(**config).load().writeStream.foreachBatch(each)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
""")


def test_killed_driver_mid_batch_resumes_without_loss_or_duplicates(pg, tmp_path):
    db = _db(pg)
    pg.execute("create table t (id int primary key, v int)", database=db)
    config = _config(pg, db, **{"max.records.per.trigger": 10, "snapshot.mode": "no_data"})
    build_connector(config, kind="source").initial_offsets()  # the slot exists before the changes
    for g in range(1, 31):  # one transaction each: batches of 10 changes
        pg.execute(f"insert into t values ({g}, 0)", database=db)
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    ckpt, out, marker = str(tmp_path / "ckpt"), str(tmp_path / "out"), str(tmp_path / "marker")
    args = [sys.executable, str(script), json.dumps(config), ckpt, out, marker]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    # first run: batches of 10 changes; killed -9 inside batch 2, after its output was written
    proc = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not os.path.exists(marker):
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.3)
        # batch 2 is running: the slot is held by the walsender of the driver's kept replication connection
        holder = pg.execute("select a.backend_type from pg_replication_slots s join pg_stat_activity a "
                            "on a.pid = s.active_pid where s.slot_name = %s", (config["slot.name"],))
        assert holder == [("walsender",)]
        pg.execute("update t set v = 1 where id <= 15; delete from t where id > 25;"
                   "insert into t select g, 2 from generate_series(31, 40) g", database=db)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    # after the crash the slot stands at the end of the last batch Spark committed (batch 1), not further
    deadline = time.monotonic() + 60
    while pg.execute("select active_pid from pg_replication_slots where slot_name = %s",
                     (config["slot.name"],))[0][0] is not None:
        assert time.monotonic() < deadline, "the crashed driver's walsender still holds the slot"
        time.sleep(0.1)
    last = max(int(p.name) for p in (Path(ckpt) / "commits").glob("[0-9]*"))
    committed = json.loads((Path(ckpt) / "offsets" / str(last)).read_text().splitlines()[-1])
    confirmed = pg.execute("select confirmed_flush_lsn - '0/0'::pg_lsn from pg_replication_slots "
                           "where slot_name = %s", (config["slot.name"],))[0][0]
    assert last == 1 and int(confirmed) == max(int(pos["lsn"]) for pos in committed.values())
    # second run: resumes from the checkpoint, replays batch 2, then streams the changes
    done = subprocess.run(args, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    batches = sorted(Path(out).glob("batch=*"), key=lambda p: int(p.name.split("=")[1]))
    events = [json.loads(line) for b in batches for f in sorted(b.glob("part-*.json"))
              for line in f.read_text().splitlines()]
    mirror: dict[int, int] = {}
    for e in events:
        v = e.get("value")
        if v is None:
            continue
        if v["op"] == "d":
            mirror.pop(v["before"]["id"], None)
        else:
            mirror[v["after"]["id"]] = v["after"]["v"]
    assert mirror == dict(pg.execute("select id, v from t", database=db))
    keys = [(e["topic"], e["offset"], e["key"]["id"], (e.get("value") or {}).get("op")) for e in events]
    assert len(keys) == len(set(keys)), "duplicated events"
    assert len(events) == 30 + 15 + 5 * 2 + 10


_TABLE_COLUMNS = {"shop.public.customers": ["id", "name", "amount", "created", "born", "tags", "doc", "photo"],
                  "shop.public.orders": ["id", "customer", "note"], "shop.inv.items": ["sku", "qty", "id"],
                  "shop.public.log": ["n", "msg"]}


def test_one_connector_over_many_tables_writes_each_tables_own_debezium_schema(spark, pg):
    """A Debezium config with JsonConverter, run unchanged: each table's events carry exactly its columns and
    Debezium's schema names; snapshot events carry the snapshot transaction's txId."""
    from spark_connect_bridge.engine.pipeline import read_batch

    db = _db(pg)
    _schema(pg, db)
    config = {**_config(pg, db), "key.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    rows = read_batch(spark, config).collect()
    assert {r["topic"] for r in rows} == set(_TABLE_COLUMNS)
    txids = set()
    for r in rows:
        topic, env = r["topic"], json.loads(r["value"])
        schema, payload = env["schema"], env["payload"]
        assert schema["name"] == f"{topic}.Envelope"
        after = next(f for f in schema["fields"] if f["field"] == "after")
        assert after["name"] == f"{topic}.Value"
        assert [f["field"] for f in after["fields"]] == _TABLE_COLUMNS[topic]
        assert list(payload["after"]) == _TABLE_COLUMNS[topic] and payload["before"] is None
        assert payload["op"] == "r"
        txids.add(payload["source"]["txId"])
        if r["key"] is not None:  # log has no primary key
            key = json.loads(r["key"])
            assert key["schema"]["name"] == f"{topic}.Key"
            assert list(key["payload"]) == list(_KEYS[topic])
    assert len(txids) == 1 and isinstance(next(iter(txids)), int) and next(iter(txids)) > 0


def test_debezium_config_into_a_jdbc_sink_gives_each_table_its_own_columns(spark, pg, tmp_path):
    """Debezium source -> ExtractNewRecordState + RegexRouter -> Confluent JDBC sink (auto.create): each mirror
    table has the columns of its own source table only, and the same rows."""
    from spark_connect_bridge.engine.pipeline import read_stream, write_stream

    db = _db(pg)
    _schema(pg, db)
    mirror_db = _db(pg)
    source = _config(pg, db, **{"table.include.list": "public.orders,inv.items"})
    sink = {"name": "mirror", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{mirror_db}", "connection.user": "postgres",
            "auto.create": "true", "insert.mode": "upsert",
            "pk.mode": "record_key", "delete.enabled": "true",
            "transforms": "unwrap,route",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "([^.]+)\\.([^.]+)\\.([^.]+)", "transforms.route.replacement": "$3"}
    ckpt = str(tmp_path / "ckpt")

    def run() -> None:
        q = write_stream(read_stream(spark, source), sink, checkpoint=ckpt, trigger={"availableNow": True})
        q.awaitTermination()
        assert q.exception() is None

    run()
    _changes(pg, db)
    run()
    for table, cols in (("orders", ["id", "customer", "note"]), ("items", ["sku", "qty", "id"])):
        got_cols = [r[0] for r in pg.execute(
            "select column_name from information_schema.columns where table_name = %s order by ordinal_position",
            (table,), database=mirror_db)]
        assert got_cols == cols
        select = f"select {', '.join(cols)} from {{}}"
        want = sorted(pg.execute(select.format("inv.items" if table == "items" else table), database=db))
        assert sorted(pg.execute(select.format(table), database=mirror_db)) == want


def test_debezium_config_into_delta_tables_per_topic_gives_each_table_its_own_columns(spark, pg, tmp_path):
    """One connector over two tables, merged into one Delta table per topic: each has its own columns only."""
    from deltalake import DeltaTable

    from spark_connect_bridge.engine.pipeline import read_stream, write_stream

    db = _db(pg)
    _schema(pg, db)
    source = _config(pg, db, **{"table.include.list": "public.orders,inv.items"})
    sink = {"name": "lake", "connector.class": "delta-sink", "delta.write.mode": "merge",
            "delta.table.path": str(tmp_path / "lake" / "${topic}"), "delta.merge.order.by": "source.lsn"}
    ckpt = str(tmp_path / "ckpt")

    def run() -> None:
        q = write_stream(read_stream(spark, source), sink, checkpoint=ckpt, trigger={"availableNow": True})
        q.awaitTermination()
        assert q.exception() is None

    run()
    _changes(pg, db)
    run()
    for topic, table, cols in (("shop.public.orders", "orders", ["id", "customer", "note"]),
                               ("shop.inv.items", "inv.items", ["sku", "qty", "id"])):
        lake = DeltaTable(str(tmp_path / "lake" / topic)).to_pyarrow_table()
        assert lake.column_names == cols
        want = sorted(pg.execute(f"select {', '.join(cols)} from {table}", database=db))
        assert sorted(tuple(r[c] for c in cols) for r in lake.to_pylist()) == want
