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
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, NonEmptyString, Range, Type
from ...errors import ConfigProblem
from .common import STORAGE_COMMON, ArrowStore, short_class
from .formats import AVRO_CODECS, CsvFormat, Format
from .object_sink import (
    FORMAT_KEYS,
    FORMAT_KINDS,
    ObjectStoreSink,
    compression_keys,
    endpoint_problem,
    keys_and_headers_keys,
)

__all__ = ["S3SinkConnector", "S3Store"]

log = logging.getLogger(__name__)

_FORMAT_PACKAGE = "io.confluent.connect.s3.format."
_FORMATS = {**FORMAT_KINDS, "CsvFormat": "csv"}
_REFUSED_FORMATS = {"OrcFormat": "ORC objects are not written yet (issue #35)"}
_DEFAULT_CHAIN = "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"

_S3 = "S3"
_KEYS_AND_HEADERS = "Keys and Headers"
#: Where the objects are and the credentials that reach them: the sink's keys, and the S3 source's.
S3_CONNECTION_KEYS = (
    ConfigDef()
    .define("s3.bucket.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_S3,
            doc="The bucket of the objects.")
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
)
S3_KEYS = S3_CONNECTION_KEYS.merge(
    ConfigDef()
    .define("s3.credentials.provider.class", Type.CLASS, _DEFAULT_CHAIN, importance=Importance.LOW, group=_S3,
            doc="Only AWS's default chain here (or aws.access.key.id / aws.secret.access.key).")
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
    .define("s3.part.size", Type.INT, 26214400, Range.between(5242880, 2**31 - 1), Importance.LOW, group=_S3,
            doc="Accepted; an object over 10 MB is a multipart upload in pyarrow's 10 MB parts, a smaller one a PUT.")
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
    problems = S3SinkConnector.common_problems(config)
    url = endpoint_problem(config.store_url, "aws.access.key.id / aws.secret.access.key")
    if url:
        problems.append(url)
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
    for key, on in (("csv.compat", config.csv_compat),
                    ("s3.object.tagging", config.s3_object_tagging), ("s3.ssea.name", config.s3_ssea_name),
                    ("s3.sse.kms.key.id", config.s3_sse_kms_key_id), ("s3.acl.canned", config.s3_acl_canned),
                    ("s3.sse.customer.key", config.s3_sse_customer_key)):
        if on:
            problems.append(ConfigProblem(key, f"Configuration {key} is not supported by this S3 sink yet "
                                               f"(issue #35); leave it unset"))
    return problems


class S3Store(ArrowStore):
    """Whole-object PUTs to one bucket (picklable: the client is made where it is used)."""

    def __init__(self, bucket: str, region: str, endpoint: str | None, path_style: bool, access_key: str | None,
                 secret: Any, retries: int):
        self.bucket = bucket
        self.region = region
        self.endpoint = endpoint
        self.path_style = path_style
        self.access_key = access_key or None
        self._secret = secret  # a Password
        self.retries = retries

    @property
    def root(self) -> str:
        return self.bucket

    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint or f'AWS S3 ({self.region})'}"

    def _make_filesystem(self) -> Any:
        from pyarrow import fs

        options: dict[str, Any] = {"region": self.region,
                                   "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=self.retries + 1),
                                   "connect_timeout": 10, "request_timeout": 60,
                                   # An object under the part size (10 MB) is one PutObject, a larger one a
                                   # multipart upload completed when the stream closes (visible only then, whole)
                                   "allow_delayed_open": True}
        if self.access_key:
            options.update(access_key=self.access_key, secret_key=self._secret.value())
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(endpoint_override=parts.netloc, scheme=parts.scheme,
                           force_virtual_addressing=not self.path_style)
        return fs.S3FileSystem(**options)


class S3SinkConnector(ObjectStoreSink):
    """Writes records to S3 objects as Confluent's S3 sink names and fills them
    (``io.confluent.connect.s3.S3SinkConnector``); exactly once with a deterministic partitioner."""

    kafka_class = "io.confluent.connect.s3.S3SinkConnector"
    format_package = _FORMAT_PACKAGE
    format_kinds = _FORMATS
    refused_formats = _REFUSED_FORMATS
    compression_prefix = "s3"
    sink_name = "S3 sink"
    #: Keys saying where the records and the stored credentials go: a masked secret may stand for the stored one
    #: only while these are unchanged (the worker's rule for secrets over REST).
    destination_keys: ClassVar[tuple[str, ...]] = ("store.url", "s3.bucket.name", "s3.region",
                                                    "s3.path.style.access.enabled")
    config_def = S3_KEYS.merge(keys_and_headers_keys(_FORMAT_PACKAGE, _KEYS_AND_HEADERS, "an object"),
                               compression_keys("s3", _S3), FORMAT_KEYS, STORAGE_COMMON).check(_problems)

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

    def store(self) -> S3Store:
        config = self.config
        return S3Store(config.s3_bucket_name, config.s3_region, config.store_url, config.s3_path_style_access_enabled,
                       config.aws_access_key_id, config.aws_secret_access_key, config.s3_part_retries)

    @classmethod
    def _decimal_numeric(cls, config: Any) -> bool:
        return str(config.json_decimal_format) == "NUMERIC"

    def _format(self, format_class: Any = None, column: str = "value") -> Format:
        if self.format_kinds[short_class(format_class or self.config.format_class)] == "csv":
            return CsvFormat(self.config.csv_field_sep, tuple(self.config.csv_fields_list),
                             str(self.config.s3_compression_type), self.config.s3_compression_level)
        return super()._format(format_class, column)
