"""Avro schema resolution (Avro spec, "Schema Resolution") and Schema Registry compatibility levels.

:func:`can_read` says whether data written with ``writer`` can be read with ``reader`` and, when not, why:

* identical primitives; the promotions int -> long/float/double, long -> float/double, float -> double,
  string <-> bytes;
* records match by unqualified name (or a reader alias); each reader field is read from the writer field of
  the same name (or alias), or takes its default (a reader field without default and without writer field
  is an error); writer fields the reader lacks are skipped;
* enums match by name; every writer symbol must exist in the reader unless the reader has a ``default``;
* arrays by items, maps by values, fixed by name and size;
* a writer union is readable when every branch is; a reader union reads a writer type that one of its
  branches can read;
* named types are followed by reference (recursive schemas terminate).

:func:`check_compatibility` applies a Confluent level (BACKWARD, BACKWARD_TRANSITIVE, FORWARD,
FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE) of a new schema against the existing versions (oldest
first).

>>> can_read('"long"', '"int"')
[]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["LEVELS", "parse_avro", "can_read", "check_compatibility", "canonical", "AvroSchemaError"]

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
               ("float", "double"), ("string", "bytes"), ("bytes", "string")}


class AvroSchemaError(ValueError):
    """The text is not a valid Avro schema."""


class Schema:
    """A parsed schema: a normalized tree plus its table of named types."""

    def __init__(self, root: dict[str, Any], names: dict[str, dict[str, Any]], obj: Any):
        self.root, self.names, self.obj = root, names, obj

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while node["type"] == "ref":
            node = self.names[node["name"]]
        return node


def canonical(obj: Any) -> str:
    """A stable text for identity checks (key order sorted, no whitespace)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def parse_avro(schema: str | Any) -> Schema:
    """Parse and validate an Avro schema (text or JSON value); raise :class:`AvroSchemaError`."""
    if isinstance(schema, str):
        try:
            obj = json.loads(schema)
        except ValueError:
            obj = schema.strip()  # a bare primitive name such as string without quotes
            if obj not in PRIMITIVES:
                raise AvroSchemaError(f"Invalid schema: not JSON ({schema[:100]!r})") from None
    else:
        obj = schema
    try:
        import fastavro

        fastavro.parse_schema(obj, _write_hint=False)
    except ImportError:  # pragma: no cover - fastavro is in the avro extra
        pass
    except Exception as e:
        raise AvroSchemaError(f"Invalid schema: {e}") from e
    names: dict[str, dict[str, Any]] = {}
    root = _norm(obj, "", names)
    return Schema(root, names, obj)


def _fullname(name: str, ns: str | None) -> str:
    return name if "." in name or not ns else f"{ns}.{name}"


def _norm(s: Any, ns: str, names: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if isinstance(s, str):
        if s in PRIMITIVES:
            return {"type": s}
        full = _fullname(s, ns)
        if full not in names and s in names:
            full = s
        if full not in names:
            raise AvroSchemaError(f"Invalid schema: unknown type {s!r}")
        return {"type": "ref", "name": full}
    if isinstance(s, list):
        return {"type": "union", "branches": [_norm(b, ns, names) for b in s]}
    if not isinstance(s, dict) or "type" not in s:
        raise AvroSchemaError(f"Invalid schema: {s!r}")
    t = s["type"]
    if isinstance(t, (dict, list)):
        return _norm(t, ns, names)
    if t in PRIMITIVES:
        return {"type": t, "logical": s.get("logicalType")}
    if t in ("record", "error", "enum", "fixed"):
        full = _fullname(s["name"], s.get("namespace", ns))
        inner_ns = full.rpartition(".")[0]
        aliases = [_fullname(a, inner_ns) for a in s.get("aliases", [])]
        node: dict[str, Any] = {"type": "record" if t == "error" else t, "name": full, "aliases": aliases}
        names[full] = node
        if t in ("record", "error") and not isinstance(s.get("fields"), list):
            raise AvroSchemaError(f"Invalid schema: record {full} has no \"fields\" list")
        if t in ("record", "error"):
            node["fields"] = [{"name": f["name"], "aliases": list(f.get("aliases", [])), "has_default": "default" in f,
                               "type": _norm(f["type"], inner_ns, names)} for f in s.get("fields", [])]
        elif t == "enum":
            node["symbols"] = list(s.get("symbols", []))
            node["default"] = s.get("default")
        else:
            node["size"] = s.get("size")
        return {"type": "ref", "name": full}
    if t == "array":
        return {"type": "array", "items": _norm(s["items"], ns, names)}
    if t == "map":
        return {"type": "map", "values": _norm(s["values"], ns, names)}
    return _norm(t, ns, names)  # a named reference written as {"type": "Name"}


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _describe(node: dict[str, Any]) -> str:
    return node.get("name") or node["type"]


def can_read(reader: str | Schema | Any, writer: str | Schema | Any) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty list: it can)."""
    r = reader if isinstance(reader, Schema) else parse_avro(reader)
    w = writer if isinstance(writer, Schema) else parse_avro(writer)
    problems: list[str] = []
    _check(r, r.root, w, w.root, "", set(), problems)
    return problems


def _check(rs: Schema, rn: dict[str, Any], ws: Schema, wn: dict[str, Any], path: str,
           seen: set[tuple[str, str]], out: list[str]) -> None:
    rn, wn = rs.resolve(rn), ws.resolve(wn)
    rt, wt = rn["type"], wn["type"]
    where = path or "/"
    if wt == "union":
        for i, b in enumerate(wn["branches"]):
            _check(rs, rn, ws, b, f"{path}/{i}", seen, out)
        return
    if rt == "union":
        for b in rn["branches"]:
            trial: list[str] = []
            _check(rs, b, ws, wn, path, set(seen), trial)
            if not trial:
                return
        out.append(f"{where}: reader union lacks writer type {_describe(wn)}")
        return
    if rt in PRIMITIVES or wt in PRIMITIVES:
        if rt == wt or (wt, rt) in _PROMOTIONS:
            return
        out.append(f"{where}: writer type {_describe(wn)} cannot be read as {_describe(rn)}")
        return
    if rt != wt:
        out.append(f"{where}: writer type {_describe(wn)} cannot be read as {_describe(rn)}")
        return
    if rt in ("record", "enum", "fixed") and _short(rn["name"]) != _short(wn["name"]) \
            and wn["name"] not in rn["aliases"] and _short(wn["name"]) not in map(_short, rn["aliases"]):
        out.append(f"{where}: writer {rt} {wn['name']} does not match reader {rt} {rn['name']}")
        return
    if rt == "record":
        key = (rn["name"], wn["name"])
        if key in seen:
            return
        seen = seen | {key}
        by_name = {f["name"]: f for f in wn["fields"]}
        for f in rn["fields"]:
            wf = by_name.get(f["name"]) or next((by_name[a] for a in f["aliases"] if a in by_name), None)
            if wf is None:
                if not f["has_default"]:
                    out.append(f"{path}/{f['name']}: reader field {f['name']!r} has no default value and is "
                               f"missing from the writer")
                continue
            _check(rs, f["type"], ws, wf["type"], f"{path}/{f['name']}", seen, out)
    elif rt == "enum":
        if rn.get("default") is None:
            missing = [s for s in wn["symbols"] if s not in rn["symbols"]]
            if missing:
                out.append(f"{where}: reader enum {rn['name']} lacks symbols {missing}")
    elif rt == "fixed":
        if rn["size"] != wn["size"]:
            out.append(f"{where}: fixed {rn['name']} size {wn['size']} cannot be read as size {rn['size']}")
    elif rt == "array":
        _check(rs, rn["items"], ws, wn["items"], f"{path}/items", seen, out)
    elif rt == "map":
        _check(rs, rn["values"], ws, wn["values"], f"{path}/values", seen, out)


def check_compatibility(new: str | Schema, existing: Sequence[str | Schema], level: str) -> list[str]:
    """Problems of registering ``new`` after ``existing`` (oldest first) at ``level``; empty when compatible."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level}")
    if level == "NONE" or not existing:
        return []
    n = new if isinstance(new, Schema) else parse_avro(new)
    olds = [e if isinstance(e, Schema) else parse_avro(e) for e in existing]
    targets = olds if level.endswith("_TRANSITIVE") else olds[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for i, old in enumerate(targets):
        label = f"version {len(olds) - len(targets) + i + 1}"
        if base in ("BACKWARD", "FULL"):
            problems += [f"{label} (new schema reading old data): {p}" for p in can_read(n, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"{label} (old schema reading new data): {p}" for p in can_read(old, n)]
    return problems
