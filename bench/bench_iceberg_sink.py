"""Iceberg sink throughput: datagen → Iceberg (our kconnect sink, pyiceberg engine, JDBC catalog on SQLite) against
a bare pyiceberg append of the same rows (foreachBatch: toArrow + Table.append, no exactly-once bookkeeping), in
the same run; and the upsert path (iceberg.tables.upsert-mode-enabled on orderid) on the same stream.

    .venv/bin/python bench/bench_iceberg_sink.py [rows] [rows_per_trigger]

Spark's own writeTo(...).append() through Iceberg's Spark runtime cannot be measured: Iceberg publishes no runtime
for Spark 4.2 (its 4.1 runtime fails to load on 4.2; see docs/tasks/iceberg.md), so the bare baseline is pyiceberg's
own Table.append of the same Arrow rows. Each phase reports wall time and the CPU seconds of this process tree (the
Spark JVM, its Python workers: bench/_proctree.py) per 1,000 rows, which the machine's load disturbs far less.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from _proctree import descendants, proc_table

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    from pyiceberg.catalog import load_catalog
    from pyspark.sql import SparkSession

    from spark_connect_bridge.connectors.iceberg import catalog_properties
    from spark_connect_bridge.jvm import with_session_defaults

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    per_trigger = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    # the session defaults every session of ours starts with (configure_spark, the worker, kconnect): both sides
    spark = with_session_defaults(SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
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

    def tree_cpu() -> float:
        procs = proc_table(reaped=True)
        return sum(procs[pid][2] for pid in descendants({os.getpid()}, procs))

    def timed(name: str, start) -> float:
        df = spark.readStream.format("kconnect").options(**src).load()
        cpu0, t0 = tree_cpu(), time.perf_counter()
        start(df, f"{work}/ck-{name}").awaitTermination()
        wall = time.perf_counter() - t0
        cpu_seconds[name] = tree_cpu() - cpu0
        return wall

    def ours(table: str, **extra: str):
        return lambda df, ck: (df.writeStream.format("kconnect").options(**sink, **{"iceberg.tables": table}, **extra)
                               .option("checkpointLocation", ck).trigger(availableNow=True).start())

    def bare(df, ck):
        catalog.create_namespace_if_not_exists("bench")
        state: dict = {}

        def append(batch, _batch_id):
            data = batch.toArrow()
            if "table" not in state:
                state["table"] = catalog.create_table("bench.bare", data.schema)
            state["table"].append(data)

        return (df.select("value.*").writeStream.foreachBatch(append).option("checkpointLocation", ck)
                .trigger(availableNow=True).start())

    load = os.getloadavg()
    # warm-up: python workers, imports
    warm = dict(src, iterations="1000")
    spark.read.format("kconnect").options(**warm).load().write.format("kconnect") \
        .options(**sink, **{"iceberg.tables": "bench.warm"}).mode("append").save()
    # the bare append first, then ours: the first streaming query of the session pays start-up costs, which in an
    # earlier run (ours first) made ours look slower than its upsert of the same rows
    results = {"bare pyiceberg append": timed("bare pyiceberg append", bare),
               "ours append": timed("ours append", ours("bench.ours")),
               "ours upsert (orderid)": timed("ours upsert (orderid)", ours("bench.upsert", **{
                   "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "orderid"}))}
    for table in ("bench.ours", "bench.bare", "bench.upsert"):
        assert len(catalog.load_table(table).scan().to_arrow()) == rows, table
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name, secs in results.items():
        print(f"{name:28s} {rows} rows  {secs:7.2f} s  {rows / secs:10.0f} rows/s  "
              f"{cpu_seconds[name] / rows * 1000:6.3f} CPU-s per 1,000 rows")
    print(f"ours / bare append: {results['bare pyiceberg append'] / results['ours append']:.2f}x (wall), "
          f"{cpu_seconds['bare pyiceberg append'] / cpu_seconds['ours append']:.2f}x (CPU)")


if __name__ == "__main__":
    main()
