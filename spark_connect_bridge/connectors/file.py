"""FileStreamSource and FileStreamSink: Kafka's file connectors.

**FileStreamSource** reads a text file line by line (UTF-8; bytes that are not UTF-8 read as U+FFFD, as Java's
decoder in Kafka's task reads them). Like Kafka's, its source partition is
``{"filename": <file>}`` and its position ``{"position": <byte offset>}``; a line is emitted only once its
newline has been written, so a half-written last line waits for the next trigger. Records: ``key`` null,
``value`` the line (string, without ``\\n`` or ``\\r\\n``), ``offset`` the line's byte position, ``partition`` 0.
A file that becomes shorter than the committed position (truncated or replaced) fails the query rather than
skip or re-read data silently.

**FileStreamSink** appends one line per record: the value's text as Kafka's writes it, the ``toString()`` of the
Java value (Connect's ``Struct{n=1,s=x}`` for a struct, ``{k=v, k2=v2}`` for a schemaless JSON object, ``[a, b]``
for a list; :mod:`~spark_connect_bridge.core.connect_text`), but binary as UTF-8; a null value is ``null``.
Unlike Kafka's at-least-once sink it is **exactly-once**: executors stage their part, the driver appends the parts
in partition order under a lock and records ``(application, batch id)`` in ``<file>.kconnect/state.json``; a
replayed batch is skipped, and an append interrupted by a crash is rolled back (truncated) before the batch is
replayed.

>>> spark.read.format("kconnect").option("connector.class", "FileStreamSource") \\
...     .option("file", "/tmp/in.txt").option("topic", "lines").load()          # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..config import ConfigDef, Importance, NonEmptyString, Range, Type
from ..core.connect_text import connect_text, java_text_of_json
from ..core.paths import local_path
from ..core.records import is_schemaless, is_variant_json, no_headers, record_schema
from ..errors import ConfigError, ConnectError
from .base import CommitContext, ReadRange, SinkConnector, SourceConnector, WriteContext
from .offsets import Offsets, partition_key

__all__ = ["FileStreamSourceConnector", "FileStreamSinkConnector"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


class FileStreamSourceConnector(SourceConnector):
    """Reads lines of a text file (``org.apache.kafka.connect.file.FileStreamSourceConnector``)."""

    kafka_class = "org.apache.kafka.connect.file.FileStreamSourceConnector"
    partition_fields: ClassVar[dict[str, type] | None] = {"filename": str}
    offset_fields: ClassVar[dict[str, type] | None] = {"position": int}
    config_def = (
        ConfigDef()
        .define("file", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="Source filename. (Kafka reads stdin when unset; a Spark source needs a file.)")
        .define("topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="The topic to publish data to.")
        .define("batch.size", Type.INT, 2000, Range.at_least(1), Importance.LOW,
                "The maximum number of records in one Arrow batch (Kafka: records returned by one poll).")
    )

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._missing = False  # the file was missing at the last look (warned once)

    @property
    def _file(self) -> str:
        return local_path(self.config.file)

    @property
    def _key(self) -> str:
        # Kafka keys the partition by the file name as configured.
        return partition_key({"filename": self.config.file})

    def schema(self) -> Any:
        from pyspark.sql.types import StringType, StructField, StructType

        from ..converters.connect_schema import with_optional

        # Kafka's FileStreamSourceTask: the value's schema is Schema.STRING_SCHEMA, required
        base = record_schema(StringType(), StringType())
        return StructType([StructField(f.name, f.dataType, f.nullable, with_optional({}, False))
                           if f.name == "value" else f for f in base.fields])

    def initial_offsets(self) -> Offsets:
        return {self._key: {"position": 0}}

    def _size(self) -> int:
        try:
            size = os.path.getsize(self._file)
        except FileNotFoundError:
            # Kafka's task logs this and waits for the file; say it once per absence, not on every trigger.
            if not self._missing:
                self._missing = True
                log.warning("%s: couldn't find file %s for FileStreamSource, waiting for it to be created "
                            "(0 records until then)", self.name, self._file)
            return 0
        if self._missing:
            self._missing = False
            log.info("%s: file %s exists now", self.name, self._file)
        return size

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        pos = int((start.get(self._key) or {"position": 0})["position"])
        size = self._size()
        if size < pos:
            raise ConnectError(f"File {self.config['file']} is shorter ({size} bytes) than the committed position "
                               f"({pos}): it was truncated or replaced. Restore it, or reset the connector's "
                               f"offsets to read it from the start.")
        limit = size if until is None else min(size, int(until[self._key]["position"]))
        return {self._key: {"position": _line_boundary(self._file, pos, limit, max_records)}}

    def lag(self, current: Offsets) -> int | None:
        return max(0, self._size() - int(current.get(self._key, {"position": 0})["position"]))

    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        start = int(rng.start["position"]) if rng.start else 0
        end = int(rng.end["position"])
        topic = self.config.topic
        step = self.config.batch_size
        with open(self._file, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        if len(data) != end - start:
            raise ConnectError(f"File {self.config['file']} ends before position {end}: it was truncated")
        # Vectorised split: each value spans its line and terminator; the terminator ("\n" or "\r\n") is
        # then cut by one Arrow kernel. No per-line Python.
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
        n_all = len(newlines)
        bounds = np.concatenate(([0], newlines + 1)).astype(np.int64)
        raw = pa.Array.from_buffers(pa.large_binary(), n_all, [None, pa.py_buffer(bounds), pa.py_buffer(data)])
        stripped = pc.replace_substring_regex(raw, pattern="\r?\n$", replacement="")
        try:
            lines = stripped.cast(pa.large_string())
        except pa.ArrowInvalid:
            # Not valid UTF-8: Kafka's task reads through Java's InputStreamReader, which puts U+FFFD for each
            # malformed sequence and goes on; so do we (Python's "replace" follows the same Unicode practice).
            log.warning("File %s has bytes that are not UTF-8 between positions %d and %d: read with U+FFFD "
                        "replacement characters, as Kafka's FileStreamSource does", self.config["file"], start, end)
            lines = pa.array([b.decode("utf-8", "replace") for b in stripped.to_pylist()], pa.large_string())
        lines = lines.cast(pa.string())
        positions = pa.array(start + bounds[:-1])
        for i in range(0, n_all, step):
            n = min(step, n_all - i)
            yield pa.RecordBatch.from_arrays(
                [pa.nulls(n, pa.string()), lines.slice(i, n), pa.repeat(pa.scalar(topic, pa.string()), n),
                 pa.array(np.zeros(n, dtype=np.int32)), positions.slice(i, n),
                 pa.nulls(n, pa.timestamp("us", tz="UTC")), no_headers(n)],
                names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])


def _line_boundary(path: str, start: int, limit: int, max_lines: int | None) -> int:
    """The position just after the last complete line in ``[start, limit)``, taking at most ``max_lines``."""
    if limit <= start:
        return start
    with open(path, "rb") as f:
        if max_lines is None:
            # Only the last complete line matters: search backwards from the limit.
            pos = limit
            while pos > start:
                lo = max(start, pos - _CHUNK)
                f.seek(lo)
                buf = f.read(pos - lo)
                i = buf.rfind(b"\n")
                if i >= 0:
                    return lo + i + 1
                pos = lo
            return start
        f.seek(start)
        pos, remaining = start, max_lines
        while pos < limit and remaining > 0:
            buf = f.read(min(_CHUNK, limit - pos))
            if not buf:
                break
            n = buf.count(b"\n")
            if n < remaining:
                remaining -= n
                pos += len(buf)
                continue
            idx = -1
            for _ in range(remaining):
                idx = buf.index(b"\n", idx + 1)
            return pos + idx + 1
        # Fewer than max_lines complete lines: end after the last one.
        return _line_boundary(path, start, min(pos, limit), None)


@dataclass(frozen=True)
class _Staged:
    partition_id: int
    path: str
    rows: int


class FileStreamSinkConnector(SinkConnector):
    """Appends one line per record to a file (``org.apache.kafka.connect.file.FileStreamSinkConnector``),
    exactly once per micro-batch."""

    kafka_class = "org.apache.kafka.connect.file.FileStreamSinkConnector"
    delivery = "exactly-once"
    #: The value was read from schemaless messages (set by :meth:`validate_input`, on the driver: Arrow batches
    #: carry no column metadata; it travels with the pickled writer).
    _schemaless = False
    #: The value is a schemaless VARIANT's JSON text (core.records.VARIANT_JSON_META), set like ``_schemaless``.
    _variant_json = False
    config_def = ConfigDef().define(
        "file", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
        doc="Destination filename. (Kafka writes to stdout when unset; here a file is required.)")

    @property
    def _file(self) -> Path:
        return Path(local_path(self.config.file))

    @property
    def _state_dir(self) -> Path:
        return self._file.with_name(self._file.name + ".kconnect")

    def validate_input(self, schema: Any) -> None:
        if "value" not in schema.fieldNames():
            raise ConfigError(f"FileStreamSink needs a 'value' column; the input has {schema.fieldNames()}")
        self._schemaless = is_schemaless(schema["value"].metadata)
        self._variant_json = is_variant_json(schema["value"].metadata)

    # -- executor ---------------------------------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> _Staged | None:
        staging = self._state_dir / "staging" / ctx.app_id
        staging.mkdir(parents=True, exist_ok=True)
        path = staging / f"{ctx.batch_id if ctx.batch_id is not None else 'batch'}-{ctx.partition_id:05d}-" \
                         f"{ctx.attempt}-{uuid.uuid4().hex[:8]}.part"
        rows = 0
        with open(path, "wb") as out:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                value = batch.column(batch.schema.get_field_index("value"))
                out.write(_lines(value, self._schemaless, self._variant_json))
                rows += batch.num_rows
            out.flush()
            os.fsync(out.fileno())
        return _Staged(ctx.partition_id, str(path), rows)

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: Sequence[_Staged], ctx: CommitContext) -> None:
        self._state_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            state = self._read_state()
            self._recover(state)
            last = state["apps"].get(ctx.app_id)
            if ctx.batch_id is not None and last is not None and last >= ctx.batch_id:
                self._discard(messages)  # a replayed batch: already in the file
                return
            size_before = self._file.stat().st_size if self._file.exists() else 0
            state["pending"] = {"app": ctx.app_id, "batch": ctx.batch_id, "size": size_before}
            self._write_state(state)
            if ctx.overwrite:
                self._file.write_bytes(b"")
            with open(self._file, "ab") as out:
                for m in sorted(messages, key=lambda m: m.partition_id):
                    with open(m.path, "rb") as part:
                        while chunk := part.read(_CHUNK):
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if ctx.batch_id is not None:
                state["apps"][ctx.app_id] = ctx.batch_id
            state["pending"] = None
            self._write_state(state)
        self._discard(messages)

    def abort(self, messages: Sequence[_Staged], ctx: CommitContext) -> None:
        self._discard(messages)

    def _recover(self, state: dict) -> None:
        """Roll back an append a crash interrupted: its batch was not recorded, so Spark replays it."""
        pending = state.get("pending")
        if pending:
            if self._file.exists() and self._file.stat().st_size > pending["size"]:
                os.truncate(self._file, pending["size"])
            state["pending"] = None
            self._write_state(state)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._state_dir / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read_state(self) -> dict:
        p = self._state_dir / "state.json"
        if not p.exists():
            return {"apps": {}, "pending": None}
        return json.loads(p.read_text())

    def _write_state(self, state: dict) -> None:
        p = self._state_dir / "state.json"
        tmp = p.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)

    @staticmethod
    def _discard(messages: Sequence[_Staged]) -> None:
        for m in messages:
            with contextlib.suppress(FileNotFoundError):
                os.remove(m.path)


def _lines(values: Any, schemaless: bool, variant_json: bool = False) -> bytes:
    """One line per value, as Kafka's FileStreamSink prints them (``null`` for null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # invalid UTF-8 in binary fails in connect_text, naming no secret
    values = java_text_of_json(values) if variant_json else connect_text(values, schemaless=schemaless)
    values = pc.fill_null(values, "null")
    if len(values) == 0:
        return b""
    # value + "\n" for every row in one kernel, then the contiguous data buffer is the file chunk.
    joined = pc.binary_join_element_wise(values, "", "\n").cast(pa.large_string())
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    import numpy as np

    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset: joined.offset + len(joined) + 1]
    return joined.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
