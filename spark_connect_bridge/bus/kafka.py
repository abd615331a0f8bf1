"""Kafka as the bus: sink connectors consume Kafka topics, source connectors produce to them, with Spark's own
Kafka source and sink (``spark-sql-kafka-0-10``, which the Spark session must have loaded).

* :func:`sink_stream`: a sink connector config's ``topics`` / ``topics.regex`` read with Spark's Kafka source
  (``startingOffsets=earliest``, Kafka Connect's ``auto.offset.reset``), then converters, transforms, errors.* and
  the connector, as :func:`~spark_connect_bridge.engine.pipeline.write_stream` runs them. ``consumer.override.*`` keys
  that Spark's Kafka source applies are passed to its consumers; the others are rejected by name. Dead letters go
  to the Kafka topic ``errors.deadletterqueue.topic.name`` (created like Kafka Connect does: one partition,
  ``errors.deadletterqueue.topic.replication.factor``) with the consumed key and value bytes, the consumed headers
  and the ``__connect.errors.*`` headers. After Spark commits a micro-batch, its end positions are committed to the
  consumer group ``connect-<name>`` (``consumer.override.group.id`` names another), so lag monitors work.
* :func:`source_stream`: a source connector's records, after transforms and converters, produced to their
  ``topic`` with key, value and headers by Spark's Kafka sink; topics that do not exist are created first by the
  connector's ``topic.creation.*`` rules (KIP-158). ``producer.override.*`` keys go to Spark's producers.

Delivery: Spark's Kafka sink is at-least-once. A micro-batch that was produced but not yet committed in the
checkpoint when the query died is produced again when it restarts: nothing is lost, records of that batch may
appear twice. A source query producing straight to Kafka at a processing-time trigger tracks its progress
asynchronously (Spark's ``asyncProgressTrackingEnabled``): the checkpoint's offset and commit logs are written by
a thread of their own at most once a second, not twice per micro-batch on its way, and the source is told to
let go of its data (a replication slot moves) only once a later batch's offsets are in the checkpoint; a
restart after a crash then produces again what the last second produced. Sinks reading Kafka keep their own
guarantee (exactly-once into Delta, JDBC, files): their progress is the query's checkpoint, and the consumer group
only mirrors it.

>>> bus = KafkaBus("127.0.0.1:9092")                                                    # doctest: +SKIP
>>> q1 = source_stream(spark, "conf/datagen-orders.properties", bus=bus, checkpoint="/ckpt/src")  # doctest: +SKIP
>>> q2 = sink_stream(spark, {"name": "orders-file", "connector.class": "FileStreamSink", "topics": "orders",
...                          "file": "/tmp/orders.txt"}, bus=bus, checkpoint="/ckpt/sink")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, NullType, StringType

from ..config import load_config_file
from ..connectors.base import checkpoint_app_id
from ..core.records import HEADERS, HEADERS_TYPE, RECORD_COLUMNS
from ..engine.dead_letter import INTERNAL_COLS, attached_policy, start_tolerant
from ..engine.pipeline import (
    BatchRouter,
    PreparedConfig,
    observe_batches,
    prepare,
    read_stream,
    start_routed,
    write_stream,
)
from ..engine.queries import start_query
from ..errors import ConfigError, ConfigProblem
from .admin import TopicCreation, ensure_topics
from .groups import track_group

__all__ = ["KafkaBus", "ConsumerSettings", "KafkaSinkPlan", "KafkaSourcePlan", "plan_sink", "plan_source",
           "read_topics", "sink_stream", "source_stream", "write_kafka", "producer_overrides"]

# Kafka consumer settings that Spark's Kafka source hands to its consumers (as kafka.<key>).
_CONSUMER_PASSED = frozenset({
    "bootstrap.servers", "client.id", "client.rack", "client.dns.lookup", "security.protocol", "fetch.min.bytes",
    "fetch.max.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes", "max.poll.records",
    "max.poll.interval.ms", "receive.buffer.bytes", "send.buffer.bytes", "request.timeout.ms",
    "default.api.timeout.ms", "connections.max.idle.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "retry.backoff.max.ms", "metadata.max.age.ms", "isolation.level", "check.crcs",
    "session.timeout.ms", "heartbeat.interval.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "exclude.internal.topics", "allow.auto.create.topics",
    "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "metric.reporters"})
_CONSUMER_PASSED_PREFIXES = ("ssl.", "sasl.")
_COMMITS = ("the consumed positions are committed to the consumer group after Spark commits each micro-batch "
            "(the query's checkpoint is the source of truth)")
_ASSIGNS = "Spark assigns the topic partitions to its tasks itself (no group membership)"
_CONSUMER_REJECTED = {
    "key.deserializer": "Spark's Kafka source reads bytes; key.converter parses them",
    "value.deserializer": "Spark's Kafka source reads bytes; value.converter parses them",
    "enable.auto.commit": _COMMITS, "auto.commit.interval.ms": _COMMITS,
    "interceptor.classes": "Spark's Kafka source runs no consumer interceptors",
    "partition.assignment.strategy": _ASSIGNS, "group.instance.id": _ASSIGNS, "group.protocol": _ASSIGNS,
    "group.remote.assignor": _ASSIGNS,
}
_PRODUCER_REJECTED = {
    "key.serializer": "Spark's Kafka sink writes the bytes key.converter made",
    "value.serializer": "Spark's Kafka sink writes the bytes value.converter made",
    "transactional.id": "Spark's Kafka sink shares its producers between tasks and writes without transactions "
                        "(delivery into Kafka is at-least-once)",
}
_STARTS = ("earliest", "latest")


@dataclass(frozen=True)
class KafkaBus:
    """A Kafka cluster as the bus: ``bootstrap_servers`` plus settings every client gets (``security.protocol``,
    ``ssl.*``, ``sasl.*``; kept out of ``repr``)."""

    bootstrap_servers: str
    client: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, bus: KafkaBus | str) -> KafkaBus:
        return bus if isinstance(bus, KafkaBus) else cls(str(bus))

    def spark_options(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """Options of Spark's Kafka source or sink (``kafka.bootstrap.servers``, ``kafka.<client setting>``)."""
        opts = {f"kafka.{k}": v for k, v in self.client}
        opts["kafka.bootstrap.servers"] = self.bootstrap_servers
        opts.update({f"kafka.{k}": str(v) for k, v in (overrides or {}).items()})
        return opts

    def admin_config(self) -> dict[str, str]:
        """The admin client's settings (confluent-kafka: librdkafka names; the shared security settings)."""
        shared = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                  "ssl.certificate.location", "ssl.key.location", "ssl.key.password")
        out = {k: v for k, v in self.client if k in shared}
        out["bootstrap.servers"] = self.bootstrap_servers
        return out


@dataclass(frozen=True)
class ConsumerSettings:
    """The ``consumer.override.*`` keys of a sink config, parsed: what Spark's Kafka source is given."""

    kafka: tuple[tuple[str, str], ...] = ()
    starting_offsets: str = "earliest"
    group: str | None = None

    @classmethod
    def from_config(cls, props: Mapping[str, Any]) -> ConsumerSettings:
        prefix = "consumer.override."
        problems: list[ConfigProblem] = []
        kafka: dict[str, str] = {}
        starting, group = "earliest", None
        for key, raw in props.items():
            if not key.lower().startswith(prefix):
                continue
            name, value = key[len(prefix):], str(raw).strip()
            if name == "auto.offset.reset":
                if value.lower() not in _STARTS:
                    problems.append(ConfigProblem(key, f"Invalid value {value} for configuration {key}: one of "
                                                       f"{', '.join(_STARTS)} (Spark's startingOffsets)"))
                starting = value.lower()
            elif name == "group.id":
                group = value
            elif name in _CONSUMER_REJECTED:
                problems.append(ConfigProblem(key, f"Configuration {key} is not applied: "
                                                   f"{_CONSUMER_REJECTED[name]}"))
            elif name in _CONSUMER_PASSED or name.startswith(_CONSUMER_PASSED_PREFIXES):
                kafka[name] = value
            else:
                problems.append(ConfigProblem(key, f"Configuration {key} is not a Kafka consumer setting that "
                                                   f"Spark's Kafka source applies"))
        if problems:
            raise ConfigError(problems)
        return cls(tuple(sorted(kafka.items())), starting, group)


def producer_overrides(props: Mapping[str, Any]) -> dict[str, str]:
    """The ``producer.override.*`` keys of a source config, for Spark's Kafka sink (some rejected by name)."""
    prefix = "producer.override."
    out, problems = {}, []
    for key, raw in props.items():
        if key.lower().startswith(prefix):
            name = key[len(prefix):]
            if name in _PRODUCER_REJECTED:
                problems.append(ConfigProblem(key, f"Configuration {key} is not applied: {_PRODUCER_REJECTED[name]}"))
            else:
                out[name] = str(raw)
    if problems:
        raise ConfigError(problems)
    return out


def _as_mapping(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(config, (str, os.PathLike)):
        return dict(load_config_file(config))
    return dict(config)


def _without(props: Mapping[str, Any], prefixes: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if not k.lower().startswith(tuple(prefixes))}


def _topics(props: Mapping[str, Any]) -> tuple[list[str], str]:
    topics = [t.strip() for t in str(props.get("topics") or "").split(",") if t.strip()]
    return topics, str(props.get("topics.regex") or "").strip()


# -- sinks ------------------------------------------------------------------------------------------------
def read_topics(spark: Any, bus: KafkaBus | str, *, topics: Sequence[str] = (), topics_regex: str = "",
                consumer: ConsumerSettings | None = None, max_records_per_trigger: int | None = None) -> DataFrame:
    """A streaming record DataFrame of Kafka ``topics`` (or the topics matching ``topics_regex``, new ones
    included) through Spark's Kafka source: ``key``, ``value`` (bytes), ``topic``, ``partition``, ``offset``,
    ``timestamp``, ``headers``."""
    bus, consumer = KafkaBus.of(bus), consumer or ConsumerSettings()
    if not topics and not topics_regex:
        raise ConfigError([ConfigProblem("topics", "Must configure one of topics or topics.regex")])
    reader = (spark.readStream.format("kafka").options(**bus.spark_options(dict(consumer.kafka)))
              .option("includeHeaders", "true").option("startingOffsets", consumer.starting_offsets))
    reader = reader.option("subscribe", ",".join(topics)) if topics else \
        reader.option("subscribePattern", topics_regex)
    if max_records_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(int(max_records_per_trigger)))
    # Spark's Kafka source gives records without headers a null header list. A Kafka Connect record always has a
    # list (maybe empty), and null lists reaching a Python sink as Arrow cost O(rows²) per batch (see
    # records.no_headers; measured: 4x the time of the whole Kafka -> sink path).
    headers = F.coalesce(F.col(HEADERS), F.array().cast(HEADERS_TYPE)).alias(HEADERS)
    return reader.load().select(*[headers if c == HEADERS else F.col(c) for c in RECORD_COLUMNS])


@dataclass(frozen=True)
class KafkaSinkPlan:
    """A sink connector config checked for Kafka topics: its stages and connector, what Spark's Kafka source is
    given, and the topics it reads. Made once by :func:`plan_sink`, then run by :func:`sink_stream`."""

    prepared: PreparedConfig
    consumer: ConsumerSettings
    topics: tuple[str, ...]
    topics_regex: str
    max_records_per_trigger: int
    dlq_replication_factor: int


def plan_sink(config: Mapping[str, Any] | str, bus: KafkaBus | str) -> KafkaSinkPlan:
    """Check a sink connector config as :func:`sink_stream` runs it over Kafka topics; raise one
    :class:`~spark_connect_bridge.errors.ConfigError` with every problem."""
    bus = KafkaBus.of(bus)
    props = _as_mapping(config)
    problems: list[ConfigProblem] = []
    try:
        consumer = ConsumerSettings.from_config(props)
    except ConfigError as e:
        problems.extend(e.problems)
        consumer = ConsumerSettings()
    props = _without(props, ("consumer.override.",))
    topics, regex = _topics(props)
    if not topics and not regex:
        problems.append(ConfigProblem("topics", "Must configure one of topics or topics.regex"))
    try:
        p = prepare(props, kind="sink", dead_letter_kafka=bus.spark_options())
    except ConfigError as e:
        problems.extend(e.problems)
    if problems:
        raise ConfigError(problems, context=f"connector {props.get('name')!r}" if props.get("name") else None)
    return KafkaSinkPlan(p, consumer, tuple(topics), regex, p.sink_records_per_trigger,
                         int(props.get("errors.deadletterqueue.topic.replication.factor") or 3))


def sink_stream(spark: Any, config: Mapping[str, Any] | str | KafkaSinkPlan, *, bus: KafkaBus | str,
                checkpoint: str, trigger: Mapping[str, Any] | None = None, query_name: str | None = None) -> Any:
    """Start a query that runs a sink connector config (or its :func:`plan_sink`) over the Kafka topics it names
    (``topics`` / ``topics.regex``); its positions are committed to the consumer group ``connect-<name>`` after
    each batch."""
    bus = KafkaBus.of(bus)
    plan = config if isinstance(config, KafkaSinkPlan) else plan_sink(config, bus)
    p = plan.prepared
    if p.policy.has_dlq:
        ensure_topics(bus.admin_config(), {p.policy.dlq_topic: (1, plan.dlq_replication_factor, {})})
    df = read_topics(spark, bus, topics=plan.topics, topics_regex=plan.topics_regex, consumer=plan.consumer,
                     max_records_per_trigger=plan.max_records_per_trigger)
    # Spark's Kafka source reads only the subscribed topics (Kafka's own matching of topics.regex): the
    # pipeline keeps no read-topic column and the writer selects nothing again.
    query = write_stream(df, p, checkpoint=checkpoint, trigger=trigger, query_name=query_name, subscribed=True)
    track_group(spark, query, bus.admin_config(), plan.consumer.group or f"connect-{p.name}")
    return query


# -- sources ----------------------------------------------------------------------------------------------
def _kafka_columns(df: DataFrame) -> DataFrame:
    """The columns Spark's Kafka sink writes (key, value, topic, headers), checked: serialized key and value."""
    problems = []
    cols = []
    for name, conv in (("key", "key.converter"), ("value", "value.converter")):
        if name not in df.columns:
            cols.append(F.lit(None).cast("binary").alias(name))
            continue
        dt = df.schema[name].dataType
        if not isinstance(dt, (BinaryType, StringType, NullType)):
            problems.append(ConfigProblem(conv, f"Records produced to Kafka need a serialized {name}, and it is "
                                                f"{dt.simpleString()}: set {conv} (e.g. org.apache.kafka.connect."
                                                f"json.JsonConverter) in the connector or the worker"))
        cols.append(F.col(name).cast("binary").alias(name) if isinstance(dt, NullType) else F.col(name))
    cols.append(F.col("topic"))
    if "headers" in df.columns:
        ht = df.schema["headers"].dataType
        hv = getattr(getattr(ht, "elementType", None), "fields", None)
        if ht == HEADERS_TYPE:
            cols.append(F.col("headers"))
        elif hv is not None and len(hv) == 2 and isinstance(hv[1].dataType, (StringType, BinaryType)):
            cols.append(F.col("headers").cast(HEADERS_TYPE).alias("headers"))
        else:
            problems.append(ConfigProblem("header.converter", f"Records produced to Kafka need serialized headers "
                                                              f"(array<struct<key:string,value:binary>>), and they "
                                                              f"are {ht.simpleString()}: set header.converter"))
    if problems:
        raise ConfigError(problems)
    return df.select(*cols)


class _TopicCreator:
    """Creates the topics of a micro-batch that do not exist yet (``topic.creation.*``), once each."""

    def __init__(self, bus: KafkaBus, creation: TopicCreation):
        self.bus, self.creation = bus, creation
        self.known: set[str] = set()

    def __call__(self, batch: DataFrame) -> None:
        topics = [r[0] for r in batch.select("topic").distinct().collect() if r[0] is not None]
        ensure_topics(self.bus.admin_config(), {t: self.creation.settings_for(t) for t in topics}, self.known)


def _tracks_progress_async(trigger: Mapping[str, Any] | None) -> bool:
    """Whether a query straight into Spark's Kafka sink tracks its progress asynchronously: Spark allows it at a
    processing-time trigger only (the default trigger is one), not ``once``/``availableNow``/``continuous``.
    Two checkpoint writes per micro-batch (offsets, commit) were 150-400 ms of a 500 ms trigger's batch under
    load (bench/bench_vs_debezium.py stream)."""
    return not trigger or set(trigger) == {"processingTime"}


def write_kafka(df: DataFrame, bus: KafkaBus | str, *, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                query_name: str | None = None, creation: TopicCreation | None = None,
                producer: Mapping[str, str] | None = None) -> Any:
    """Start a query producing the records of ``df`` (a source pipeline's, serialized by its converters) to their
    ``topic`` with Spark's Kafka sink: key, value, headers. At-least-once. Failed records of a tolerant source go
    to its dead-letter topic; ``creation`` creates missing topics first. Straight into Kafka (no dead letters, no
    topic creation) at a processing-time trigger the query tracks its progress asynchronously (see the module
    docstring)."""
    bus = KafkaBus.of(bus)
    options = bus.spark_options(producer)
    _kafka_columns(df.drop(*[c for c in INTERNAL_COLS if c in df.columns]))  # fail before the query starts
    source_policy = attached_policy(df)
    name = query_name or (source_policy.connector if source_policy else "kafka-writer")
    creator = _TopicCreator(bus, creation) if creation is not None else None
    if source_policy is None and creator is None:
        sink = dict(options, asyncProgressTrackingEnabled="true") if _tracks_progress_async(trigger) else options
        return start_routed(_kafka_columns(observe_batches(df)), checkpoint=checkpoint, trigger=trigger,
                            query_name=name, router=None, direct=lambda w: w.format("kafka").options(**sink))

    def write_good(good: DataFrame, app_id: str, batch_id: int) -> None:
        good = _kafka_columns(good.drop(*[c for c in INTERNAL_COLS if c in good.columns]))
        if creator is not None:
            creator(good)
        good.write.format("kafka").options(**options).save()

    app_id = checkpoint_app_id(checkpoint)
    if source_policy is None:
        def plain(batch: DataFrame, batch_id: int) -> None:
            batch = batch.persist()
            try:
                write_good(batch, app_id, batch_id)
            finally:
                batch.unpersist()

        return start_query(observe_batches(df).writeStream.foreachBatch(plain), checkpoint, trigger, name)
    router = BatchRouter(write_good, app_id=app_id, policy=None, source_policy=source_policy, name=name)
    return start_routed(observe_batches(start_tolerant(df)), checkpoint=checkpoint, trigger=trigger,
                        query_name=name, router=router, direct=None)


@dataclass(frozen=True)
class KafkaSourcePlan:
    """A source connector config checked for producing to Kafka: its connector and stages, ``topic.creation.*``
    and ``producer.override.*``. Made once by :func:`plan_source`, then run by :func:`source_stream`."""

    prepared: PreparedConfig
    creation: TopicCreation | None
    producer: Mapping[str, str]
    dlq_replication_factor: int


def plan_source(config: Mapping[str, Any] | str, bus: KafkaBus | str) -> KafkaSourcePlan:
    """Check a source connector config as :func:`source_stream` runs it; raise one
    :class:`~spark_connect_bridge.errors.ConfigError` with every problem."""
    bus = KafkaBus.of(bus)
    props = _as_mapping(config)
    problems: list[ConfigProblem] = []
    creation, producer = None, {}
    try:
        creation = TopicCreation.from_config(props)
    except ConfigError as e:
        problems.extend(e.problems)
    try:
        producer = producer_overrides(props)
    except ConfigError as e:
        problems.extend(e.problems)
    props = _without(props, ("topic.creation.", "producer.override."))
    try:
        p = prepare(props, kind="source", dead_letter_kafka=bus.spark_options())
    except ConfigError as e:
        problems.extend(e.problems)
    if problems:
        raise ConfigError(problems, context=f"connector {props.get('name')!r}" if props.get("name") else None)
    return KafkaSourcePlan(p, creation, producer,
                           int(props.get("errors.deadletterqueue.topic.replication.factor") or 3))


def source_stream(spark: Any, config: Mapping[str, Any] | str | KafkaSourcePlan, *, bus: KafkaBus | str,
                  checkpoint: str, trigger: Mapping[str, Any] | None = None, query_name: str | None = None) -> Any:
    """Start a query that runs a source connector config (or its :func:`plan_source`: connector → transforms →
    converters) and produces its records to Kafka, creating missing topics by its ``topic.creation.*`` rules."""
    bus = KafkaBus.of(bus)
    plan = config if isinstance(config, KafkaSourcePlan) else plan_source(config, bus)
    df = read_stream(spark, plan.prepared)
    policy = attached_policy(df)
    if policy is not None and policy.has_dlq:
        ensure_topics(bus.admin_config(), {policy.dlq_topic: (1, plan.dlq_replication_factor, {})})
    return write_kafka(df, bus, checkpoint=checkpoint, trigger=trigger,
                       query_name=query_name or plan.prepared.name or None, creation=plan.creation,
                       producer=plan.producer)
