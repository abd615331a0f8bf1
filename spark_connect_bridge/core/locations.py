"""The worker's own files on a local disk or in an object store, through one layer (``pyarrow.fs``).

The worker keeps state beside the Spark checkpoints it gives its queries: the stored connector configs and their
key (``offset.storage.dir``), each connector's saved totals, the offset logs it reads and alters, the topic
store's listing (``topics.dir``). Spark reaches a ``s3a://bucket/prefix`` checkpoint through Hadoop's S3A
connector; :class:`Locations` reaches the same objects through ``pyarrow.fs.S3FileSystem`` with the same settings,
taken from the Hadoop keys the worker config gives Spark (``spark.hadoop.fs.s3a.endpoint``, ``...path.style.access``,
``...endpoint.region``, ``...access.key``/``secret.key``/``session.token``, each also per bucket as
``fs.s3a.bucket.<bucket>.<key>``). Without keys the AWS default chain applies, as it does for S3A: the
environment (``AWS_ACCESS_KEY_ID``...), the profile, the instance role. A secret is never shown (``repr``).

A write is atomic either way: locally a temporary file, ``fsync`` and a rename (a crash leaves the old or the new
file), in a bucket one whole-object PUT (S3 has no half-written object).

>>> files = Locations({"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000"})
>>> files.join("s3a://lake/state", "_connectors", "orders.json")
's3a://lake/state/_connectors/orders.json'
>>> files.join("/var/lib/kconnect", "_connectors")
'/var/lib/kconnect/_connectors'
>>> files                                                    # the endpoint, never a key
Locations(s3a endpoint=http://127.0.0.1:9000)
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = ["Locations", "REMOTE_SCHEMES", "S3_SCHEMES", "S3Settings", "is_remote", "remote_scheme"]

#: Object-store schemes the worker's own state may live under: those Spark's checkpoints reach through a Hadoop
#: connector the project declares (hadoop-aws in the ``object-stores`` profile of jvm/pom.xml).
REMOTE_SCHEMES = ("s3a",)
#: The schemes :class:`Locations` reaches in a bucket (a Delta table's ``s3://`` URI as well as Hadoop's ``s3a://``).
S3_SCHEMES = ("s3a", "s3")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: Where S3A settings come from: a Spark config's ``spark.hadoop.fs.s3a.*`` keys, or the ``fs.s3a.*`` keys that
#: Spark's and Delta's readers and writers take as per-query options (a Delta connector's config).
_HADOOP_PREFIXES = ("spark.hadoop.fs.s3a.", "fs.s3a.")


def remote_scheme(location: str) -> str | None:
    """The lower-cased scheme of a URI other than ``file://`` (None for a local path)."""
    found = _URI.match(location.strip())
    scheme = found.group(1).lower() if found else None
    return None if scheme in (None, "file") else scheme


def is_remote(location: str) -> bool:
    """Whether ``location`` is an object-store URI (not a local path or ``file://``)."""
    return remote_scheme(location) is not None


class Locations:
    """Files under local paths and ``s3a://`` URIs, with the worker's Hadoop S3A settings (``hadoop``: Spark
    settings, of which the ``spark.hadoop.fs.s3a.*`` keys count)."""

    def __init__(self, hadoop: Mapping[str, Any] | None = None):
        self._s3a = {k[len(prefix):]: str(v) for k, v in (hadoop or {}).items() if v is not None
                     for prefix in _HADOOP_PREFIXES if k.startswith(prefix)}
        self._filesystems: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # picklable (a connector's, to its executors): no clients, no lock
        return {"_s3a": self._s3a}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._s3a = state["_s3a"]
        self._filesystems = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        endpoint = self._s3a.get("endpoint")
        return f"Locations(s3a endpoint={endpoint})" if endpoint else "Locations()"

    # -- names --------------------------------------------------------------------------------------
    @staticmethod
    def join(location: str, *names: str) -> str:
        """``location`` with ``names`` appended (``/`` in a URI, the OS separator on a local path)."""
        if is_remote(location):
            return posixpath.join(location.rstrip("/"), *names)
        return os.path.join(location, *names)

    @staticmethod
    def parent(location: str) -> str:
        return posixpath.dirname(location.rstrip("/")) if is_remote(location) else os.path.dirname(location)

    @staticmethod
    def absolute(location: str, base: str) -> str:
        """A local path made absolute against ``base``; a URI as it is (without a trailing slash)."""
        if is_remote(location):
            return location.strip().rstrip("/")
        return os.path.abspath(os.path.join(base, location))

    # -- reading --------------------------------------------------------------------------------------
    def read_text(self, location: str) -> str:
        """The file's text; FileNotFoundError when it does not exist."""
        if not is_remote(location):
            with open(location, encoding="utf-8") as f:
                return f.read()
        return self.read_bytes(location).decode("utf-8")

    def read_bytes(self, location: str) -> bytes:
        """The file's bytes; FileNotFoundError when it does not exist."""
        if not is_remote(location):
            with open(location, "rb") as f:
                return f.read()
        fs, path = self._remote(location)
        try:
            with fs.open_input_stream(path) as f:
                return bytes(f.read())
        except FileNotFoundError:
            raise
        except OSError as e:
            if _missing(e):
                raise FileNotFoundError(location) from e
            raise OSError(f"Cannot read {location}: {e}") from e

    def size(self, location: str) -> int:
        """The file's size in bytes; FileNotFoundError when it does not exist."""
        if not is_remote(location):
            return os.path.getsize(location)
        from pyarrow import fs as pafs

        filesystem, path = self._remote(location)
        info = filesystem.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(location)
        return int(info.size)

    def filesystem(self, location: str) -> tuple[Any, str]:
        """A ``pyarrow.fs`` file system and the path in it of ``location`` (for pyarrow's own readers and writers,
        such as ``pyarrow.parquet``)."""
        if not is_remote(location):
            from pyarrow import fs as pafs

            return pafs.LocalFileSystem(), os.path.abspath(location)
        return self._remote(location)

    def storage_options(self, location: str) -> dict[str, str]:
        """The storage options of delta-rs (``deltalake``, Rust's object_store) that reach ``location`` with the same
        settings as :meth:`filesystem`: the endpoint, its addressing style and plain HTTP, the region, and keys
        when the settings give them (else delta-rs takes the AWS default chain, as S3A does). {} for a local path.
        The result holds secrets: pass it on, never log it."""
        if not is_remote(location):
            return {}
        return self._s3_settings(self._bucket(location)).delta_rs_options()

    def s3_settings(self, location: str) -> S3Settings:
        """The S3A settings that reach ``location``'s bucket (for an S3 client of its own, such as the worker
        group's in a bucket). The result holds secrets: pass it on, never log it."""
        return self._s3_settings(self._bucket(location))

    def exists(self, location: str) -> bool:
        if not is_remote(location):
            return os.path.exists(location)
        from pyarrow import fs as pafs

        filesystem, path = self._remote(location)
        return bool(filesystem.get_file_info(path).type != pafs.FileType.NotFound)

    def names(self, location: str) -> list[str]:
        """The names directly under ``location`` (files and directories), sorted; [] when there is none."""
        if not is_remote(location):
            try:
                return sorted(os.listdir(location))
            except FileNotFoundError:
                return []
        from pyarrow import fs as pafs

        filesystem, path = self._remote(location)
        infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted({posixpath.basename(i.path.rstrip("/")) for i in infos})

    def is_dir(self, location: str) -> bool:
        """Whether ``location`` holds anything (an object store has only prefixes, no empty directories)."""
        if not is_remote(location):
            return os.path.isdir(location)
        return bool(self.names(location))

    # -- writing ------------------------------------------------------------------------------------
    def write_text(self, location: str, text: str, *, private: bool = False) -> None:
        """Write ``text`` atomically (see the module doc); ``private``: a new local file gets mode 0600."""
        self.write_bytes(location, text.encode("utf-8"), private=private)

    def write_bytes(self, location: str, data: bytes, *, private: bool = False) -> None:
        """Write ``data`` atomically (see the module doc); ``private``: a new local file gets mode 0600."""
        if is_remote(location):
            filesystem, path = self._remote(location)
            try:
                with filesystem.open_output_stream(path) as f:
                    f.write(data)
            except OSError as e:
                raise OSError(f"Cannot write {location}: {e}") from e
            return
        directory = os.path.dirname(location) or "."
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            if private:
                os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, location)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # make the rename itself durable (not on every platform)
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def create_bytes(self, location: str, data: bytes, *, private: bool = False) -> bool:
        """Create ``location`` holding ``data`` unless it exists: True when this call created it, False when it
        existed (or another writer's create won a race; read what it holds). Locally a complete temporary file
        linked into place; in a bucket one PUT with ``If-None-Match: *`` (boto3, the ``s3`` extra), without boto3
        a PUT of a missing object read back (two writers racing there may both read their own for a moment)."""
        if is_remote(location):
            try:
                client = self.s3_client(location)
            except ImportError:
                if self.exists(location):
                    return False
                self.write_bytes(location, data, private=private)
                return self.read_bytes(location) == data
            parts = urlsplit(location.strip())
            try:
                client.put_object(Bucket=parts.netloc, Key=parts.path.lstrip("/"), Body=data, IfNoneMatch="*")
                return True
            except Exception as e:
                code = str((getattr(e, "response", None) or {}).get("Error", {}).get("Code", ""))
                if code in ("PreconditionFailed", "ConditionalRequestConflict"):  # 412: it exists; 409: racing
                    return False
                raise OSError(f"Cannot write {location}: {code or type(e).__name__}") from e
        directory = os.path.dirname(location) or "."
        os.makedirs(directory, mode=0o700 if private else 0o777, exist_ok=True)  # private: a new folder is 0700
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)  # mode 0600, as write_bytes leaves its files
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, location)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def s3_client(self, location: str) -> Any:
        """A boto3 S3 client for ``location``'s bucket with these S3A settings (else the AWS default chain).
        ImportError without boto3 (the ``s3`` extra)."""
        import boto3
        from botocore.config import Config

        kwargs, addressing = self.s3_settings(location).boto3_options()
        config = Config(s3={"addressing_style": addressing}, connect_timeout=10, read_timeout=30,
                        retries={"max_attempts": 3, "mode": "standard"})
        return boto3.client("s3", config=config, **kwargs)

    def makedirs(self, location: str) -> None:
        """Create a local directory and its parents; nothing in a bucket (a prefix exists with its objects)."""
        if not is_remote(location):
            os.makedirs(location, exist_ok=True)

    def remove(self, location: str) -> None:
        """Delete a file; nothing when it does not exist."""
        if not is_remote(location):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(location)
            return
        filesystem, path = self._remote(location)
        with contextlib.suppress(FileNotFoundError):
            filesystem.delete_file(path)

    def remove_tree(self, location: str) -> None:
        """Delete a directory (a prefix) and everything under it; nothing when it does not exist."""
        if not is_remote(location):
            import shutil

            shutil.rmtree(location, ignore_errors=True)
            return
        filesystem, path = self._remote(location)
        with contextlib.suppress(FileNotFoundError):
            filesystem.delete_dir(path)

    # -- the object store ---------------------------------------------------------------------------
    @staticmethod
    def _bucket(location: str) -> str:
        scheme = remote_scheme(location)
        if scheme not in S3_SCHEMES:
            raise ValueError(f"{location}: files are reached on a local path or under "
                             f"{', '.join(s + '://' for s in S3_SCHEMES)}")
        return urlsplit(location.strip()).netloc

    def _remote(self, location: str) -> tuple[Any, str]:
        bucket = self._bucket(location)
        parts = urlsplit(location.strip())
        with self._lock:
            if bucket not in self._filesystems:
                self._filesystems[bucket] = self._s3(bucket)
            return self._filesystems[bucket], f"{bucket}{parts.path}".rstrip("/")

    def _setting(self, bucket: str, key: str) -> str | None:
        """Hadoop's lookup: ``fs.s3a.bucket.<bucket>.<key>`` before ``fs.s3a.<key>``."""
        return self._s3a.get(f"bucket.{bucket}.{key}", self._s3a.get(key))

    def _s3_settings(self, bucket: str) -> S3Settings:
        """S3A's settings for ``bucket`` (its per-bucket forms first, as Hadoop looks them up), the endpoint as a URL
        with its scheme (``fs.s3a.connection.ssl.enabled`` decides one left out)."""
        endpoint = self._setting(bucket, "endpoint") or ""
        if endpoint and "://" not in endpoint:
            ssl = (self._setting(bucket, "connection.ssl.enabled") or "true").lower() != "false"
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        return S3Settings(self._setting(bucket, "access.key"), self._setting(bucket, "secret.key"),
                           self._setting(bucket, "session.token"), self._setting(bucket, "endpoint.region"), endpoint,
                           (self._setting(bucket, "path.style.access") or "false").lower() == "true")

    def _s3(self, bucket: str) -> Any:
        from pyarrow import fs as pafs

        return pafs.S3FileSystem(**self._s3_settings(bucket).pyarrow_options())


class S3Settings(NamedTuple):
    """A bucket's S3A settings (:meth:`Locations.s3_settings`)."""

    access: str | None
    secret: str | None
    token: str | None
    region: str | None
    endpoint: str  # a URL with its scheme, or ""
    path_style: bool

    # One method per client that takes these settings, each in that client's own keywords. Their results hold
    # secrets: pass them on, never log them.
    def pyarrow_options(self) -> dict[str, Any]:
        """Keywords of ``pyarrow.fs.S3FileSystem``."""
        options: dict[str, Any] = {}
        if self.access and self.secret:
            options.update(access_key=self.access, secret_key=self.secret)
            if self.token:
                options["session_token"] = self.token
        if self.region:
            options["region"] = self.region
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
        options["force_virtual_addressing"] = bool(self.endpoint) and not self.path_style
        return options

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's storage options (Rust's object_store); without keys it takes the AWS default chain."""
        options: dict[str, str] = {}
        if self.access and self.secret:
            options.update(aws_access_key_id=self.access, aws_secret_access_key=self.secret)
            if self.token:
                options["aws_session_token"] = self.token
        if self.region:
            options["aws_region"] = self.region
        if self.endpoint:
            options["aws_endpoint"] = self.endpoint
            if self.endpoint.lower().startswith("http://"):
                options["aws_allow_http"] = "true"
            options["aws_virtual_hosted_style_request"] = "false" if self.path_style else "true"
        return options

    def boto3_options(self) -> tuple[dict[str, Any], str]:
        """Keywords of ``boto3.client("s3", ...)`` and the addressing style of its ``botocore`` ``Config``."""
        kwargs: dict[str, Any] = {}
        if self.access and self.secret:
            kwargs.update(aws_access_key_id=self.access, aws_secret_access_key=self.secret)
            if self.token:
                kwargs["aws_session_token"] = self.token
        if self.region:
            kwargs["region_name"] = self.region
        if not self.endpoint:
            return kwargs, "auto"
        kwargs["endpoint_url"] = self.endpoint
        return kwargs, "path" if self.path_style else "virtual"


def _missing(error: OSError) -> bool:
    text = str(error)
    return "NoSuchKey" in text or "Path does not exist" in text or "not found" in text.lower()
