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
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..config import ConfigDef, Importance, Range, Type, ValidString, load_config_file, resolve_providers
from ..config.definition import Config
from ..errors import ConfigError, ConfigProblem

__all__ = ["WORKER_CONFIG", "WorkerConfig", "parse_worker_config", "load_worker_config"]

log = logging.getLogger(__name__)

_CONVERTER_PREFIXES = ("key.converter.", "value.converter.", "header.converter.")
# Kafka worker keys that configure Kafka clients or the Kafka-based stores: accepted (so a Kafka
# worker.properties loads unchanged) and logged as having no effect.
KAFKA_ONLY_KEYS = ("offset.flush.interval.ms", "offset.flush.timeout.ms",
                   "task.shutdown.graceful.timeout.ms", "plugin.discovery", "rest.advertised.host.name",
                   "rest.advertised.port", "rest.advertised.listener", "admin.listeners",
                   "access.control.allow.origin", "access.control.allow.methods", "rest.extension.classes",
                   "connector.client.config.override.policy", "config.providers", "group.id",
                   "config.storage.topic", "offset.storage.topic", "status.storage.topic",
                   "internal.key.converter", "internal.value.converter", "key.converter.schema.registry.url")
KAFKA_ONLY_PREFIXES = ("producer.", "consumer.", "admin.", "config.providers.", "ssl.", "sasl.", "security.",
                       "internal.key.converter.", "internal.value.converter.")

WORKER_CONFIG = (
    ConfigDef()
    .define("listeners", Type.LIST, None, importance=Importance.HIGH, group="REST",
            doc="URLs the REST API listens on (Kafka 3+ style), e.g. http://127.0.0.1:8083. Only the first "
                "http listener is served. Unset: rest.host.name/rest.port, else http://127.0.0.1:8083. An empty "
                "host (http://:8083) binds 127.0.0.1, not every interface: name 0.0.0.0 to expose the API.")
    .define("rest.host.name", Type.STRING, None, importance=Importance.LOW, group="REST",
            doc="Host to bind the REST API to (pre-3.0 Kafka style; listeners wins).")
    .define("rest.port", Type.INT, None, Range.between(0, 65535), Importance.LOW, group="REST",
            doc="Port of the REST API (pre-3.0 Kafka style; listeners wins). 0 picks a free port.")
    .define("rest.basic.auth.file", Type.STRING, "", importance=Importance.MEDIUM, group="REST",
            doc="Properties file of 'user: password' (or user=password) lines. When set, every REST request "
                "needs HTTP basic auth with one of these users (Kafka's BasicAuthSecurityRestExtension). "
                "Passwords are never logged.")
    .define("offset.storage.dir", Type.STRING, None, importance=Importance.HIGH, group="Storage",
            doc="Directory of the worker's durable state: one Spark checkpoint per connector (its offsets) and "
                "the stored connector configs and target states (_connectors/).")
    .define("offset.storage.file.filename", Type.STRING, None, importance=Importance.LOW, group="Storage",
            doc="Kafka standalone's offsets file; accepted for compatibility: its parent directory is used as "
                "offset.storage.dir when that is unset.")
    .define("topics.dir", Type.STRING, "work/topics", importance=Importance.HIGH, group="Storage",
            doc="Topic store directory: source connectors write their records here, one table per topic; sink "
                "connectors read their topics/topics.regex from here.")
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
    .define("status.interval.ms", Type.LONG, 500, Range.at_least(50), Importance.LOW, group="Spark",
            doc="How often the worker polls its queries for state changes and metrics.")
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
            doc="Kafka's plugin directories: not applicable (plugins are Python classes: built-ins, dotted paths "
                "and the spark_connect_bridge.* entry points); accepted and warned about.")
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
    #: Kafka client settings shared by the bus's clients (security.protocol, ssl.*, sasl.*).
    kafka_client: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def bootstrap_servers(self) -> str | None:
        """The Kafka bus's bootstrap address (None: the Delta topic store)."""
        servers = self.config["bootstrap.servers"]
        return ",".join(servers) if servers else None

    @property
    def checkpoint_root(self) -> str:
        return self.state_dir

    @property
    def trigger(self) -> dict[str, Any]:
        return {"processingTime": f"{int(self.config['trigger.interval.ms'])} milliseconds"}

    def __getitem__(self, key: str) -> Any:
        return self.config[key]


def _bind(cfg: Config, problems: list[ConfigProblem]) -> tuple[str, int]:
    listeners = cfg["listeners"]
    if listeners:
        first = listeners[0]
        u = urlsplit(first)
        if u.scheme.lower() != "http":
            problems.append(ConfigProblem("listeners", f"Invalid value {first} for configuration listeners: only "
                                                       f"http:// listeners are supported"))
            return "127.0.0.1", 8083
        if len(listeners) > 1:
            log.warning("listeners: only the first listener (%s) is served", first)
        try:
            port = u.port if u.port is not None else 8083
        except ValueError:
            problems.append(ConfigProblem("listeners", f"Invalid value {first} for configuration listeners: bad "
                                                       f"port"))
            return "127.0.0.1", 8083
        return (u.hostname or "127.0.0.1"), port
    host = cfg["rest.host.name"] or "127.0.0.1"
    port = cfg["rest.port"] if cfg["rest.port"] is not None else 8083
    return host, int(port)


def parse_worker_config(props: Mapping[str, Any], *, base_dir: str | None = None) -> WorkerConfig:
    """Parse a worker config map; relative directories resolve against ``base_dir`` (default: cwd)."""
    props = resolve_providers(dict(props))
    spark_conf = {k: str(v) for k, v in props.items() if k.startswith("spark.") and k != "spark.master"}
    own = {k: v for k, v in props.items() if not (k.startswith("spark.") and k != "spark.master")}
    ignored = [k for k in own if k in KAFKA_ONLY_KEYS or k.startswith(KAFKA_ONLY_PREFIXES)]
    cfg = WORKER_CONFIG.parse({k: v for k, v in own.items() if k not in ignored}, context="worker config",
                              allowed_prefixes=_CONVERTER_PREFIXES)
    kafka_client = {k: str(v) for k, v in props.items()
                    if (k == "security.protocol" or k.startswith(("ssl.", "sasl."))) and v is not None}
    for k in ignored:
        if cfg["bootstrap.servers"] and k in kafka_client:
            continue  # configures the Kafka bus's clients
        log.warning("worker config: %s has no effect here (it configures Kafka clients or Kafka's own stores; "
                    "offsets live in each query's Spark checkpoint)", k)
    if cfg["plugin.path"]:
        log.warning("worker config: plugin.path is not applicable: plugins are Python classes (built-ins, dotted "
                    "paths, entry points)")
    problems: list[ConfigProblem] = []
    host, port = _bind(cfg, problems)
    base = base_dir or os.getcwd()
    state = cfg["offset.storage.dir"]
    if not state and cfg["offset.storage.file.filename"]:
        state = os.path.dirname(os.path.join(base, cfg["offset.storage.file.filename"])) or base
    if not state:
        problems.append(ConfigProblem("offset.storage.dir", 'Missing required configuration "offset.storage.dir" '
                                                            '(or Kafka\'s "offset.storage.file.filename", whose '
                                                            'directory is used) which has no default value.'))
    auth = cfg["rest.basic.auth.file"]
    if auth and not os.path.isfile(os.path.join(base, auth)):
        problems.append(ConfigProblem("rest.basic.auth.file", f"Invalid value {auth} for configuration "
                                                              f"rest.basic.auth.file: no such file"))
    if problems:
        raise ConfigError(problems, context="worker config")
    converters = {k: str(v) for k, v in props.items()
                  if v is not None and (k in ("key.converter", "value.converter", "header.converter")
                                        or k.startswith(_CONVERTER_PREFIXES))}
    spark_conf["spark.master"] = cfg["spark.master"]
    return WorkerConfig(cfg, host, port, os.path.abspath(os.path.join(base, state)),
                        os.path.abspath(os.path.join(base, cfg["topics.dir"])), spark_conf, converters,
                        kafka_client if cfg["bootstrap.servers"] else {})


def load_worker_config(path: str) -> WorkerConfig:
    """Load ``worker.properties`` (relative directories resolve against the current directory, as Kafka does)."""
    return parse_worker_config(dict(load_config_file(path)))


def basic_auth_users(cfg: WorkerConfig) -> dict[str, str] | None:
    """``{user: password}`` from ``rest.basic.auth.file`` (None: auth disabled)."""
    from ..config import parse_properties

    path = cfg["rest.basic.auth.file"]
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        users = parse_properties(f.read())
    # Jetty realm files may append roles after a comma: "user: password,admin".
    return {u: p.split(",", 1)[0].strip() for u, p in users.items()}
