"""Where the JDBC sink's CPU per record goes, layer by layer (issue #38): the same topic of N Debezium change events
(JSON with schemas, ~2 KB of Connect schema before each payload, made by ``bench_vs_kafka_connect.orders_to_kafka``)
read with Spark's Kafka batch reader into ``noop``, each variant adding one layer, rounds alternating; then ours'
whole sink into PostgreSQL (``bench/jdbc_sink_rounds.py`` measures that alone). CPU per record of the process tree
(Spark JVM, its Python workers, this driver); the last round of each variant is its warm figure. First ours' two
passes over a micro-batch from a cache of it (``pipeline.BatchRouter``): ``cache-build``, the schemas read from
the messages with each message searched (``schemas-searched``: a worker's first batch) or compared with the texts
known from earlier batches (``schemas-known``: its later ones; ``converters/json_envelopes.py``), and
``convert-cached``; then each layer read from Kafka:

- ``kafka``: Spark's Kafka reader alone (key and value bytes);
- ``parse-all``: + Spark's ``from_json`` of each whole message with its whole schema (what Kafka's JsonConverter
  does: Jackson reads every message whole, schema included);
- ``parse-payload``: + ``from_json`` with only the ``payload`` field declared (Jackson still scans the schema text);
- ``parse-after-prefix``: + ``from_json`` of the bytes after ``"payload":`` alone (the known text before it cut off
  by its length: the schema text is not scanned);
- ``converters``: + ours' JsonConverter (the schema read from the messages, every message: a micro-batch's path);
- ``chain``: + the config's SMT chain (ExtractNewRecordState);
- ``to-python``: + the rows handed to a Python worker as Arrow (``mapInArrow``, an identity), as the sink's writer
  receives them;
- ``one-pass``: a later micro-batch's path (``BatchTexts``): typed by the previous batch's schemas with no job,
  every message checked against their texts, converted, the chain, handed to Python: one read of the batch.

    PYTHONPATH=. .venv/bin/python bench/jdbc_sink_parts.py 100000 3 [VARIANT,VARIANT...]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench_vs_debezium import _cpu, _load, _ours_roots, _spark
from bench_vs_kafka_connect import jdbc_sink_config, orders_to_kafka

from spark_connect_bridge.converters.json_envelopes import KNOWN, BatchTexts
from spark_connect_bridge.converters.wiring import apply_sink_converters
from spark_connect_bridge.transforms.chain import build_chain
from tests.support.kafka import KafkaBroker
from tests.support.postgres import PostgresCluster

VARIANTS = ("kafka", "parse-all", "parse-payload", "parse-after-prefix", "converters", "chain", "to-python", "one-pass")


def _variant(raw, name: str, config: dict[str, str], full_schema: str, payload_schema: str, prefix: int):
    from pyspark.sql import functions as F

    if name == "kafka":
        return raw.select("key", "value")
    if name == "parse-all":
        return raw.select(F.from_json(F.col("value").cast("string"), full_schema).alias("v"))
    if name == "parse-payload":
        return raw.select(F.from_json(F.col("value").cast("string"), payload_schema).alias("v"))
    if name == "parse-after-prefix":
        after = F.substring(F.col("value"), prefix + 1, 1 << 30).cast("string")
        return raw.select(F.from_json(after, payload_schema[len("STRUCT<payload: "):-1]).alias("v"))
    if name == "one-pass":
        texts = BatchTexts()
        apply_sink_converters(raw, config, every_message=True, texts=texts)  # the previous batch: recorded
        texts.guessing = True
        df = build_chain(config).apply(apply_sink_converters(texts.guarded(raw), config, every_message=True,
                                                             texts=texts))
        return df.mapInArrow(lambda batches: batches, df.schema)
    df = apply_sink_converters(raw, config, every_message=True)
    if name == "converters":
        return df
    df = build_chain(config).apply(df)
    if name == "chain":
        return df
    return df.mapInArrow(lambda batches: batches, df.schema)


def main() -> None:
    from pyspark.sql import functions as F

    n, rounds = int(sys.argv[1]), int(sys.argv[2])
    with PostgresCluster() as pg, KafkaBroker() as kafka:
        spark = _spark()
        orders_to_kafka(pg, kafka, spark, n)
        raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
               .option("subscribe", "src.public.orders").option("startingOffsets", "earliest")
               .option("includeHeaders", "true").load())
        one = raw.select(F.col("value").cast("string")).where("value is not null").first()[0]
        full_schema = spark.range(1).select(F.schema_of_json(F.lit(one))).first()[0]
        payload_schema = "STRUCT<payload: " + full_schema.split("payload: ", 1)[1].rsplit(", schema: ", 1)[0] + ">"
        prefix = len(one.split('"payload":', 1)[0].encode()) + len(b'"payload":')
        config = jdbc_sink_config("parts", "jdbc:postgresql://127.0.0.1:1/none")
        roots = _ours_roots(spark)

        def measured(round_: int, what: str, fn):
            cpu0, t0 = _cpu(roots), time.monotonic()
            out = fn()
            cpu, wall = _cpu(roots) - cpu0, time.monotonic() - t0
            print(f"round {round_} {what:<16} {cpu / n * 1e6:7.1f} us CPU/record, {wall:5.1f} s ({_load()})",
                  flush=True)
            return out

        def noop(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        def schemas(df):
            return lambda: apply_sink_converters(df, config, every_message=True)

        only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
        for round_ in range(1, rounds + 1):
            # ours' two passes over a micro-batch (pipeline.BatchRouter): the raw batch cached, the schemas read
            # from it (a job: each message searched, or compared with the texts known from earlier batches), then
            # the conversion from the cache
            if only:
                for name in VARIANTS:
                    if name in only:
                        measured(round_, name, noop(_variant(raw, name, config, full_schema, payload_schema,
                                                             prefix)))
                continue
            cached = raw.persist()
            measured(round_, "cache-build", noop(cached.select("value")))
            KNOWN.clear()
            measured(round_, "schemas-searched", schemas(cached))
            df = measured(round_, "schemas-known", schemas(cached))
            measured(round_, "convert-cached", noop(df))
            cached.unpersist()
            for name in VARIANTS:
                measured(round_, name, noop(_variant(raw, name, config, full_schema, payload_schema, prefix)))
        spark.stop()


if __name__ == "__main__":
    main()
