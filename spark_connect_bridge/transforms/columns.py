"""Column-expression helpers shared by the SMTs (structs rebuilt null-safely, schemaless map updates)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StructType, VariantType

from ..errors import ConfigError, ConfigProblem
from .base import _strip

__all__ = ["rebuild_struct", "map_put", "map_remove", "map_value_type_problem", "null_of", "same_type"]


def null_of(dtype: DataType) -> Column:
    return F.lit(None).cast(dtype)


def rebuild_struct(operand: Column, parts: Sequence[Column], dtype: DataType | None = None) -> Column:
    """``struct(*parts)``, but null where ``operand`` is null (a tombstone stays a tombstone)."""
    new = F.struct(*parts)
    return F.when(operand.isNull(), F.lit(None)).otherwise(new) if dtype is None else \
        F.when(operand.isNull(), null_of(dtype)).otherwise(new)


def map_remove(m: Column, keys: Sequence[str]) -> Column:
    if not keys:
        return m
    arr = F.array(*[F.lit(k) for k in keys])
    return F.map_filter(m, lambda k, v: ~F.array_contains(arr, k))


def map_put(m: Column, entries: Sequence[tuple[str, Column]]) -> Column:
    """The map with ``entries`` set (existing keys overwritten), keeping the others; null map stays null."""
    if not entries:
        return m
    keys = [k for k, _ in entries]
    added = F.map_from_arrays(F.array(*[F.lit(k) for k in keys]), F.array(*[v for _, v in entries]))
    return F.map_concat(map_remove(m, keys), added)


def same_type(a: DataType, b: DataType) -> bool:
    return _strip(a) == _strip(b)


def map_value_type_problem(key: str, value: str, map_type: MapType, new_type: DataType, what: str) -> ConfigError:
    """Schemaless Map values share one Spark type: a change that needs another type is rejected clearly."""
    return ConfigError([ConfigProblem(key, (
        f"Invalid value {value} for configuration {key}: the record is a schemaless Map "
        f"({map_type.simpleString()}) whose values all have one Spark type; {what} would need values of type "
        f"{new_type.simpleString()}. Use a schema'd (struct) value or a map of that type"))])


def is_struct(dt: DataType | None) -> bool:
    return isinstance(dt, StructType)


_WIDTH = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}


def into_map_value(v: Column, t: DataType, vt: DataType) -> Column | None:
    """``v`` (of type ``t``) as a value of a Map whose values are ``vt``: same type, integral widening, or
    text for a string-valued Map; None when it cannot be stored without changing its meaning."""
    if same_type(t, vt):
        return v
    if isinstance(vt, VariantType):  # a schemaless JSON object's entries
        return v.cast(vt)
    a, b = t.simpleString(), vt.simpleString()
    if a in _WIDTH and b in _WIDTH and _WIDTH[a] <= _WIDTH[b]:
        return v.cast(vt)
    if b == "string":
        return v.cast("string")
    return None


def q(name: str) -> str:
    """A field name for ``withField``/``dropFields``, which read dots as nesting: backtick-quote it."""
    return "`" + name.replace("`", "``") + "`"
