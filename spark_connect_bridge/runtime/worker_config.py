"""The worker's own configuration (``worker.properties``), declared once like every plugin's config.

Kafka's ``connect-standalone.properties`` keys are accepted where they mean something here (``listeners``,
``rest.host.name``/``rest.port``, ``key.converter``/``value.converter`` with their sub-keys,
``offset.storage.file.filename``, ``topic.tracking.*``); keys that only configure Kafka clients are accepted and
warned about; anything else fails with a "did you mean" suggestion. ``spark.*`` keys go to the SparkSession.

>>> cfg = parse_worker_config({"offset.storage.dir": "/tmp/ckpt", "topics.dir": "/tmp/topics"})
>>> cfg.host, cfg.port
('127.0.0.1', 8083)
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..config import (
    ConfigDef,
    Importance,
    Range,
    Type,
    ValidString,
    load_config_file,
    parse_properties,
    resolve_providers,
)
from ..config.definition import Config
from ..config.providers import PROVIDER_KINDS, ProviderPolicy, ProviderSpec
from ..core.locations import REMOTE_SCHEMES, Locations, is_remote, remote_scheme
from ..errors import ConfigError, ConfigProblem
from .policy import ConnectorPolicy, is_remote_uri

__all__ = ["WORKER_CONFIG", "WorkerConfig", "parse_worker_config", "load_worker_config"]

log = logging.getLogger(__name__)

_CONVERTER_PREFIXES = ("key.converter.", "value.converter.", "header.converter.")
# Kafka worker keys that configure Kafka clients or the Kafka-based stores: accepted (so a Kafka
# worker.properties loads unchanged) and logged as having no effect.
KAFKA_ONLY_KEYS = ("offset.flush.interval.ms", "offset.flush.timeout.ms",
                   "plugin.discovery", "rest.advertised.listener", "admin.listeners", "rest.extension.classes",
                   "connector.client.config.override.policy",
                   "offset.storage.topic", "offset.storage.replication.factor", "offset.storage.partitions",
                   "rebalance.timeout.ms", "worker.sync.timeout.ms", "worker.unsync.backoff.ms", "connect.protocol",
                   "exactly.once.source.support", "inter.worker.key.generation.algorithm",
                   "inter.worker.key.size", "inter.worker.key.ttl.ms", "inter.worker.signature.algorithm",
                   "inter.worker.verification.algorithms",
                   "internal.key.converter", "internal.value.converter", "key.converter.schema.registry.url",
                   # the worker's own Kafka clients' settings (WorkerConfig declares them): the Kafka bus's
                   # clients take librdkafka/Spark's defaults
                   "client.dns.lookup", "client.id", "connections.max.idle.ms", "metadata.max.age.ms",
                   "metadata.recovery.rebootstrap.trigger.ms", "metadata.recovery.strategy", "metric.reporters",
                   "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
                   "receive.buffer.bytes", "send.buffer.bytes", "reconnect.backoff.max.ms", "reconnect.backoff.ms",
                   "request.timeout.ms", "retry.backoff.max.ms", "retry.backoff.ms",
                   "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms",
                   # topics are tables of the topic store, or Kafka topics the bus creates with broker defaults
                   "topic.creation.enable",
                   # the REST server's response headers are fixed (Jetty's HeaderFilter is not applied)
                   "response.http.headers.config")
KAFKA_ONLY_PREFIXES = ("producer.", "consumer.", "admin.", "sasl.", "security.",
                       "internal.key.converter.", "internal.value.converter.")
# The REST listener's TLS settings: Kafka's listeners.https.ssl.* keys, falling back to the worker's ssl.* keys.
_SSL_KEYS = ("keystore.location", "keystore.password", "keystore.type", "key.password", "keystore.certificate.chain",
             "keystore.key", "truststore.location", "truststore.password", "truststore.type",
             "truststore.certificates", "client.auth", "enabled.protocols", "protocol", "cipher.suites")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: connector.allowed.paths when unset, under the worker's working directory (beside topics.dir's work/topics).
DEFAULT_DATA_DIR = os.path.join("work", "data")

WORKER_CONFIG = (
    ConfigDef()
    .define("listeners", Type.LIST, None, importance=Importance.HIGH, group="REST",
            doc="URLs the REST API listens on (Kafka 3+ style), e.g. http://127.0.0.1:8083 or "
                "https://0.0.0.0:8443 (TLS with the listeners.https.ssl.* keys, else ssl.*). Only the first "
                "listener is served. Unset: rest.host.name/rest.port, else http://127.0.0.1:8083. An empty "
                "host (http://:8083) binds 127.0.0.1, not every interface: name 0.0.0.0 to expose the API.")
    .define("rest.host.name", Type.STRING, None, importance=Importance.LOW, group="REST",
            doc="Host to bind the REST API to (pre-3.0 Kafka style; listeners wins).")
    .define("rest.port", Type.INT, None, Range.between(0, 65535), Importance.LOW, group="REST",
            doc="Port of the REST API (pre-3.0 Kafka style; listeners wins). 0 picks a free port.")
    .define("rest.basic.auth.file", Type.STRING, "", importance=Importance.MEDIUM, group="REST",
            doc="Properties file of 'user: password[,role...]' lines (Jetty's realm format, as Kafka's "
                "BasicAuthSecurityRestExtension uses): passwords in clear or hashed as Jetty writes them "
                "(MD5:<hex>, CRYPT:<crypt>, OBF:<obfuscated>). When set, every REST request needs HTTP basic "
                "auth with one of these users. Passwords are never logged.")
    .define("rest.request.max.bytes", Type.INT, 1024 * 1024, Range.between(1024, 1 << 30), Importance.LOW,
            group="REST", doc="Largest request body accepted (413 above it); read only after authentication.")
    .define("rest.allowed.host.names", Type.LIST, None, importance=Importance.LOW, group="REST",
            doc="Host names the Host header of a request may name (403 otherwise), against DNS rebinding. "
                "Default: localhost, 127.0.0.1 and ::1 when the API binds a loopback address; any name otherwise "
                "(list the names clients use to check them).")
    .define("access.control.allow.origin", Type.STRING, "", importance=Importance.LOW, group="REST",
            doc="Kafka's CORS setting: comma-separated origins (or *) whose cross-site requests are served. "
                "Requests with any other Origin than the API's own are refused (403).")
    .define("access.control.allow.methods", Type.STRING, "", importance=Importance.LOW, group="REST",
            doc="Kafka's CORS setting: methods allowed in cross-site requests (default GET,POST,HEAD).")
    .define("plugin.allowed.modules", Type.LIST, [], importance=Importance.MEDIUM, group="Plugins",
            doc="Python modules (or packages, with their submodules) whose classes connector configs sent over "
                "REST may name by dotted path. Built-in plugins and installed entry points are always available; "
                "no other module is ever imported for a REST request.")
    .define("connector.allowed.paths", Type.LIST, None, importance=Importance.MEDIUM, group="Plugins",
            doc="Directories that connector configs sent over REST may read or write (file, *.path, *.dir, "
                "*.file, *.filename, *.location keys), checked after resolving links. Default: work/data under "
                "the worker's working directory (a directory of its own, apart from the worker's). The state "
                "directory (offset.storage.dir) is never allowed, nor a directory holding one of the worker's "
                "Python import paths or Spark's local directory (a module written there could be imported). "
                "URI entries (s3://bucket/prefix, gs://..., abfss://...) list the remote locations connectors may "
                "reach with the worker's own credentials; none by default.")
    .define("rest.sql.expressions.enable", Type.BOOLEAN, False, importance=Importance.MEDIUM, group="Plugins",
            doc="Allow connector configs sent over REST to use stages that take Spark SQL expressions (the Sql "
                "transform's filter and select). Off: such a config is refused (400 naming the key). On: every "
                "expression is parsed by Spark and may call only side-effect-free built-in functions (no "
                "subqueries, tables or files, reflect/java_method, UDFs, raise_error/assert_true, input_file_name, "
                "current_user, ...). Configs given to kconnect on the command line are the operator's own and "
                "not limited.")
    .define("state.encryption.key.file", Type.STRING, None, importance=Importance.MEDIUM, group="Storage",
            doc="Key file that encrypts the stored connector configs (Fernet); created with mode 0600 when "
                "missing. Default: <offset.storage.dir>/_keys/state.key. Keep it elsewhere (a secret mount) to "
                "protect configs from someone who can read the whole state directory.")
    .define("spark.bind.loopback", Type.BOOLEAN, True, importance=Importance.MEDIUM, group="Spark",
            doc="Bind the worker's own Spark driver (RPC, block manager, UI) to 127.0.0.1 when spark.master is "
                "local. Set false, or set spark.driver.bindAddress / spark.driver.host / SPARK_LOCAL_IP, to "
                "expose them.")
    .define("offset.storage.dir", Type.STRING, None, importance=Importance.HIGH, group="Storage",
            doc="Directory of the worker's durable state: one Spark checkpoint per connector (its offsets) and "
                "the stored connector configs and target states (_connectors/). A local or mounted directory, or "
                "an s3a://bucket/prefix URI (reached with the worker's spark.hadoop.fs.s3a.* settings, else the "
                "AWS default chain), so that a worker needs no disk of its own.")
    .define("offset.storage.file.filename", Type.STRING, None, importance=Importance.LOW, group="Storage",
            doc="Kafka standalone's offsets file; accepted for compatibility: its parent directory is used as "
                "offset.storage.dir when that is unset.")
    .define("topics.dir", Type.STRING, "work/topics", importance=Importance.HIGH, group="Storage",
            doc="Topic store directory: source connectors write their records here, one table per topic; sink "
                "connectors read their topics/topics.regex from here. May be an s3a://bucket/prefix URI (the "
                "store is then Parquet, written by Spark's exactly-once file sink).")
    .define("bootstrap.servers", Type.LIST, None, importance=Importance.HIGH, group="Storage",
            doc="Kafka brokers: when set, Kafka is the bus (the topic store): source connectors produce to Kafka "
                "topics, sink connectors consume them and commit their positions to the consumer group "
                "connect-<name>, dead-letter queues are Kafka topics (Spark's Kafka source and sink). The worker's "
                "security.protocol, ssl.* and sasl.* keys configure these clients. Unset: the Delta topic store "
                "under topics.dir.")
    .define("topic.store.format", Type.STRING, "auto", ValidString("auto", "delta", "parquet"), Importance.LOW,
            group="Storage", doc="Topic store table format (auto: Delta when deltalake is installed).")
    .define("trigger.interval.ms", Type.LONG, 1000, Range.at_least(0), Importance.MEDIUM, group="Spark",
            doc="Micro-batch interval of every connector query (processingTime trigger); each batch commits "
                "its offsets, so this is also the offset flush interval.")
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, 5000, Range.at_least(0), Importance.LOW, group="Spark",
            doc="When a connector is paused, stopped, restarted or deleted, or the worker stops: how long its "
                "batch in flight may take to finish and commit before it is cancelled (a cancelled batch is "
                "read again from the checkpoint on the next start).")
    .define("status.interval.ms", Type.LONG, 500, Range.at_least(50), Importance.LOW, group="Spark",
            doc="How often the worker polls its queries for state changes and metrics.")
    .define("warm.up.enable", Type.BOOLEAN, True, importance=Importance.LOW, group="Spark",
            doc="Run one tiny query through the connectors' path when the worker's own Spark session is up (a "
                "FileStreamSource over a one-line file into Spark's noop sink, in a temporary directory), so the "
                "first connector does not pay the Python workers' start and imports and the JVM's first run of "
                "the path. The REST API is ready before it runs; a connector submitted meanwhile starts after it; "
                "a failure is logged and the worker goes on. Skipped when the worker restarts stored connectors or "
                "runs on a session it was given.")
    .define("spark.master", Type.STRING, "local[*]", importance=Importance.HIGH, group="Spark",
            doc="Spark master of the worker's Spark application; every other spark.* key is passed to the "
                "SparkSession builder as it is.")
    .define("key.converter", Type.CLASS, None, importance=Importance.HIGH, group="Converters",
            doc="Default key converter of connectors that do not set one (with key.converter.* sub-keys), as "
                "in Kafka Connect.")
    .define("value.converter", Type.CLASS, None, importance=Importance.HIGH, group="Converters",
            doc="Default value converter of connectors that do not set one (with value.converter.* sub-keys).")
    .define("header.converter", Type.CLASS, None, importance=Importance.LOW, group="Converters",
            doc="Default header converter of connectors that do not set one.")
    .define("plugin.path", Type.LIST, None, importance=Importance.LOW, group="Plugins",
            doc="Kafka's plugin directories: not applicable (plugins are Python classes: built-ins, the "
                "spark_connect_bridge.* entry points and plugin.allowed.modules); accepted and warned about.")
    .define("group.id", Type.STRING, None, importance=Importance.HIGH, group="Distributed",
            doc="Kafka Connect's distributed worker group: workers with the same group.id share connector "
                "configs, target states and statuses, spread the connectors among themselves and take over a dead "
                "worker's (kconnect distributed). The group coordinates through Kafka (bootstrap.servers, the "
                "config and status storage topics, a consumer group named group.id) or, with group.store.url, "
                "through PostgreSQL or an S3 bucket.")
    .define("group.store.url", Type.STRING, None, importance=Importance.HIGH, group="Distributed",
            doc="Coordinate the group through PostgreSQL or an S3 bucket instead of Kafka: a PostgreSQL URL "
                "(postgresql://user@host:5432/db; libpq URL parameters such as sslmode apply), whose tables keyed "
                "by group.id replace Kafka's config/status storage topics, or s3a://bucket/prefix, where the group "
                "keeps one object changed by S3's conditional writes, reached with the worker's "
                "spark.hadoop.fs.s3a.* settings (needs the s3 extra). Either way, offsets stay in each query's "
                "checkpoint under offset.storage.dir, which every worker must reach.")
    .define("config.storage.topic", Type.STRING, None, importance=Importance.HIGH, group="Distributed",
            doc="A group on Kafka: the compacted one-partition topic of connector configs, target states, restart "
                "requests and assignments (created when missing). No effect with group.store.url.")
    .define("status.storage.topic", Type.STRING, None, importance=Importance.HIGH, group="Distributed",
            doc="A group on Kafka: the compacted topic of connector statuses (created when missing). No effect "
                "with group.store.url.")
    .define("config.storage.replication.factor", Type.SHORT, 3, importance=Importance.LOW, group="Distributed",
            doc="Replication factor of config.storage.topic when the worker creates it (-1: the broker's).")
    .define("status.storage.replication.factor", Type.SHORT, 3, importance=Importance.LOW, group="Distributed",
            doc="Replication factor of status.storage.topic when the worker creates it (-1: the broker's).")
    .define("status.storage.partitions", Type.INT, 5, importance=Importance.LOW, group="Distributed",
            doc="Partitions of status.storage.topic when the worker creates it (-1: the broker's).")
    .define("group.store.password", Type.PASSWORD, None, importance=Importance.HIGH, group="Distributed",
            doc="Password of the group store (use a config provider: ${file:/secrets/group.properties:pass}).")
    .define("heartbeat.interval.ms", Type.INT, 3000, Range.at_least(10), Importance.HIGH, group="Distributed",
            doc="How often a worker renews its lease in the group store and checks its assignments.")
    .define("session.timeout.ms", Type.INT, 10000, Range.at_least(100), Importance.HIGH, group="Distributed",
            doc="A worker's lease: one that has not renewed it for this long is out of the group, and its "
                "connectors go to the others (after scheduled.rebalance.max.delay.ms).")
    .define("scheduled.rebalance.max.delay.ms", Type.INT, 300000, Range.at_least(0), Importance.MEDIUM,
            group="Distributed",
            doc="How long the connectors of a worker whose lease ran out wait for it to come back before they are "
                "given to others (KIP-415). A worker that left cleanly frees its connectors at once.")
    .define("rest.advertised.host.name", Type.STRING, None, importance=Importance.LOW, group="Distributed",
            doc="Host name the other workers and clients reach this worker's REST API under (its worker_id); "
                "default: the listener's host.")
    .define("rest.advertised.port", Type.INT, None, Range.between(0, 65535), Importance.LOW, group="Distributed",
            doc="Port the other workers reach this worker's REST API under; default: the listener's port.")
    .define("topic.tracking.enable", Type.BOOLEAN, True, importance=Importance.LOW, group="REST",
            doc="Serve GET /connectors/{name}/topics (403 when false).")
    .define("topic.tracking.allow.reset", Type.BOOLEAN, True, importance=Importance.LOW, group="REST",
            doc="Allow PUT /connectors/{name}/topics/reset (403 when false).")
)


@dataclass(frozen=True)
class WorkerConfig:
    """The parsed worker config plus what is derived from it (bind address, directories, Spark confs)."""

    config: Config
    host: str
    port: int
    state_dir: str
    topics_dir: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    converter_defaults: dict[str, str] = field(default_factory=dict)
    scheme: str = "http"
    #: the REST listener's TLS settings (ssl.* names without the prefix)
    ssl: dict[str, str] = field(default_factory=dict)
    policy: ConnectorPolicy = field(default_factory=ConnectorPolicy)
    key_file: str | None = None
    #: environment the worker's own Spark driver is started with (SPARK_LOCAL_IP for loopback binding)
    spark_env: dict[str, str] = field(default_factory=dict)

    @property
    def allowed_host_names(self) -> tuple[str, ...] | None:
        """Host header names served (None: any)."""
        names = self.config.rest_allowed_host_names
        if names:
            return tuple(n.lower().strip("[]") for n in names)
        host = self.host.lower().strip("[]")
        if host in _LOOPBACK_NAMES or host.startswith("127."):
            return tuple(dict.fromkeys((*_LOOPBACK_NAMES, host)))
        return None  # reached over the network under names the worker cannot know: set the list to check them

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        return tuple(o.strip().rstrip("/") for o in self.config.access_control_allow_origin.split(",")
                     if o.strip())

    @property
    def allowed_methods(self) -> tuple[str, ...]:
        raw = self.config.access_control_allow_methods or "GET,POST,HEAD"
        return tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    #: Kafka client settings shared by the bus's clients (security.protocol, ssl.*, sasl.*).
    kafka_client: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def locations(self) -> Locations:
        """The worker's own files (state, checkpoints' side files, the topic store's listing), local or in a
        bucket with the worker's spark.hadoop.fs.s3a.* settings: one per worker config."""
        found = self.__dict__.get("_locations")
        if found is None:
            found = Locations(self.spark_conf)
            object.__setattr__(self, "_locations", found)
        return found

    @property
    def state_in_object_store(self) -> bool:
        """Whether offset.storage.dir or topics.dir is an object-store URI (Hadoop's S3A connector is needed)."""
        return is_remote(self.state_dir) or is_remote(self.topics_dir)

    @property
    def bootstrap_servers(self) -> str | None:
        """The Kafka bus's bootstrap address (None: the Delta topic store)."""
        servers = self.config.bootstrap_servers
        return ",".join(servers) if servers else None

    @property
    def checkpoint_root(self) -> str:
        return self.state_dir

    @property
    def trigger(self) -> dict[str, Any]:
        return {"processingTime": f"{int(self.config['trigger.interval.ms'])} milliseconds"}

    def __getattr__(self, attribute: str) -> Any:
        """The parsed worker config's values as attributes (``worker.trigger_interval_ms``)."""
        if attribute.startswith("__") or "config" not in self.__dict__:
            raise AttributeError(attribute)
        return getattr(self.config, attribute)

    def __getitem__(self, key: str) -> Any:
        return self.config[key]


def _bind(cfg: Config, problems: list[ConfigProblem]) -> tuple[str, str, int]:
    listeners = cfg.listeners
    if listeners:
        first = listeners[0]
        u = urlsplit(first)
        scheme = u.scheme.lower()
        if scheme not in ("http", "https"):
            problems.append(ConfigProblem("listeners", f"Invalid value {first} for configuration listeners: "
                                                       f"http:// or https:// listeners only"))
            return "http", "127.0.0.1", 8083
        if len(listeners) > 1:
            log.warning("listeners: only the first listener (%s) is served", first)
        try:
            port = u.port if u.port is not None else 8083
        except ValueError:
            problems.append(ConfigProblem("listeners", f"Invalid value {first} for configuration listeners: bad "
                                                       f"port"))
            return scheme, "127.0.0.1", 8083
        return scheme, (u.hostname or "127.0.0.1"), port
    host = cfg.rest_host_name or "127.0.0.1"
    port = cfg.rest_port if cfg.rest_port is not None else 8083
    return "http", host, int(port)


def _ssl_settings(props: Mapping[str, Any], scheme: str, problems: list[ConfigProblem]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _SSL_KEYS:
        for key in (f"listeners.{scheme}.ssl.{name}", f"ssl.{name}"):
            if props.get(key) not in (None, ""):
                out[name] = str(props[key])
                break
    if scheme == "https" and not (out.get("keystore.location") or out.get("keystore.certificate.chain")):
        problems.append(ConfigProblem("listeners.https.ssl.keystore.location",
                                      "An https:// listener needs a key store: listeners.https.ssl.keystore.location "
                                      "(PEM or PKCS12) or listeners.https.ssl.keystore.certificate.chain and "
                                      "listeners.https.ssl.keystore.key"))
    auth = out.get("client.auth", "none").lower()
    if auth not in ("none", "requested", "required"):
        problems.append(ConfigProblem("listeners.https.ssl.client.auth", f"Invalid value {auth} for configuration "
                                                                         f"ssl.client.auth: none, requested or "
                                                                         f"required"))
    return out


def _provider_policy(props: Mapping[str, Any], base: str, problems: list[ConfigProblem]) -> ProviderPolicy:
    """Kafka's ``config.providers`` worker keys: which providers connector configs sent over REST may use."""
    aliases = [a.strip() for a in str(props.get("config.providers") or "").split(",") if a.strip()]
    specs: dict[str, ProviderSpec] = {}
    for alias in aliases:
        cls = str(props.get(f"config.providers.{alias}.class") or "").strip()
        kind = next((k for k, names in PROVIDER_KINDS.items() if cls in names), None)
        if kind is None:
            problems.append(ConfigProblem(f"config.providers.{alias}.class",
                                          f"Invalid value {cls or '<missing>'} for configuration config.providers."
                                          f"{alias}.class: one of {', '.join(n[0] for n in PROVIDER_KINDS.values())}"))
            continue
        prefix = f"config.providers.{alias}.param."
        paths = tuple(os.path.realpath(os.path.join(base, p.strip()))
                      for p in str(props.get(prefix + "allowed.paths") or "").split(",") if p.strip())
        pattern = None
        raw = props.get(prefix + "allowlist.pattern")
        if raw:
            try:
                pattern = re.compile(str(raw))
            except re.error as e:
                problems.append(ConfigProblem(prefix + "allowlist.pattern", f"Invalid value {raw} for configuration "
                                                                            f"{prefix}allowlist.pattern: {e}"))
        specs[alias] = ProviderSpec(kind, paths, pattern)
    return ProviderPolicy(specs)


def parse_worker_config(props: Mapping[str, Any], *, base_dir: str | None = None) -> WorkerConfig:
    """Parse a worker config map; relative directories resolve against ``base_dir`` (default: cwd)."""
    props = resolve_providers(dict(props))
    spark_conf = {k: str(v) for k, v in props.items() if k.startswith("spark.") and k not in _OWN_SPARK_KEYS}
    own = {k: v for k, v in props.items() if not (k.startswith("spark.") and k not in _OWN_SPARK_KEYS)}
    ignored = [k for k in own if k in KAFKA_ONLY_KEYS or k.startswith(KAFKA_ONLY_PREFIXES)]
    cfg = WORKER_CONFIG.parse({k: v for k, v in own.items() if k not in ignored}, context="worker config",
                              allowed_prefixes=_CONVERTER_PREFIXES + ("config.providers", "listeners.https.ssl.",
                                                                      "listeners.http.ssl.", "ssl."))
    kafka_client = {k: str(v) for k, v in props.items()
                    if (k == "security.protocol" or k.startswith(("ssl.", "sasl."))) and v is not None}
    for k in ignored:
        if cfg.bootstrap_servers and k in kafka_client:
            continue  # configures the Kafka bus's clients
        log.warning("worker config: %s has no effect here (it configures Kafka clients or Kafka's own stores; "
                    "offsets live in each query's Spark checkpoint)", k)
    if cfg.plugin_path:
        log.warning("worker config: plugin.path is not applicable: plugins are Python classes (built-ins, dotted "
                    "paths, entry points)")
    problems: list[ConfigProblem] = []
    scheme, host, port = _bind(cfg, problems)
    ssl = _ssl_settings(props, scheme, problems)
    base = base_dir or os.getcwd()
    providers = _provider_policy(props, base, problems)
    state = cfg.offset_storage_dir
    if not state and cfg.offset_storage_file_filename:
        state = os.path.dirname(os.path.join(base, cfg.offset_storage_file_filename)) or base
    if not state and cfg.group_id:
        # Kafka's connect-distributed.properties keeps offsets in offset.storage.topic; here they are checkpoints,
        # which every worker of the group must reach: the same relative directory from every worker's cwd.
        state = os.path.join("work", str(cfg.group_id))
        log.warning("worker config: offset.storage.dir is not set: the group's checkpoints go to %s (under the "
                    "working directory), which every worker of the group must reach", state)
    if not state:
        problems.append(ConfigProblem("offset.storage.dir", 'Missing required configuration "offset.storage.dir" '
                                                            '(or Kafka\'s "offset.storage.file.filename", whose '
                                                            'directory is used) which has no default value.'))
    for key, where in (("offset.storage.dir", state), ("topics.dir", cfg.topics_dir)):
        store = remote_scheme(str(where or ""))
        if store in _HDFS_SCHEMES:
            problems.append(ConfigProblem(key, (
                f"Invalid value {where} for configuration {key}: the worker reads and writes its own files there "
                f"(connector configs, their key, the offsets it alters) through pyarrow.fs, which reaches HDFS only "
                f"through libhdfs (a JVM and a Hadoop install on the worker's host), not over WebHDFS as the HDFS 3 "
                f"sink does; keep {key} on a local or mounted file system (such as HDFS's NFS gateway) or under "
                f"s3a://bucket/prefix")))
        elif store is not None and store not in REMOTE_SCHEMES:  # would otherwise become a directory named "gs:"
            problems.append(ConfigProblem(key, (
                f"Invalid value {where} for configuration {key}: the worker keeps its {key} on a local or mounted "
                f"file system or under {', '.join(s + '://bucket/prefix' for s in REMOTE_SCHEMES)} (Hadoop's S3A "
                f"connector, which Spark's checkpoints use); {store}:// is not supported here")))
    if is_remote(str(cfg.topics_dir)) and cfg.topic_store_format == "delta":
        problems.append(ConfigProblem("topic.store.format", (
            f"Invalid value delta for configuration topic.store.format: topics.dir {cfg.topics_dir} is in an object "
            f"store, where the topic store is Parquet written by Spark's exactly-once file sink (auto or parquet); "
            f"the deltalake engine's topic store needs a local or mounted topics.dir")))
    auth = cfg.rest_basic_auth_file
    if auth and not os.path.isfile(os.path.join(base, auth)):
        problems.append(ConfigProblem("rest.basic.auth.file", f"Invalid value {auth} for configuration "
                                                              f"rest.basic.auth.file: no such file"))
    _check_group(cfg, problems)
    if problems:
        raise ConfigError(problems, context="worker config")
    converters = {k: str(v) for k, v in props.items()
                  if v is not None and (k in ("key.converter", "value.converter", "header.converter")
                                        or k.startswith(_CONVERTER_PREFIXES))}
    spark_conf["spark.master"] = cfg.spark_master
    state_dir = Locations.absolute(str(state), base)
    spark_env = _loopback_spark(cfg, spark_conf)
    allowed = tuple(p if is_remote_uri(p) else os.path.realpath(os.path.join(base, p))
                    for p in cfg.connector_allowed_paths or [DEFAULT_DATA_DIR])
    problems.extend(_import_path_problems(allowed, spark_conf))
    if problems:
        raise ConfigError(problems, context="worker config")
    forbidden = state_dir if is_remote(state_dir) else os.path.realpath(state_dir)
    policy = ConnectorPolicy(tuple(cfg.plugin_allowed_modules), allowed, (forbidden,), providers,
                             expressions=bool(cfg.rest_sql_expressions_enable))
    key_file = Locations.absolute(str(cfg.state_encryption_key_file), base) \
        if cfg.state_encryption_key_file else Locations.join(state_dir, "_keys", "state.key")
    return WorkerConfig(cfg, host, port, state_dir, Locations.absolute(str(cfg.topics_dir), base),
                        spark_conf, converters, scheme, ssl, policy, key_file, spark_env,
                        kafka_client=kafka_client if cfg.bootstrap_servers else {})


def _import_path_problems(allowed: tuple[str, ...], spark_conf: Mapping[str, str]) -> list[ConfigProblem]:
    """A directory connectors may write must not hold a directory Python imports from: this process's sys.path
    (the current directory included when Python was started with ``-m`` or ``-c``), or Spark's local directory,
    whose ``userFiles-*`` directories are on the Python workers' sys.path in local mode."""
    imported = [os.path.realpath(p or os.getcwd()) for p in sys.path]
    if str(spark_conf.get("spark.master", "local")).startswith("local"):
        local_dirs = spark_conf.get("spark.local.dir") or os.environ.get("SPARK_LOCAL_DIRS") or tempfile.gettempdir()
        imported += [os.path.realpath(d) for d in local_dirs.split(",") if d.strip()]
    problems = []
    for root in allowed:
        inside = [p for p in dict.fromkeys(imported) if p == root or p.startswith(root.rstrip(os.sep) + os.sep)]
        if inside:
            problems.append(ConfigProblem("connector.allowed.paths", (
                f"Invalid value {root} for configuration connector.allowed.paths: it holds {inside[0]}, where the "
                f"worker's Python processes import modules from (sys.path or Spark's local directory); a connector "
                f"could plant code there. Allow a directory of its own (default: {DEFAULT_DATA_DIR} under the "
                f"working directory)")))
    return problems


def _check_group(cfg: Config, problems: list[ConfigProblem]) -> None:
    if cfg.group_id and not cfg.group_store_url:
        if not cfg.bootstrap_servers:
            problems.append(ConfigProblem("bootstrap.servers", "Missing required configuration \"bootstrap.servers\" "
                                                               "for a worker group (group.id is set): the Kafka "
                                                               "brokers the group coordinates through (or "
                                                               "group.store.url, a PostgreSQL URL or s3a://bucket/prefix)"))
        for key in ("config.storage.topic", "status.storage.topic"):
            if not cfg[key]:
                problems.append(ConfigProblem(key, f"Missing required configuration \"{key}\" for a worker group "
                                                   f"on Kafka (group.id is set) which has no default value."))
    elif cfg.group_id:
        for key in ("config.storage.topic", "status.storage.topic"):
            if cfg[key]:
                log.warning("worker config: %s has no effect: the group coordinates through group.store.url", key)
    if cfg.group_store_url and not cfg.group_id:
        problems.append(ConfigProblem("group.id", "Missing required configuration \"group.id\": group.store.url "
                                                  "is set"))
    url = str(cfg.group_store_url or "")
    if url.lower().startswith("s3a://"):
        if "@" in urlsplit(url).netloc:  # never echoed: Hadoop's old s3a://KEY:SECRET@bucket form
            problems.append(ConfigProblem("group.store.url", "Invalid value for configuration group.store.url: "
                                                             "credentials in the URL are not accepted; give the "
                                                             "bucket's keys as spark.hadoop.fs.s3a.* settings"))
        elif not urlsplit(url).netloc:
            problems.append(ConfigProblem("group.store.url", f"Invalid value {url} for configuration "
                                                             f"group.store.url: no bucket (s3a://bucket/prefix)"))
    elif url and not url.startswith(("postgresql://", "postgres://")):  # never echoed: it may hold a password
        problems.append(ConfigProblem("group.store.url", "Invalid value for configuration group.store.url: a "
                                                         "postgresql:// URL or s3a://bucket/prefix"))
    if cfg.heartbeat_interval_ms >= cfg.session_timeout_ms:
        problems.append(ConfigProblem("heartbeat.interval.ms", f"Invalid value {cfg['heartbeat.interval.ms']} for "
                                                               f"configuration heartbeat.interval.ms: it must be "
                                                               f"less than session.timeout.ms "
                                                               f"({cfg['session.timeout.ms']})"))


_OWN_SPARK_KEYS = ("spark.master", "spark.bind.loopback")
#: Hadoop's schemes of HDFS: Spark's checkpoints reach them, the worker's own files do not (see parse_worker_config).
_HDFS_SCHEMES = ("hdfs", "webhdfs", "swebhdfs", "viewfs")


def _loopback_spark(cfg: Config, spark_conf: dict[str, str]) -> dict[str, str]:
    """Bind a local Spark driver to 127.0.0.1 unless the worker config says otherwise: RPC and block manager
    through spark.driver.bindAddress/host, the UI through SPARK_LOCAL_IP (Spark's UI reads only that)."""
    if not cfg.spark_bind_loopback or not str(cfg.spark_master).startswith("local"):
        return {}
    if "spark.driver.bindAddress" in spark_conf or "spark.driver.host" in spark_conf:
        return {}
    spark_conf["spark.driver.bindAddress"] = "127.0.0.1"
    spark_conf["spark.driver.host"] = "127.0.0.1"
    return {"SPARK_LOCAL_IP": "127.0.0.1"}


def load_worker_config(path: str) -> WorkerConfig:
    """Load ``worker.properties`` (relative directories resolve against the current directory, as Kafka does)."""
    return parse_worker_config(dict(load_config_file(path)))


def basic_auth_users(cfg: WorkerConfig) -> dict[str, str] | None:
    """``{user: password}`` from ``rest.basic.auth.file`` (None: auth disabled)."""
    path = cfg.rest_basic_auth_file
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        users = parse_properties(f.read())
    # Jetty realm files may append roles after a comma: "user: password,admin".
    return {u: p.split(",", 1)[0].strip() for u, p in users.items()}
