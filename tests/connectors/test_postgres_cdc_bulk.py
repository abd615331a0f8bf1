"""The vectorised pgoutput path (ADBC Arrow fetch + :mod:`pgoutput_bulk`) yields exactly the events of the
per-message path, on random mixed workloads over many types, both replica identities, key updates, unchanged
TOAST values, truncates and range bounds that cut through the peek."""

from __future__ import annotations

import random
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.postgres import pgoutput_bulk
from spark_connect_bridge.connectors.postgres.pgoutput import Decoder
from spark_connect_bridge.connectors.postgres.stream import SlotReader
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _db(pg: PostgresCluster) -> str:
    return pg.new_database("bulk")


def _config(pg: PostgresCluster, db: str, **extra: Any) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
            "slot.name": f"slot_{db}", "skipped.operations": "none", "snapshot.mode": "no_data",
            **pg.connector_config(db), **{k: str(v) for k, v in extra.items()}}


_SCHEMA = """
    create table wide (id int primary key, s smallint, b bigint, f4 real, f8 double precision, ok boolean,
                       amount numeric(12,3), free numeric, t text, vc varchar(20), created timestamptz,
                       local timestamp, day date, tm time, u uuid, doc jsonb, js json, raw bytea, tags text[],
                       nums int[], big text);
    alter table wide alter column big set storage external;
    create table full_ident (k text primary key, n int, note text);
    alter table full_ident replica identity full;
    create table nokey (n int, msg text);
"""


def _value(rnd: random.Random, kind: str, toast: bool = True) -> str:
    if rnd.random() < 0.15:
        return "null"
    r = rnd.randint(-10**6, 10**6)
    return {
        "s": str(r % 30000), "b": str(r * 10**9), "f4": f"{r / 7:.3f}", "f8": repr(r / 3),
        "ok": rnd.choice(["true", "false"]), "amount": f"{r / 1000:.3f}", "free": f"{r}.{rnd.randint(0, 999)}",
        "t": "'" + rnd.choice(["", "a", "héllo", "x" * rnd.randint(1, 40), "quote''s", "12chars_long"]) + "'",
        "vc": f"'v{r % 1000}'", "created": f"timestamptz '2024-01-02 03:04:05.123456+00' + {r} * interval '1 s'",
        "local": f"timestamp '1999-12-31 23:59:59.5' + {r} * interval '1 ms'",
        "day": f"date '2000-01-01' + {r % 20000}", "tm": f"time '12:00' + {r % 40000} * interval '1 s'",
        "u": f"'{uuid.UUID(int=abs(r) * 7919)}'", "doc": f"jsonb_build_object('r', {r})",
        "js": f"json_build_array({r}, 'x')", "raw": f"'\\x{abs(r):08x}'::bytea",
        "tags": rnd.choice(["'{}'", "array['a', null, 'b,c']", f"array['{r}']"]),
        "nums": rnd.choice(["'{}'", f"array[{r}, null, 3]"]),
        "big": f"repeat('{rnd.choice('abc')}', {rnd.choice([5, 3000]) if toast else 5})",
    }[kind]


_WIDE = ["s", "b", "f4", "f8", "ok", "amount", "free", "t", "vc", "created", "local", "day", "tm", "u", "doc", "js",
         "raw", "tags", "nums", "big"]


def _workload(pg: PostgresCluster, db: str, seed: int, txns: int, rare: bool) -> None:
    rnd = random.Random(seed)
    ids: set[int] = set()
    keys: set[str] = set()
    stmts = []
    for _ in range(txns):
        tx = ["begin"]
        for _ in range(rnd.randint(1, 12)):
            op = rnd.random()
            if op < 0.45 or not ids:
                i = rnd.randint(1, 10**6)
                if i in ids:
                    continue
                ids.add(i)
                tx.append(f"insert into wide (id, {', '.join(_WIDE)}) values "
                          f"({i}, {', '.join(_value(rnd, c, rare) for c in _WIDE)})")
            elif op < 0.7:
                i = rnd.choice(sorted(ids))
                cols = rnd.sample([c for c in _WIDE if c != "big"], rnd.randint(1, 4))
                tx.append(f"update wide set {', '.join(f'{c} = {_value(rnd, c)}' for c in cols)} where id = {i}")
            elif op < 0.8:
                i = rnd.choice(sorted(ids))
                ids.discard(i)
                tx.append(f"delete from wide where id = {i}")
            elif op < 0.9:
                k = f"k{rnd.randint(1, 50)}"
                tx.append(f"insert into full_ident values ('{k}', {rnd.randint(0, 9)}, 'n') on conflict (k) do "
                          f"update set n = excluded.n + 1, note = null")
                keys.add(k)
            elif keys and op < 0.95:
                tx.append(f"delete from full_ident where k = '{rnd.choice(sorted(keys))}'")
            else:
                tx.append(f"insert into nokey values ({rnd.randint(0, 99)}, 'm')")
        if rare and rnd.random() < 0.08 and ids:
            i = rnd.choice(sorted(ids))
            j = rnd.randint(10**6 + 1, 2 * 10**6)
            ids.discard(i)
            ids.add(j)
            tx.append(f"update wide set id = {j} where id = {i}")  # a key change: delete + create
        if rare and rnd.random() < 0.05:
            tx.append("truncate nokey")
        if rare and rnd.random() < 0.05 and keys:
            k = rnd.choice(sorted(keys))
            keys.discard(k)
            keys.add(k + "x")
            tx.append(f"update full_ident set k = '{k}x' where k = '{k}'")
        tx.append("commit")
        stmts.append(";\n".join(tx) + ";")
    for s in stmts:
        pg.execute(s, database=db)


def _events(builder: SlotReader, lo: int, hi: int, bulk: bool) -> Any:
    batches = list((builder._stream_bulk if bulk else builder._stream_once)(lo, hi, 0))
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def _commit_ends(pg: PostgresCluster, db: str, slot: str) -> list[int]:
    rows = pg.execute(f"""select (lsn - '0/0'::pg_lsn)::int8 from pg_logical_slot_peek_binary_changes(
        '{slot}', NULL, NULL, 'proto_version', '1', 'publication_names', 'dbz_publication')
        where get_byte(data, 0) = 67""", database=db)
    return [int(r[0]) for r in rows]


@pytest.mark.parametrize("seed,rare,tombstones", [(1, False, True), (2, True, True), (3, True, False)])
def test_bulk_decoder_yields_the_per_message_events(pg, monkeypatch, seed, rare, tombstones):
    calls = _count_chunks(monkeypatch)
    db = _db(pg)
    pg.execute(_SCHEMA, database=db)
    config = _config(pg, db, **{"tombstones.on.delete": str(tombstones).lower(), "max.batch.size": "97"})
    conn = build_connector(config, kind="source")
    start = int(conn.initial_offsets()[conn._key]["lsn"])
    _workload(pg, db, seed, txns=120, rare=rare)
    builder = SlotReader(conn.session, conn.settings, conn.layout())
    ends = _commit_ends(pg, db, config["slot.name"])
    rnd = random.Random(seed)
    # the whole range, and ranges cut at commit ends and at LSNs inside transactions
    cuts = [(start, ends[-1])] + [tuple(sorted(rnd.sample(ends, 2))) for _ in range(3)]
    cuts.append((start, ends[len(ends) // 2] - 1))
    for lo, hi in cuts:
        legacy = _events(builder, lo, hi, bulk=False)
        bulk = _events(builder, lo, hi, bulk=True)
        assert len(bulk) == len(legacy)
        assert bulk == legacy
    assert len(_events(builder, start, ends[-1], bulk=True)) > 300
    if not rare:
        assert calls["bulk"] > 0 and calls["refused"] == 0
    conn.stop()


def test_small_chunks_hand_over_state_between_bulk_and_per_message_decoding(pg, monkeypatch):
    """Chunks of a few messages: transactions span chunks, and chunks the bulk decoder refuses (truncate,
    key change, unchanged TOAST) alternate with bulk ones."""
    db = _db(pg)
    pg.execute(_SCHEMA, database=db)
    config = _config(pg, db)
    conn = build_connector(config, kind="source")
    start = int(conn.initial_offsets()[conn._key]["lsn"])
    _workload(pg, db, 7, txns=60, rare=True)
    builder = SlotReader(conn.session, conn.settings, conn.layout())
    ends = _commit_ends(pg, db, config["slot.name"])
    legacy = _events(builder, start, ends[-1], bulk=False)
    calls = _count_chunks(monkeypatch)
    chunked = list(_rechunked(builder, start, ends[-1], 7))
    assert pa.Table.from_batches(chunked).to_pylist() == legacy
    assert calls["bulk"] > 10 and calls["refused"] > 0
    conn.stop()


def _count_chunks(monkeypatch: Any) -> dict[str, int]:
    calls = {"bulk": 0, "refused": 0}
    real = pgoutput_bulk.decode_chunk

    def counting(dec: Decoder, lsn: np.ndarray, data: Any) -> Any:
        try:
            out = real(dec, lsn, data)
        except pgoutput_bulk.Unsupported:
            calls["refused"] += 1
            raise
        calls["bulk"] += 1
        return out

    monkeypatch.setattr(pgoutput_bulk, "decode_chunk", counting)
    return calls


def _rechunked(builder: SlotReader, lo: int, hi: int, size: int) -> Any:
    """_stream_bulk over record batches of ``size`` messages (ADBC's are megabytes)."""
    orig = builder._peek_chunks

    def small(aconn: Any, query: str) -> Any:
        for rb in orig(aconn, query):
            yield from (rb.slice(i, size) for i in range(0, rb.num_rows, size))

    builder._peek_chunks = small  # type: ignore[method-assign]
    try:
        yield from builder._stream_bulk(lo, hi, 0)
    finally:
        del builder._peek_chunks


def test_gather_binary_matches_slicing_up_to_the_end_of_the_buffer():
    rnd = np.random.default_rng(3)
    for size in (0, 1, 5, 11, 12, 13, 40, 3000):
        raw = rnd.integers(0, 256, size, dtype=np.uint8).tobytes()
        data = pa.array([raw], pa.binary())
        cb = pgoutput_bulk.ChunkBuffer(data)
        n = 200
        starts = rnd.integers(0, size + 1, n)
        lens = np.array([rnd.integers(0, size - s + 1) for s in starts], dtype=np.int64)
        valid = rnd.random(n) > 0.2
        got = pgoutput_bulk.gather_binary(cb, starts.astype(np.int64), lens, valid).to_pylist()
        want = [raw[s:s + ln] if v else None for s, ln, v in zip(starts, lens, valid)]
        assert got == want


def _slot_with_rows(pg, n: int) -> tuple[dict, Any, int, int]:
    """A connector on a new database's slot, and the LSNs before and after the commit of n rows into a table t."""
    db = _db(pg)
    pg.execute("create table t (id int primary key, v text)", database=db)
    config = _config(pg, db)
    conn = build_connector(config, kind="source")
    start = int(conn.initial_offsets()[conn._key]["lsn"])
    pg.execute(f"insert into t select g, 'v' || g from generate_series(1, {n}) g", database=db)
    return config, conn, start, _commit_ends(pg, db, config["slot.name"])[-1]


def test_bulk_read_waits_for_a_slot_busy_with_another_session(pg):
    """ADBC reports a busy slot as a ProgrammingError (SQLSTATE 55006): retried like psycopg's ObjectInUse."""
    import os
    import subprocess
    import threading
    import time

    config, conn, start, end = _slot_with_rows(pg, 50)
    db = config["database.dbname"]
    holder = subprocess.Popen(
        [os.path.join(pg.bin, "pg_recvlogical"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", db,
         "--slot", config["slot.name"], "--start", "-f", os.devnull, "-o", "proto_version=1",
         "-o", "publication_names=dbz_publication"])
    try:
        deadline = time.monotonic() + 30
        while not pg.execute(f"select active from pg_replication_slots where slot_name = '{config['slot.name']}'",
                             database=db)[0][0]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        threading.Timer(2.0, holder.terminate).start()
        t0 = time.monotonic()
        reader = SlotReader(conn.session, conn.settings, conn.layout())
        batches = list(reader.stream(start, end))  # stream() retries; bulk path
        rows = pa.Table.from_batches(batches).to_pylist()
        assert time.monotonic() - t0 >= 1.0  # it waited for the slot
    finally:
        holder.terminate()
        holder.wait()
    assert [r["value"]["after"]["id"] for r in rows] == list(range(1, 51))
    conn.stop()


def test_batches_read_over_the_connections_the_last_batch_kept_new_ones_when_those_are_gone(pg, monkeypatch):
    """An executor keeps the slot reader's connections for the connector's next batch; kept ones that no longer
    answer (the server restarted) are replaced without an error; a read left early, or connections kept unused
    past READER_KEEP_S, are closed."""
    import time

    from spark_connect_bridge.connectors.postgres import session as session_module

    _, conn, start, end = _slot_with_rows(pg, 30)
    opened: list[int] = []
    real = session_module.PgSession.adbc_connect
    monkeypatch.setattr(session_module.PgSession, "adbc_connect", lambda self: opened.append(1) or real(self))

    def ids() -> list[int]:
        reader = SlotReader(conn.session, conn.settings, conn.layout())
        return [r["value"]["after"]["id"] for r in pa.Table.from_batches(list(reader.stream(start, end))).to_pylist()]

    want = list(range(1, 31))
    assert ids() == want and ids() == want
    assert len(opened) == 1
    pg.restart()
    assert ids() == want
    assert len(opened) == 2
    early = SlotReader(conn.session, conn.settings, conn.layout())._stream_bulk(start, end, 0)
    next(early)
    early.close()
    assert ids() == want
    assert len(opened) == 3
    monkeypatch.setattr(session_module, "READER_KEEP_S", 0.1)
    assert ids() == want  # kept for 0.1 s only
    deadline = time.monotonic() + 60
    while conn.session._reader_key() in session_module._KEPT_READERS._idle:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    conn.stop()
