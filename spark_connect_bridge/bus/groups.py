"""A sink's consumer group on the Kafka bus, and its offsets in Kafka Connect's REST shape.

Spark's Kafka source assigns partitions itself and keeps its positions in the query's checkpoint. So that
``kafka-consumer-groups --describe --group connect-<name>`` and lag monitors work as with Kafka Connect, a
streaming-query listener commits each micro-batch's end positions to the group once Spark has committed the
batch (progress events follow the commit log). The group mirrors the checkpoint; it is never read back.

Kafka Connect's sink offsets (``GET/PATCH /connectors/{name}/offsets``) are
``{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}``, ``o`` being the next
offset to consume; Spark's Kafka source offsets are ``{t: {"p": o}}`` with the same meaning.

>>> to_rest({"orders": {"0": 5}})
[{'partition': {'kafka_topic': 'orders', 'kafka_partition': 0}, 'offset': {'kafka_offset': 5}}]
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import ConfigError, ConfigProblem
from .admin import commit_group_offsets

__all__ = ["track_group", "release_group", "to_rest", "merge_rest", "group_of"]

log = logging.getLogger(__name__)

_KEYS = ("kafka_topic", "kafka_partition")


@dataclass
class _Target:
    client: dict[str, str]
    group: str
    last: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_targets: dict[str, _Target] = {}
_lock = threading.Lock()
_listening: set[int] = set()


def _commit(query_id: str, end: Any) -> None:
    with _lock:
        target = _targets.get(query_id)
    if target is None or not end:
        return
    with target.lock:  # progress events of a query arrive in order; a released target commits nothing more
        if not target.closed:
            _commit_end(target, end)


def _commit_end(target: _Target, end: Any) -> None:
    if not end:
        return
    try:
        offsets = json.loads(end) if isinstance(end, str) else dict(end)
    except ValueError:
        return
    if not isinstance(offsets, dict) or offsets == target.last:
        return
    try:
        commit_group_offsets(target.client, target.group, offsets)
        target.last = offsets
    except Exception:  # lag figures only: the next batch commits again, the query must go on
        log.warning("Committing positions to consumer group %s failed", target.group, exc_info=True)


class _ProgressCallback:
    """Spark's query listener interface for Python, as a py4j callback that reads only what the commit needs from
    each progress event: the query id and its source's end positions (a few calls into the JVM).

    pyspark's ``StreamingQueryListener`` converts every event whole before the listener sees it, observed metrics
    included, through ``_jvm.PythonSQLUtils``: a class looked up by name under each of the gateway's imported
    packages, and every miss scans each jar of the classpath (measured: 11% of the JVM's CPU of a sink reading
    Kafka in 20,000-record micro-batches went there, the listener bus thread on one core for tens of ms per
    event). Events of every query of the session come here."""

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        try:
            progress = jevent.progress()
            query_id = progress.id().toString()
            with _lock:
                if query_id not in _targets:
                    return  # another query of the session: nothing more read
            sources = progress.sources()
            if len(sources):
                _commit(query_id, sources[0].endOffset())
        except Exception:  # lag figures only: never fail Spark's listener bus
            log.warning("Reading a query's progress for its consumer group failed", exc_info=True)

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _add_listener(spark: Any) -> None:
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # Spark Connect: pyspark's listener, events as the client gets them
        spark.streams.addListener(_listener_class()())
        return
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = SparkContext._gateway
    assert gateway is not None
    ensure_callback_server_started(gateway)
    wrapper = gateway.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(_ProgressCallback())
    jsession.streams().addListener(wrapper)


def _listener_class() -> type:
    from pyspark.sql.streaming import StreamingQueryListener

    class GroupCommitListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            if progress.sources:
                _commit(str(progress.id), progress.sources[0].endOffset)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return GroupCommitListener


def track_group(spark: Any, query: Any, client: Mapping[str, str], group: str) -> None:
    """Commit ``query``'s consumed positions to consumer group ``group`` after each of its micro-batches."""
    with _lock:
        _targets[str(query.id)] = _Target(dict(client), group)
        key = id(spark.sparkContext)
        if key in _listening:
            return
        _listening.add(key)
    _add_listener(spark)


def release_group(query: Any) -> None:
    """Stop committing for ``query`` once it has stopped: its last progress's end positions are committed first
    (a progress event still queued may not have arrived yet), and no event arriving later commits anything, so
    the group can be altered or deleted safely afterwards."""
    with _lock:
        target = _targets.pop(str(query.id), None)
    if target is None:
        return
    with target.lock:
        target.closed = True
        progress = query.lastProgress
        if progress is not None and progress.sources:
            _commit_end(target, progress.sources[0].endOffset)


def group_of(query: Any) -> str | None:
    """The consumer group a query commits to (None: not tracked)."""
    with _lock:
        target = _targets.get(str(query.id))
    return target.group if target else None


def to_rest(raw: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Spark Kafka source offsets as Kafka Connect's sink offsets, sorted by topic and partition."""
    out = []
    for topic, parts in sorted((raw or {}).items()):
        for part, off in sorted(parts.items(), key=lambda x: int(x[0])):
            if int(off) >= 0:
                out.append({"partition": {"kafka_topic": topic, "kafka_partition": int(part)},
                            "offset": {"kafka_offset": int(off)}})
    return out


def merge_rest(current: Mapping[str, Any] | None, entries: Sequence[Any]) -> dict[str, dict[str, int]]:
    """Apply Kafka Connect sink offset entries to Spark Kafka source offsets (``offset: null`` forgets the
    partition: the query reads it from its starting offsets again)."""
    merged = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in (current or {}).items()}
    problems = []
    for e in entries:
        part = e.get("partition") if isinstance(e, Mapping) else None
        if not isinstance(part, Mapping) or set(part) != set(_KEYS):
            problems.append(ConfigProblem("partition", 'Sink connector offsets need partitions of the form '
                                                       '{"kafka_topic": <topic>, "kafka_partition": <partition>}'))
            continue
        topic, partition = str(part["kafka_topic"]), part["kafka_partition"]
        if not isinstance(partition, int) or partition < 0:
            problems.append(ConfigProblem("kafka_partition", f"Invalid kafka_partition {partition!r} for topic "
                                                             f"{topic}: a partition number"))
            continue
        off = e.get("offset")
        if off is None:
            merged.get(topic, {}).pop(str(partition), None)
            if topic in merged and not merged[topic]:
                del merged[topic]
            continue
        value = off.get("kafka_offset") if isinstance(off, Mapping) else None
        if not isinstance(value, int) or value < 0 or set(off) != {"kafka_offset"}:
            problems.append(ConfigProblem("kafka_offset", f'Invalid offset for {topic}-{partition}: sink connector '
                                                          f'offsets are {{"kafka_offset": <offset ≥ 0>}}'))
            continue
        merged.setdefault(topic, {})[str(partition)] = value
    if problems:
        raise ConfigError(problems)
    return merged
