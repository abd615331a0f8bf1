"""Confluent's HDFS 3 sink (``io.confluent.connect.hdfs3.Hdfs3SinkConnector``): records into files of HDFS, named and
filled as Confluent's HDFS connectors do (storage-common's formats and partitioners: :mod:`.layout`, :mod:`.formats`,
:mod:`.partitioners`), through WebHDFS, the NameNode's HTTP API.

A committed file is ``<topics.dir>/<topic>/<encodedPartition>/<topic>+<partition>+<start offset>+<end offset>.<ext>``
(both offsets zero-padded to ``filename.offset.zero.pad.width``). As Confluent's connector does, each Spark task
writes its files under ``<topics.dir>/+tmp/<topic>/<encodedPartition>/<uuid>_tmp.<ext>`` and the driver renames them
to their committed names when Spark commits the micro-batch: a failed or killed batch leaves only temporary files,
and a replayed one finds its files committed already (same names, same records) and drops its temporary copies, so
every record is in exactly one committed file with a deterministic partitioner.

The Python workers have no JVM, so the files go through WebHDFS (plain HTTP, no libhdfs): the NameNode's HTTP
address comes from ``hadoop.conf.dir``'s ``hdfs-site.xml`` (``dfs.namenode.http-address``, the HA name service's
NameNodes, ``dfs.http.policy``), else from a ``webhdfs://host:port`` (``swebhdfs://``) ``hdfs.url``, else the host of
``hdfs.url`` and Hadoop 3's default HTTP port, 9870. Simple authentication: the user is ``HADOOP_USER_NAME`` or the
driver's OS user, as Hadoop's client takes it.

>>> (df.writeStream.format("kconnect")                                        # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.hdfs3.Hdfs3SinkConnector")
...    .option("hdfs.url", "hdfs://namenode:8020").option("hadoop.conf.dir", "/etc/hadoop/conf")
...    .option("flush.size", "1000").option("format.class", "io.confluent.connect.hdfs3.avro.AvroFormat")
...    .option("checkpointLocation", "/tmp/ckpt").start())
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import posixpath
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

from ...config import ConfigDef, Importance, Type
from ...config.definition import Support
from ...errors import ConfigError, ConfigProblem, ConnectError
from ..base import CommitContext, WriteContext
from .common import STORAGE_COMMON, StorageLayout, Written, short_class, write_objects
from .formats import AVRO_CODECS, ByteArrayFormat, Encoded, Format, ParquetFormat, whole
from .object_sink import FORMAT_KEYS, FORMAT_KINDS, ObjectStoreSink

__all__ = ["Hdfs3SinkConnector", "HdfsStore", "WebHdfs", "namenode_http_addresses"]

log = logging.getLogger(__name__)

_FORMAT_PACKAGE = "io.confluent.connect.hdfs3."
_FORMATS = {**{k: v for k, v in FORMAT_KINDS.items() if k != "ByteArrayFormat"}, "StringFormat": "string"}
_REFUSED_FORMATS = {"OrcFormat": "ORC files are not written here yet (issue #35)",
                    "ByteArrayFormat": "the HDFS 3 sink has no ByteArrayFormat (StringFormat writes string values)"}
#: The extension of each format's files (Confluent's HDFS connectors' RecordWriterProviders).
_EXTENSIONS = {"json": ".json", "avro": ".avro", "parquet": ".parquet", "string": ".txt"}
_STORAGE_CLASS = "io.confluent.connect.hdfs3.storage.HdfsStorage"
#: Hadoop 3's default ``dfs.namenode.http-address`` / ``dfs.namenode.https-address`` ports.
_HTTP_PORT, _HTTPS_PORT = 9870, 9871
_TEMP_DIR = "+tmp"
_KERBEROS = ("Kerberos (SPNEGO) is not supported by this sink's WebHDFS client yet; use a cluster with simple "
             "authentication or a WebHDFS gateway")
_HIVE = ("Hive integration is not supported here: the files are written as Confluent's connector names them; create "
         "an external table over <topics.dir>/<topic>, or write a Delta or Iceberg table with their sinks")

_HDFS = "HDFS"
_SECURITY = "Security"
_HIVE_GROUP = "Hive"
HDFS_KEYS = (
    ConfigDef()
    .define("hdfs.url", Type.STRING, None, importance=Importance.HIGH, group=_HDFS,
            doc="The HDFS to write to: hdfs://namenode:port (the NameNode's RPC address; a path after it prefixes "
                "topics.dir), or webhdfs://host:port (swebhdfs:// for HTTPS) for the NameNode's HTTP address. Set "
                "this or store.url.")
    .define("store.url", Type.STRING, None, importance=Importance.HIGH, group=_HDFS,
            doc="The newer name of hdfs.url (Confluent deprecates hdfs.url for it); set one of them.")
    .define("hadoop.conf.dir", Type.STRING, "", importance=Importance.HIGH, group=_HDFS,
            doc="A Hadoop client configuration directory on the driver: its hdfs-site.xml gives the NameNode's HTTP "
                "address (dfs.namenode.http-address, the HA name service's NameNodes, dfs.http.policy).")
    .define("hadoop.home", Type.STRING, "", importance=Importance.HIGH, group=_HDFS, support=Support.NO_EFFECT,
            note="no Hadoop installation is used: the files go through WebHDFS (hadoop.conf.dir is read)",
            doc="The Hadoop home directory.")
    .define("logs.dir", Type.STRING, "logs", importance=Importance.HIGH, group=_HDFS, support=Support.NO_EFFECT,
            note="no write-ahead log is kept: Spark's checkpoint records which micro-batch committed, and files are "
                 "renamed from +tmp only when Spark commits",
            doc="The top-level directory of the write-ahead logs.")
    .define("topic.capture.groups.regex", Type.STRING, None, importance=Importance.LOW, group=_HDFS,
            support=Support.REFUSED, note="${n} substitutions in topics.dir and logs.dir are not supported here",
            doc="A regex whose capture groups ${0}..${n} may be used in topics.dir and logs.dir.")
    .define("format.class", Type.CLASS, _FORMAT_PACKAGE + "avro.AvroFormat", importance=Importance.HIGH, group=_HDFS,
            doc="The format of the files: AvroFormat (the default), JsonFormat, ParquetFormat or StringFormat "
                "(io.confluent.connect.hdfs3.<format>.<Name>Format, or the simple name).")
    .define("storage.class", Type.CLASS, _STORAGE_CLASS, importance=Importance.HIGH, group=_HDFS,
            doc=f"Only {_STORAGE_CLASS}.")
    .define("hdfs.authentication.kerberos", Type.BOOLEAN, False, importance=Importance.HIGH, group=_SECURITY,
            support=Support.REFUSED, note=_KERBEROS, doc="Whether HDFS uses Kerberos for authentication.")
    .define("connect.hdfs.principal", Type.STRING, "", importance=Importance.HIGH, group=_SECURITY,
            support=Support.NOT_SUPPORTED, note=_KERBEROS, doc="The principal of the connector (Kerberos).")
    .define("connect.hdfs.keytab", Type.STRING, "", importance=Importance.HIGH, group=_SECURITY,
            support=Support.NOT_SUPPORTED, note=_KERBEROS, doc="The keytab of connect.hdfs.principal (Kerberos).")
    .define("hdfs.namenode.principal", Type.STRING, "", importance=Importance.HIGH, group=_SECURITY,
            support=Support.NOT_SUPPORTED, note=_KERBEROS, doc="The principal of the NameNode (Kerberos).")
    .define("kerberos.ticket.renew.period.ms", Type.LONG, 3600000, importance=Importance.LOW, group=_SECURITY,
            support=Support.NOT_SUPPORTED, note=_KERBEROS, doc="The period to renew the Kerberos ticket in.")
    .define("hive.integration", Type.BOOLEAN, False, importance=Importance.HIGH, group=_HIVE_GROUP,
            support=Support.REFUSED, note=_HIVE, doc="Create and update Hive tables over the files.")
    .define("hive.metastore.uris", Type.STRING, "", importance=Importance.HIGH, group=_HIVE_GROUP,
            support=Support.NOT_SUPPORTED, note=_HIVE, doc="The Hive metastore URIs.")
    .define("hive.conf.dir", Type.STRING, "", importance=Importance.HIGH, group=_HIVE_GROUP,
            support=Support.NOT_SUPPORTED, note=_HIVE, doc="The Hive configuration directory.")
    .define("hive.home", Type.STRING, "", importance=Importance.HIGH, group=_HIVE_GROUP,
            support=Support.NOT_SUPPORTED, note=_HIVE, doc="The Hive home directory.")
    .define("hive.database", Type.STRING, "default", importance=Importance.HIGH, group=_HIVE_GROUP,
            support=Support.NOT_SUPPORTED, note=_HIVE, doc="The Hive database of the tables.")
    .define("hive.table.name", Type.STRING, "${topic}", importance=Importance.LOW, group=_HIVE_GROUP,
            support=Support.NOT_SUPPORTED, note=_HIVE, doc="The Hive table of a topic.")
)


# -- where WebHDFS answers ------------------------------------------------------------------------------------------
def _site(conf_dir: str) -> dict[str, str]:
    """The properties of ``<conf_dir>/hdfs-site.xml`` (none when the file is absent)."""
    path = os.path.join(conf_dir, "hdfs-site.xml")
    if not os.path.exists(path):
        return {}
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise ConfigError([ConfigProblem("hadoop.conf.dir", f"Invalid value {conf_dir} for configuration "
                                         f"hadoop.conf.dir: its hdfs-site.xml cannot be read: {e}")]) from None
    return {(p.findtext("name") or "").strip(): (p.findtext("value") or "").strip() for p in root.iter("property")}


def namenode_http_addresses(url: str, conf_dir: str = "") -> tuple[str, ...]:
    """The WebHDFS base URLs (``http://host:port``) of the NameNode(s) of ``url`` (``hdfs://`` or ``webhdfs://``),
    in the order to try them; ``conf_dir``'s ``hdfs-site.xml`` says where they listen.

    >>> namenode_http_addresses("hdfs://nn.example:8020")
    ('http://nn.example:9870',)
    >>> namenode_http_addresses("webhdfs://nn.example:50070/data")
    ('http://nn.example:50070',)
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("webhdfs", "swebhdfs"):
        web = "https" if scheme == "swebhdfs" else "http"
        return (f"{web}://{parts.hostname}:{parts.port or (_HTTPS_PORT if web == 'https' else _HTTP_PORT)}",)
    site = _site(conf_dir) if conf_dir else {}
    https = site.get("dfs.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    kind, web, port = ("https", "https", _HTTPS_PORT) if https else ("http", "http", _HTTP_PORT)
    host = parts.hostname or ""

    def address(value: str) -> str:
        name, _, number = value.rpartition(":")
        if name in ("", "0.0.0.0"):  # a wildcard bind address: the NameNode is reached at hdfs.url's host
            name = host
        return f"{web}://{name}:{number or port}"

    if host in [s.strip() for s in site.get("dfs.nameservices", "").split(",")]:  # an HA name service
        namenodes = [n.strip() for n in site.get(f"dfs.ha.namenodes.{host}", "").split(",") if n.strip()]
        found = [site[k] for k in (f"dfs.namenode.{kind}-address.{host}.{n}" for n in namenodes) if k in site]
        if not found:
            raise ConfigError([ConfigProblem("hadoop.conf.dir", f"Invalid value {conf_dir} for configuration "
                                             f"hadoop.conf.dir: its hdfs-site.xml names the name service {host} but "
                                             f"no dfs.namenode.{kind}-address.{host}.<namenode>")])
        return tuple(address(a) for a in found)
    configured = site.get(f"dfs.namenode.{kind}-address")
    if not configured:
        return (f"{web}://{host}:{port}",)
    webhdfs = address(configured)
    if (urlsplit(webhdfs).hostname or "").lower() != host.lower():
        # The NameNode of hdfs.url serves WebHDFS itself: an hdfs-site.xml naming another host would send the
        # worker's requests (as its user) to wherever that file says, past the hdfs.url the worker allowed.
        raise ConfigError([ConfigProblem("hadoop.conf.dir", f"Invalid value {conf_dir} for configuration "
                                         f"hadoop.conf.dir: its hdfs-site.xml puts the NameNode's WebHDFS "
                                         f"(dfs.namenode.{kind}-address) on another host than {host}, the host of "
                                         f"hdfs.url; name that host in hdfs.url (or a webhdfs:// URL)")])
    return (webhdfs,)


# -- the client ------------------------------------------------------------------------------------------------------
class WebHdfsError(ConnectError):
    """A WebHDFS request that failed (the NameNode or DataNode unreachable, or an error answer)."""


class WebHdfs:
    """The WebHDFS operations the sink needs (create, rename, mkdirs, delete, status, list, read) over ``requests``;
    ``endpoints`` are the NameNode(s)' base URLs, tried in order (an HA standby answers StandbyException). Picklable:
    the HTTP session is made where it is used."""

    def __init__(self, endpoints: Sequence[str], user: str, timeout: float = 60.0):
        self.endpoints = tuple(endpoints)
        self.user = user
        self.timeout = timeout
        self._session: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None}

    def session(self) -> Any:
        if self._session is None:
            try:
                import requests
            except ImportError:
                raise ConnectError("The HDFS sink needs requests: pip install 'spark-connect-bridge[hdfs]'") from None
            self._session = requests.Session()
        return self._session

    def _call(self, method: str, path: str, op: str, **params: Any) -> Any:
        import requests

        query = {"op": op, "user.name": self.user, **params}
        failures = []
        for endpoint in self.endpoints:
            try:
                answer = self.session().request(method, f"{endpoint}/webhdfs/v1{quote(path)}", params=query,
                                                allow_redirects=False, timeout=self.timeout)
            except requests.RequestException as e:
                failures.append(f"{endpoint}: {type(e).__name__}")
                continue
            if answer.status_code == 403 and "StandbyException" in answer.text:
                failures.append(f"{endpoint}: standby")
                continue
            if answer.status_code >= 400:
                raise WebHdfsError(f"{op} {path}: HTTP {answer.status_code} {_remote_message(answer)}")
            return answer
        raise WebHdfsError(f"{op} {path}: no NameNode answered ({'; '.join(failures)})")

    def create(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` (replacing it; parent directories are made): the NameNode names a DataNode,
        which takes the bytes."""
        import requests

        answer = self._call("PUT", path, "CREATE", overwrite="true")
        location = answer.headers.get("Location")
        if answer.status_code != 307 or not location:
            raise WebHdfsError(f"CREATE {path}: the NameNode answered HTTP {answer.status_code} without a DataNode")
        try:
            stored = self.session().put(location, data=data, headers={"Content-Type": "application/octet-stream"},
                                        timeout=self.timeout)
        except requests.RequestException as e:
            raise WebHdfsError(f"CREATE {path}: the DataNode {urlsplit(location).netloc} did not answer "
                               f"({type(e).__name__})") from None
        if stored.status_code != 201:
            raise WebHdfsError(f"CREATE {path}: the DataNode answered HTTP {stored.status_code} "
                               f"{_remote_message(stored)}")

    def rename(self, source: str, destination: str) -> bool:
        """Whether ``source`` became ``destination`` (false: the destination exists, or its parent does not)."""
        return bool(self._call("PUT", source, "RENAME", destination=destination).json().get("boolean"))

    def mkdirs(self, path: str) -> None:
        if not self._call("PUT", path, "MKDIRS").json().get("boolean"):
            raise WebHdfsError(f"MKDIRS {path}: refused")

    def delete(self, path: str, recursive: bool = False) -> bool:
        return bool(self._call("DELETE", path, "DELETE", recursive=str(recursive).lower()).json().get("boolean"))

    def status(self, path: str) -> dict[str, Any] | None:
        """The FileStatus of ``path``, or None when it does not exist."""
        try:
            return dict(self._call("GET", path, "GETFILESTATUS").json()["FileStatus"])
        except WebHdfsError as e:
            if "FileNotFoundException" in str(e) or "HTTP 404" in str(e):
                return None
            raise

    def list(self, path: str) -> list[dict[str, Any]]:
        """The FileStatus of each entry of the directory ``path`` (``pathSuffix`` its name, ``type`` FILE or
        DIRECTORY)."""
        return list(self._call("GET", path, "LISTSTATUS").json()["FileStatuses"]["FileStatus"])

    def read(self, path: str) -> bytes:
        answer = self._call("GET", path, "OPEN")
        if answer.status_code == 307:
            answer = self.session().get(answer.headers["Location"], timeout=self.timeout)
            if answer.status_code != 200:
                raise WebHdfsError(f"OPEN {path}: the DataNode answered HTTP {answer.status_code} "
                                   f"{_remote_message(answer)}")
        return bytes(answer.content)


def _remote_message(answer: Any) -> str:
    """The ``RemoteException`` of a WebHDFS error answer (exception: message), else the start of its body."""
    try:
        remote = answer.json()["RemoteException"]
        message = str(remote.get("message", "")).split("\n", 1)[0]  # a DataNode appends the Java stack
        return f"{remote.get('exception')}: {message}"
    except (ValueError, KeyError, TypeError):
        return answer.text[:200]


# -- the store -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Staged:
    """The commit message of one Spark task: what it wrote, and (temporary file, committed name) to rename."""

    written: Written
    files: tuple[tuple[str, str], ...]


class HdfsStore:
    """Files of one HDFS, written under ``+tmp`` by executors (:meth:`put`) and renamed to their committed names by
    the driver (:meth:`commit_file`)."""

    noun = "file"

    def __init__(self, key: str, url: str, client: WebHdfs, topics_dir: str, extension: str):
        self.key = key  # the config key naming the HDFS (hdfs.url or store.url), for errors
        self.url = url
        self.client = client
        self.base = urlsplit(url).path.rstrip("/")
        self.topics_dir = topics_dir
        self.extension = extension
        self.staged: list[tuple[str, str]] = []

    def where(self) -> str:
        return f"HDFS {self.url} ({self.key}; WebHDFS at {', '.join(self.client.endpoints)})"

    def path(self, name: str) -> str:
        """The absolute HDFS path of a name under ``hdfs.url`` (``topics/t/partition=0/...``)."""
        return posixpath.join("/", self.base.lstrip("/"), name.lstrip("/"))

    def _temp_name(self, key: str) -> str:
        directory = posixpath.dirname(key)
        topics = self.topics_dir.strip("/")
        relative = directory.lstrip("/")[len(topics):].lstrip("/") if topics else directory
        return posixpath.join(topics, _TEMP_DIR, relative, f"{uuid.uuid4()}_tmp{self.extension}")

    def put(self, key: str, data: Encoded) -> None:
        """Write one file under ``+tmp``; it gets the committed name ``key`` when the batch commits."""
        temp = self.path(self._temp_name(key))
        try:
            self.client.create(temp, whole(data))
        except WebHdfsError as e:
            raise ConnectError(f"Could not write file {self.path(key)!r} to {self.where()}: {e}") from None
        self.staged.append((temp, self.path(key)))

    def commit_file(self, temp: str, final: str) -> None:
        """Rename a written file to its committed name; a committed file of that name (a replayed batch's, the same
        records) wins and the temporary copy goes."""
        try:
            if self.client.rename(temp, final):
                return
            if self.client.status(final) is not None:
                self.client.delete(temp)
                log.info("%s exists (a replayed batch): its temporary copy %s is dropped", final, temp)
                return
            raise WebHdfsError(f"RENAME {temp} -> {final}: refused")
        except WebHdfsError as e:
            raise ConnectError(f"Could not commit file {final!r} to {self.where()}: {e}") from None

    def mkdirs(self, path: str) -> None:
        try:
            self.client.mkdirs(path)
        except WebHdfsError as e:
            raise ConnectError(f"Could not make directory {path!r} in {self.where()}: {e}") from None

    def drop(self, temp: str) -> None:
        try:
            self.client.delete(temp)
        except WebHdfsError as e:
            log.warning("Could not delete the temporary file %s of an aborted batch from %s: %s", temp,
                        self.where(), e)

    def __repr__(self) -> str:
        return f"HdfsStore({self.where()})"


# -- the sink --------------------------------------------------------------------------------------------------------
def _url(config: Any) -> tuple[str, str] | None:
    """(key, URL) naming the HDFS: ``store.url``, else ``hdfs.url``."""
    for key in ("store.url", "hdfs.url"):
        value = str(config[key] or "").strip()
        if value:
            return key, value
    return None


def _problems(config: Any) -> list[ConfigProblem]:
    problems = Hdfs3SinkConnector.common_problems(config)
    named = _url(config)
    if named is None:
        problems.append(ConfigProblem("hdfs.url", "Missing required configuration hdfs.url (or store.url): the "
                                                  "HDFS to write to, hdfs://namenode:port"))
    else:
        key, url = named
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("hdfs", "webhdfs", "swebhdfs") or not parts.hostname:
            problems.append(ConfigProblem(key, f"Invalid value {url} for configuration {key}: an "
                                               f"hdfs://host[:port][/path] URL (or webhdfs://, swebhdfs://)"))
        elif parts.username or parts.password or parts.query or parts.fragment:
            problems.append(ConfigProblem(key, f"Invalid value for configuration {key}: no user, query or fragment "
                                               f"in the URL"))
        else:
            try:
                namenode_http_addresses(url, str(config.hadoop_conf_dir or ""))
            except ConfigError as e:
                problems.extend(e.problems)
    if short_class(config.storage_class) != "HdfsStorage":
        problems.append(ConfigProblem("storage.class", f"Invalid value {config.storage_class} for configuration "
                                                       f"storage.class: {_STORAGE_CLASS}"))
    if str(config.avro_codec).lower() not in AVRO_CODECS:
        problems.append(ConfigProblem("avro.codec", f"Invalid value {config.avro_codec} for configuration avro.codec: "
                                                    f"one of {', '.join(AVRO_CODECS)}"))
    return problems


def _hadoop_user() -> str:
    """The user WebHDFS's simple authentication acts as: ``HADOOP_USER_NAME``, else the OS user (as Hadoop's client)."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class Hdfs3SinkConnector(ObjectStoreSink):
    """Writes records to HDFS files as Confluent's HDFS 3 sink names and fills them
    (``io.confluent.connect.hdfs3.Hdfs3SinkConnector``); exactly once with a deterministic partitioner."""

    kafka_class = "io.confluent.connect.hdfs3.Hdfs3SinkConnector"
    format_package = _FORMAT_PACKAGE
    format_kinds = _FORMATS
    refused_formats = _REFUSED_FORMATS
    sink_name = "HDFS 3 sink"
    has_views = False
    #: Names in HDFS (checked as hdfs.url's URIs by the worker's path policy), not local paths.
    object_store_keys: ClassVar[tuple[str, ...]] = ("topics.dir", "logs.dir")
    destination_keys: ClassVar[tuple[str, ...]] = ("hdfs.url", "store.url", "hadoop.conf.dir")
    config_def = HDFS_KEYS.merge(FORMAT_KEYS.without("store.url", "format.bytearray.extension",
                                                     "format.bytearray.separator"),
                                 STORAGE_COMMON).check(_problems)

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        named = _url(config)
        if named is None:  # refused by the config check; a connector is only built from a valid config
            raise ConfigError([ConfigProblem("hdfs.url", "Missing required configuration hdfs.url")])
        self._url_key, self._url = named
        # Resolved once, on the driver: executors need not see hadoop.conf.dir or the driver's user.
        self._client = WebHdfs(namenode_http_addresses(self._url, str(config.hadoop_conf_dir or "")), _hadoop_user())

    @classmethod
    def worker_credentials_destination(cls, props: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, URI) of the files: HDFS's simple authentication writes as the worker's user, so every config is
        checked against the worker's ``connector.allowed.paths`` URIs (``hdfs://namenode:8020/exports``)."""
        for key in ("store.url", "hdfs.url"):
            url = str(props.get(key) or "").strip().rstrip("/")
            if url:
                prefix = str(props.get("topics.dir") or "topics").strip().strip("/")
                return key, f"{url}/{prefix}"
        return None

    def store(self) -> HdfsStore:
        kind = self.format_kinds[short_class(self.config.format_class)]
        return HdfsStore(self._url_key, self._url, self._client, str(self.config.topics_dir), _EXTENSIONS[kind])

    def _compression(self) -> tuple[str, int]:
        return "none", -1

    def _format(self, format_class: Any = None, column: str = "value") -> Format:
        kind = self.format_kinds[short_class(format_class or self.config.format_class)]
        if kind == "string":  # Java's (String) value, then the platform's line separator
            return ByteArrayFormat(b"\n", _EXTENSIONS[kind])
        if kind == "parquet":  # the HDFS connectors name Parquet files .parquet, whatever the codec
            return _HdfsParquetFormat(str(self.config.parquet_codec))
        return super()._format(format_class, column)

    def layout(self) -> StorageLayout:
        return dataclasses.replace(super().layout(), file_delim="+", end_offset_in_name=True)

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import StringType

        if self.format_kinds[short_class(self.config.format_class)] == "string" and \
                "value" in schema.fieldNames() and not isinstance(schema["value"].dataType, StringType):
            raise ConfigError([ConfigProblem("format.class", f"StringFormat writes string values; the value is "
                                             f"{schema['value'].dataType.simpleString()} (value.converter="
                                             f"org.apache.kafka.connect.storage.StringConverter)")])
        super().validate_input(schema)

    # -- executor ---------------------------------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Any:  # a Staged
        layout = self._layout or self.layout()
        store = self.store()
        written = write_objects(batches, layout, store.put, ctx.partition_id)
        return Staged(written, tuple(store.staged))

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        staged = [m for m in messages if m is not None]
        store = self.store()
        for directory in sorted({posixpath.dirname(final) for m in staged for _, final in m.files}):
            store.mkdirs(directory)
        for message in staged:
            for temp, final in message.files:
                store.commit_file(temp, final)
        super().commit([m.written for m in staged], ctx)

    def abort(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        store = self.store()
        for message in (m for m in messages if m is not None):
            for temp, _ in message.files:
                store.drop(temp)
        log.warning("%s: batch %s aborted; its temporary files are removed and Spark replays it", self.name,
                    ctx.batch_id)


@dataclass(frozen=True)
class _HdfsParquetFormat(ParquetFormat):
    @property
    def extension(self) -> str:  # type: ignore[override]
        return ".parquet"
