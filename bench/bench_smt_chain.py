"""Benchmark: a chain of eight SMTs over N records vs the same records without SMTs, same run.

Records are built with ``spark.range`` (a struct value with nested fields, a string key, topic, partition,
offset, timestamp, headers) and written to Spark's ``noop`` sink, so the figure is the cost of the
transforms themselves. A second comparison runs the same kind of eight-SMT chain on the stream a user runs: our
datagen source connector (orders) read with ``readStream`` and written to ``noop`` with one AvailableNow
micro-batch, with and without the chain (``--no-datagen`` skips it).

Each comparison has a third variant: the same output written by hand as one Spark ``select`` (what a Spark
engineer would write for these eight SMTs, with the same Kafka semantics), checked equal to the chain's output
on a sample before anything is timed. It is the floor for this work in Spark: chain/hand-written is the cost
of our transform compiler, hand-written/baseline the cost of the work the SMTs ask for.

Each variant runs ``--repeat`` times, interleaved, after one warm-up; the best time counts. Wall time depends
on what else the machine runs. Also printed: the JVM's CPU time (local mode: driver and executors are one
process, so it includes the JIT compiler and GC threads) and the executors' task CPU time (Spark's
``executorCpuTime``: the task threads only), which are far less sensitive to other load.

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


# Java's '.' does not match these, so RegexRouter's `(.*)` must not match a topic holding one.
LINE_TERMINATORS = ("\n", "\r", "\u0085", "\u2028", "\u2029")


def routed(topic, prefix: str, new_prefix: str):  # type: ignore[no-untyped-def]
    """By hand: RegexRouter ``prefix(.*)`` -> ``new_prefix$1`` (Java's matches() + replaceFirst())."""
    from pyspark.sql import functions as F

    group = F.substring(topic.cast("binary"), len(prefix) + 1, 2**31 - 1).cast("string")
    match = topic.startswith(prefix)
    for t in LINE_TERMINATORS:
        match = match & ~group.contains(t)
    return F.when(match, F.concat(F.lit(new_prefix), group)).otherwise(topic)


def with_header(headers):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return F.array_append(F.coalesce(headers, F.array()),
                          F.struct(F.lit("origin").alias("key"), F.lit(b"bench").alias("value")))


def hand_written(df):  # type: ignore[no-untyped-def]
    """CHAIN written by hand as one select over ``records``: the value there is never null."""
    from pyspark.sql import functions as F

    v, topic = F.col("value"), F.col("topic")
    sid = v["id"].cast("string")
    value = F.struct(sid.alias("id"), v["name"].alias("customer"), v["amount"].cast("double").alias("amount"),
                     F.when(v["card"].isNull(), v["card"]).otherwise(F.lit("")).alias("card"),
                     v["address"]["zone"].alias("address_zone"), v["address"]["country"].alias("address_country"),
                     topic.alias("src_topic"), F.col("offset").alias("src_offset"))
    return df.select(F.struct(sid.alias("id")).alias("key"), value.alias("value"),
                     routed(topic, "orders-", "clean-").alias("topic"), "partition", "offset", "timestamp",
                     with_header(F.col("headers")).alias("headers"))


def hand_written_datagen(df):  # type: ignore[no-untyped-def]
    """DATAGEN_CHAIN written by hand as one filter + select over datagen orders (a nullable value: MaskField
    and ValueToKey fail a tombstone, the other SMTs pass it through)."""
    from pyspark.sql import functions as F

    v, topic = F.col("value"), F.col("topic")
    sid = v["orderid"].cast("string")
    tombstone_fails = F.when(v.isNull(), F.raise_error(F.lit("MaskField$Value: a tombstone"))).otherwise(F.lit(True))
    value = F.when(v.isNull(), F.lit(None)).otherwise(F.struct(
        sid.alias("orderid"), F.when(v["itemid"].isNull(), v["itemid"]).otherwise(F.lit("")).alias("item"),
        v["orderunits"].cast("float").alias("orderunits"), v["address"]["city"].alias("address_city"),
        v["address"]["state"].alias("address_state"), v["address"]["zipcode"].alias("address_zipcode"),
        topic.alias("src_topic"), F.col("offset").alias("src_offset")))
    return df.filter(tombstone_fails).select(
        F.struct(sid.alias("orderid")).alias("key"), value.alias("value"),
        routed(topic, "ord", "clean-").alias("topic"),
        "partition", "offset", "timestamp", with_header(F.col("headers")).alias("headers"))


def check_same(a, b, what: str) -> None:  # type: ignore[no-untyped-def]
    """Stop unless ``a`` and ``b`` hold the same rows (as multisets) with the same schema."""
    if a.schema.simpleString() != b.schema.simpleString():
        raise SystemExit(f"{what}: schemas differ:\n{a.schema.simpleString()}\n{b.schema.simpleString()}")
    n, extra, missing = a.count(), a.exceptAll(b).count(), b.exceptAll(a).count()
    if extra or missing or n != b.count():
        raise SystemExit(f"{what}: outputs differ ({extra} rows only in the chain, {missing} only by hand)")


def datagen_config(n: int) -> dict:
    return {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
            "tasks.max": "2", "iterations": str(n // 2), "max.interval": "0", "max.records.per.trigger": str(n)}


def datagen_stream(spark, n: int, variant: str) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(wall, JVM CPU, task CPU) seconds of one AvailableNow query: datagen orders (2 tasks) -> variant -> noop."""
    import shutil
    import tempfile

    from spark_connect_bridge.transforms import apply_transforms

    df = spark.readStream.format("kconnect").options(**datagen_config(n)).load()
    if variant == "chain":
        df = apply_transforms(df, DATAGEN_CHAIN)
    elif variant == "hand":
        df = hand_written_datagen(df)
    ckpt = tempfile.mkdtemp(prefix="bench_smt_")
    try:
        k0, c0, t0 = _task_cpu(spark), _jvm_cpu(spark), time.perf_counter()
        q = (df.writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        wall, cpu = time.perf_counter() - t0, _jvm_cpu(spark) - c0
        return wall, cpu, _task_cpu(spark) - k0
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def records(spark, n: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    from spark_connect_bridge.core.records import HEADERS_TYPE

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


def _task_cpu(spark) -> float:  # type: ignore[no-untyped-def]
    """Executor task CPU seconds of every stage so far (Spark's executorCpuTime: task threads only, without the
    JIT compiler and GC threads). The status store is updated by a listener: wait until it settles."""
    store = spark.sparkContext._jsc.sc().statusStore()
    gw = spark.sparkContext._gateway
    last = -1.0
    for _ in range(50):
        stages = store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None).iterator()
        total = 0
        while stages.hasNext():
            total += stages.next().executorCpuTime()
        total /= 1e9
        if total == last:
            return total
        last = total
        time.sleep(0.05)
    return last


def timed(df) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(wall, JVM CPU, task CPU) seconds to write ``df`` to the noop sink."""
    spark = df.sparkSession
    k0, c0, t0 = _task_cpu(spark), _jvm_cpu(spark), time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    wall, cpu = time.perf_counter() - t0, _jvm_cpu(spark) - c0
    return wall, cpu, _task_cpu(spark) - k0


def report(title: str, n: int, runs: dict[str, list[tuple[float, float, float]]]) -> None:
    """Print the best of each variant and the ratios chain/baseline, hand-written/baseline, chain/hand-written."""
    best = {k: tuple(min(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
    labels = {"base": "without SMTs", "chain": "8-SMT chain", "hand": "by hand"}
    print(title)
    for k, (wall, cpu, task) in best.items():
        print(f"  {labels[k]:13s}: {wall:7.2f} s wall ({n / wall / 1e6:5.2f} M records/s), {cpu:7.2f} s JVM CPU, "
              f"{task:7.2f} s task CPU")

    def ratio(a: str, b: str) -> str:
        return ", ".join(f"{best[a][i] / best[b][i]:.2f}x {m}" for i, m in enumerate(("wall", "JVM CPU", "task CPU")))

    print(f"  chain / baseline  : {ratio('chain', 'base')}  (goal <= 1.3x)")
    print(f"  by hand / baseline: {ratio('hand', 'base')}  (the work the eight SMTs ask for)")
    print(f"  chain / by hand   : {ratio('chain', 'hand')}  (the cost of compiling SMTs to Spark)")
    print("  load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000, help="number of records (default 10M)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per variant, interleaved (best counts)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-datagen", action="store_true", help="skip the datagen-stream comparison")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (repeatable), e.g. to try optimizer settings")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    from spark_connect_bridge.transforms import apply_transforms

    spark = (SparkSession.builder.master(args.master).appName("bench_smt_chain")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    spark.sparkContext.setLogLevel("ERROR")
    sample = records(spark, 20_000)
    check_same(apply_transforms(sample, CHAIN), hand_written(sample), "synthetic records")
    variants = {"base": lambda n: records(spark, n), "chain": lambda n: apply_transforms(records(spark, n), CHAIN),
                "hand": lambda n: hand_written(records(spark, n))}
    for make in variants.values():  # warm-up (JIT, codegen cache)
        timed(make(min(args.records, 1_000_000)))
    runs: dict[str, list] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for k, make in variants.items():
            runs[k].append(timed(make(args.records)))
    report(f"records: {args.records:,}  master: {args.master}  runs: {args.repeat} interleaved (best) -> noop",
           args.records, runs)
    if not args.no_datagen:
        sample = spark.read.format("kconnect").options(**datagen_config(20_000)).load().cache()
        check_same(apply_transforms(sample, DATAGEN_CHAIN), hand_written_datagen(sample), "datagen orders")
        sample.unpersist()
        for k in variants:
            datagen_stream(spark, 200_000, k)  # warm-up
        druns: dict[str, list] = {k: [] for k in variants}
        for _ in range(args.repeat):
            for k in variants:
                druns[k].append(datagen_stream(spark, args.records, k))
        report("datagen orders stream (readStream kconnect, AvailableNow, 2 tasks) -> noop:", args.records, druns)
    spark.stop()


if __name__ == "__main__":
    main()
