"""JSON Schema documents in a Schema Registry: parsing, identity and compatibility levels (``schemaType: JSON``).

:func:`parse_json_schema` checks that a text is a JSON Schema document the registry can hold: a JSON object (or
``true``/``false``) whose ``type``, ``properties``, ``required``, ``items``, ``additionalProperties``, ``enum`` and
combinators are well formed and whose ``$ref`` are local (``#/definitions/...``, ``#/$defs/...``).

:func:`can_read` says whether every document valid under ``writer`` is valid under ``reader`` and, when not, why,
following Confluent's JSON Schema rules (the ``Difference`` types its registry reports):

* types: a reader accepts the writer's types (``integer`` is a ``number``; a schema without ``type`` accepts
  anything); ``"type": [..]`` lists and ``oneOf``/``anyOf`` are unions: each writer branch must be readable by
  some reader branch (a nullable type is a union with ``null``);
* objects: a property the reader requires must be required by the writer (``REQUIRED_ATTRIBUTE_ADDED``);
  properties in both are compared; a property only the writer has is refused by a closed reader
  (``additionalProperties: false``, ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``) and compared with the
  reader's ``additionalProperties`` schema when it has one; a property only the reader has is refused when the
  writer is open (``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``: old data may hold that name with any type); an open
  writer read by a closed reader is refused;
* arrays by ``items``; ``enum``: the reader's values must include the writer's;
* not compared: string and number bounds (``maxLength``, ``minimum``, ``pattern``, ...), ``allOf``/``not``
  beyond identical text, ``dependencies``, ``patternProperties``.

So, as with Confluent's registry, adding an optional property to an open object is not BACKWARD compatible; a
closed object (``additionalProperties: false``, JsonSchemaConverter's ``object.additional.properties=false``) can
gain optional properties.

>>> can_read('{"type": "number"}', '{"type": "integer"}')
[]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["JsonSchemaError", "can_read", "canonical", "check_compatibility", "parse_json_schema"]

_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_UNIONS = ("oneOf", "anyOf")
_MAX_DEPTH = 200  # path segments: recursive schemas ($ref to an enclosing node) are followed this deep


class JsonSchemaError(ValueError):
    """The text is not a JSON Schema document this registry can hold."""


def canonical(obj: Any) -> str:
    """A stable text for identity checks (key order sorted, no whitespace)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def parse_json_schema(schema: str | Any) -> Any:
    """The JSON value of a JSON Schema document (text or value), checked; raise :class:`JsonSchemaError`."""
    if isinstance(schema, str):
        try:
            obj = json.loads(schema)
        except ValueError as e:
            raise JsonSchemaError(f"Invalid schema: not JSON ({e})") from None
    else:
        obj = schema
    _check_node(obj, obj, "#")
    return obj


def _check_node(node: Any, root: Any, path: str) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise JsonSchemaError(f"Invalid schema: {path} must be an object or a boolean")
    t = node.get("type")
    types = t if isinstance(t, list) else [t] if t is not None else []
    for one in types:
        if one not in _TYPES:
            raise JsonSchemaError(f"Invalid schema: {path}/type {one!r} is not one of {', '.join(sorted(_TYPES))}")
    ref = node.get("$ref")
    if ref is not None:
        _resolve_ref(ref, root, path)
    props = node.get("properties", {})
    if not isinstance(props, dict):
        raise JsonSchemaError(f"Invalid schema: {path}/properties must be an object")
    for name, sub in props.items():
        _check_node(sub, root, f"{path}/properties/{name}")
    required = node.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise JsonSchemaError(f"Invalid schema: {path}/required must be an array of strings")
    for key in ("items", "additionalProperties", "not"):
        if key in node and not isinstance(node[key], list):
            _check_node(node[key], root, f"{path}/{key}")
    if isinstance(node.get("items"), list):
        for i, sub in enumerate(node["items"]):
            _check_node(sub, root, f"{path}/items/{i}")
    for key in ("oneOf", "anyOf", "allOf"):
        if key in node:
            if not isinstance(node[key], list) or not node[key]:
                raise JsonSchemaError(f"Invalid schema: {path}/{key} must be a non-empty array")
            for i, sub in enumerate(node[key]):
                _check_node(sub, root, f"{path}/{key}/{i}")
    for key in ("definitions", "$defs"):
        for name, sub in (node.get(key) or {}).items():
            _check_node(sub, root, f"{path}/{key}/{name}")
    if "enum" in node and not isinstance(node["enum"], list):
        raise JsonSchemaError(f"Invalid schema: {path}/enum must be an array")


def _resolve_ref(ref: Any, root: Any, path: str) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise JsonSchemaError(f"Invalid schema: {path}/$ref {ref!r} is not a local reference (#/...); schema "
                              f"references to other subjects are not supported by this registry")
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonSchemaError(f"Invalid schema: {path}/$ref {ref!r} points at nothing")
    return node


# -- compatibility ----------------------------------------------------------------------------------------

class _Doc:
    """A parsed document: its root, for local ``$ref``."""

    def __init__(self, obj: Any):
        self.root = obj

    def deref(self, node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                return True  # a reference to itself: any value
            seen.add(ref)
            node = _resolve_ref(ref, self.root, "#")
        return node


def _branches(doc: _Doc, node: Any) -> list[Any]:
    """The alternatives of a node: union members, one per listed type; a plain node is its own single branch."""
    node = doc.deref(node)
    if isinstance(node, dict):
        for key in _UNIONS:
            if key in node:
                return [b for sub in node[key] for b in _branches(doc, sub)]
        t = node.get("type")
        if isinstance(t, list):
            return [{**node, "type": one} for one in t]
    return [node]


def _type_of(node: Any) -> str | None:
    """The branch's single type (``None``: any value; ``"nothing"`` for ``false``)."""
    if node is True:
        return None
    if node is False:
        return "nothing"
    t = node.get("type")
    if t is None and "enum" in node:
        return None
    return t if isinstance(t, str) else None


def can_read(reader: str | Any, writer: str | Any) -> list[str]:
    """Why documents valid under ``writer`` may be invalid under ``reader`` (empty list: they are all valid)."""
    r = _Doc(parse_json_schema(reader))
    w = _Doc(parse_json_schema(writer))
    out: list[str] = []
    _check(r, r.root, w, w.root, "#", out)
    return out


def _check(rd: _Doc, rn: Any, wd: _Doc, wn: Any, path: str, out: list[str]) -> None:
    rn, wn = rd.deref(rn), wd.deref(wn)
    if path.count("/") > _MAX_DEPTH or (not _has_ref(rn) and canonical(rn) == canonical(wn)):
        return  # identical, or as deep as a recursive schema is followed
    readers = _branches(rd, rn)
    for wb in _branches(wd, wn):
        if _type_of(wb) == "nothing":
            continue
        trials = []
        for rb in readers:
            trial: list[str] = []
            _check_branch(rd, rb, wd, wb, path, trial)
            if not trial:
                break
            trials.append(trial)
        else:
            same = [t for rb, t in zip(readers, trials) if _type_of(rb) == _type_of(wb)]
            if len(readers) == 1 or len(same) == 1:
                out.extend((same or trials)[0])
            else:
                out.append(f"{path}: TYPE_CHANGED: the reader does not accept the writer's type "
                           f"{_type_of(wb) or 'any'}")


def _has_ref(node: Any) -> bool:
    return "$ref" in json.dumps(node)


def _check_branch(rd: _Doc, rb: Any, wd: _Doc, wb: Any, path: str, out: list[str]) -> None:
    rt, wt = _type_of(rb), _type_of(wb)
    if rt == "nothing":
        out.append(f"{path}: TYPE_CHANGED: the reader accepts nothing")
        return
    if isinstance(rb, dict) and "enum" in rb:
        if not isinstance(wb, dict) or "enum" not in wb:
            out.append(f"{path}: ENUM_ARRAY_NARROWED: the reader has an enum, the writer does not")
        else:
            missing = [v for v in wb["enum"] if v not in rb["enum"]]
            if missing:
                out.append(f"{path}: ENUM_ARRAY_NARROWED: the reader's enum lacks {json.dumps(missing)[:200]}")
    if rt is None:
        return
    if wt is None:
        out.append(f"{path}: TYPE_NARROWED: the writer accepts any value, the reader only {rt}")
        return
    if rt != wt and not (rt == "number" and wt == "integer"):
        out.append(f"{path}: TYPE_CHANGED: writer type {wt} cannot be read as {rt}")
        return
    if rt == "object":
        _check_object(rd, rb, wd, wb, path, out)
    elif rt == "array":
        ri, wi = rb.get("items", True), wb.get("items", True)
        if isinstance(ri, list) or isinstance(wi, list):
            if canonical(ri) != canonical(wi):
                out.append(f"{path}/items: ITEMS_CHANGED: tuple items differ")
        else:
            _check(rd, ri, wd, wi, f"{path}/items", out)


def _check_object(rd: _Doc, rb: dict[str, Any], wd: _Doc, wb: dict[str, Any], path: str, out: list[str]) -> None:
    rprops, wprops = rb.get("properties", {}), wb.get("properties", {})
    radd, wadd = rb.get("additionalProperties", True), wb.get("additionalProperties", True)
    wopen = wadd is not False
    for name in sorted(set(rb.get("required", [])) - set(wb.get("required", []))):
        out.append(f"{path}/properties/{name}: REQUIRED_ATTRIBUTE_ADDED: the reader requires {name!r}, the writer "
                   f"does not")
    for name, wsub in wprops.items():
        where = f"{path}/properties/{name}"
        if name in rprops:
            _check(rd, rprops[name], wd, wsub, where, out)
        elif radd is False:
            out.append(f"{where}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL: the writer has {name!r}, the closed "
                       f"reader does not")
        elif radd is not True:
            _check(rd, radd, wd, wsub, where, out)
    for name in rprops:
        if name not in wprops and wopen:
            out.append(f"{path}/properties/{name}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL: the writer is open and "
                       f"has no {name!r} (old data may hold it with another type)")
    if wopen and radd is False:
        out.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED: the writer allows additional properties, the reader "
                   f"does not")
    elif wopen and radd is not True:
        _check(rd, radd, wd, True if wadd is True else wadd, f"{path}/additionalProperties", out)


def check_compatibility(new: str | Any, existing: Sequence[str | Any], level: str) -> list[str]:
    """Problems of registering ``new`` after ``existing`` (oldest first) at ``level``; empty when compatible."""
    level = level.upper()
    if level == "NONE" or not existing:
        return []
    targets = list(existing) if level.endswith("_TRANSITIVE") else list(existing)[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for i, old in enumerate(targets):
        label = f"version {len(existing) - len(targets) + i + 1}"
        if base in ("BACKWARD", "FULL"):
            problems += [f"{label} (new schema reading old data): {p}" for p in can_read(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"{label} (old schema reading new data): {p}" for p in can_read(old, new)]
    return problems
