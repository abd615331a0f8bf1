"""Spark types (carrying Connect types) <-> Avro schemas, following Confluent's ``AvroData``.

| Connect / Spark | Avro |
|---|---|
| int8 ``tinyint`` / int16 ``smallint`` | ``int`` with ``"connect.type": "int8"`` / ``"int16"`` |
| int32 ``int``, int64 ``bigint``, float32, float64, boolean, string, bytes | ``int``, ``long``, ``float``, ``double``, ``boolean``, ``string``, ``bytes`` |
| optional (nullable) field | union ``["null", T]`` with default null |
| Decimal ``decimal(p,s)`` | ``bytes`` with ``logicalType: decimal``, ``precision``, ``scale`` |
| Date ``date`` / Time (``int`` + connect.name) / Timestamp ``timestamp`` | ``int`` ``date`` / ``int`` ``time-millis`` / ``long`` ``timestamp-millis`` |
| array | array |
| map with string keys / other keys | map / array of ``io.confluent.connect.avro.MapEntry{key, value}`` |
| struct | record named after ``connect.name`` (else ``io.confluent.connect.avro.ConnectDefault``, ``ConnectDefault2`` ...) |

Reading maps Avro enums to ``string``, ``fixed`` to ``binary`` and ``timestamp-micros`` to ``timestamp``; a
union of more than one non-null type has no Spark equivalent and is an error.

>>> spark_to_avro(LongType(), {}, False)
'long'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..errors import DataError
from .connect_schema import DATE, DECIMAL, META_DOC, META_NAME, META_PARAMETERS, META_VERSION, TIME, TIMESTAMP, is_time

__all__ = ["spark_to_avro", "avro_to_spark", "record_fullname", "MAP_ENTRY", "DEFAULT_NAMESPACE"]

DEFAULT_NAMESPACE = "io.confluent.connect.avro"
MAP_ENTRY = f"{DEFAULT_NAMESPACE}.MapEntry"
_SIMPLE: dict[type[DataType], str] = {
    IntegerType: "int", LongType: "long", FloatType: "float", DoubleType: "double", BooleanType: "boolean",
    StringType: "string", BinaryType: "bytes",
}


class _Names:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        #: records already written in full: a second use of the name refers to it (Avro allows no redefinition),
        #: as Confluent's AvroData writes a Debezium envelope's ``before`` and ``after`` (one ``<table>.Value``)
        self.defined: set[str] = set()

    def next(self, base: str) -> str:
        n = self.counts.get(base, 0) + 1
        self.counts[base] = n
        return base if n == 1 else f"{base}{n}"


def spark_to_avro(dt: DataType, metadata: Mapping[str, Any] | None = None, nullable: bool = False, *,
                  connect_meta: bool = True, _names: _Names | None = None) -> Any:
    """The Avro schema (JSON value) for a Spark type; ``nullable`` wraps it in ``["null", T]``."""
    names = _names or _Names()
    t = _avro(dt, dict(metadata or {}), connect_meta, names)
    return ["null", t] if nullable else t


def _avro(dt: DataType, meta: dict[str, Any], cm: bool, names: _Names) -> Any:
    def tagged(base: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        if cm and name:
            base.update({"connect.version": 1, "connect.name": name})
        return base

    if isinstance(dt, ByteType):
        return {"type": "int", "connect.type": "int8"}
    if isinstance(dt, ShortType):
        return {"type": "int", "connect.type": "int16"}
    if is_time(dt, meta):
        return tagged({"type": "int", "logicalType": "time-millis"}, TIME)
    if isinstance(dt, DecimalType):
        out = {"type": "bytes", "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
        if cm:
            params = {"scale": str(dt.scale), "connect.decimal.precision": str(dt.precision)}
            # the field's other parameters too (Debezium's propagated __debezium.source.column.*)
            params.update((str(k), str(v)) for k, v in (meta.get("connect.parameters") or {}).items()
                          if k not in params)
            out["connect.parameters"] = params
        return tagged(out, DECIMAL)
    if isinstance(dt, DateType):
        return tagged({"type": "int", "logicalType": "date"}, DATE)
    if isinstance(dt, (TimestampType, TimestampNTZType)):
        return tagged({"type": "long", "logicalType": "timestamp-millis"}, TIMESTAMP)
    if type(dt) in _SIMPLE:
        base = _SIMPLE[type(dt)]
        extra = {k: v for k, v in (("connect.name", meta.get(META_NAME)), ("connect.doc", meta.get(META_DOC)))
                 if v and cm}
        return {"type": base, **extra} if extra else base
    if isinstance(dt, ArrayType):
        return {"type": "array", "items": _opt(dt.elementType, {}, dt.containsNull, cm, names)}
    if isinstance(dt, MapType):
        values = _opt(dt.valueType, {}, dt.valueContainsNull, cm, names)
        if isinstance(dt.keyType, StringType):
            return {"type": "map", "values": values}
        entry = names.next("MapEntry")
        return {"type": "array", "items": {"type": "record", "name": entry, "namespace": DEFAULT_NAMESPACE,
                                           "fields": [{"name": "key", "type": _avro(dt.keyType, {}, cm, names)},
                                                      {"name": "value", "type": values}]}}
    if isinstance(dt, StructType):
        full = meta.get(META_NAME)
        if full and str(full) in names.defined:
            return str(full)
        if full:
            names.defined.add(str(full))
            ns, _, name = str(full).rpartition(".")
        else:
            ns, name = DEFAULT_NAMESPACE, names.next("ConnectDefault")
        rec: dict[str, Any] = {"type": "record", "name": name}
        if ns:
            rec["namespace"] = ns
        if meta.get(META_DOC):
            rec["doc"] = meta[META_DOC]
        fields = []
        for f in dt.fields:
            fa: dict[str, Any] = {"name": f.name, "type": _opt(f.dataType, f.metadata, f.nullable, cm, names)}
            if f.nullable:
                fa["default"] = None
            fields.append(fa)
        rec["fields"] = fields
        if cm and full:
            rec["connect.name"] = full
            if meta.get(META_VERSION) is not None:
                rec["connect.version"] = int(meta[META_VERSION])
            if meta.get(META_PARAMETERS):
                rec["connect.parameters"] = dict(meta[META_PARAMETERS])
        return rec
    raise DataError(f"Spark type {dt.simpleString()} has no Avro equivalent")


def _opt(dt: DataType, meta: Mapping[str, Any], nullable: bool, cm: bool, names: _Names) -> Any:
    t = _avro(dt, dict(meta), cm, names)
    return ["null", t] if nullable else t


def record_fullname(schema: Any) -> str | None:
    """The full name of a record (or other named) top-level schema; ``None`` for primitives."""
    if isinstance(schema, list):
        named = [b for b in schema if isinstance(b, dict) and "name" in b]
        return record_fullname(named[0]) if len(named) == 1 else None
    if isinstance(schema, dict) and "name" in schema:
        name, ns = schema["name"], schema.get("namespace")
        return name if "." in name or not ns else f"{ns}.{name}"
    return None


def avro_to_spark(schema: Any) -> tuple[DataType, bool, dict[str, Any]]:
    """An Avro schema (JSON value) -> ``(spark type, nullable, metadata)``; DataError when unsupported."""
    return _spark(schema, "", {}, set())


def _spark(s: Any, ns: str, named: dict[str, Any], stack: set[str]) -> tuple[DataType, bool, dict[str, Any]]:
    if isinstance(s, list):
        others = [b for b in s if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        if len(others) != 1:
            raise DataError(f"Avro union {s!r} has {len(others)} non-null branches; only [\"null\", T] maps to "
                            f"a Spark type")
        dt, _, meta = _spark(others[0], ns, named, stack)
        return dt, len(others) < len(s), meta
    if isinstance(s, str):
        if s in named:
            return _spark(named[s], ns, named, stack)
        full = s if "." in s or not ns else f"{ns}.{s}"
        if full in named:
            return _spark(named[full], ns, named, stack)
        s = {"type": s}
    if not isinstance(s, dict):
        raise DataError(f"Invalid Avro schema {s!r}")
    t = s.get("type")
    if isinstance(t, (list, dict)):
        return _spark(t, ns, named, stack)
    lt = s.get("logicalType")
    cname = s.get("connect.name")
    if t == "int":
        if lt == "date":
            return DateType(), False, {}
        if lt == "time-millis":
            return IntegerType(), False, {META_NAME: TIME, META_VERSION: 1}
        ct = s.get("connect.type")
        int_meta = {META_NAME: cname} if cname and not ct else {}  # Debezium's io.debezium.time.Date and the like
        return (ByteType() if ct == "int8" else ShortType() if ct == "int16" else IntegerType()), False, int_meta
    if t == "long":
        if lt in ("timestamp-millis", "timestamp-micros"):
            return TimestampType(), False, {}
        if lt in ("local-timestamp-millis", "local-timestamp-micros"):
            return TimestampNTZType(), False, {}
        return LongType(), False, ({META_NAME: cname} if cname else {})  # io.debezium.time.MicroTimestamp ...
    if t in ("bytes", "fixed") and lt == "decimal":
        p, sc = int(s.get("precision", 38)), int(s.get("scale", 0))
        if t == "fixed":
            _register(s, ns, named)
        return DecimalType(min(max(p, sc, 1), 38), sc), False, {}
    if t in ("float", "double", "boolean", "string", "bytes", "null"):
        simple = {"float": FloatType(), "double": DoubleType(), "boolean": BooleanType(), "string": StringType(),
                  "bytes": BinaryType(), "null": StringType()}[t]
        return simple, t == "null", ({META_NAME: cname} if cname else {})
    if t == "enum":
        _register(s, ns, named)
        return StringType(), False, {}
    if t == "fixed":
        _register(s, ns, named)
        return BinaryType(), False, {}
    if t == "array":
        items = s["items"]
        full_items = _resolve_named(items, ns, named)
        if isinstance(full_items, dict) and full_items.get("type") == "record" and \
                _full(full_items, ns).startswith(f"{DEFAULT_NAMESPACE}.MapEntry") and \
                [f["name"] for f in full_items.get("fields", [])] == ["key", "value"]:
            _register(full_items, ns, named)
            kt, _, _ = _spark(full_items["fields"][0]["type"], ns, named, stack)
            vt, vnull, _ = _spark(full_items["fields"][1]["type"], ns, named, stack)
            return MapType(kt, vt, vnull), False, {}
        it, inull, _ = _spark(items, ns, named, stack)
        return ArrayType(it, inull), False, {}
    if t == "map":
        vt, vnull, _ = _spark(s["values"], ns, named, stack)
        return MapType(StringType(), vt, vnull), False, {}
    if t in ("record", "error"):
        full = _full(s, ns)
        if full in stack:
            raise DataError(f"Avro record {full} is recursive; Spark types cannot be recursive")
        _register(s, ns, named)
        inner_ns = full.rpartition(".")[0]
        fields = []
        for f in s.get("fields", []):
            ft, fnull, fmeta = _spark(f["type"], inner_ns, named, stack | {full})
            if f.get("doc"):
                fmeta = {**fmeta, META_DOC: f["doc"]}
            fields.append(StructField(f["name"], ft, fnull, fmeta))
        meta = {}
        name = s.get("connect.name") or full
        if not full.startswith(f"{DEFAULT_NAMESPACE}.ConnectDefault"):
            meta[META_NAME] = name
        if s.get("connect.version") is not None:
            meta[META_VERSION] = int(s["connect.version"])
        if s.get("doc"):
            meta[META_DOC] = s["doc"]
        if s.get("connect.parameters"):
            meta[META_PARAMETERS] = dict(s["connect.parameters"])
        return StructType(fields), False, meta
    raise DataError(f"Unsupported Avro type {t!r}")


def _full(s: Mapping[str, Any], ns: str) -> str:
    name = s["name"]
    nsp = s.get("namespace", ns)
    return name if "." in name or not nsp else f"{nsp}.{name}"


def _register(s: Mapping[str, Any], ns: str, named: dict[str, Any]) -> None:
    full = _full(s, ns)
    named.setdefault(full, s)
    named.setdefault(s["name"], s)


def _resolve_named(s: Any, ns: str, named: dict[str, Any]) -> Any:
    if isinstance(s, str) and s not in ("int", "long", "string", "bytes", "float", "double", "boolean", "null"):
        return named.get(s) or named.get(f"{ns}.{s}") or s
    return s
