"""The snapshot: the captured tables' rows as ``op=r`` events, read in primary-key chunks, then the stream from
the snapshot's binlog position.

The position is taken with a consistent snapshot (:meth:`~.session.Session.snapshot_position`). Chunks are
primary-key ranges, one range of tables and keys per micro-batch, so a replayed batch reads the same rows. Each
batch's read task reads its chunks inside one ``START TRANSACTION WITH CONSISTENT SNAPSHOT``; MySQL cannot hand
one snapshot to another connection (PostgreSQL's exported snapshots have no MySQL counterpart), so chunks of
later batches see later states: a row changed while the snapshot runs is read at its newer state and its change
is streamed again after the snapshot (at-least-once for that window, which a mirror applying events in order
absorbs; exactly once when the tables do not change during the snapshot). A table without a primary key is one
chunk. With ``include.schema.changes`` the first batch starts with Debezium's schema change events of the
snapshot (:meth:`~.schema_changes.SchemaChanges.snapshot`).

>>> end = snapshot_end(session, layout, pos, 10_000)                                # doctest: +SKIP
>>> batches = SnapshotReader(session, layout, builder).read(start, end)          # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from ..cdc.layout import Layout, Table
from .binlog import file_number
from .events import EventBuilder, record_offset
from .schema_changes import SchemaChanges
from .session import Session
from .types import from_python

__all__ = ["snapshot_end", "SnapshotReader", "quote"]

log = logging.getLogger(__name__)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _key_predicate(t: Table, after: str, upto: str | None) -> tuple[list[str], str, list[Any]]:
    """Key column SQL, the WHERE clause of the chunk ``(after, upto]`` and its parameters."""
    cols = [quote(c.name) for c in t.chunk_key]
    conds, params = [], []
    for bound, op in ((after, ">"), (upto, "<=")):
        if bound and cols:
            values = json.loads(bound)
            conds.append(f"({', '.join(cols)}) {op} ({', '.join(['%s'] * len(values))})")
            params.extend(values)
    return cols, ("WHERE " + " AND ".join(conds)) if conds else "", params


def snapshot_end(session: Session, layout: Layout, pos: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """The snapshot position after about ``budget`` more rows (the stream position once every table is read)."""
    ids = [t.id for t in layout.tables]
    stream = {k: v for k, v in pos.items() if not k.startswith("snapshot")}
    stream.update(row=0, event=0)
    if pos["snapshot_table"] not in ids or budget is None:
        return stream
    i, key = ids.index(pos["snapshot_table"]), pos["snapshot_key"]
    left = budget
    while i < len(ids):
        t = layout.tables[i]
        table = f"{quote(t.schema)}.{quote(t.table)}"
        cols, where, params = _key_predicate(t, key, None)
        if cols:
            rows = session.query(f"SELECT {', '.join(f'CAST({c} AS CHAR)' for c in cols)} FROM {table} {where} "
                                 f"ORDER BY {', '.join(cols)} LIMIT 2 OFFSET {int(left) - 1}", params)
            if len(rows) == 2:  # the chunk ends inside the table
                return {**pos, "snapshot_table": t.id, "snapshot_key": json.dumps([_text(v) for v in rows[0]])}
        n = int(session.query(f"SELECT COUNT(*) FROM {table} {where}", params)[0][0])
        left -= n
        i, key = i + 1, ""
        if left <= 0 and i < len(ids):
            return {**pos, "snapshot_table": ids[i], "snapshot_key": ""}
    return stream


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


class SnapshotReader:
    """Reads the snapshot chunks of a range as record batches."""

    def __init__(self, session: Session, layout: Layout, builder: EventBuilder):
        self.session, self.layout, self.builder = session, layout, builder
        self.settings = session.settings
        self._ddl = SchemaChanges(self.settings, layout, builder.schema, builder.version, builder.connector,
                                  session) if self.settings.include_schema_changes else None

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        ids = [t.id for t in self.layout.tables]
        if start["snapshot_table"] not in ids:
            return
        first = ids.index(start["snapshot_table"])
        if end.get("snapshot"):
            last, last_key = ids.index(end["snapshot_table"]), end["snapshot_key"] or None
            if last_key is None:  # the end table has not started: stop after the previous one
                last -= 1
        else:
            last, last_key = len(ids) - 1, None
        if self._ddl is not None and first == 0 and not start["snapshot_key"]:  # the snapshot's schema, first
            record = self._ddl.snapshot(start["file"], int(start["pos"]), int(start.get("ts_sec", 0)),
                                        record_offset(file_number(start["file"]), int(start["pos"]), 0))
            if record is not None:
                yield record
        conn = self.session.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            for i in range(first, last + 1):
                t = self.layout.tables[i]
                lo = start["snapshot_key"] if i == first else ""
                hi = last_key if i == last else None
                yield from self._table(conn, t, start, lo, hi, overall_first=i == 0 and not lo,
                                       overall_last=hi is None and i == len(ids) - 1)
            with conn.cursor() as cur:
                cur.execute("COMMIT")
        finally:
            conn.close()

    def _table(self, conn: Any, t: Table, start: dict[str, Any], lo: str, hi: str | None, *,
               overall_first: bool, overall_last: bool) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pymysql.cursors

        cols, where, params = _key_predicate(t, lo, hi)
        select = ", ".join(quote(c.name) for c in t.columns)
        order = f" ORDER BY {', '.join(cols)}" if cols else ""
        sql = f"SELECT {select} FROM {quote(t.schema)}.{quote(t.table)} {where}{order}"
        size = max(min(self.settings.fetch_size, self.settings.batch_size), 1)
        ts_us = int(start.get("ts_sec", 0)) * 1_000_000
        offset = record_offset(file_number(start["file"]), int(start["pos"]), 0)
        source_fixed = {"file": start["file"], "pos": int(start["pos"]), "row": 0, "server_id": 0,
                        "gtid": None}  # Debezium's snapshot events: server 0, no GTID
        buffered: list[tuple] | None = None
        table_first = not lo
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(sql, params)
            while True:
                rows = buffered if buffered is not None else list(cur.fetchmany(size))
                buffered = None
                if not rows:
                    break
                nxt = list(cur.fetchmany(size))  # one chunk ahead: to know which row is the last
                n = len(rows)
                flags = np.array(["true"] * n, dtype=object)
                if table_first:
                    flags[0] = "first" if overall_first else "first_in_data_collection"
                    table_first = False
                if not nxt and hi is None:
                    flags[-1] = "last" if overall_last else "last_in_data_collection"
                columns = list(zip(*rows))
                natural = {c.name: from_python(c.spec, list(columns[i])) for i, c in enumerate(t.columns)}
                ones = np.ones(n, dtype=bool)
                source = {"ts_us": pa.array(np.full(n, ts_us, dtype=np.int64)),
                          "snapshot": pa.array(flags.tolist(), pa.string()), **source_fixed}
                batch, _ = self.builder.batch(t, np.array(["r"] * n), None, natural, ~ones, ones, source,
                                              np.full(n, offset, dtype=np.int64), np.arange(n))
                yield batch
                buffered = nxt if nxt else []
                if not nxt:
                    break
