"""Confluent's JSON Schema <-> Kafka Connect schemas <-> Spark types (Confluent's ``JsonSchemaData``).

Connect schemas here are the JSON form the JsonConverter writes (``{"type": "int64", "optional": true, ...}``), so
the Spark side is :mod:`.connect_schema`'s mapping. JSON Schema -> Connect, as Confluent reads a registry schema:

| JSON Schema | Connect |
|---|---|
| ``integer`` (``connect.type`` int8/int16/int32/int64, default int64) | that integer type |
| ``number`` (``connect.type`` float32/float64, default float64; ``bytes``: a Decimal) | that type |
| ``string`` (``connect.type: bytes``: bytes) | string (bytes) |
| ``boolean`` | boolean |
| ``array`` of ``items`` (``connect.type: map`` with ``key``/``value`` objects: a map) | array (map) |
| ``object`` with ``properties`` (ordered by ``connect.index``, else as written) | struct |
| ``object`` with ``connect.type: map``, or with ``additionalProperties`` and no ``properties`` | map of strings |
| ``enum`` | string |
| ``oneOf``/``anyOf``/``type`` list of ``null`` and one type | that type, optional |
| ``{}``, ``true``, an ``object`` with neither properties nor a value schema | string: the value's JSON text |

``title`` is the Connect name (``org.apache.kafka.connect.data.Date``/``Time``/``Timestamp``/``Decimal`` give the
logical types), ``description`` the doc, ``connect.version`` and ``connect.parameters`` as they are. A property is
optional when its schema admits ``null`` or, with ``use.optional.for.nonrequired``, when ``required`` does not list
it. Local ``$ref`` (``#/definitions/...``) are followed; a recursive schema, a union of several non-null types
(Confluent's ``generalized.sum.type.support``), ``allOf`` of several schemas and tuple ``items`` have no Spark
type and are a :class:`~spark_connect_bridge.errors.DataError`. Where Confluent reads an object without
properties as an empty struct, it is a map here, which keeps its content.

Connect -> JSON Schema is Confluent's ``fromConnectSchema``: an optional schema is ``{"oneOf": [{"type": "null"},
...]}``, struct fields carry ``connect.index``, integer and float types ``connect.type``, maps with string keys are
objects with ``additionalProperties`` and ``connect.type: map``, other maps arrays of ``{key, value}`` objects;
``object.additional.properties=false`` closes the structs (``additionalProperties: false``).

>>> json_schema_to_spark({"type": "object", "properties": {"id": {"type": "integer"}}})[0].simpleString()
'struct<id:bigint>'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import DataType

from ..errors import DataError
from .connect_schema import DATE, DECIMAL, TIME, TIMESTAMP, connect_to_spark, spark_to_connect

__all__ = ["connect_to_json_schema", "json_schema_to_connect", "json_schema_to_spark", "spark_to_json_schema"]

_NAMESPACE = "io.confluent.connect.json"
_INTS = ("int8", "int16", "int32", "int64")
_FLOATS = {"float32": "float", "float64": "double"}
_CONNECT_FLOAT = {"float": "float32", "double": "float64", "float32": "float32", "float64": "float64"}
_LOGICAL = {DATE: "int32", TIME: "int32", TIMESTAMP: "int64"}
_ANY = {"type": "string"}  # a value of any JSON type, read as its JSON text


class _Reader:
    """One JSON Schema document being read (its root, for local ``$ref``)."""

    def __init__(self, root: Any, optional_for_nonrequired: bool):
        self.root = root
        self.optional_for_nonrequired = optional_for_nonrequired
        self.following: list[str] = []

    def deref(self, node: Any) -> tuple[Any, str | None]:
        ref = node.get("$ref") if isinstance(node, dict) else None
        if ref is None:
            return node, None
        if ref in self.following:
            raise DataError(f"JSON Schema $ref {ref} is recursive: a recursive schema has no Spark type")
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise DataError(f"JSON Schema $ref {ref!r} is not local (#/...): references to other subjects are not "
                            f"supported")
        target: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise DataError(f"JSON Schema $ref {ref} points at nothing")
            target = target[part]
        return target, ref

    def read(self, node: Any, optional: bool = False) -> dict[str, Any]:
        node, ref = self.deref(node)
        if ref is not None:
            self.following.append(ref)
            try:
                return self.read(node, optional)
            finally:
                self.following.pop()
        if node is True or node == {}:
            return {**_ANY, "optional": True}
        if node is False or not isinstance(node, dict):
            raise DataError(f"JSON Schema {node!r} admits no value; it has no Spark type")
        for key in ("oneOf", "anyOf"):
            if key in node:
                branches = [self.deref(b)[0] for b in node[key]]
                rest = [b for b in node[key] if not _is_null(self.deref(b)[0])]
                if len(rest) == 1:
                    return self.read(rest[0], optional or len(rest) < len(branches))
                raise DataError(f"JSON Schema {key} of {len(rest)} non-null schemas (a sum type) has no Spark type; "
                                f"set spark.schema")
        if "allOf" in node:
            typed = [b for b in node["allOf"] if isinstance(self.deref(b)[0], dict) and
                     ({"type", "properties", "$ref"} & set(self.deref(b)[0]))]
            if len(node["allOf"]) == 1 or len(typed) == 1:
                return self.read((typed or node["allOf"])[0], optional)
            raise DataError("JSON Schema allOf of several schemas has no Spark type; set spark.schema")
        t = node.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            if len(rest) != 1:
                raise DataError(f"JSON Schema type {t} (a sum type) has no Spark type; set spark.schema")
            return self.read({**node, "type": rest[0]}, optional or len(rest) < len(t))
        if t is None and "enum" in node:
            t = "string"
        out = self._typed(node, t)
        out["optional"] = optional or out.get("optional", False)
        return self._annotate(node, out)

    def _typed(self, node: dict[str, Any], t: Any) -> dict[str, Any]:
        ctype = node.get("connect.type")
        title = node.get("title")
        if t == "integer":
            if title in _LOGICAL:
                return {"type": _LOGICAL[title]}
            return {"type": ctype if ctype in _INTS else "int64"}
        if t == "number":
            if ctype == "bytes" or title == DECIMAL:
                return {"type": "bytes"}
            return {"type": _FLOATS.get(ctype or "", "double")}
        if t == "string":
            return {"type": "bytes" if ctype == "bytes" else "string"}
        if t == "boolean":
            return {"type": "boolean"}
        if t == "array":
            items = node.get("items")
            if items is None or isinstance(items, list):
                raise DataError("JSON Schema array without one \"items\" schema has no Spark type")
            entry, _ = self.deref(items)
            props = entry.get("properties", {}) if isinstance(entry, dict) else {}
            if ctype == "map" and set(props) == {"key", "value"}:
                return {"type": "map", "keys": {**self.read(props["key"]), "optional": False},
                        "values": self.read(props["value"])}
            return {"type": "array", "items": self.read(items)}
        if t == "object" or (t is None and "properties" in node):
            props = node.get("properties")
            extra = node.get("additionalProperties", True)
            if ctype == "map" or (not props and isinstance(extra, dict)):
                values = self.read(extra) if isinstance(extra, dict) else {**_ANY, "optional": True}
                return {"type": "map", "keys": {"type": "string", "optional": False}, "values": values}
            if not props:
                return {"type": "map", "keys": {"type": "string", "optional": False},
                        "values": {**_ANY, "optional": True}}
            required = set(node.get("required", []))
            ordered = sorted(enumerate(props.items()), key=lambda e: (_index(self.deref(e[1][1])[0], e[0]), e[0]))
            fields = []
            for _, (name, sub) in ordered:
                optional = self.optional_for_nonrequired and name not in required
                fields.append({**self.read(sub, optional), "field": name})
            return {"type": "struct", "fields": fields}
        if t is None:
            return {**_ANY, "optional": True}
        raise DataError(f"JSON Schema type {t!r} has no Spark type")

    @staticmethod
    def _annotate(node: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
        if node.get("title"):
            out["name"] = str(node["title"])
        if isinstance(node.get("connect.version"), int):
            out["version"] = node["connect.version"]
        if node.get("description") is not None:
            out["doc"] = str(node["description"])
        params = node.get("connect.parameters")
        if isinstance(params, Mapping) and params:
            out["parameters"] = {str(k): str(v) for k, v in params.items()}
        return out


def _is_null(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "null"


def _index(node: Any, default: int) -> int:
    index = node.get("connect.index") if isinstance(node, dict) else None
    if index is None and isinstance(node, dict):  # an optional field: the index sits on its oneOf
        index = node.get("connect.index")
    return index if isinstance(index, int) else default


def json_schema_to_connect(schema: Any, *, optional_for_nonrequired: bool = False) -> dict[str, Any]:
    """A JSON Schema document (a parsed JSON value) -> the Connect schema JSON; raise :class:`DataError`."""
    return _Reader(schema, optional_for_nonrequired).read(schema)


def json_schema_to_spark(schema: Any, *, optional_for_nonrequired: bool = False) -> tuple[DataType, bool,
                                                                                           dict[str, Any]]:
    """A JSON Schema document -> ``(spark type, nullable, field metadata)``; raise :class:`DataError`."""
    return connect_to_spark(json_schema_to_connect(schema, optional_for_nonrequired=optional_for_nonrequired))


def connect_to_json_schema(connect: Mapping[str, Any], *, additional_properties: bool = True,
                           index: int | None = None) -> dict[str, Any]:
    """A Connect schema JSON -> the JSON Schema Confluent's JsonSchemaConverter registers for it."""
    t = connect["type"]
    name = connect.get("name")
    out: dict[str, Any]
    if t in _INTS:
        out = {"type": "integer", "connect.type": t}
    elif t in _CONNECT_FLOAT:
        out = {"type": "number", "connect.type": _CONNECT_FLOAT[t]}
    elif t == "boolean":
        out = {"type": "boolean"}
    elif t == "string":
        out = {"type": "string"}
    elif t == "bytes":
        out = {"type": "number" if name == DECIMAL else "string", "connect.type": "bytes"}
    elif t == "array":
        out = {"type": "array", "items": connect_to_json_schema(connect["items"],
                                                                additional_properties=additional_properties)}
    elif t == "map":
        keys, values = connect["keys"], connect["values"]
        if keys["type"] == "string" and not keys.get("optional", False):
            out = {"type": "object", "additionalProperties": connect_to_json_schema(
                values, additional_properties=additional_properties), "connect.type": "map"}
        else:
            entry = {"type": "object", "properties": {
                "key": connect_to_json_schema(keys, additional_properties=additional_properties, index=0),
                "value": connect_to_json_schema(values, additional_properties=additional_properties, index=1)}}
            out = {"type": "array", "items": entry, "connect.type": "map"}
    elif t == "struct":
        props = {f["field"]: connect_to_json_schema(f, additional_properties=additional_properties, index=i)
                 for i, f in enumerate(connect.get("fields") or [])}
        out = {"type": "object", "properties": props}
        if not additional_properties:
            out["additionalProperties"] = False
    else:
        raise DataError(f"Connect type {t!r} has no JSON Schema equivalent")
    if name:
        out["title"] = name
    if connect.get("version") is not None:
        out["connect.version"] = int(connect["version"])
    if connect.get("doc") is not None:
        out["description"] = connect["doc"]
    params = {k: v for k, v in (connect.get("parameters") or {}).items() if not k.startswith(_NAMESPACE)}
    if params:
        out["connect.parameters"] = params
    if connect.get("optional", False):
        out = {"oneOf": [{"type": "null"}, out]}
    if index is not None:
        out["connect.index"] = index
    return out


def spark_to_json_schema(data_type: DataType, metadata: Mapping[str, Any] | None = None, nullable: bool = False, *,
                         additional_properties: bool = True) -> dict[str, Any]:
    """A Spark type (with its field metadata) -> the JSON Schema registered for it; raise :class:`DataError`."""
    return connect_to_json_schema(spark_to_connect(data_type, nullable, metadata),
                                  additional_properties=additional_properties)
