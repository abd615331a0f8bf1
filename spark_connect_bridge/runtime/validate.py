"""``PUT /connector-plugins/{plugin}/config/validate``: Kafka's ConfigInfos, generated from the declarations.

Every declared key of the connector (its own and the common ones) gets a ``{"definition", "value"}`` entry;
each transform and predicate alias gets its ``type`` entry and its own keys under group ``Transforms: <alias>``
/ ``Predicates: <alias>``, as Kafka does. Problems the whole-config check finds on other keys (an unknown key,
with its "did you mean" suggestion; a converter sub-key) are reported too, with ``"definition": null``, so a
config this endpoint accepts is one the worker accepts.

>>> infos = validate_connector_config("FileStreamSource", {"connector.class": "FileStreamSource"})  # doctest: +SKIP
>>> infos["error_count"]                                                                             # doctest: +SKIP
2
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import HIDDEN, Type
from ..connectors.base import connector_config_def
from ..connectors.factory import connector_class
from ..core import plugins
from ..engine.pipeline import prepare
from ..errors import ConfigError
from .errors import BadRequestError
from .secrets import mask_config

__all__ = ["validate_connector_config"]


def _norm(name: str) -> str:
    simple = name.rsplit(".", 1)[-1]
    return name[: -len("Connector")] if simple.endswith("Connector") and simple != "Connector" else name


def _value(key: Any, name: str, props: Mapping[str, str], errors: list[str]) -> dict[str, Any]:
    if name in props:
        v: Any = props[name]
    else:
        v = key.default_text() if key is not None else None
    if key is not None and key.type is Type.PASSWORD and v not in (None, "") and not str(v).startswith("${"):
        v = HIDDEN
    elif isinstance(v, str):
        v = mask_config({name: v})[name]
    return {"name": name, "value": v, "recommended_values": [], "errors": list(errors), "visible": True}


def _entries(definition: Any, props: Mapping[str, str], prefix: str = "", group: str | None = None,
             order_base: int = 0) -> list[dict[str, Any]]:
    sub = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)} if prefix else dict(props)
    errors = definition.validate(sub)
    out: list[dict[str, Any]] = []
    keys = {k.name: k for k in definition}
    for i, info in enumerate(definition.to_rest()):
        key = keys[info["name"]]
        name = prefix + info["name"]
        d = dict(info, name=name)
        if group is not None:
            d["group"], d["order"] = group, order_base + i
        out.append({"definition": d, "value": _value(key, info["name"], sub, errors.get(info["name"], []))
                    | {"name": name}})
    # cross-key problems reported under keys the definition does not hold
    for k, msgs in errors.items():
        if k not in keys and msgs:
            out.append({"definition": None, "value": {"name": prefix + k, "value": sub.get(k), "recommended_values":
                                                      [], "errors": list(msgs), "visible": True}})
    return out


def _type_entry(list_key: str, alias: str, group: str, props: Mapping[str, str], errors: list[str]) -> dict[str, Any]:
    name = f"{list_key}.{alias}.type"
    what = "transformation" if list_key == "transforms" else "predicate"
    d = {"name": name, "type": "CLASS", "required": True, "default_value": None, "importance": "HIGH",
         "documentation": f"Class for the '{alias}' {what}.", "group": group, "order": 0, "width": "LONG",
         "display_name": f"{what.capitalize()} type for {alias}", "dependents": []}
    return {"definition": d, "value": {"name": name, "value": props.get(name), "recommended_values": [],
                                       "errors": errors, "visible": True}}


def validate_connector_config(plugin: str, props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka's ConfigInfos for ``props``; raises BadRequestError when ``connector.class`` is missing or does not
    name ``plugin``."""

    cc = props.get("connector.class")
    if not cc:
        raise BadRequestError("Connector config contains no connector type")
    if not _norm(cc).endswith(_norm(plugin)) and not _norm(plugin).endswith(_norm(cc).rsplit(".", 1)[-1]):
        raise BadRequestError(f"Included connector type {cc} does not match request type {plugin}")
    try:
        cls = connector_class(props)
    except ConfigError as e:
        raise BadRequestError(str(e.problems[0].message if e.problems else e)) from e
    configs = _entries(connector_config_def(cls), props)
    for list_key, family, label in (("transforms", "transformation", "Transforms"),
                                    ("predicates", "predicate", "Predicates")):
        for alias in [a.strip() for a in props.get(list_key, "").split(",") if a.strip()]:
            group = f"{label}: {alias}"
            type_name = props.get(f"{list_key}.{alias}.type", "")
            type_errors: list[str] = []
            pcls = None
            if not type_name:
                type_errors.append(f'Missing required configuration "{list_key}.{alias}.type" which has no '
                                   f'default value.')
            else:
                try:
                    pcls = plugins.resolve_class(family, type_name, key=f"{list_key}.{alias}.type")
                except ConfigError as e:
                    type_errors.extend(p.message for p in e.problems)
            configs.append(_type_entry(list_key, alias, group, props, type_errors))
            if pcls is not None and getattr(pcls, "config_def", None) is not None:
                prefix = f"{list_key}.{alias}."
                sub = {k: v for k, v in props.items() if k.startswith(prefix)
                       and k[len(prefix):] not in ("type", "predicate", "negate")}
                configs.extend(_entries(pcls.config_def, sub, prefix, group, 1))
    # Whatever else the whole-config check finds (unknown keys, converters, ...), under its key.
    by_name = {c["value"]["name"]: c for c in configs}
    try:
        prepare(props, kind=cls.plugin_type)
    except ConfigError as e:
        for p in e.problems:
            entry = by_name.get(p.key)
            if entry is None:
                entry = {"definition": None, "value": {"name": p.key, "value": None if p.key not in props else
                                                       mask_config({p.key: props[p.key]})[p.key],
                                                       "recommended_values": [], "errors": [], "visible": True}}
                configs.append(entry)
                by_name[p.key] = entry
            if p.message not in entry["value"]["errors"] and not any(p.message.endswith(m) or m.endswith(p.message)
                                                                    for m in entry["value"]["errors"]):
                entry["value"]["errors"].append(p.message)
    groups: list[str] = []
    for c in configs:
        g = (c["definition"] or {}).get("group")
        if g and g not in groups:
            groups.append(g)
    return {"name": cc, "error_count": sum(len(c["value"]["errors"]) for c in configs), "groups": groups,
            "configs": configs}
