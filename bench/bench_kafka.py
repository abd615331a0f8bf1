"""Kafka as the bus: our sink and source paths against Spark's bare Kafka source and sink, in one run, same
session and broker; prints records/s, CPU seconds and ratios.

    .venv/bin/python bench/bench_kafka.py [records] [partitions]

* Kafka → sink: ``sink_stream`` (Spark's Kafka source, JsonConverter, ExtractField, a sink connector that discards
  its Arrow batches: ``NoopSink`` below) vs Spark's bare Kafka source → ``noop`` (the goal's baseline). Two more
  lines split the difference into what any Spark query doing the same work pays: the same ``from_json`` and field
  extraction written by hand into ``noop``, and the bare Kafka records handed to the Python sink without stages
  (Spark's hand-off of rows to a Python data source writer, as Arrow). Our read path without the Python sink
  (converter and transform into ``noop``) is shown too.
* Same work on both sides (``same-work`` ratios): ``sink_stream`` with JsonConverter against the same
  ``from_json`` + field extraction written by hand and handed to the same ``NoopSink``; ``sink_stream`` with
  ByteArrayConverter and with StringConverter (key and value) against the bare records, or the same casts by
  hand, handed to ``NoopSink``. The by-hand sides read with Spark's Kafka source and give records without
  headers an empty list, as ``read_topics`` does (a null list costs the Arrow hand-off O(rows²) per batch).
* source → Kafka: ``source_stream`` (datagen orders, StringConverter key, schemaless JsonConverter value) vs a bare
  Spark write to Kafka of the same rows built by Catalyst (``spark.range`` as orders, ``to_json``: the goal's
  baseline). Two more lines: the datagen connector alone into ``noop`` (the source's own cost, no bus), and the
  datagen records serialized by hand (``to_json``) and written with Spark's Kafka sink, without our bus.

Each streaming figure is one ``Trigger.AvailableNow`` run with a fresh checkpoint, the best of ``reps`` after a
warm-up. CPU seconds are those of this process and its descendants (the Spark JVM, Python workers), not the broker's:
on a shared machine they move much less with the load than the wall time; each line also splits them between the
JVM and Python (this driver and Spark's Python workers). The load average is printed with the figures. The broker
is ``KCONNECT_BENCH_KAFKA`` (host:port) or a throwaway one (tests/support/kafka.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The executors import NoopSink from this file: make bench/ importable by them too.
os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                            os.environ.get("PYTHONPATH", "")])

from _proctree import descendants, proc_table

from spark_connect_bridge.config import ConfigDef
from spark_connect_bridge.connectors.base import SinkConnector


class NoopSink(SinkConnector):
    """Discards what it is given (after Spark handed the rows to Python as Arrow), like Spark's noop sink."""

    config_def = ConfigDef()

    def write(self, batches: Iterator[Any], ctx: Any) -> int:
        return sum(b.num_rows for b in batches)

    def commit(self, messages: Sequence[Any], ctx: Any) -> None:
        pass


LABELS = {
    "bare write": "bare Spark write -> Kafka",
    "ours write": "source_stream (datagen) -> Kafka",
    "datagen noop": "  datagen -> noop (the source alone)",
    "datagen by hand": "  datagen + to_json by hand -> Spark's Kafka sink",
    "bare read": "Spark Kafka source -> noop",
    "ours sink": "sink_stream -> NoopSink connector",
    "ours stages": "  read_topics + converters + transforms -> noop",
    "from_json by hand": "  Spark Kafka source + from_json by hand -> noop",
    "python hand-off": "  Spark Kafka source -> NoopSink (no stages)",
    "json by hand sink": "  Spark Kafka source + from_json by hand -> NoopSink",
    "bytes sink": "sink_stream (ByteArrayConverter) -> NoopSink",
    "string sink": "sink_stream (StringConverter) -> NoopSink",
    "strings by hand sink": "  Spark Kafka source + cast(string) by hand -> NoopSink",
}
ORDER_FIELDS = ("ordertime BIGINT, orderid INT, itemid STRING, orderunits DOUBLE, address STRUCT<city: STRING, "
                "state: STRING, zipcode: BIGINT>")


def _tree_cpu(exclude: set[int]) -> dict[int, tuple[float, float]]:
    """Per process of this one's tree (without the processes under ``exclude``): (CPU seconds used so far, its
    reaped children's included; of which the JVM's own). The JVM's own time only: the Python processes it started
    and reaped (the data source's runner, the workers' daemon) add theirs to its children's time, which is
    Python's."""
    procs, own = proc_table(reaped=True), proc_table()
    mine = [p for p in descendants({os.getpid()}, procs) - descendants(exclude, procs) if p in procs]
    return {p: (procs[p][2], own[p][2] if p in own and own[p][1] == "java" else 0.0) for p in mine}


def _used(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """(CPU seconds, of which the JVM's) between two :func:`_tree_cpu` snapshots, process by process: a process
    that ended is counted through the parent that reaped it (a plain difference of sums went negative when a
    worker ended without being reaped inside the tree)."""
    cpu = sum(max(0.0, c - before.get(p, (0.0, 0.0))[0]) for p, (c, _) in after.items())
    jvm = sum(max(0.0, j - before.get(p, (0.0, 0.0))[1]) for p, (_, j) in after.items())
    return cpu, jvm


def measure(fn: Callable[[], Any], reps: int, exclude: set[int]) -> tuple[float, float, float]:
    """(best wall seconds, CPU seconds of that run, of which the JVM's) over ``reps`` runs after one warm-up."""
    fn()
    runs = []
    for _ in range(reps):
        before, t = _tree_cpu(exclude), time.perf_counter()
        fn()
        wall = time.perf_counter() - t
        runs.append((wall, *_used(before, _tree_cpu(exclude))))
    return min(runs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    reps = int(os.environ.get("KCONNECT_BENCH_REPS", "2"))
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_connect_bridge.bus.admin import ensure_topics
    from spark_connect_bridge.bus.kafka import read_topics, sink_stream, source_stream
    from spark_connect_bridge.engine.pipeline import prepare, read_stream
    from spark_connect_bridge.jvm import configure_spark

    broker = None
    bootstrap = os.environ.get("KCONNECT_BENCH_KAFKA")
    if not bootstrap:
        from tests.support.kafka import KafkaBroker

        broker = KafkaBroker(settings={"num.partitions": partitions}).start()
        bootstrap = broker.bootstrap
    exclude = {broker.process.pid} if broker is not None and broker.process is not None else set()
    spark = (configure_spark(SparkSession.builder).master(f"local[{partitions}]")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    run = f"{int(time.time())}"
    made = iter(range(10_000))

    def new_topic(kind: str) -> str:
        # Topics are created up front (not by the broker on first use) so that no path pays for it.
        name = f"{kind}-{run}-{next(made)}"
        ensure_topics({"bootstrap.servers": bootstrap}, {name: (partitions, 1, {})})
        return name

    def run_stream(query: Any) -> None:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))

    try:
        def orders_df(count: int):
            return spark.range(0, count, 1, partitions).selectExpr(
                "cast(id as string) as key",
                "to_json(named_struct('ordertime', 1487715775521 + id * 1000, 'orderid', cast(id as int), "
                "'itemid', concat('Item_', cast(abs(hash(id, 5)) % 999 as string)), "
                "'orderunits', (abs(hash(id, 6)) % 10000) / 1000.0, "
                "'address', named_struct('city', concat('City_', cast(abs(hash(id, 2)) % 99 as string)), "
                "'state', concat('State_', cast(abs(hash(id, 3)) % 99 as string)), "
                "'zipcode', cast(abs(hash(id, 4)) % 90000 as bigint)))) as value")

        # -- source -> Kafka ------------------------------------------------------------------------
        def bare_write() -> None:
            (orders_df(n).withColumn("topic", F.lit(new_topic("bare"))).write.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).save())

        datagen = {"connector.class": "DatagenConnector", "quickstart": "orders", "tasks.max": str(partitions),
                   "iterations": str(n // partitions), "max.interval": "0"}
        source_config = {**datagen, "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "value.converter.schemas.enable": "false"}

        def ours_write() -> None:
            topic = new_topic("src")
            run_stream(source_stream(spark, {**source_config, "name": topic, "kafka.topic": topic}, bus=bootstrap,
                                     checkpoint=tempfile.mkdtemp(), trigger={"availableNow": True}))

        def datagen_noop() -> None:
            df = read_stream(spark, {**datagen, "name": "datagen", "kafka.topic": "orders"})
            run_stream(df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                       .trigger(availableNow=True).start())

        def datagen_by_hand() -> None:
            topic = new_topic("hand")
            df = read_stream(spark, {**datagen, "name": topic, "kafka.topic": topic})
            df = df.select(F.col("key").cast("string").alias("key"), F.to_json("value").alias("value"), "topic")
            run_stream(df.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                       .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())

        write_results = {"bare write": measure(bare_write, reps, exclude),
                         "ours write": measure(ours_write, reps, exclude),
                         "datagen noop": measure(datagen_noop, reps, exclude),
                         "datagen by hand": measure(datagen_by_hand, reps, exclude)}

        # -- Kafka -> sink --------------------------------------------------------------------------
        topic = new_topic("in")
        (orders_df(n).withColumn("topic", F.lit(topic)).write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap).save())
        sink_config = {"name": "noop", "connector.class": "bench_kafka.NoopSink", "topics": topic,
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                       "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                       "value.converter.schemas.enable": "false",
                       "value.converter.spark.schema": ORDER_FIELDS,
                       "transforms": "address",
                       "transforms.address.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
                       "transforms.address.field": "address"}

        def kafka_source() -> Any:
            return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest").load())

        def to_noop(df: Any) -> None:
            run_stream(df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                       .trigger(availableNow=True).start())

        def bare_read() -> None:
            to_noop(kafka_source())

        def by_hand() -> None:
            to_noop(kafka_source().select(F.col("key").cast("string").alias("key"),
                                          F.from_json(F.col("value").cast("string"), ORDER_FIELDS)["address"]
                                          .alias("value"), "topic", "partition", "offset", "timestamp"))

        def to_noop_sink(df: Any) -> None:
            noop = prepare({"name": "noop-raw", "connector.class": "bench_kafka.NoopSink"}, kind="sink")
            run_stream(df.writeStream.format("kconnect").options(**noop.connector_options)
                       .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())

        def records_to_python() -> None:
            to_noop_sink(read_topics(spark, bootstrap, topics=[topic]))

        def json_by_hand_sink() -> None:
            to_noop_sink(read_topics(spark, bootstrap, topics=[topic]).withColumns({
                "key": F.col("key").cast("string"),
                "value": F.from_json(F.col("value").cast("string"), ORDER_FIELDS)["address"]}))

        def strings_by_hand_sink() -> None:
            to_noop_sink(read_topics(spark, bootstrap, topics=[topic]).withColumns({
                "key": F.col("key").cast("string"), "value": F.col("value").cast("string")}))

        def plain_sink(converter: str) -> Callable[[], None]:
            config = {"name": "noop", "connector.class": "bench_kafka.NoopSink", "topics": topic,
                      "key.converter": converter, "value.converter": converter}

            def go() -> None:
                run_stream(sink_stream(spark, config, bus=bootstrap, checkpoint=tempfile.mkdtemp(),
                                       trigger={"availableNow": True}))
            return go

        def ours_stages() -> None:
            p = prepare(sink_config, kind="sink")
            to_noop(p.transforms(p.converters(read_topics(spark, bootstrap, topics=[topic]))))

        def ours_sink() -> None:
            run_stream(sink_stream(spark, sink_config, bus=bootstrap, checkpoint=tempfile.mkdtemp(),
                                   trigger={"availableNow": True}))

        read_results = {"bare read": measure(bare_read, reps, exclude),
                        "ours sink": measure(ours_sink, reps, exclude),
                        "ours stages": measure(ours_stages, reps, exclude),
                        "from_json by hand": measure(by_hand, reps, exclude),
                        "python hand-off": measure(records_to_python, reps, exclude),
                        "json by hand sink": measure(json_by_hand_sink, reps, exclude),
                        "bytes sink": measure(plain_sink("org.apache.kafka.connect.converters.ByteArrayConverter"),
                                              reps, exclude),
                        "string sink": measure(plain_sink("org.apache.kafka.connect.storage.StringConverter"),
                                               reps, exclude),
                        "strings by hand sink": measure(strings_by_hand_sink, reps, exclude)}
        results = {**write_results, **read_results}
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"records: {n:,}  partitions: {partitions}  pyspark {spark.version}  best of {reps}  "
              f"load average at the end: {load}")
        for key, label in LABELS.items():
            secs, cpu, jvm = results[key]
            print(f"  {label:<56} {n / secs:>12,.0f} records/s  ({secs:6.2f} s, {cpu:6.2f} s CPU: JVM {jvm:5.2f}, "
                  f"Python {cpu - jvm:5.2f})")

        def ratio(base: str, ours: str) -> str:
            return (f"{results[base][0] / results[ours][0]:.2f}x wall, "
                    f"{results[base][1] / results[ours][1]:.2f}x CPU")

        print(f"  ratio source_stream / bare write: {ratio('bare write', 'ours write')}   (goal >= 0.9x)")
        print(f"  ratio sink_stream / bare read: {ratio('bare read', 'ours sink')}   (goal >= 0.9x)")
        print("  where the difference goes:")
        print(f"    bare write / datagen -> noop: {ratio('bare write', 'datagen noop')}  (the source connector alone "
              f"vs the whole bare write)")
        print(f"    sink_stream / bare records -> NoopSink: {ratio('python hand-off', 'ours sink')}")
        print(f"    bare read / bare records -> NoopSink: {ratio('bare read', 'python hand-off')}  (Spark's hand-off "
              f"of rows to a Python sink)")
        print(f"    our stages -> noop / from_json by hand -> noop: {ratio('from_json by hand', 'ours stages')}")
        print("  same work on both sides:")
        print(f"    sink_stream (JsonConverter) / from_json by hand -> NoopSink: "
              f"{ratio('json by hand sink', 'ours sink')}")
        print(f"    sink_stream (ByteArrayConverter) / bare records -> NoopSink: "
              f"{ratio('python hand-off', 'bytes sink')}")
        print(f"    sink_stream (StringConverter) / cast(string) by hand -> NoopSink: "
              f"{ratio('strings by hand sink', 'string sink')}")
        print(f"    source_stream / datagen + to_json by hand -> Spark's Kafka sink: "
              f"{ratio('datagen by hand', 'ours write')}")
    finally:
        spark.stop()
        if broker is not None:
            broker.destroy()


if __name__ == "__main__":
    main()
