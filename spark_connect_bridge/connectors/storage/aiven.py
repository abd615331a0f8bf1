"""Aiven's S3 and GCS sinks (``io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector``,
``io.aiven.kafka.connect.gcs.GcsSinkConnector``, Aiven-Open/cloud-storage-connectors-for-apache-kafka): records
into objects named by ``file.name.template`` and filled as Aiven's output writers fill them (CSV of base64 values by
default, JSON, JSON lines), each object one whole PUT through the S3 or GCS store of :mod:`.s3`/:mod:`.gcs`.

What Aiven's sink does at a flush, ours does at the end of each micro-batch: the records of a Kafka partition go
to objects named from the template's ``{{topic}}``, ``{{partition}}`` and ``{{start_offset}}`` (the object's first
record), cut every ``file.max.records``; a template of ``{{key}}`` (with ``{{topic}}``/``{{partition}}``) keeps
the last record of each key. The names derive from offsets, so a replayed micro-batch writes the same objects with
the same bytes (**exactly once**), except with ``{{timestamp}}`` from the wall clock (Aiven's default
``file.name.timestamp.source``), whose directories follow the time of the write.

>>> parse_template("{{topic}}-{{partition:padding=true}}-{{start_offset}}").render("t", 1, 7, None, None)
't-0000000001-7'
"""

from __future__ import annotations

import base64
import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, ClassVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, NonEmptyString, Range, Type
from ...core.records import is_variant_json
from ...errors import ConfigError, ConfigProblem
from ..base import CommitContext, SinkConnector, WriteContext
from .common import Written
from .formats import compressed
from .gcs import GcsStore
from .json_lines import json_text
from .object_sink import ObjectStore
from .s3 import S3Store

__all__ = ["AivenGcsSinkConnector", "AivenS3SinkConnector", "FileNameTemplate", "parse_template"]

log = logging.getLogger(__name__)

SOURCE = ("Aiven-Open/cloud-storage-connectors-for-apache-kafka at 89e55a98f4d385814a5f534ed896edb66f84b208 "
          "(2026-06-22)")

# -- file.name.template ----------------------------------------------------------------------------------------
_VARIABLE = re.compile(r"\{\{\s*(\w+)?(:?)([\w=]+)?\s*}}")
_PARAMETERS = {"partition": ("padding", ("true", "false")), "start_offset": ("padding", ("true", "false")),
               "timestamp": ("unit", ("yyyy", "MM", "dd", "HH"))}
_TIME_UNITS = {"yyyy": "%Y", "YYYY": "%Y", "MM": "%m", "dd": "%d", "HH": "%H"}
#: Aiven's groupers: the variables each needs (all) and may have.
_GROUPERS: tuple[tuple[str, set[str], set[str]], ...] = (
    ("topic-partition", {"topic", "partition", "start_offset"}, {"timestamp"}),
    ("key", {"key"}, set()),
    ("key", {"key"}, {"topic", "partition"}))


@dataclass(frozen=True)
class Variable:
    name: str
    parameter: str = ""  # "true"/"false" of padding, the unit of timestamp
    text: str = ""  # as written, for errors


@dataclass(frozen=True)
class FileNameTemplate:
    """A parsed ``file.name.template``: text and variables, and the grouping its variables choose."""

    parts: tuple[str | Variable, ...]
    grouping: str  # "topic-partition" | "key" | "prefix" (aws.s3.prefix: no grouping of its own)

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(p.name for p in self.parts if isinstance(p, Variable))

    def render(self, topic: str, partition: int, start_offset: int, key: str | None, when: datetime | None) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            elif part.name == "topic":
                out.append(topic)
            elif part.name == "partition":
                out.append(f"{partition:010d}" if part.parameter == "true" else str(partition))
            elif part.name == "start_offset":
                out.append(f"{start_offset:020d}" if part.parameter == "true" else str(start_offset))
            elif part.name == "key":
                out.append("null" if key is None else key)
            elif when is not None:
                out.append(when.strftime(_TIME_UNITS[part.parameter]))
        return "".join(out)


def parse_template(text: str, key: str = "file.name.template", *, grouping: bool = True) -> FileNameTemplate:
    """Parse a template as Aiven's ``TemplateParser`` and choose its grouping as ``RecordGrouperFactory`` (with
    ``grouping=False``, a prefix: any variables, none needed); a bad one raises :class:`ConfigError` naming ``key``."""
    def bad(reason: str) -> ConfigError:
        return ConfigError([ConfigProblem(key, f"Invalid value {text} for configuration {key}: {reason}")])

    parts: list[str | Variable] = []
    position = 0
    for match in _VARIABLE.finditer(text):
        parts.append(text[position:match.start()])
        name, colon, parameter = match.group(1), match.group(2), match.group(3)
        if name is None:
            raise bad("a variable without a name")
        if name not in ("topic", "partition", "start_offset", "timestamp", "key"):
            raise bad(f"unknown variable {name!r} (topic, partition, start_offset, timestamp, key)")
        value = ""
        if colon and not parameter:
            raise bad(f"{match.group()}: a ':' without a parameter")
        if parameter:
            pname, _, value = parameter.partition("=")
            expected = _PARAMETERS.get(name)
            if expected is None or pname != expected[0] or not value:
                raise bad(f"{match.group()}: {name} takes " + (f"{expected[0]}={'|'.join(expected[1])}"
                                                               if expected else "no parameter"))
            if value not in expected[1] and not (name == "timestamp" and value == "YYYY"):
                raise bad(f"{match.group()}: {expected[0]} is one of {'|'.join(expected[1])}")
        elif name == "timestamp":
            raise bad(f"{match.group()}: timestamp needs unit=yyyy|MM|dd|HH")
        parts.append(Variable(name, value, match.group()))
        position = match.end()
    parts.append(text[position:])
    variables = {p.name for p in parts if isinstance(p, Variable)}
    if not grouping:
        return FileNameTemplate(tuple(p for p in parts if p != ""), "prefix")
    if not variables:
        raise bad("no variables; supported sets: topic,partition,start_offset[,timestamp]; key; key[,topic,partition]")
    for kind, required, optional in _GROUPERS:
        if required <= variables and variables <= required | optional:
            return FileNameTemplate(tuple(p for p in parts if p != ""), kind)
    if {"topic", "partition", "key", "start_offset"} <= variables:
        raise bad("grouping by topic, partition and key with start_offset is not supported here yet (issue #35)")
    raise bad("unsupported set of variables; supported sets: topic,partition,start_offset[,timestamp]; key; "
              "key[,topic,partition]")


# -- the output writers -----------------------------------------------------------------------------------------
#: Aiven's JSON writers fill a HashMap of the fields: Jackson writes them in that map's order, whatever the order
#: of format.output.fields (headers, offset, value, key, timestamp).
_JSON_FIELD_ORDER = ("headers", "offset", "value", "key", "timestamp")
COMPRESSION_EXTENSIONS = {"none": "", "gzip": ".gz", "snappy": ".snappy", "zstd": ".zst"}
_OUTPUT_TYPES = ("csv", "json", "jsonl", "parquet", "avro")
_FIELDS = ("key", "value", "offset", "timestamp", "headers")


@dataclass(frozen=True)
class AivenFormat:
    """Aiven's ``OutputWriter`` of one ``format.output.type``: the records of an object (an Arrow table in offset
    order) -> its bytes."""

    output_type: str  # csv | json | jsonl
    fields: tuple[str, ...]
    value_base64: bool  # format.output.fields.value.encoding=base64 (CSV)
    envelope: bool
    compression: str
    json_columns: frozenset[str] = frozenset()  # key/value columns holding a schemaless VARIANT's JSON text

    def encode(self, table: Any) -> bytes:
        if self.output_type == "parquet":
            return self._parquet(table)
        lines = self._csv(table) if self.output_type == "csv" else self._json(table)
        # a separator between records, none after the last (Aiven's writers)
        body = b"[\n" + b",\n".join(lines) + b"\n]" if self.output_type == "json" else b"\n".join(lines)
        return compressed(body, self.compression, -1) if self.compression != "none" else body

    # CSV (Aiven's PlainOutputWriter): key and value base64 (the value as is with encoding none), the offset, the
    # timestamp's epoch milliseconds, headers as base64(key):base64(value); each; a null field is empty.
    def _csv(self, table: Any) -> list[bytes]:
        columns = [self._csv_column(table, field) for field in self.fields]
        return [b",".join(row) for row in zip(*columns)]

    def _csv_column(self, table: Any, field: str) -> list[bytes]:
        if field == "offset":
            return [str(o).encode() for o in table.column("offset").to_pylist()]
        if field == "timestamp":
            return [b"" if ms is None else str(ms).encode() for ms in _epoch_ms(table)]
        if field == "headers":
            return [b"".join(base64.b64encode(h["key"].encode()) + b":" + base64.b64encode(_bytes(h["value"])) + b";"
                             for h in headers or ()) for headers in table.column("headers").to_pylist()]
        values = table.column(field).to_pylist()
        if field == "value" and not self.value_base64:
            return [b"" if v is None else _bytes(v) for v in values]
        return [b"" if v is None else base64.b64encode(_bytes(v)) for v in values]

    # Parquet (Aiven's ParquetOutputWriter: AvroParquetWriter, dictionary encoding, the codec of
    # file.compression.type): the record `connector_records` of the fields in format.output.fields order - key and
    # value as their schemas make them, offset and timestamp (epoch ms) longs, headers a map of each record's headers
    # (a null column when the object's first record has none, as Aiven's schema is then Avro's null); without the
    # envelope, a struct value's own fields or the one field alone.
    def _parquet(self, table: Any) -> bytes:
        import io

        import pyarrow.parquet as pq

        columns: dict[str, Any] = {}
        for field in self.fields:
            if field == "offset":
                columns[field] = table.column("offset").cast(pa.int64())
            elif field == "timestamp":
                columns[field] = pa.array(_epoch_ms(table), pa.int64())
            elif field == "headers":
                columns[field] = _headers_map(table.column("headers").combine_chunks())
            else:
                columns[field] = table.column(field).combine_chunks()
        if not self.envelope and pa.types.is_struct(columns[self.fields[0]].type):
            out_table = pa.Table.from_batches([pa.RecordBatch.from_struct_array(columns[self.fields[0]])])
        else:
            out_table = pa.table(columns)
        out = io.BytesIO()
        # Aiven's ParquetConfig.compressionCodecName: file.compression.type is the codec (pyarrow has the same names)
        pq.write_table(out_table, out, compression=self.compression, use_dictionary=True)
        return out.getvalue()

    # JSON and JSON lines (Aiven's JsonOutputWriter): an object per record ({"value": ...} and the other fields, in
    # the writer's map order), or the one field's JSON alone without the envelope.
    def _json(self, table: Any) -> list[bytes]:
        texts = {field: self._json_column(table, field) for field in self.fields}
        if not self.envelope:
            return [t.encode() for t in texts[self.fields[0]]]
        order = [f for f in _JSON_FIELD_ORDER if f in texts]
        return [("{" + ",".join(f'"{f}":{texts[f][i]}' for f in order) + "}").encode()
                for i in range(table.num_rows)]

    def _json_column(self, table: Any, field: str) -> list[str]:
        if field == "offset":
            return [str(o) for o in table.column("offset").to_pylist()]
        if field == "timestamp":
            return ["null" if ms is None else f'"{_iso_instant(ms)}"' for ms in _epoch_ms(table)]
        if field == "headers":
            column = table.column("headers").combine_chunks()
            strings = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())]))
            return json_text(pc.cast(column, strings)).to_pylist()
        column = table.column(field).combine_chunks()
        if field in self.json_columns:
            return ["null" if v is None else v for v in column.to_pylist()]
        return json_text(column).to_pylist()


def _headers_map(headers: Any) -> Any:
    """The record headers (a list of key/value structs) as Aiven writes them: a map per record (a HashMap: a key
    repeated in one record keeps its last value), or a null column when the first record has no headers."""
    if not len(headers) or headers[0].as_py() in (None, []):
        return pa.nulls(len(headers))
    if headers.offset:  # a slice: its offsets index the whole child array, and a map cannot take them with a mask
        headers = pa.concat_arrays([headers])
    entries = headers.values
    return pa.MapArray.from_arrays(headers.offsets, entries.field("key"), entries.field("value"),
                                   mask=headers.is_null())


def _bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _epoch_ms(table: Any) -> list[int | None]:
    column = table.column("timestamp").combine_chunks()
    if pa.types.is_timestamp(column.type):
        column = pc.divide(column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64()), 1000)
    return column.cast(pa.int64()).to_pylist()


def _iso_instant(ms: int) -> str:
    """Java's ``DateTimeFormatter.ISO_INSTANT`` of epoch milliseconds (the fraction only when not zero)."""
    seconds, millis = divmod(ms, 1000)
    text = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


# -- the objects of a Spark task's records ----------------------------------------------------------------------
@dataclass(frozen=True)
class AivenLayout:
    """What names and fills the objects, made on the driver and pickled to executors."""

    template: FileNameTemplate
    format: AivenFormat
    max_records: int  # 0: unlimited
    timestamp_source: str  # wallclock | event
    zone: str
    #: S3's deprecated aws.s3.prefix: objects named <prefix><topic>-<partition>-<start_offset:20>; else the template
    legacy_prefix: FileNameTemplate | None = None
    name_prefix: str = ""  # GCS's file.name.prefix

    def when(self, timestamp_ms: int | None, now: datetime) -> datetime:
        if self.timestamp_source == "event" and timestamp_ms is not None:
            return datetime.fromtimestamp(timestamp_ms / 1000, tz=zone(self.zone))
        return now

    def object_name(self, file_name: str, topic: str, partition: int, start_offset: int, when: datetime) -> str:
        if self.legacy_prefix is not None:
            prefix = self.legacy_prefix.render(topic, partition, start_offset, None, when)
            return (f"{prefix}{topic}-{partition}-{start_offset:020d}"
                    f"{COMPRESSION_EXTENSIONS[self.format.compression]}")
        return self.name_prefix + file_name


def plan_objects(table: Any, layout: AivenLayout, now: datetime) -> dict[str, list[int]]:
    """Object name -> the rows it holds, as Aiven's record grouper fills its buffers record by record (records in
    offset order per partition)."""
    topics = table.column("topic").to_pylist()
    partitions = table.column("partition").to_pylist()
    offsets = table.column("offset").to_pylist()
    times = _epoch_ms(table) if "timestamp" in table.column_names else [None] * table.num_rows
    template = layout.template
    files: dict[str, list[int]] = {}
    if template.grouping == "key":
        keys = _key_strings(table)
        for row in range(table.num_rows):  # the last record of each name stays (compaction)
            when = layout.when(times[row], now)
            name = template.render(topics[row], partitions[row], offsets[row], keys[row], when)
            files[layout.object_name(name, topics[row], partitions[row], offsets[row], when)] = [row]
        return files
    heads: dict[tuple[str, int], int] = {}  # (topic, partition) -> the row that opened its current objects
    names: dict[str, str] = {}
    for row in range(table.num_rows):
        tp = (topics[row], partitions[row])
        head = heads.setdefault(tp, row)
        when = layout.when(times[row], now)
        name = template.render(tp[0], tp[1], offsets[head], None, when)
        if layout.max_records and len(files.get(name, ())) >= layout.max_records:
            heads[tp] = head = row
            name = template.render(tp[0], tp[1], offsets[row], None, when)
        files.setdefault(name, []).append(row)
        names.setdefault(name, layout.object_name(name, tp[0], tp[1], offsets[head], when))
    return {names[name]: rows for name, rows in files.items()}


def _key_strings(table: Any) -> list[str | None]:
    if "key" not in table.column_names:
        return [None] * table.num_rows
    return [None if k is None else k if isinstance(k, str) else bytes(k).decode("utf-8", "replace")
            for k in table.column("key").to_pylist()]


def write_aiven_objects(batches: Iterator[Any], layout: AivenLayout, put: Any, partition_id: int) -> Written:
    """Write a Spark task's records as Aiven's sink names and fills its objects, through ``put(name, data)``."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return Written(partition_id, ())
    table = pa.Table.from_batches(collected)
    table = table.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    now = datetime.fromtimestamp(time.time(), tz=zone(layout.zone))
    written = []
    for name, rows in plan_objects(table, layout, now).items():
        put(name, layout.format.encode(table.take(pa.array(rows, pa.int64()))))
        written.append((name, len(rows)))
    return Written(partition_id, tuple(written))


# -- the keys both sinks share (AivenCommonConfig, FileNameFragment, OutputFormatFragment) ----------------------
_OFFSET = re.compile(r"([+-])(\d\d):?(\d\d)?")


def zone(text: str) -> tzinfo:
    """The time zone of a Java ``ZoneId`` text: ``Z`` (Java's UTC, Aiven's default), ``+02:00``, or a region id."""
    if text in ("Z", "UTC", "GMT"):
        return timezone.utc
    offset = _OFFSET.fullmatch(text)
    if offset:
        sign = -1 if offset[1] == "-" else 1
        return timezone(sign * timedelta(hours=int(offset[2]), minutes=int(offset[3] or 0)))
    return ZoneInfo(text)


def _zone_problem(value: Any) -> str | None:
    try:
        zone(str(value))
    except (ZoneInfoNotFoundError, ValueError):
        return f"Invalid value {value}: a time zone id (Z, UTC, +02:00, Europe/Berlin)"
    return None


class _Zone:
    def __call__(self, value: Any) -> str | None:
        return _zone_problem(value)

    def describe(self) -> str:
        return "a time zone id"


def aiven_keys(default_compression: str) -> ConfigDef:
    """The file and format keys of Aiven's sinks, ``file.compression.type`` defaulting to ``default_compression``."""
    file_group, format_group = "File", "Format"
    return (ConfigDef()
            .define("file.name.template", Type.STRING, None, importance=Importance.MEDIUM, group=file_group,
                    doc="The object names: text with {{topic}}, {{partition}}, {{start_offset}} "
                        "(:padding=true for zeroes), {{timestamp:unit=yyyy|MM|dd|HH}}, or {{key}}. Default: "
                        "{{topic}}-{{partition}}-{{start_offset}} and the compression's extension.")
            .define("file.compression.type", Type.STRING, default_compression,
                    CaseInsensitiveValidString("none", "gzip", "snappy", "zstd"), Importance.MEDIUM,
                    group=file_group, doc="Compression of the objects: none or gzip (snappy and zstd: parquet's codec "
                                            "only, refused for the text formats here).")
            .define("file.max.records", Type.INT, 0, Range.at_least(0), Importance.MEDIUM, group=file_group,
                    doc="The most records in one object; 0: unlimited (a micro-batch's records of a partition).")
            .define("file.name.timestamp.timezone", Type.STRING, "Z", _Zone(), Importance.LOW, group=file_group,
                    doc="The time zone of the {{timestamp}} variable.")
            .define("file.name.timestamp.source", Type.STRING, "WALLCLOCK",
                    CaseInsensitiveValidString("wallclock", "event"), Importance.LOW, group=file_group,
                    doc="The time of {{timestamp}}: the wall clock of the write, or the record's timestamp (event).")
            .define("format.output.type", Type.STRING, "csv", CaseInsensitiveValidString(*_OUTPUT_TYPES),
                    Importance.MEDIUM, group=format_group,
                    doc="csv, json (an array per object), jsonl (one object per line) or parquet (a record "
                        "connector_records of the fields; key and value need schemas); avro is refused here.")
            .define("format.output.fields", Type.LIST, ["value"], importance=Importance.MEDIUM, group=format_group,
                    doc="The fields written of each record: key, value, offset, timestamp, headers.")
            .define("format.output.fields.value.encoding", Type.STRING, "base64",
                    CaseInsensitiveValidString("none", "base64"), Importance.MEDIUM, group=format_group,
                    doc="CSV: the value as base64 or as its bytes.")
            .define("format.output.envelope", Type.BOOLEAN, True, importance=Importance.MEDIUM, group=format_group,
                    doc="JSON: each record an object of its fields; false (one field only): the field alone."))


def aiven_problems(config: Any) -> list[ConfigProblem]:
    problems = []
    fields = [str(f).strip().lower() for f in config.format_output_fields]
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown or not fields:
        problems.append(ConfigProblem("format.output.fields", f"Invalid value {','.join(config.format_output_fields)} "
                                      f"for configuration format.output.fields: a list of {', '.join(_FIELDS)}"))
    output_type = str(config.format_output_type)
    if output_type == "avro":
        problems.append(ConfigProblem("format.output.type", f"Invalid value {output_type} for configuration "
                                      f"format.output.type: {output_type} objects are not written by Aiven's sinks "
                                      f"here yet (issue #35); csv, json, jsonl or parquet"))
    if not config.format_output_envelope and len(fields) > 1 and output_type != "csv":
        problems.append(ConfigProblem("format.output.envelope", "format.output.envelope=false needs one field in "
                                                                "format.output.fields"))
    compression = str(config.file_compression_type)
    if compression in ("snappy", "zstd") and output_type != "parquet":  # parquet: the codec inside the file
        problems.append(ConfigProblem("file.compression.type", f"Invalid value {compression} for configuration "
                                      f"file.compression.type: {compression} is written here only as the codec of "
                                      f"format.output.type=parquet; none or gzip"))
    if config.file_name_template is not None:
        try:
            parse_template(config.file_name_template)
        except ConfigError as e:
            problems.extend(e.problems)
    return problems


class AivenSink(SinkConnector):
    """What Aiven's S3 and GCS sinks share: the template, the writers, the input checks and the commit log line."""

    delivery = "exactly-once"
    holds_task = True  # write_aiven_objects makes whole objects of the task's records
    sink_name: ClassVar[str] = "Aiven sink"

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._json_columns: frozenset[str] = frozenset()
        self._layout: AivenLayout | None = None

    def store(self) -> ObjectStore:
        raise NotImplementedError

    def _template_text(self) -> str:
        if self.config.file_name_template is not None:
            return str(self.config.file_name_template)
        extension = COMPRESSION_EXTENSIONS[str(self.config.file_compression_type)]
        return "{{topic}}-{{partition}}-{{start_offset}}" + extension

    def _legacy_prefix(self) -> FileNameTemplate | None:
        return None

    def _name_prefix(self) -> str:
        return ""

    def fields(self) -> tuple[str, ...]:
        return tuple(str(f).strip().lower() for f in self.config.format_output_fields)

    def layout(self) -> AivenLayout:
        fmt = AivenFormat(str(self.config.format_output_type), self.fields(),
                          str(self.config.format_output_fields_value_encoding) == "base64",
                          bool(self.config.format_output_envelope), str(self.config.file_compression_type),
                          self._json_columns)
        source = str(self.config.file_name_timestamp_source).lower()
        return AivenLayout(parse_template(self._template_text()), fmt, self.config.file_max_records, source,
                           str(self.config.file_name_timestamp_timezone), self._legacy_prefix(), self._name_prefix())

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, MapType, StringType, VariantType

        names = schema.fieldNames()
        needed = ["topic", "partition", "offset", *self.fields()]
        missing = [c for c in dict.fromkeys(needed) if c not in names]
        if missing:
            raise ConfigError(f"The {self.sink_name} needs the record columns topic, partition, offset and those of "
                              f"format.output.fields ({', '.join(self.fields())}); the input lacks {missing}")
        output_type = str(self.config.format_output_type)
        if output_type == "csv":
            for column, allowed, converter in (("value", (BinaryType,), "value.converter"),
                                               ("key", (BinaryType, StringType), "key.converter")):
                if column in self.fields() and not isinstance(schema[column].dataType, allowed):
                    raise ConfigError([ConfigProblem("format.output.type", f"format.output.type=csv writes the "
                                      f"{column} as bytes; the {column} is {schema[column].dataType.simpleString()} "
                                      f"({converter}=org.apache.kafka.connect.converters.ByteArrayConverter)")])
        self._json_columns = frozenset(c for c in ("key", "value") if c in names
                                       and is_variant_json(schema[c].metadata))
        if output_type == "parquet":
            for column in ("key", "value"):
                if column in self.fields() and (column in self._json_columns
                                                or isinstance(schema[column].dataType, VariantType)):
                    raise ConfigError([ConfigProblem("format.output.type", f"format.output.type=parquet writes the "
                                      f"{column}'s schema, and the {column} has none (Aiven's sink: \"Record "
                                      f"{column} without schema\"): a {column}.converter with schemas (Avro, or "
                                      f"JsonConverter with {column}.converter.schemas.enable=true)")])
            if not self.config.format_output_envelope and isinstance(schema[self.fields()[0]].dataType, MapType):
                raise ConfigError([ConfigProblem("format.output.envelope", "format.output.envelope=false with a map "
                                                 "value (a column per map key of the first record) is not written "
                                                 "here; keep the envelope")])
        self._layout = self.layout()
        if self._layout.template.grouping == "key" and "key" not in names:
            raise ConfigError([ConfigProblem("file.name.template", "{{key}} needs the record column key; the input "
                                                                   "lacks it")])

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Written:
        layout = self._layout or self.layout()
        return write_aiven_objects(batches, layout, self.store().put, ctx.partition_id)

    def commit(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        written = [m for m in messages if m is not None]
        log.info("%s: batch %s wrote %d records in %d objects to %s", self.name, ctx.batch_id,
                 sum(n for m in written for _, n in m.objects), sum(len(m.objects) for m in written),
                 self.store().where())

    def abort(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        log.warning("%s: batch %s aborted; its objects are rewritten when Spark replays it", self.name, ctx.batch_id)


def static_directory(*texts: str) -> str:
    """The directory every object name of these templates (joined) lies under: the text before the first variable,
    up to its last ``/`` (``exports/{{topic}}-...`` -> ``exports``), for the worker's ``connector.allowed.paths``."""
    text = "".join(texts)
    match = _VARIABLE.search(text)
    static = text[:match.start()] if match else text
    return static.rsplit("/", 1)[0].strip("/") if "/" in static else ""


def _endpoint_problem(key: str, url: str | None, hint: str) -> ConfigProblem | None:
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ConfigProblem(key, f"Invalid value {url} for configuration {key}: an http(s)://host[:port] URL")
    if parts.username or parts.password or parts.query:
        return ConfigProblem(key, f"Invalid value for configuration {key}: no credentials in the URL (use {hint})")
    return None


# -- S3 ----------------------------------------------------------------------------------------------------------
_AWS = "AWS"
AIVEN_S3 = "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector"
AIVEN_GCS = "io.aiven.kafka.connect.gcs.GcsSinkConnector"
_DEPRECATED_S3 = {"aws_access_key_id": "aws.access.key.id", "aws_secret_access_key": "aws.secret.access.key",
                  "aws_s3_endpoint": "aws.s3.endpoint", "aws_s3_region": "aws.s3.region",
                  "aws_s3_bucket": "aws.s3.bucket.name", "aws_s3_prefix": "aws.s3.prefix",
                  "output_compression": "file.compression.type", "output_fields": "format.output.fields"}
AIVEN_S3_KEYS = (
    ConfigDef()
    .define("aws.s3.bucket.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_AWS,
            doc="The bucket the objects are written to.")
    .define("aws.s3.region", Type.STRING, "us-east-1", importance=Importance.MEDIUM, group=_AWS,
            doc="The bucket's region.")
    .define("aws.s3.endpoint", Type.STRING, None, importance=Importance.LOW, group=_AWS,
            doc="An S3-compatible endpoint (http(s)://host:port) in place of AWS's, path-style requests. One of the "
                "connector's destination keys.")
    .define("aws.access.key.id", Type.PASSWORD, None, importance=Importance.MEDIUM, group=_AWS,
            doc="The access key id; empty: the AWS default chain (environment, profile, instance role).")
    .define("aws.secret.access.key", Type.PASSWORD, None, importance=Importance.MEDIUM, group=_AWS,
            doc="The secret access key (never logged or shown).")
    .define("aws.credentials.provider", Type.CLASS, None, importance=Importance.MEDIUM, group=_AWS,
            doc="Only AWS's default chain here (com.amazonaws.auth.DefaultAWSCredentialsProviderChain).")
    .define("aws.s3.prefix", Type.STRING, None, importance=Importance.MEDIUM, group=_AWS,
            doc="Deprecated by Aiven: a prefix (with {{topic}}, {{partition}}, {{start_offset}}, {{timestamp}}) "
                "before <topic>-<partition>-<start_offset, 20 digits>; file.name.template then only groups.")
    .define("timestamp.timezone", Type.STRING, "Z", _Zone(), Importance.LOW, group=_AWS,
            doc="The time zone of {{timestamp}} in aws.s3.prefix.")
    .define("timestamp.source", Type.STRING, "WALLCLOCK", CaseInsensitiveValidString("wallclock", "event"),
            Importance.LOW, group=_AWS, doc="The time of {{timestamp}} in aws.s3.prefix.")
    .define("aws.s3.backoff.max.retries", Type.INT, 3, Range.between(1, 30), Importance.MEDIUM, group=_AWS,
            doc="Retries of a failed request.")
    .accept(AIVEN_S3, group=_AWS, no_effect={
        "aws.s3.part.size.bytes": "an object over 10 MB is a multipart upload in pyarrow's 10 MB parts",
        "aws.s3.backoff.delay.ms": "the SDK's standard retry strategy chooses its backoff",
        "aws.s3.backoff.max.delay.ms": "the SDK's standard retry strategy chooses its backoff",
        "aws.sts.role.session.duration": "no STS role is assumed here",
        "aws.sts.config.endpoint": "no STS role is assumed here",
        "aws.s3.fetch.page.size": "a key of Aiven's S3 source",
        "aws.s3.fetch.buffer.size": "a key of Aiven's S3 source",
        "kafka.retry.backoff.ms": "Spark retries a failed task, then the query fails",
    }, refused={
        "aws.s3.sse.algorithm": "server-side encryption is not set here (the bucket's default applies)",
        "aws.sts.role.arn": "no STS role here: aws.access.key.id or the default chain",
        "aws.sts.role.external.id": "no STS role is assumed here",
        "aws.sts.role.session.name": "no STS role is assumed here",
        "file.prefix.template": "a key of Aiven's sources; the S3 sink's names come from file.name.template",
    })
)
# Aiven's pre-2.6 spellings: read as the dotted ones would alias two keys to one attribute, and the REST API masks
# the dotted secrets by their declaration; so they are refused, naming the key to use (never echoing the value).
for _old, _new in _DEPRECATED_S3.items():
    AIVEN_S3_KEYS.refuse_pattern(_old, f"Aiven's deprecated spelling: use {_new}")


def _s3_problems(config: Any) -> list[ConfigProblem]:
    problems = aiven_problems(config)
    url = _endpoint_problem("aws.s3.endpoint", config.aws_s3_endpoint, "aws.access.key.id / aws.secret.access.key")
    if url:
        problems.append(url)
    key_id = config.aws_access_key_id.value() if config.aws_access_key_id else None
    secret = config.aws_secret_access_key.value() if config.aws_secret_access_key else None
    if bool(key_id) != bool(secret):
        problems.append(ConfigProblem("aws.secret.access.key" if key_id else "aws.access.key.id",
                                      "aws.access.key.id and aws.secret.access.key go together: set both, or neither "
                                      "for the AWS default credentials chain"))
    provider = config.aws_credentials_provider
    if provider and str(provider).rsplit(".", 1)[-1] != "DefaultAWSCredentialsProviderChain":
        problems.append(ConfigProblem("aws.credentials.provider", f"Invalid value {provider} for configuration "
                                      f"aws.credentials.provider: only com.amazonaws.auth."
                                      f"DefaultAWSCredentialsProviderChain here"))
    if config.aws_s3_prefix is not None:
        try:
            parse_template(config.aws_s3_prefix, "aws.s3.prefix", grouping=False)
        except ConfigError as e:
            problems.extend(e.problems)
    return problems


class AivenS3SinkConnector(AivenSink):
    """Writes records to S3 objects as Aiven's S3 sink names and fills them
    (``io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector``)."""

    kafka_class = AIVEN_S3
    sink_name = "Aiven S3 sink"
    #: Keys saying where the records and the stored credentials go (the worker's rule for masked secrets).
    destination_keys: ClassVar[tuple[str, ...]] = ("aws.s3.endpoint", "aws.s3.bucket.name", "aws.s3.region")
    #: Keys that name objects in the bucket, not local files (the worker's path policy).
    object_store_keys: ClassVar[tuple[str, ...]] = ("file.name.template", "aws.s3.prefix")
    config_def = AIVEN_S3_KEYS.merge(aiven_keys("gzip")).check(_s3_problems)

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) this config would write with the worker's own AWS credentials (no aws.access.key.id given),
        for the worker's ``connector.allowed.paths`` check over REST; ``None`` when the config brings its own."""
        if str(props.get("aws.access.key.id") or "").strip():
            return None
        bucket = str(props.get("aws.s3.bucket.name") or "").strip()
        prefix = props.get("aws.s3.prefix")
        where = "/".join(p for p in (bucket, static_directory(str(prefix)) if prefix is not None else
                                     static_directory(str(props.get("file.name.template") or ""))) if p)
        endpoint = str(props.get("aws.s3.endpoint") or "").strip().rstrip("/")
        if endpoint:
            return "aws.s3.endpoint", f"{endpoint}/{where}"
        return "aws.s3.bucket.name", f"s3://{where}"

    def store(self) -> S3Store:
        config = self.config
        key_id = config.aws_access_key_id.value() if config.aws_access_key_id else None
        return S3Store(config.aws_s3_bucket_name, config.aws_s3_region, config.aws_s3_endpoint, True, key_id,
                       config.aws_secret_access_key, config.aws_s3_backoff_max_retries)

    def _legacy_prefix(self) -> FileNameTemplate | None:
        if self.config.aws_s3_prefix is None:
            return None
        return parse_template(self.config.aws_s3_prefix, "aws.s3.prefix", grouping=False)

    def layout(self) -> AivenLayout:
        layout = super().layout()
        if layout.legacy_prefix is None:
            return layout
        # the prefix's {{timestamp}} follows timestamp.source/timezone (Aiven's old keys)
        return AivenLayout(layout.template, layout.format, layout.max_records,
                           str(self.config.timestamp_source).lower(), str(self.config.timestamp_timezone),
                           layout.legacy_prefix)


# -- GCS ---------------------------------------------------------------------------------------------------------
_GCS = "GCS"
AIVEN_GCS_KEYS = (
    ConfigDef()
    .define("gcs.bucket.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_GCS,
            doc="The bucket the objects are written to.")
    .define("gcs.endpoint", Type.STRING, None, importance=Importance.LOW, group=_GCS,
            doc="A GCS endpoint (http(s)://host:port, an emulator) in place of Google's. One of the connector's "
                "destination keys.")
    .define("gcs.credentials.path", Type.STRING, None, importance=Importance.LOW, group=_GCS,
            doc="A service account key file (JSON).")
    .define("gcs.credentials.json", Type.PASSWORD, None, importance=Importance.LOW, group=_GCS,
            doc="A service account key, the JSON itself.")
    .define("gcs.credentials.default", Type.BOOLEAN, None, importance=Importance.LOW, group=_GCS,
            doc="true: Google's default credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server); unset "
                "or false without a key: anonymous requests, as Aiven's sink.")
    .define("file.name.prefix", Type.STRING, "", importance=Importance.MEDIUM, group="File",
            doc="Text before each object's name (a directory such as exports/).")
    .define("gcs.retry.backoff.total.timeout.ms", Type.LONG, 50000, Range.between(0, 86_400_000),
            Importance.MEDIUM, group=_GCS, doc="How long a failed request is retried.")
    .accept(AIVEN_GCS, group=_GCS, no_effect={
        "gcs.retry.backoff.initial.delay.ms": "the client retries for gcs.retry.backoff.total.timeout.ms",
        "gcs.retry.backoff.max.delay.ms": "the client retries for gcs.retry.backoff.total.timeout.ms",
        "gcs.retry.backoff.delay.multiplier": "the client retries for gcs.retry.backoff.total.timeout.ms",
        "gcs.retry.backoff.max.attempts": "the client retries for gcs.retry.backoff.total.timeout.ms",
        "gcs.user.agent": "google-cloud-cpp's user agent",
        "kafka.retry.backoff.ms": "Spark retries a failed task, then the query fails",
    }, refused={"gcs.object.content.encoding": "objects carry no Content-Encoding here"})
)


def _gcs_problems(config: Any) -> list[ConfigProblem]:
    problems = aiven_problems(config)
    url = _endpoint_problem("gcs.endpoint", config.gcs_endpoint, "gcs.credentials.path or gcs.credentials.json")
    if url:
        problems.append(url)
    given = [k for k, on in (("gcs.credentials.path", bool(config.gcs_credentials_path)),
                             ("gcs.credentials.json", bool(config.gcs_credentials_json
                                                           and config.gcs_credentials_json.value())),
                             ("gcs.credentials.default", bool(config.gcs_credentials_default))) if on]
    if len(given) > 1:
        problems.append(ConfigProblem(given[-1], f"{' and '.join(given)} are alternatives: set one"))
    return problems


class AivenGcsSinkConnector(AivenSink):
    """Writes records to GCS objects as Aiven's GCS sink names and fills them
    (``io.aiven.kafka.connect.gcs.GcsSinkConnector``)."""

    kafka_class = AIVEN_GCS
    sink_name = "Aiven GCS sink"
    destination_keys: ClassVar[tuple[str, ...]] = ("gcs.endpoint", "gcs.bucket.name", "gcs.credentials.path")
    object_store_keys: ClassVar[tuple[str, ...]] = ("file.name.template", "file.name.prefix")
    config_def = AIVEN_GCS_KEYS.merge(aiven_keys("none")).check(_gcs_problems)

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) this config would write with the worker's own Google credentials
        (``gcs.credentials.default=true``), for the worker's ``connector.allowed.paths`` check; ``None`` otherwise."""
        if str(props.get("gcs.credentials.default") or "").strip().lower() != "true":
            return None
        bucket = str(props.get("gcs.bucket.name") or "").strip()
        where = "/".join(p for p in (bucket, static_directory(str(props.get("file.name.prefix") or ""),
                                                              str(props.get("file.name.template") or ""))) if p)
        endpoint = str(props.get("gcs.endpoint") or "").strip().rstrip("/")
        if endpoint:
            return "gcs.endpoint", f"{endpoint}/{where}"
        return "gcs.bucket.name", f"gs://{where}"

    def store(self) -> GcsStore:
        config = self.config
        return GcsStore(config.gcs_bucket_name, config.gcs_endpoint, config.gcs_credentials_json,
                        config.gcs_credentials_path, config.gcs_retry_backoff_total_timeout_ms / 1000,
                        default_credentials=bool(config.gcs_credentials_default))

    def _name_prefix(self) -> str:
        return str(self.config.file_name_prefix or "")

