"""JDBC source: Confluent offsets, deterministic ranges, task splitting, and no row lost when transactions
commit out of order (PostgreSQL: running-transaction tracking; MariaDB: lag window), driven through the SPI."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
import time

import pyarrow as pa
import pytest
from jdbc_support import my_conn, my_db, my_url, pg_conn, pg_db, pg_url, query  # noqa: F401

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.jdbc.dialects import dialect_for, parse_jdbc_url
from spark_connect_bridge.connectors.offsets import dumps
from spark_connect_bridge.errors import ConfigError


def source(url: str, **cfg):
    props = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": url,
             "topic.prefix": "db-"}
    props.update({k.replace("_", "."): v for k, v in cfg.items()})
    return build_connector(props, kind="source")


def read_all(src, start, end) -> list[dict]:
    out = []
    for task in src.plan(start, end):
        for rng in task.ranges:
            for b in src.read_range(rng):
                out += b.to_pylist()
    return out


def ids(rows) -> list[int]:
    return sorted(r["value"]["id"] for r in rows)


def test_out_of_order_commits_lose_nothing_on_postgres(pg_db):  # noqa: F811 - pytest fixture
    a, b, setup = pg_conn(pg_db, autocommit=False), pg_conn(pg_db, autocommit=False), pg_conn(pg_db)
    setup.execute("CREATE TABLE ooo (id serial PRIMARY KEY, v text)")
    src = source(pg_url(pg_db), mode="incrementing", incrementing_column_name="id", table_whitelist="ooo",
                 visibility_wait_ms="200")
    start = src.initial_offsets()
    a.execute("INSERT INTO ooo (v) VALUES ('early id, late commit')")  # id 1, not committed yet
    b.execute("INSERT INTO ooo (v) VALUES ('late id, early commit')")  # id 2
    b.commit()
    end1 = src.latest_offsets(start, None, None)
    # Confluent would now read id 2 and store {"incrementing": 2}, losing id 1 for ever. We wait.
    assert end1 == start
    a.commit()
    end2 = src.latest_offsets(end1, None, None)
    assert end2['{"table":"ooo"}'] == {"incrementing": 2}
    assert ids(read_all(src, end1, end2)) == [1, 2]
    for c in (a, b, setup):
        c.close()


def test_out_of_order_timestamps_lose_nothing_on_postgres(pg_db):  # noqa: F811 - pytest fixture
    a, b, setup = pg_conn(pg_db, autocommit=False), pg_conn(pg_db, autocommit=False), pg_conn(pg_db)
    setup.execute("CREATE TABLE ooo_ts (id serial PRIMARY KEY, ts timestamptz NOT NULL DEFAULT now(), v text)")
    src = source(pg_url(pg_db), mode="timestamp+incrementing", incrementing_column_name="id",
                 timestamp_column_name="ts", table_whitelist="ooo_ts", visibility_wait_ms="200")
    start = src.initial_offsets()
    a.execute("SELECT 1")  # transaction A starts: its now() is earlier than B's
    time.sleep(0.01)
    b.execute("INSERT INTO ooo_ts (v) VALUES ('b')")
    b.commit()
    end1 = src.latest_offsets(start, None, None)
    assert end1 == start  # A, still running, may commit an older timestamp
    a.execute("INSERT INTO ooo_ts (v) VALUES ('a')")
    a.commit()
    end2 = src.latest_offsets(end1, None, None)
    rows = read_all(src, end1, end2)
    assert sorted(r["value"]["v"] for r in rows) == ["a", "b"]
    pos = end2['{"table":"ooo_ts"}']
    assert set(pos) == {"timestamp", "timestamp_nanos", "incrementing"}
    for c in (a, b, setup):
        c.close()


def test_out_of_order_commits_lose_nothing_on_mariadb(my_db):  # noqa: F811 - pytest fixture
    a, b, setup = my_conn(my_db, autocommit=False), my_conn(my_db, autocommit=False), my_conn(my_db)
    query(setup, "CREATE TABLE ooo (id int AUTO_INCREMENT PRIMARY KEY, v varchar(20)) ENGINE=InnoDB")
    src = source(my_url(my_db), mode="incrementing", incrementing_column_name="id", table_whitelist="ooo",
                 incrementing_delay_interval_ms="1500")
    start = src.initial_offsets()
    query(a, "INSERT INTO ooo (v) VALUES ('a')")  # id 1, uncommitted
    query(b, "INSERT INTO ooo (v) VALUES ('b')")  # id 2
    b.commit()
    threading.Timer(0.3, a.commit).start()  # A commits while the source is looking, within the lag window
    end = src.latest_offsets(start, None, None)
    assert ids(read_all(src, start, end)) == [1, 2]
    for c in (a, b, setup):
        c.close()


def test_offsets_are_confluents_and_ranges_replay_identically(tmp_path):
    db = tmp_path / "s.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, ts TIMESTAMP NOT NULL, v TEXT)")
        c.executemany("INSERT INTO t (ts, v) VALUES (?, ?)",
                      [(f"2024-01-01 00:00:{i // 10:02d}.{i % 10}00", f"v{i}") for i in range(50)])
    src = source(f"jdbc:sqlite:{db}", mode="timestamp+incrementing", incrementing_column_name="id",
                 timestamp_column_name="ts")
    start = src.initial_offsets()
    assert start == {'{"table":"t"}': {"incrementing": -1, "timestamp": 0, "timestamp_nanos": 0}}
    mid = src.latest_offsets(start, 20, None)
    assert mid['{"table":"t"}'] == {"incrementing": 20, "timestamp": 1704067201900,
                                     "timestamp_nanos": 900_000_000}
    assert json.loads(dumps(mid)) == mid  # offsets survive Spark's JSON round trip
    first = read_all(src, start, mid)
    assert first == read_all(src, json.loads(dumps(start)), json.loads(dumps(mid)))  # replay: same records
    end = src.latest_offsets(mid, None, None)
    rest = read_all(src, mid, end)
    assert [r["offset"] for r in first + rest] == list(range(1, 51))
    r0 = first[0]
    assert (r0["topic"], r0["partition"], r0["key"]) == ("db-t", 0, None)
    assert r0["timestamp"] == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_tasks_max_splits_a_large_initial_load(pg_db):  # noqa: F811 - pytest fixture
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE big (id bigint PRIMARY KEY, amount numeric(12,2), note text)")
    c.execute("INSERT INTO big SELECT g, g / 100.0, 'n' || g FROM generate_series(1, 20000) g")
    src = source(pg_url(pg_db), mode="incrementing", incrementing_column_name="id", table_whitelist="big",
                 tasks_max="4")
    start = src.initial_offsets()
    end = src.latest_offsets(start, None, None)
    tasks = src.plan(start, end)
    assert len(tasks) == 4
    rows = read_all(src, start, end)
    assert ids(rows) == list(range(1, 20001))
    assert sum(r["value"]["amount"] for r in rows) == sum(range(1, 20001)) / 100
    c.close()


@pytest.mark.parametrize("col_type, tz", [("timestamptz", "UTC"), ("timestamp", "Europe/Paris")])
def test_postgres_timestamp_ranges_split_exactly_at_their_bounds(col_type, tz, pg_db):  # noqa: F811
    """timestamp+incrementing ranges cut between rows that share a timestamp and between microseconds:
    read range by range, every row comes once (the bounds are rendered as typed literals on PostgreSQL)."""
    c = pg_conn(pg_db)
    t = f"tsb_{col_type}"
    c.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, ts {col_type} NOT NULL)")
    c.execute(f"INSERT INTO {t} SELECT g, {col_type} '2024-03-31 00:59:59.999998' + (g / 3) * interval '1 microsecond'"
              " FROM generate_series(1, 40) g")
    src = source(pg_url(pg_db), mode="timestamp+incrementing", incrementing_column_name="id",
                 timestamp_column_name="ts", table_whitelist=t, db_timezone=tz)
    pos, seen = src.initial_offsets(), []
    for _ in range(20):
        end = src.latest_offsets(pos, 4, None)
        if end == pos:
            break
        seen += [r["value"]["id"] for r in read_all(src, pos, end)]
        pos = end
    assert seen == list(range(1, 41))
    c.close()


def test_postgres_range_read_streams_several_batches(pg_db):  # noqa: F811 - pytest fixture
    """A range with bound positions is not buffered into one batch: it arrives as several while it is read."""
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE wide (id bigint PRIMARY KEY, pad text)")
    c.execute("INSERT INTO wide SELECT g, repeat('x', 400) FROM generate_series(1, 100000) g")
    src = source(pg_url(pg_db), mode="incrementing", incrementing_column_name="id", table_whitelist="wide")
    start = src.initial_offsets()
    end = src.latest_offsets(start, None, None)
    [task] = src.plan(start, end)
    sizes = [b.num_rows for rng in task.ranges for b in src.read_range(rng)]
    assert sum(sizes) == 100000
    assert len(sizes) > 1
    c.close()


def test_postgres_numeric_columns_arrive_exact(pg_db):  # noqa: F811 - pytest fixture
    """NUMERIC(p, s) values (negative, null, the extremes of their precision; p <= 18 travels as an unscaled
    bigint, wider ones as text) arrive as the exact decimals."""
    from decimal import Decimal

    c = pg_conn(pg_db)
    c.execute("CREATE TABLE nums (id bigint PRIMARY KEY, a numeric(12,2), b numeric(18,4), k numeric(5,0), "
              "w numeric(20,4))")
    vals = [(1, "0.01", "-99999999999999.9999", "99999", "1234567890123456.1234"),
            (2, "-1234567890.99", "99999999999999.9999", "-99999", "-0.0001"),
            (3, None, None, None, None),
            (4, "0", "0.0001", "0", "0")]
    with c.cursor() as cur:
        cur.executemany("INSERT INTO nums VALUES (%s, %s, %s, %s, %s)", vals)
    src = source(pg_url(pg_db), mode="incrementing", incrementing_column_name="id", table_whitelist="nums")
    start = src.initial_offsets()
    rows = sorted(read_all(src, start, src.latest_offsets(start, None, None)), key=lambda r: r["value"]["id"])
    assert [tuple(r["value"][k] for k in ("id", "a", "b", "k", "w")) for r in rows] == \
        [(i, *(None if v is None else Decimal(v) for v in rest)) for i, *rest in vals]
    c.close()


def test_postgres_reads_a_type_created_after_the_shared_adbc_database(pg_db):  # noqa: F811
    """Reads share one ADBC database object per process (its type catalog is loaded once); a column of a type
    created after that still arrives decoded, not as the raw bytes of an unknown type."""
    d = dialect_for(parse_jdbc_url(pg_url(pg_db)))
    with d.adbc_read("SELECT 1 AS one") as r:
        assert r.read_all().to_pylist() == [{"one": 1}]
    c = pg_conn(pg_db)
    c.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    with d.adbc_read("SELECT ARRAY['happy'::mood, 'sad'] AS m") as r:
        assert r.read_all().to_pylist() == [{"m": ["happy", "sad"]}]
    c.close()


@pytest.mark.parametrize("kind", ["postgresql", "mariadb", "sqlite"])
def test_tasks_max_splits_one_large_bulk_read_by_primary_key(kind, request, tmp_path):
    """Bulk mode, tasks.max=3: one table is read as three key ranges (its integer primary key); together they
    hold every row once, with distinct offsets."""
    if kind == "sqlite":
        url = f"jdbc:sqlite:{tmp_path / 'b.db'}"
        with sqlite3.connect(tmp_path / "b.db") as c:
            c.execute("CREATE TABLE bb (id INTEGER PRIMARY KEY, note TEXT)")
            c.executemany("INSERT INTO bb VALUES (?, ?)", [(i, f"n{i}") for i in range(1, 5001)])
    else:
        name = request.getfixturevalue("pg_db" if kind == "postgresql" else "my_db")
        url = pg_url(name) if kind == "postgresql" else my_url(name)
        c = pg_conn(name) if kind == "postgresql" else my_conn(name)
        query(c, "CREATE TABLE bb (id bigint PRIMARY KEY, note text)")
        query(c, "INSERT INTO bb SELECT g, concat('n', g) FROM " + (
            "generate_series(1, 5000) g" if kind == "postgresql" else "(SELECT seq AS g FROM seq_1_to_5000) s"))
        c.close()
    src = source(url, mode="bulk", table_whitelist="bb", tasks_max="3")
    start = src.initial_offsets()
    end = src.latest_offsets(start, None, None)
    tasks = src.plan(start, end)
    assert len(tasks) == 3
    rows = read_all(src, start, end)
    assert ids(rows) == list(range(1, 5001))
    assert len({r["offset"] for r in rows}) == 5000
    assert tasks == src.plan(start, end)  # the same split on replay


def test_bulk_mode_and_query_mode(pg_db):  # noqa: F811 - pytest fixture
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE q1 (id int PRIMARY KEY, v text)")
    c.execute("INSERT INTO q1 VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    bulk = source(pg_url(pg_db), mode="bulk", table_whitelist="q1")
    s = bulk.initial_offsets()
    e = bulk.latest_offsets(s, None, None)
    assert ids(read_all(bulk, s, e)) == [1, 2, 3]
    q = source(pg_url(pg_db), mode="incrementing", incrementing_column_name="id",
               query="SELECT id, upper(v) AS v FROM q1 WHERE id > 1", topic_prefix="only")
    s = q.initial_offsets()
    assert list(s) == ['{"query":"query"}']
    rows = read_all(q, s, q.latest_offsets(s, None, None))
    assert [(r["topic"], r["value"]["v"]) for r in rows] == [("only", "B"), ("only", "C")]
    c.close()


def test_several_tables_share_one_union_schema(tmp_path):
    db = tmp_path / "m.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, x TEXT)")
        c.execute("CREATE TABLE b (id INTEGER PRIMARY KEY, y REAL)")
        c.execute("INSERT INTO a VALUES (1, 'x')")
        c.execute("INSERT INTO b VALUES (1, 2.5)")
    src = source(f"jdbc:sqlite:{db}", mode="incrementing")  # auto-detected INTEGER PRIMARY KEY
    assert src.schema()["value"].dataType.fieldNames() == ["id", "x", "y"]
    s = src.initial_offsets()
    rows = read_all(src, s, src.latest_offsets(s, None, None))
    assert sorted((r["topic"], r["partition"], r["value"]["x"], r["value"]["y"]) for r in rows) == \
        [("db-a", 0, "x", None), ("db-b", 1, None, 2.5)]


@pytest.mark.parametrize("cfg, key", [
    ({"mode": "timestamp"}, "timestamp.column.name"),
    ({"mode": "sometimes"}, "mode"),
    ({}, "mode"),
    ({"mode": "bulk", "table.whitelist": "a", "table.blacklist": "b"}, "table.whitelist"),
    ({"mode": "bulk", "numeric.mapping": "fuzzy"}, "numeric.mapping"),
])
def test_config_errors_name_the_key(cfg, key, tmp_path):
    with pytest.raises(ConfigError) as e:
        source(f"jdbc:sqlite:{tmp_path}/x.db", **{k.replace(".", "_"): v for k, v in cfg.items()})
    assert key in e.value.keys


def test_nullable_incrementing_column_is_refused(tmp_path):
    db = tmp_path / "n.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE n (seq INTEGER, v TEXT)")
    src = source(f"jdbc:sqlite:{db}", mode="incrementing", incrementing_column_name="seq")
    with pytest.raises(ConfigError, match="nullable"):
        src.initial_offsets()


@pytest.mark.parametrize("kind", ["mariadb", "sqlite"])
@pytest.mark.parametrize(("mapping", "want"), [
    ("best_fit", {"small": pa.int32(), "money": pa.float64(), "wide": pa.decimal128(20, 4)}),
    ("none", {"small": pa.decimal128(5, 0), "money": pa.decimal128(10, 2), "wide": pa.decimal128(20, 4)}),
])
def test_numeric_mapping_on_mariadb_and_sqlite(kind, mapping, want, request, tmp_path):
    t = f"nm_{mapping}"
    ddl = f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, small NUMERIC(5,0), money DECIMAL(10,2), wide DECIMAL(20,4))"
    ins = f"INSERT INTO {t} VALUES (1, 12345, 12.5, 1234567890123456.1234)"
    if kind == "sqlite":
        url = f"jdbc:sqlite:{tmp_path / 'n.db'}"
        with sqlite3.connect(tmp_path / "n.db") as c:
            c.execute(ddl)
            c.execute(ins)
    else:
        name = request.getfixturevalue("my_db")
        url = my_url(name)
        c = my_conn(name)
        query(c, ddl)
        query(c, ins)
        c.close()
    src = source(url, mode="bulk", table_whitelist=t, numeric_mapping=mapping)
    start = src.initial_offsets()
    got = src._arrow_schema
    assert {n: got.field(n).type for n in want} == want
    [row] = read_all(src, start, src.latest_offsets(start, None, None))
    v = row["value"]
    assert (int(v["small"]), float(v["money"])) == (12345, 12.5)
