"""The captured tables of a CDC connector, and their union in one DataFrame.

**Many tables in one DataFrame.** ``before``/``after`` are one struct holding the union of every captured
table's columns (a column whose type differs between tables is kept apart, as ``<column>__<schema>_<table>``);
``key`` is the union of the key columns. ``topic`` says which table a row belongs to, and
:func:`table_events` narrows a DataFrame to one table's exact Debezium types (``connect.name`` =
``<prefix>.<schema>.<table>.Envelope``/``.Value``/``.Key``), for a per-table sink. ExtractNewRecordState works
on either shape.

>>> layout = build_layout("shop", [("public", "orders", [("id", TypeSpec("int32"), 1)])])
>>> layout.tables[0].topic, [c.field for c in layout.tables[0].key]
('shop.public.orders', ['id'])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.topic_schemas import TABLES_META
from ...errors import DataError
from .types import TypeSpec

__all__ = ["Column", "Layout", "Table", "build_layout", "layout_meta", "struct_names", "table_events"]


@dataclass(frozen=True)
class Column:
    name: str
    field: str  # the field of the union row struct that holds this column
    spec: TypeSpec
    key_position: int  # 1-based position in the record key, 0 when not a key column
    #: 1-based position in the table's primary key where message.key.columns made another key (-1: the same as
    #: ``key_position``)
    primary_position: int = -1


@dataclass(frozen=True)
class Table:
    schema: str
    table: str
    topic: str
    columns: tuple[Column, ...]

    @property
    def id(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def key(self) -> tuple[Column, ...]:
        return tuple(sorted((c for c in self.columns if c.key_position), key=lambda c: c.key_position))

    @property
    def chunk_key(self) -> tuple[Column, ...]:
        """The primary key, which orders and bounds a snapshot's chunks: a key of message.key.columns may be
        neither unique nor NOT NULL (a chunk bound ``(key) > (x)`` would never select a row whose key is null)."""
        def position(c: Column) -> int:
            return c.key_position if c.primary_position < 0 else c.primary_position
        return tuple(sorted((c for c in self.columns if position(c)), key=position))


@dataclass(frozen=True)
class Layout:
    """The captured tables and the union row/key structs (plain data: it travels to executors)."""

    prefix: str
    tables: tuple[Table, ...]
    row_fields: tuple[tuple[str, TypeSpec], ...]
    key_fields: tuple[tuple[str, TypeSpec], ...]

    def table(self, schema: str, name: str) -> Table | None:
        for t in self.tables:
            if t.schema == schema and t.table == name:
                return t
        return None

    def table_by_id(self, table_id: str) -> Table | None:
        """The table named ``<schema>.<table>``."""
        schema, _, name = table_id.partition(".")
        return self.table(schema, name)


KeyedColumn = tuple[str, TypeSpec, int] | tuple[str, TypeSpec, int, int]


def build_layout(prefix: str, tables: Sequence[tuple[str, str, Sequence[KeyedColumn]]]) -> Layout:
    """Union the captured tables' columns: same name and type share a field, a clash is qualified. A column is
    (name, spec, record key position) or, where message.key.columns re-keys its table, (name, spec, record key
    position, primary key position)."""
    fields: dict[str, TypeSpec] = {}
    key_fields: dict[str, TypeSpec] = {}
    out = []
    for schema, name, cols in sorted(tables, key=lambda t: (t[0], t[1])):
        columns = []
        for col, spec, keypos, *primary in cols:
            f = col
            if f in fields and fields[f].union_key() != spec.union_key():
                f = f"{col}__{schema}_{name}"
            fields.setdefault(f, spec)
            if keypos:
                key_fields.setdefault(f, spec.key_spec())
            columns.append(Column(col, f, spec, keypos, primary[0] if primary else -1))
        out.append(Table(schema, name, f"{prefix}.{schema}.{name}", tuple(columns)))
    return Layout(prefix, tuple(out), tuple(fields.items()), tuple(key_fields.items()))


def layout_meta(layout: Layout) -> dict[str, Any]:
    """What :func:`table_events` needs to narrow the union structs, per table (kept in the field metadata)."""
    return {t.id: {"topic": t.topic, "columns": [c.name for c in t.columns],
                   "fields": [c.field for c in t.columns], "key": [c.name for c in t.key]}
            for t in layout.tables}


def struct_names(layout: Layout) -> tuple[str, str, str]:
    """connect.name of the envelope, row and key structs (exact for one table)."""
    base = layout.tables[0].topic if len(layout.tables) == 1 else layout.prefix
    return f"{base}.Envelope", f"{base}.Value", f"{base}.Key"


def table_events(df: Any, table: str) -> Any:
    """One table's events with that table's exact Debezium types.

    Keeps the rows whose topic is the table's and narrows ``key`` and ``value`` (a Debezium envelope, or an
    unwrapped row after ExtractNewRecordState) from the union structs to the table's own columns, with
    ``connect.name`` ``<prefix>.<schema>.<table>.Key`` / ``.Envelope`` / ``.Value`` in the column metadata.

    >>> orders = table_events(df, "public.orders")      # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    meta = None
    for f in df.schema.fields:
        if f.name in ("value", "key") and TABLES_META in (f.metadata or {}):
            meta = json.loads(f.metadata[TABLES_META])
            break
    if meta is None:
        value_t = df.schema["value"].dataType
        if isinstance(value_t, StructType) and "after" in value_t.fieldNames():
            m = value_t["after"].metadata or {}
            meta = json.loads(m[TABLES_META]) if TABLES_META in m else None
    if meta is None:
        raise DataError("table_events needs the DataFrame of a CDC connector (its key/value columns "
                        f"carry the '{TABLES_META}' metadata)")
    if table not in meta:
        raise DataError(f"Table {table!r} is not captured by this connector; captured: {', '.join(sorted(meta))}")
    info = meta[table]
    topic = info["topic"]
    pairs = list(zip(info["columns"], info["fields"]))
    field_of = dict(pairs)

    def narrow(col: Any, struct_t: StructType, names: list[str], name: str) -> Any:
        meta_of = {f.name: f.metadata for f in struct_t.fields}
        parts = [col[field_of[c]].alias(c, metadata=meta_of.get(field_of[c]) or {}) for c in names]
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts))

    out = df.where(F.col("topic") == topic)
    value_t = df.schema["value"].dataType
    prefix = topic
    if isinstance(value_t, StructType) and "after" in value_t.fieldNames() and "op" in value_t.fieldNames():
        row_t = value_t["after"].dataType
        assert isinstance(row_t, StructType)
        cols = [info["columns"]]
        row_meta = {"connect.name": f"{prefix}.Value"}
        fields = []
        own = info.get("value_fields")
        for f in value_t.fields:
            if own is not None and f.name not in own:
                continue  # a field of another topic's kind of value (schema changes)
            if f.name in ("before", "after"):
                fields.append(narrow(F.col("value")[f.name], row_t, cols[0], f.name).alias(f.name, metadata=row_meta))
            else:
                fields.append(F.col("value")[f.name].alias(f.name, metadata=f.metadata or {}))
        value = F.when(F.col("value").isNull(), F.lit(None)).otherwise(F.struct(*fields))
        out = out.withColumn("value", value.alias("value", metadata={"connect.name": f"{prefix}.Envelope"}))
    elif isinstance(value_t, StructType):
        out = out.withColumn("value", narrow(F.col("value"), value_t, info["columns"], "value")
                             .alias("value", metadata={"connect.name": f"{prefix}.Value"}))
    key_t = df.schema["key"].dataType
    if isinstance(key_t, StructType) and info["key"]:
        out = out.withColumn("key", narrow(F.col("key"), key_t, info["key"], "key")
                             .alias("key", metadata={"connect.name": f"{prefix}.Key"}))
    return out
