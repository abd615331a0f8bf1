"""The AvroConverter's native engine: Spark's ``from_avro``/``to_avro`` (spark-avro) as Column expressions.

The converter (:mod:`.avro`) resolves the schemas with the registry on the driver; this module only builds
the expressions, so that the native engine decodes and encodes the same Confluent-framed records to the same
rows and bytes as the fastavro engine:

* **decode**: one ``CASE`` over the 5-byte headers of the writer schemas known at plan time, each branch
  ``from_avro(payload, writer, {avroSchema: reader})`` with the same reader schema, so every branch has one
  Spark type and Avro schema resolution (defaults, promotions, removed fields) happens in spark-avro. Then the
  Connect fix-ups (int8/int16 casts, ``MapEntry`` arrays to maps) and a cast that puts the nested field
  metadata (``connect.name`` ...) back.
* **record errors**: spark-avro's ``PERMISSIVE`` mode turns a datum it cannot read into a null, or, for a
  record, into a row of nulls that a real record can also be. So the reader record gets one more field,
  :data:`SENTINEL` (boolean, default true): absent from every writer, it is true in each decoded record and
  null only in a row that failed. A null value is a failure unless the payload is the writer union's null.
* **encode**: ``to_avro`` with the schema the fastavro engine would write with, after a check that no null
  sits where that schema has no ``null`` branch (spark-avro would fail the task, not the record).

>>> decoded = native_decode(F.col("value"), dt, reader_text, {7: writer_text})     # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, ByteType, DataType, MapType, ShortType, StringType, StructType

from ..core.topic_schemas import as_nullable
from .base import Conversion

__all__ = ["SENTINEL", "NativeDecode", "header_bytes", "native_decode", "native_encode", "nullable_type",
           "plain_logical_types"]

SENTINEL = "__kc_decoded"
MAGIC = b"\x00"
_BAD_MAGIC = "Error deserializing Avro message: Unknown magic byte!"


def header_bytes(schema_id: int) -> bytes:
    """The Confluent wire-format header of a schema id: magic byte 0 + big-endian int32."""
    return MAGIC + schema_id.to_bytes(4, "big", signed=True)


_PLAIN = ("time-millis", "time-micros", "uuid")


def plain_logical_types(obj: Any) -> Any:
    """The schema without the logical types whose Spark or Python forms are not Connect's: a Connect Time is an
    int (ms of day) and Avro's time-micros a long (not Spark's TIME or Python's datetime.time), a uuid a string
    (not Python's uuid.UUID). The binary encoding is the same."""
    if isinstance(obj, list):
        return [plain_logical_types(x) for x in obj]
    if isinstance(obj, dict):
        if obj.get("logicalType") in _PLAIN:
            return {k: v for k, v in obj.items() if k != "logicalType"}
        return {k: plain_logical_types(v) for k, v in obj.items()}
    return obj


# -- decode ---------------------------------------------------------------------------------------------------

def _record_branch(schema: Any) -> dict[str, Any] | None:
    """The record a top-level schema holds (itself, or the record branch of a ``["null", record]`` union)."""
    if isinstance(schema, dict) and schema.get("type") in ("record", "error"):
        return schema
    if isinstance(schema, list):
        records = [b for b in schema if isinstance(b, dict) and b.get("type") in ("record", "error")]
        return records[0] if len(records) == 1 else None
    return None


def _with_sentinel(reader: Any) -> tuple[Any, bool]:
    """The reader schema with :data:`SENTINEL` added to its top-level record (and whether there is one)."""
    record = _record_branch(reader)
    if record is None:
        return reader, False
    record["fields"] = list(record["fields"]) + [{"name": SENTINEL, "type": "boolean", "default": True}]
    return reader, True


def _null_datum(writer: Any) -> bytes | None:
    """The encoding of a null datum under ``writer`` (its null branch's index as a zig-zag varint), if any."""
    if isinstance(writer, list):
        for i, branch in enumerate(writer):
            if branch == "null" or (isinstance(branch, dict) and branch.get("type") == "null"):
                return bytes([2 * i]) if i < 64 else None
    return None


#: ``dt`` with every nested field, element and value nullable (metadata kept): what the decode produces
nullable_type = as_nullable


def _fix(c: Column, dt: DataType) -> Column:
    """spark-avro's Avro -> Spark mapping to ours: int8/int16 are Avro ints, MapEntry arrays become maps."""
    if isinstance(dt, (ByteType, ShortType)):
        return c.cast(dt)
    if isinstance(dt, StructType):
        return F.when(c.isNull(), F.lit(None)).otherwise(
            F.struct(*[_fix(c[f.name], f.dataType).alias(f.name) for f in dt.fields]))
    if isinstance(dt, ArrayType):
        return F.transform(c, lambda x: _fix(x, dt.elementType))
    if isinstance(dt, MapType):
        if not isinstance(dt.keyType, StringType):
            c = F.map_from_entries(F.transform(c, lambda e: F.struct(_fix(e["key"], dt.keyType).alias("key"),
                                                                     e["value"].alias("value"))))
        return F.transform_values(c, lambda _k, v: _fix(v, dt.valueType))
    return c


class NativeDecode:
    """The parts of one native decode, so that a caller can stage :attr:`raw` in a projection of its own
    (decoded once, however often the value and the error refer to it)."""

    def __init__(self, col: Column, data_type: DataType, reader_text: str, writers: Mapping[int, str]):
        from pyspark.sql.avro.functions import from_avro

        reader, self.is_record = _with_sentinel(plain_logical_types(json.loads(reader_text)))
        reader_json = json.dumps(reader)
        self.col, self.data_type = col, data_type
        self.header = F.substring(col, 1, 5)
        payload = F.substring(col, 6, 1 << 30)
        self.headers = [header_bytes(sid) for sid in writers]
        raw: Column | None = None
        nulls: Column | None = None
        for sid, text in writers.items():
            is_this = self.header == F.lit(header_bytes(sid))
            branch = from_avro(payload, json.dumps(plain_logical_types(json.loads(text))),
                               {"mode": "PERMISSIVE", "avroSchema": reader_json})
            raw = F.when(is_this, branch) if raw is None else raw.when(is_this, branch)
            null = _null_datum(json.loads(text))
            if null is not None:
                null_here = payload == F.lit(null)
                nulls = F.when(is_this, null_here) if nulls is None else nulls.when(is_this, null_here)
        self.raw: Column = raw if raw is not None else F.lit(None)
        self.null_datum: Column = nulls.otherwise(F.lit(False)) if nulls is not None else F.lit(False)

    def result(self, raw: Column) -> tuple[Column, Column, Column]:
        """(value, failed, message) from the staged :attr:`raw` (or :attr:`raw` itself)."""
        col = self.col
        bad_magic = (F.octet_length(col) < 5) | (F.substring(col, 1, 1) != F.lit(MAGIC))
        known = self.header.isin(self.headers) if self.headers else F.lit(False)
        decoded = raw[SENTINEL].isNotNull() if self.is_record else raw.isNotNull()
        failed = col.isNotNull() & (bad_magic | ~known | ~(decoded | self.null_datum))
        sid = F.conv(F.hex(F.substring(col, 2, 4)), 16, 10)
        message = (F.when(bad_magic, F.lit(_BAD_MAGIC))
                   .when(~known, F.concat(F.lit("Error retrieving Avro schema for id "), sid,
                                          F.lit(": not a version of the subject known when the query was planned")))
                   .otherwise(F.concat(F.lit("Error deserializing Avro message for id "), sid,
                                       F.lit(": spark-avro could not read the datum with the writer schema"))))
        value = _fix(raw, self.data_type).cast(nullable_type(self.data_type))
        # spark-avro reads a top-level union's null as a zero of the type, not a null
        return F.when(failed | self.null_datum, F.lit(None)).otherwise(value), failed, message


def native_decode(col: Column, data_type: DataType, reader_text: str, writers: Mapping[int, str]) -> Conversion:
    """Decode Confluent-framed Avro with ``from_avro`` (the Column form; see :class:`NativeDecode`)."""
    parts = NativeDecode(col, data_type, reader_text, writers)
    value, failed, message = parts.result(parts.raw)
    return Conversion(value, failed, message)


# -- encode ---------------------------------------------------------------------------------------------------

def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema in named:
        return named[schema]
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), (dict, list)):
            return _resolve(schema["type"], named)
        if schema.get("type") in ("record", "error", "enum", "fixed") and "name" in schema:
            named.setdefault(schema["name"], schema)
            if schema.get("namespace"):
                named.setdefault(f"{schema['namespace']}.{schema['name']}", schema)
    return schema


def _non_null(schema: Any) -> tuple[Any, bool]:
    """(the non-null branch, whether null is allowed) of a schema."""
    if isinstance(schema, list):
        others = [b for b in schema if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        return (others[0] if len(others) == 1 else None), len(others) < len(schema)
    return schema, schema == "null"


def _null_problems(c: Column, dt: DataType, schema: Any, path: str, named: dict[str, Any],
                   out: list[tuple[Column, str]]) -> None:
    """Collect (condition, path) for each place a null of ``c`` has no null branch in ``schema``."""
    branch, allows_null = _non_null(_resolve(schema, named))
    branch = _resolve(branch, named)
    if not allows_null:
        out.append((c.isNull(), path or "the value"))
    if branch is None:
        return
    kind = branch.get("type") if isinstance(branch, dict) else branch
    if isinstance(dt, StructType) and kind in ("record", "error"):
        by_name = {f["name"]: f["type"] for f in branch.get("fields", [])}
        for f in dt.fields:
            if f.name in by_name:
                inner: list[tuple[Column, str]] = []
                _null_problems(c[f.name], f.dataType, by_name[f.name], f"{path}.{f.name}".lstrip("."), named, inner)
                out.extend((c.isNotNull() & cond, p) for cond, p in inner)
    elif isinstance(dt, ArrayType) and kind == "array":
        _items, items_null = _non_null(_resolve(branch["items"], named))
        if dt.containsNull and not items_null:
            out.append((F.coalesce(F.exists(c, lambda x: x.isNull()), F.lit(False)), f"{path}[]"))
    elif isinstance(dt, MapType) and kind == "map":
        _, values_null = _non_null(_resolve(branch["values"], named))
        if dt.valueContainsNull and not values_null:
            out.append((F.coalesce(F.exists(F.map_values(c), lambda x: x.isNull()), F.lit(False)), f"{path}{{}}"))


def _unfix(c: Column, dt: DataType) -> Column:
    """Our Spark types to what ``to_avro`` accepts for the generated schema (maps with non-string keys as
    arrays of key/value structs)."""
    if isinstance(dt, MapType) and not isinstance(dt.keyType, StringType):
        return F.transform(F.map_entries(c), lambda e: F.struct(e["key"].alias("key"),
                                                                _unfix(e["value"], dt.valueType).alias("value")))
    if isinstance(dt, StructType):
        return F.when(c.isNull(), F.lit(None)).otherwise(
            F.struct(*[_unfix(c[f.name], f.dataType).alias(f.name) for f in dt.fields]))
    if isinstance(dt, ArrayType):
        return F.transform(c, lambda x: _unfix(x, dt.elementType))
    return c


def native_encode(col: Column, data_type: DataType, schema_text: str, header: Column,
                  header_error: Column | None = None) -> Conversion:
    """Encode ``col`` with ``to_avro(col, schema_text)`` behind ``header`` (a binary Column: the 5-byte
    Confluent header of the schema id). A null where the schema allows none fails its record, as in fastavro;
    ``header_error`` (a string Column, null when the header was resolved) fails it too."""
    from pyspark.sql.avro.functions import to_avro

    schema = json.loads(schema_text)
    problems: list[tuple[Column, str]] = []
    if not isinstance(schema, list):  # a top-level null is a tombstone, never written
        schema = ["null", schema]
    _null_problems(col, data_type, schema, "", {}, problems)
    cases = [(cond, F.lit(f"Failed to serialize Avro data: null value for the non-optional field {path}"))
             for cond, path in problems]
    if header_error is not None:
        cases.append((header_error.isNotNull(), header_error))
    msg = F.lit(None).cast("string")
    for cond, text in reversed(cases):  # the first problem wins
        msg = F.when(cond, text).otherwise(msg)
    failed = col.isNotNull() & msg.isNotNull()
    body = to_avro(_unfix(col, data_type), json.dumps(plain_logical_types(json.loads(schema_text))))
    value = F.when(col.isNull() | failed, F.lit(None).cast("binary")).otherwise(F.concat(header, body))
    return Conversion(value, failed, msg)
