"""What Confluent's S3, GCS and Azure Blob sinks share beyond storage-common: the format keys, the keys and headers
objects (``store.kafka.keys``/``store.kafka.headers``), the input checks, the write of a task's records through a
store's whole-object ``put`` and the driver's commit log line.

A sink over it declares its own keys (bucket/container, credentials, ``<prefix>.compression.type``), says which
``format.class`` package it takes and makes its store (:class:`ObjectStore`): a picklable object with
``put(key, data)`` and ``where()`` (the bucket or container and endpoint, for errors; never a secret).

>>> FORMAT_KEYS.parse({}).parquet_codec.value
'snappy'
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Range, Type
from ...converters.json import JsonConverter
from ...core.records import is_schemaless, is_variant_json
from ...errors import ConfigError, ConfigProblem, DataError
from ..base import CommitContext, SinkConnector, WriteContext
from .common import StorageLayout, View, Written, layout_problems, short_class, write_objects
from .formats import PARQUET_CODEC_EXTENSIONS, AvroFormat, ByteArrayFormat, Encoded, Format, JsonFormat, ParquetFormat
from .partitioners import partitioner_from_config

__all__ = ["FORMAT_KEYS", "JSON_LINES_META", "ObjectStore", "ObjectStoreSink", "avro_schema", "compression_keys",
           "endpoint_problem", "keys_and_headers_keys"]

log = logging.getLogger(__name__)

#: Column metadata of a ``key``/``value`` that :meth:`ObjectStoreSink.input_frame` made JsonFormat's lines of in the
#: JVM: each value's JSON text followed by ``\n`` (null for a null value).
JSON_LINES_META = "kconnect.json.lines"

FORMAT_KINDS = {"JsonFormat": "json", "ParquetFormat": "parquet", "ByteArrayFormat": "bytearray", "AvroFormat": "avro"}
_REFUSED_FORMATS = {"CsvFormat": "CSV objects are written by the S3 sink only (Confluent's GCS and Azure Blob sinks "
                                 "have no CsvFormat)"}
#: The formats each view object may take (Confluent's ``keys.format.class`` / ``headers.format.class``).
VIEW_FORMATS = {"keys.format.class": ("AvroFormat", "JsonFormat", "ByteArrayFormat", "ParquetFormat"),
                "headers.format.class": ("AvroFormat", "JsonFormat", "ParquetFormat")}

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


def keys_and_headers_keys(format_package: str, group: str, noun: str = "objects") -> ConfigDef:
    """``store.kafka.keys``/``store.kafka.headers`` and their formats, ``format_package`` the connector's
    (``io.confluent.connect.s3.format.``)."""
    return (ConfigDef()
            .define("store.kafka.keys", Type.BOOLEAN, False, importance=Importance.LOW, group=group,
                    doc=f"Write each value object's keys to {noun} beside it (<name>.keys<keys.format.class's "
                        f"extension>); a record with a null key fails the write.")
            .define("store.kafka.headers", Type.BOOLEAN, False, importance=Importance.LOW, group=group,
                    doc=f"Write each value object's headers, as {{key, value}} strings, to {noun} beside it "
                        f"(<name>.headers<ext>); a record without headers fails the write.")
            .define("keys.format.class", Type.CLASS, format_package + "avro.AvroFormat", importance=Importance.LOW,
                    group=group, doc="The format of the .keys objects: AvroFormat, JsonFormat, ByteArrayFormat or "
                                     "ParquetFormat (a key wrapped in a RecordKey{key} struct).")
            .define("headers.format.class", Type.CLASS, format_package + "avro.AvroFormat", importance=Importance.LOW,
                    group=group, doc="The format of the .headers objects: AvroFormat, JsonFormat or ParquetFormat "
                                     "(wrapped in a RecordHeaders{headers} struct)."))


def avro_schema(field: Any) -> tuple[str, str]:
    """(Avro schema, Spark type) of a record column, as Confluent's AvroData maps its Connect schema."""
    from ...converters.avro_data import spark_to_avro  # pyspark's types: the driver's, when the input is known

    try:
        schema = spark_to_avro(field.dataType, field.metadata, False)
    except DataError as e:
        raise ConfigError([ConfigProblem("format.class", f"AvroFormat: the {field.name} has no Avro schema: {e}")]) \
            from None
    return json.dumps(schema, separators=(",", ":")), field.dataType.json()


def _jvm_json_type(data_type: Any) -> bool:
    """Whether Spark's ``to_json`` (through the JsonConverter's expressions) writes a value of this type as the
    writer's :func:`~.json_lines.json_text` does: Connect's types, no map with non-string keys (Connect writes
    ``[key, value]`` pairs), no local timestamp (Spark's would be read in the session's zone)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return all(_jvm_json_type(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _jvm_json_type(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return isinstance(data_type.keyType, T.StringType) and _jvm_json_type(data_type.valueType)
    return isinstance(data_type, (T.StringType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
                                  T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.DateType, T.TimestampType))


class ObjectStore(Protocol):
    def put(self, key: str, data: Encoded) -> None: ...

    def where(self) -> str: ...


class ObjectStoreSink(SinkConnector):
    """A storage-common sink writing whole objects to a store; subclasses give the keys and the store."""

    delivery = "exactly-once"
    holds_task = True  # write_objects makes whole objects of the task's records
    #: ``format.class`` package of the original (``io.confluent.connect.gcs.format.``).
    format_package: ClassVar[str] = ""
    #: The ``format.class`` simple names taken (-> kind) and those refused with a reason.
    format_kinds: ClassVar[Mapping[str, str]] = FORMAT_KINDS
    refused_formats: ClassVar[Mapping[str, str]] = _REFUSED_FORMATS
    #: The prefix of the compression keys (``gcs`` for ``gcs.compression.type``).
    compression_prefix: ClassVar[str] = ""
    #: Keys that name objects in the bucket, not local files (the worker's path policy).
    object_store_keys: ClassVar[tuple[str, ...]] = ("topics.dir",)
    sink_name: ClassVar[str] = "object store sink"
    #: Whether the sink declares ``store.kafka.keys``/``store.kafka.headers`` (the HDFS sink has no such views).
    has_views: ClassVar[bool] = True

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._schemaless: frozenset[str] = frozenset()  # the columns (key, value) read without a schema
        self._json_text: frozenset[str] = frozenset()  # the columns holding a schemaless VARIANT's JSON text
        self._json_lines: frozenset[str] = frozenset()  # the columns holding JSON lines made in the JVM
        #: (Avro schema, Spark type), both JSON, of the columns written with AvroFormat: value, key, headers
        self._avro: dict[str, tuple[str, str]] = {}
        self._layout: StorageLayout | None = None

    # -- config -----------------------------------------------------------------------------------
    @classmethod
    def _known_format(cls, value: Any, allowed: Sequence[str]) -> bool:
        return short_class(value) in allowed and (str(value).startswith(cls.format_package) or "." not in str(value))

    @classmethod
    def _format_names(cls, allowed: Sequence[str]) -> str:
        return ", ".join(f"{cls.format_package}{cls.format_kinds[n]}.{n}" for n in allowed)

    @classmethod
    def format_problem(cls, value: Any) -> ConfigProblem | None:
        if cls._known_format(value, tuple(cls.format_kinds)):
            return None
        reason = cls.refused_formats.get(short_class(value)) or "one of " + cls._format_names(tuple(cls.format_kinds))
        return ConfigProblem("format.class", f"Invalid value {value} for configuration format.class: {reason}")

    @classmethod
    def common_problems(cls, config: Any) -> list[ConfigProblem]:
        problems = layout_problems(config)
        fmt = cls.format_problem(config.format_class)
        if fmt:
            problems.append(fmt)
        for key, allowed in VIEW_FORMATS.items() if cls.has_views else ():
            if not cls._known_format(config[key], allowed):
                problems.append(ConfigProblem(key, f"Invalid value {config[key]} for configuration {key}: one of "
                                                   f"{cls._format_names(allowed)}"))
        if config.rotate_interval_ms > 0 and short_class(config.partitioner_class) in ("DefaultPartitioner",
                                                                                         "FieldPartitioner"):
            log.warning("rotate.interval.ms applies with time-based partitioners only (as in Confluent's sinks): "
                        "ignored with %s", short_class(config.partitioner_class))
        if not problems:  # the partitioner is made from the keys checked above
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

    @classmethod
    def _decimal_numeric(cls, config: Any) -> bool:
        """Whether JsonFormat writes decimals as numbers (S3's ``json.decimal.format=NUMERIC``)."""
        return False

    def _format(self, format_class: Any = None, column: str = "value") -> Format:
        kind = self.format_kinds[short_class(format_class or self.config.format_class)]
        compression, level = self._compression()
        if kind == "json":
            return JsonFormat(compression, level, column in self._schemaless, self._decimal_numeric(self.config),
                              column in self._json_text, column in self._json_lines)
        if kind == "parquet":
            return ParquetFormat(str(self.config.parquet_codec))
        if kind == "avro":
            if column not in self._avro:
                raise ConfigError(f"AvroFormat: the {column} schema is known once the input is (validate_input)")
            schema, spark_type = self._avro[column]
            return AvroFormat(schema, spark_type, str(self.config.avro_codec).lower())
        separator = self.config.format_bytearray_separator
        return ByteArrayFormat(("\n" if separator is None else separator).encode(),
                               self.config.format_bytearray_extension, compression, level)

    def _views(self) -> tuple[View, ...]:
        if not self.has_views:
            return ()
        views = []
        for on, column, key, extension, envelope in (
                (self.config.store_kafka_keys, "key", "keys.format.class", ".keys", "key"),
                (self.config.store_kafka_headers, "headers", "headers.format.class", ".headers", "headers")):
            if on:
                parquet = self.format_kinds[short_class(self.config[key])] == "parquet"
                views.append(View(column, extension, self._format(self.config[key], column),
                                  envelope if parquet else ""))
        return tuple(views)

    def layout(self) -> StorageLayout:
        timed = short_class(self.config.partitioner_class) not in ("DefaultPartitioner", "FieldPartitioner")
        return StorageLayout(partitioner_from_config(self.config), self._format(), self.config.flush_size,
                             self.config.rotate_interval_ms if timed else -1,
                             self.config.topics_dir, self.config.directory_delim, self.config.file_delim,
                             self.config.filename_offset_zero_pad_width, str(self.config.behavior_on_null_values),
                             self._views())

    @classmethod
    def _read_columns(cls, df: Any, settings: Any) -> Any:
        """``df`` without the record columns the writer does not read, so that Spark's Arrow hand-off to the
        Python writer does not carry them: ``key`` and ``headers`` unless written beside the values
        (``store.kafka.keys``/``store.kafka.headers``), ``timestamp`` unless a time-based partitioner may read it.
        The engine's own columns (``_kc_*``: errors, the originals of dead letters, the read topic) stay."""
        timed = short_class(settings.partitioner_class) not in ("DefaultPartitioner", "FieldPartitioner")
        read = {"key": cls.has_views and bool(settings.store_kafka_keys),
                "headers": cls.has_views and bool(settings.store_kafka_headers), "timestamp": timed}
        unread = [c for c, kept in read.items() if not kept and c in df.columns]
        return df.drop(*unread) if unread else df

    @classmethod
    def input_frame(cls, df: Any, settings: Any) -> Any:
        """The records without the columns the writer does not read (:meth:`_read_columns`). JsonFormat: each
        value's JSON line made in the JVM, as Column expressions (the JsonConverter's
        :meth:`~spark_connect_bridge.converters.json.JsonConverter.serialize_text`, ``schemas.enable=false``, or a
        schemaless VARIANT's ``to_json``) followed by its ``\\n``, so that the Python writer sends the Arrow data
        buffer as it is, with no per-record work; so are the keys' lines of ``.keys`` objects in JsonFormat
        (``store.kafka.keys``). The value (the key) becomes that line, marked :data:`JSON_LINES_META`; the bytes
        are those the writer would make of the struct. Kept as it is where the writer needs the value itself or
        makes other text of it: a partitioner reading value fields, a struct read without a schema (its null
        fields are left out), a map with non-string keys (Connect's ``[key, value]`` pairs) or a local
        timestamp."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import VariantType

        df = cls._read_columns(df, settings)
        partitioner = short_class(settings.partitioner_class)
        reads_value = partitioner == "FieldPartitioner" or (
            partitioner not in ("DefaultPartitioner", "FieldPartitioner")
            and str(settings.timestamp_extractor).lower() == "recordfield")
        json_columns = []
        if cls.format_kinds.get(short_class(settings.format_class)) == "json" and not reads_value:
            json_columns.append("value")
        if cls.has_views and settings.store_kafka_keys \
                and cls.format_kinds.get(short_class(settings.keys_format_class)) == "json":
            json_columns.append("key")  # the .keys objects' lines (keys.format.class=JsonFormat)
        converter = JsonConverter({"schemas.enable": "false",
                                   "decimal.format": "NUMERIC" if cls._decimal_numeric(settings) else "BASE64"})
        for column in json_columns:
            if column not in df.columns:
                continue
            field = df.schema[column]
            if isinstance(field.dataType, VariantType):  # schemaless JSON: the JSON text it was read as
                text = F.to_json(F.col(column))
            elif is_variant_json(field.metadata):  # that text already (the pipeline's _variants_as_json)
                text = F.col(column)
            elif is_schemaless(field.metadata) or not _jvm_json_type(field.dataType):
                continue
            else:
                text = converter.serialize_text(F.col(column), field.dataType, metadata=field.metadata)
            # the line's newline too: the writer sends the Arrow data buffer as it is (a null stays null)
            df = df.withColumn(column, F.concat(text, F.lit("\n")).alias(column, metadata={JSON_LINES_META: "true"}))
        return df

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType, StructType

        missing = [c for c in ("value", "topic", "partition", "offset") if c not in schema.fieldNames()]
        if missing:
            raise ConfigError(f"The {self.sink_name} needs the record columns value, topic, partition and offset; "
                              f"the input lacks {missing}")
        value = schema["value"]
        present = [c for c in ("key", "value") if c in schema.fieldNames()]
        self._json_text = frozenset(c for c in present if is_variant_json(schema[c].metadata))
        self._json_lines = frozenset(c for c in present if (schema[c].metadata or {}).get(JSON_LINES_META) == "true")
        self._schemaless = frozenset(c for c in present if is_schemaless(schema[c].metadata) or c in self._json_text)
        format_name = short_class(self.config.format_class)
        kind = self.format_kinds[format_name]
        if kind == "parquet" and not isinstance(value.dataType, StructType):
            raise ConfigError([ConfigProblem("format.class", f"ParquetFormat needs a struct value; the value is "
                                             f"{value.dataType.simpleString()} (a value.converter with schemas)")])
        if kind in ("avro", "csv") and "value" in self._schemaless:
            raise ConfigError([ConfigProblem("format.class", f"{format_name} needs a value with a schema; the value "
                                             f"was read without one (a value.converter with schemas: Avro, JSON "
                                             f"Schema, or JsonConverter with schemas)")])
        if kind == "csv" and not isinstance(value.dataType, StructType):
            raise ConfigError([ConfigProblem("format.class", f"CsvFormat needs a struct value; the value is "
                                             f"{value.dataType.simpleString()}")])
        if kind == "avro":
            self._avro["value"] = avro_schema(value)
        self._validate_views(schema)
        if kind == "bytearray" and not isinstance(value.dataType, (BinaryType, StringType)):
            raise ConfigError([ConfigProblem("format.class", f"ByteArrayFormat needs a binary value; the value is "
                                             f"{value.dataType.simpleString()} (value.converter="
                                             f"org.apache.kafka.connect.converters.ByteArrayConverter)")])
        self._layout = self.layout()

    def _validate_views(self, schema: Any) -> None:
        from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

        if not self.has_views:
            return
        if self.config.store_kafka_keys:
            if "key" not in schema.fieldNames():
                raise ConfigError([ConfigProblem("store.kafka.keys", "store.kafka.keys=true needs the record column "
                                                 "key; the input lacks it")])
            key = schema["key"]
            kind = self.format_kinds[short_class(self.config.keys_format_class)]
            if kind == "avro":
                self._avro["key"] = avro_schema(key)
            if kind == "bytearray" and not isinstance(key.dataType, (BinaryType, StringType)):
                raise ConfigError([ConfigProblem("keys.format.class", f"ByteArrayFormat needs a binary key; the key "
                                                 f"is {key.dataType.simpleString()}")])
        if self.config.store_kafka_headers:
            if "headers" not in schema.fieldNames():
                raise ConfigError([ConfigProblem("store.kafka.headers", "store.kafka.headers=true needs the record "
                                                 "column headers; the input lacks it")])
            if self.format_kinds[short_class(self.config.headers_format_class)] == "avro":
                header = StructType([StructField("key", StringType(), False),
                                     StructField("value", StringType(), False)])
                self._avro["headers"] = avro_schema(StructField("headers", ArrayType(header, False), False))

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
