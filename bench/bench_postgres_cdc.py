"""Change events/s: PostgreSQL -> Spark (kconnect PostgreSQL CDC) -> noop, and -> a mirror table (Debezium
events, ExtractNewRecordState, JDBC sink upserts), against the raw rate of reading the same changes from the
slot without Spark, all in the same run (the machine is shared: load averages are printed with each figure).

Raw rates (one Python process, no Spark):

* ``raw per-message``: one peek through a psycopg cursor, every message decoded by the pure-Python
  :class:`~spark_connect_bridge.connectors.postgres.pgoutput.Decoder` (the path before the bulk decoder).
* ``raw bulk``: one peek fetched as Arrow by ADBC, decoded by :func:`~.pgoutput_bulk.decode_chunk`.
* ``connector in-process``: the connector's own ``latest_offsets``/``read_range``/``commit`` loop, events built
  (what a Spark task runs, without Spark), on a second slot.

Spark figures are given with the query start (JVM, Python workers) and without it (the sum of the batches'
``triggerExecution`` times), on slots of their own.

    .venv/bin/python bench/bench_postgres_cdc.py 300000
"""

from __future__ import annotations

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from _proctree import descendants, proc_table

from tests.support.postgres import PostgresCluster

PEEK = ("select (lsn - '0/0'::pg_lsn)::int8 as lsn, data from pg_logical_slot_peek_binary_changes("
        "'{slot}', NULL, NULL, 'proto_version', '1', 'publication_names', 'dbz_publication')")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


#: pid of the throwaway server's postmaster (pg_ctl detaches it from this process)
POSTMASTER: list[int] = []


def _cpu() -> dict[str, float]:
    """CPU seconds used so far by this process and its live descendants and by the throwaway PostgreSQL
    server, by kind: PostgreSQL, the Spark JVM, Python (this driver and Spark's Python workers). Wall-clock
    rates on a shared machine move with its load; CPU seconds much less."""
    procs = proc_table(reaped=True)  # own time plus that of reaped children (short-lived backends, workers)
    mine = descendants({os.getpid(), *POSTMASTER}, procs)
    out = {"postgres": 0.0, "jvm": 0.0, "python": 0.0}
    for pid in mine:
        if pid in procs:
            _, comm, cpu = procs[pid]
            kind = "postgres" if comm.startswith("postgres") else "jvm" if comm == "java" else "python"
            out[kind] += cpu
    return out


def _cpu_text(before: dict[str, float], n: int) -> str:
    after = _cpu()
    used = {k: after[k] - before[k] for k in after}
    total = sum(used.values())
    parts = ", ".join(f"{k} {v:.2f}s" for k, v in used.items())
    return f"cpu {parts} = {total:.2f}s, {n / max(total, 1e-9):,.0f} events/cpu-s"


def _rate(what: str, n: int, wall: float, cpu: dict[str, float] | None = None) -> float:
    extra = f"; {_cpu_text(cpu, n)}" if cpu is not None else ""
    print(f"{what}: {n} in {wall:.2f}s = {n / wall:,.0f}/s{extra}  [{_load()}]", flush=True)
    return n / wall


def _raw_per_message(dsn: str, slot: str) -> float:
    import psycopg

    from spark_connect_bridge.connectors.postgres.pgoutput import Decoder

    t0, c0 = time.monotonic(), _cpu()
    with psycopg.connect(dsn) as conn:
        cur = conn.cursor(name="raw", binary=True)
        cur.itersize = 20000
        cur.execute(PEEK.format(slot=slot))
        n = sum(1 for _ in Decoder(0, None).changes(cur))
    return _rate("raw per-message peek+decode", n, time.monotonic() - t0, c0)


def _raw_bulk(dsn_uri: str, slot: str) -> float:
    import adbc_driver_postgresql.dbapi as adbc

    from spark_connect_bridge.connectors.postgres.pgoutput import Decoder
    from spark_connect_bridge.connectors.postgres.pgoutput_bulk import (
        ChunkBuffer,
        decode_chunk,
        gather_binary,
    )

    t0, c0 = time.monotonic(), _cpu()
    n = 0
    dec = Decoder(0, None)
    with adbc.connect(dsn_uri, autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute(PEEK.format(slot=slot))
        for rb in cur.fetch_record_batch():
            data = rb.column(1)
            chunk = decode_chunk(dec, rb.column(0).to_numpy(), data)
            cb = ChunkBuffer(data)
            for g in chunk.groups:  # the value arrays too, not only the positions
                for j in range(len(g.relation.columns)):
                    gather_binary(cb, g.new.starts[j], g.new.lens[j], g.new.valid[j])
                n += len(g.index)
        cur.close()
    return _rate("raw bulk peek+decode (ADBC Arrow, value arrays)", n, time.monotonic() - t0,
                 c0)


def _in_process(config: dict) -> float:
    from spark_connect_bridge.connectors.factory import build_connector

    c = build_connector(config, kind="source")
    start = c.initial_offsets()
    t0, c0 = time.monotonic(), _cpu()
    n = batches = 0
    while True:
        end = c.latest_offsets(start, int(config["max.records.per.trigger"]), None)
        if end == start:
            break
        for task in c.plan(start, end):
            for rng in task.ranges:
                n += sum(b.num_rows for b in c.read_range(rng))
        c.commit(end)
        start = end
        batches += 1
    c.stop()
    return _rate(f"connector in-process (latest_offsets+read_range+commit, {batches} batches)", n,
                 time.monotonic() - t0, c0)


def _spark(spark: object, config: dict, sink: str, n_expected: int) -> tuple[float, float]:
    from spark_connect_bridge.connectors.postgres_cdc import table_events
    from spark_connect_bridge.transforms import apply_transforms

    ckpt = f"/tmp/bench-cdc-{os.getpid()}-{config['slot.name']}"
    t0, c0 = time.monotonic(), _cpu()
    df = spark.readStream.format("kconnect").options(**config).load()  # type: ignore[attr-defined]
    if sink == "noop":
        w = df.writeStream.format("noop")
    else:
        unwrap = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
        w = apply_transforms(table_events(df, "public.t"), unwrap).writeStream.format("kconnect").options(
            **{"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": sink,
               "connection.user": "postgres", "insert.mode": "upsert", "pk.mode": "record_key",
               "delete.enabled": "true", "table.name.format": "t_mirror"})
    q = w.option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.monotonic() - t0
    shutil.rmtree(ckpt, ignore_errors=True)
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000.0
    assert rows == n_expected, (rows, n_expected)
    what = "spark -> noop" if sink == "noop" else "spark -> JDBC mirror (unwrap, upsert)"
    total = _rate(f"{what}, with query start ({len(progress)} batches)", rows, wall, c0)
    steady = _rate(f"{what}, batches only (sum of triggerExecution)", rows, busy)
    phases: dict[str, int] = {}
    for p in progress:
        for k, v in p["durationMs"].items():
            phases[k] = phases.get(k, 0) + v
    print("  batch phases (s): " + ", ".join(f"{k} {v / 1000:.2f}" for k, v in sorted(phases.items())
                                            if k != "triggerExecution"), flush=True)
    return total, steady


def main(n: int) -> None:
    from pyspark.sql import SparkSession

    from spark_connect_bridge.connectors.factory import build_connector

    print(_load())
    with PostgresCluster(settings={"max_wal_size": "'4GB'"}) as pg:
        pg.execute("create table t (id bigint primary key, name text, amount numeric(12,2), ts timestamptz, "
                   "payload text)")
        pg.execute("create database mirror", database="postgres")
        pg.execute("create table t_mirror (id bigint primary key, name text, amount numeric(12,2), "
                   "ts text, payload text)", database="mirror")
        base = {"connector.class": "PostgresConnector", "topic.prefix": "bench", "snapshot.mode": "no_data",
                "max.records.per.trigger": "200000", "max.batch.size": "20000", **pg.connector_config()}
        slots = ("debezium", "inproc", "noop", "noop_warm", "mirror")
        configs = {s: {**base, "slot.name": s} for s in slots}
        for s in slots:  # every slot exists before the changes: each reader sees all of them
            build_connector(configs[s], kind="source").initial_offsets()
        t0 = time.monotonic()
        pg.execute(f"""do $$ begin for i in 0..{n // 1000 - 1} loop
            insert into t select g, 'name-' || g, g * 0.01, now(), repeat('x', 100)
              from generate_series(i * 1000 + 1, i * 1000 + 1000) g; commit; end loop; end $$""")
        print(f"generated {n} inserts in {time.monotonic() - t0:.1f}s")
        with open(os.path.join(pg.data, "postmaster.pid")) as f:
            POSTMASTER.append(int(f.readline()))

        per_message = _raw_per_message(pg.dsn(), "debezium")
        bulk = _raw_bulk(f"postgresql://postgres@127.0.0.1:{pg.port}/{pg.database}", "debezium")
        in_process = _in_process(configs["inproc"])

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        noop, noop_steady = _spark(spark, configs["noop"], "noop", n)
        print("again in the same Spark session (JVM and Python workers warm):")
        warm, warm_steady = _spark(spark, configs["noop_warm"], "noop", n)
        mirror, mirror_steady = _spark(spark, configs["mirror"],
                                       f"jdbc:postgresql://127.0.0.1:{pg.port}/mirror", n)
        got = pg.execute("select count(*) from t_mirror", database="mirror")[0][0]
        assert got == n, (got, n)
        spark.stop()
        print(f"ratios to raw per-message: bulk {bulk / per_message:.2f}, in-process {in_process / per_message:.2f}, "
              f"noop {noop / per_message:.2f} ({noop_steady / per_message:.2f} without query start), "
              f"noop warm {warm / per_message:.2f} ({warm_steady / per_message:.2f}), "
              f"mirror {mirror / per_message:.2f} ({mirror_steady / per_message:.2f} without query start)")
        print(f"ratios to raw bulk: in-process {in_process / bulk:.2f}, noop {noop / bulk:.2f} "
              f"({noop_steady / bulk:.2f}), noop warm {warm / bulk:.2f} ({warm_steady / bulk:.2f}), "
              f"mirror {mirror / bulk:.2f} ({mirror_steady / bulk:.2f})")
        print(_load())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
