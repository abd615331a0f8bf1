"""Debezium change events as Arrow record batches: ``key``, the envelope (``before``, ``after``, ``source``,
``op``, ``ts_ms``/``ts_us``/``ts_ns``), ``topic`` ``<prefix>.<database>.<table>``, ``offset``, ``timestamp``,
empty ``headers``; a tombstone (same key, null value) after each delete when ``tombstones.on.delete``.

Every column of a batch is built as one Arrow array from the table's natural-typed columns
(:func:`~.types.to_debezium`), never per record, by the shared :class:`~..cdc.envelope.EnvelopeBuilder`.
Envelope ``ts_ms`` is the event's binlog timestamp (the processing time would make a replayed batch differ).

**Offsets of records** (the ``offset`` column): ``file number << 44 | event position << 12 | row in the
event`` (rows past 4095 of one event share 4095), increasing along the binlog; snapshot rows carry the snapshot
position's.

>>> builder = EventBuilder(settings, layout, connector="mysql", version="0.1.0")   # doctest: +SKIP
>>> builder.batch(table, ops, before_cols, after_cols, source_cols)             # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cdc.envelope import EnvelopeBuilder
from ..cdc.layout import Layout, Table
from .config import Settings
from .layout import schema_change_topic, source_name, source_type
from .types import to_debezium

__all__ = ["EventBuilder", "record_offset"]


def record_offset(file_no: int, pos: int, row: int) -> int:
    return (file_no << 44) | (pos << 12) | min(row, 4095)


def _from_binlog(spec: Any, arr: Any) -> Any:
    return to_debezium(spec, arr, binlog=True)


class EventBuilder(EnvelopeBuilder):
    """Record batches of one layout's tables."""

    def __init__(self, settings: Settings, layout: Layout, *, connector: str, version: str):
        side = schema_change_topic(layout.prefix, connector) if settings.include_schema_changes else None
        super().__init__(layout, source_type=source_type(), source_name=source_name(connector), connector=connector,
                         db="", version=version, batch_size=settings.batch_size, convert=to_debezium, side=side)
        self.tombstones = settings.tombstones

    def batch(self, t: Table, ops: Any, before: dict[str, Any] | None, after: dict[str, Any] | None,
              b_valid: Any, a_valid: Any, source: dict[str, Any], offsets: Any, order: Any, *,
              binlog: bool = False) -> tuple[Any, Any]:
        """One record batch of ``t``'s events, tombstones after deletes included (``ops``: numpy array of
        'c'/'u'/'d'/'r'; ``before``/``after``: natural arrays per column; ``source``: arrays or one value per
        field, ``ts_us`` an int64 array), and the records' sort keys (``order`` * 2, + 1 for a tombstone).
        ``binlog``: values decoded from the binlog (Debezium formats a few of them differently there)."""
        pa = self.pa
        n = len(ops)
        keys = np.asarray(order, dtype=np.int64) * 2
        offsets = np.asarray(offsets, dtype=np.int64)
        tomb = np.zeros(n, dtype=bool)
        if self.tombstones and (ops == "d").any():
            # each delete followed by its tombstone: the delete's row repeated, its value null
            take = np.repeat(np.arange(n), np.where(ops == "d", 2, 1))
            tomb = np.zeros(len(take), dtype=bool)
            tomb[1:] = take[1:] == take[:-1]
            idx = pa.array(take)
            before = {k: v.take(idx) for k, v in (before or {}).items()}
            after = {k: v.take(idx) for k, v in (after or {}).items()}
            source = {k: v.take(idx) if isinstance(v, (pa.Array, pa.ChunkedArray)) else v for k, v in source.items()}
            ops, b_valid, a_valid, offsets = ops[take], b_valid[take], a_valid[take], offsets[take]
            keys = keys[take] + tomb
            n = len(take)
        convert = _from_binlog if binlog else None
        b_struct, b_typed = self.row_struct(t, before or {}, b_valid, n, convert)
        a_struct, a_typed = self.row_struct(t, after or {}, a_valid, n, convert)
        key = self.key(t, a_typed, b_typed, a_valid, np.ones(n, dtype=bool), n)
        fields = dict(source)
        ts_us, snapshot = fields.pop("ts_us"), fields.pop("snapshot")
        src = self.source(n, t, ts_us, snapshot, db=t.schema, **fields)
        record = self.record(t, n, key, b_struct, a_struct, src, pa.array(ops, pa.string()), ts_us, tomb,
                             pa.array(offsets, pa.int64()))
        return record, keys
