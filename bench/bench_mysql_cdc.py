"""Change events/s: MariaDB binlog -> Spark (kconnect MariaDB CDC) -> noop, against reading the same binlog without
Spark, in one run on a throwaway MariaDB (the machine is shared: load averages are printed with each figure).

Without Spark (one Python process):

* ``python-mysql-replication``: the library's ``BinLogStreamReader`` over the first events, every row decoded by
  it (what a reader built on the library alone would do);
* ``connector in-process``: the connector's own ``latest_offsets``/``read_range`` loop, Debezium events built as
  Arrow (what a Spark task runs, without Spark).

Spark: ``readStream`` (``snapshot.mode=never``: the whole binlog) -> ``noop`` with ``Trigger.AvailableNow``,
twice on fresh checkpoints: the first query pays the JVM's warm-up and the Python workers' start (imports), the
second is the steady state a long-running query sees. Each is reported with the query start and without it (the
sum of the batches' ``triggerExecution``), and with the CPU seconds the JVM and the Python workers spent (read
from ``/proc``): on a shared machine the wall-clock rate says more about the load than about the code, the CPU
time per event does not. ``events per CPU-s`` divides the events by the CPU seconds of every process involved
(but the database server's); ``CPU-us per event`` splits them by process.

    .venv/bin/python bench/bench_mysql_cdc.py 300000           # include.schema.changes=true (Debezium's default)
    .venv/bin/python bench/bench_mysql_cdc.py 300000 false     # the change events' own, narrower shape
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical
from tests.support.mariadb import MariaDBServer


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def _generate(my: MariaDBServer, rows: int) -> None:
    my.execute("create database bench")
    my.execute("create table bench.orders (id int primary key, name varchar(50), amount decimal(12,2), "
               "ts datetime(6), payload varchar(200))")
    my.execute(f"""create procedure bench.gen() begin declare i int default 0; while i < {rows} do
        insert into bench.orders values (i, concat('n', i), i * 1.25, now(6), repeat('x', 100));
        set i = i + 1; if i % 1000 = 0 then commit; end if; end while; commit; end""")
    import pymysql

    with pymysql.connect(host="127.0.0.1", port=my.port, user="root", autocommit=False) as conn:
        conn.cursor().execute("call bench.gen()")
        conn.commit()


def _cpu_seconds(marker: str) -> dict[str, float]:
    """CPU seconds (user + system) so far of this run's JVM, its Python workers (the reads) and its Python
    streaming source runner (the driver's offsets and plans)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker not in cmd:
            continue
        kind = ("jvm" if cmd.split()[0].endswith("java") else "python workers" if "pyspark.daemon" in cmd
                else "python source runner" if "python_streaming_source_runner" in cmd else None)
        if kind:
            out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _library(my: MariaDBServer, limit: int) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    first = my.execute("show binary logs")[0][0]
    began = time.perf_counter()
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": my.port, "user": "root",
                                                     "passwd": ""}, server_id=77, log_file=first, log_pos=4,
                                resume_stream=True, blocking=False, only_events=[WriteRowsEvent],
                                enable_logging=False)
    rows = 0
    for event in stream:
        rows += len(event.rows)
        if rows >= limit:
            break
    stream.close()
    return rows, time.perf_counter() - began


def main(rows: int, schema_changes: str = "true") -> None:
    with MariaDBServer(settings={"max-binlog-size": "1G"}) as my:
        began = time.perf_counter()
        _generate(my, rows)
        print(f"generated {rows} single-row inserts (1000 per commit) in {time.perf_counter() - began:.1f} s")
        config = {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "database.hostname": "127.0.0.1",
                  "database.port": str(my.port), "database.user": "root", "database.server.id": "99",
                  "topic.prefix": "bench", "database.include.list": "bench", "snapshot.mode": "never",
                  "max.records.per.trigger": "100000", "include.schema.changes": schema_changes}

        n, secs = _library(my, min(rows, 20_000))
        lib = n / secs
        print(f"python-mysql-replication, {n} rows: {secs:.1f} s, {lib:,.0f} rows/s ({_load()})")

        source = build_connector(config, kind="source")
        pos = canonical(source.initial_offsets())
        got, began, cpu = 0, time.perf_counter(), time.process_time()
        while True:
            end = canonical(source.latest_offsets(pos, 100_000, None))
            if end == pos:
                break
            for task in source.plan(pos, end):
                for rng in task.ranges:
                    got += sum(b.num_rows for b in source.read_range(rng))
            pos = end
        secs, cpu = time.perf_counter() - began, time.process_time() - cpu
        raw = got / secs
        print(f"connector in-process, {got} events: {secs:.1f} s, {raw:,.0f} events/s; {cpu:.2f} CPU-s, "
              f"{got / cpu:,.0f} events per CPU-s ({_load()})")

        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        marker = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))  # this venv
        steady = 0.0
        for run in ("first query", "steady state"):
            with tempfile.TemporaryDirectory() as ckpt:
                before = _cpu_seconds(marker)
                began = time.perf_counter()
                q = (spark.readStream.format("kconnect").options(**config).load().writeStream.format("noop")
                     .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
                q.awaitTermination()
                wall = time.perf_counter() - began
                after = _cpu_seconds(marker)
                progress = q.recentProgress
            events = sum(p["numInputRows"] for p in progress)
            batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000.0
            used = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
            cpu = sum(used.values())
            steady = events / batches
            print(f"Spark -> noop, {run}, {events} events: {wall:.1f} s with the query start "
                  f"({events / wall:,.0f} events/s), {batches:.1f} s in batches ({steady:,.0f} events/s); CPU-s "
                  + ", ".join(f"{k} {v:.2f}" for k, v in sorted(used.items()))
                  + f": {events / max(cpu, 1e-9):,.0f} events per CPU-s, "
                  + ", ".join(f"{k} {v / max(events, 1) * 1e6:.1f}" for k, v in sorted(used.items()))
                  + f" CPU-us per event ({_load()})")
        print(f"ratio Spark steady state (batches) / connector in-process: {steady / raw:.2f}; "
              f"connector in-process / python-mysql-replication: {raw / lib:.1f}x")
        spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000, sys.argv[2] if len(sys.argv) > 2 else "true")
