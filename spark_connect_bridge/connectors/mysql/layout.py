"""The captured tables and the record schema of the connector: one DataFrame over many tables.

``before``/``after`` are one struct holding the union of every captured table's columns (a column whose type
differs between tables is kept apart as ``<column>__<database>_<table>``); ``key`` the union of the primary-key
columns. The column metadata ``kconnect.cdc.tables`` lists each table's topic and own columns, the same metadata
the PostgreSQL connector writes, so :func:`~spark_connect_bridge.connectors.postgres_cdc.table_events`, the
converters and the sinks narrow the stream to one table's columns alike. The ``source`` struct is MySQL's
(``io.debezium.connector.mysql.Source``).

>>> layout = build_layout("shop", [("shop", "orders", [("id", spec, 1), ("note", spec2, 0)])])   # doctest: +SKIP
>>> record_type(layout)                                                                          # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.records import HEADERS_TYPE
from ...core.topic_schemas import TABLES_META
from .types import TypeSpec

__all__ = ["Column", "Table", "Layout", "build_layout", "record_type", "source_type", "ENVELOPE_FIELDS"]

ENVELOPE_FIELDS = ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns")


@dataclass(frozen=True)
class Column:
    name: str
    field: str  # the field of the union row struct that holds this column
    spec: TypeSpec
    key_position: int  # 1-based position in the primary key, 0 when not a key column


@dataclass(frozen=True)
class Table:
    database: str
    table: str
    topic: str
    columns: tuple[Column, ...]

    @property
    def id(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def key(self) -> tuple[Column, ...]:
        return tuple(sorted((c for c in self.columns if c.key_position), key=lambda c: c.key_position))


@dataclass(frozen=True)
class Layout:
    """The captured tables and the union row/key structs (plain data: it travels to executors)."""

    prefix: str
    tables: tuple[Table, ...]
    row_fields: tuple[tuple[str, TypeSpec], ...]
    key_fields: tuple[tuple[str, TypeSpec], ...]

    def table(self, database: str, name: str) -> Table | None:
        for t in self.tables:
            if t.database == database and t.table == name:
                return t
        return None


def build_layout(prefix: str, tables: Sequence[tuple[str, str, list[tuple[str, TypeSpec, int]]]]) -> Layout:
    """Union the captured tables' columns: same name and type share a field, a clash is qualified."""
    fields: dict[str, TypeSpec] = {}
    key_fields: dict[str, TypeSpec] = {}
    out = []
    for database, name, cols in sorted(tables, key=lambda t: (t[0], t[1])):
        columns = []
        for col, spec, keypos in cols:
            field = col
            if field in fields and fields[field].union_key() != spec.union_key():
                field = f"{col}__{database}_{name}"
            fields.setdefault(field, spec)
            if keypos:
                key_fields.setdefault(field, spec)
            columns.append(Column(col, field, spec, keypos))
        out.append(Table(database, name, f"{prefix}.{database}.{name}", tuple(columns)))
    return Layout(prefix, tuple(out), tuple(fields.items()), tuple(key_fields.items()))


def _struct_of(fields: Sequence[tuple[str, TypeSpec]]) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f, s.spark_type(), True, s.metadata()) for f, s in fields])


def source_type() -> Any:
    """MySQL's ``source`` block (Debezium's ``io.debezium.connector.mysql.Source``)."""
    from pyspark.sql import types as T

    snap_meta = {"connect.name": "io.debezium.data.Enum", "connect.version": 1,
                 "connect.parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,"
                                                   "last,false,incremental"}}
    return T.StructType([
        T.StructField("version", T.StringType()), T.StructField("connector", T.StringType()),
        T.StructField("name", T.StringType()), T.StructField("ts_ms", T.LongType()),
        T.StructField("snapshot", T.StringType(), True, snap_meta), T.StructField("db", T.StringType()),
        T.StructField("sequence", T.StringType()), T.StructField("ts_us", T.LongType()),
        T.StructField("ts_ns", T.LongType()), T.StructField("table", T.StringType()),
        T.StructField("server_id", T.LongType()), T.StructField("gtid", T.StringType()),
        T.StructField("file", T.StringType()), T.StructField("pos", T.LongType()),
        T.StructField("row", T.IntegerType()), T.StructField("thread", T.LongType()),
        T.StructField("query", T.StringType()),
    ])


def layout_meta(layout: Layout) -> dict[str, Any]:
    return {t.id: {"topic": t.topic, "columns": [c.name for c in t.columns],
                   "fields": [c.field for c in t.columns], "key": [c.name for c in t.key]}
            for t in layout.tables}


def record_type(layout: Layout, connector: str) -> Any:
    """The Spark record schema of ``layout``: Debezium envelope values over the union row structs."""
    from pyspark.sql import types as T

    base = layout.tables[0].topic if len(layout.tables) == 1 else layout.prefix
    row = _struct_of(layout.row_fields)
    tables = json.dumps(layout_meta(layout))
    row_meta = {"connect.name": f"{base}.Value", TABLES_META: tables}
    value = T.StructType([
        T.StructField("before", row, True, row_meta), T.StructField("after", row, True, row_meta),
        T.StructField("source", source_type(), True, {"connect.name": f"io.debezium.connector.{connector}.Source"}),
        T.StructField("op", T.StringType()), T.StructField("ts_ms", T.LongType()),
        T.StructField("ts_us", T.LongType()), T.StructField("ts_ns", T.LongType()),
    ])
    key = _struct_of(layout.key_fields) if layout.key_fields else T.BinaryType()
    return T.StructType([
        T.StructField("key", key, True, {"connect.name": f"{base}.Key", TABLES_META: tables}),
        T.StructField("value", value, True, {"connect.name": f"{base}.Envelope", TABLES_META: tables}),
        T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
        T.StructField("headers", HEADERS_TYPE),
    ])
