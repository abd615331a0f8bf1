"""Benchmark: a chain of eight SMTs over N records vs the same records without SMTs, same run.

Records are built with ``spark.range`` (a struct value with nested fields, a string key, topic, partition,
offset, timestamp, headers) and written to Spark's ``noop`` sink, so the figure is the cost of the
transforms themselves. A second comparison runs the same kind of eight-SMT chain on the stream a user runs: our
datagen source connector (orders) read with ``readStream`` and written to ``noop`` with one AvailableNow
micro-batch, with and without the chain (``--no-datagen`` skips it). Each variant runs ``--repeat`` times, interleaved, after one warm-up; the best time
counts. Wall time depends on what else the machine runs; the JVM's CPU time (local mode: driver and
executors are one process) is printed too, as it is far less sensitive to other load.

    python bench/bench_smt_chain.py --records 10000000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

CHAIN = {
    "transforms": "rename,mask,cast,insert,flatten,header,route,tokey",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "name:customer", "transforms.rename.exclude": "note",
    "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.mask.fields": "card",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "amount:float64,id:string",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.topic.field": "src_topic", "transforms.insert.offset.field": "src_offset",
    "transforms.flatten.type": "org.apache.kafka.connect.transforms.Flatten$Value",
    "transforms.flatten.delimiter": "_",
    "transforms.header.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.header.header": "origin", "transforms.header.value.literal": "bench",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "orders-(.*)", "transforms.route.replacement": "clean-$1",
    "transforms.tokey.type": "org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.tokey.fields": "id",
}

# The same eight SMTs over datagen's orders value (ordertime, orderid, itemid, orderunits, address).
DATAGEN_CHAIN = {
    **CHAIN,
    "transforms.rename.renames": "itemid:item", "transforms.rename.exclude": "ordertime",
    "transforms.mask.fields": "item", "transforms.cast.spec": "orderunits:float32,orderid:string",
    "transforms.route.regex": "ord(.*)", "transforms.tokey.fields": "orderid",
}


def datagen_stream(spark, n: int, chain: dict | None) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall, JVM CPU) seconds of one AvailableNow query: datagen orders (2 tasks) -> [chain] -> noop."""
    import shutil
    import tempfile

    from spark_connect_bridge.transforms import apply_transforms

    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "tasks.max": "2", "iterations": str(n // 2), "max.interval": "0", "max.records.per.trigger": str(n)}
    df = spark.readStream.format("kconnect").options(**cfg).load()
    if chain is not None:
        df = apply_transforms(df, chain)
    ckpt = tempfile.mkdtemp(prefix="bench_smt_")
    try:
        c0, t0 = _jvm_cpu(spark), time.perf_counter()
        q = (df.writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return time.perf_counter() - t0, _jvm_cpu(spark) - c0
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def records(spark, n: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    from spark_connect_bridge.records import HEADERS_TYPE

    r = spark.range(n)
    value = F.struct(
        F.col("id").cast("int").alias("id"),
        F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("name"),
        (F.col("id") % 10000).cast("int").alias("amount"),
        F.lpad((F.col("id") % 9999).cast("string"), 16, "4").alias("card"),
        F.lit("free text").alias("note"),
        F.struct((F.col("id") % 7).cast("int").alias("zone"), F.lit("FR").alias("country")).alias("address"),
    )
    return r.select(
        F.col("id").cast("string").alias("key"), value.alias("value"),
        F.concat(F.lit("orders-"), (F.col("id") % 4).cast("string")).alias("topic"),
        (F.col("id") % 4).cast("int").alias("partition"), F.col("id").alias("offset"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("timestamp"),
        F.array().cast(HEADERS_TYPE).alias("headers"),
    )


def _jvm_cpu(spark) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds used so far by the local-mode JVM (driver and executors): robust to other load."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(df) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, JVM CPU seconds) to write ``df`` to the noop sink."""
    spark = df.sparkSession
    c0, t0 = _jvm_cpu(spark), time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0, _jvm_cpu(spark) - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000, help="number of records (default 10M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per variant, interleaved (best counts)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-datagen", action="store_true", help="skip the datagen-stream comparison")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (repeatable), e.g. to try optimizer settings")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    from spark_connect_bridge.transforms import apply_transforms

    spark = (SparkSession.builder.master(args.master).appName("bench_smt_chain")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    spark.sparkContext.setLogLevel("ERROR")
    base = records(spark, args.records)
    chained = apply_transforms(base, CHAIN)
    timed(records(spark, min(args.records, 200_000)))  # warm-up (JIT, codegen cache)
    timed(apply_transforms(records(spark, min(args.records, 200_000)), CHAIN))
    t_base, t_chain = [], []
    for _ in range(args.repeat):
        t_base.append(timed(base))
        t_chain.append(timed(chained))
    b, c = min(x[0] for x in t_base), min(x[0] for x in t_chain)
    bcpu, ccpu = min(x[1] for x in t_base), min(x[1] for x in t_chain)
    print(f"records: {args.records:,}  master: {args.master}  runs: {args.repeat} interleaved (best)")
    print(f"without SMTs: {b:8.2f} s wall ({args.records / b / 1e6:6.2f} M records/s), {bcpu:8.2f} s JVM CPU")
    print(f"8-SMT chain : {c:8.2f} s wall ({args.records / c / 1e6:6.2f} M records/s), {ccpu:8.2f} s JVM CPU")
    print(f"ratio chain/baseline: {c / b:.2f}x wall, {ccpu / bcpu:.2f}x CPU  (goal <= 1.3x)")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if not args.no_datagen:
        datagen_stream(spark, 100_000, None)  # warm-up
        datagen_stream(spark, 100_000, DATAGEN_CHAIN)
        d_base, d_chain = [], []
        for _ in range(args.repeat):
            d_base.append(datagen_stream(spark, args.records, None))
            d_chain.append(datagen_stream(spark, args.records, DATAGEN_CHAIN))
        b, c = min(x[0] for x in d_base), min(x[0] for x in d_chain)
        bcpu, ccpu = min(x[1] for x in d_base), min(x[1] for x in d_chain)
        print("datagen orders stream (readStream kconnect, AvailableNow, 2 tasks) -> noop:")
        print(f"without SMTs: {b:8.2f} s wall ({args.records / b / 1e6:6.2f} M records/s), {bcpu:8.2f} s JVM CPU")
        print(f"8-SMT chain : {c:8.2f} s wall ({args.records / c / 1e6:6.2f} M records/s), {ccpu:8.2f} s JVM CPU")
        print(f"ratio chain/baseline: {c / b:.2f}x wall, {ccpu / bcpu:.2f}x JVM CPU  (goal <= 1.3x)")
        print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    spark.stop()


if __name__ == "__main__":
    main()
