"""JSON-envelope decode throughput: JsonConverter (schemas.enable=true, through apply_sink_converters: envelope
check, logical types, record errors) vs a bare ``from_json`` of the same messages' payload (no checks, the
timestamp left as a long).

    .venv/bin/python bench/bench_json_envelope.py 1000000 [--partitions 2]

Prints records/s of both (best of 2 runs each, alternated, cached input, noop sink), the throughput ratio (goal
>= 0.9), the JVM CPU seconds of both (the same process runs both sides; /proc on Linux) and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

SPARK_SCHEMA = "id BIGINT, customer STRING, amount DOUBLE, qty INT, paid BOOLEAN, at TIMESTAMP"
BARE_SCHEMA = "payload STRUCT<id: BIGINT, customer: STRING, amount: DOUBLE, qty: INT, paid: BOOLEAN, at: BIGINT>"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("records", type=int, nargs="?", default=1_000_000)
    p.add_argument("--partitions", type=int, default=2)
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_connect_bridge.converters import JsonConverter, apply_sink_converters, apply_source_converters

    spark = (SparkSession.builder.master(f"local[{args.partitions}]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    typed = spark.range(0, args.records, 1, args.partitions).select(
        F.lit(None).cast("binary").alias("key"),
        F.struct(F.col("id"), F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("customer"),
                 (F.col("id") * 0.5).alias("amount"), (F.col("id") % 7).cast("int").alias("qty"),
                 (F.col("id") % 2 == 0).alias("paid"), F.timestamp_millis(F.col("id") + 1_700_000_000_000).alias("at")
                 ).alias("value"),
        F.lit("orders").alias("topic"), F.lit(0).alias("partition"), F.col("id").alias("offset"))
    cfg = {"value.converter": JsonConverter.class_name, "value.converter.spark.schema": SPARK_SCHEMA}
    df = apply_source_converters(typed, cfg).cache()
    df.count()
    sample = df.first().value.decode()

    jvm = spark.sparkContext._gateway.proc.pid

    def jvm_cpu() -> float:
        try:
            with open(f"/proc/{jvm}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return float("nan")

    def run(frame) -> tuple[float, float]:
        c, t = jvm_cpu(), time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t, jvm_cpu() - c

    bare = df.select(F.from_json(F.col("value").cast("string"), BARE_SCHEMA)["payload"].alias("value"))
    ours_df = apply_sink_converters(df, cfg)
    runs = {"bare": [], "ours": []}
    for _ in range(2):  # alternated, so that a load change on the shared machine hits both sides
        runs["bare"].append(run(bare))
        runs["ours"].append(run(ours_df))
    base, ours = (min(w for w, _ in runs[k]) for k in ("bare", "ours"))
    base_cpu, ours_cpu = (min(c for _, c in runs[k]) for k in ("bare", "ours"))
    spark.stop()
    n = args.records
    print(f"records: {n:,}  partitions: {args.partitions}  message: {len(sample)} bytes")
    print(f"baseline bare from_json of the payload: {base:8.2f} s  {n / base:12,.0f} rec/s")
    print(f"ours (JsonConverter, envelope):         {ours:8.2f} s  {n / ours:12,.0f} rec/s")
    print(f"ratio ours/baseline throughput: {base / ours:.2f}x (goal >= 0.9x)")
    print(f"JVM CPU s (best run): baseline {base_cpu:.2f}  ours {ours_cpu:.2f}  ratio {base_cpu / ours_cpu:.2f}x")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
