"""Confluent's S3 sink (``io.confluent.connect.s3.S3SinkConnector``): records into objects of an S3 bucket (AWS, or
any S3 API at ``store.url``), named and filled as Confluent's sink does (:mod:`.layout`, :mod:`.formats`,
:mod:`.partitioners`).

Each Spark task sorts its records by topic, partition and offset, cuts them into objects (``flush.size``,
``rotate.interval.ms``, the end of the micro-batch) and PUTs each object whole through ``pyarrow.fs.S3FileSystem``
(AWS's C++ SDK: credentials from ``aws.access.key.id``/``aws.secret.access.key`` or the AWS default chain:
environment, profile, instance role). An object's name derives from its first record's offset, so a replayed
micro-batch overwrites the same objects with the same bytes: **exactly once** with a deterministic partitioner
(Default, Field, time-based with the Record or RecordField extractor), as Confluent promises; with the
Wallclock extractor a replay may choose other directories (at least once).

>>> (df.writeStream.format("kconnect")                                        # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.s3.S3SinkConnector")
...    .option("s3.bucket.name", "lake").option("flush.size", "1000")
...    .option("format.class", "io.confluent.connect.s3.format.json.JsonFormat")
...    .option("checkpointLocation", "/tmp/ckpt").start())
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, NonEmptyString, Range, Type
from ...core.records import is_schemaless, is_variant_json
from ...errors import ConfigError, ConfigProblem
from ..base import CommitContext, SinkConnector, WriteContext
from .common import (
    STORAGE_COMMON,
    ArrowStore,
    StorageLayout,
    View,
    Written,
    layout_problems,
    short_class,
    write_objects,
)
from .formats import (
    AVRO_CODECS,
    PARQUET_CODEC_EXTENSIONS,
    AvroFormat,
    ByteArrayFormat,
    CsvFormat,
    Format,
    JsonFormat,
    ParquetFormat,
)
from .partitioners import partitioner_from_config

__all__ = ["S3SinkConnector", "S3Store"]

log = logging.getLogger(__name__)

_FORMAT_PACKAGE = "io.confluent.connect.s3.format."
_FORMATS = {"JsonFormat": "json", "ParquetFormat": "parquet", "ByteArrayFormat": "bytearray", "AvroFormat": "avro",
            "CsvFormat": "csv"}
_REFUSED_FORMATS = {"OrcFormat": "ORC objects are not written yet (issue #35)"}
_DEFAULT_CHAIN = "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"


def _format_problem(value: Any) -> str | None:
    name = short_class(value)
    if name in _FORMATS and (str(value).startswith(_FORMAT_PACKAGE) or "." not in str(value)):
        return None
    if name in _REFUSED_FORMATS:
        return _REFUSED_FORMATS[name]
    return "one of " + ", ".join(f"{_FORMAT_PACKAGE}{kind}.{name}" for name, kind in _FORMATS.items())


_S3 = "S3"
_KEYS_AND_HEADERS = "Keys and Headers"
_VIEW_FORMATS = {"keys.format.class": ("AvroFormat", "JsonFormat", "ByteArrayFormat", "ParquetFormat"),
                 "headers.format.class": ("AvroFormat", "JsonFormat", "ParquetFormat")}
S3_KEYS = (
    ConfigDef()
    .define("s3.bucket.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_S3,
            doc="The bucket the objects are written to.")
    .define("s3.region", Type.STRING, "us-west-2", importance=Importance.MEDIUM, group=_S3,
            doc="The AWS region of the bucket.")
    .define("store.url", Type.STRING, None, importance=Importance.HIGH, group=_S3,
            doc="The URL of an S3-compatible endpoint (MinIO, Ceph, a local emulator) in place of AWS's: "
                "http(s)://host:port. One of the connector's destination keys (where the stored credentials are sent).")
    .define("s3.path.style.access.enabled", Type.BOOLEAN, True, importance=Importance.LOW, group=_S3,
            doc="Path-style requests (endpoint/bucket/key) to store.url; false: virtual-hosted (bucket.endpoint).")
    .define("aws.access.key.id", Type.STRING, "", importance=Importance.HIGH, group=_S3,
            doc="The access key id; empty: the AWS default chain (AWS_ACCESS_KEY_ID, the profile of "
                "AWS_PROFILE in ~/.aws/credentials, an instance role).")
    .define("aws.secret.access.key", Type.PASSWORD, None, importance=Importance.HIGH, group=_S3,
            doc="The secret access key of aws.access.key.id (never logged or shown).")
    .define("s3.credentials.provider.class", Type.CLASS, _DEFAULT_CHAIN, importance=Importance.LOW, group=_S3,
            doc="Only AWS's default chain here (or aws.access.key.id / aws.secret.access.key).")
    .define("s3.compression.type", Type.STRING, "none", CaseInsensitiveValidString("none", "gzip"),
            Importance.LOW, group=_S3, doc="Compression of JsonFormat and ByteArrayFormat objects.")
    .define("s3.compression.level", Type.INT, -1, Range.between(-1, 9), Importance.LOW, group=_S3,
            doc="The gzip level, 0-9 (-1: zlib's default, 6, as Java's Deflater).")
    .define("parquet.codec", Type.STRING, "snappy",
            CaseInsensitiveValidString(*PARQUET_CODEC_EXTENSIONS), Importance.LOW, group=_S3,
            doc="The Parquet compression codec (its extension goes in the object name: .snappy.parquet).")
    .define("format.bytearray.extension", Type.STRING, ".bin", importance=Importance.LOW, group=_S3,
            doc="The extension of ByteArrayFormat objects.")
    .define("format.bytearray.separator", Type.STRING, None, importance=Importance.LOW, group=_S3,
            doc="What follows each value in ByteArrayFormat objects (default: a line separator, \\n).")
    .define("json.decimal.format", Type.STRING, "BASE64", CaseInsensitiveValidString("BASE64", "NUMERIC"),
            Importance.LOW, group=_S3, doc="How JsonFormat writes decimals: base64 of the unscaled bytes, or a number.")
    .define("behavior.on.null.values", Type.STRING, "fail", CaseInsensitiveValidString("fail", "ignore", "write"),
            Importance.LOW, group=_S3,
            doc="A record with a null value (tombstone): fail the query, ignore (skip) it, or write it (JSON null, "
                "an empty ByteArray value).")
    .define("csv.field.sep", Type.STRING, ",", importance=Importance.LOW, group=_S3,
            doc="CsvFormat: the field separator.")
    .define("csv.line.sep", Type.STRING, "\n", importance=Importance.LOW, group=_S3,
            doc="CsvFormat: accepted; lines end with \\n (Confluent's writer uses the JVM's line separator).")
    .define("csv.fields.list", Type.LIST, [], importance=Importance.LOW, group=_S3,
            doc="CsvFormat: the fields (dotted for a nested field) and their order; empty: every field.")
    .define("csv.compat", Type.BOOLEAN, False, importance=Importance.LOW, group=_S3,
            doc="CsvFormat's compatibility mode (booleans as 1/0, local timestamps): not supported here (false).")
    .define("store.kafka.keys", Type.BOOLEAN, False, importance=Importance.LOW, group=_KEYS_AND_HEADERS,
            doc="Write each value object's keys to an object beside it (<name>.keys<keys.format.class's extension>); "
                "a record with a null key fails the write.")
    .define("store.kafka.headers", Type.BOOLEAN, False, importance=Importance.LOW, group=_KEYS_AND_HEADERS,
            doc="Write each value object's headers, as {key, value} strings, to an object beside it "
                "(<name>.headers<ext>); a record without headers fails the write.")
    .define("keys.format.class", Type.CLASS, _FORMAT_PACKAGE + "avro.AvroFormat", importance=Importance.LOW,
            group=_KEYS_AND_HEADERS, doc="The format of the .keys objects: AvroFormat, JsonFormat, ByteArrayFormat or "
                                         "ParquetFormat (a key wrapped in a RecordKey{key} struct).")
    .define("headers.format.class", Type.CLASS, _FORMAT_PACKAGE + "avro.AvroFormat", importance=Importance.LOW,
            group=_KEYS_AND_HEADERS, doc="The format of the .headers objects: AvroFormat, JsonFormat or ParquetFormat "
                                         "(wrapped in a RecordHeaders{headers} struct).")
    .define("s3.part.size", Type.INT, 26214400, Range.between(5242880, 2**31 - 1), Importance.LOW, group=_S3,
            doc="Accepted; each object is one PUT here (an object is one micro-batch's share of a partition).")
    .define("s3.part.retries", Type.INT, 3, Range.at_least(0), Importance.LOW, group=_S3,
            doc="Retries of a failed request (the SDK's standard retry strategy).")
    .define("s3.retry.backoff.ms", Type.LONG, 200, Range.at_least(0), Importance.LOW, group=_S3,
            doc="Accepted; the SDK's standard strategy chooses its own backoff.")
    .define("s3.ssea.name", Type.STRING, "", importance=Importance.LOW, group=_S3,
            doc="Server-side encryption algorithm: not supported here (empty only).")
    .define("s3.sse.customer.key", Type.PASSWORD, None, importance=Importance.LOW, group=_S3,
            doc="SSE-C key: not supported here.")
    .define("s3.sse.kms.key.id", Type.STRING, "", importance=Importance.LOW, group=_S3,
            doc="SSE-KMS key id: not supported here (empty only).")
    .define("s3.acl.canned", Type.STRING, None, importance=Importance.LOW, group=_S3,
            doc="A canned ACL: not supported here.")
    .define("s3.object.tagging", Type.BOOLEAN, False, importance=Importance.LOW, group=_S3,
            doc="Tag objects with offsets and record counts: not supported here (false only).")
    .define("s3.wan.mode", Type.BOOLEAN, False, importance=Importance.LOW, group=_S3,
            doc="Accepted; no effect (no transfer acceleration).")
    .define("s3.http.send.expect.continue", Type.BOOLEAN, True, importance=Importance.LOW, group=_S3,
            doc="Accepted; no effect.")
    .define("storage.class", Type.CLASS, "io.confluent.connect.s3.storage.S3Storage", importance=Importance.HIGH,
            group=_S3, doc="Only io.confluent.connect.s3.storage.S3Storage.")
)


def _problems(config: Any) -> list[ConfigProblem]:
    problems = layout_problems(config)
    fmt_reason = _format_problem(config.format_class)
    if fmt_reason:
        problems.append(ConfigProblem("format.class", f"Invalid value {config.format_class} for configuration "
                                                      f"format.class: {fmt_reason}"))
    if config.store_url:
        parts = urlsplit(config.store_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(ConfigProblem("store.url", f"Invalid value {config.store_url} for configuration "
                                                       f"store.url: an http(s)://host[:port] URL"))
        elif parts.username or parts.password:
            problems.append(ConfigProblem("store.url", "Invalid value for configuration store.url: no credentials "
                                                       "in the URL (use aws.access.key.id / aws.secret.access.key)"))
    secret = config.aws_secret_access_key.value() if config.aws_secret_access_key else None
    if bool(config.aws_access_key_id) != bool(secret):
        key = "aws.secret.access.key" if config.aws_access_key_id else "aws.access.key.id"
        problems.append(ConfigProblem(key, "aws.access.key.id and aws.secret.access.key go together: set both, or "
                                           "neither for the AWS default credentials chain"))
    if short_class(config.s3_credentials_provider_class) != short_class(_DEFAULT_CHAIN):
        problems.append(ConfigProblem("s3.credentials.provider.class", f"Invalid value "
                                      f"{config.s3_credentials_provider_class} for configuration "
                                      f"s3.credentials.provider.class: only {_DEFAULT_CHAIN} is supported here"))
    if short_class(config.storage_class) != "S3Storage":
        problems.append(ConfigProblem("storage.class", f"Invalid value {config.storage_class} for configuration "
                                                       f"storage.class: io.confluent.connect.s3.storage.S3Storage"))
    if str(config.avro_codec).lower() not in AVRO_CODECS:
        problems.append(ConfigProblem("avro.codec", f"Invalid value {config.avro_codec} for configuration avro.codec: "
                                                    f"one of {', '.join(AVRO_CODECS)}"))
    for key, allowed in _VIEW_FORMATS.items():
        value = str(config[key])
        if short_class(value) not in allowed or not (value.startswith(_FORMAT_PACKAGE) or "." not in value):
            problems.append(ConfigProblem(key, f"Invalid value {value} for configuration {key}: one of "
                                               f"{', '.join(f'{_FORMAT_PACKAGE}{_FORMATS[a]}.{a}' for a in allowed)}"))
    for key, on in (("csv.compat", config.csv_compat),
                    ("s3.object.tagging", config.s3_object_tagging), ("s3.ssea.name", config.s3_ssea_name),
                    ("s3.sse.kms.key.id", config.s3_sse_kms_key_id), ("s3.acl.canned", config.s3_acl_canned),
                    ("s3.sse.customer.key", config.s3_sse_customer_key)):
        if on:
            problems.append(ConfigProblem(key, f"Configuration {key} is not supported by this S3 sink yet "
                                               f"(issue #35); leave it unset"))
    if config.rotate_interval_ms > 0 and short_class(config.partitioner_class) in ("DefaultPartitioner",
                                                                                     "FieldPartitioner"):
        log.warning("rotate.interval.ms applies with time-based partitioners only (as in Confluent's sink): "
                    "ignored with %s", short_class(config.partitioner_class))
    return problems


def _check(config: Any) -> list[ConfigProblem]:
    problems = _problems(config)
    if not problems:
        try:
            partitioner_from_config(config)
        except ConfigError as e:
            problems.extend(e.problems)
    return problems


def _avro_schema(field: Any) -> tuple[str, str]:
    """(Avro schema, Spark type) of a record column, as Confluent's AvroData maps its Connect schema."""
    import json

    from ...converters.avro_data import spark_to_avro
    from ...errors import DataError

    try:
        schema = spark_to_avro(field.dataType, field.metadata, False)
    except DataError as e:
        raise ConfigError([ConfigProblem("format.class", f"AvroFormat: the {field.name} has no Avro schema: {e}")]) \
            from None
    return json.dumps(schema, separators=(",", ":")), field.dataType.json()


class S3Store(ArrowStore):
    """Whole-object PUTs to one bucket (picklable: the client is made where it is used)."""

    def __init__(self, config: Any):
        self.bucket = config.s3_bucket_name
        self.region = config.s3_region
        self.endpoint = config.store_url
        self.path_style = config.s3_path_style_access_enabled
        self.access_key = config.aws_access_key_id or None
        self._secret = config.aws_secret_access_key
        self.retries = config.s3_part_retries

    @property
    def root(self) -> str:
        return self.bucket

    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint or f'AWS S3 ({self.region})'}"

    def _make_filesystem(self) -> Any:
        from pyarrow import fs

        options: dict[str, Any] = {"region": self.region,
                                   "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=self.retries + 1),
                                   "connect_timeout": 10, "request_timeout": 60}
        if self.access_key:
            options.update(access_key=self.access_key, secret_key=self._secret.value())
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(endpoint_override=parts.netloc, scheme=parts.scheme,
                           force_virtual_addressing=not self.path_style)
        return fs.S3FileSystem(**options)


class S3SinkConnector(SinkConnector):
    """Writes records to S3 objects as Confluent's S3 sink names and fills them
    (``io.confluent.connect.s3.S3SinkConnector``); exactly once with a deterministic partitioner."""

    kafka_class = "io.confluent.connect.s3.S3SinkConnector"
    delivery = "exactly-once"
    #: Keys saying where the records and the stored credentials go: a masked secret may stand for the stored one
    #: only while these are unchanged (the worker's rule for secrets over REST).
    destination_keys: ClassVar[tuple[str, ...]] = ("store.url", "s3.bucket.name", "s3.region",
                                                    "s3.path.style.access.enabled")
    #: Keys that name objects in the bucket, not local files (the worker's path policy leaves them to
    #: worker_credentials_destination).
    object_store_keys: ClassVar[tuple[str, ...]] = ("topics.dir",)
    config_def = S3_KEYS.merge(STORAGE_COMMON).check(_check)

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) this config would write with the worker's own AWS credentials (no aws.access.key.id given),
        for the worker's ``connector.allowed.paths`` check over REST; ``None`` when the config brings its own."""
        if str(props.get("aws.access.key.id") or "").strip():
            return None
        bucket = str(props.get("s3.bucket.name") or "").strip()
        prefix = str(props.get("topics.dir") or "topics").strip().strip("/")
        endpoint = str(props.get("store.url") or "").strip().rstrip("/")
        if endpoint:
            return "store.url", f"{endpoint}/{bucket}/{prefix}"
        return "s3.bucket.name", f"s3://{bucket}/{prefix}"

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._schemaless = False
        self._key_schemaless = False
        self._json_text: frozenset[str] = frozenset()  # the columns holding a schemaless VARIANT's JSON text
        #: (Avro schema, Spark type), both JSON, of the columns written with AvroFormat: value, key, headers
        self._avro: dict[str, tuple[str, str]] = {}
        self._layout: StorageLayout | None = None

    def _format(self, format_class: Any = None, column: str = "value") -> Format:
        kind = _FORMATS[short_class(format_class or self.config.format_class)]
        if kind == "json":
            return JsonFormat(str(self.config.s3_compression_type), self.config.s3_compression_level,
                              self._schemaless if column == "value" else column == "key" and self._key_schemaless,
                              str(self.config.json_decimal_format) == "NUMERIC", column in self._json_text)
        if kind == "parquet":
            return ParquetFormat(str(self.config.parquet_codec))
        if kind == "avro":
            if column not in self._avro:
                raise ConfigError(f"AvroFormat: the {column} schema is known once the input is (validate_input)")
            schema, spark_type = self._avro[column]
            return AvroFormat(schema, spark_type, str(self.config.avro_codec).lower())
        if kind == "csv":
            return CsvFormat(self.config.csv_field_sep, tuple(self.config.csv_fields_list),
                             str(self.config.s3_compression_type), self.config.s3_compression_level)
        separator = self.config.format_bytearray_separator
        return ByteArrayFormat(("\n" if separator is None else separator).encode(),
                               self.config.format_bytearray_extension, str(self.config.s3_compression_type),
                               self.config.s3_compression_level)

    def _views(self) -> tuple[View, ...]:
        views = []
        for on, column, key, extension, envelope in (
                (self.config.store_kafka_keys, "key", "keys.format.class", ".keys", "key"),
                (self.config.store_kafka_headers, "headers", "headers.format.class", ".headers", "headers")):
            if on:
                parquet = _FORMATS[short_class(self.config[key])] == "parquet"
                views.append(View(column, extension, self._format(self.config[key], column),
                                  envelope if parquet else ""))
        return tuple(views)

    def layout(self) -> StorageLayout:
        return StorageLayout(partitioner_from_config(self.config), self._format(), self.config.flush_size,
                             self.config.rotate_interval_ms if short_class(self.config.partitioner_class) not in
                             ("DefaultPartitioner", "FieldPartitioner") else -1,
                             self.config.topics_dir, self.config.directory_delim, self.config.file_delim,
                             self.config.filename_offset_zero_pad_width, str(self.config.behavior_on_null_values),
                             self._views())

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType, StructType

        missing = [c for c in ("value", "topic", "partition", "offset") if c not in schema.fieldNames()]
        if missing:
            raise ConfigError(f"The S3 sink needs the record columns value, topic, partition and offset; the input "
                              f"lacks {missing}")
        value = schema["value"]
        self._json_text = frozenset(c for c in ("key", "value") if c in schema.fieldNames()
                                    and is_variant_json(schema[c].metadata))
        self._schemaless = is_schemaless(value.metadata) or "value" in self._json_text
        kind = _FORMATS[short_class(self.config.format_class)]
        if kind == "parquet" and not isinstance(value.dataType, StructType):
            raise ConfigError([ConfigProblem("format.class", f"ParquetFormat needs a struct value; the value is "
                                             f"{value.dataType.simpleString()} (a value.converter with schemas)")])
        if kind in ("avro", "csv") and self._schemaless:
            raise ConfigError([ConfigProblem("format.class", f"{short_class(self.config.format_class)} needs a value "
                                             f"with a schema; the value was read without one (a value.converter "
                                             f"with schemas: Avro, JSON Schema, or JsonConverter with schemas)")])
        if kind == "csv" and not isinstance(value.dataType, StructType):
            raise ConfigError([ConfigProblem("format.class", f"CsvFormat needs a struct value; the value is "
                                             f"{value.dataType.simpleString()}")])
        if kind == "avro":
            self._avro["value"] = _avro_schema(value)
        self._validate_views(schema)
        if kind == "bytearray" and not isinstance(value.dataType, (BinaryType, StringType)):
            raise ConfigError([ConfigProblem("format.class", f"ByteArrayFormat needs a binary value; the value is "
                                             f"{value.dataType.simpleString()} (value.converter="
                                             f"org.apache.kafka.connect.converters.ByteArrayConverter)")])
        self._layout = self.layout()

    def _validate_views(self, schema: Any) -> None:
        from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

        if self.config.store_kafka_keys:
            if "key" not in schema.fieldNames():
                raise ConfigError([ConfigProblem("store.kafka.keys", "store.kafka.keys=true needs the record column "
                                                 "key; the input lacks it")])
            key = schema["key"]
            self._key_schemaless = is_schemaless(key.metadata) or "key" in self._json_text
            kind = _FORMATS[short_class(self.config.keys_format_class)]
            if kind == "avro":
                self._avro["key"] = _avro_schema(key)
            if kind == "bytearray" and not isinstance(key.dataType, (BinaryType, StringType)):
                raise ConfigError([ConfigProblem("keys.format.class", f"ByteArrayFormat needs a binary key; the key "
                                                 f"is {key.dataType.simpleString()}")])
        if self.config.store_kafka_headers:
            if "headers" not in schema.fieldNames():
                raise ConfigError([ConfigProblem("store.kafka.headers", "store.kafka.headers=true needs the record "
                                                 "column headers; the input lacks it")])
            if _FORMATS[short_class(self.config.headers_format_class)] == "avro":
                header = StructType([StructField("key", StringType(), False),
                                     StructField("value", StringType(), False)])
                self._avro["headers"] = _avro_schema(StructField("headers", ArrayType(header, False), False))

    # -- executor ---------------------------------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Written:
        layout = self._layout or self.layout()
        store = S3Store(self.config)
        return write_objects(batches, layout, store.put, ctx.partition_id)

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        written = [m for m in messages if m is not None]
        objects = sum(len(m.objects) for m in written)
        records = sum(n for m in written for _, n in m.objects)
        skipped = sum(m.skipped_nulls for m in written)
        log.info("%s: batch %s wrote %d records in %d objects to %s%s", self.name, ctx.batch_id, records, objects,
                 S3Store(self.config).where(), f" ({skipped} null values ignored)" if skipped else "")

    def abort(self, messages: Sequence[Written | None], ctx: CommitContext) -> None:
        # The objects written stay: Spark replays the batch, which writes the same objects again.
        log.warning("%s: batch %s aborted; its objects are rewritten when Spark replays it", self.name, ctx.batch_id)
