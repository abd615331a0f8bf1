"""PostgreSQL changes as Debezium change events, built per relation in bulk and put back in LSN order.

A decoded change becomes Debezium's events: an insert ``c``, an update ``u`` (with ``before`` when the table
has ``REPLICA IDENTITY FULL``), a delete ``d`` and its tombstone (``tombstones.on.delete``), a truncate ``t``;
an update that changes the primary key becomes a delete (+ tombstone) of the old key and a create;
``skipped.operations`` are not emitted. The same events come from the per-message decoder
(:meth:`ChangeEvents.changes`) and from the bulk decoder's relation groups (:meth:`ChangeEvents.bulk`).

Unchanged TOAST values (a column PostgreSQL does not resend when an update leaves it unchanged): taken from
the old row when the table has ``REPLICA IDENTITY FULL``; otherwise set to ``unavailable.value.placeholder``
(Debezium's ``__debezium_unavailable_value``) for string and bytes columns, explicitly, never an empty value.

>>> events = ChangeEvents(layout, settings)                                # doctest: +SKIP
>>> batches = list(events.changes(decoded_changes))                        # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import DataError
from ...version import __version__
from ..cdc.envelope import EnvelopeBuilder
from ..cdc.layout import Column, Layout, Table
from . import pgoutput_bulk
from .config import PostgresSettings
from .layout import SOURCE_NAME, column_wanted, source_type
from .pgoutput import UNCHANGED, Change, Relation
from .types import text_array, to_arrow

__all__ = ["ChangeEvents", "sequence"]

log = logging.getLogger(__name__)


def sequence(lsn: Any, n: int) -> Any:
    """Debezium's ``source.sequence``: the JSON text ``[<last committed LSN>, <this event's LSN>]``, LSNs as
    strings. The first is what a Debezium task read from its committed offsets when it started, null for a new
    connector; here always null (a replay must give the same bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lsns = lsn if isinstance(lsn, pa.Array) else pa.array([lsn] * n, pa.int64())
    return pc.binary_join_element_wise('[null,"', pc.cast(lsns, pa.string()), '"]', "")


def _key_json(t: Table, rel: Relation, row: Sequence[Any]) -> bytes:
    """A row's primary key as Kafka's SimpleHeaderConverter writes a key struct: ``{"id":10}``. Numbers and
    booleans bare, anything else as a JSON string of its text (rare: only the events of a key change)."""
    import json

    pos = {n: i for i, n in enumerate(rel.names)}
    parts = []
    for col in t.key:
        text = row[pos[col.name]]
        if text is None:
            value = "null"
        elif col.spec.kind in ("int16", "int32", "int64", "float32", "float64", "decimal"):
            value = text.decode() if isinstance(text, bytes) else str(text)
        elif col.spec.kind == "boolean":
            value = "true" if text in ("t", b"t") else "false"
        else:
            value = json.dumps(text.decode() if isinstance(text, bytes) else str(text), ensure_ascii=False)
        parts.append(f"{json.dumps(col.name)}:{value}")
    return ("{" + ",".join(parts) + "}").encode()


class ChangeEvents:
    """Record batches of Debezium events of one layout's tables (executors build one per range read)."""

    def __init__(self, layout: Layout, settings: PostgresSettings):
        import pyarrow as pa

        self.pa = pa
        self.layout, self.settings = layout, settings
        self.envelope = EnvelopeBuilder(layout, source_type=source_type(), source_name=SOURCE_NAME,
                                        connector="postgresql", db=settings.dbname, version=__version__,
                                        batch_size=settings.max_batch_size, convert=to_arrow)
        self.batch = settings.max_batch_size
        self.skipped = settings.skipped_operations
        self.tombstones = settings.tombstones_on_delete
        self.placeholder = settings.unavailable_placeholder.encode()

    def windowed(self, changes: Iterator[Change]) -> Iterator[Any]:
        window: list[Change] = []
        for ch in changes:
            window.append(ch)
            if len(window) >= self.batch:
                yield from self.changes(window)
                window = []
        if window:
            yield from self.changes(window)

    def bulk(self, chunk: Any, data: Any) -> Iterator[Any]:
        """Events of a decoded chunk in message order: built per relation, then put back in order."""
        cb = pgoutput_bulk.ChunkBuffer(data)
        parts, order = [], []
        for g in chunk.groups:
            rel = g.relation
            t = self.layout.table(rel.schema, rel.table)
            if t is None:
                continue  # published but not captured (filters)
            built = self._group_batch(g, t, cb)
            if built is not None:
                parts.append(built[0])
                order.append(built[1])
        yield from self.envelope.in_order(parts, order)

    def _group_batch(self, g: Any, t: Table, cb: Any) -> tuple[Any, Any] | None:
        """One relation's events (Debezium's: a delete and its tombstone, creates, updates) and their order
        keys (message position * 2 + 1 for a tombstone)."""
        pa = self.pa
        rel = g.relation
        self._check_columns(rel, t)
        is_i, is_u, is_d = g.op == 73, g.op == 85, g.op == 68
        names = rel.names
        keyidx = [names.index(c.name) for c in t.key if c.name in names]
        full_u = is_u & g.old_full
        if keyidx and full_u.any():
            # Debezium turns an update of the primary key into delete + create: the per-message path does.
            sub = np.flatnonzero(full_u)
            for i in keyidx:
                assert g.old is not None and g.new is not None
                ov, nv = g.old.valid[i][sub], g.new.valid[i][sub]
                if (ov != nv).any():
                    raise pgoutput_bulk.Unsupported("update of the primary key")
                old_k = pgoutput_bulk.gather_binary(cb, g.old.starts[i][sub], g.old.lens[i][sub], ov)
                new_k = pgoutput_bulk.gather_binary(cb, g.new.starts[i][sub], g.new.lens[i][sub], nv)
                if not old_k.equals(new_k):
                    raise pgoutput_bulk.Unsupported("update of the primary key")
        skipped = self.skipped
        emit = ~((is_i & ("c" in skipped)) | (is_u & ("u" in skipped)) | (is_d & ("d" in skipped)))
        reps = emit.astype(np.int64) * np.where(is_d & bool(self.tombstones), 2, 1)
        n = int(reps.sum())
        if n == 0:
            return None
        src = np.repeat(np.arange(len(g.op)), reps)
        sub = np.arange(n) - np.repeat(np.cumsum(reps) - reps, reps)
        tomb = sub == 1
        b_valid = (is_d | full_u)[src]
        a_valid = (is_i | is_u)[src]

        def texts(spans: Any, valid: Any) -> dict[str, Any]:
            out: dict[str, Any] = {col.name: None for col in t.columns}
            if spans is None or not valid.any():
                return out
            for j, name in enumerate(names):
                if name in out:
                    out[name] = pgoutput_bulk.gather_binary(cb, spans.starts[j][src], spans.lens[j][src],
                                              spans.valid[j][src] & valid).cast(pa.string())
            return out

        before, b_typed = self.envelope.row_struct(t, texts(g.old, b_valid), b_valid, n)
        after, a_typed = self.envelope.row_struct(t, texts(g.new, a_valid), a_valid, n)
        lsn = pa.array(g.lsn[src])
        ts = pa.array(g.ts_us[src])
        source = self.envelope.source(n, t, ts, pa.repeat(pa.scalar("false"), n), txId=pa.array(g.xid[src]), lsn=lsn,
                                      sequence=sequence(lsn, n))
        ops = np.array(["c", "u", "d"], dtype=object)[np.where(is_i, 0, np.where(is_u, 1, 2))[src]]
        key = self.envelope.key(t, a_typed, b_typed, a_valid, np.ones(n, dtype=bool), n)
        record = self.envelope.record(t, n, key, before, after, source, pa.array(ops, pa.string()), ts, tomb,
                                      lsn)
        return record, g.index[src] * 2 + sub

    def changes(self, changes: list[Change]) -> Iterator[Any]:
        """Events of ``changes`` in LSN order: built per relation in bulk, then put back in order."""
        events: dict[int, tuple[Relation, Table, list]] = {}
        seq = 0
        for ch in changes:
            rel = ch.relation
            entry = events.get(id(rel))
            if entry is None:
                t = self.layout.table(rel.schema, rel.table)
                if t is None:
                    continue  # published but not captured (filters)
                entry = events[id(rel)] = (rel, t, [])
            rel, t, evs = entry
            for ev in self._expand(ch, rel, t):
                evs.append((seq,) + ev)
                seq += 1
        parts, order = [], []
        for rel, t, evs in events.values():
            if evs:
                parts.append(self._relation_batch(rel, t, evs))
                order.append(np.fromiter((e[0] for e in evs), dtype=np.int64, count=len(evs)))
        yield from self.envelope.in_order(parts, order)

    def _expand(self, ch: Change, rel: Relation, t: Table) -> Iterator[tuple]:
        """(op, lsn, xid, ts, before, after, tombstone, headers) events of one change, Debezium's way."""
        op = ch.op
        if op == "t":
            if "t" not in self.skipped:
                yield ("t", ch.lsn, ch.xid, ch.ts_us, None, None, False, None)
            return
        if op == "c":
            if "c" not in self.skipped:
                yield ("c", ch.lsn, ch.xid, ch.ts_us, None, ch.new, False, None)
            return
        if op == "d":
            if "d" not in self.skipped:
                yield ("d", ch.lsn, ch.xid, ch.ts_us, ch.old, None, False, None)
                if self.tombstones:
                    yield ("d", ch.lsn, ch.xid, ch.ts_us, ch.old, None, True, None)
            return
        new, old = ch.new, ch.old
        assert new is not None  # an update always carries the new row
        if old is not None and UNCHANGED in new and ch.old_kind == "O":
            new = tuple(o if n is UNCHANGED else n for n, o in zip(new, old))
        if old is not None:
            names = rel.names
            keyidx = [names.index(c.name) for c in t.key if c.name in names]
            if keyidx and any(old[i] != new[i] for i in keyidx):
                # A changed primary key: Debezium emits a delete (+ tombstone) of the old key, marked with the
                # new key, and a create marked with the old key.
                marks = {side: [(f"__debezium.{side}key", _key_json(t, rel, row))]
                         for side, row in (("new", new), ("old", old))}
                if "d" not in self.skipped:
                    yield ("d", ch.lsn, ch.xid, ch.ts_us, old, None, False, marks["new"])
                    if self.tombstones:
                        yield ("d", ch.lsn, ch.xid, ch.ts_us, old, None, True, marks["new"])
                if "c" not in self.skipped:
                    yield ("c", ch.lsn, ch.xid, ch.ts_us, None, new, False, marks["old"])
                return
        if "u" not in self.skipped:
            yield ("u", ch.lsn, ch.xid, ch.ts_us, old if ch.old_kind == "O" else None, new, False, None)

    def _columns(self, rel: Relation, t: Table, tuples: list, valid: list[bool]) -> dict[str, Any]:
        """Text arrays per captured column of ``t`` from ``rel``-shaped tuples (None rows -> nulls)."""
        names = rel.names
        pos = {n: i for i, n in enumerate(names)}
        self._check_columns(rel, t)
        width = len(names)
        empty = (None,) * width
        rows = [tp if tp is not None else empty for tp in tuples]
        cols = list(zip(*rows)) if rows else [()] * width
        out: dict[str, Any] = {}
        n = len(tuples)
        for col in t.columns:
            i = pos.get(col.name)
            if i is None:
                out[col.name] = None
                continue
            vals: Sequence[Any] = cols[i]
            if UNCHANGED in vals:
                vals = self._placeholder(t, col, vals)
            out[col.name] = text_array(vals) if n else None
        return out

    def _check_columns(self, rel: Relation, t: Table) -> None:
        known = {c.name for c in t.columns}
        extra = [n for n in rel.names if n not in known and column_wanted(self.settings, rel.schema, rel.table, n)]
        if extra:
            raise DataError(f"Table {t.id} has columns {', '.join(extra)} that this query's schema does not "
                            f"have (the table changed after the query started): restart the query to pick up "
                            f"the new schema")

    def _placeholder(self, t: Table, col: Column, vals: Sequence[Any]) -> list[Any]:
        if col.spec.kind == "string" or col.spec.kind.startswith("bytes"):  # bytea's kinds: binary.handling.mode
            ph = self.placeholder if col.spec.kind == "string" else b"\\x" + self.placeholder.hex().encode()
            return [ph if v is UNCHANGED else v for v in vals]
        log.warning("%s: column %s.%s kept its unchanged TOAST value, which PostgreSQL does not send and type "
                    "%s cannot hold a placeholder for: emitted as null. Set REPLICA IDENTITY FULL on %s to "
                    "receive it", self.settings.name, t.id, col.name, col.spec.db_type, t.id)
        return [None if v is UNCHANGED else v for v in vals]

    def _relation_batch(self, rel: Relation, t: Table, evs: list[tuple]) -> Any:
        pa = self.pa
        n = len(evs)
        _, ops, lsns, xids, tss, befores, afters, tombs, marks = zip(*evs)
        b_valid = np.fromiter((b is not None for b in befores), dtype=bool, count=n)
        a_valid = np.fromiter((a is not None for a in afters), dtype=bool, count=n)
        row_struct = self.envelope.row_struct
        before, b_typed = row_struct(t, self._columns(rel, t, list(befores), list(b_valid)), b_valid, n)
        after, a_typed = row_struct(t, self._columns(rel, t, list(afters), list(a_valid)), a_valid, n)
        ts = pa.array(tss, pa.int64())
        lsn = pa.array(lsns, pa.int64())
        source = self.envelope.source(n, t, ts, pa.array(["false"] * n, pa.string()), txId=pa.array(xids, pa.int64()),
                                      lsn=lsn, sequence=sequence(lsn, n))
        tomb = np.array(tombs, dtype=bool)
        truncate = np.array([o == "t" for o in ops], dtype=bool)
        key = self.envelope.key(t, a_typed, b_typed, a_valid, ~truncate, n)
        headers = None
        if any(m is not None for m in marks):  # a key change: its marks, else no headers
            header_t = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
            headers = pa.array([[{"key": k, "value": v} for k, v in (m or ())] for m in marks], header_t)
        return self.envelope.record(t, n, key, before, after, source, pa.array(ops, pa.string()), ts, tomb,
                                    pa.array(lsns, pa.int64()), headers)
