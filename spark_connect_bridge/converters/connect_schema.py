"""Kafka Connect schemas (the JsonConverter's schema JSON grammar) <-> Spark types.

Spark types carry Connect types (int8 = ``ByteType`` ... bytes = ``BinaryType``); the logical types Decimal,
Date and Timestamp are Spark's ``DecimalType``, ``DateType`` and ``TimestampType``; a Connect ``Time`` is an
``IntegerType`` (milliseconds of the day) whose field metadata has ``connect.name =
org.apache.kafka.connect.data.Time``. A schema's name, version, doc and parameters live in the Spark field
metadata under ``connect.name``, ``connect.version``, ``connect.doc`` and ``connect.parameters``.

A schema's ``optional`` flag is the Spark field's nullability unless the field (or column) metadata says otherwise
under ``connect.optional``: Spark makes a parsed field nullable whatever its schema (``from_json``), and an
expression's nullability is Spark's, not the SMT's schema rule. A required schema read from a message carries
``connect.optional = false``; an SMT that builds a schema sets the flag of each field it makes (Kafka's rules:
InsertField's fields optional unless ``!``, HoistField's struct required, ...). An array's items and a map's keys
and values have no Spark metadata of their own: their schemas' metadata (optional flag, name, nested items, ...)
is the field's, under ``connect.items``, ``connect.keys`` and ``connect.values`` (a map key is required unless
its ``connect.keys`` says ``connect.optional = true``; an item or value is optional unless its metadata says not).

A Connect Decimal has no precision limit; Spark's is 38: the precision comes from the
``connect.decimal.precision`` parameter when there is one, else 38.

>>> connect_to_spark({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"})[0]
TimestampType()
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

__all__ = ["DECIMAL", "DATE", "TIME", "TIMESTAMP", "connect_to_spark", "spark_to_connect", "is_time",
           "META_NAME", "META_VERSION", "META_DOC", "META_PARAMETERS", "META_OPTIONAL", "decimal_precision",
           "is_optional", "with_optional", "META_ITEMS", "META_KEYS", "META_VALUES"]

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
META_NAME, META_VERSION, META_DOC, META_PARAMETERS = ("connect.name", "connect.version", "connect.doc",
                                                      "connect.parameters")
META_OPTIONAL = "connect.optional"
META_ITEMS, META_KEYS, META_VALUES = "connect.items", "connect.keys", "connect.values"
PRECISION_PARAM = "connect.decimal.precision"

_PRIMITIVES: dict[str, DataType] = {
    "int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
    "float": FloatType(), "float32": FloatType(), "double": DoubleType(), "float64": DoubleType(),
    "boolean": BooleanType(), "string": StringType(), "bytes": BinaryType(),
}
_TO_CONNECT: dict[type[DataType], str] = {
    ByteType: "int8", ShortType: "int16", IntegerType: "int32", LongType: "int64", FloatType: "float",
    DoubleType: "double", BooleanType: "boolean", StringType: "string", BinaryType: "bytes",
}


def decimal_precision(params: Mapping[str, Any] | None) -> int:
    try:
        p = int((params or {}).get(PRECISION_PARAM, 38))
    except (TypeError, ValueError):
        p = 38
    return min(max(p, 1), 38)


def is_optional(nullable: bool, metadata: Mapping[str, Any] | None) -> bool:
    """The Connect ``optional`` flag of a field: its ``connect.optional`` metadata, else Spark's nullability."""
    flag = (metadata or {}).get(META_OPTIONAL)
    return nullable if flag is None else bool(flag)


def with_optional(metadata: Mapping[str, Any] | None, optional: bool) -> dict[str, Any]:
    """``metadata`` with the Connect ``optional`` flag set."""
    return {**(metadata or {}), META_OPTIONAL: optional}


def is_time(data_type: DataType, metadata: Mapping[str, Any] | None) -> bool:
    return isinstance(data_type, IntegerType) and (metadata or {}).get(META_NAME) == TIME


def connect_to_spark(schema: Mapping[str, Any] | None) -> tuple[DataType, bool, dict[str, Any]]:
    """A Connect schema (JSON form) -> ``(spark type, nullable, field metadata)``.

    ``None`` (a schemaless value) becomes ``string`` holding the JSON text. Raise :class:`DataError` for an
    unknown type.
    """
    if schema is None:
        return StringType(), True, {}
    if not isinstance(schema, Mapping):
        raise DataError(f"Connect schema must be a JSON object, got {type(schema).__name__}")
    t = schema.get("type")
    name = schema.get("name")
    params = schema.get("parameters") or {}
    optional = bool(schema.get("optional", False))
    meta: dict[str, Any] = {} if optional else {META_OPTIONAL: False}
    if name == DECIMAL:
        try:
            scale = int(params.get("scale", 0))
        except (TypeError, ValueError):
            raise DataError(f"Invalid Decimal scale parameter {params.get('scale')!r}") from None
        p = decimal_precision(params)
        extra = {str(k): str(v) for k, v in params.items() if k not in ("scale", PRECISION_PARAM)}
        return DecimalType(max(p, scale), scale), optional, {**meta, **({META_PARAMETERS: extra} if extra else {})}
    if name == DATE:
        return DateType(), optional, meta
    if name == TIMESTAMP:
        return TimestampType(), optional, meta
    if t in _PRIMITIVES:
        dt: DataType = _PRIMITIVES[t]
    elif t == "array":
        item, item_null, item_meta = connect_to_spark(_required(schema, "items"))
        dt = ArrayType(item, item_null)
        _keep(meta, META_ITEMS, item_meta)
    elif t == "map":
        k, k_null, k_meta = connect_to_spark(_required(schema, "keys"))
        v, v_null, v_meta = connect_to_spark(_required(schema, "values"))
        dt = MapType(k, v, v_null)
        # a Spark map key is never null, its schema required: an optional key schema is said in the metadata
        _keep(meta, META_KEYS, with_optional(k_meta, True) if k_null else
              {m: v for m, v in k_meta.items() if m != META_OPTIONAL})
        _keep(meta, META_VALUES, v_meta)
    elif t == "struct":
        fields = []
        for f in schema.get("fields") or []:
            if "field" not in f:
                raise DataError("Connect struct field schema without a \"field\" name")
            ft, fnull, fmeta = connect_to_spark(f)
            fields.append(StructField(f["field"], ft, fnull, fmeta))
        dt = StructType(fields)
    else:
        raise DataError(f"Unknown schema type: {t}")
    if name:
        meta[META_NAME] = name
    if schema.get("version") is not None:
        meta[META_VERSION] = int(schema["version"])
    if schema.get("doc") is not None:
        meta[META_DOC] = str(schema["doc"])
    if params:
        meta[META_PARAMETERS] = {str(k): str(v) for k, v in params.items()}
    return dt, optional, meta


def _keep(meta: dict[str, Any], key: str, nested: Mapping[str, Any]) -> None:
    """An array's items or a map's keys or values: their schema's metadata (optional flag, name, ...) kept in the
    field's metadata under ``key`` (a Spark element type has no metadata of its own)."""
    if nested:
        meta[key] = dict(nested)


def _required(schema: Mapping[str, Any], key: str) -> Any:
    if key not in schema:
        raise DataError(f"Connect {schema.get('type')} schema has no \"{key}\"")
    return schema[key]


def spark_to_connect(data_type: DataType, nullable: bool = True,
                     metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A Spark type (with its field metadata) -> the Connect schema JSON that JsonConverter writes."""
    meta = dict(metadata or {})
    nullable = is_optional(nullable, meta)
    out: dict[str, Any]
    if isinstance(data_type, DecimalType):
        # the type's scale and precision, then the field's other parameters (Debezium's propagated
        # __debezium.source.column.*), as Debezium's Decimal schemas carry both
        params = {"scale": str(data_type.scale), PRECISION_PARAM: str(data_type.precision)}
        params.update((str(k), str(v)) for k, v in (meta.get(META_PARAMETERS) or {}).items() if k not in params)
        out = {"type": "bytes", "optional": nullable, "name": DECIMAL, "version": 1, "parameters": params}
        return out
    if isinstance(data_type, DateType):
        return {"type": "int32", "optional": nullable, "name": DATE, "version": 1}
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return {"type": "int64", "optional": nullable, "name": TIMESTAMP, "version": 1}
    if is_time(data_type, meta):
        return {"type": "int32", "optional": nullable, "name": TIME, "version": 1}
    if type(data_type) in _TO_CONNECT:
        out = {"type": _TO_CONNECT[type(data_type)], "optional": nullable}
    elif isinstance(data_type, ArrayType):
        out = {"type": "array", "items": spark_to_connect(data_type.elementType, data_type.containsNull,
                                                          meta.get(META_ITEMS)),
               "optional": nullable}
    elif isinstance(data_type, MapType):
        out = {"type": "map", "keys": spark_to_connect(data_type.keyType, False, meta.get(META_KEYS)),
               "values": spark_to_connect(data_type.valueType, data_type.valueContainsNull, meta.get(META_VALUES)),
               "optional": nullable}
    elif isinstance(data_type, StructType):
        out = {"type": "struct", "fields": [
            {**spark_to_connect(f.dataType, f.nullable, f.metadata), "field": f.name} for f in data_type.fields],
            "optional": nullable}
    else:
        raise DataError(f"Spark type {data_type.simpleString()} has no Kafka Connect equivalent")
    if meta.get(META_NAME):
        out["name"] = meta[META_NAME]
    if meta.get(META_VERSION) is not None:
        out["version"] = int(meta[META_VERSION])
    if meta.get(META_DOC) is not None:
        out["doc"] = meta[META_DOC]
    if meta.get(META_PARAMETERS):
        out["parameters"] = dict(meta[META_PARAMETERS])
    return out
