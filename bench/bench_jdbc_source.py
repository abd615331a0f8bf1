"""Benchmark: the JDBC source (ADBC, Arrow batches) vs. Spark's own JDBC reader and vs. psql binary COPY.

One run, one table, one Spark session (local[2]); each reader writes to the ``noop`` sink. Two ceiling lines
measure the Python data source API itself: a minimal source yielding the same ADBC batches flat, and the same
batches wrapped in our record shape (no connector code in either). Beside wall times, the CPU seconds each
reader cost (best round), split into the Spark JVM, Python (driver and Spark's Python workers), the PostgreSQL
backends serving the benchmark database, and psql: on this shared machine wall time moves with the load, CPU
seconds much less.

    .venv/bin/python bench/bench_jdbc_source.py --rows 1000000 [--tasks 2] [--repeat 2]

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust). Spark's JDBC reader uses the PostgreSQL JDBC driver
fetched from Maven Central by ``spark_connect_bridge.jvm.configure_spark`` (declared in ``jvm/pom.xml``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

from _proctree import descendants, proc_table

DB = "kc_bench_jdbc"


def psql(sql: str, db: str = "test", out: str | None = None) -> None:
    cmd = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-q", "-c", sql]
    if out:
        with open(out, "wb") as f:
            subprocess.run(cmd, check=True, stdout=f)
    else:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def setup(rows: int) -> None:
    psql(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    psql(f'CREATE DATABASE "{DB}"')
    psql("CREATE TABLE big (id bigint PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz, payload text)",
         DB)
    psql(f"INSERT INTO big SELECT g, 'name' || g, (g % 100000) / 100.0, "
         f"timestamptz '2024-01-01' + g * interval '1 second', repeat('x', 100) FROM generate_series(1, {rows}) g",
         DB)
    psql("VACUUM ANALYZE big", DB)


class CpuSampler:
    """CPU seconds of this process's descendants (the Spark JVM, Python workers, psql) and of the PostgreSQL
    backends serving ``DB``, by kind. /proc is sampled every 20 ms, keeping each process's last figure, so
    short-lived processes (a backend per connection) count up to their last sample."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _sample(self) -> None:
        procs = proc_table()
        mine = descendants({os.getpid()}, procs)  # this driver itself (and this sampler) is not counted
        for pid, (_, comm, cpu) in procs.items():
            if pid == os.getpid():
                continue
            if pid in mine:
                kind = "jvm" if comm == "java" else "psql" if comm == "psql" else "python"
            elif comm.startswith("postgres"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if f" {DB} ".encode() not in f.read():
                            continue
                except OSError:
                    continue
                kind = "postgres"
            else:
                continue
            self.seen[pid] = (kind, cpu)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._sample()

    def totals(self) -> dict[str, float]:
        self._sample()
        out = {"jvm": 0.0, "python": 0.0, "postgres": 0.0, "psql": 0.0}
        for kind, cpu in list(self.seen.values()):
            out[kind] += cpu
        return out


RECORD_SCHEMA = ("key binary, value struct<id: long, name: string, amount: decimal(12,2), ts: timestamp, "
                 "payload: string>, topic string, partition int, offset long, timestamp timestamp, "
                 "headers array<struct<key: string, value: binary>>")


def ceiling_source(url: str, rows: int, parts: int, shaped: bool = False):
    """The API's ceiling here: a minimal Python data source yielding the ADBC Arrow batches of ``parts`` id ranges
    (numeric cast to decimal, nothing else): no offsets, no visibility checks, no connector code. ``shaped``:
    the same batches wrapped in the record shape our sources emit (value struct plus key, topic, partition,
    offset, timestamp, headers), built inline, i.e. what that output shape costs Spark by itself."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def partitions(self):
            edges = [rows * i // parts for i in range(parts + 1)]
            return [InputPartition((edges[i], edges[i + 1])) for i in range(parts)]

        def read(self, partition):
            import adbc_driver_postgresql.dbapi as adbc
            import pyarrow as pa

            lo, hi = partition.value
            conn = adbc.connect(url)
            try:
                cur = conn.cursor()
                cur.execute(f"SELECT id, name, amount, ts, payload FROM big WHERE id > {lo} AND id <= {hi}")
                headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
                for b in cur.fetch_record_batch():
                    amount = b.column(2)
                    amount = amount.storage if isinstance(amount.type, pa.ExtensionType) else amount
                    flat = pa.RecordBatch.from_arrays(
                        [b.column(0), b.column(1), amount.cast(pa.decimal128(12, 2)), b.column(3), b.column(4)],
                        names=["id", "name", "amount", "ts", "payload"])
                    if not shaped:
                        yield flat
                        continue
                    n = flat.num_rows
                    yield pa.RecordBatch.from_arrays(
                        [pa.nulls(n, pa.binary()), pa.StructArray.from_arrays(flat.columns, names=flat.schema.names),
                         pa.repeat(pa.scalar("b-big"), n), pa.repeat(pa.scalar(0, pa.int32()), n), b.column(0),
                         pa.nulls(n, pa.timestamp("us", tz="UTC")), pa.nulls(n, headers)],
                        names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])
            finally:
                conn.close()

    class CeilingSource(DataSource):
        @classmethod
        def name(cls):
            return "kc_adbc_ceiling_shaped" if shaped else "kc_adbc_ceiling"

        def schema(self):
            plain = "id long, name string, amount decimal(12,2), ts timestamp, payload string"
            return RECORD_SCHEMA if shaped else plain

        def reader(self, schema):
            return CeilingReader()

    return CeilingSource


def best_alternated(readers: dict, repeat: int, cpu: CpuSampler) -> tuple[dict, dict]:
    """Best wall time and least CPU seconds (by kind, of the round with the least total) of each reader over
    ``repeat`` rounds, the readers alternated within a round (so that a load change on this shared machine hits
    all of them, not one)."""
    times: dict = {k: [] for k in readers}
    cpus: dict = {k: [] for k in readers}
    for _ in range(repeat):
        for k, fn in readers.items():
            c = cpu.totals()
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
            c2 = cpu.totals()
            cpus[k].append({kind: c2[kind] - c[kind] for kind in c})
    for k, v in times.items():
        print(f"  {k}: " + ", ".join(f"{x:.2f}" for x in v) + " s; cpu "
              + ", ".join(f"{sum(c.values()):.2f}" for c in cpus[k]) + " s", flush=True)
    return {k: min(v) for k, v in times.items()}, {k: min(v, key=lambda c: sum(c.values())) for k, v in cpus.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database")
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    print(f"setting up {a.rows:,} rows ...", flush=True)
    setup(a.rows)
    cpu = CpuSampler()
    from pyspark.sql import SparkSession

    from spark_connect_bridge.jvm import artifacts, configure_spark

    pgjdbc = next(a.version for a in artifacts() if a.artifact == "postgresql")
    spark = (configure_spark(SparkSession.builder, delta=False).master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    url = f"jdbc:postgresql://127.0.0.1:5432/{DB}?user=postgres"
    opts = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": url,
            "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "big",
            "topic.prefix": "b-", "tasks.max": str(a.tasks)}

    def ours() -> None:
        spark.read.format("kconnect").options(**opts).load().write.format("noop").mode("overwrite").save()

    for shaped in (False, True):
        spark.dataSource.register(ceiling_source(f"postgresql://postgres@127.0.0.1:5432/{DB}", a.rows, a.tasks,
                                                 shaped))

    def ceiling() -> None:
        spark.read.format("kc_adbc_ceiling").load().write.format("noop").mode("overwrite").save()

    def ceiling_shaped() -> None:
        spark.read.format("kc_adbc_ceiling_shaped").load().write.format("noop").mode("overwrite").save()

    def spark_jdbc() -> None:
        (spark.read.format("jdbc").option("url", url).option("driver", "org.postgresql.Driver")
         .option("dbtable", "big").option("partitionColumn", "id")
         .option("lowerBound", 1).option("upperBound", a.rows).option("numPartitions", a.tasks)
         .option("fetchsize", 10000).load().write.format("noop").mode("overwrite").save())

    def copy() -> None:
        psql("COPY big TO STDOUT (FORMAT binary)", DB, out="/dev/null")

    n = spark.read.format("kconnect").options(**opts).load().count()
    assert n == a.rows, (n, a.rows)
    assert spark.read.format("kc_adbc_ceiling").load().count() == a.rows
    assert spark.read.format("kc_adbc_ceiling_shaped").load().count() == a.rows
    readers = {"kconnect JDBC source (ADBC, Arrow)": ours,
               "ceiling: minimal Python DS yielding ADBC batches": ceiling,
               "ceiling, same batches in our record shape": ceiling_shaped}
    readers[f"Spark JDBC reader (pgjdbc {pgjdbc})"] = spark_jdbc
    readers["psql COPY TO STDOUT (FORMAT binary) > /dev/null"] = copy
    results, cpus = best_alternated(readers, a.repeat, cpu)
    ours = "kconnect JDBC source (ADBC, Arrow)"
    ours_t, ours_c = results[ours], sum(cpus[ours].values())
    print(f"\nrows={a.rows:,} tasks={a.tasks} best of {a.repeat}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"  {'':<52} {'wall':>7}    {'rows/s':>12}  {'ours/this':>9} | {'cpu':>5}   (jvm python pg psql)  "
          f"ours/this (rows per cpu-s)")
    for k, t in results.items():
        c = cpus[k]
        print(f"  {k:<52} {t:7.2f} s  {a.rows / t:>12,.0f}  {t / ours_t:8.2f}x | {sum(c.values()):5.2f} s "
              f"({c['jvm']:.2f} {c['python']:.2f} {c['postgres']:.2f} {c['psql']:.2f})  "
              f"{sum(c.values()) / ours_c:5.2f}x")
    spark.stop()
    if not a.keep:
        psql(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
