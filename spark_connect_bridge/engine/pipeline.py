"""One call per side: a whole Kafka Connect config, connector, transforms, converters and errors.* included.

* source side: connector → transforms → converters (Kafka Connect's order):
  :func:`read_stream` / :func:`read_batch` return the record DataFrame;
* sink side: converters → transforms → connector: :func:`write_stream` starts the streaming query,
  :func:`write_batch` writes a batch DataFrame; :func:`write_topic_store` writes a source's records into the
  topic store.

Every key of the config is applied or rejected: the whole config is parsed and validated on the driver before
any data moves, and every problem is reported at once.

Record errors (:mod:`.record_errors`, :mod:`.dead_letter`): with ``errors.tolerance=none`` (the default) the
first record that fails a converter or a transform fails the query with a message naming the stage, the
converter or transform alias, and the record's topic/partition/offset. With ``errors.tolerance=all`` failed
records are kept apart per micro-batch with Column expressions: the good rows reach the sink, the failed ones go
to the dead-letter sink (and to the log with ``errors.log.enable``). A tolerant source pipeline returns its
DataFrame with two extra columns (``_kc_error``, ``_kc_original``); :func:`write_stream` and
:func:`write_topic_store` route them, and anything else can call
:func:`spark_connect_bridge.engine.dead_letter.split_batch`
in a ``foreachBatch``.

Each query reports its counts in its progress (``query.lastProgress["observedMetrics"]["kconnect"]``:
``records``, ``failed``) and, for routed queries, per batch in :data:`BATCH_METRICS` (``records``, ``failed``,
``dead_lettered``, ``written``; then, from the sink, ``retried`` and ``rejected_by_sink``).

>>> df = read_stream(spark, "conf/file-source.properties")                 # doctest: +SKIP
>>> q = write_stream(df, {"connector.class": "FileStreamSink", "file": "/tmp/out.txt"},
...                  checkpoint="/tmp/ckpt")                                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, VariantType

from ..config import Config, load_config_file
from ..config.common import PLUGIN_PREFIXES, SINK_MAX_RECORDS_PER_TRIGGER
from ..connectors.base import checkpoint_app_id
from ..connectors.factory import parse_connector_config, stage_keys
from ..converters import apply_sink_converters, apply_source_converters, build_converters
from ..converters.json_envelopes import SCHEMAS_CHANGED, BatchTexts
from ..core.record_errors import ERROR_COL
from ..core.records import VARIANT_JSON_META, record_schema
from ..errors import ConfigError, ConfigProblem, RecordError
from ..transforms import build_chain
from ..transforms.base import variant_problems
from .arrow_hand_off import python_writer_batches
from .datasource import READ_TOPIC_COL, SUBSCRIBED_OPTION, rejects_path, reports_dir
from .dead_letter import (
    INTERNAL_COLS,
    SOURCE_FAILED_COL,
    ErrorPolicy,
    attach_policy,
    attached_policy,
    split_batch,
    start_tolerant,
    write_dead_letters,
)
from .python_workers import check_python_workers
from .queries import start_query
from .schema_restarts import HandOverSignal, SchemaFollowingQuery
from .topic_store import TopicStore

__all__ = ["read_stream", "read_batch", "write_stream", "write_batch", "write_topic_store", "PreparedConfig",
           "prepare", "check_routes", "unmatched_records", "BATCH_METRICS"]

log = logging.getLogger(__name__)

#: Messages of a query's first micro-batch whose schemas type it (:meth:`BatchRouter._learn_first_messages`).
FIRST_MESSAGES = 1000
#: Per query name, the counts of its last micro-batches: records, failed, dead_lettered, written.
BATCH_METRICS: dict[str, deque] = defaultdict(lambda: deque(maxlen=100))
_metrics_lock = threading.Lock()


def _as_mapping(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(config, (str, os.PathLike)):
        return dict(load_config_file(config))
    return dict(config)  # never mutate the caller's mapping


@dataclass(frozen=True)
class PreparedConfig:
    """A config checked as a whole, once, on the driver: the connector's typed settings, the DataFrame stages
    around it (transforms, converters, error policy), and ``connector_options``: the connector's keys as the
    strings Spark hands the ``kconnect`` data source (Spark passes data source options as strings, to a Python
    process of its own, so the data source makes its settings from them there; they are the config's own
    strings, already checked here). Every entry point (:func:`read_stream`, :func:`write_stream`, the bus's
    ``source_stream``/``sink_stream``, the worker) takes it instead of a raw config and does not parse again."""

    kind: str
    connector_class: type[Any]
    connector_options: dict[str, str]
    chain: Any
    props: dict[str, Any]
    has_converters: bool
    policy: ErrorPolicy
    name: str
    settings: Config

    def connector(self) -> Any:
        """A connector object on the driver, from the settings parsed here (lag, schema, planning)."""
        return self.connector_class(self.settings, name=self.name)

    def transforms(self, df: DataFrame) -> DataFrame:
        out = self.chain.apply(df) if self.chain is not None else df
        # A sink's own reading of its records (Debezium's JDBC sink unwraps change events), after the transforms
        return self.connector_class.input_frame(out, self.settings) if self.kind == "sink" else out

    @property
    def sink_records_per_trigger(self) -> int:
        """The micro-batch bound of this sink when it reads Kafka or the topic store: its
        ``max.records.per.trigger``, else :data:`~spark_connect_bridge.config.common.SINK_MAX_RECORDS_PER_TRIGGER`."""
        return self.settings.max_records_per_trigger or SINK_MAX_RECORDS_PER_TRIGGER

    def converters(self, df: DataFrame, *, every_message: bool = False, texts: BatchTexts | None = None) -> DataFrame:
        if not self.has_converters:
            return df

        return apply_source_converters(df, self.props) if self.kind == "source" else \
            apply_sink_converters(df, self.props, every_message=every_message, texts=texts)

    def types_from_messages(self, df: DataFrame) -> bool:
        """Whether a sink converter reads its type from the messages (JsonConverter, schemas.enable=true, no
        spark.schema): on a stream the conversion then runs per micro-batch, as Kafka Connect reads each
        message's schema."""
        if self.kind != "sink" or not self.has_converters:
            return False
        from pyspark.sql.types import BinaryType

        return any(conv.types_from_messages(column) and column in df.columns
                   and isinstance(df.schema[column].dataType, BinaryType)
                   for column, conv in build_converters(self.props).items())


Configish = Mapping[str, Any] | str | os.PathLike[str]


def prepare(config: Configish | PreparedConfig, *, kind: str,
            dead_letter_kafka: Mapping[str, str] | None = None) -> PreparedConfig:
    """Validate a whole config (connector, transforms, converters, errors.*) and split it into its stages.

    ``dead_letter_kafka``: Spark Kafka sink options (``kafka.bootstrap.servers``, ...) when the dead-letter topic
    is a Kafka topic (:mod:`spark_connect_bridge.bus`). Raises one
    :class:`~spark_connect_bridge.errors.ConfigError` with every problem of every part. A config prepared
    already is returned as it is (it was checked with the dead-letter sink it was prepared with).
    """
    if isinstance(config, PreparedConfig):
        if config.kind != kind:
            raise ConfigError([ConfigProblem("connector.class", f"{config.connector_class.__name__} is a "
                                                                f"{config.kind} connector, used here as a {kind}")])
        return config
    props = _as_mapping(config)
    errors: list[ConfigError] = []
    cls, policy, name, parsed = None, None, str(props.get("name") or ""), None
    try:
        cls, parsed = parse_connector_config(props, kind=kind, stages_applied=True)
        name = parsed["name"]
        policy = ErrorPolicy.from_config(parsed, kafka=dead_letter_kafka)
    except ConfigError as e:
        errors.append(e)
    chain = None
    if str(props.get("transforms", "")).strip():
        try:
            chain = build_chain(props)
        except ConfigError as e:
            errors.append(e)
    has_converters = any(k.lower() in ("key.converter", "value.converter", "header.converter") and str(v).strip()
                         for k, v in props.items())
    if has_converters:
        try:
            converters = build_converters(props)
            if kind == "sink":
                problems = [pr for column, conv in converters.items() for pr in conv.sink_problems(column)]
                schemaless = {column: key for column, conv in converters.items()
                              if (key := conv.schemaless_key(column)) is not None}
                if schemaless and cls is not None and parsed is not None:
                    problems += cls.schemaless_problems(parsed, schemaless)
                if schemaless and chain is not None:
                    problems += variant_problems(chain, schemaless)
                if problems:
                    raise ConfigError(problems)
        except ConfigError as e:
            errors.append(e)
    if errors:
        raise ConfigError.merge(errors, context=f"connector {name!r}" if name else None)
    stage = set(stage_keys(props))
    options = {k: str(v) for k, v in props.items()
               if k not in stage and not k.lower().startswith(PLUGIN_PREFIXES) and v is not None}
    options.setdefault("name", name)
    assert cls is not None and policy is not None and parsed is not None
    return PreparedConfig(kind, cls, options, chain, props, has_converters, policy, name, parsed)


def observe_batches(df: DataFrame, sink: PreparedConfig | None = None) -> DataFrame:
    """Per-batch counts in the streaming query's progress (``observedMetrics["kconnect"]``); for a sink also
    ``unmatched``: records whose topic its ``topics`` / ``topics.regex`` do not take (they are not written)."""
    failed = F.count_if(F.col(ERROR_COL).isNotNull()) if ERROR_COL in df.columns else F.lit(0).cast("bigint")
    counts = [F.count(F.lit(1)).alias("records"), failed.alias("failed")]
    taken = _takes(sink, df) if sink is not None and "topic" in df.columns else None
    if taken is not None:
        counts.append(F.count_if(~F.coalesce(taken, F.lit(False))).alias("unmatched"))
    return df.observe("kconnect", *counts)


def _sink_topics(p: PreparedConfig) -> tuple[list[str], str]:
    topics = [t.strip() for t in str(p.props.get("topics") or "").split(",") if t.strip()]
    return topics, str(p.props.get("topics.regex") or "").strip()


def _takes(p: PreparedConfig, df: DataFrame) -> Any:
    """A Column: the topic the record was read from is one the sink subscribes to (None: the sink takes every
    record)."""
    topics, regex = _sink_topics(p)
    topic = F.col(READ_TOPIC_COL if READ_TOPIC_COL in df.columns else "topic")
    if topics:
        return topic.isin(topics)
    if regex:
        return topic.rlike(f"^(?:{regex})$")
    return None


def _keep_read_topic(df: DataFrame, p: PreparedConfig) -> DataFrame:
    """Before a sink's transforms: keep the topic each record was read from, which its ``topics`` /
    ``topics.regex`` select on as a Kafka consumer's subscription does (a RegexRouter in the sink's config renames
    records the sink still takes). Not needed when the sink takes every topic or has no transforms."""
    if p.chain is None or "topic" not in df.columns or _takes(p, df) is None:
        return df
    return df.withColumn(READ_TOPIC_COL, F.col("topic"))


def unmatched_records(query: Any) -> int:
    """Records a sink query left unwritten because their topic matched none of its ``topics`` /
    ``topics.regex`` (over the query's recent progress)."""
    total = 0
    for progress in query.recentProgress:
        row = (progress["observedMetrics"] or {}).get("kconnect")
        counts = row.asDict() if row is not None and hasattr(row, "asDict") else dict(row or {})
        total += int(counts.get("unmatched") or 0)
    return total


def check_routes(spark: Any, source: Configish | PreparedConfig, sinks: Sequence[Configish | PreparedConfig]) -> None:
    """Fail before any data moves when a sink's ``topics`` / ``topics.regex`` can match none of the topics the
    source writes (after the source's transforms, a RegexRouter say): every record would be dropped.

    Checked where the source's topics are known from its config (a connector with a ``topic`` or
    ``kafka.topic`` key: FileStreamSource, DatagenConnector); other sources (JDBC, CDC: topics named after tables)
    are checked per batch instead,
    where unmatched records are counted and warned about.
    """
    src = prepare(source, kind="source")
    produced = _static_topics(spark, src)
    if produced is None:
        return
    problems = []
    for sink in sinks:
        p = prepare(sink, kind="sink")
        topics, regex = _sink_topics(p)
        if not topics and not regex:
            continue
        if topics:
            takes_some = any(t in topics for t in produced)
        else:
            pattern = re.compile(f"(?:{regex})\\Z")
            takes_some = any(pattern.match(t) for t in produced)
        if takes_some:
            continue
        key, value = ("topics", ",".join(topics)) if topics else ("topics.regex", regex)
        problems.append(ConfigProblem(key, f"Invalid value {value} for configuration {key}: sink "
                                          f"{p.name or sink!s} would take no record: source "
                                          f"{src.name or source!s} writes only to "
                                          f"{', '.join(sorted(produced))} (after its transforms)"))
    if problems:
        raise ConfigError(problems)


def _static_topics(spark: Any, src: PreparedConfig) -> set[str] | None:
    """The topics a source writes, where its config names them; None when they depend on the data."""
    keys = {k.name for k in getattr(src.connector_class, "config_def", None) or ()}
    topic = next((src.connector_options.get(k) for k in ("topic", "kafka.topic") if k in keys), None)
    if not topic:
        return None
    if src.chain is None:
        return {topic}
    # Run the source's transforms over one tombstone of that topic: topic routers act on the topic alone.
    try:
        row = spark.createDataFrame([(None, None, topic, 0, 0, None, [])],
                                    record_schema(StringType(), StringType()))
        out = {r["topic"] for r in src.transforms(row).select("topic").collect()}
    except Exception:  # a transform that needs real data: the per-batch check covers it
        log.debug("cannot evaluate the topics of %s statically", src.name, exc_info=True)
        return None
    return out or None


def _source_df(spark: Any, config: Configish | PreparedConfig, streaming: bool,
               dead_letter_kafka: Mapping[str, str] | None = None) -> DataFrame:
    p = prepare(config, kind="source", dead_letter_kafka=dead_letter_kafka)
    check_python_workers(spark)
    df = (spark.readStream if streaming else spark.read).format("kconnect").options(**p.connector_options).load()
    if p.policy.tolerate:
        df = start_tolerant(df)
    df = p.converters(p.transforms(df))
    if p.policy.tolerate:
        df = attach_policy(df, p.policy)
    return df


def read_stream(spark: Any, config: Configish | PreparedConfig, *,
                dead_letter_kafka: Mapping[str, str] | None = None) -> DataFrame:
    """A streaming record DataFrame from a source connector config (connector → transforms → converters).
    ``dead_letter_kafka``: see :func:`prepare`."""
    return _source_df(spark, config, streaming=True, dead_letter_kafka=dead_letter_kafka)


def read_batch(spark: Any, config: Configish | PreparedConfig) -> DataFrame:
    """The same as :func:`read_stream`, as a batch DataFrame of everything available now."""
    return _source_df(spark, config, streaming=False)


def _without_internal(df: DataFrame) -> DataFrame:
    return df.drop(*[c for c in INTERNAL_COLS if c in df.columns])


class BatchRouter:
    """foreachBatch: dead-letter the failed rows, write the good ones once per batch id. ``stages``, when
    given, turns each micro-batch into the rows to route (a sink's converters and transforms whose types come
    from that batch's messages). ``texts``, with ``stages``: the query's memory of its last micro-batch's schema
    texts (:class:`~spark_connect_bridge.converters.json_envelopes.BatchTexts`); a micro-batch is then first
    written typed by the previous one's schemas (the query's first: by those of its first messages), in one pass,
    and typed from its own messages (the raw batch cached, read twice) only when one of them carries another
    schema: that write fails before any commit and the sink, which recognises a replayed batch, takes the second
    one."""

    def __init__(self, write_good: Callable[[DataFrame, str, int], dict | None], *, app_id: str,
                 policy: ErrorPolicy | None,
                 source_policy: ErrorPolicy | None, name: str,
                 stages: Callable[[DataFrame], DataFrame] | None = None, texts: BatchTexts | None = None,
                 follow: HandOverSignal | None = None):
        self.write_good, self.app_id, self.name = write_good, app_id, name
        self.policy, self.source_policy = policy, source_policy
        self.stages, self.texts, self.follow = stages, texts, follow
        self._sampled = False

    def restart(self) -> None:
        """Forget what earlier micro-batches taught (a new run types its first micro-batch from its messages)."""
        self._sampled = False
        if self.texts is not None:
            self.texts.forget()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.stages is None:
            self._route(batch, batch_id)
            return
        if self.follow is not None and self.follow.due():
            self.follow.hand_over(batch_id)  # raises: this micro-batch goes to the plain query, uncommitted
        if self.texts is not None and not self.texts.ready() and not self._sampled:
            self._sampled = True
            self._learn_first_messages(batch, batch_id)
        if self.texts is not None and self.texts.ready():
            try:
                self.texts.guessing = True
                try:
                    typed = self.stages(self.texts.guarded(batch))
                finally:
                    self.texts.guessing = False
                self._route(typed, batch_id)
                self._typed()
                return
            except Exception as e:  # only the guard's own error is taken here
                if SCHEMAS_CHANGED not in str(e):
                    raise
                log.info("%s batch %d: a message carries a schema the messages its types came from did not; its "
                         "write was aborted and the batch is typed from its messages", self.name, batch_id)
        if self.texts is not None:
            self.texts.forget()
        raw = batch.persist()  # read twice: the schemas of its messages, then the conversion
        try:
            self._route(self.stages(raw), batch_id)
        finally:
            raw.unpersist()
        self._typed()

    def _typed(self) -> None:
        """A micro-batch was written; if typed by texts, the next one can go to a plain query."""
        if self.follow is not None and self.texts is not None and self.texts.ready():
            self.follow.typed()

    def _learn_first_messages(self, batch: DataFrame, batch_id: int) -> None:
        """The query's first micro-batch has no previous one to be typed by: the schemas of its first
        :data:`FIRST_MESSAGES` messages are found (a small job) and recorded as if a previous batch had carried
        them, so that it too is written in one pass under the guard (no cache of the whole batch, no job over it);
        a message after them with another schema fails that write and the batch is typed from all its messages. A
        sample the stages cannot type (two schemas in a topic, tombstones only) is left to that path, which says
        what is wrong."""
        assert self.stages is not None and self.texts is not None
        try:
            self.stages(batch.limit(FIRST_MESSAGES))
        except Exception as e:  # noqa: BLE001 - only saves time: the batch's own path raises what is the batch's
            log.debug("%s batch %d: its first messages did not give its types (%s)", self.name, batch_id, e)
            self.texts.forget()
            return
        if self.texts.ready():
            log.info("%s batch %d: typed by the schemas of its first %d messages", self.name, batch_id,
                     FIRST_MESSAGES)

    def _route(self, batch: DataFrame, batch_id: int) -> None:
        if self.stages is not None and ERROR_COL not in batch.columns:
            self._write_strict(batch, batch_id)
            return
        batch = batch.persist()
        try:
            src = F.col(SOURCE_FAILED_COL) if SOURCE_FAILED_COL in batch.columns else F.lit(False)
            err = F.col(ERROR_COL).isNotNull()
            counts = batch.agg(F.count(F.lit(1)).alias("records"),
                               F.count_if(err & src).alias("source_failed"),
                               F.count_if(err & ~src).alias("failed")).collect()[0]
            good, source_bad, here_bad = split_batch(batch)
            if counts["failed"] and (self.policy is None or not self.policy.tolerate):
                msg = here_bad.select(F.col(ERROR_COL)["message"]).limit(1).collect()[0][0]
                raise RecordError(f"{msg} (errors.tolerance=none)")
            dead = 0
            if counts["source_failed"]:
                assert self.source_policy is not None
                write_dead_letters(source_bad, self.source_policy, app_id=f"src-{self.app_id}", batch_id=batch_id)
                dead += counts["source_failed"] if self.source_policy.has_dlq else 0
            if counts["failed"]:
                assert self.policy is not None
                write_dead_letters(here_bad, self.policy, app_id=self.app_id, batch_id=batch_id)
                dead += counts["failed"] if self.policy.has_dlq else 0
            # good keeps _kc_original: records the sink rejects are dead-lettered as they came
            sink_report = self.write_good(good, self.app_id, batch_id) or {}
            m = {"batch_id": batch_id, "records": counts["records"],
                 "failed": counts["failed"] + counts["source_failed"], "dead_lettered": dead,
                 "written": counts["records"] - counts["failed"] - counts["source_failed"], **sink_report}
            if sink_report.get("rejected_by_sink"):
                m["written"] -= sink_report["rejected_by_sink"]
                m["failed"] += sink_report["rejected_by_sink"]
                m["dead_lettered"] += sink_report["rejected_by_sink"] if self.policy and self.policy.has_dlq else 0
            self.report(batch_id, m)
        finally:
            batch.unpersist()


    def _write_strict(self, batch: DataFrame, batch_id: int) -> None:
        """A strict batch of records no source failed (no error column: the converters raise on the first
        record that fails, naming it): one pass, the conversion in the write itself, nothing cached but the raw
        batch, and the count observed on the write (no job of its own), as the sink's direct path does."""
        from pyspark.sql import Observation

        seen = Observation(f"kconnect-{self.name}-{batch_id}")
        report = self.write_good(batch.observe(seen, F.count(F.lit(1)).alias("records")), self.app_id,
                                 batch_id) or {}
        records = int(seen.get.get("records") or 0)
        self.report(batch_id, {"batch_id": batch_id, "records": records, "failed": 0, "dead_lettered": 0,
                                "written": records, **report})

    def report(self, batch_id: int, m: dict) -> None:
        with _metrics_lock:
            BATCH_METRICS[self.name].append(m)
        log.info("%s batch %d: %s", self.name, batch_id, m)


def start_routed(df: DataFrame, *, checkpoint: str, trigger: Mapping[str, Any] | None, query_name: str,
                 direct: Callable[[Any], Any] | None, router: BatchRouter | None) -> Any:
    """Start ``df``'s query through ``router`` (foreachBatch) or, without one, through ``direct`` (a function that
    configures the ``DataStreamWriter``)."""
    if router is not None:
        writer = df.writeStream.foreachBatch(router)
    else:
        assert direct is not None
        writer = direct(df.writeStream)
    return start_query(writer, checkpoint, trigger, query_name)


def _sink_side(df: DataFrame, p: PreparedConfig, subscribed: bool = False
               ) -> tuple[DataFrame, ErrorPolicy | None, bool]:
    source_policy = attached_policy(df)
    tolerant = p.policy.tolerate or source_policy is not None
    if tolerant:
        df = start_tolerant(df)
    df = p.transforms(p.converters(df if subscribed else _keep_read_topic(df, p)))
    return _variants_as_json(df), source_policy, tolerant


def _variants_as_json(df: DataFrame) -> DataFrame:
    """A VARIANT ``key``/``value`` (schemaless JSON, :class:`~spark_connect_bridge.converters.json.JsonConverter`)
    as its JSON text, marked with :data:`~spark_connect_bridge.core.records.VARIANT_JSON_META`, for the Python sinks:
    Spark hands them Arrow batches, where a VARIANT is its undecoded binary form. One ``to_json`` per value."""
    variants: dict[str, Any] = {c: F.to_json(F.col(c)).alias(c, metadata={VARIANT_JSON_META: "json"})
                for c in ("key", "value") if c in df.columns and isinstance(df.schema[c].dataType, VariantType)}
    return df.select(*[variants.get(c, F.col(c)) for c in df.columns]) if variants else df


def write_stream(df: DataFrame, config: Configish | PreparedConfig, *, checkpoint: str,
                 trigger: Mapping[str, Any] | None = None, query_name: str | None = None,
                 dead_letter_kafka: Mapping[str, str] | None = None, subscribed: bool = False) -> Any:
    """Start a streaming query that runs a sink connector config over ``df`` (converters → transforms → sink).

    ``trigger`` takes ``DataStreamWriter.trigger`` keywords, e.g. ``{"availableNow": True}``;
    ``dead_letter_kafka``: see :func:`prepare`. ``subscribed``: ``df`` holds only records of the sink's
    ``topics`` / ``topics.regex`` (a Kafka consumer subscribed to them), so nothing is selected by topic again.
    """
    p = prepare(config, kind="sink", dead_letter_kafka=dead_letter_kafka)
    check_python_workers(df.sparkSession)
    name = query_name or p.name
    # Always the pipeline's own value: a config that carries the key cannot turn the sink's topic selection off.
    opts = {**p.connector_options, SUBSCRIBED_OPTION: "true" if subscribed else "false"}
    stages, texts = None, None
    if df.isStreaming and p.types_from_messages(df):
        # The type comes from each micro-batch's messages: converters and transforms run per batch, through
        # the router (strict or tolerant, a record error is routed or fails the query there).
        source_policy, tolerant = attached_policy(df), True
        # A strict sink of records no source failed dead-letters nothing: no _kc_original snapshot and no error
        # column; its converters raise on the first record that fails (naming it) inside the write, which is
        # the batch's one pass over the converted records (BatchRouter._write_strict).
        out = start_tolerant(df) if p.policy.tolerate or source_policy is not None else df
        out = observe_batches(out) if subscribed else observe_batches(_keep_read_topic(out, p), p)

        # A sink that recognises a replayed batch takes each micro-batch typed by the previous one's schemas first
        texts = BatchTexts() if getattr(p.connector_class, "delivery", "") == "exactly-once" else None

        def stages(batch: DataFrame) -> DataFrame:
            return _variants_as_json(p.transforms(p.converters(batch, every_message=True, texts=texts)))
    else:
        out, source_policy, tolerant = _sink_side(df, p, subscribed)
        out = observe_batches(out) if subscribed else observe_batches(out, p)
    if not tolerant:
        app = {"kconnect.app.id": checkpoint_app_id(checkpoint)}  # made here, on the driver
        with python_writer_batches(df.sparkSession, p.connector_class):  # the query copies the session's settings
            return start_routed(out, checkpoint=checkpoint, trigger=trigger, query_name=name, router=None,
                                direct=lambda w: w.format("kconnect").options(**opts, **app))

    rejects_dir = reports_dir(checkpoint)

    def write_good(good: DataFrame, app_id: str, batch_id: int) -> dict:
        with python_writer_batches(good.sparkSession, p.connector_class):
            _without_internal(good).write.format("kconnect").options(**opts, **{
                "kconnect.app.id": app_id, "kconnect.batch.id": str(batch_id), "kconnect.rejects.dir": rejects_dir,
                "errors.tolerance": "all" if p.policy.tolerate else "none"}).mode("append").save()
        return _dead_letter_rejects(good, p, rejects_dir, app_id, batch_id)

    # A plain query while the schemas hold (engine/schema_restarts.py): strict, not a single-batch trigger, and on
    # a classic session (on Spark Connect the router runs on the server, where what it learns stays)
    follows = (texts is not None and not p.policy.tolerate and source_policy is None
               and not (trigger or {}).get("once") and hasattr(df.sparkSession, "_jsparkSession"))
    router = BatchRouter(write_good, app_id=checkpoint_app_id(checkpoint), policy=p.policy,
                         source_policy=source_policy, name=name, stages=stages, texts=texts,
                         follow=HandOverSignal() if follows else None)
    if router.follow is None:
        return start_routed(out, checkpoint=checkpoint, trigger=trigger, query_name=name, router=router, direct=None)
    assert texts is not None
    app = {"kconnect.app.id": checkpoint_app_id(checkpoint)}

    def start_router() -> Any:
        router.restart()
        return start_routed(out, checkpoint=checkpoint, trigger=trigger, query_name=name, router=router, direct=None)

    def start_plain() -> Any:
        """The plain query: typed by the texts of the router's last micro-batch, behind the same guard."""
        texts.guessing = True
        try:
            typed = stages(texts.guarded(out))
        finally:
            texts.guessing = False
        with python_writer_batches(df.sparkSession, p.connector_class):
            return start_routed(typed, checkpoint=checkpoint, trigger=trigger, query_name=name, router=None,
                                direct=lambda w: w.format("kconnect").options(**opts, **app))

    return SchemaFollowingQuery(df.sparkSession, name, router.follow, start_router, start_plain, router.report)


def _dead_letter_rejects(good: DataFrame, p: PreparedConfig, rejects_dir: str, app_id: str, batch_id: int) -> dict:
    """Dead-letter the records the sink rejected one by one (Kafka's ErrantRecordReporter, stage TASK_PUT);
    return the sink's report for the batch metrics (``retried``, ``rejected_by_sink``)."""
    import json

    path = rejects_path(rejects_dir, app_id, batch_id)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        report = json.load(f)
    rejected = report["rejected"]
    summary = {"retried": report["retries"], "rejected_by_sink": len(rejected)}
    if not rejected:
        return summary
    spark = good.sparkSession
    coords = spark.createDataFrame([(r["topic"], r["partition"], r["offset"], r["error"]) for r in rejected],
                                   "r_topic string, r_partition int, r_offset bigint, r_error string")
    cond = ((F.col("topic").eqNullSafe(F.col("r_topic"))) & (F.col("partition").eqNullSafe(F.col("r_partition")))
            & (F.col("offset").eqNullSafe(F.col("r_offset"))))
    bad = (good.drop(ERROR_COL).join(F.broadcast(coords), cond, "inner")
           .withColumn(ERROR_COL, F.struct(F.lit("TASK_PUT").alias("stage"),
                                           F.lit(p.connector_class.kafka_class or p.connector_class.__name__)
                                           .alias("class_name"),
                                           F.lit(None).cast("string").alias("alias"),
                                           F.lit("org.apache.kafka.connect.errors.ConnectException")
                                           .alias("exception_class"), F.col("r_error").alias("message")))
           .drop("r_topic", "r_partition", "r_offset", "r_error"))
    write_dead_letters(bad, p.policy, app_id=f"put-{app_id}", batch_id=batch_id)
    return summary


def write_batch(df: DataFrame, config: Configish | PreparedConfig, *, mode: str = "append") -> None:
    """Write a batch DataFrame with a sink connector config (converters → transforms → sink)."""
    p = prepare(config, kind="sink")
    check_python_workers(df.sparkSession)
    out, source_policy, tolerant = _sink_side(df, p)
    if not tolerant:
        with python_writer_batches(df.sparkSession, p.connector_class):
            out.write.format("kconnect").options(**{**p.connector_options, SUBSCRIBED_OPTION: "false"}) \
                .mode(mode).save()
        return
    app = "batch-" + uuid.uuid4().hex[:16]

    def write_good(good: DataFrame, app_id: str, batch_id: int) -> None:
        with python_writer_batches(good.sparkSession, p.connector_class):
            _without_internal(good).write.format("kconnect") \
                .options(**{**p.connector_options, SUBSCRIBED_OPTION: "false"}).mode(mode).save()
        return None

    BatchRouter(write_good, app_id=app, policy=p.policy, source_policy=source_policy, name=p.name)(out, 0)


def write_topic_store(df: DataFrame, store: Any, *, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                      query_name: str | None = None) -> Any:
    """Start a query writing a source pipeline's records into the topic store (a
    :class:`~spark_connect_bridge.engine.topic_store.TopicStore` or its directory; one table per topic), exactly
    once; failed records of a tolerant source go to its dead-letter sink."""

    if not isinstance(store, TopicStore):
        store = TopicStore(str(store))
    source_policy = attached_policy(df)
    name = query_name or (source_policy.connector if source_policy else "topic-store-writer")
    if source_policy is None:
        return store.write_stream(observe_batches(df), checkpoint=checkpoint, trigger=trigger, query_name=name)
    out = observe_batches(start_tolerant(df))

    def write_good(good: DataFrame, app_id: str, batch_id: int) -> None:
        good = _without_internal(good)
        if store.format == "delta":
            good.write.format("kconnect").options(**store.sink_options(), **{
                "kconnect.app.id": app_id, "kconnect.batch.id": str(batch_id)}).mode("append").save()
        else:
            store.write_batch(good)

    router = BatchRouter(write_good, app_id=checkpoint_app_id(checkpoint), policy=None,
                     source_policy=source_policy, name=name)
    return start_routed(out, checkpoint=checkpoint, trigger=trigger, query_name=name, router=router, direct=None)
