"""Iceberg sink throughput: datagen → Iceberg (our sink config through the pipeline's write_stream, as the worker
runs it; pyiceberg engine, JDBC catalog on SQLite) against
a bare pyiceberg append of the same rows (foreachBatch: toArrow + Table.append, no exactly-once bookkeeping), in
the same run; and the upsert path (iceberg.tables.upsert-mode-enabled on orderid) on the same stream.

    .venv/bin/python bench/bench_iceberg_sink.py [rows] [rows_per_trigger] [append-only]
    .venv/bin/python bench/bench_iceberg_sink.py vs-original [rows]

Spark's own writeTo(...).append() through Iceberg's Spark runtime cannot be measured: Iceberg publishes no runtime
for Spark 4.2 (its 4.1 runtime fails to load on 4.2; see docs/tasks/iceberg.md), so the bare baseline is pyiceberg's
own Table.append of the same Arrow rows. Each phase reports wall time and the CPU seconds of this process tree (the
Spark JVM, its Python workers: bench/_proctree.py) per 1,000 rows, which the machine's load disturbs far less, and
that CPU per micro-batch by process (the JVM, this driver, Spark's task workers, each of the Python processes Spark
starts for a Python data source: its write planner, the streaming sink runner that commits each batch...). Many
small batches (``200000 5000``: 40 a round) make the cost per micro-batch stand out; ``append-only`` leaves the
upsert out.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time

from _proctree import descendants, proc_table

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    from pyiceberg.catalog import load_catalog
    from pyspark.sql import SparkSession

    from spark_connect_bridge.connectors.iceberg import catalog_properties
    from spark_connect_bridge.engine.pipeline import write_stream
    from spark_connect_bridge.jvm import with_python_launcher, with_session_defaults

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    per_trigger = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    # the session the worker and `kconnect` make (their Python launcher, jvm/python_launcher.py, and the session
    # defaults every session of ours starts with): both sides
    builder = with_python_launcher(SparkSession.builder.master("local[2]"))
    spark = with_session_defaults(builder.config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    src = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": str(rows // 2), "max.interval": "0", "tasks.max": "2",
           "max.records.per.trigger": str(per_trigger)}
    work = tempfile.mkdtemp(prefix="bench-iceberg-")
    catalog_keys = {"iceberg.catalog.type": "jdbc", "iceberg.catalog.uri": f"jdbc:sqlite:{work}/catalog.db",
                    "iceberg.catalog.warehouse": f"{work}/warehouse"}
    sink = {"connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
            "iceberg.tables.auto-create-enabled": "true", **catalog_keys}
    catalog = load_catalog("iceberg", **catalog_properties({k[len("iceberg.catalog."):]: v
                                                            for k, v in catalog_keys.items()}))

    cpu_seconds: dict[str, float] = {}
    by_process: dict[str, dict[str, float]] = {}

    def tree_cpu() -> float:
        procs = proc_table(reaped=True)
        return sum(procs[pid][2] for pid in descendants({os.getpid()}, procs))

    def timed(name: str, start) -> float:
        df = spark.readStream.format("kconnect").options(**src).load()
        kinds0, cpu0, t0 = cpu_by_process(), tree_cpu(), time.perf_counter()
        start(df, f"{work}/ck-" + re.sub(r"\W+", "-", name)).awaitTermination()
        wall = time.perf_counter() - t0
        cpu_seconds[name] = tree_cpu() - cpu0
        kinds1 = cpu_by_process()
        by_process[name] = {k: v - kinds0.get(k, 0.0) for k, v in kinds1.items() if v - kinds0.get(k, 0.0) > 0}
        return wall

    def ours(table: str, **extra: str):
        # the config as the worker and `kconnect run` run it (the pipeline's write_stream)
        return lambda df, ck: write_stream(df, {**sink, "iceberg.tables": table, **extra}, checkpoint=ck,
                                           trigger={"availableNow": True})

    def bare(table: str):
        def start(df, ck):
            catalog.create_namespace_if_not_exists("bench")
            state: dict = {}

            def append(batch, _batch_id):
                data = batch.toArrow()
                if "table" not in state:
                    state["table"] = catalog.create_table(table, data.schema)
                state["table"].append(data)

            return (df.select("value.*").writeStream.foreachBatch(append).option("checkpointLocation", ck)
                    .trigger(availableNow=True).start())
        return start

    load = os.getloadavg()
    # warm-up: python workers, imports
    warm = dict(src, iterations="1000")
    spark.read.format("kconnect").options(**warm).load().write.format("kconnect") \
        .options(**sink, **{"iceberg.tables": "bench.warm"}).mode("append").save()
    # the bare append first, then ours: the first streaming query of the session pays start-up costs, which in an
    # earlier run (ours first) made ours look slower than its upsert of the same rows. Round 2 repeats both into
    # new tables in the same session (warm: the JVM's JIT, the Python daemons; each query still starts its own
    # sink runner process).
    results = {}
    for round_ in (1, 2):
        results[f"bare pyiceberg append, round {round_}"] = timed(f"bare pyiceberg append, round {round_}",
                                                                  bare(f"bench.bare{round_}"))
        results[f"ours append, round {round_}"] = timed(f"ours append, round {round_}", ours(f"bench.ours{round_}"))
    tables = ["bench.ours1", "bench.bare1", "bench.ours2", "bench.bare2"]
    if "append-only" not in sys.argv[3:]:
        results["ours upsert (orderid)"] = timed("ours upsert (orderid)", ours("bench.upsert", **{
            "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "orderid"}))
        tables.append("bench.upsert")
    for table in tables:
        assert len(catalog.load_table(table).scan().to_arrow()) == rows, table
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name, secs in results.items():
        print(f"{name:36s} {rows} rows  {secs:7.2f} s  {rows / secs:10.0f} rows/s  "
              f"{cpu_seconds[name] / rows * 1000:6.3f} CPU-s per 1,000 rows")
    batches = -(-rows // per_trigger)
    print(f"CPU ms per micro-batch ({batches} a round), by process:")
    for name, kinds in by_process.items():
        print(f"  {name:36s} " + ", ".join(f"{k} {v / batches * 1000:.1f}" for k, v in
                                           sorted(kinds.items(), key=lambda kv: -kv[1]) if v / batches >= 0.0005))
    for round_ in (1, 2):
        bare_name, ours_name = f"bare pyiceberg append, round {round_}", f"ours append, round {round_}"
        print(f"round {round_}: ours / bare append: {results[bare_name] / results[ours_name]:.2f}x (wall), "
              f"{cpu_seconds[bare_name] / cpu_seconds[ours_name]:.2f}x (CPU); ours - bare per micro-batch: "
              f"{(results[ours_name] - results[bare_name]) / batches * 1000:.0f} ms wall, "
              f"{(cpu_seconds[ours_name] - cpu_seconds[bare_name]) / batches * 1000:.0f} ms CPU")


def cpu_by_process() -> dict[str, float]:
    """CPU seconds of this process tree by kind of process: the JVM, this driver, and each Python module Spark runs
    (``pyspark.daemon pyspark.worker``: the task workers; ``... write_into_data_source``: a sink's write planner,
    which makes its writer for each micro-batch; ``... python_streaming_sink_runner``: the commits). A daemon's
    exited children count in its own (reaped) CPU."""
    procs = proc_table(reaped=True)
    out: dict[str, float] = {}
    for pid in descendants({os.getpid()}, procs):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode() for a in f.read().split(b"\0") if a]
        except OSError:
            argv = []
        if pid == os.getpid():
            kind = "driver"
        elif "-m" in argv:
            kind = " ".join(a.rsplit(".", 1)[-1] if a.startswith("pyspark.sql.") else a
                            for a in argv[argv.index("-m") + 1:][:2])
        elif any("SparkSubmit" in a for a in argv) or (argv and argv[0].endswith("java")):
            kind = "JVM"
        else:
            kind = os.path.basename(argv[0]) if argv else "exited"
        out[kind] = out.get(kind, 0.0) + procs[pid][2]
    return out

def vs_original(rows: int) -> None:
    """The same records through Apache's IcebergSinkConnector (iceberg-kafka-connect 1.12.0, the differential
    tests' plugin) on a Kafka Connect 4.3 worker and through ours (sink_stream, availableNow), from one topic into
    one JDBC catalog on PostgreSQL (the original's JdbcCatalog; SQLite has no driver in its plugin)."""
    import json
    import uuid

    from confluent_kafka import Producer

    from spark_connect_bridge.bus.kafka import sink_stream
    from spark_connect_bridge.connectors.iceberg import load_iceberg_catalog

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from bench_vs_debezium import _cpu, _cpu_split, _ours_roots, _spark, _split_line

    from tests.support.kafka import KafkaBroker
    from tests.support.kafka_connect import KafkaConnectWorker
    from tests.support.postgres import PostgresCluster

    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "orderid", "type": "int64", "optional": False},
        {"field": "ordertime", "type": "int64", "optional": True},
        {"field": "itemid", "type": "string", "optional": True},
        {"field": "orderunits", "type": "double", "optional": True},
        {"field": "city", "type": "string", "optional": True},
        {"field": "zipcode", "type": "int32", "optional": True}]}
    with PostgresCluster() as pg, KafkaBroker() as kafka:
        db = pg.new_database("iceberg")
        topic = "orders"
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
        for i in range(rows):
            payload = {"orderid": i, "ordertime": 1_500_000_000_000 + i, "itemid": f"Item_{i % 997}",
                       "orderunits": (i % 1000) / 100, "city": f"City_{i % 50}", "zipcode": 10000 + i % 90000}
            producer.produce(topic, key=str(i).encode(), value=json.dumps({"schema": schema, "payload": payload}))
            if i % 10000 == 0:
                producer.flush(60)
        producer.flush(60)
        warehouse = tempfile.mkdtemp(prefix="bench-iceberg-orig-")

        def config(table: str) -> dict[str, str]:
            return {"name": table.replace(".", "-"), "connector.class":
                    "org.apache.iceberg.connect.IcebergSinkConnector", "topics": topic, "tasks.max": "1",
                    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                    "value.converter.schemas.enable": "true", "iceberg.tables": table,
                    "iceberg.tables.auto-create-enabled": "true", "iceberg.catalog.type": "jdbc",
                    "iceberg.catalog.uri": f"jdbc:postgresql://127.0.0.1:{pg.port}/{db}",
                    "iceberg.catalog.jdbc.user": "postgres", "iceberg.catalog.warehouse": warehouse,
                    # the original commits on its coordinator's interval (default 5 minutes); ours per batch
                    "iceberg.control.commit.interval-ms": "1000"}

        catalog = load_iceberg_catalog("iceberg", {k[len("iceberg.catalog."):]: v for k, v in config("x").items()
                                                   if k.startswith("iceberg.catalog.")})

        def committed(table: str) -> int:
            from pyiceberg.exceptions import NoSuchTableError

            try:
                snap = catalog.load_table(table).current_snapshot()
            except NoSuchTableError:
                return 0
            return int(snap.summary["total-records"]) if snap is not None else 0

        def span(table: str) -> float:
            """Seconds from the table's first snapshot to its last (the commits, without start-up)."""
            stamps = [s.timestamp_ms for s in catalog.load_table(table).metadata.snapshots]
            return (max(stamps) - min(stamps)) / 1000

        print(f"Iceberg sink: {rows} records (JsonConverter with schemas, one partition) -> a JDBC catalog on "
              f"PostgreSQL; round 1 is each side's first connector, round 2 a second one into a new table")
        theirs = []
        with KafkaConnectWorker(kafka.bootstrap, plugins=("iceberg-kafka-connect",), trace_tasks=False) as connect:
            for round_ in (1, 2):
                table = f"bench.theirs{round_}"
                cpu0, t0 = _cpu({connect.process.pid}), time.monotonic()
                connect.run(config(table), done=lambda table=table: committed(table) >= rows, timeout=1800)
                t1 = time.monotonic()
                theirs.append((t1 - t0, span(table), _cpu({connect.process.pid}) - cpu0, os.getloadavg()[0]))
        spark = _spark()
        roots = _ours_roots(spark)
        for round_ in (1, 2):
            table = f"bench.ours{round_}"
            split0, cpu0, t2 = _cpu_split(roots), _cpu(roots), time.monotonic()
            query = sink_stream(spark, config(table), bus=kafka.bootstrap,
                                checkpoint=f"{warehouse}/ck-{uuid.uuid4().hex[:8]}", trigger={"availableNow": True})
            query.awaitTermination()
            t3 = time.monotonic()
            ours_cpu, split1 = _cpu(roots) - cpu0, _cpu_split(roots)
            assert committed(table) == rows, table
            assert len(catalog.load_table(table).scan().to_arrow()) == rows
            wall, commits, cpu, load = theirs[round_ - 1]
            print(f"round {round_}: Apache's sink {wall:7.2f} s from the config submitted to its last commit "
                  f"({commits:.2f} s first commit to last), {cpu / rows * 1000:.3f} CPU-s per 1,000 rows (its "
                  f"worker JVM; load {load:.1f})")
            print(f"round {round_}: ours          {t3 - t2:7.2f} s from the query started to its last commit "
                  f"({span(table):.2f} s first commit to last), {ours_cpu / rows * 1000:.3f} CPU-s per 1,000 rows "
                  f"(Spark JVM, Python workers, driver; load {os.getloadavg()[0]:.1f})")
            print(f"round {round_}: ours / Apache's: {wall / (t3 - t2):.2f}x (wall), {cpu / ours_cpu:.2f}x (CPU)")
            _split_line(split0, split1, rows)
        spark.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "vs-original":
        vs_original(int(sys.argv[2]) if len(sys.argv) > 2 else 100_000)
    else:
        main()
