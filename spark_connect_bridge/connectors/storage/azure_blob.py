"""Confluent's Azure Blob Storage sink (``io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector``): records
into block blobs of a container, named and filled as Confluent's storage sinks do (:mod:`.layout`,
:mod:`.formats`, :mod:`.partitioners`), each blob one whole upload through ``pyarrow.fs.AzureFileSystem`` (Azure's
C++ SDK).

Credentials: ``azblob.account.key`` (the shared key) or ``azblob.sas.token``; neither: Azure's default credential
chain (environment, managed identity). ``store.url`` points at another Blob endpoint (Azurite, a private
endpoint): ``http(s)://host:port`` (a ``/<account>`` path, as Azurite's URLs have, is accepted when it is the
account's name). Exactly once with a deterministic partitioner, as the S3 sink.

>>> (df.writeStream.format("kconnect")                                        # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector")
...    .option("azblob.account.name", "lakeacct").option("azblob.account.key", "${env:AZ_KEY}")
...    .option("azblob.container.name", "lake").option("flush.size", "1000")
...    .option("format.class", "io.confluent.connect.azure.blob.format.json.JsonFormat")
...    .option("checkpointLocation", "/tmp/ckpt").start())
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...config import ConfigDef, Importance, NonEmptyString, Range, Type
from ...errors import ConfigProblem
from .common import STORAGE_COMMON, ArrowStore, short_class
from .object_sink import FORMAT_KEYS, ObjectStoreSink, compression_keys, keys_and_headers_keys

__all__ = ["AzureBlobStorageSinkConnector", "AzureBlobStore"]

log = logging.getLogger(__name__)

_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
_CONTAINER = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_AZ = "Azure"
AZURE_KEYS = (
    ConfigDef()
    .define("azblob.account.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group=_AZ,
            doc="The storage account (3-24 lower-case letters and digits).")
    .define("azblob.account.key", Type.PASSWORD, None, importance=Importance.HIGH, group=_AZ,
            doc="The account's shared key; empty: azblob.sas.token, else Azure's default credentials.")
    .define("azblob.sas.token", Type.PASSWORD, None, importance=Importance.HIGH, group=_AZ,
            doc="A shared access signature (in place of azblob.account.key).")
    .define("azblob.container.name", Type.STRING, "default", importance=Importance.MEDIUM, group=_AZ,
            doc="The container the blobs are written to (3-63 lower-case letters, digits and single dashes).")
    .define("azblob.block.size", Type.INT, 26214400, Range.at_least(1), Importance.MEDIUM, group=_AZ,
            doc="Accepted; each blob is one upload here (one micro-batch's share of a partition).")
    .define("azblob.retry.retries", Type.INT, 3, Range.at_least(1), Importance.MEDIUM, group=_AZ,
            doc="Accepted; the SDK's own retry policy applies.")
    .define("azblob.retry.backoff.ms", Type.LONG, 4000, Range.at_least(0), Importance.LOW, group=_AZ,
            doc="Accepted; the SDK's own retry policy applies.")
    .define("azblob.retry.max.backoff.ms", Type.LONG, 120000, Range.at_least(1), Importance.LOW, group=_AZ,
            doc="Accepted; the SDK's own retry policy applies.")
    .define("azblob.connection.timeout.ms", Type.LONG, 30000, Range.at_least(1), Importance.LOW, group=_AZ,
            doc="Accepted; the SDK's own timeouts apply.")
    .define("storage.class", Type.CLASS, "io.confluent.connect.azure.blob.storage.AzureBlobStorage",
            importance=Importance.HIGH, group=_AZ,
            doc="Only io.confluent.connect.azure.blob.storage.AzureBlobStorage.")
)


def _secret(password: Any) -> str | None:
    return password.value() if password and password.value() else None


def _problems(config: Any) -> list[ConfigProblem]:
    problems = AzureBlobStorageSinkConnector.common_problems(config)
    account = str(config.azblob_account_name)
    if not _ACCOUNT.match(account):
        problems.append(ConfigProblem("azblob.account.name", f"Invalid value {account} for configuration "
                                      f"azblob.account.name: 3-24 lower-case letters and digits"))
    container = str(config.azblob_container_name)
    if not _CONTAINER.match(container):
        problems.append(ConfigProblem("azblob.container.name", f"Invalid value {container} for configuration "
                                      f"azblob.container.name: 3-63 lower-case letters, digits and single dashes"))
    if config.store_url:
        parts = urlsplit(config.store_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(ConfigProblem("store.url", f"Invalid value {config.store_url} for configuration "
                                                       f"store.url: an http(s)://host[:port] URL"))
        elif parts.username or parts.password or parts.query:
            problems.append(ConfigProblem("store.url", "Invalid value for configuration store.url: no credentials "
                                                       "in the URL (use azblob.account.key or azblob.sas.token)"))
        elif parts.path.strip("/") not in ("", account):
            problems.append(ConfigProblem("store.url", f"Invalid value {config.store_url} for configuration "
                                                       f"store.url: its path may only be the account, /{account}"))
    if _secret(config.azblob_account_key) and _secret(config.azblob_sas_token):
        problems.append(ConfigProblem("azblob.sas.token", "azblob.account.key and azblob.sas.token are "
                                                          "alternatives: set one"))
    if short_class(config.storage_class) != "AzureBlobStorage":
        problems.append(ConfigProblem("storage.class", f"Invalid value {config.storage_class} for configuration "
                                      f"storage.class: io.confluent.connect.azure.blob.storage.AzureBlobStorage"))
    return problems


class AzureBlobStore(ArrowStore):
    """Whole-blob uploads to one container (picklable: the client is made where it is used)."""

    noun = "blob"

    def __init__(self, config: Any):
        self.account = config.azblob_account_name
        self.container = config.azblob_container_name
        self.endpoint = config.store_url
        self._key = config.azblob_account_key
        self._sas = config.azblob_sas_token

    @property
    def root(self) -> str:
        return self.container

    def where(self) -> str:
        return (f"container {self.container!r} of account {self.account!r} at "
                f"{self.endpoint or 'Azure Blob Storage'}")

    def _make_filesystem(self) -> Any:
        from pyarrow import fs

        options: dict[str, Any] = {"account_name": self.account}
        if _secret(self._key):
            options["account_key"] = _secret(self._key)
        elif _secret(self._sas):
            options["sas_token"] = str(_secret(self._sas)).lstrip("?")
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(blob_storage_authority=parts.netloc, blob_storage_scheme=parts.scheme,
                           dfs_storage_authority=parts.netloc, dfs_storage_scheme=parts.scheme)
        return fs.AzureFileSystem(**options)

    def _scrub(self, text: str) -> str:
        return _without_secrets(text, self._key, self._sas)


def _without_secrets(text: str, *secrets: Any) -> str:
    for s in secrets:
        value = _secret(s)
        if value:
            text = text.replace(value, "[hidden]").replace(value.lstrip("?"), "[hidden]")
    return re.sub(r"(?i)\bsig=[^&\s\"']+", "sig=[hidden]", text)


class AzureBlobStorageSinkConnector(ObjectStoreSink):
    """Writes records to Azure blobs as Confluent's Azure Blob Storage sink names and fills them
    (``io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector``); exactly once with a deterministic
    partitioner."""

    kafka_class = "io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector"
    format_package = "io.confluent.connect.azure.blob.format."
    compression_prefix = "az"
    sink_name = "Azure Blob sink"
    #: Keys saying where the records and the stored credentials go: a masked secret may stand for the stored one
    #: only while these are unchanged.
    destination_keys: ClassVar[tuple[str, ...]] = ("store.url", "azblob.account.name", "azblob.container.name")
    config_def = AZURE_KEYS.merge(compression_keys("az", _AZ), keys_and_headers_keys(format_package, _AZ, "a blob"),
                             FORMAT_KEYS, STORAGE_COMMON).check(_problems)

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) this config would write with the worker's own Azure credentials (neither key nor SAS token
        given), for the worker's ``connector.allowed.paths`` check over REST; ``None`` when the config brings
        its own."""
        if str(props.get("azblob.account.key") or "").strip() or str(props.get("azblob.sas.token") or "").strip():
            return None
        account = str(props.get("azblob.account.name") or "").strip()
        container = str(props.get("azblob.container.name") or "default").strip()
        prefix = str(props.get("topics.dir") or "topics").strip().strip("/")
        endpoint = str(props.get("store.url") or "").strip().rstrip("/")
        if endpoint:
            return "store.url", f"{endpoint}/{container}/{prefix}"
        return "azblob.account.name", f"abfs://{container}@{account}.dfs.core.windows.net/{prefix}"

    def store(self) -> AzureBlobStore:
        return AzureBlobStore(self.config)
