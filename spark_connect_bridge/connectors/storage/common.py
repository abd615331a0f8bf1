"""The keys of Confluent's storage-common (``StorageCommonConfig``, ``PartitionerConfig``,
``StorageSinkConnectorConfig``) that every storage sink shares, declared once, and the writer they drive: records of a
Spark task -> objects.

>>> STORAGE_COMMON.parse({"format.class": "io.confluent.connect.s3.format.json.JsonFormat",
...                       "flush.size": "3"}).topics_dir
'topics'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Lambda, Range, Type
from ...errors import ConfigError, ConfigProblem, ConnectError, DataError
from .formats import Encoded, Format
from .layout import object_key, plan_chunks
from .partitioners import PARTITIONERS, Partitioner

__all__ = ["ArrowStore", "STORAGE_COMMON", "StorageLayout", "View", "short_class", "write_objects", "Written"]

log = logging.getLogger(__name__)

_PARTITIONER_PREFIX = "io.confluent.connect.storage.partitioner."


def short_class(value: str) -> str:
    """The simple name of a class name (``io.confluent...JsonFormat`` -> ``JsonFormat``)."""
    return str(value).rsplit(".", 1)[-1]


def _known_partitioner(value: Any) -> str | None:
    if short_class(value) in PARTITIONERS and (value.startswith(_PARTITIONER_PREFIX) or "." not in value):
        return None
    return "one of " + ", ".join(_PARTITIONER_PREFIX + p for p in PARTITIONERS)


_GROUP = "Storage"
STORAGE_COMMON = (
    ConfigDef()
    .define("format.class", Type.CLASS, validator=None, importance=Importance.HIGH, group=_GROUP,
            doc="The format of the objects: JsonFormat, AvroFormat, ParquetFormat or ByteArrayFormat (the "
                "connector's own package, or the simple name).")
    .define("flush.size", Type.INT, validator=Range.at_least(1), importance=Importance.HIGH, group=_GROUP,
            doc="Records written to the objects of one Kafka partition before they are committed.")
    .define("rotate.interval.ms", Type.LONG, -1, Range.at_least(-1), Importance.HIGH, group=_GROUP,
            doc="The time span of record times (the partitioner's timestamp.extractor) in one object: a record this "
                "long after the first record of the open objects commits them first; so does a change of "
                "directory. Time-based partitioners only. -1: off.")
    .define("rotate.schedule.interval.ms", Type.LONG, -1, Range.at_least(-1), Importance.MEDIUM, group=_GROUP,
            doc="Wall-clock rotation. Here no object stays open past a micro-batch: a trigger interval at or "
                "under this value gives the same bound. Accepted; -1: off.")
    .define("topics.dir", Type.STRING, "topics", importance=Importance.HIGH, group=_GROUP,
            doc="The top-level directory (prefix) of the objects.")
    .define("directory.delim", Type.STRING, "/", importance=Importance.MEDIUM, group=_GROUP,
            doc="The directory delimiter of object names.")
    .define("file.delim", Type.STRING, "+", importance=Importance.MEDIUM, group=_GROUP,
            doc="The delimiter between topic, partition and start offset in file names.")
    .define("filename.offset.zero.pad.width", Type.INT, 10, Range.at_least(0), Importance.LOW, group=_GROUP,
            doc="Width to zero-pad the start offset of file names to.")
    .define("schema.compatibility", Type.STRING, "NONE",
            CaseInsensitiveValidString("NONE", "BACKWARD", "FORWARD", "FULL"), Importance.LOW, group=_GROUP,
            doc="Schema evolution across objects. Here each micro-batch has one Spark schema: NONE only.")
    .define("schema.cache.size", Type.INT, 1000, Range.at_least(0), Importance.LOW, group=_GROUP,
            doc="Accepted (Confluent's AvroData cache); no effect here.")
    .define("retry.backoff.ms", Type.LONG, 5000, Range.at_least(0), Importance.LOW, group=_GROUP,
            doc="Accepted; the storage client's retries are s3.part.retries and s3.retry.backoff.ms.")
    .define("shutdown.timeout.ms", Type.LONG, 3000, Range.at_least(0), Importance.LOW, group=_GROUP,
            doc="Accepted; no effect (nothing stays open past a micro-batch).")
    .define("avro.codec", Type.STRING, "null", importance=Importance.LOW, group=_GROUP,
            doc="The Avro container's codec (AvroFormat).")
    # PartitionerConfig
    .define("partitioner.class", Type.CLASS, _PARTITIONER_PREFIX + "DefaultPartitioner",
            Lambda(_known_partitioner, "a storage-common partitioner"), Importance.HIGH, group="Partitioner",
            doc="DefaultPartitioner (partition=<p>), FieldPartitioner, TimeBasedPartitioner, DailyPartitioner or "
                "HourlyPartitioner.")
    .define("partition.field.name", Type.LIST, [], importance=Importance.MEDIUM, group="Partitioner",
            doc="FieldPartitioner: the value fields of the directory (dotted for a nested field).")
    .define("partition.duration.ms", Type.LONG, -1, Range.at_least(-1), Importance.MEDIUM, group="Partitioner",
            doc="TimeBasedPartitioner: the time span of one directory.")
    .define("path.format", Type.STRING, "", importance=Importance.MEDIUM, group="Partitioner",
            doc="TimeBasedPartitioner: the Joda pattern of the directory ('year'=YYYY/'month'=MM/'day'=dd/'hour'=HH).")
    .define("locale", Type.STRING, "", importance=Importance.MEDIUM, group="Partitioner",
            doc="Time-based partitioners: the locale of path.format (required, as in Confluent's; month and day "
                "names are English here).")
    .define("timezone", Type.STRING, "", importance=Importance.MEDIUM, group="Partitioner",
            doc="Time-based partitioners: the zone of the directories (an IANA id such as UTC).")
    .define("timestamp.extractor", Type.STRING, "Wallclock",
            CaseInsensitiveValidString("Wallclock", "Record", "RecordField"), Importance.MEDIUM, group="Partitioner",
            doc="Time-based partitioners: a record's time: Wallclock (the write), Record (the Kafka timestamp) or "
                "RecordField (timestamp.field of the value).")
    .define("timestamp.field", Type.STRING, "timestamp", importance=Importance.MEDIUM, group="Partitioner",
            doc="RecordField: the value field holding the time (epoch ms, a timestamp, or ISO-8601 text).")
)


#: The header view's type: Connect's ``HeaderRecordView`` writes each header as ``{key, value}`` strings.
HEADER_VIEW_TYPE = pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False),
                                       pa.field("value", pa.string(), nullable=False)]))


@dataclass(frozen=True)
class View:
    """A second object beside each value object (``store.kafka.keys`` / ``store.kafka.headers``): the records'
    ``column`` in ``format``, named ``<name><extension><format's extension>`` (``t+0+0000000000.keys.avro``);
    ``envelope``: the struct field wrapping each value (Parquet's ``RecordKey{key}``), or empty."""

    column: str  # "key" | "headers"
    extension: str  # ".keys" | ".headers"
    format: Format
    envelope: str = ""

    def values(self, table: Any, rows: Any) -> Any:
        column = table.column(self.column)
        chunk = column.take(pa.array(rows)).combine_chunks()
        missing = pc.is_null(chunk) if self.column == "key" else \
            pc.or_kleene(pc.is_null(chunk), pc.equal(pc.list_value_length(chunk), 0))
        if pc.any(missing).as_py():
            i = int(rows[int(np.flatnonzero(np.asarray(missing.fill_null(True)))[0])])
            what = "Key cannot be null" if self.column == "key" else "Headers cannot be null or empty"
            raise DataError(f"{what} for the record topic={table.column('topic')[i]} "
                            f"partition={table.column('partition')[i]} offset={table.column('offset')[i]} "
                            f"(store.kafka.{'keys' if self.column == 'key' else 'headers'}=true writes one for "
                            f"every record)")
        if self.column == "headers":
            chunk = pc.cast(chunk, HEADER_VIEW_TYPE)
        if self.envelope:
            chunk = pa.StructArray.from_arrays([chunk], names=[self.envelope])
        return chunk


@dataclass(frozen=True)
class StorageLayout:
    """What names and fills the objects, made on the driver from a parsed config and pickled to executors."""

    partitioner: Partitioner
    format: Format
    flush_size: int
    rotate_interval_ms: int
    topics_dir: str
    directory_delim: str
    file_delim: str
    pad_width: int
    null_values: str  # behavior.on.null.values: fail | ignore | write
    views: tuple[View, ...] = ()
    #: names end with the last record's offset too (Confluent's HDFS sinks: ``t+0+0000000000+0000000002.avro``)
    end_offset_in_name: bool = False

    def key(self, topic: str, encoded: str, partition: int, start_offset: int, extension: str | None = None,
            end_offset: int | None = None) -> str:
        return object_key(self.topics_dir, topic, encoded, partition, start_offset,
                          self.format.extension if extension is None else extension,
                          directory_delim=self.directory_delim, file_delim=self.file_delim,
                          pad_width=self.pad_width, end_offset=end_offset if self.end_offset_in_name else None)


@dataclass(frozen=True)
class Written:
    """The commit message of one Spark task: the objects it wrote (key, records)."""

    partition_id: int
    objects: tuple[tuple[str, int], ...]
    skipped_nulls: int = 0


def _records(batches: Iterator[Any]) -> Any:
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return None
    return pa.Table.from_batches(collected)


def _in_offset_order(table: Any) -> bool:
    """Whether the rows are already ordered by topic, partition and offset (checked with vector compares)."""
    topics = table.column("topic").combine_chunks()
    if len(pc.unique(topics)) > 1:
        return False
    partitions = np.asarray(table.column("partition").combine_chunks().fill_null(-1), dtype=np.int64)
    offsets = np.asarray(table.column("offset").combine_chunks().fill_null(-1), dtype=np.int64)
    key_steps = np.diff(partitions)
    return bool(np.all(key_steps >= 0) and np.all((key_steps > 0) | (np.diff(offsets) >= 0)))


def write_objects(batches: Iterator[Any], layout: StorageLayout, put: Callable[[str, Encoded], None],
                  partition_id: int) -> Written:
    """Write a Spark task's records as objects through ``put(key, data)``; the objects are whole: a replay of the
    same records writes the same keys with the same bytes."""
    table = _records(batches)
    if table is None:
        return Written(partition_id, ())
    skipped = 0
    value = table.column("value")
    if value.null_count:
        nulls = pc.is_null(value)
        if layout.null_values == "fail":
            i = int(np.flatnonzero(np.asarray(nulls))[0])
            raise DataError(f"Record topic={table.column('topic')[i]} partition={table.column('partition')[i]} "
                            f"offset={table.column('offset')[i]} has a null value (a tombstone): set "
                            f"behavior.on.null.values=ignore to skip such records, or write to write them")
        if layout.null_values == "ignore":
            table = table.filter(pc.invert(nulls))
            skipped = int(pc.sum(nulls).as_py() or 0)
    if not _in_offset_order(table):  # Spark's Kafka source hands a task one partition's records in order
        table = table.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    now_ms = int(time.time() * 1000)
    encoded = layout.partitioner.encode(table, now_ms)
    times = layout.partitioner.record_times(table, now_ms) if layout.rotate_interval_ms > 0 else None
    written: list[tuple[str, int]] = []
    values = table.column("value")
    offsets = table.column("offset")
    for chunk in plan_chunks(table, encoded, flush_size=layout.flush_size,
                             rotate_interval_ms=layout.rotate_interval_ms, times=times):
        rows = chunk.rows
        end_offset = offsets[int(rows[-1])].as_py() if layout.end_offset_in_name else None
        key = layout.key(chunk.topic, chunk.encoded, chunk.partition, chunk.start_offset, end_offset=end_offset)
        contiguous = int(rows[-1]) - int(rows[0]) + 1 == len(rows)
        chunk_values = values.slice(int(rows[0]), len(rows)) if contiguous else values.take(pa.array(rows))
        views = [(view, layout.key(chunk.topic, chunk.encoded, chunk.partition, chunk.start_offset,
                                   view.extension + view.format.extension, end_offset), view.values(table, rows))
                 for view in layout.views]  # checked before any object of the chunk is written
        put(key, layout.format.encode(chunk_values))  # Spark's Arrow chunks: each format reads them as they are
        for view, view_key, view_values in views:
            put(view_key, view.format.encode(view_values))
        written.append((key, len(chunk.rows)))
    return Written(partition_id, tuple(written), skipped)


def layout_problems(config: Any) -> list[ConfigProblem]:
    """Cross-key problems every storage sink shares."""
    problems = []
    if str(config.schema_compatibility) != "NONE":
        problems.append(ConfigProblem("schema.compatibility", f"Invalid value {config.schema_compatibility} for "
                                      f"configuration schema.compatibility: only NONE is supported here (each "
                                      f"micro-batch has one schema)"))
    return problems


def refuse(problems: list[ConfigProblem]) -> None:
    if problems:
        raise ConfigError(problems)


class ArrowStore:
    """Whole-object writes to one bucket (or container) through a ``pyarrow.fs`` file system made where it is used:
    a store pickles without its client. A store names its ``root`` (the bucket or container), says ``where()`` it
    writes (for errors; never a secret), makes its file system in ``_make_filesystem()`` and may take secrets out of
    an error's text in ``_scrub()``."""

    #: What one written thing is called in errors ("object", "blob").
    noun = "object"
    _fs: Any = None

    @property
    def root(self) -> str:
        raise NotImplementedError

    def where(self) -> str:
        raise NotImplementedError

    def _make_filesystem(self) -> Any:
        raise NotImplementedError

    def _scrub(self, text: str) -> str:
        return text

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fs": None}

    def filesystem(self) -> Any:
        if self._fs is None:
            self._fs = self._make_filesystem()
        return self._fs

    def put(self, key: str, data: Encoded) -> None:
        try:
            with self.filesystem().open_output_stream(f"{self.root}/{key}", metadata={}) as out:
                for part in [data] if isinstance(data, bytes) else data:
                    out.write(part)
        except OSError as e:
            raise ConnectError(f"Could not write {self.noun} {key!r} to {self.where()}: {self._scrub(str(e))}") \
                from None

    def get(self, key: str) -> bytes:
        """The bytes of one object (a source reading back what a sink wrote)."""
        try:
            with self.filesystem().open_input_stream(f"{self.root}/{key}") as stream:
                return bytes(stream.read())
        except OSError as e:
            raise ConnectError(f"Could not read {self.noun} {key!r} from {self.where()}: {self._scrub(str(e))}") \
                from None

    def list_keys(self, prefix: str) -> list[str]:
        """The names of the objects under ``prefix`` (a directory, recursively), sorted; none when it is absent."""
        from pyarrow import fs

        base = f"{self.root}/{prefix.strip('/')}" if prefix.strip("/") else self.root
        try:
            infos = self.filesystem().get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError as e:
            raise ConnectError(f"Could not list {prefix!r} in {self.where()}: {self._scrub(str(e))}") from None
        return sorted(i.path[len(self.root) + 1:] for i in infos if i.type == fs.FileType.File)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where()})"
