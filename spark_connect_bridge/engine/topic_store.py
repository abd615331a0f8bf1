"""The topic store: Delta tables in place of Kafka topics between a source connector and sink connectors.

A source's records (after its converters: typically binary ``key``/``value``, plus ``topic``, ``partition``,
``offset``, ``timestamp``, ``headers``) are written to one Delta table per topic, ``<directory>/<topic>``, exactly
once (the Delta sink in ``record`` mode, one app transaction per table and checkpoint). A sink reads the topics
it subscribes to (``topics`` / ``topics.regex``) as a stream of the same records; every reading query has its own
checkpoint and so its own progress, and a new checkpoint replays the topics from the start, as a new consumer
group does with Kafka. The dead-letter queue of a connector is a topic of the store too.

Where the ``deltalake`` library is missing, or the directory is in an object store (``s3a://bucket/prefix``: Spark's
file sink reaches it through Hadoop's S3A connector), the store is Parquet written by Spark's exactly-once file
sink (``<directory>/_parquet``, partitioned by topic), read back with Spark's file source. Its dead-letter topics
live beside it (``<directory>/_dead_letters/topic=<name>/``): one Parquet object per (query, micro-batch), written
whole from the driver and written again under the same name when Spark replays the batch, so a record is
dead-lettered once (:meth:`TopicStore.write_dead_letters`); Spark's file sink would add a replayed batch's files
under new names, and its own log is the streaming query's, not the dead letters'.

>>> store = TopicStore("/data/topics")                                              # doctest: +SKIP
>>> q1 = store.write_stream(source_df, checkpoint="/ckpt/source")                   # doctest: +SKIP
>>> orders = store.read_stream(spark, topics=["orders"])                             # doctest: +SKIP
>>> q2 = orders.writeStream.format("kconnect").options(**sink_cfg).option("checkpointLocation", "/ckpt/s1").start()
...                                                                                 # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..connectors.delta_files import latest_version, require_deltalake
from ..core.locations import Locations, is_remote
from ..core.records import RECORD_COLUMNS, record_schema
from ..errors import ConfigError, ConfigProblem, ConnectError
from .queries import start_query

__all__ = ["TopicStore"]

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
_PARQUET_DIR = "_parquet"
_DEAD_LETTERS_DIR = "_dead_letters"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
FORMATS = ("auto", "delta", "parquet")


def _has_deltalake() -> bool:
    try:
        import deltalake  # noqa: F401
    except ImportError:
        return False
    return True


class TopicStore:
    """One table per topic under ``directory``.

    ``format`` is ``delta`` (deltalake tables), ``parquet`` (Spark's file sink; the fallback without deltalake)
    or ``auto`` (delta when deltalake is installed).
    """

    def __init__(self, directory: str, *, format: str = "auto", files: Locations | None = None):
        if format not in FORMATS:
            raise ConfigError([ConfigProblem("topic.store.format", f"Invalid value {format} for configuration "
                                                                   f"topic.store.format: one of "
                                                                   f"{', '.join(FORMATS)}")])
        self.files = files or Locations()
        remote = is_remote(directory)
        self.directory = directory.rstrip("/") if remote else os.path.abspath(directory)
        if format == "auto":  # in a bucket: Spark's file sink reaches it through Hadoop's S3A, deltalake's files not
            format = "delta" if _has_deltalake() and not remote else "parquet"
        self.format = format

    def __repr__(self) -> str:
        return f"TopicStore({self.directory!r}, format={self.format!r})"

    # -- layout -------------------------------------------------------------------------------------
    def table_path(self, topic: str) -> str:
        """Where ``topic``'s records live."""
        _check_topic(topic)
        if self.format == "parquet":
            return self.files.join(self.directory, _PARQUET_DIR, f"topic={topic}")
        return self.files.join(self.directory, topic)

    def dead_letter_table(self, name: str) -> str:
        """The table of the dead-letter topic ``name`` (``errors.deadletterqueue.topic.name``): a topic of the
        store, written like any other, readable with :meth:`read_stream` (a Parquet store: its own directory,
        readable with :meth:`read_batch`)."""
        if self.format == "parquet":
            _check_topic(name)
            return self.files.join(self.directory, _DEAD_LETTERS_DIR, f"topic={name}")
        return self.table_path(name)

    def write_dead_letters(self, records: Any, *, app_id: str, batch_id: int) -> None:
        """Append the dead-letter records of one micro-batch of query ``app_id`` exactly once.

        A Delta store commits them with the app transaction ``(app_id, batch_id)``. A Parquet store writes one
        object per topic, ``<dead_letter_table>/<app_id>-<batch_id>.parquet``, whole, from the driver (the failed
        records of one batch): a replayed batch writes the same object again, in a bucket as on a disk."""
        _check_records(records)
        if self.format != "parquet":
            records.write.format("kconnect").options(**self.sink_options(), **{
                "kconnect.app.id": app_id, "kconnect.batch.id": str(batch_id)}).mode("append").save()
            return
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyarrow import BufferOutputStream

        data = records.toArrow()
        if data.num_rows == 0:
            return
        name = f"{_NAME_UNSAFE.sub('_', app_id)}-{int(batch_id):020d}.parquet"
        for topic in sorted(pc.unique(data.column("topic")).to_pylist()):
            part = data.filter(pc.equal(data.column("topic"), topic)).drop_columns(["topic"])
            sink = BufferOutputStream()
            pq.write_table(part, sink)
            self.files.write_bytes(self.files.join(self.dead_letter_table(topic), name), sink.getvalue().to_pybytes())

    def topics(self) -> list[str]:
        """The topics that hold at least one committed write, sorted."""
        if self.format == "parquet":
            root = self.files.join(self.directory, _PARQUET_DIR)
            if not self._parquet_committed(root):
                return []
            return sorted(n[len("topic="):] for n in self.files.names(root) if n.startswith("topic="))

        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        return [n for n in names if not n.startswith(("_", ".")) and
                latest_version(os.path.join(self.directory, n)) is not None]

    def _parquet_committed(self, root: str) -> bool:
        """Whether Spark's file sink has committed a batch here. Its tasks write their files in place before the
        commit (in a bucket, where no directory exists before its first object, too), and its source reads only
        committed ones: a topic directory alone does not make a readable topic yet. A store written in batches
        (no ``_spark_metadata`` directory) is committed as soon as it has files."""
        log_dir = self.files.join(root, "_spark_metadata")
        if not is_remote(root) and not os.path.isdir(log_dir):
            return True
        return any(n.isdigit() or n.endswith(".compact") for n in self.files.names(log_dir))

    # -- writing ------------------------------------------------------------------------------------
    def write_stream(self, df: Any, *, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                     query_name: str | None = None) -> Any:
        """Start a query that appends each record of ``df`` to its topic's table, exactly once.

        ``df`` is a record DataFrame (``topic`` and ``value`` columns; ``key``, ``partition``, ``offset``,
        ``timestamp``, ``headers`` as the source has them). ``trigger`` is passed to
        ``DataStreamWriter.trigger`` (e.g. ``{"availableNow": True}``).
        """
        _check_records(df)
        self.files.makedirs(self.directory)
        if self.format == "parquet":
            writer = (df.writeStream.format("parquet").partitionBy("topic")
                      .option("path", self.files.join(self.directory, _PARQUET_DIR)))
        else:
            require_deltalake()
            writer = df.writeStream.format("kconnect").options(**self.sink_options())
        return start_query(writer, checkpoint, trigger, query_name)

    def write_batch(self, df: Any) -> None:
        """Append the records of a batch DataFrame (e.g. dead-letter records) to their topics' tables."""
        _check_records(df)
        if self.format == "parquet":
            df.write.mode("append").partitionBy("topic").parquet(self.files.join(self.directory, _PARQUET_DIR))
        else:
            df.write.format("kconnect").options(**self.sink_options()).mode("append").save()

    def sink_options(self) -> dict[str, str]:
        """The Delta sink config that writes into this store (``format("kconnect")`` options)."""
        return {"connector.class": "spark_connect_bridge.connectors.delta.DeltaSinkConnector",
                "name": "topic-store", "topics.dir": self.directory, "delta.table.columns": "record",
                "delta.write.mode": "append"}

    # -- reading ------------------------------------------------------------------------------------
    def source_options(self, topics: Sequence[str] | None = None, topics_regex: str | None = None,
                       max_records_per_trigger: int | None = None) -> dict[str, str]:
        """The Delta source config that reads topics of this store (``format("kconnect")`` options)."""
        opts = {"connector.class": "spark_connect_bridge.connectors.delta.DeltaSourceConnector",
                "name": "topic-store-reader", "topics.dir": self.directory}
        if topics:
            for t in topics:
                _check_topic(t)
            opts["topics"] = ",".join(topics)
        if topics_regex:
            opts["topics.regex"] = topics_regex
        if max_records_per_trigger:
            opts["max.records.per.trigger"] = str(int(max_records_per_trigger))
        return opts

    def read_stream(self, spark: Any = None, topics: Sequence[str] | None = None, topics_regex: str | None = None,
                    *, max_records_per_trigger: int | None = None) -> Any:
        """A streaming DataFrame of the records of ``topics`` (or the topics matching ``topics_regex``; every
        topic when both are None). Topics created later are picked up. Progress lives in the checkpoint of the
        query that consumes the DataFrame."""
        spark = spark or _active_session()
        if topics and topics_regex:
            raise ConfigError([ConfigProblem("topics", "topics and topics.regex are mutually exclusive.")])
        if self.format == "parquet":
            df = (spark.readStream.schema(self._parquet_schema(spark))
                  .option("basePath", self.files.join(self.directory, _PARQUET_DIR))
                  .parquet(self.files.join(self.directory, _PARQUET_DIR)))
            return self._select(df, topics, topics_regex)
        return (spark.readStream.format("kconnect")
                .options(**self.source_options(topics, topics_regex, max_records_per_trigger)).load())

    def read_batch(self, spark: Any = None, topics: Sequence[str] | None = None,
                   topics_regex: str | None = None) -> Any:
        """The records of ``topics`` committed so far, as a batch DataFrame."""
        spark = spark or _active_session()
        if self.format == "parquet":
            root = self.files.join(self.directory, _PARQUET_DIR)
            schema = self._parquet_schema(spark)
            df = spark.read.schema(schema).parquet(root) if self.topics() else spark.createDataFrame([], schema)
            dead = self.files.join(self.directory, _DEAD_LETTERS_DIR)
            if self.files.names(dead):  # the dead-letter topics (see write_dead_letters)
                df = df.unionByName(spark.read.schema(schema).option("basePath", dead).parquet(dead))
            return self._select(df, topics, topics_regex)
        return spark.read.format("kconnect").options(**self.source_options(topics, topics_regex)).load()

    def _parquet_schema(self, spark: Any) -> Any:
        from pyspark.sql.types import StructType

        root = self.files.join(self.directory, _PARQUET_DIR)
        if not self.topics():
            return record_schema()
        inferred = spark.read.option("basePath", root).parquet(root).schema
        return StructType([inferred[c] for c in RECORD_COLUMNS if c in inferred.fieldNames()])

    @staticmethod
    def _select(df: Any, topics: Sequence[str] | None, topics_regex: str | None) -> Any:
        from pyspark.sql import functions as F

        if topics:
            df = df.filter(F.col("topic").isin(list(topics)))
        elif topics_regex:
            df = df.filter(F.col("topic").rlike(f"^(?:{topics_regex})$"))
        return df.select(*[c for c in RECORD_COLUMNS if c in df.columns])


def _check_topic(topic: str) -> None:
    if not isinstance(topic, str) or not _TOPIC_RE.match(topic) or topic in (".", "..") or topic.startswith("_"):
        raise ConfigError([ConfigProblem("topic", f"Invalid topic {topic!r}: a topic in the topic store is made of "
                                                  f"letters, digits, '.', '_' and '-' and does not start with '_'")])


def _check_records(df: Any) -> None:
    if "topic" not in df.columns or "value" not in df.columns:
        raise ConnectError(f"The topic store holds records: the DataFrame needs 'topic' and 'value' columns "
                           f"(it has {df.columns})")


def session_locations(spark: Any) -> Locations:
    """The files a Spark session reaches, with its S3A settings: the ``fs.s3a.*`` keys of its Hadoop configuration
    (``spark.hadoop.fs.s3a.*`` and any set since), or under Spark Connect the session's ``spark.hadoop.fs.s3a.*``."""
    try:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    except (AttributeError, NotImplementedError):  # Spark Connect: no SparkContext on the client
        return Locations({k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.hadoop.fs.s3a.")})
    return Locations({f"fs.s3a.{k}": v for k, v in dict(hadoop.getPropsWithPrefix("fs.s3a.")).items()})


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise ConnectError("No active SparkSession: pass spark= to the topic store")
    return spark
