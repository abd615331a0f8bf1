"""Benchmark: Flatten and Cast on schemaless JSON (JsonConverter ``schemas.enable=false``), same run, three ways:

* ``converter only``: the records read as a VARIANT, no SMT (the floor: the JSON parse);
* ``VARIANT``: Flatten then Cast on the VARIANT, as Kafka's SMTs take the Map its JsonConverter reads (no
  ``spark.schema``; ``transforms/flatten.py``, ``transforms/cast.py``);
* ``spark.schema``: the same chain on the struct that ``value.converter.spark.schema`` declares (what a user had to
  set before Flatten and Cast took a VARIANT; the struct's leaves are known at plan time).

Each message is a JSON object of 12 entries, 3 of them objects (one of them nested 3 deep), a list and a null.
The messages are cached in memory first; each variant is written to Spark's ``noop`` sink. Figures: CPU seconds of
the process tree (this process, the Spark JVM) per record, which moves far less with the machine's load than wall
time; the first run of each variant is the cold one, the best of the ``--repeat`` after it the warm one.

    python bench/bench_schemaless_flatten_cast.py --records 300000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _proctree import descendants, proc_table

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

JSON = "org.apache.kafka.connect.json.JsonConverter"
CHAIN = {
    "transforms": "flatten,cast",
    "transforms.flatten.type": "org.apache.kafka.connect.transforms.Flatten$Value",
    "transforms.flatten.delimiter": "_",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "id:string,amount:int32,customer_tier:int16,flag:boolean,shipping_address_geo_lat:float32",
}
SPARK_SCHEMA = ("id BIGINT, name STRING, amount DOUBLE, flag STRING, note STRING, tags ARRAY<STRING>, "
                "customer STRUCT<id: BIGINT, tier: BIGINT, email: STRING>, "
                "shipping STRUCT<city: STRING, address: STRUCT<street: STRING, "
                "geo: STRUCT<lat: DOUBLE, lon: DOUBLE>>>, "
                "billing STRUCT<city: STRING, zip: STRING>, created BIGINT, updated BIGINT, status STRING")


def _tree_cpu() -> float:
    """CPU seconds used so far by this process and its descendants (the Spark JVM)."""
    procs = proc_table(reaped=True)
    below = descendants({os.getpid()}, procs) - {os.getpid()}
    return sum(procs[pid][2] for pid in below) + time.process_time()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.records

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_connect_bridge.converters import apply_sink_converters
    from spark_connect_bridge.transforms.chain import build_chain

    spark = (SparkSession.builder.master(f"local[{args.partitions}]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    i = F.col("id")
    message = F.struct(
        i.alias("id"), F.concat(F.lit("name-"), i.cast("string")).alias("name"), (i % 1000 / 7).alias("amount"),
        F.when(i % 2 == 0, F.lit("true")).otherwise(F.lit("no")).alias("flag"),
        F.lit(None).cast("string").alias("note"),
        F.array(F.lit("a"), (i % 5).cast("string")).alias("tags"),
        F.struct((i % 977).alias("id"), (i % 3).alias("tier"), F.lit("x@example.com").alias("email")).alias("customer"),
        F.struct(F.lit("Oslo").alias("city"), F.struct(F.lit("Main St").alias("street"), F.struct(
            (i % 90 / 3).alias("lat"), (i % 180 / 7).alias("lon")).alias("geo")).alias("address")).alias("shipping"),
        F.struct(F.lit("Bergen").alias("city"), F.lit("5003").alias("zip")).alias("billing"),
        (i * 1000).alias("created"), (i * 1000 + 5).alias("updated"), F.lit("open").alias("status"))
    records = (spark.range(n, numPartitions=args.partitions)
               .select(F.lit(None).cast("binary").alias("key"), F.to_json(message).cast("binary").alias("value"),
                       F.lit("orders").alias("topic"), F.lit(0).alias("partition"), i.alias("offset"),
                       F.timestamp_millis(F.lit(1_700_000_000_000)).alias("timestamp"),
                       F.array().cast("array<struct<key:string,value:binary>>").alias("headers"))
               .cache())
    records.count()
    converters = {"value.converter": JSON, "value.converter.schemas.enable": "false"}
    declared = {**converters, "value.converter.spark.schema": SPARK_SCHEMA}
    frames = {
        "converter only": lambda: apply_sink_converters(records, converters),
        "VARIANT": lambda: build_chain(CHAIN).apply(apply_sink_converters(records, converters)),
        "spark.schema": lambda: build_chain(CHAIN).apply(apply_sink_converters(records, declared)),
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in frames}
    for _ in range(1 + args.repeat):  # interleaved: the first round is each variant's cold run
        for name, frame in frames.items():
            t, c = time.perf_counter(), _tree_cpu()
            frame().write.format("noop").mode("overwrite").save()
            runs[name].append((time.perf_counter() - t, _tree_cpu() - c))
    spark.stop()
    print(f"records: {n:,}  partitions: {args.partitions}  load (1 min): {os.getloadavg()[0]:.1f}")
    floor = min(cpu for _, cpu in runs["converter only"][1:])
    for name, timed in runs.items():
        cold_wall, cold_cpu = timed[0]
        warm_wall, warm_cpu = min(timed[1:], key=lambda r: r[1])
        print(f"{name:<15} cold {cold_cpu:7.2f} s CPU ({cold_wall:6.2f} s wall)  warm {warm_cpu:7.2f} s CPU "
              f"({warm_wall:6.2f} s wall) = {warm_cpu / n * 1e6:6.2f} us CPU/record, "
              f"{(warm_cpu - floor) / n * 1e6:6.2f} us over the converter")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
