"""The connector SPI: what a source or sink connector implements to run as the ``kconnect`` data source.

A **source connector** (Kafka's SourceConnector + SourceTask) declares its config, the record schema it emits,
its source partitions and their positions; Spark's micro-batch engine does the rest:

* driver, once per trigger: :meth:`SourceConnector.latest_offsets` (bounded by admission control),
  :meth:`SourceConnector.plan` (ranges grouped into ``tasks.max`` Spark input partitions) and, after Spark has
  committed the batch, :meth:`SourceConnector.commit` (acknowledge upstream);
* executors: :meth:`SourceConnector.read_range` yields Arrow record batches for one partition's range
  ``(start, end]``. It is a pure function of its arguments: a replayed batch reads the same records.

A **sink connector** (SinkConnector + SinkTask) writes Arrow batches on executors
(:meth:`SinkConnector.write`, returning a picklable commit message) and makes a micro-batch visible on the
driver in :meth:`SinkConnector.commit`, which receives the batch id and a stable application id so that a
replayed batch is recognised.

Connector objects are pickled to executors: keep only the parsed :class:`~spark_connect_bridge.config.Config`
and plain values on them; open clients inside the methods.

A minimal source:

>>> class Counter(SourceConnector):                        # doctest: +SKIP
...     config_def = ConfigDef().define("topic", Type.STRING)
...     def schema(self): return record_schema(NullType(), LongType())
...     def initial_offsets(self): return {partition_key({"n": 0}): {"i": 0}}
...     def latest_offsets(self, start, max_records, until): ...
...     def read_range(self, partition, start, end): ...
"""

from __future__ import annotations

import abc
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..config import Config, ConfigDef
from ..config.common import COMMON, SINK, SOURCE
from ..errors import ConfigProblem
from ..version import __version__
from .offsets import Offsets, parse_partition_key

__all__ = ["SourceConnector", "SinkConnector", "ReadRange", "ReadTask", "WriteContext", "CommitContext",
           "connector_config_def"]


@dataclass(frozen=True)
class ReadRange:
    """One source partition's range of a micro-batch: records after ``start`` up to and including ``end``.

    ``start`` is ``None`` when the partition is new in this batch (read from its beginning)."""

    partition: dict[str, Any]
    start: dict[str, Any] | None
    end: dict[str, Any]


@dataclass(frozen=True)
class ReadTask:
    """What one Spark input partition reads: a list of ranges (pickled to an executor)."""

    index: int
    ranges: tuple[ReadRange, ...]


@dataclass(frozen=True)
class WriteContext:
    """Executor-side context of a sink write."""

    app_id: str
    batch_id: int | None
    partition_id: int
    attempt: int


@dataclass(frozen=True)
class CommitContext:
    """Driver-side context of a sink commit: ``batch_id`` is None for a batch (non-streaming) write."""

    app_id: str
    batch_id: int | None
    overwrite: bool = False


class _Plugin:
    plugin_type: ClassVar[str]
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: The Java class this connector stands in for (for REST/plugin listings), if any.
    kafka_class: ClassVar[str | None] = None
    #: Key prefixes this plugin reads itself (e.g. the Iceberg sink's ``iceberg.catalog.``), as the original does.
    key_prefixes: ClassVar[tuple[str, ...]] = ()
    #: True for a connector that learns the files it reads and writes at run time (an Iceberg catalog's table
    #: locations): a worker hands it its connector.allowed.paths (``kconnect.allowed.paths``) to check them there.
    path_policy_at_run_time: ClassVar[bool] = False

    def __init__(self, config: Config, *, name: str):
        self.config = config
        self.name = name

    @classmethod
    def version(cls) -> str:
        return __version__

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, config={self.config!r})"


class SourceConnector(_Plugin, abc.ABC):
    """Base of source connectors. Subclasses declare ``config_def`` and implement the abstract methods."""

    plugin_type = "source"
    #: Bound of one micro-batch when neither ``max.records.per.trigger`` nor the trigger sets one.
    default_max_records_per_trigger: ClassVar[int | None] = None
    #: Kafka's alterOffsets contract: the keys of this connector's source partitions and positions, each with
    #: the type its value must have (``int`` values must be non-negative). ``PATCH /connectors/{c}/offsets``
    #: refuses anything else with a 400 naming the key. ``None``: not declared (any map of primitives).
    partition_fields: ClassVar[dict[str, type] | None] = None
    offset_fields: ClassVar[dict[str, type] | None] = None

    @classmethod
    def offset_problems(cls, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        """What is wrong with one ``{"partition", "offset"}`` entry of an offsets change (empty: nothing)."""
        out: list[str] = []
        for what, given, fields in (("partition", partition, cls.partition_fields),
                                    ("offset", offset, cls.offset_fields)):
            if fields is None or given is None:
                continue
            for key in sorted(set(given) - set(fields)):
                out.append(f"Unknown {what} key {key!r} for {cls.__name__} (its {what} keys: "
                           f"{', '.join(sorted(fields))})")
            for key, typ in fields.items():
                if key not in given:
                    out.append(f"The {what} needs the key {key!r}")
                    continue
                value = given[key]
                if typ is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                    out.append(f"Invalid value {value!r} for {what} key {key!r}: a non-negative integer")
                elif typ is not int and not isinstance(value, typ):
                    out.append(f"Invalid value {value!r} for {what} key {key!r}: a {typ.__name__}")
        return out

    # -- driver ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def schema(self) -> Any:
        """The Spark record schema (:func:`spark_connect_bridge.core.records.record_schema`) this source emits."""

    @abc.abstractmethod
    def initial_offsets(self) -> Offsets:
        """Positions before the first record (what a new query starts from)."""

    @abc.abstractmethod
    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        """Positions up to which records are available now: at most ``max_records`` past ``start``
        (``None``: no bound) and never beyond ``until`` (the Trigger.AvailableNow target, or ``None``).
        Called on every trigger: keep it cheap."""

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        """Split ``(start, end]`` into at most ``tasks.max`` read tasks (round-robin over changed partitions)."""
        ranges = [ReadRange(parse_partition_key(k), start.get(k), v) for k, v in end.items()
                  if start.get(k) != v]
        n = max(1, min(self.config.get("tasks.max", 1), len(ranges)))
        groups: list[list[ReadRange]] = [[] for _ in range(n)]
        for i, r in enumerate(ranges):
            groups[i % n].append(r)
        return [ReadTask(i, tuple(g)) for i, g in enumerate(groups) if g]

    def begin_stream(self) -> None:
        """This driver-side instance serves a streaming query: it may keep a connection open across
        micro-batches (a batch read never calls this). Called where Spark makes the stream reader."""

    def commit(self, end: Offsets) -> None:
        """Acknowledge upstream everything up to ``end``: called after Spark committed the batch."""

    def stop(self) -> None:
        """Release driver resources: runs when the query stops (in Spark's streaming runner, a moment after
        ``query.stop()`` returned: engine/datasource.py ``_stop_on_sigterm``), never on a crash or kill -9, so
        correctness never depends on it."""

    def lag(self, current: Offsets) -> int | None:
        """Records available beyond ``current``, where the source knows it (for status and progress)."""
        return None

    # -- executor ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        """Yield ``pyarrow.RecordBatch`` objects for the records of ``rng``, deterministically."""


class SinkConnector(_Plugin, abc.ABC):
    """Base of sink connectors."""

    plugin_type = "sink"
    #: How the sink delivers: "exactly-once" (replayed batches recognised) or "at-least-once".
    delivery: ClassVar[str] = "at-least-once"
    #: The writer holds its whole task's records before it writes them (whole objects): Spark's per-row Arrow
    #: batch size check buys no memory bound, so the engine turns it off for its writes
    #: (:mod:`~spark_connect_bridge.engine.arrow_hand_off`).
    holds_task: ClassVar[bool] = False

    def validate_input(self, schema: Any) -> None:
        """Driver: check the input DataFrame schema before any data moves (raise ConfigError/DataError)."""

    @classmethod
    def input_frame(cls, df: Any, settings: Any) -> Any:
        """Driver: the records as this sink reads them, as Column expressions over ``df`` (after the converters and
        transforms), e.g. a sink that takes Debezium change events natively. Default: ``df`` as it is."""
        return df

    @classmethod
    def schemaless_problems(cls, settings: Any, schemaless: Mapping[str, str]) -> list[ConfigProblem]:
        """Config validation: what stops this sink from taking schemaless records (``schemaless``: column ->
        the converter key that reads it without a schema, e.g. ``value`` -> ``value.converter.schemas.enable``).
        Default: none (the sink takes a VARIANT)."""
        return []

    @abc.abstractmethod
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Any:
        """Executor: write Arrow record batches; return a picklable commit message (or None)."""

    @abc.abstractmethod
    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Driver: make the batch visible atomically; skip it when ``ctx.batch_id`` was already committed.

        Records the target rejected one by one (a constraint violation: Kafka's ErrantRecordReporter) are left
        in :attr:`last_rejected` under ``errors.tolerance=all``; the pipeline dead-letters them."""

    #: Set by :meth:`commit`: records the target rejected, each with ``topic``, ``partition``, ``offset`` and
    #: ``error`` attributes.
    last_rejected: Sequence[Any] = ()

    def abort(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Driver: discard what :meth:`write` staged."""


def connector_config_def(cls: type[Any]) -> ConfigDef:
    """The full declaration of a connector class: its own keys, then the common ones of its kind."""
    kind = SOURCE if getattr(cls, "plugin_type", None) == "source" else SINK
    return cls.config_def.merge(COMMON, kind)


def stable_app_id(*parts: str) -> str:
    """A short stable id (e.g. of a checkpoint location) for sink transaction ids."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def checkpoint_app_id(checkpoint: str) -> str:
    """The application id of a streaming query's sink commits, derived from its checkpoint location: the same
    whichever path starts the query (the kconnect data source, ``write_stream``, either Delta engine), so a table or
    database keeps one transaction id per checkpoint. A local path is made absolute first; a URI loses a trailing
    ``/``."""
    location = str(checkpoint)
    if "://" not in location and not location.startswith("file:"):
        location = os.path.abspath(location)
    return "ckpt-" + stable_app_id(location.rstrip("/"))


