"""Kafka as the bus: our sink and source paths against Spark's bare Kafka source and sink, in one run, same
session and broker; prints records/s and ratios.

    .venv/bin/python bench/bench_kafka.py [records] [partitions]

* Kafka → sink: ``sink_stream`` (Spark's Kafka source, JsonConverter, ExtractField, a sink connector that discards
  its Arrow batches: ``NoopSink`` below) vs Spark's bare Kafka source → ``noop``; also our read path with the same
  converter and transform into ``noop`` (no Python sink), which isolates the cost of the stages from the cost of
  handing rows to a Python sink.
* source → Kafka: ``source_stream`` (datagen orders, StringConverter key, schemaless JsonConverter value) vs a bare
  Spark write to Kafka of the same rows built by Catalyst (``spark.range`` as orders, ``to_json``).

Each streaming figure is one ``Trigger.AvailableNow`` run with a fresh checkpoint (the best of 2 after a warm-up).
The broker is ``KCONNECT_BENCH_KAFKA`` (host:port) or a throwaway one (tests/support/kafka.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The executors import NoopSink from this file: make bench/ importable by them too.
os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                            os.environ.get("PYTHONPATH", "")])

from _timing import best

from spark_connect_bridge.config import ConfigDef
from spark_connect_bridge.connectors.base import SinkConnector


class NoopSink(SinkConnector):
    """Discards what it is given (after Spark handed the rows to Python as Arrow), like Spark's noop sink."""

    config_def = ConfigDef()

    def write(self, batches: Iterator[Any], ctx: Any) -> int:
        return sum(b.num_rows for b in batches)

    def commit(self, messages: Sequence[Any], ctx: Any) -> None:
        pass




def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_connect_bridge.bus.admin import ensure_topics
    from spark_connect_bridge.bus.kafka import read_topics, sink_stream, source_stream
    from spark_connect_bridge.engine.pipeline import prepare
    from spark_connect_bridge.jvm import configure_spark

    broker = None
    bootstrap = os.environ.get("KCONNECT_BENCH_KAFKA")
    if not bootstrap:
        from tests.support.kafka import KafkaBroker

        broker = KafkaBroker(settings={"num.partitions": partitions}).start()
        bootstrap = broker.bootstrap
    spark = (configure_spark(SparkSession.builder).master(f"local[{partitions}]")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    run = f"{int(time.time())}"
    names = [f"{kind}-{run}-{i}" for kind in ("warm", "bare", "src", "in") for i in range(3)]
    # Topics are created up front (not by the broker on first use) so that no path pays for it.
    ensure_topics({"bootstrap.servers": bootstrap}, {t: (partitions, 1, {}) for t in names})
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
        def bare_write(topic: str) -> None:
            (orders_df(n).withColumn("topic", F.lit(topic)).write.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).save())

        source_config = {"connector.class": "DatagenConnector", "quickstart": "orders",
                         "tasks.max": str(partitions), "iterations": str(n // partitions), "max.interval": "0",
                         "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "value.converter.schemas.enable": "false"}

        def ours_write(topic: str) -> None:
            q = source_stream(spark, {**source_config, "name": topic, "kafka.topic": topic}, bus=bootstrap,
                              checkpoint=tempfile.mkdtemp(), trigger={"availableNow": True})
            q.awaitTermination()

        counter = iter(range(1, 3))
        bare_write(f"warm-{run}-0")
        write_results = {
            "bare Spark write -> Kafka": best(lambda: bare_write(f"bare-{run}-{next(counter)}"), reps=2),
        }
        counter = iter(range(1, 3))
        ours_write(f"src-{run}-0")
        write_results |= {
            "source_stream (datagen) -> Kafka": best(lambda: ours_write(f"src-{run}-{next(counter)}"), reps=2),
        }

        # -- Kafka -> sink --------------------------------------------------------------------------
        topic = f"in-{run}-0"
        (orders_df(n).withColumn("topic", F.lit(topic)).write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap).save())
        sink_config = {"name": "noop", "connector.class": "bench_kafka.NoopSink", "topics": topic,
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                       "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                       "value.converter.schemas.enable": "false",
                       "value.converter.spark.schema": "ordertime BIGINT, orderid INT, itemid STRING, "
                                                       "orderunits DOUBLE, address STRUCT<city: STRING, "
                                                       "state: STRING, zipcode: BIGINT>",
                       "transforms": "address",
                       "transforms.address.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
                       "transforms.address.field": "address"}

        def bare_read() -> None:
            q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                 .trigger(availableNow=True).start())
            q.awaitTermination()

        def ours_stages() -> None:
            p = prepare(sink_config, kind="sink")
            df = p.transforms(p.converters(read_topics(spark, bootstrap, topics=[topic])))
            q = (df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp())
                 .trigger(availableNow=True).start())
            q.awaitTermination()

        def ours_sink() -> None:
            q = sink_stream(spark, sink_config, bus=bootstrap, checkpoint=tempfile.mkdtemp(),
                            trigger={"availableNow": True})
            q.awaitTermination()

        bare_read()
        read_results = {"Spark Kafka source -> noop": best(bare_read, reps=2),
                        "read_topics + converters + transforms -> noop": best(ours_stages, reps=2),
                        "sink_stream -> NoopSink connector": best(ours_sink, reps=2)}
        print(f"records: {n:,}  partitions: {partitions}  pyspark {spark.version}")
        for name, secs in {**write_results, **read_results}.items():
            print(f"  {name:<48} {n / secs:>14,.0f} records/s  ({secs:.2f} s)")
        base_w = write_results["bare Spark write -> Kafka"]
        print(f"  ratio source_stream / bare write: {base_w / write_results['source_stream (datagen) -> Kafka']:.2f}x")
        base_r = read_results["Spark Kafka source -> noop"]
        for name in ("read_topics + converters + transforms -> noop", "sink_stream -> NoopSink connector"):
            print(f"  ratio {name} / bare read: {base_r / read_results[name]:.2f}x")
    finally:
        spark.stop()
        if broker is not None:
            broker.destroy()


if __name__ == "__main__":
    main()
