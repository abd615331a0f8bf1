"""Datagen -> noop sink vs spark.range -> noop, in one run, same session; prints rows/s and the ratio.

    .venv/bin/python bench/bench_datagen_noop.py [records] [tasks]

Baselines: ``spark.range(N)`` (a bare JVM long column) and ``spark.range(N)`` projected into the same record
shape as datagen's orders (key + struct value built by Catalyst expressions, all in the JVM). Our path: the
``kconnect`` data source reading the datagen connector (Arrow batches from Python workers), batch and streaming
(one Trigger.AvailableNow micro-batch). Each figure is the best of 3 runs after a warm-up.
"""

from __future__ import annotations

import os
import sys
import tempfile

from _timing import best

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)




def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{tasks}]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    per_task = n // tasks
    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "tasks.max": str(tasks), "iterations": str(per_task), "max.interval": "0"}

    def datagen_batch() -> None:
        spark.read.format("kconnect").options(**cfg).load().write.format("noop").mode("overwrite").save()

    def datagen_stream() -> None:
        q = (spark.readStream.format("kconnect").options(**cfg).load().writeStream.format("noop")
             .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
        q.awaitTermination()

    def range_bare() -> None:
        spark.range(0, per_task * tasks, 1, tasks).write.format("noop").mode("overwrite").save()

    def range_records() -> None:
        (spark.range(0, per_task * tasks, 1, tasks).selectExpr(
            "cast(id as int) as key",
            "named_struct('ordertime', 1487715775521 + id * 1000, 'orderid', cast(id as int), "
            "'itemid', concat('Item_', cast(hash(id, 5) % 999 as string)), "
            "'orderunits', (hash(id, 6) % 10000) / 1000.0,"
            " 'address', named_struct('city', concat('City_', cast(hash(id, 2) % 99 as string)), "
            "'state', concat('State_', cast(hash(id, 3) % 99 as string)), "
            "'zipcode', cast(hash(id, 4) % 90000 as bigint)))"
            " as value", "'orders' as topic", "cast(spark_partition_id() as int) as partition", "id as offset",
            "timestamp_millis(1487715775521 + id * 1000) as timestamp")
         .write.format("noop").mode("overwrite").save())

    small = dict(cfg, iterations="10000")
    spark.read.format("kconnect").options(**small).load().write.format("noop").mode("overwrite").save()
    range_bare()
    total = per_task * tasks
    results = {name: total / best(fn) for name, fn in [
        ("spark.range -> noop", range_bare), ("spark.range as records -> noop", range_records),
        ("datagen (batch read) -> noop", datagen_batch), ("datagen (stream, availableNow) -> noop", datagen_stream)]}
    print(f"records: {total:,}  tasks: {tasks}  pyspark {spark.version}")
    for name, rate in results.items():
        print(f"  {name:<40} {rate:>14,.0f} records/s")
    base = results["spark.range -> noop"]
    rec = results["spark.range as records -> noop"]
    for name in ("datagen (batch read) -> noop", "datagen (stream, availableNow) -> noop"):
        print(f"  ratio {name} / spark.range: {results[name] / base:.2f}x; "
              f"/ spark.range as records: {results[name] / rec:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
