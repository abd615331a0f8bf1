"""Kafka as the bus: our sink and source paths against Spark's bare Kafka source and sink, in one run, same
session and broker; prints records/s, CPU seconds and ratios.

    .venv/bin/python bench/bench_kafka.py [records] [partitions] [--batches K] [--reps R] [--only sink|source]
                                          [--arrow-max-bytes B]

* Kafka → sink: ``sink_stream`` (Spark's Kafka source, JsonConverter, ExtractField, a sink connector that discards
  its Arrow batches: ``NoopSink`` below) vs Spark's bare Kafka source → ``noop`` (the goal's baseline). Two more
  lines split the difference into what any Spark query doing the same work pays: the same ``from_json`` and field
  extraction written by hand into ``noop``, and the bare Kafka records handed to the Python sink without stages
  (Spark's hand-off of rows to a Python data source writer, as Arrow). Our read path without the Python sink
  (converter and transform into ``noop``) is shown too.
* Same work on both sides (``same-work`` ratios): ``sink_stream`` with JsonConverter against the same
  ``from_json`` + field extraction written by hand (parsing every field, as the converter must: an option turns
  off Spark's pruning of the parse to the one field used) and handed to the same ``NoopSink``; ``sink_stream`` with
  ByteArrayConverter and with StringConverter (key and value) against the bare records, or the same casts by
  hand, handed to ``NoopSink``. The by-hand sides read with Spark's Kafka source and give records without
  headers an empty list, as ``read_topics`` does (a null list costs the Arrow hand-off O(rows²) per batch).
* source → Kafka: ``source_stream`` (datagen orders, StringConverter key, schemaless JsonConverter value) vs a bare
  Spark streaming write to Kafka of the same rows built by Catalyst (the ids from Parquet files, orders and
  ``to_json`` as expressions: the goal's baseline). Two more lines: the datagen connector alone into ``noop`` (the
  source's own cost, no bus), and the datagen records serialized by hand (``to_json``) and written with Spark's
  Kafka sink, without our bus.

Every figure is one ``Trigger.AvailableNow`` run with a fresh checkpoint, in ``--batches`` micro-batches of
``records / batches`` on both sides of each ratio (Kafka source: ``maxOffsetsPerTrigger``; ours:
``max.records.per.trigger``; the bare write: ``maxFilesPerTrigger`` over one Parquet file of ids per partition and
batch), so that per-batch costs count as they do in a long-running query; ``--batches 1`` is one batch per run.
After a warm-up round of every line over a tenth of the records, ``--reps`` rounds run every line in turn (the two
sides of a ratio alternate, so the load moves both alike); a line shows its best CPU and the spread over the rounds,
a ratio its value from the best of each side and the range of the rounds' own ratios. CPU seconds are those of this
process and its descendants (the Spark JVM, Python workers), not the broker's: on a shared machine they move much
less with the load than the wall time; each line also splits them between the JVM and Python (this driver and
Spark's Python workers). The load average is printed with the figures. The broker is ``KCONNECT_BENCH_KAFKA``
(host:port) or a throwaway one (tests/support/kafka.py). ``--arrow-max-bytes`` sets
``spark.sql.execution.arrow.maxBytesPerBatch`` (Spark's byte bound on the Arrow batches handed to a Python sink;
2147483647 turns off its check after every row).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

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
    "from_json by hand": "  Spark Kafka source + from_json (full parse) by hand -> noop",
    "python hand-off": "  Spark Kafka source -> NoopSink (no stages)",
    "json by hand sink": "  Spark Kafka source + from_json (full parse) by hand -> NoopSink",
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


class Run(NamedTuple):
    wall: float
    cpu: float
    jvm: float
    batches: int  # micro-batches that had records


def measure(fn: Callable[[], int], exclude: set[int]) -> Run:
    """One run of ``fn`` (which returns its micro-batches with records): wall and CPU seconds, the JVM's part."""
    before, t = _tree_cpu(exclude), time.perf_counter()
    batches = fn()
    wall = time.perf_counter() - t
    return Run(wall, *_used(before, _tree_cpu(exclude)), batches)


def rounds(lines: Mapping[str, Callable[[], int]], reps: int, exclude: set[int],
           warm_up: Mapping[str, Callable[[], int]]) -> dict[str, list[Run]]:
    """A warm-up run of every line of ``warm_up`` (the same lines over fewer records), then ``reps`` rounds
    running every line in turn."""
    for fn in warm_up.values():
        fn()
    runs: dict[str, list[Run]] = {key: [] for key in lines}
    for _ in range(reps):
        for key, fn in lines.items():
            runs[key].append(measure(fn, exclude))
    return runs


def best(runs: Sequence[Run]) -> Run:
    return min(runs, key=lambda r: r.cpu)


def ratio(results: Mapping[str, Sequence[Run]], base: str, ours: str) -> str:
    """``base / ours`` of the best runs, wall and CPU, and the range of the rounds' own CPU ratios."""
    b, o = results[base], results[ours]
    per_round = [x.cpu / y.cpu for x, y in zip(b, o)]
    spread = f" (rounds {min(per_round):.2f}-{max(per_round):.2f})" if len(per_round) > 1 else ""
    return (f"{min(r.wall for r in b) / min(r.wall for r in o):.2f}x wall, "
            f"{best(b).cpu / best(o).cpu:.2f}x CPU{spread}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="?", type=int, default=1_000_000)
    parser.add_argument("partitions", nargs="?", type=int, default=2)
    parser.add_argument("--batches", type=int, default=25, help="micro-batches per run (default 25)")
    parser.add_argument("--reps", type=int, default=int(os.environ.get("KCONNECT_BENCH_REPS", "2")),
                        help="measured rounds after the warm-up round (default 2)")
    parser.add_argument("--only", choices=("sink", "source"), help="one direction only")
    parser.add_argument("--arrow-max-bytes", help="spark.sql.execution.arrow.maxBytesPerBatch (default Spark's)")
    args = parser.parse_args()
    n, partitions, batches, reps = args.records, args.partitions, max(1, args.batches), max(1, args.reps)
    per_batch = -(-n // batches)
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
    if args.arrow_max_bytes:
        spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", args.arrow_max_bytes)
    run = f"{int(time.time())}"
    made = iter(range(10_000))

    def new_topic(kind: str) -> str:
        # Topics are created up front (not by the broker on first use) so that no path pays for it.
        name = f"{kind}-{run}-{next(made)}"
        ensure_topics({"bootstrap.servers": bootstrap}, {name: (partitions, 1, {})})
        return name

    def run_stream(query: Any) -> int:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        return sum(1 for p in query.recentProgress if p["numInputRows"])

    def orders(ids: Any) -> Any:
        return ids.selectExpr(
            "cast(id as string) as key",
            "to_json(named_struct('ordertime', 1487715775521 + id * 1000, 'orderid', cast(id as int), "
            "'itemid', concat('Item_', cast(abs(hash(id, 5)) % 999 as string)), "
            "'orderunits', (abs(hash(id, 6)) % 10000) / 1000.0, "
            "'address', named_struct('city', concat('City_', cast(abs(hash(id, 2)) % 99 as string)), "
            "'state', concat('State_', cast(abs(hash(id, 3)) % 99 as string)), "
            "'zipcode', cast(abs(hash(id, 4)) % 90000 as bigint)))) as value")

    # -- source -> Kafka --------------------------------------------------------------------------------
    def source_lines(count: int) -> dict[str, Callable[[], int]]:
        per_batch = -(-count // batches)
        # One Parquet file of ids per partition and batch: maxFilesPerTrigger makes the bare write's batches.
        ids_dir = tempfile.mkdtemp()
        spark.range(0, count, 1, partitions * batches).write.mode("overwrite").parquet(ids_dir)

        def bare_write() -> int:
            ids = (spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", str(partitions))
                   .parquet(ids_dir))
            return run_stream(orders(ids).withColumn("topic", F.lit(new_topic("bare"))).writeStream
                              .format("kafka").option("kafka.bootstrap.servers", bootstrap)
                              .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())

        datagen = {"connector.class": "DatagenConnector", "quickstart": "orders", "tasks.max": str(partitions),
                   "iterations": str(count // partitions), "max.interval": "0",
                   "max.records.per.trigger": str(per_batch)}
        source_config = {**datagen, "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "value.converter.schemas.enable": "false"}

        def ours_write() -> int:
            topic = new_topic("src")
            return run_stream(source_stream(spark, {**source_config, "name": topic, "kafka.topic": topic},
                                            bus=bootstrap, checkpoint=tempfile.mkdtemp(),
                                            trigger={"availableNow": True}))

        def datagen_noop() -> int:
            df = read_stream(spark, {**datagen, "name": "datagen", "kafka.topic": "orders"})
            return run_stream(df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                              .trigger(availableNow=True).start())

        def datagen_by_hand() -> int:
            topic = new_topic("hand")
            df = read_stream(spark, {**datagen, "name": topic, "kafka.topic": topic})
            df = df.select(F.col("key").cast("string").alias("key"), F.to_json("value").alias("value"), "topic")
            return run_stream(df.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                              .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())

        return {"bare write": bare_write, "ours write": ours_write, "datagen noop": datagen_noop,
                "datagen by hand": datagen_by_hand}

    # -- Kafka -> sink ------------------------------------------------------------------------------------
    def sink_lines(count: int) -> dict[str, Callable[[], int]]:
        per_batch = -(-count // batches)
        topic = new_topic("in")
        orders(spark.range(0, count, 1, partitions)).withColumn("topic", F.lit(topic)).write.format("kafka") \
            .option("kafka.bootstrap.servers", bootstrap).save()
        sink_config = {"name": "noop", "connector.class": "bench_kafka.NoopSink", "topics": topic,
                       "max.records.per.trigger": str(per_batch),
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                       "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                       "value.converter.schemas.enable": "false",
                       "value.converter.spark.schema": ORDER_FIELDS,
                       "transforms": "address",
                       "transforms.address.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
                       "transforms.address.field": "address"}

        def full_parse(value: Any) -> Any:
            # With an option Spark parses every field (as JsonConverter must, to type-check them); without one its
            # OptimizeJsonExprs prunes the parse to the one field used, which is less work than ours.
            return F.from_json(value.cast("string"), ORDER_FIELDS, {"mode": "PERMISSIVE"})

        def records() -> Any:
            return read_topics(spark, bootstrap, topics=[topic], max_records_per_trigger=per_batch)

        def to_noop(df: Any) -> int:
            return run_stream(df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                              .trigger(availableNow=True).start())

        def bare_read() -> int:
            return to_noop(spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                           .option("subscribe", topic).option("startingOffsets", "earliest")
                           .option("maxOffsetsPerTrigger", str(per_batch)).load())

        def by_hand() -> int:
            return to_noop(records().select(F.col("key").cast("string").alias("key"),
                                            full_parse(F.col("value"))["address"]
                                            .alias("value"), "topic", "partition", "offset", "timestamp"))

        def to_noop_sink(df: Any) -> int:
            noop = prepare({"name": "noop-raw", "connector.class": "bench_kafka.NoopSink"}, kind="sink")
            return run_stream(df.writeStream.format("kconnect").options(**noop.connector_options)
                              .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())

        def records_to_python() -> int:
            return to_noop_sink(records())

        def json_by_hand_sink() -> int:
            return to_noop_sink(records().withColumns({
                "key": F.col("key").cast("string"),
                "value": full_parse(F.col("value"))["address"]}))

        def strings_by_hand_sink() -> int:
            return to_noop_sink(records().withColumns({
                "key": F.col("key").cast("string"), "value": F.col("value").cast("string")}))

        def sink_of(config: Mapping[str, str]) -> Callable[[], int]:
            def go() -> int:
                return run_stream(sink_stream(spark, dict(config), bus=bootstrap, checkpoint=tempfile.mkdtemp(),
                                              trigger={"availableNow": True}))
            return go

        def plain(converter: str) -> dict[str, str]:
            return {"name": "noop", "connector.class": "bench_kafka.NoopSink", "topics": topic,
                    "max.records.per.trigger": str(per_batch), "key.converter": converter,
                    "value.converter": converter}

        def ours_stages() -> int:
            p = prepare(sink_config, kind="sink")
            return to_noop(p.transforms(p.converters(records())))

        # Each ratio's two sides run next to each other in a round.
        return {"bare read": bare_read, "ours sink": sink_of(sink_config),
                "python hand-off": records_to_python, "ours stages": ours_stages, "from_json by hand": by_hand,
                "json by hand sink": json_by_hand_sink,
                "bytes sink": sink_of(plain("org.apache.kafka.connect.converters.ByteArrayConverter")),
                "strings by hand sink": strings_by_hand_sink,
                "string sink": sink_of(plain("org.apache.kafka.connect.storage.StringConverter"))}

    results: dict[str, list[Run]] = {}
    try:
        # The warm-up round runs every line over a tenth of the records, in as many batches.
        if args.only != "sink":
            results.update(rounds(source_lines(n), reps, exclude, warm_up=source_lines(max(1, n // 10))))
        if args.only != "source":
            results.update(rounds(sink_lines(n), reps, exclude, warm_up=sink_lines(max(1, n // 10))))
        arrow_bytes = spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch")
        version = spark.version
    finally:
        spark.stop()
        if broker is not None:
            broker.destroy()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"records: {n:,}  partitions: {partitions}  micro-batches: {batches} of <= {per_batch:,}  pyspark "
          f"{version}  arrow maxBytesPerBatch {arrow_bytes}  warm-up + {reps} rounds  load average at the end: "
          f"{load}")
    for key, label in LABELS.items():
        if key not in results:
            continue
        runs = results[key]
        top = best(runs)
        print(f"  {label:<66} {n / min(r.wall for r in runs):>10,.0f} records/s  ({min(r.wall for r in runs):6.2f} s, "
              f"{top.cpu:6.2f} s CPU [{min(r.cpu for r in runs):.2f}-{max(r.cpu for r in runs):.2f}]: JVM "
              f"{top.jvm:5.2f}, Python {top.cpu - top.jvm:5.2f}; {top.batches} batches)")

    def show(text: str, base: str, ours: str, note: str = "") -> None:
        if base in results and ours in results:
            print(f"{text}: {ratio(results, base, ours)}{note}")

    show("  ratio source_stream / bare write", "bare write", "ours write", "   (goal >= 0.9x)")
    show("  ratio sink_stream / bare read", "bare read", "ours sink", "   (goal >= 0.9x)")
    print("  where the difference goes:")
    show("    bare write / datagen -> noop", "bare write", "datagen noop",
         "  (the source connector alone vs the whole bare write)")
    show("    sink_stream / bare records -> NoopSink", "python hand-off", "ours sink")
    show("    bare read / bare records -> NoopSink", "bare read", "python hand-off",
         "  (Spark's hand-off of rows to a Python sink: the most any Python sink can reach)")
    show("    our stages -> noop / from_json (full parse) by hand -> noop", "from_json by hand", "ours stages")
    print("  same work on both sides:")
    show("    sink_stream (JsonConverter) / from_json (full parse) by hand -> NoopSink", "json by hand sink",
         "ours sink")
    show("    sink_stream (ByteArrayConverter) / bare records -> NoopSink", "python hand-off", "bytes sink")
    show("    sink_stream (StringConverter) / cast(string) by hand -> NoopSink", "strings by hand sink",
         "string sink")
    show("    source_stream / datagen + to_json by hand -> Spark's Kafka sink", "datagen by hand", "ours write")


if __name__ == "__main__":
    main()
