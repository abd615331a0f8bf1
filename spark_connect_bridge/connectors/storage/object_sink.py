"""What Confluent's GCS and Azure Blob sinks share beyond storage-common: the format keys, the input checks, the
write of a task's records through a store's whole-object ``put`` and the driver's commit log line.

A sink over it declares its own keys (bucket/container, credentials, ``<prefix>.compression.type``), says which
``format.class`` package it takes and makes its store (:class:`ObjectStore`): a picklable object with
``put(key, data)`` and ``where()`` (the bucket or container and endpoint, for errors; never a secret).

>>> FORMAT_KEYS.parse({}).parquet_codec.value
'snappy'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Range, Type
from ...core.records import is_schemaless, is_variant_json
from ...errors import ConfigError, ConfigProblem
from ..base import CommitContext, SinkConnector, WriteContext
from .common import StorageLayout, Written, layout_problems, short_class, write_objects
from .formats import PARQUET_CODEC_EXTENSIONS, AvroFormat, ByteArrayFormat, Format, JsonFormat, ParquetFormat
from .partitioners import partitioner_from_config

__all__ = ["FORMAT_KEYS", "ObjectStore", "ObjectStoreSink", "compression_keys", "endpoint_problem"]

log = logging.getLogger(__name__)

FORMAT_KINDS = {"JsonFormat": "json", "ParquetFormat": "parquet", "ByteArrayFormat": "bytearray", "AvroFormat": "avro"}
_REFUSED_FORMATS = {"CsvFormat": "CSV objects are written by the S3 sink only (Confluent's GCS and Azure Blob sinks "
                                 "have no CsvFormat)"}

_FORMAT = "Format"
FORMAT_KEYS = (
    ConfigDef()
    .define("parquet.codec", Type.STRING, "snappy", CaseInsensitiveValidString(*PARQUET_CODEC_EXTENSIONS),
            Importance.LOW, group=_FORMAT,
            doc="The Parquet compression codec (its extension goes in the object name: .snappy.parquet).")
    .define("format.bytearray.extension", Type.STRING, ".bin", importance=Importance.LOW, group=_FORMAT,
            doc="The extension of ByteArrayFormat objects.")
    .define("format.bytearray.separator", Type.STRING, None, importance=Importance.LOW, group=_FORMAT,
            doc="What follows each value in ByteArrayFormat objects (default: a line separator, \\n).")
    .define("behavior.on.null.values", Type.STRING, "fail", CaseInsensitiveValidString("fail", "ignore", "write"),
            Importance.LOW, group=_FORMAT,
            doc="A record with a null value (tombstone): fail the query, ignore (skip) it, or write it.")
    .define("store.url", Type.STRING, None, importance=Importance.HIGH, group=_FORMAT,
            doc="storage-common's store URL: here the endpoint of an emulator or private endpoint "
                "(http(s)://host:port) in place of the cloud's. One of the connector's destination keys.")
)


def compression_keys(prefix: str, group: str) -> ConfigDef:
    """``<prefix>.compression.type`` and ``<prefix>.compression.level`` (JsonFormat and ByteArrayFormat)."""
    return (ConfigDef()
            .define(f"{prefix}.compression.type", Type.STRING, "none", CaseInsensitiveValidString("none", "gzip"),
                    Importance.LOW, group=group, doc="Compression of JsonFormat and ByteArrayFormat objects.")
            .define(f"{prefix}.compression.level", Type.INT, -1, Range.between(-1, 9), Importance.LOW, group=group,
                    doc="The gzip level, 0-9 (-1: zlib's default, 6, as Java's Deflater)."))


def endpoint_problem(url: str | None, credentials_hint: str) -> ConfigProblem | None:
    """The problem of a ``store.url`` that is not ``http(s)://host[:port]`` without credentials, or None."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ConfigProblem("store.url", f"Invalid value {url} for configuration store.url: an "
                                          f"http(s)://host[:port] URL")
    if parts.username or parts.password or parts.query:
        return ConfigProblem("store.url", f"Invalid value for configuration store.url: no credentials in the URL "
                                          f"(use {credentials_hint})")
    return None


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...

    def where(self) -> str: ...


class ObjectStoreSink(SinkConnector):
    """A storage-common sink writing whole objects to a store; subclasses give the keys and the store."""

    delivery = "exactly-once"
    #: ``format.class`` package of the original (``io.confluent.connect.gcs.format.``).
    format_package: ClassVar[str] = ""
    #: The prefix of the compression keys (``gcs`` for ``gcs.compression.type``).
    compression_prefix: ClassVar[str] = ""
    #: Keys that name objects in the bucket, not local files (the worker's path policy).
    object_store_keys: ClassVar[tuple[str, ...]] = ("topics.dir",)
    sink_name: ClassVar[str] = "object store sink"

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._schemaless = False
        self._json_text = False  # the value is a schemaless VARIANT's JSON text (written as is by JsonFormat)
        self._avro: tuple[str, str] | None = None  # (Avro schema, Spark type) of the value, for AvroFormat
        self._layout: StorageLayout | None = None

    # -- config -----------------------------------------------------------------------------------
    @classmethod
    def format_problem(cls, value: Any) -> ConfigProblem | None:
        name = short_class(value)
        if name in FORMAT_KINDS and (str(value).startswith(cls.format_package) or "." not in str(value)):
            return None
        reason = _REFUSED_FORMATS.get(name) or "one of " + ", ".join(
            f"{cls.format_package}{kind}.{n}" for n, kind in FORMAT_KINDS.items())
        return ConfigProblem("format.class", f"Invalid value {value} for configuration format.class: {reason}")

    @classmethod
    def common_problems(cls, config: Any) -> list[ConfigProblem]:
        problems = layout_problems(config)
        fmt = cls.format_problem(config.format_class)
        if fmt:
            problems.append(fmt)
        if config.rotate_interval_ms > 0 and short_class(config.partitioner_class) in ("DefaultPartitioner",
                                                                                         "FieldPartitioner"):
            log.warning("rotate.interval.ms applies with time-based partitioners only (as in Confluent's sinks): "
                        "ignored with %s", short_class(config.partitioner_class))
        if not problems:
            try:
                partitioner_from_config(config)
            except ConfigError as e:
                problems.extend(e.problems)
        return problems

    # -- the store --------------------------------------------------------------------------------
    def store(self) -> ObjectStore:
        raise NotImplementedError

    # -- layout -----------------------------------------------------------------------------------
    def _compression(self) -> tuple[str, int]:
        attr = self.compression_prefix.replace(".", "_")
        return (str(getattr(self.config, f"{attr}_compression_type")),
                int(getattr(self.config, f"{attr}_compression_level")))

    def _format(self) -> Format:
        kind = FORMAT_KINDS[short_class(self.config.format_class)]
        compression, level = self._compression()
        if kind == "json":
            return JsonFormat(compression, level, self._schemaless, False, self._json_text)
        if kind == "parquet":
            return ParquetFormat(str(self.config.parquet_codec))
        if kind == "avro":
            if self._avro is None:
                raise ConfigError("AvroFormat: the value's schema is known once the input is (validate_input)")
            return AvroFormat(*self._avro, str(self.config.avro_codec).lower())
        separator = self.config.format_bytearray_separator
        return ByteArrayFormat(("\n" if separator is None else separator).encode(),
                               self.config.format_bytearray_extension, compression, level)

    def layout(self) -> StorageLayout:
        timed = short_class(self.config.partitioner_class) not in ("DefaultPartitioner", "FieldPartitioner")
        return StorageLayout(partitioner_from_config(self.config), self._format(), self.config.flush_size,
                             self.config.rotate_interval_ms if timed else -1,
                             self.config.topics_dir, self.config.directory_delim, self.config.file_delim,
                             self.config.filename_offset_zero_pad_width, str(self.config.behavior_on_null_values))

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType, StructType

        missing = [c for c in ("value", "topic", "partition", "offset") if c not in schema.fieldNames()]
        if missing:
            raise ConfigError(f"The {self.sink_name} needs the record columns value, topic, partition and offset; "
                              f"the input lacks {missing}")
        value = schema["value"]
        self._json_text = is_variant_json(value.metadata)
        self._schemaless = is_schemaless(value.metadata) or self._json_text
        kind = FORMAT_KINDS[short_class(self.config.format_class)]
        if kind == "avro":
            if self._schemaless:
                raise ConfigError([ConfigProblem("format.class", "AvroFormat needs a value with a schema; the value "
                                                 "was read without one (a value.converter with schemas)")])
            from .s3 import _avro_schema  # AvroData's mapping, shared with the S3 sink

            self._avro = _avro_schema(value)
        if kind == "parquet" and not isinstance(value.dataType, StructType):
            raise ConfigError([ConfigProblem("format.class", f"ParquetFormat needs a struct value; the value is "
                                             f"{value.dataType.simpleString()} (a value.converter with schemas)")])
        if kind == "bytearray" and not isinstance(value.dataType, (BinaryType, StringType)):
            raise ConfigError([ConfigProblem("format.class", f"ByteArrayFormat needs a binary value; the value is "
                                             f"{value.dataType.simpleString()} (value.converter="
                                             f"org.apache.kafka.connect.converters.ByteArrayConverter)")])
        self._layout = self.layout()

    # -- executor ---------------------------------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Written:
        layout = self._layout or self.layout()
        return write_objects(batches, layout, self.store().put, ctx.partition_id)

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        written = [m for m in messages if m is not None]
        objects = sum(len(m.objects) for m in written)
        records = sum(n for m in written for _, n in m.objects)
        skipped = sum(m.skipped_nulls for m in written)
        log.info("%s: batch %s wrote %d records in %d objects to %s%s", self.name, ctx.batch_id, records, objects,
                 self.store().where(), f" ({skipped} null values ignored)" if skipped else "")

    def abort(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        # The objects written stay: Spark replays the batch, which writes the same objects again.
        log.warning("%s: batch %s aborted; its objects are rewritten when Spark replays it", self.name, ctx.batch_id)
