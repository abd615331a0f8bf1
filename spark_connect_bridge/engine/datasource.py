"""The ``kconnect`` Python data source: adapts any connector of the SPI to Spark readers and writers.

After ``pip install`` Spark discovers it by itself (the ``pyspark_kconnect`` module exports it as
``DefaultSource``); :func:`spark_connect_bridge.register` registers it explicitly (Spark Connect, notebooks).

>>> df = (spark.readStream.format("kconnect")                         # doctest: +SKIP
...       .option("connector.class", "FileStreamSource")
...       .option("file", "/tmp/in.txt").option("topic", "lines").load())
>>> (df.writeStream.format("kconnect").option("connector.class", "FileStreamSink")   # doctest: +SKIP
...    .option("file", "/tmp/out.txt").option("checkpointLocation", "/tmp/ckpt").start())

Offsets are canonical JSON maps (``connectors/offsets.py``); ``tasks.max`` bounds the input partitions of a
micro-batch; ``max.records.per.trigger`` bounds its size (admission control on pyspark ≥ 4.2, and inside
``latestOffset`` on 4.0/4.1); sinks commit once per batch id and recognise a replayed batch.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..connectors.base import CommitContext, WriteContext, checkpoint_app_id, stable_app_id
from ..connectors.factory import build_connector
from ..connectors.offsets import canonical
from ..core.fencing import before_commit
from ..core.records import arrow_schema
from ..core.retry import retries_so_far

__all__ = ["KConnectDataSource", "READ_TOPIC_COL", "SUBSCRIBED_OPTION", "read_batch_reports", "register"]

#: The topic a record was read from, before the sink's transforms (a RegexRouter may rename it): the sink's
#: ``topics`` / ``topics.regex`` select on it, as a Kafka consumer's subscription does. Set by the pipeline,
#: dropped by the writer before the connector sees the records.
READ_TOPIC_COL = "_kc_read_topic"
#: A writer option the pipeline sets when the records are already those of the sink's ``topics`` /
#: ``topics.regex`` (Spark's Kafka source subscribed to them): the writer selects nothing by topic again.
SUBSCRIBED_OPTION = "kconnect.topics.subscribed"

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the ``kconnect`` data source on ``spark`` (classic or Spark Connect session).

    Not needed where the package is installed on the Spark driver and executors (Spark discovers it); needed
    for Spark Connect clients whose server lacks the package, together with
    ``pyspark.cloudpickle.register_pickle_by_value(spark_connect_bridge)`` for the executors.
    """
    spark.dataSource.register(KConnectDataSource)


class KConnectDataSource(DataSource):
    """One data source for every connector; ``connector.class`` chooses which."""

    @classmethod
    def name(cls) -> str:
        return "kconnect"

    def __init__(self, options: MutableMapping[str, str]):
        super().__init__(options)
        self._connectors: dict[str, Any] = {}

    def _connector(self, kind: str) -> Any:
        if kind not in self._connectors:
            caller = 'spark.readStream/read.format("kconnect")' if kind == "source" else \
                'df.writeStream/write.format("kconnect")'
            self._connectors[kind] = build_connector(dict(self.options), kind=kind, stages_applied=False,
                                                     caller=caller)
        return self._connectors[kind]

    def schema(self) -> Any:
        schema = self._connector("source").schema()
        freeze_startup_heap()
        return schema

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(self._connector("source"), schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(self._connector("source"), schema)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        sink = self._connector("sink")
        sink.validate_input(_without_read_topic(schema))
        batch_id = self.options.get("kconnect.batch.id")
        freeze_startup_heap()  # the planner's daemon-forked process runs this once per micro-batch
        return _BatchWriter(sink, schema, overwrite, _app_id(self.options),
                            int(batch_id) if batch_id not in (None, "") else None,
                            self.options.get("kconnect.rejects.dir"), self._subscribed())

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        sink = self._connector("sink")
        sink.validate_input(_without_read_topic(schema))
        ckpt = self.options.get("checkpointlocation")
        reports = self.options.get("kconnect.rejects.dir") or (reports_dir(str(ckpt)) if ckpt else None)
        # Spark makes a streaming query's writer again for every micro-batch, in a reused process forked by the
        # write planner's daemon, which runs gc.collect() after each call: 30-35 ms of CPU per batch walking the
        # sink's modules (pyiceberg, pyarrow...) until they are frozen (bench/runs/2026-11-29-iceberg-commit/)
        freeze_startup_heap()
        return _StreamWriter(sink, schema, overwrite, _app_id(self.options), reports, self._subscribed())

    def _subscribed(self) -> bool:
        return str(self.options.get(SUBSCRIBED_OPTION, "")).lower() == "true"


def _app_id(options: Mapping[str, str]) -> str:
    """A stable identity for sink commits: the query's checkpoint location when Spark passes it."""

    if options.get("kconnect.app.id"):  # the driver's checkpoint_app_id (write_stream and the worker pass it)
        return str(options["kconnect.app.id"])
    ckpt = options.get("checkpointlocation")
    if ckpt:  # the planner runs in a Python worker forked in the driver JVM's directory
        return checkpoint_app_id(str(ckpt))
    name = options.get("queryname")
    return "query-" + stable_app_id(name) if name else "write-" + uuid.uuid4().hex[:16]


# ---------------------------------------------------------------------------------------------- readers
#: len(sys.modules) when the heap was last frozen; None outside a daemon-forked worker
_frozen_modules: int | None = 0


def _main_module() -> str | None:
    """The module this Python process runs as ``python -m`` (Spark's daemon, its streaming runner), if any."""
    return getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)


def freeze_startup_heap() -> None:
    """In a Python worker forked by Spark's ``pyspark.daemon``: exempt every object alive now (mostly modules:
    pyspark, pyarrow, the database clients, pandas that ADBC's DB-API imports) from cyclic garbage collection
    (``gc.freeze()``). The daemon runs a full ``gc.collect()`` after every task a reused worker ran; with those
    modules loaded it walks ~100k objects each time (50-200 ms of CPU per task and per planner call, measured), all
    of which live as long as the process. Frozen objects are still freed by reference counting; only a reference
    cycle alive at that moment would be kept. It freezes again only when modules were imported since (a sink's
    commit imports its catalog's client after the process made its writer): a few times per process at most.
    Elsewhere (a driver, a test process) it does nothing."""
    global _frozen_modules
    if _frozen_modules is None or len(sys.modules) <= _frozen_modules:
        return
    if _main_module() != "pyspark.daemon":
        _frozen_modules = None
        return
    import gc

    import pyarrow  # noqa: F401 - Spark's planners import it right after calling us (the write planner does)

    gc.freeze()
    _frozen_modules = len(sys.modules)


def _read_task(connector: Any, task: Any, schema: Any) -> Iterator[Any]:
    """Executor: yield the task's record batches, cast to exactly the schema Spark expects."""
    import pyarrow as pa

    target = arrow_schema(schema)
    for rng in task.ranges:
        for batch in connector.read_range(rng):
            freeze_startup_heap()  # the connector's client libraries are loaded by now
            if batch.num_rows == 0:
                continue
            if not batch.schema.equals(target):
                batch = pa.Table.from_batches([batch]).select(target.names).cast(target).to_batches()[0]
            yield batch


class _BatchReader(DataSourceReader):
    """``spark.read.format("kconnect")``: everything available now, from the initial positions."""

    def __init__(self, connector: Any, schema: Any):
        self.connector, self.schema = connector, schema

    def partitions(self) -> list[InputPartition]:
        start = self.connector.initial_offsets()
        end = self.connector.latest_offsets(start, None, None)
        tasks = self.connector.plan(start, end)
        freeze_startup_heap()
        return [InputPartition(t) for t in tasks] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:
            return iter(())
        return _read_task(self.connector, partition.value, self.schema)


#: The module Spark runs a Python streaming source's reader in (one process per query, on the driver's machine).
STREAMING_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
#: Seconds a stopped query's reader has to close its connections before its process ends regardless.
STOP_GRACE_S = 30.0


def _stop_on_sigterm() -> None:
    """Make a query's stop reach :meth:`_StreamReader.stop` in Spark's streaming runner process.

    ``query.stop()`` ends the runner with SIGTERM (``PythonStreamingSourceRunner.stop`` destroys the process, and
    its worker factory's stop sends a second one); the runner calls the reader's ``stop()`` only in a ``finally``
    that a default SIGTERM never reaches, so a source's connections were closed by the kernel, never by the
    source: no last flush position reported to a replication slot, no ``slot.drop.on.stop``, no queue consumer
    closed. Here the first SIGTERM raises ``SystemExit`` in the runner's main thread instead (as Ctrl-C raises
    KeyboardInterrupt): the runner unwinds through its ``finally: reader.stop()`` and exits. Later SIGTERMs are
    ignored while that stop runs, for at most :data:`STOP_GRACE_S`; then the process ends regardless. Only in
    that runner process, and only over Python's default handler.
    """
    import signal
    import threading

    if _main_module() != STREAMING_RUNNER or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def _exit(signum: int, frame: Any) -> None:
        import os

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        watchdog = threading.Timer(STOP_GRACE_S, os._exit, (128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kconnect")``. Runs in Spark's long-lived driver-side runner process; the
    executors' copies only run :meth:`read`."""

    def __init__(self, connector: Any, schema: Any):
        self.connector, self.schema = connector, schema
        connector.begin_stream()
        _stop_on_sigterm()
        self._position: dict | None = None  # last offset seen (pyspark < 4.2 passes no start)
        self._until: dict | None = None  # Trigger.AvailableNow target

    def _max_records(self, limit: Any = None) -> int | None:
        if isinstance(limit, ReadMaxRows):
            return int(limit.max_rows)
        if isinstance(limit, ReadAllAvailable):
            return None
        return self._configured_max()

    def _configured_max(self) -> int | None:
        n = self.connector.config.get("max.records.per.trigger")
        return n if n is not None else self.connector.default_max_records_per_trigger

    def getDefaultReadLimit(self) -> Any:
        n = self._configured_max()
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # The target is taken at the next latestOffset(start, ...), when the start position is known: a
        # resumed query's runner knows nothing before that, and initial_offsets() may have side effects.
        self._until_pending = True

    def initialOffset(self) -> dict:
        return canonical(self.connector.initial_offsets())

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:  # pyspark 4.0/4.1
            start = self._position if self._position is not None else self.initialOffset()
        if getattr(self, "_until_pending", False):
            self._until_pending = False
            self._until = canonical(self.connector.latest_offsets(start, None, None))
        end = canonical(self.connector.latest_offsets(start, self._max_records(limit), self._until))
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        self._position = end
        tasks = self.connector.plan(start, end)
        return [InputPartition(t) for t in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_task(self.connector, partition.value, self.schema)

    def commit(self, end: dict) -> None:
        self._position = end
        self.connector.commit(end)

    def stop(self) -> None:
        self.connector.stop()


# ---------------------------------------------------------------------------------------------- writers
@dataclass
class _Message(WriterCommitMessage):
    payload: Any
    retries: int = 0
    unmatched: dict | None = None  # topic -> records the sink's topics / topics.regex did not take


class _TopicFilter:
    """A pyarrow filter for the sink's ``topics`` / ``topics.regex``: keeps the records they take and counts the
    others per topic in :attr:`unmatched`, so they are reported, never lost in silence. It selects on the topic a
    record was read from (:data:`READ_TOPIC_COL`, when the pipeline ran the sink's transforms before) and drops
    that column."""

    def __init__(self, topics: list[str], regex: str):
        self.topics, self.regex = topics, regex
        self.unmatched: dict[Any, int] = {}

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        names = batch.schema.names
        topic = READ_TOPIC_COL if READ_TOPIC_COL in names else "topic"
        col = batch.column(topic) if topic in names else None
        if topic == READ_TOPIC_COL:
            batch = batch.drop_columns([READ_TOPIC_COL])
        if col is None or not batch.num_rows or (not self.topics and not self.regex):
            return batch
        mask = pc.fill_null(pc.is_in(col, value_set=pa.array(self.topics, type=col.type)) if self.topics else
                            pc.match_substring_regex(col, pattern=f"^(?:{self.regex})$"), False)
        if pc.all(mask).as_py():
            return batch  # the usual case (a sink reading its own topics): no copy of the batch
        for item in pc.value_counts(pc.filter(col, pc.invert(mask))).to_pylist():
            self.unmatched[item["values"]] = self.unmatched.get(item["values"], 0) + item["counts"]
        return batch.filter(mask)


def _topic_filter(config: Any, schema: Any) -> _TopicFilter | None:
    """The sink's topic filter (None: no ``topics`` / ``topics.regex`` and no :data:`READ_TOPIC_COL` to drop)."""
    topics = config.get("topics") or []
    regex = config.get("topics.regex") or ""
    if not topics and not regex and READ_TOPIC_COL not in schema.names:
        return None
    return _TopicFilter(list(topics), regex)


def _without_read_topic(schema: Any) -> Any:
    """The input schema as the connector sees it (without :data:`READ_TOPIC_COL`)."""
    return StructType([f for f in schema.fields if f.name != READ_TOPIC_COL])


def _report_unmatched(sink: Any, messages: list, batch_id: int | None) -> None:
    """Warn about the records of a batch that the sink's topics / topics.regex did not take."""
    unmatched: dict[Any, int] = {}
    for m in messages:
        for topic, n in (getattr(m, "unmatched", None) or {}).items():
            unmatched[topic] = unmatched.get(topic, 0) + n
    if unmatched:
        wanted = ",".join(sink.config.get("topics") or []) or sink.config.get("topics.regex")
        log.warning("%s: batch %s: %d record(s) not written: their topics match neither topics nor topics.regex "
                    "(%s) of this sink: %s", sink.name, batch_id, sum(unmatched.values()), wanted,
                    ", ".join(f"{t} ({n})" for t, n in sorted(unmatched.items(), key=lambda kv: str(kv[0]))))


class _WriteMixin:
    """What the batch and the streaming writer share; each sets these attributes."""

    sink: Any
    app_id: str
    overwrite: bool
    rejects_dir: str | None
    input_schema: Any  # the DataFrame's schema, READ_TOPIC_COL included when the pipeline set it
    subscribed: bool  # the records are only those of the sink's topics (SUBSCRIBED_OPTION)

    def _write_batches(self, batches: Iterator[Any]) -> _Message:
        from pyspark import TaskContext

        tc = TaskContext.get()
        bid = getattr(self, "batch_id", None)
        if bid is None and tc is not None:
            bid = tc.getLocalProperty("streaming.sql.batchId")
        ctx = WriteContext(self.app_id, int(bid) if bid is not None else None,
                           tc.partitionId() if tc else 0, tc.attemptNumber() if tc else 0)

        keep = None if self.subscribed else _topic_filter(self.sink.config, self.input_schema)
        if keep is not None:
            batches = (keep(b) for b in batches)
        before = retries_so_far()
        payload = self.sink.write(batches, ctx)
        freeze_startup_heap()  # the sink's client libraries are loaded by now
        return _Message(payload, retries_so_far() - before, keep.unmatched if keep is not None else None)

    def _commit_and_report(self, messages: list, batch_id: int | None) -> None:
        before = retries_so_far()
        _report_unmatched(self.sink, messages, batch_id)
        before_commit(self.app_id)  # a distributed worker that lost this connector's lease stops here
        self.sink.commit(self._payloads(messages), CommitContext(self.app_id, batch_id, self.overwrite))
        if self.rejects_dir:
            retries = retries_so_far() - before + sum(m.retries for m in messages if m is not None)
            write_batch_report(self.rejects_dir, self.app_id, batch_id, getattr(self.sink, "last_rejected", ()),
                               retries)
        freeze_startup_heap()

    @staticmethod
    def _payloads(messages: Any) -> list[Any]:
        return [m.payload for m in messages if m is not None and m.payload is not None]


class _BatchWriter(_WriteMixin, DataSourceArrowWriter):
    """A batch write; given ``kconnect.batch.id`` (our foreachBatch router sets it), it commits like a
    micro-batch of that id, so a replayed batch is recognised."""

    def __init__(self, sink: Any, schema: Any, overwrite: bool, app_id: str, batch_id: int | None = None,
                 rejects_dir: str | None = None, subscribed: bool = False):
        self.sink, self.input_schema, self.overwrite, self.app_id = sink, schema, overwrite, app_id
        self.batch_id, self.rejects_dir, self.subscribed = batch_id, rejects_dir, subscribed

    def write(self, iterator: Iterator[Any]) -> _Message:
        return self._write_batches(iterator)

    def commit(self, messages: list) -> None:
        self._commit_and_report(messages, self.batch_id)

    def abort(self, messages: list) -> None:
        self.sink.abort(self._payloads(messages), CommitContext(self.app_id, self.batch_id, self.overwrite))


class _StreamWriter(_WriteMixin, DataSourceStreamArrowWriter):
    def __init__(self, sink: Any, schema: Any, overwrite: bool, app_id: str, rejects_dir: str | None = None,
                 subscribed: bool = False):
        self.sink, self.input_schema, self.overwrite, self.app_id = sink, schema, overwrite, app_id
        self.rejects_dir, self.subscribed = rejects_dir, subscribed

    def write(self, iterator: Iterator[Any]) -> _Message:
        return self._write_batches(iterator)

    def commit(self, messages: list, batchId: int) -> None:
        self._commit_and_report(messages, batchId)

    def abort(self, messages: list, batchId: int) -> None:
        self.sink.abort(self._payloads(messages), CommitContext(self.app_id, batchId, self.overwrite))


def reports_dir(checkpoint: str) -> str:
    """Where a streaming sink's per-batch reports (rejected records, retries) live: beside a local checkpoint.

    The reports are written by the sink's commit and read by the driver, both on the driver's host, with local file
    calls: a checkpoint on a file system URI (``s3a://``, ``hdfs://``, ...) keeps them in a local directory named
    after it under the driver's temporary directory (``file://`` URIs are local paths)."""
    import hashlib
    import os
    import tempfile

    from ..core.locations import is_remote

    if is_remote(checkpoint):
        name = hashlib.sha256(checkpoint.strip().rstrip("/").encode()).hexdigest()[:16]
        return os.path.join(tempfile.gettempdir(), "kconnect-reports", name)
    local = checkpoint.strip()
    if local.lower().startswith("file:"):
        from urllib.parse import unquote, urlparse

        local = unquote(urlparse(local).path)
    return os.path.join(os.path.abspath(local), "kconnect-reports")


def read_batch_reports(checkpoint: str) -> list[dict]:
    """The per-batch sink reports of a query: ``{"batch_id", "retries", "rejected": [...]}``, by batch id."""
    import glob
    import json
    import os

    out = []
    for path in glob.glob(os.path.join(reports_dir(checkpoint), "*.json")):
        with open(path) as f:
            report = json.load(f)
        out.append({"batch_id": report.get("batch_id"), **report})
    return sorted(out, key=lambda r: (r["batch_id"] is None, r["batch_id"] or 0))


def rejects_path(directory: str, app_id: str, batch_id: int | None) -> str:
    import os

    return os.path.join(directory, f"{app_id}-{batch_id if batch_id is not None else 'batch'}.json")


def write_batch_report(directory: str, app_id: str, batch_id: int | None, rejected: Any, retries: int) -> None:
    """Record what the sink rejected in this batch, and how often it retried (read by the pipeline's router)."""
    import json
    import os

    os.makedirs(directory, exist_ok=True)
    path = rejects_path(directory, app_id, batch_id)
    rows = [{"topic": r.topic, "partition": r.partition, "offset": r.offset, "error": str(r.error)}
            for r in rejected]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"batch_id": batch_id, "rejected": rows, "retries": retries}, f)
    os.replace(tmp, path)
