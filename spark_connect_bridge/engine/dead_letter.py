"""errors.tolerance, errors.log.* and the dead-letter sink, per micro-batch, with Column expressions.

A pipeline in tolerant mode (``errors.tolerance=all``) carries two hidden columns: ``_kc_error`` (the first
failure of the record: stage, class, alias, exception class, message; see :mod:`.record_errors`) and
``_kc_original`` (the record as it entered the pipeline: key and value as bytes, topic, partition, offset,
timestamp, headers). :func:`split_batch` divides a micro-batch into good rows and failed rows;
:func:`write_dead_letters` logs the failed ones (``errors.log.enable``) and writes them, in their original form,
to the dead-letter topic of the topic store (``errors.deadletterqueue.topic.name`` under
``errors.deadletterqueue.topics.dir``), to that Kafka topic when Kafka is the bus (:mod:`.bus`), or to a sink
connector named by ``errors.deadletterqueue.sink.*``, with
Kafka's ``__connect.errors.*`` headers when ``errors.deadletterqueue.context.headers.enable=true``. Writes are
idempotent per (application, batch id), so a replayed micro-batch does not dead-letter a record twice.

What is stored for the source side (a Kafka Connect extension): the record as the connector emitted it, its key
and value serialized as JSON text (strings and bytes as they are).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from ..config import Config
from ..converters.base import utf8_bytes
from ..core.record_errors import ERROR_COL, enable_error_column
from ..errors import ConfigError, ConfigProblem
from .topic_store import TopicStore, session_locations

__all__ = ["ErrorPolicy", "ORIGINAL_COL", "SOURCE_FAILED_COL", "snapshot", "start_tolerant", "split_batch",
           "write_dead_letters", "INTERNAL_COLS"]

log = logging.getLogger(__name__)

ORIGINAL_COL = "_kc_original"
SOURCE_FAILED_COL = "_kc_source_failed"
SOURCE_ORIGINAL_COL = "_kc_source_original"
INTERNAL_COLS = (ERROR_COL, ORIGINAL_COL, SOURCE_FAILED_COL, SOURCE_ORIGINAL_COL)
_POLICY_META = "kconnect.errors"
# The dead-letter sink's and Kafka producer's settings carry credentials (``connection.password``,
# ``kafka.sasl.jaas.config``): a DataFrame's column metadata is readable by anyone holding the DataFrame (and is
# printed by ``df.schema``), so the policy attached there names them by a random reference into this process's
# registry instead. Attaching and reading happen on the driver that builds the query.
_ATTACHED_SETTINGS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {}
_ATTACHED_LOCK = threading.Lock()


@dataclass(frozen=True)
class ErrorPolicy:
    """The parsed errors.* keys of one connector config."""

    connector: str
    tolerate: bool = False
    log_enable: bool = False
    log_messages: bool = False
    dlq_topic: str = ""
    dlq_dir: str | None = None
    dlq_sink: tuple[tuple[str, str], ...] = ()
    context_headers: bool = False
    #: Spark Kafka sink options when the dead-letter topic is a Kafka topic (Kafka as the bus).
    dlq_kafka: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_config(cls, config: Config, *, kafka: Mapping[str, str] | None = None) -> ErrorPolicy:
        """The policy of a parsed connector config; ``kafka`` (Spark Kafka sink options) makes the dead-letter
        topic a Kafka topic."""
        sink = tuple(sorted((k, str(v)) for k, v in config.with_prefix("errors.deadletterqueue.sink.").items()))
        dlq_topic = config.errors_deadletterqueue_topic_name or ""
        policy = cls(config.name, config.errors_tolerance == "all",
                     config.errors_log_enable, config.errors_log_include_messages, dlq_topic,
                     config.errors_deadletterqueue_topics_dir, sink,
                     config.errors_deadletterqueue_context_headers_enable,
                     tuple(sorted(kafka.items())) if kafka and dlq_topic and not sink else ())
        problems = []
        if policy.dlq_topic and not policy.dlq_dir and not sink and not policy.dlq_kafka:
            problems.append(ConfigProblem("errors.deadletterqueue.topics.dir",
                                          "errors.deadletterqueue.topic.name is set: also set "
                                          "errors.deadletterqueue.topics.dir (the topic store directory; the "
                                          "worker sets it) or errors.deadletterqueue.sink.connector.class"))
        if policy.dlq_sink and not dict(sink).get("connector.class"):
            problems.append(ConfigProblem("errors.deadletterqueue.sink.connector.class",
                                          'Missing required configuration "errors.deadletterqueue.sink.'
                                          'connector.class" (errors.deadletterqueue.sink.* keys are set)'))
        if problems:
            raise ConfigError(problems)
        if policy.tolerate and not policy.has_dlq:
            log.warning("%s: errors.tolerance=all without a dead-letter queue: failed records are skipped "
                        "(counted in the query progress%s)", policy.connector,
                        "" if policy.log_enable else "; set errors.log.enable=true to log them")
        return policy

    @property
    def has_dlq(self) -> bool:
        return bool(self.dlq_topic or self.dlq_sink)

    def to_json(self) -> str:
        """The policy as JSON for column metadata: the dead-letter sink's and Kafka's settings (credentials)
        stay in this process, named by a reference."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("dlq_sink", "dlq_kafka")}
        if self.dlq_sink or self.dlq_kafka:
            ref = uuid.uuid4().hex
            with _ATTACHED_LOCK:
                _ATTACHED_SETTINGS[ref] = (self.dlq_sink, self.dlq_kafka)
            d["settings_ref"] = ref
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> ErrorPolicy:
        d = json.loads(text)
        ref = d.pop("settings_ref", None)
        if ref is not None:
            with _ATTACHED_LOCK:
                settings = _ATTACHED_SETTINGS.get(ref)
            if settings is None:
                raise ConfigError([ConfigProblem("errors.deadletterqueue.topic.name", (
                    "the DataFrame's dead-letter settings were attached by another process: build the query "
                    "where its source DataFrame was made"))])
            d["dlq_sink"], d["dlq_kafka"] = settings
        return cls(**d)


def _as_bytes(col: Column, dt: Any) -> Column:
    if isinstance(dt, BinaryType):
        return col
    if isinstance(dt, StringType):
        return utf8_bytes(col)
    if isinstance(dt, (StructType, MapType, ArrayType)):
        return utf8_bytes(F.to_json(col))
    return utf8_bytes(col.cast("string"))


def snapshot(df: DataFrame) -> Column:
    """The record as it is now (key and value as bytes), for the dead-letter sink."""
    fields = []
    for name in ("key", "value"):
        fields.append(_as_bytes(F.col(name), df.schema[name].dataType).alias(name) if name in df.columns
                      else F.lit(None).cast("binary").alias(name))
    for name, typ in (("topic", "string"), ("partition", "int"), ("offset", "bigint"), ("timestamp", "timestamp")):
        fields.append((F.col(name) if name in df.columns else F.lit(None).cast(typ)).alias(name))
    headers = F.col("headers") if "headers" in df.columns else F.lit(None)
    fields.append(headers.cast("array<struct<key:string,value:binary>>").alias("headers"))
    return F.struct(*fields)


def start_tolerant(df: DataFrame) -> DataFrame:
    """Enter tolerant mode: add ``_kc_error`` and the ``_kc_original`` snapshot. When ``df`` already failed
    records upstream (a tolerant source pipeline), they stay failed and are marked as the source's."""
    if ERROR_COL in df.columns:
        df = df.withColumn(SOURCE_FAILED_COL, F.col(ERROR_COL).isNotNull())
        if ORIGINAL_COL in df.columns:
            df = df.withColumnRenamed(ORIGINAL_COL, SOURCE_ORIGINAL_COL)
        base = df.drop(ERROR_COL, SOURCE_FAILED_COL, SOURCE_ORIGINAL_COL)
        return df.withColumn(ORIGINAL_COL, snapshot(base))
    return enable_error_column(df).withColumn(ORIGINAL_COL, snapshot(df))


def attach_policy(df: DataFrame, policy: ErrorPolicy) -> DataFrame:
    """Remember the source side's policy on the error column, for the router at the write."""
    return df.withMetadata(ERROR_COL, {_POLICY_META: policy.to_json()})


def attached_policy(df: DataFrame) -> ErrorPolicy | None:
    if ERROR_COL not in df.columns:
        return None
    meta = df.schema[ERROR_COL].metadata.get(_POLICY_META)
    return ErrorPolicy.from_json(meta) if meta else None


def split_batch(df: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(good rows, rows failed upstream at the source, rows failed here). The good rows keep the internal
    columns (``_kc_original`` dead-letters a record a sink rejects later); drop them before writing."""
    err = F.col(ERROR_COL)
    src_failed = F.col(SOURCE_FAILED_COL) if SOURCE_FAILED_COL in df.columns else F.lit(False)
    good = df.filter(err.isNull())
    source_bad = df.filter(src_failed)
    if SOURCE_ORIGINAL_COL in df.columns:
        source_bad = source_bad.drop(ORIGINAL_COL).withColumnRenamed(SOURCE_ORIGINAL_COL, ORIGINAL_COL)
    here_bad = df.filter(err.isNotNull() & ~src_failed)
    return good, source_bad, here_bad


_CONTEXT = (("__connect.errors.topic", "topic"), ("__connect.errors.partition", "partition"),
            ("__connect.errors.offset", "offset"))


def _dead_letter_records(bad: DataFrame, policy: ErrorPolicy) -> DataFrame:
    o, e = F.col(ORIGINAL_COL), F.col(ERROR_COL)
    headers = F.coalesce(o["headers"], F.array().cast("array<struct<key:string,value:binary>>"))
    if policy.context_headers:
        def h(key: str, value: Column) -> Column:
            return F.struct(F.lit(key).alias("key"), utf8_bytes(value.cast("string")).alias("value"))

        ctx = [h(k, o[c]) for k, c in _CONTEXT] + [
            h("__connect.errors.connector.name", F.lit(policy.connector)),
            h("__connect.errors.task.id", F.spark_partition_id()),
            h("__connect.errors.stage", e["stage"]),
            h("__connect.errors.class.name", e["class_name"]),
            h("__connect.errors.exception.class.name", e["exception_class"]),
            h("__connect.errors.exception.message", e["message"]),
            h("__connect.errors.exception.stacktrace",
              F.concat(e["exception_class"], F.lit(": "), e["message"], F.lit("\n\tat "), e["class_name"],
                       F.when(e["alias"].isNotNull(), F.concat(F.lit(" (alias "), e["alias"], F.lit(")")))
                       .otherwise(F.lit("")))),
        ]
        headers = F.concat(headers, F.array(*ctx))
    topic = F.lit(policy.dlq_topic) if policy.dlq_topic else o["topic"]
    return bad.select(o["key"].alias("key"), o["value"].alias("value"), topic.alias("topic"),
                      o["partition"].alias("partition"), o["offset"].alias("offset"),
                      o["timestamp"].alias("timestamp"), headers.alias("headers"))


def _log_failures(bad: DataFrame, policy: ErrorPolicy, limit: int = 1000) -> None:
    cols = [F.col(ERROR_COL)["message"].alias("message")]
    rows = bad.select(*cols).limit(limit).collect()
    for r in rows:
        # The message names stage, class, alias and coordinates; record contents only when asked.
        log.error("%s: record error: %s", policy.connector, r["message"])
    if policy.log_messages:
        for r in bad.select(F.col(ORIGINAL_COL).alias("o")).limit(limit).collect():
            log.error("%s: failed record topic=%s partition=%s offset=%s timestamp=%s key=%r value=%r",
                      policy.connector, r.o.topic, r.o.partition, r.o.offset, r.o.timestamp, r.o.key, r.o.value)


def write_dead_letters(bad: DataFrame, policy: ErrorPolicy, *, app_id: str, batch_id: int) -> None:
    """Log and dead-letter the failed rows of one micro-batch (idempotent per app id and batch id)."""
    if policy.log_enable:
        _log_failures(bad, policy)
    if not policy.has_dlq:
        return
    records = _dead_letter_records(bad, policy)
    ids = {"kconnect.app.id": f"dlq-{app_id}", "kconnect.batch.id": str(batch_id)}
    if policy.dlq_sink:
        records.write.format("kconnect").options(**dict(policy.dlq_sink), **ids).mode("append").save()
        return
    if policy.dlq_kafka:
        # Kafka Connect's dead-letter producer: the consumed key/value bytes and headers (at-least-once, like
        # Kafka Connect's: a replayed batch may dead-letter a record twice).
        records.select("key", "value", "topic", "headers").write.format("kafka").options(
            **dict(policy.dlq_kafka)).save()
        return

    # The topic store's dead-letter topic: Delta with the app transaction, or in a Parquet store (without deltalake,
    # or in a bucket) one object per query and batch, overwritten by a replay (TopicStore.write_dead_letters).
    store = TopicStore(policy.dlq_dir or "", files=session_locations(bad.sparkSession))
    store.write_dead_letters(records, app_id=ids["kconnect.app.id"], batch_id=batch_id)
