"""Config providers: ``${env:VAR}``, ``${file:/path/to/file.properties:key}``, ``${directory:/path/to/dir:file}``.

Kafka's EnvVarConfigProvider, FileConfigProvider and DirectoryConfigProvider. Library and CLI use resolve any
reference (the caller is the operator). A worker resolves the connector configs it receives over REST under a
:class:`ProviderPolicy` (:func:`provider_policy`): only the providers its ``config.providers`` enables, the file
and directory providers only under their ``allowed.paths`` (KIP-993, checked after resolving links), the env
provider only for the variables its ``allowlist.pattern`` names (KIP-887). Messages name the key and the
reference, never a resolved value; :func:`provider_policy` also collects the values it resolved so that the
REST layer can keep them out of every answer.

>>> resolve_providers({"user": "${env:USER}"})["user"]          # doctest: +SKIP
'alice'
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ConfigProblem
from .files import parse_properties

__all__ = ["ProviderPolicy", "ProviderSpec", "provider_policy", "resolve_providers", "references", "PROVIDER_KINDS"]

#: Our provider kinds and the Kafka class names (and simple names) that select them in ``config.providers.X.class``.
PROVIDER_KINDS = {
    "file": ("org.apache.kafka.common.config.provider.FileConfigProvider", "FileConfigProvider", "file"),
    "directory": ("org.apache.kafka.common.config.provider.DirectoryConfigProvider", "DirectoryConfigProvider",
                  "directory"),
    "env": ("org.apache.kafka.common.config.provider.EnvVarConfigProvider", "EnvVarConfigProvider", "env"),
}

_REF = re.compile(r"\$\{([A-Za-z0-9_.-]+):(?:([^}]*?):)?([^}:]*)\}")


@dataclass(frozen=True)
class ProviderSpec:
    """One enabled provider: its kind, the directories it may read (file, directory: ``None`` for none at all)
    and the variables it may read (env)."""

    kind: str
    allowed_paths: tuple[str, ...] = ()
    env_allowlist: re.Pattern[str] | None = None


@dataclass(frozen=True)
class ProviderPolicy:
    """The providers a connector config may use, by the alias it writes (``${alias:...}``)."""

    providers: Mapping[str, ProviderSpec] = field(default_factory=dict)

    def check(self, alias: str, path: str | None, key: str) -> str | None:
        """Why the reference may not be resolved here (``None``: it may)."""
        spec = self.providers.get(alias)
        if spec is None:
            return (f"config provider {alias!r} is not enabled on this worker (worker config: config.providers="
                    f"{','.join(self.providers) or '<none>'})")
        if spec.kind == "env":
            if spec.env_allowlist is None or not spec.env_allowlist.fullmatch(key):
                return (f"environment variable {key} is not allowed (worker config: config.providers.{alias}"
                        f".param.allowlist.pattern)")
            return None
        if not path:
            return None  # reported by the provider itself
        target = os.path.realpath(path if spec.kind == "file" else os.path.join(path, key))
        if not any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in spec.allowed_paths):
            return (f"path {path} is not under the allowed paths of this worker (worker config: config.providers."
                    f"{alias}.param.allowed.paths)")
        return None


_POLICY: contextvars.ContextVar[ProviderPolicy | None] = contextvars.ContextVar("kconnect_provider_policy",
                                                                                default=None)
_RESOLVED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kconnect_resolved_values",
                                                                             default=None)


@contextlib.contextmanager
def provider_policy(policy: ProviderPolicy) -> Iterator[list[str]]:
    """Resolve references under ``policy`` within the block (this thread or task); yields the list of every value
    resolved meanwhile, to be kept out of answers."""
    resolved: list[str] = []
    token, token_values = _POLICY.set(policy), _RESOLVED.set(resolved)
    try:
        yield resolved
    finally:
        _POLICY.reset(token)
        _RESOLVED.reset(token_values)


def references(value: str) -> list[tuple[str, str | None, str]]:
    """The ``(provider, path, key)`` references in ``value``."""
    return [(m.group(1), m.group(2), m.group(3)) for m in _REF.finditer(value)]


def _kind_of(alias: str, policy: ProviderPolicy | None) -> str:
    if policy is None:
        return alias
    return policy.providers[alias].kind


def _provide(kind: str, path: str | None, key: str) -> str:
    if kind == "env":
        # ${env:VAR} (path empty) as in Kafka's EnvVarConfigProvider.
        if key not in os.environ:
            raise KeyError(f"environment variable {key} is not set")
        return os.environ[key]
    if kind == "file":
        if not path:
            raise KeyError("file provider needs ${file:<path>:<key>}")
        props = parse_properties(Path(path).read_text(encoding="utf-8"))
        if key not in props:
            raise KeyError(f"key {key!r} not found in {path}")
        return props[key]
    if kind == "directory":
        if not path:
            raise KeyError("directory provider needs ${directory:<dir>:<file>}")
        return (Path(path) / key).read_text(encoding="utf-8")
    raise KeyError(f"unknown config provider {kind!r} (known: env, file, directory)")


def resolve_providers(props: Mapping[str, Any], policy: ProviderPolicy | None = None) -> dict[str, Any]:
    """Replace ``${provider:[path:]key}`` references in string values; report every failure at once.

    ``policy`` (default: the one of the enclosing :func:`provider_policy`, else none) limits what may be
    resolved. The messages name the key and the reference, never the resolved value.
    """
    policy = policy if policy is not None else _POLICY.get()
    collected = _RESOLVED.get()
    out: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for k, v in props.items():
        if not isinstance(v, str) or "${" not in v:
            out[k] = v
            continue

        def sub(m: re.Match[str], key: str = k) -> str:
            alias, path, name = m.group(1), m.group(2), m.group(3)
            refused = policy.check(alias, path, name) if policy is not None else None
            if refused is not None:
                problems.append(ConfigProblem(key, f"Cannot resolve {m.group(0)} for configuration {key}: {refused}"))
                return m.group(0)
            try:
                value = _provide(_kind_of(alias, policy), path, name)
            except (KeyError, OSError) as e:
                msg = e.args[0] if isinstance(e, KeyError) else e.strerror
                problems.append(ConfigProblem(key, f"Cannot resolve {m.group(0)} for configuration {key}: {msg}"))
                return m.group(0)
            if collected is not None and value:
                collected.append(value)
            return value

        out[k] = _REF.sub(sub, v)
    if problems:
        raise ConfigError(problems)
    return out
