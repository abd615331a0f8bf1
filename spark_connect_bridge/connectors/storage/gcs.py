"""Confluent's GCS sink (``io.confluent.connect.gcs.GcsSinkConnector``): records into objects of a Google Cloud
Storage bucket, named and filled as Confluent's storage sinks do (:mod:`.layout`, :mod:`.formats`,
:mod:`.partitioners`), each object one whole upload through ``pyarrow.fs.GcsFileSystem`` (google-cloud-cpp).

Credentials: ``gcs.credentials.json`` (a service account key, the JSON itself) or ``gcs.credentials.path`` (its
file) are exchanged for an access token with ``google-auth`` (the ``gcs`` extra); neither: Google's default
credentials (``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server), as the original; with ``store.url`` (an
emulator) and neither: anonymous requests. Exactly once with a deterministic partitioner, as the S3 sink.

>>> (df.writeStream.format("kconnect")                                        # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.gcs.GcsSinkConnector")
...    .option("gcs.bucket.name", "lake").option("flush.size", "1000")
...    .option("format.class", "io.confluent.connect.gcs.format.json.JsonFormat")
...    .option("checkpointLocation", "/tmp/ckpt").start())
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...config import ConfigDef, Importance, NonEmptyString, Range, Type
from ...errors import ConfigProblem, ConnectError
from .common import STORAGE_COMMON, ArrowStore, short_class
from .object_sink import FORMAT_KEYS, ObjectStoreSink, compression_keys, endpoint_problem, keys_and_headers_keys

__all__ = ["GcsSinkConnector", "GcsStore"]

log = logging.getLogger(__name__)

_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
_GCS = "GCS"
GCS_KEYS = (
    ConfigDef()
    .define("gcs.bucket.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_GCS,
            doc="The bucket the objects are written to.")
    .define("gcs.credentials.path", Type.STRING, None, importance=Importance.HIGH, group=_GCS,
            doc="A service account key file (JSON); empty: gcs.credentials.json, else Google's default credentials "
                "(GOOGLE_APPLICATION_CREDENTIALS).")
    .define("gcs.credentials.json", Type.PASSWORD, None, importance=Importance.HIGH, group=_GCS,
            doc="A service account key, the JSON itself (in place of gcs.credentials.path).")
    .define("gcs.part.size", Type.INT, 26214400, Range.between(5242880, 2**31 - 1), Importance.HIGH, group=_GCS,
            doc="Accepted; each object is one upload here (one micro-batch's share of a partition).")
    .define("gcs.part.retries", Type.INT, 3, Range.at_least(0), Importance.MEDIUM, group=_GCS,
            doc="Retries of a failed request: here the client retries for up to gcs.retry.backoff.ms times "
                "2^retries.")
    .define("gcs.retry.backoff.ms", Type.LONG, 200, Range.at_least(0), Importance.LOW, group=_GCS,
            doc="The first retry's wait.")
    .define("storage.class", Type.CLASS, "io.confluent.connect.gcs.storage.GcsStorage", importance=Importance.HIGH,
            group=_GCS, doc="Only io.confluent.connect.gcs.storage.GcsStorage.")
)


def _credentials_info(credentials_json: Any, credentials_path: str | None) -> dict[str, Any] | None:
    """The service account key of ``gcs.credentials.json`` (a Password) or ``gcs.credentials.path`` (parsed), or
    None for the default/anonymous credentials."""
    if credentials_json and credentials_json.value():
        text, where = credentials_json.value(), "gcs.credentials.json"
    elif credentials_path:
        where = "gcs.credentials.path"
        try:
            with open(credentials_path) as f:
                text = f.read()
        except OSError as e:
            raise ConnectError(f"Could not read the GCS credentials file of gcs.credentials.path "
                               f"({credentials_path}): {e.strerror}") from None
    else:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        info = None
    if not isinstance(info, dict) or "client_email" not in info or "private_key" not in info:
        raise ConnectError(f"Configuration {where} is not a service account key (a JSON object with client_email "
                           f"and private_key)")
    return info


def _problems(config: Any) -> list[ConfigProblem]:
    problems = GcsSinkConnector.common_problems(config)
    problem = endpoint_problem(config.store_url, "gcs.credentials.path or gcs.credentials.json")
    if problem:
        problems.append(problem)
    if config.gcs_credentials_path and config.gcs_credentials_json and config.gcs_credentials_json.value():
        problems.append(ConfigProblem("gcs.credentials.json", "gcs.credentials.path and gcs.credentials.json are "
                                                              "alternatives: set one"))
    if short_class(config.storage_class) != "GcsStorage":
        problems.append(ConfigProblem("storage.class", f"Invalid value {config.storage_class} for configuration "
                                                       f"storage.class: io.confluent.connect.gcs.storage.GcsStorage"))
    return problems


class GcsStore(ArrowStore):
    """Whole-object uploads to one bucket (picklable: the client is made where it is used)."""

    def __init__(self, bucket: str, endpoint: str | None, credentials_json: Any, credentials_path: str | None,
                 retry_seconds: float, default_credentials: bool = True):
        self.bucket = bucket
        self.endpoint = endpoint
        self._credentials_json = credentials_json  # a Password: read where the client is made
        self.credentials_path = credentials_path
        self.retry_seconds = retry_seconds
        #: without a key: Google's default credentials (else anonymous requests; always anonymous at an endpoint)
        self.default_credentials = default_credentials

    @property
    def root(self) -> str:
        return self.bucket

    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint or 'Google Cloud Storage'}"

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"retry_time_limit": timedelta(seconds=max(self.retry_seconds, 0.001))}
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
        info = _credentials_info(self._credentials_json, self.credentials_path)
        if info is not None:
            try:
                from google.auth.exceptions import GoogleAuthError
                from google.auth.transport.requests import Request
                from google.oauth2 import service_account
            except ImportError:
                raise ConnectError("gcs.credentials.path/gcs.credentials.json need google-auth: pip install "
                                   "'spark-connect-bridge[gcs]'") from None
            try:
                creds = service_account.Credentials.from_service_account_info(info, scopes=[_SCOPE])
                creds.refresh(Request())
            except (GoogleAuthError, ValueError) as e:  # the type only: never the key
                raise ConnectError(f"Could not get an access token for {self.where()} with the service account "
                                   f"{info.get('client_email')}: {type(e).__name__}") from None
            options.update(access_token=creds.token, credential_token_expiration=creds.expiry)
        elif self.endpoint or not self.default_credentials:
            options.update(anonymous=True)
        return options

    def _make_filesystem(self) -> Any:
        from pyarrow import fs

        return fs.GcsFileSystem(**self._options())


class GcsSinkConnector(ObjectStoreSink):
    """Writes records to GCS objects as Confluent's GCS sink names and fills them
    (``io.confluent.connect.gcs.GcsSinkConnector``); exactly once with a deterministic partitioner."""

    kafka_class = "io.confluent.connect.gcs.GcsSinkConnector"
    format_package = "io.confluent.connect.gcs.format."
    compression_prefix = "gcs"
    sink_name = "GCS sink"
    #: Keys saying where the records and the stored credentials go: a masked secret may stand for the stored one
    #: only while these are unchanged.
    destination_keys: ClassVar[tuple[str, ...]] = ("store.url", "gcs.bucket.name", "gcs.credentials.path")
    config_def = GCS_KEYS.merge(compression_keys("gcs", _GCS), keys_and_headers_keys(format_package, _GCS, "an object"),
                             FORMAT_KEYS, STORAGE_COMMON).check(_problems)

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) this config would write with the worker's own Google credentials (no credentials given),
        for the worker's ``connector.allowed.paths`` check over REST; ``None`` when the config brings its own."""
        if str(props.get("gcs.credentials.json") or "").strip() or str(props.get("gcs.credentials.path") or "").strip():
            return None
        bucket = str(props.get("gcs.bucket.name") or "").strip()
        prefix = str(props.get("topics.dir") or "topics").strip().strip("/")
        endpoint = str(props.get("store.url") or "").strip().rstrip("/")
        if endpoint:
            return "store.url", f"{endpoint}/{bucket}/{prefix}"
        return "gcs.bucket.name", f"gs://{bucket}/{prefix}"

    def store(self) -> GcsStore:
        config = self.config
        return GcsStore(config.gcs_bucket_name, config.store_url, config.gcs_credentials_json,
                        config.gcs_credentials_path,
                        config.gcs_retry_backoff_ms / 1000 * (2 ** config.gcs_part_retries))
