"""Delta sink throughput: datagen → Delta (our kconnect sink, deltalake engine) against Spark's own exactly-once
Parquet file sink on the same stream, in the same run.

    .venv/bin/python bench/bench_delta_sink.py [rows] [rows_per_trigger]

Both queries read the same Datagen ``orders`` stream (2 tasks), bounded by the same ``max.records.per.trigger``
and ``Trigger.AvailableNow``, and write the value's columns. Also measured: the MERGE path (CDC rows with
repeated keys, last change per key wins) against the append path on the same records.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    per_trigger = int(sys.argv[2]) if len(sys.argv) > 2 else 250_000
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    src = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": str(rows // 2), "max.interval": "0", "tasks.max": "2",
           "max.records.per.trigger": str(per_trigger)}
    work = tempfile.mkdtemp(prefix="bench-delta-")

    def stream(name: str, to_writer, transform=lambda d: d.select("value.*")) -> float:
        df = transform(spark.readStream.format("kconnect").options(**src).load())
        t0 = time.perf_counter()
        q = to_writer(df.writeStream).option("checkpointLocation", f"{work}/ck-{name}") \
            .trigger(availableNow=True).start()
        q.awaitTermination()
        return time.perf_counter() - t0

    # warm-up: python workers, JIT
    small = dict(src, iterations="2000", **{"max.records.per.trigger": "4000"})
    spark.read.format("kconnect").options(**small).load().select("value.*") \
        .write.format("kconnect").option("connector.class", "delta-sink") \
        .option("delta.table.path", f"{work}/warm").mode("append").save()

    runs = {}
    runs["spark parquet file sink (baseline)"] = stream(
        "parquet", lambda w: w.format("parquet").option("path", f"{work}/parquet"))
    runs["kconnect delta-sink append (deltalake)"] = stream(
        "delta", lambda w: w.format("kconnect").option("connector.class", "delta-sink")
        .option("delta.table.path", f"{work}/delta"))
    # CDC-shaped rows: 1,000 keys changed over and over; MERGE keeps the last change per key.
    cdc = lambda d: d.select(F.struct((F.col("value.orderid") % 1000).alias("id")).alias("key"),  # noqa: E731
                             F.struct((F.col("value.orderid") % 1000).alias("id"), F.col("value.itemid"),
                                      F.col("value.orderunits")).alias("value"),
                             "topic", "partition", "offset")
    runs["kconnect delta-sink merge (deltalake)"] = stream(
        "merge", lambda w: w.format("kconnect").option("connector.class", "delta-sink")
        .option("delta.table.path", f"{work}/merge").option("delta.write.mode", "merge"), cdc)

    assert spark.read.parquet(f"{work}/parquet").count() == rows
    assert DeltaTable(f"{work}/delta").to_pyarrow_table().num_rows == rows
    assert DeltaTable(f"{work}/merge").to_pyarrow_table().num_rows == 1000
    base = runs["spark parquet file sink (baseline)"]
    print(f"rows={rows} rows_per_trigger={per_trigger} load_avg={os.getloadavg()[0]:.1f}")
    for name, secs in runs.items():
        print(f"{name:42s} {secs:7.2f} s  {rows / secs / 1000:8.1f} k rows/s  ratio vs baseline "
              f"{base / secs:5.2f}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
