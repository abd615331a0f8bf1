"""Debezium's change event envelope: the record schema of a layout, and its Arrow columns built in bulk.

A record's ``key`` is the table's primary-key struct (the union of every captured table's key columns);
``value`` the envelope ``before``/``after``/``source``/``transaction``/``op``/``ts_ms``/``ts_us``/``ts_ns``
(Debezium 3's schema version 2; null for a tombstone; ``transaction`` always null); ``topic``
``<topic.prefix>.<schema>.<table>``; ``offset`` the event's position in the database's log. Envelope ``ts_ms``
is the commit time, not the processing time (that would make replays differ).
``source`` is each connector's own struct (``io.debezium.connector.<db>.Source``); the fields every connector
has are filled here, the others are given by the connector or null.

Nothing here works per record: every column of a batch is one Arrow array.

>>> builder = EnvelopeBuilder(layout, source_type=pg_source_type(), source_name="io.debezium.connector."
...                           "postgresql.Source", connector="postgresql", db="shop", version="0.1.0",
...                           batch_size=2048, convert=to_arrow)                  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.records import HEADERS_TYPE, arrow_schema, no_headers
from ...core.topic_schemas import TABLES_META
from .layout import Layout, Table, layout_meta, struct_names
from .types import TypeSpec

__all__ = ["ENVELOPE_FIELDS", "EnvelopeBuilder", "SideTopic", "record_type", "skip_rows", "source_fields"]

ENVELOPE_FIELDS = ("before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns")
#: Debezium 3's envelope schema version, and its ``transaction`` block (``event.block``, null unless
#: ``provide.transaction.metadata``, which is not supported here)
ENVELOPE_VERSION = 2
TRANSACTION_NAME = "event.block"


def _struct_of(fields: Sequence[tuple[str, TypeSpec]]) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f, s.spark_type(), True, s.metadata()) for f, s in fields])


def source_fields() -> list[Any]:
    """The fields every Debezium connector's ``source`` block starts with (``AbstractSourceInfo``); each
    connector appends its own (PostgreSQL's ``schema``, ``txId``, ``lsn``; MySQL's ``server_id``, ``file``...)."""
    from pyspark.sql import types as T

    snap_meta = {"connect.name": "io.debezium.data.Enum", "connect.version": 1,
                 "connect.parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,"
                                                   "last,false,incremental"}}
    return [T.StructField("version", T.StringType()), T.StructField("connector", T.StringType()),
            T.StructField("name", T.StringType()), T.StructField("ts_ms", T.LongType()),
            T.StructField("snapshot", T.StringType(), True, snap_meta), T.StructField("db", T.StringType()),
            T.StructField("sequence", T.StringType()), T.StructField("ts_us", T.LongType()),
            T.StructField("ts_ns", T.LongType())]


@dataclass(frozen=True)
class SideTopic:
    """Records of another kind sharing a connector's DataFrame with its change events (Debezium's schema change
    topic): the topic, its key and value structs' fields (Spark ``StructField`` lists; the value fields that an
    envelope also has, such as ``source`` and ``ts_ms``, are the envelope's) and their connect.names."""

    topic: str
    key_fields: tuple[Any, ...]
    value_fields: tuple[Any, ...]
    key_name: str
    value_name: str


def record_type(layout: Layout, source_type: Any, source_name: str, side: SideTopic | None = None) -> Any:
    """The Spark record schema for ``layout``: Debezium envelope values, union row structs, ``source_type``
    (named ``source_name``) as the envelope's ``source``; with ``side``, ``key`` and ``value`` are the unions of
    the envelope's and the side topic's structs, and the metadata says which fields each topic has."""
    from pyspark.sql import types as T

    env_name, row_name, key_name = struct_names(layout)
    row = _struct_of(layout.row_fields)
    meta = layout_meta(layout)
    if side is not None:
        for entry in meta.values():
            entry["value_fields"] = list(ENVELOPE_FIELDS)
        names = [f.name for f in side.value_fields]
        meta[side.topic] = {"topic": side.topic, "columns": names, "fields": names, "envelope": False,
                            "key": [f.name for f in side.key_fields], "value_fields": names,
                            "names": {"value": side.value_name, "key": side.key_name}}
    tables = json.dumps(meta)
    row_meta = {"connect.name": row_name, TABLES_META: tables}
    transaction = T.StructType([T.StructField("id", T.StringType(), False),
                                T.StructField("total_order", T.LongType(), False),
                                T.StructField("data_collection_order", T.LongType(), False)])
    fields = [
        T.StructField("before", row, True, row_meta), T.StructField("after", row, True, row_meta),
        T.StructField("source", source_type, True, {"connect.name": source_name, "connect.version": 1}),
        T.StructField("transaction", transaction, True, {"connect.name": TRANSACTION_NAME, "connect.version": 1}),
        T.StructField("op", T.StringType()), T.StructField("ts_ms", T.LongType()), T.StructField("ts_us", T.LongType()),
        T.StructField("ts_ns", T.LongType()),
    ]
    key_fields = list(_struct_of(layout.key_fields).fields) if layout.key_fields else []
    if side is not None:
        fields += [f for f in side.value_fields if f.name not in ENVELOPE_FIELDS]
        key_fields += [f for f in side.key_fields if f.name not in {k.name for k in key_fields}]
    value = T.StructType(fields)
    key = T.StructType(key_fields) if key_fields else T.BinaryType()
    return T.StructType([
        T.StructField("key", key, True, {"connect.name": key_name, TABLES_META: tables}),
        T.StructField("value", value, True, {"connect.name": env_name, "connect.version": ENVELOPE_VERSION,
                                             TABLES_META: tables}),
        T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
        T.StructField("headers", HEADERS_TYPE),
    ])


def skip_rows(batch: Any, emitted: int, skip: int) -> tuple[int, Any]:
    """``batch`` without the rows among the first ``skip`` of a re-read (``emitted`` rows came before it),
    or None when all of it was delivered already; and the rows emitted with it."""
    n = batch.num_rows
    if emitted + n <= skip:
        return emitted + n, None
    if emitted < skip:
        batch = batch.slice(skip - emitted)
    return emitted + n, batch


class EnvelopeBuilder:
    """Arrow columns of change events of one layout's tables, in the layout's record schema.

    ``convert(spec, text)`` turns a string array of the database's value text into the column's Arrow array.
    """

    def __init__(self, layout: Layout, *, source_type: Any, source_name: str, connector: str, db: str,
                 version: str, batch_size: int, convert: Callable[[TypeSpec, Any], Any],
                 side: SideTopic | None = None):
        import pyarrow as pa

        self.pa = pa
        self.layout = layout
        self.schema = arrow_schema(record_type(layout, source_type, source_name, side))
        self.value_t = self.schema.field("value").type
        self.row_t = self.value_t.field("before").type
        self.source_t = self.value_t.field("source").type
        self.key_t = self.schema.field("key").type
        self.connector, self.db, self.version = connector, db, version
        self.batch_size = max(batch_size, 1)
        self.convert = convert

    def row_struct(self, t: Table, texts: dict[str, Any], valid: Any, n: int,
                   convert: Callable[[TypeSpec, Any], Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """The union row struct of ``t``'s rows from text arrays per column name (missing: null), null where
        not ``valid``; and the typed arrays per column name (for the key). ``convert`` replaces the builder's
        conversion for these rows."""
        pa = self.pa
        convert = convert or self.convert
        typed = {}
        by_field = {c.field: c for c in t.columns}
        arrays = []
        for f in self.row_t:
            col = by_field.get(f.name)
            if col is None or texts.get(col.name) is None:
                arrays.append(pa.nulls(n, f.type))
                continue
            arr = convert(col.spec, texts[col.name])
            if arr.type != f.type:
                arr = arr.cast(f.type)
            typed[col.name] = arr  # the key's values: before Debezium's column mappers
            arrays.append(col.spec.map_values(arr))
        mask = pa.array(~valid) if n else None
        return pa.StructArray.from_arrays(arrays, fields=list(self.row_t), mask=mask), typed

    def source(self, n: int, t: Table, ts_us: Any, snapshot: Any, **fields: Any) -> Any:
        """The ``source`` struct: the fields every connector has, ``fields`` (by name: arrays, cast to the
        field's type where they differ, or one value for every row), nulls else."""
        import pyarrow.compute as pc

        pa = self.pa
        values = {"version": self.version, "connector": self.connector, "name": self.layout.prefix,
                  "ts_ms": pc.divide(ts_us, 1000), "snapshot": snapshot, "db": self.db, "ts_us": ts_us,
                  "ts_ns": pc.multiply(ts_us, 1000), "schema": t.schema, "table": t.table, **fields}
        arrays = []
        for f in self.source_t:
            v = values.get(f.name)
            if v is None:
                arrays.append(pa.nulls(n, f.type))
            elif isinstance(v, (pa.Array, pa.ChunkedArray)):
                arrays.append(v.cast(f.type) if v.type != f.type else v)
            else:
                arrays.append(pa.repeat(pa.scalar(v, f.type), n))
        return pa.StructArray.from_arrays(arrays, fields=list(self.source_t))

    def key(self, t: Table, a_typed: dict, b_typed: dict, a_valid: Any, present: Any, n: int) -> Any:
        """The key struct: from the row after where there is one, else from the row before; null where not
        ``present`` (a truncate) and for a table without a key."""
        import pyarrow.compute as pc

        pa = self.pa
        if not isinstance(self.key_t, pa.StructType):
            return pa.nulls(n, self.key_t)
        keycols = {c.field: c for c in t.key}
        arrays = []
        for f in self.key_t:
            col = keycols.get(f.name)
            if col is None:
                arrays.append(pa.nulls(n, f.type))
                continue
            a = a_typed.get(col.name)
            b = b_typed.get(col.name)
            a = a if a is not None else pa.nulls(n, f.type)
            b = b if b is not None else pa.nulls(n, f.type)
            arrays.append(pc.if_else(pa.array(a_valid), a, b))
        mask = pa.array(~(present & bool(t.key)))
        return pa.StructArray.from_arrays(arrays, fields=list(self.key_t), mask=mask)

    def record(self, t: Table, n: int, key: Any, before: Any, after: Any, source: Any, op: Any, ts_us: Any,
               tomb: Any, offset: Any, headers: Any = None) -> Any:
        """A record batch of ``t``'s events (``tomb``: a tombstone, null value, in that row; ``headers``: the
        rows' header lists, none by default)."""
        import pyarrow.compute as pc

        pa = self.pa
        parts = {"before": before, "after": after, "source": source, "op": op, "ts_ms": pc.divide(ts_us, 1000),
                 "ts_us": ts_us, "ts_ns": pc.multiply(ts_us, 1000)}
        value = pa.StructArray.from_arrays([parts[f.name] if f.name in parts else pa.nulls(n, f.type)
                                            for f in self.value_t], fields=list(self.value_t), mask=pa.array(tomb))
        ts = ts_us.cast(pa.timestamp("us", tz="UTC"))
        return pa.RecordBatch.from_arrays(
            [key, value, pa.repeat(pa.scalar(t.topic, pa.string()), n), pa.repeat(pa.scalar(0, pa.int32()), n),
             offset, ts, no_headers(n) if headers is None else headers], schema=self.schema)

    def read_events(self, t: Table, texts: dict[str, Any], n: int, *, ts_us: int, offset: int, snapshot: Any,
                    **source: Any) -> Any:
        """``n`` read events (op ``r``, no row before) of ``t``'s rows given as text arrays per column, at
        one time and log position (snapshot rows, incremental snapshot chunks)."""
        import numpy as np

        pa = self.pa
        valid = np.ones(n, dtype=bool)
        after, a_typed = self.row_struct(t, texts, valid, n)
        ts = pa.array([ts_us] * n, pa.int64())
        pos = pa.array([offset] * n, pa.int64())
        src = self.source(n, t, ts, snapshot, **source)
        key = self.key(t, a_typed, {}, valid, np.ones(n, dtype=bool), n)
        return self.record(t, n, key, pa.nulls(n, self.row_t), after, src, pa.array(["r"] * n, pa.string()), ts,
                           np.zeros(n, dtype=bool), pos)

    def in_order(self, parts: list[Any], order: list[Any]) -> Iterator[Any]:
        """Record batches built per table put back in event order (``order``: each part's sort keys), cut
        to the batch size."""
        import numpy as np

        pa = self.pa
        if not parts:
            return
        table = pa.Table.from_batches(parts, schema=self.schema)
        if len(parts) > 1:
            table = table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        yield from table.combine_chunks().to_batches(max_chunksize=self.batch_size)
