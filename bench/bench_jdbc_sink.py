"""Benchmark: the JDBC sink (staged ADBC ingest = binary COPY, then one INSERT ... SELECT transaction) vs. a raw
``COPY FROM`` of the same rows and vs. batched ``executemany``.

    .venv/bin/python bench/bench_jdbc_sink.py --rows 1000000 [--executemany-rows 100000]

"ours (SPI)" is the connector's executor ``write`` plus driver ``commit`` in this process (what each Spark task
and the driver do), for ``commit.scope=batch`` (staged, the micro-batch visible at once) and ``commit.scope=task``
(each task COPYs straight into the table with its offsets row in one transaction); "ours (Spark)" is
``df.write.format("kconnect")`` with 2 partitions, including Spark. The executemany baseline is Confluent's
sink: one prepared INSERT, batch.size=3000 rows per executemany (psycopg 3 pipelines it), a commit per batch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time

DB = "kc_bench_jdbc_sink"
COLS = "id bigint PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz, payload text"


def psql(sql: str, db: str = "test", stdin: str | None = None, out: str | None = None) -> None:
    cmd = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-q", "-c", sql]
    with contextlib.ExitStack() as files:
        fin = files.enter_context(open(stdin, "rb")) if stdin else None
        fout = files.enter_context(open(out, "wb")) if out else subprocess.DEVNULL
        subprocess.run(cmd, check=True, stdin=fin, stdout=fout)


def arrow_records(rows: int):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(np.arange(1, rows + 1, dtype=np.int64))
    name = pc.binary_join_element_wise(pa.array(["name"] * rows), ids.cast(pa.string()), "")
    amount = pa.array(np.round((np.arange(rows) % 100000) / 100.0, 2)).cast(pa.decimal128(12, 2))
    ts = pa.array((np.int64(1704067200_000_000) + np.arange(rows, dtype=np.int64) * 1_000_000),
                  pa.timestamp("us", tz="UTC"))
    payload = pa.array(["x" * 100] * rows)
    value = pa.StructArray.from_arrays([ids, name, amount, ts, payload],
                                       names=["id", "name", "amount", "ts", "payload"])
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.table({"key": pa.nulls(rows, pa.binary()), "value": value, "topic": pa.array(["big"] * rows),
                     "partition": pa.array(np.zeros(rows, np.int32)), "offset": ids,
                     "timestamp": ts, "headers": pa.nulls(rows, headers)})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--executemany-rows", type=int, default=100_000)
    ap.add_argument("--spark", action="store_true", help="also time df.write.format('kconnect') in Spark")
    a = ap.parse_args()
    psql(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    psql(f'CREATE DATABASE "{DB}"')
    url = f"jdbc:postgresql://127.0.0.1:5432/{DB}?user=postgres"
    from spark_connect_bridge.connectors.base import CommitContext, WriteContext
    from spark_connect_bridge.connectors.factory import build_connector

    table = arrow_records(a.rows)
    results = {}

    def sink(name: str, mode: str, scope: str):
        psql(f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} ({COLS})", DB)
        return build_connector({"connector.class": "JdbcSinkConnector", "connection.url": url,
                                "table.name.format": name, "insert.mode": mode, "pk.mode": "record_value",
                                "pk.fields": "id", "commit.scope": scope}, kind="sink")

    for mode, scope in (("insert", "batch"), ("insert", "task"), ("upsert", "batch")):
        s = sink(f"t_{mode}_{scope}", mode, scope)
        app = f"bench-{mode}-{scope}"
        t = time.perf_counter()
        msg = s.write(iter(table.to_batches(max_chunksize=100_000)), WriteContext(app, 0, 0, 0))
        s.commit([msg], CommitContext(app, 0))
        results[f"ours (SPI), insert.mode={mode}, commit.scope={scope}"] = (time.perf_counter() - t, a.rows)

    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "rows.bin")
        psql("COPY t_insert_batch TO STDOUT (FORMAT binary)", DB, out=f)
        psql(f"CREATE TABLE t_copy ({COLS})", DB)
        t = time.perf_counter()
        psql("COPY t_copy FROM STDIN (FORMAT binary)", DB, stdin=f)
        results["raw psql COPY FROM STDIN (FORMAT binary)"] = (time.perf_counter() - t, a.rows)

    import psycopg

    n = min(a.executemany_rows, a.rows)
    py_rows = table.slice(0, n).column("value").to_pylist()
    tuples = [(r["id"], r["name"], r["amount"], r["ts"], r["payload"]) for r in py_rows]
    psql(f"CREATE TABLE t_many ({COLS})", DB)
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=DB) as c:
        t = time.perf_counter()
        with c.cursor() as cur:
            for i in range(0, n, 3000):
                cur.executemany("INSERT INTO t_many VALUES (%s, %s, %s, %s, %s)", tuples[i:i + 3000])
                c.commit()
        results[f"psycopg executemany, 3000 rows per batch ({n:,} rows)"] = (time.perf_counter() - t, n)

    if a.spark:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        psql(f"CREATE TABLE t_spark ({COLS})", DB)
        src = spark.range(1, a.rows + 1, numPartitions=2).selectExpr(
            "CAST(NULL AS BINARY) AS key",
            "named_struct('id', id, 'name', concat('name', id), 'amount', CAST((id % 100000) / 100.0 AS "
            "DECIMAL(12,2)), 'ts', timestamp_seconds(1704067200 + id), 'payload', repeat('x', 100)) AS value",
            "'big' AS topic", "0 AS partition", "id AS offset")
        t = time.perf_counter()
        (src.write.format("kconnect").option("connector.class", "JdbcSinkConnector")
         .option("connection.url", url).option("table.name.format", "t_spark").mode("append").save())
        results["ours (Spark df.write, 2 partitions)"] = (time.perf_counter() - t, a.rows)
        spark.stop()

    def rate(k: str) -> float:
        return results[k][1] / results[k][0]

    copy = rate("raw psql COPY FROM STDIN (FORMAT binary)")
    many = rate(next(k for k in results if k.startswith("psycopg executemany")))
    print(f"\nrows={a.rows:,}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for k, (secs, rows) in results.items():
        print(f"  {k:<62} {secs:7.2f} s  {rows / secs:>10,.0f} rows/s  /COPY = {rate(k) / copy:5.2f}x  "
              f"/executemany = {rate(k) / many:6.2f}x")
    psql(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
