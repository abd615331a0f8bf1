"""What a REST user may make the worker do: the plugins it may load, the files it may touch, the config providers
it may resolve. A REST user manages connectors, nothing else.

* Plugins: built-ins and installed entry points always; dotted Python paths only for the modules of
  ``plugin.allowed.modules`` (:func:`~spark_connect_bridge.core.plugins.dotted_paths_restricted`). Nothing is imported
  for any other name.
* Files: every key that names a file or directory (``file``, ``*.path``, ``*.dir``, ``*.file``, ``*.filename``,
  ``*.location``, ``*.directory``, ``*.warehouse`` such as the Iceberg sink's ``iceberg.catalog.warehouse``, and the
  database file of a ``jdbc:sqlite:`` or ``sqlite:///`` URL or URI) must resolve, after following
  links, under ``connector.allowed.paths`` (default: ``work/data`` under the worker's working directory) and never
  under the worker's state directory (its stored configs, keys and checkpoints). A remote URI (``s3://``,
  ``s3a://``, ``gs://``, ``abfss://``...) reaches the store with the worker's own credentials (its environment, its
  instance role): it must lie under a URI entry of ``connector.allowed.paths`` (a bucket and prefix list, e.g.
  ``s3://team-bucket/exports``); none is allowed by default. A connector that names its destination in other keys
  (the S3 sink's ``s3.bucket.name`` and ``topics.dir``) says so with ``worker_credentials_destination``: the URI it
  would reach with the worker's credentials, checked the same way (``None`` when the config brings its own). A URI
  with ``..`` segments, percent-encoded dots or slashes is refused, and so is any key that would configure a Hadoop
  file system (``fs.s3a.endpoint``, ``spark.hadoop.*``...): the endpoint the worker's credentials go to is the
  worker's (:func:`storage_setting_problems`).
* Config providers: :class:`~spark_connect_bridge.config.providers.ProviderPolicy` (``config.providers``,
  KIP-993 ``allowed.paths``, the env provider's ``allowlist.pattern``).
* Spark SQL: the keys of stages that run expressions (the Sql transform's ``filter`` and ``select``, every
  plugin's ``expression_keys``) are refused unless ``rest.sql.expressions.enable`` is true; then each expression
  may call only side-effect-free built-in functions, checked on Spark's parsed tree
  (:mod:`~spark_connect_bridge.transforms.sql_allowlist`).

Every REST request runs inside :meth:`ConnectorPolicy.restricted`, so whatever the request resolves (validation
included) obeys the policy; :meth:`ConnectorPolicy.check` reports a config's violations up front, by key.

>>> policy = ConnectorPolicy(allowed_paths=("/data",), forbidden_paths=("/data/state",))
>>> [p.key for p in policy.check({"connector.class": "FileStreamSink", "file": "/etc/cron.d/x"})]
['file']
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from ..config.providers import ProviderPolicy, provider_policy, resolve_providers
from ..core import plugins
from ..core.paths import ENCODED, is_remote_uri, normalise_uri, under
from ..errors import ConfigError, ConfigProblem
from ..transforms.regex import active_session
from ..transforms.sql_allowlist import expression_problem

__all__ = ["ConnectorPolicy", "is_path_key", "is_remote_uri", "normalise_uri", "storage_setting_problems"]

_PATH_KEYS = ("file", "path", "checkpointlocation")
_PATH_SUFFIXES = ("path", "dir", "file", "filename", "location", "directory", "warehouse", "cert", "cacert")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SQLITE_URL = re.compile(r"^\s*(?:jdbc:sqlite:|sqlite:///)(.*)$", re.IGNORECASE)
_STAGE_TYPE = re.compile(r"^(transforms|predicates)\.(.+)\.type$")
_FAMILY = {"transforms": "transformation", "predicates": "predicate"}


def is_path_key(key: str) -> bool:
    """Whether a connector config key names a local file or directory."""
    low = key.lower()
    return low in _PATH_KEYS or low.rsplit(".", 1)[-1] in _PATH_SUFFIXES


# Connector config keys that would configure a Hadoop file system (an object store's endpoint, credentials or
# provider): Spark and Delta copy a data source's fs.* / dfs.* options into the Hadoop configuration of its paths.
_STORAGE_SETTING = re.compile(r"(?i)^(?:spark\.hadoop\.|(?:.*\.)?d?fs\.[a-z])")


def storage_setting_problems(config: Mapping[str, str]) -> list[ConfigProblem]:
    """The keys of a connector config (received over REST) that configure an object store or file system: its
    endpoint, credentials and connectors are the worker's (worker config ``spark.hadoop.fs.*``), so a connector
    cannot send the worker's credentials, or the data, to another endpoint."""
    return [ConfigProblem(k, f"Invalid value for configuration {k}: object store and file system settings "
                             f"(endpoints, credentials, implementations) are the worker's own (worker config "
                             f"spark.hadoop.fs.*); a connector config cannot set them")
            for k in config if _STORAGE_SETTING.match(k)]


@dataclass(frozen=True)
class ConnectorPolicy:
    """The worker's limits on connector configs received over REST (see the module doc)."""

    allowed_modules: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ()
    providers: ProviderPolicy = field(default_factory=ProviderPolicy)
    #: rest.sql.expressions.enable: stages that run Spark SQL are allowed (their expressions checked)
    expressions: bool = False

    @contextlib.contextmanager
    def restricted(self) -> Iterator[list[str]]:
        """Within the block, plugins and config providers resolve only as this policy allows; yields the provider
        values resolved meanwhile (to be kept out of answers)."""
        with plugins.dotted_paths_restricted(self.allowed_modules), provider_policy(self.providers) as resolved:
            yield resolved

    def path_problem(self, key: str, value: str, shown: str | None = None) -> str | None:
        """Why ``value`` of path key ``key`` is refused (``None``: allowed); messages show ``shown`` (the value as
        written, provider references unresolved) instead of ``value`` when given."""
        value = value.strip()
        shown = value if shown is None else shown
        if not value:
            return None
        if "\x00" in value:  # the OS cannot open such a path (Python raises ValueError: embedded null byte)
            return f"Invalid value for configuration {key}: a path may not contain a NUL character"
        uri = _URI.match(value)
        if uri and uri.group(1).lower() != "file":
            return self.remote_problem(key, value, shown)
        local = value[len("file://"):] if uri else value
        real = os.path.realpath(os.path.abspath(local))
        if any(under(real, root) for root in self.forbidden_paths):
            return (f"Invalid value {shown} for configuration {key}: the worker's state directory is not "
                    f"reachable from connector configs")
        if not any(under(real, root) for root in self.allowed_paths if not is_remote_uri(root)):
            return (f"Invalid value {shown} for configuration {key}: not under the directories this worker allows "
                    f"connectors to use (worker config connector.allowed.paths: "
                    f"{', '.join(self.allowed_paths) or '<none>'})")
        return None

    def remote_problem(self, key: str, uri: str, shown: str | None = None) -> str | None:
        """Why the remote ``uri`` of ``key`` is refused (``None``: under a URI entry of ``connector.allowed.paths``)."""
        shown = uri if shown is None else shown
        target = normalise_uri(uri)
        if "/../" in target + "/" or "/./" in target + "/" or ENCODED.search(target) or "\\" in target:
            return (f"Invalid value {shown} for configuration {key}: a URI may not contain '.' or '..' segments, "
                    f"percent-encoded dots or slashes, or backslashes")
        if any(target == root or target.startswith(root + "/")
               for root in (normalise_uri(r) for r in self.forbidden_paths if is_remote_uri(r))):
            return (f"Invalid value {shown} for configuration {key}: the worker's state (offset.storage.dir) is not "
                    f"reachable from connector configs")
        roots = [normalise_uri(r) for r in self.allowed_paths if is_remote_uri(r)]
        if any(target == root or target.startswith(root + "/") for root in roots):
            return None
        return (f"Invalid value {shown} for configuration {key}: {target} is reached with the worker's own "
                f"credentials and is not under a URI this worker allows connectors to use (worker config "
                f"connector.allowed.paths: {', '.join(roots) or 'no URI entries'})")

    def check(self, config: Mapping[str, str]) -> list[ConfigProblem]:
        """Every violation of this policy in ``config`` (provider references resolved under the policy first)."""
        problems: list[ConfigProblem] = []
        cls = self._connector_class(config)
        remote = {k.lower() for k in getattr(cls, "object_store_keys", ())}  # names in a bucket, not local paths
        local = {k for k in config if is_path_key(k) and k.lower() not in remote}
        with self.restricted():
            try:
                resolved = resolve_providers({k: v for k, v in config.items() if k in local})
            except ConfigError as e:
                problems.extend(e.problems)
                resolved = {}
            try:  # the references of the other keys: refused ones are reported now, by key
                resolve_providers({k: v for k, v in config.items() if k not in local})
            except ConfigError as e:
                problems.extend(e.problems)
        for key, value in resolved.items():
            message = self.path_problem(key, str(value), str(config[key])) if value is not None else None
            if message is not None:
                problems.append(ConfigProblem(key, message))
        problems.extend(self.expression_problems(config))
        problems.extend(self._destination_problems(cls, config))
        problems.extend(storage_setting_problems(config))
        for key, value in config.items():  # a SQLite database is a local file too
            sqlite = _SQLITE_URL.match(str(value)) if key.lower().endswith(("url", "uri")) else None
            if sqlite:
                path = sqlite.group(1).split("?")[0].removeprefix("//")
                message = self.path_problem(key, path, str(value)) if path and path != ":memory:" else None
                if message is not None:
                    problems.append(ConfigProblem(key, message))
        return problems

    def _connector_class(self, config: Mapping[str, str]) -> type | None:
        with self.restricted():
            try:
                name = resolve_providers({"connector.class": config.get("connector.class", "")})["connector.class"]
                return plugins.resolve_class("connector", str(name))
            except ConfigError:
                return None  # reported by the config's own validation

    def _destination_problems(self, cls: type | None, config: Mapping[str, str]) -> list[ConfigProblem]:
        """The refusal of a destination the connector would reach with the worker's own credentials."""
        where = getattr(cls, "worker_credentials_destination", None)
        if where is None:
            return []
        with self.restricted():
            try:
                found = where(resolve_providers(dict(config)))
            except ConfigError:
                return []  # a refused provider reference: reported by check()
        if found is None:
            return []
        key, uri = found
        message = self.remote_problem(key, uri)
        return [] if message is None else [ConfigProblem(key, message)]

    def expression_problems(self, config: Mapping[str, str]) -> list[ConfigProblem]:
        """The refusals of the Spark SQL that the stages of ``config`` would run (see the module doc)."""
        found: list[tuple[str, list[str]]] = []  # (key, its expressions)
        with self.restricted():
            for key, value in config.items():
                stage = _STAGE_TYPE.match(key)
                if not stage:
                    continue
                try:
                    cls = plugins.resolve_class(_FAMILY[stage.group(1)], str(resolve_providers({key: value})[key]),
                                                key=key)
                except ConfigError:
                    continue  # reported by the config's own validation
                for name in getattr(cls, "expression_keys", ()):
                    sub = f"{stage.group(1)}.{stage.group(2)}.{name}"
                    if config.get(sub, "").strip():
                        try:
                            text = str(resolve_providers({sub: config[sub]})[sub])
                        except ConfigError:
                            continue  # a refused provider reference: reported by check()
                        found.append((sub, cls.expressions(name, text)))
        problems: list[ConfigProblem] = []
        spark = active_session() if found and self.expressions else None
        for key, expressions in found:
            if not self.expressions:
                problems.append(ConfigProblem(key, (
                    f"Invalid value {config[key]} for configuration {key}: Spark SQL expressions are off for "
                    f"connector configs sent over REST; the worker config rest.sql.expressions.enable=true allows "
                    f"side-effect-free ones")))
                continue
            if spark is None:
                problems.append(ConfigProblem(key, (
                    f"Invalid value {config[key]} for configuration {key}: its Spark SQL cannot be checked before "
                    f"the worker's Spark session is up; try again")))
                continue
            for text in expressions:
                why = expression_problem(spark, text)
                if why is not None:
                    problems.append(ConfigProblem(key, f"Invalid value {config[key]} for configuration {key}: "
                                                       f"{text!r}: {why}"))
                    break
        return problems

    def enforce(self, config: Mapping[str, str], *, context: str | None = None) -> None:
        """Raise a ConfigError listing every violation in ``config``."""
        problems = self.check(config)
        if problems:
            raise ConfigError(problems, context=context)
