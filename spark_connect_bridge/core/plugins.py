"""Plugin resolution: connector.class, transforms.<alias>.type, predicates.<alias>.type and converters.

A plugin name resolves, in this order, from:

1. the built-in catalogs (``connectors/catalog.py``, ``transforms/catalog.py``, ``converters/catalog.py``):
   our short names, Kafka's aliases (``FileStreamSource``, ``FileStreamSourceConnector``) and the
   Kafka/Confluent/Debezium Java class names of the plugins we implement;
2. plugins registered under the entry-point groups ``spark_connect_bridge.connectors``,
   ``spark_connect_bridge.transforms``, ``spark_connect_bridge.predicates`` and
   ``spark_connect_bridge.converters`` (the entry-point name is the alias);
3. a dotted Python path to a class (``my_pkg.sources.MySource`` or ``my_pkg.sources:MySource``). Inside
   :func:`dotted_paths_restricted` (the worker's REST requests), only modules the worker config allows
   (``plugin.allowed.modules``) are imported this way: a REST user cannot make the worker import a module.

Catalog entries name their class as ``"module:attribute"`` strings so that resolving one plugin imports only
its own module. An unknown name is a :class:`~spark_connect_bridge.errors.PluginNotFoundError` that lists the
known names and the nearest match.

>>> resolve_class("connector", "FileStreamSource").__name__  # doctest: +SKIP
'FileStreamSourceConnector'
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import difflib
import functools
import importlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from ..errors import ConfigError, ConfigProblem, PluginNotFoundError
from ..version import __version__

__all__ = ["PluginSpec", "Family", "resolve_class", "resolve_spec", "all_specs", "plugin_type_of", "FAMILIES",
           "dotted_paths_restricted", "dotted_path_allowed"]

Family = Literal["connector", "transformation", "predicate", "converter"]
# Kafka's plugin types (REST /connector-plugins "type") accepted by each family.
FAMILIES: dict[str, tuple[str, ...]] = {
    "connector": ("source", "sink"),
    "transformation": ("transformation",),
    "predicate": ("predicate",),
    "converter": ("converter", "header_converter"),
}
_GROUPS = {"connector": "spark_connect_bridge.connectors", "transformation": "spark_connect_bridge.transforms",
           "predicate": "spark_connect_bridge.predicates", "converter": "spark_connect_bridge.converters"}
#: None: any dotted path may be imported (library and CLI use, where the caller is the operator); a tuple: only
#: modules equal to or under one of these names (a worker serving a REST request).
_ALLOWED_MODULES: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "kconnect_allowed_plugin_modules", default=None)
_CATALOGS = ("spark_connect_bridge.connectors.catalog", "spark_connect_bridge.transforms.catalog",
             "spark_connect_bridge.converters.catalog")


@dataclass(frozen=True)
class PluginSpec:
    """One plugin: its Kafka plugin type, where its class lives, and every name it answers to.

    ``names[0]`` is the class name reported by ``GET /connector-plugins`` (the Java class name for plugins
    that stand in for a Java one).
    """

    type: str
    target: str
    names: tuple[str, ...]
    doc: str = ""

    @property
    def class_name(self) -> str:
        return self.names[0]

    @property
    def family(self) -> str:
        return next(f for f, types in FAMILIES.items() if self.type in types)

    # ``builtins.type``: inside this class ``type`` names the field above.
    def load(self) -> builtins.type[Any]:
        module, _, attr = self.target.partition(":")
        obj: object = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        assert isinstance(obj, type), self.target
        return obj


def connector_names(java_or_py_name: str, *extra: str) -> tuple[str, ...]:
    """Kafka's alias rules for a connector class: the full name, the simple name, and the simple name
    without its ``Connector`` suffix."""
    simple = java_or_py_name.rsplit(".", 1)[-1]
    names = [java_or_py_name, simple]
    if simple.endswith("Connector") and len(simple) > len("Connector"):
        names.append(simple[: -len("Connector")])
    names.extend(extra)
    return tuple(dict.fromkeys(names))


def plugin_type_of(cls: type) -> str | None:
    """A plugin class declares its Kafka plugin type as the class attribute ``plugin_type``."""
    return getattr(cls, "plugin_type", None)


@functools.lru_cache(maxsize=1)
def _builtin_specs() -> tuple[PluginSpec, ...]:
    specs: list[PluginSpec] = []
    for mod in _CATALOGS:
        specs.extend(importlib.import_module(mod).CATALOG)
    return tuple(specs)


def _entry_point_specs(family: str) -> list[PluginSpec]:
    out = []
    for ep in metadata.entry_points(group=_GROUPS[family]):
        target = ep.value.replace(" ", "")
        # The type is known only after import; keep the family's first type until then.
        out.append(PluginSpec(FAMILIES[family][0], target, (ep.name, target.replace(":", "."))))
    return out


def all_specs(family: str | None = None) -> list[PluginSpec]:
    """Every known plugin (built-in and entry points), optionally of one family."""
    fams = [family] if family else list(FAMILIES)
    out: list[PluginSpec] = []
    for f in fams:
        out.extend(s for s in _builtin_specs() if s.type in FAMILIES[f])
        out.extend(_entry_point_specs(f))
    return out


def resolve_spec(family: str, name: str) -> PluginSpec | None:
    """The catalog or entry-point spec answering to ``name`` (exact match first, then case-insensitive)."""
    for s in _builtin_specs():  # the common case, without reading every installed package's entry points
        if s.type in FAMILIES[family] and name in s.names:
            return s
    specs = all_specs(family)
    for s in specs:
        if name in s.names:
            return s
    low = name.lower()
    for s in specs:
        if low in (n.lower() for n in s.names):
            return s
    return None


@contextlib.contextmanager
def dotted_paths_restricted(allowed_modules: Sequence[str]) -> Iterator[None]:
    """Within the block (this thread or task only), a dotted path resolves only when its module is one of
    ``allowed_modules`` or inside one of them; built-ins and entry points resolve as always.

    >>> with dotted_paths_restricted(()):                       # doctest: +SKIP
    ...     resolve_class("connector", "os.system")            # PluginNotFoundError, nothing imported
    """
    token = _ALLOWED_MODULES.set(tuple(m.strip().rstrip(".") for m in allowed_modules if m.strip()))
    try:
        yield
    finally:
        _ALLOWED_MODULES.reset(token)


def _split_path(name: str) -> tuple[str, str] | None:
    if ":" in name:
        module, _, attr = name.partition(":")
    elif "." in name:
        module, _, attr = name.rpartition(".")
    else:
        return None
    return module, attr


def dotted_path_allowed(name: str) -> bool:
    """Whether ``name`` may be imported as a dotted path here (always, outside :func:`dotted_paths_restricted`)."""
    allowed = _ALLOWED_MODULES.get()
    if allowed is None:
        return True
    parts = _split_path(name)
    if parts is None:
        return False
    module = parts[0]
    return any(module == m or module.startswith(m + ".") for m in allowed)


def _import_path(name: str) -> type[Any] | None:
    parts = _split_path(name)
    if parts is None or not dotted_path_allowed(name):
        return None
    module, attr = parts
    try:
        obj: object = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj if isinstance(obj, type) else None


def resolve_class(family: str, name: str, *, key: str = "connector.class") -> type[Any]:
    """Resolve ``name`` to a plugin class of ``family``; raise a ConfigError naming ``key`` otherwise.

    The class is typed ``type[Any]``: what it offers (``config_def``, ``plugin_type``, ...) depends on the family."""
    if family not in FAMILIES:
        raise ValueError(f"unknown plugin family {family!r}")
    spec = resolve_spec(family, name)
    cls = spec.load() if spec is not None else _import_path(name)
    if cls is None:
        raise PluginNotFoundError([ConfigProblem(key, _not_found_message(family, name, key))])
    ptype = plugin_type_of(cls)
    if ptype not in FAMILIES[family]:
        raise ConfigError([ConfigProblem(key, f"Invalid value {name} for configuration {key}: class "
                                              f"{cls.__module__}.{cls.__qualname__} is not a {family} plugin "
                                              f"(its plugin_type is {ptype!r}; expected one of "
                                              f"{', '.join(FAMILIES[family])})")])
    return cls


def known_names(family: str) -> list[str]:
    return sorted({n for s in all_specs(family) for n in s.names})


def _not_found_message(family: str, name: str, key: str) -> str:
    names = known_names(family)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    short = sorted({s.names[1] if len(s.names) > 1 else s.names[0] for s in all_specs(family)})
    hint = f' Did you mean "{close[0]}"?' if close else ""
    if dotted_path_allowed(name):
        paths = "a dotted Python path to a class also works."
    else:
        paths = ("dotted Python paths resolve only for the modules the worker config allows "
                 "(plugin.allowed.modules).")
    return (f"Invalid value {name} for configuration {key}: no {family} plugin named {name!r}.{hint} "
            f"Known {family} plugins: {', '.join(short) or '(none)'}; {paths}")


def describe_all(families: Iterable[str] | None = None) -> list[dict[str, str]]:
    """``GET /connector-plugins`` rows: ``{"class", "type", "version"}``."""

    rows = []
    for f in families or FAMILIES:
        for s in all_specs(f):
            rows.append({"class": s.class_name, "type": s.type, "version": __version__})
    return rows
