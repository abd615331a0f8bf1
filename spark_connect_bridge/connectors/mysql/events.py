"""Debezium change events as Arrow record batches: ``key``, the envelope (``before``, ``after``, ``source``,
``op``, ``ts_ms``/``ts_us``/``ts_ns``), ``topic`` ``<prefix>.<database>.<table>``, ``offset``, ``timestamp``,
empty ``headers``; a tombstone (same key, null value) after each delete when ``tombstones.on.delete``.

Every column of a batch is built as one Arrow array from the table's natural-typed columns
(:func:`~.types.to_debezium`), never per record. Envelope ``ts_ms`` is the event's binlog timestamp (the
processing time would make a replayed batch differ).

**Offsets of records** (the ``offset`` column): ``file number << 44 | event position << 12 | row in the
event`` (rows past 4095 of one event share 4095), increasing along the binlog; snapshot rows carry the snapshot
position's.

>>> builder = EventBuilder(settings, layout, connector="mysql", version="0.1.0")   # doctest: +SKIP
>>> builder.batch(table, ops, before_cols, after_cols, source_cols)             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...core.records import arrow_schema, no_headers
from .config import Settings
from .layout import Layout, Table, record_type
from .types import to_debezium

__all__ = ["EventBuilder", "record_offset"]


def record_offset(file_no: int, pos: int, row: int) -> int:
    return (file_no << 44) | (pos << 12) | min(row, 4095)


class EventBuilder:
    """Record batches of one layout's tables."""

    def __init__(self, settings: Settings, layout: Layout, *, connector: str, version: str):
        import pyarrow as pa

        self.pa = pa
        self.settings, self.layout = settings, layout
        self.connector, self.version = connector, version
        self.schema = arrow_schema(record_type(layout, connector))
        self.value_t = self.schema.field("value").type
        self.row_t = self.value_t.field("before").type
        self.source_t = self.value_t.field("source").type
        self.key_t = self.schema.field("key").type

    def row_struct(self, t: Table, natural: dict[str, Any] | None, valid: Any, n: int) -> tuple[Any, dict[str, Any]]:
        """The union row struct of ``t``'s rows from natural arrays per column name (absent: null), null where not
        ``valid``; and the Debezium-typed arrays per column name (for the key)."""
        pa = self.pa
        typed: dict[str, Any] = {}
        by_field = {c.field: c for c in t.columns}
        arrays = []
        for f in self.row_t:
            col = by_field.get(f.name)
            arr = None if natural is None or col is None else natural.get(col.name)
            if arr is None or col is None:
                arrays.append(pa.nulls(n, f.type))
                continue
            arr = to_debezium(col.spec, arr)
            if arr.type != f.type:
                arr = arr.cast(f.type)
            typed[col.name] = arr
            arrays.append(arr)
        mask = pa.array(~valid) if n else None
        return pa.StructArray.from_arrays(arrays, fields=list(self.row_t), mask=mask), typed

    def key(self, t: Table, a_typed: dict, b_typed: dict, a_valid: Any, n: int) -> Any:
        import pyarrow.compute as pc

        pa = self.pa
        if not isinstance(self.key_t, pa.StructType):
            return pa.nulls(n, self.key_t)
        keycols = {c.field: c for c in t.key}
        arrays = []
        for f in self.key_t:
            col = keycols.get(f.name)
            a = a_typed.get(col.name) if col is not None else None
            b = b_typed.get(col.name) if col is not None else None
            a = a if a is not None else pa.nulls(n, f.type)
            b = b if b is not None else pa.nulls(n, f.type)
            arrays.append(pc.if_else(pa.array(a_valid), a, b))
        mask = None if t.key else pa.array([True] * n)
        return pa.StructArray.from_arrays(arrays, fields=list(self.key_t), mask=mask)

    def source(self, t: Table, n: int, fields: dict[str, Any]) -> Any:
        """The ``source`` struct: constants of the connector and table, ``fields`` (arrays or scalars by name),
        nulls else."""
        import pyarrow.compute as pc

        pa = self.pa
        ts_us = fields["ts_us"]
        values = {"version": self.version, "connector": self.connector, "name": self.layout.prefix,
                  "db": t.database, "table": t.table, "ts_ms": pc.divide(ts_us, 1000),
                  "ts_ns": pc.multiply(ts_us, 1000), **fields}
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

    def batch(self, t: Table, ops: Any, before: dict[str, Any] | None, after: dict[str, Any] | None,
              b_valid: Any, a_valid: Any, source: dict[str, Any], offsets: Any, order: Any) -> tuple[Any, Any]:
        """One record batch of ``t``'s events, tombstones after deletes included (``ops``: numpy array of
        'c'/'u'/'d'/'r'; ``source['ts_us']``: int64 array), and the records' sort keys (``order`` * 2, + 1 for
        a tombstone)."""
        import numpy as np
        import pyarrow.compute as pc

        pa = self.pa
        n = len(ops)
        b_struct, b_typed = self.row_struct(t, before, b_valid, n)
        a_struct, a_typed = self.row_struct(t, after, a_valid, n)
        key = self.key(t, a_typed, b_typed, a_valid, n)
        src = self.source(t, n, source)
        ts_us = source["ts_us"]
        value = pa.StructArray.from_arrays(
            [b_struct, a_struct, src, pa.array(ops, pa.string()), pc.divide(ts_us, 1000), ts_us,
             pc.multiply(ts_us, 1000)], fields=list(self.value_t))
        offsets = pa.array(offsets, pa.int64())
        ts = ts_us.cast(pa.timestamp("us", tz="UTC"))
        columns = [key, value, pa.repeat(pa.scalar(t.topic, pa.string()), n), pa.repeat(pa.scalar(0, pa.int32()), n),
                   offsets, ts]
        keys = np.asarray(order, dtype=np.int64) * 2
        deletes = np.flatnonzero(ops == "d") if self.settings.tombstones else np.zeros(0, dtype=np.int64)
        if deletes.size:
            # each delete followed by its tombstone: the delete's row repeated, its value null
            take = np.repeat(np.arange(n), np.where(ops == "d", 2, 1))
            tomb = np.zeros(len(take), dtype=bool)
            tomb[np.flatnonzero(np.diff(take, prepend=-1) == 0)] = True
            idx = pa.array(take)
            columns = [c.take(idx) for c in columns]
            columns[1] = pa.StructArray.from_arrays([columns[1].field(i) for i in range(len(self.value_t))],
                                                    fields=list(self.value_t), mask=pa.array(tomb))
            n = len(take)
            keys = keys[take] + tomb
        return pa.RecordBatch.from_arrays([*columns, no_headers(n)], schema=self.schema), keys

    def in_order(self, parts: list[Any], order: list[Any]) -> Iterator[Any]:
        """Record batches built per table put back in stream order (``order``: each part's sort keys), cut to
        ``max.batch.size``."""
        import numpy as np

        pa = self.pa
        if not parts:
            return
        table = pa.Table.from_batches(parts, schema=self.schema)
        if len(parts) > 1:
            table = table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        yield from table.combine_chunks().to_batches(max_chunksize=max(self.settings.batch_size, 1))
