"""Confluent storage-common's partitioners: the directory (``encodedPartition``) of each record, for a whole Arrow
table at a time.

* ``DefaultPartitioner``: ``partition=<kafka partition>``;
* ``FieldPartitioner``: ``<field>=<value>`` for each of ``partition.field.name`` (fields of the value, dotted for a
  nested one), joined by ``directory.delim``;
* ``TimeBasedPartitioner``: the record's time (``timestamp.extractor``: ``Record`` = the Kafka record's timestamp,
  ``RecordField`` = ``timestamp.field`` of the value, ``Wallclock`` = the time of the write), floored to
  ``partition.duration.ms`` in ``timezone``, formatted with ``path.format`` (Joda's pattern letters);
  ``DailyPartitioner`` and ``HourlyPartitioner`` are it with the fixed formats ``'year'=YYYY/'month'=MM/'day'=dd``
  (and ``/'hour'=HH``) and durations of a day (an hour).

>>> encoded = DefaultPartitioner().encode(table, now_ms=0)          # doctest: +SKIP
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ConfigError, ConfigProblem, DataError

__all__ = ["Partitioner", "DefaultPartitioner", "FieldPartitioner", "TimeBasedPartitioner", "PARTITIONERS",
           "joda_to_strftime", "partitioner_from_config"]

_PREFIX = "io.confluent.connect.storage.partitioner."
PARTITIONERS = ("DefaultPartitioner", "FieldPartitioner", "TimeBasedPartitioner", "DailyPartitioner",
                "HourlyPartitioner")


class Partitioner:
    """Encodes the partition directory of every row of a record table (``pyarrow.Table``)."""

    #: Whether the same records always land in the same directories (not with the wall clock).
    deterministic = True

    def encode(self, table: Any, now_ms: int) -> Any:
        raise NotImplementedError

    def record_times(self, table: Any, now_ms: int) -> Any:
        """Each record's time (epoch ms, int64 numpy), or None when the partitioner has no time."""
        return None


@dataclass(frozen=True)
class DefaultPartitioner(Partitioner):
    def encode(self, table: Any, now_ms: int) -> Any:
        """A dictionary array: each Kafka partition's ``partition=<p>`` made once, the rows its indices."""
        partitions = table.column("partition").combine_chunks()
        distinct = pc.unique(partitions)
        names = pc.binary_join_element_wise("partition=", pc.cast(distinct, pa.string()), "")
        return pa.DictionaryArray.from_arrays(pc.index_in(partitions, value_set=distinct), names)


@dataclass(frozen=True)
class FieldPartitioner(Partitioner):
    fields: tuple[str, ...]
    delim: str = "/"

    def encode(self, table: Any, now_ms: int) -> Any:
        parts = []
        for name in self.fields:
            column = _value_field(table, name, "partition.field.name")
            if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type)
                    or pa.types.is_large_string(column.type) or pa.types.is_boolean(column.type)):
                raise DataError(f"Invalid value of field {name!r} for FieldPartitioner (partition.field.name): its "
                                f"type {column.type} is not an integer, a string or a boolean")
            text = pc.if_else(column, "true", "false") if pa.types.is_boolean(column.type) else \
                pc.cast(column, pa.string())
            _no_nulls(table, text, f"field {name!r} of the value (partition.field.name)")
            parts.append(pc.binary_join_element_wise(name + "=", text, ""))
        return pc.binary_join_element_wise(*parts, self.delim) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class TimeBasedPartitioner(Partitioner):
    path_format: str
    duration_ms: int
    timezone: str
    extractor: str = "Record"
    timestamp_field: str = "timestamp"

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        return self.extractor != "Wallclock"

    def record_times(self, table: Any, now_ms: int) -> Any:
        if self.extractor == "Wallclock":
            return np.full(table.num_rows, now_ms, dtype=np.int64)
        if self.extractor == "Record":
            column, what = table.column("timestamp"), "the record's timestamp (timestamp.extractor=Record)"
        else:
            column = _value_field(table, self.timestamp_field, "timestamp.field")
            what = f"field {self.timestamp_field!r} of the value (timestamp.extractor=RecordField)"
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            try:
                column = pc.cast(column, pa.timestamp("ms", tz="UTC"))
            except pa.ArrowInvalid as e:
                raise DataError(f"Invalid value of {what}: not an ISO-8601 timestamp ({e})") from None
        if pa.types.is_timestamp(column.type):
            column = pc.cast(pc.cast(column, pa.timestamp("ms", tz=column.type.tz), safe=False), pa.int64())
        elif pa.types.is_date(column.type):
            column = pc.multiply(pc.cast(column.cast(pa.date32()), pa.int64()), 86_400_000)
        elif not pa.types.is_integer(column.type):
            raise DataError(f"Invalid value of {what}: its type {column.type} is not a timestamp, epoch "
                            f"milliseconds or an ISO-8601 string")
        _no_nulls(table, column, what)
        return np.asarray(pc.cast(column, pa.int64()), dtype=np.int64)

    def encode(self, table: Any, now_ms: int) -> Any:
        times = self.record_times(table, now_ms)
        instants = pa.array(times, pa.timestamp("ms", tz="UTC"))
        # Joda's getPartition: floor the local time to the duration, then format it in the zone.
        local = np.asarray(pc.cast(pc.local_timestamp(instants.cast(pa.timestamp("ms", tz=self.timezone))),
                                   pa.int64()), dtype=np.int64)
        floored = pa.array(local // self.duration_ms * self.duration_ms, pa.int64()).cast(pa.timestamp("ms"))
        return pc.strftime(floored, format=joda_to_strftime(self.path_format), locale="C")


def _no_nulls(table: Any, column: Any, what: str) -> None:
    if column.null_count:
        i = int(np.flatnonzero(~np.asarray(column.is_valid()))[0])
        raise DataError(f"Record topic={table.column('topic')[i].as_py()} partition={table.column('partition')[i]} "
                        f"offset={table.column('offset')[i]}: {what} is null; the partitioner needs it")


def _value_field(table: Any, path: str, key: str) -> Any:
    column = table.column("value")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    for name in path.split("."):
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            raise DataError(f"Invalid value {path} for configuration {key}: the record value has no field "
                            f"{name!r} (value type {table.column('value').type})")
        column = pc.struct_field(column, name)
    return column


# Joda pattern letters and the strftime directive of each (the numeric ones, and English month/day names).
_JODA = [("yyyy", "%Y"), ("YYYY", "%Y"), ("yy", "%y"), ("YY", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"),
         ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"), ("EEEE", "%A"), ("EEE", "%a"), ("DDD", "%j")]


def joda_to_strftime(pattern: str) -> str:
    """The strftime format of a Joda ``DateTimeFormat`` pattern (``'year'=YYYY/'month'=MM`` -> ``year=%Y/month=%m``);
    raise ValueError for a letter it does not support."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            if pattern.startswith("''", i):  # '' outside quotes: one quote
                out.append("'")
                i += 2
                continue
            i += 1
            while True:  # quoted text, where '' is one quote
                end = pattern.find("'", i)
                if end < 0:
                    raise ValueError("an unterminated quote")
                out.append(pattern[i:end].replace("%", "%%"))
                if pattern.startswith("''", end):
                    out.append("'")
                    i = end + 2
                    continue
                i = end + 1
                break
            continue
        if ch.isalpha():
            run = re.match(re.escape(ch) + "+", pattern[i:])
            assert run is not None
            letters = run.group(0)
            directive = next((d for j, d in _JODA if j == letters), None)
            if directive is None:
                raise ValueError(f"the pattern letters {letters!r} are not supported here (supported: "
                                 f"{', '.join(j for j, _ in _JODA)}; quote literal text: 'year'=YYYY)")
            out.append(directive)
            i += len(letters)
            continue
        out.append("%%" if ch == "%" else ch)
        i += 1
    return "".join(out)


def partitioner_from_config(config: Any) -> Partitioner:
    """The partitioner a parsed S3/storage sink config asks for (``partitioner.class`` and its keys); raise
    ConfigError naming every bad key."""
    name = str(config.partitioner_class).removeprefix(_PREFIX)
    delim = config.directory_delim
    problems: list[ConfigProblem] = []
    if name == "DefaultPartitioner":
        return DefaultPartitioner()
    if name == "FieldPartitioner":
        if not config.partition_field_name:
            raise ConfigError([ConfigProblem("partition.field.name", "Missing required configuration "
                                             "\"partition.field.name\" for FieldPartitioner")])
        return FieldPartitioner(tuple(config.partition_field_name), delim)
    if name == "DailyPartitioner":
        path_format, duration = delim.join(["'year'=YYYY", "'month'=MM", "'day'=dd"]), 86_400_000
    elif name == "HourlyPartitioner":
        path_format, duration = delim.join(["'year'=YYYY", "'month'=MM", "'day'=dd", "'hour'=HH"]), 3_600_000
    else:
        path_format, duration = config.path_format, config.partition_duration_ms
        if not path_format:
            problems.append(ConfigProblem("path.format", "Invalid value for configuration path.format: "
                                                         "TimeBasedPartitioner needs a path format"))
        if duration <= 0:
            problems.append(ConfigProblem("partition.duration.ms", f"Invalid value {duration} for configuration "
                                          f"partition.duration.ms: TimeBasedPartitioner needs a positive duration"))
    if path_format:
        try:
            joda_to_strftime(path_format)
        except ValueError as e:
            problems.append(ConfigProblem("path.format", f"Invalid value {path_format} for configuration "
                                                         f"path.format: {e}"))
    if not config.timezone:
        problems.append(ConfigProblem("timezone", f"Missing required configuration \"timezone\" for {name} "
                                                  f"(an IANA zone such as UTC or Europe/Paris)"))
    else:
        try:
            pc.local_timestamp(pa.array([0], pa.timestamp("ms", tz=config.timezone)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            problems.append(ConfigProblem("timezone", f"Invalid value {config.timezone} for configuration "
                                                      f"timezone: not a time zone"))
    if not config.locale:
        problems.append(ConfigProblem("locale", f"Missing required configuration \"locale\" for {name} "
                                                f"(for example en-US)"))
    if problems:
        raise ConfigError(problems)
    return TimeBasedPartitioner(path_format, duration, config.timezone, str(config.timestamp_extractor),
                                config.timestamp_field)
