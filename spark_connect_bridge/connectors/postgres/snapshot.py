"""The initial snapshot of a PostgreSQL connector: taken with the slot, read in primary-key chunks.

**Snapshot, then stream, without gap or duplicate.** The slot is created with an exported snapshot; every
snapshot chunk is read in a transaction that imports it (``SET TRANSACTION SNAPSHOT``), so the snapshot is
exactly the database at the slot's consistent point and streaming starts at that point. Snapshot positions
are ``{"lsn": <consistent point>, "snapshot": "true", "snapshot_name": ..., "snapshot_table": "s.t",
"snapshot_key": <JSON of the last primary key read, "" before the first>, "ts_usec": ..., "txId": <the
snapshot transaction's id, which every snapshot event's source.txId carries>}``: chunks are
primary-key ranges (``ctid`` ranges for tables without a key), so they too replay exactly. The exported
snapshot lives as long as the driver's replication connection: if the driver dies during the snapshot, the
remaining chunks are read from a fresh snapshot and logged as such (rows changed meanwhile are then read at
their newer state and their changes streamed again: at-least-once for that window, which a mirror applying
events in order absorbs).

``snapshot.mode``: ``initial`` snapshots when the query has no checkpoint, ``always`` at every query start,
``initial_only`` snapshots and stops, ``no_data`` (``schema_only``) and ``never`` stream only, ``when_needed``
snapshots when there is no checkpoint or the slot no longer has its position.

>>> snapshots = Snapshots(session, settings)                              # doctest: +SKIP
>>> pos = snapshots.start(layout)      # creates the slot                 # doctest: +SKIP
>>> end = snapshots.end(pos, layout, max_records=10_000)                  # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from ..cdc.layout import Layout, Table
from .config import PostgresSettings
from .events import ChangeEvents, sequence
from .session import PgSession, psycopg_module

__all__ = ["Snapshots", "key_predicate"]

log = logging.getLogger(__name__)


def key_predicate(t: Table, after: str, upto: str | None, *,
                  chunks: bool = False) -> tuple[list[Any], Any, list[Any]]:
    """Key columns (``ctid`` without a key) and the WHERE clause of the chunk ``(after, upto]`` (bounds: JSON
    lists of the key's text values; empty or None: unbounded), with its parameters. The key is the record key
    (an incremental snapshot's, as Debezium's) or, with ``chunks``, the primary key (:attr:`Table.chunk_key`:
    the initial snapshot's)."""
    from psycopg import sql

    key = t.chunk_key if chunks else t.key
    cols: list[Any]
    if key:
        cols = [sql.Identifier(c.name) for c in key]
        types = [sql.SQL(c.spec.db_type.replace("[]", "") or "text") for c in key]
    else:
        cols, types = [sql.SQL("ctid")], [sql.SQL("tid")]
    conds, params = [], []
    for bound, op in ((after, ">"), (upto, "<=")):
        if bound:
            vals = json.loads(bound)
            row = sql.SQL(", ").join(sql.SQL("%s::{}").format(ty) for ty in types)
            conds.append(sql.SQL("({}) {} ({})").format(sql.SQL(", ").join(cols), sql.SQL(op), row))
            params.extend(vals)
    where = sql.SQL("where ") + sql.SQL(" and ").join(conds) if conds else sql.SQL("")
    return cols, where, params


class Snapshots:
    """Taking the snapshot (driver), bounding its chunks (driver) and reading them (executors)."""

    def __init__(self, session: PgSession, settings: PostgresSettings):
        self.session, self.settings = session, settings

    def start(self, layout: Layout) -> dict[str, Any]:
        """Create the slot with an exported snapshot and return the first snapshot position."""
        session = self.session
        if session.slot() is not None:  # snapshot.mode=always: a new slot for a new consistent snapshot
            log.warning("%s: dropping replication slot %s to take a new consistent snapshot (a snapshot that "
                        "matches the slot exists only when the slot is created)", self.settings.name,
                        self.settings.slot_name)
            session.drop_slot()
        lsn, name = session.create_slot(export=True)
        tables = [t.id for t in layout.tables]
        if not tables:
            return {"lsn": lsn}
        # Debezium's snapshot events carry the snapshot transaction's id (txid_current() in the transaction
        # that reads the snapshot). Taken once here and kept in the offsets, so that every chunk, replayed or
        # read from a fresh snapshot after a driver crash, carries the same one.
        conn = session.connect()
        try:
            self.transaction(conn, name or "", read_only=False)
            ts, txid = conn.execute("select (extract(epoch from clock_timestamp()) * 1000000)::int8, "
                                    "txid_current()").fetchone()
            conn.execute("rollback")
        finally:
            conn.close()
        return {"lsn": lsn, "snapshot": "true", "snapshot_name": name or "", "snapshot_table": tables[0],
                "snapshot_key": "", "ts_usec": int(ts), "txId": int(txid)}

    def transaction(self, conn: Any, name: str, *, read_only: bool = True) -> bool:
        """Begin a REPEATABLE READ transaction on ``conn`` importing snapshot ``name``; False when the
        snapshot no longer exists (its exporting connection is gone) and a fresh one is used instead."""
        psycopg = psycopg_module()
        begin = "begin isolation level repeatable read" + (" read only" if read_only else "")
        conn.execute(begin)
        if name:
            try:
                conn.execute(f"set transaction snapshot '{name}'")
                return True
            except psycopg.errors.InvalidParameterValue:
                conn.execute("rollback")
                conn.execute(begin)
                log.warning("%s: exported snapshot %s is gone (the driver that created the slot stopped): "
                            "reading the rest of the snapshot from a new one; changes made meanwhile to rows "
                            "not yet read may be delivered twice", self.settings.name, name)
                return False
        return False

    def end(self, pos: dict[str, Any], layout: Layout, max_records: int | None) -> dict[str, Any] | None:
        """The end of the next snapshot batch from ``pos``: at most ``max_records`` rows, cut inside a table
        at a key or at a table's start; the stream position once the snapshot is read. None for no bound
        while tables are left: the rest of the snapshot, and the stream after it, make one batch."""
        from psycopg import sql

        ids = [t.id for t in layout.tables]
        stream_pos = {"lsn": int(pos["lsn"])}
        if pos["snapshot_table"] not in ids:
            return stream_pos
        budget = max_records
        i, key = ids.index(pos["snapshot_table"]), pos["snapshot_key"]
        if budget is None:
            return None
        conn = self.session.connect()
        try:
            self.transaction(conn, pos.get("snapshot_name", ""))
            while i < len(ids):
                t = layout.tables[i]
                cols, where, params = key_predicate(t, key, None, chunks=True)
                q = sql.SQL("select {} from {} {} order by {} offset %s limit 2").format(
                    sql.SQL(", ").join(sql.SQL("{}::text").format(c) for c in cols),
                    sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
                rows = conn.execute(q, params + [budget - 1]).fetchall()
                if len(rows) == 2:  # the chunk ends inside the table (else the table ends within budget)
                    return {**pos, "snapshot_table": t.id, "snapshot_key": json.dumps(list(rows[0]))}
                n = conn.execute(sql.SQL("select count(*) from {} {}").format(
                    sql.Identifier(t.schema, t.table), where), params).fetchone()[0]
                budget -= int(n)
                i, key = i + 1, ""
                if budget <= 0 and i < len(ids):
                    return {**pos, "snapshot_table": ids[i], "snapshot_key": ""}
            return stream_pos
        finally:
            conn.close()

    # ---------------------------------------------------------------------------------- executor
    def read(self, start: dict[str, Any], end: dict[str, Any], events: ChangeEvents) -> Iterator[Any]:
        """Snapshot rows (op ``r``) from ``start``'s chunk position up to ``end``'s, read under the exported
        snapshot, in key order."""
        from psycopg import sql

        layout = events.layout
        ids = [t.id for t in layout.tables]
        if start["snapshot_table"] not in ids:
            return
        first = ids.index(start["snapshot_table"])
        if "snapshot" in end:
            last, last_key = ids.index(end["snapshot_table"]), end["snapshot_key"]
            if not last_key:  # the end table has not started: stop after the previous one
                last, last_key = last - 1, None
        else:
            last, last_key = len(ids) - 1, None
        conn = self.session.connect()
        try:
            self.transaction(conn, start.get("snapshot_name", ""))
            ts_us = int(start.get("ts_usec", 0))
            for i in range(first, last + 1):
                t = layout.tables[i]
                lo = start["snapshot_key"] if i == first else ""
                hi = last_key if i == last else None
                cols, where, params = key_predicate(t, lo, hi, chunks=True)
                select = sql.SQL(", ").join(sql.Identifier(c.name) for c in t.columns)
                q = sql.SQL("copy (select {} from {} {} order by {}) to stdout (format csv)").format(
                    select, sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
                yield from self._table(conn, events, t, q, params, ts_us, int(start["lsn"]), start.get("txId"),
                                       table_first=not lo, table_last=hi is None,
                                       overall_first=(i == 0 and not lo),
                                       overall_last=(hi is None and i == len(ids) - 1))
            conn.execute("commit")
        finally:
            conn.close()

    @staticmethod
    def _table(conn: Any, events: ChangeEvents, t: Table, q: Any, params: list[Any], ts_us: int, snap_lsn: int,
               txid: int | None, *, table_first: bool, table_last: bool, overall_first: bool,
               overall_last: bool) -> Iterator[Any]:
        """One table's chunk, fetched as CSV (``COPY``) and parsed by Arrow, as events with Debezium's
        ``source.snapshot`` markers (``first``/``last`` of the snapshot and of each table)."""
        import pyarrow as pa
        import pyarrow.csv as pcsv

        buf = io.BytesIO()
        with conn.cursor().copy(q, params or None) as cp:
            for block in cp:
                buf.write(block)
        data = buf.getvalue()
        if not data:
            return
        names = [c.name for c in t.columns]
        tbl = pcsv.read_csv(
            io.BytesIO(data),
            read_options=pcsv.ReadOptions(column_names=[f"c{i}" for i in range(len(names))]),
            parse_options=pcsv.ParseOptions(newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(column_types={f"c{i}": pa.string() for i in range(len(names))},
                                                strings_can_be_null=True, quoted_strings_can_be_null=False,
                                                null_values=[""]))
        n_all = tbl.num_rows
        batch = events.batch
        for s in range(0, n_all, max(batch, 1)):
            part = tbl.slice(s, batch)
            n = part.num_rows
            texts = {name: part.column(i).combine_chunks() for i, name in enumerate(names)}
            flags = ["true"] * n
            if table_first and s == 0:
                flags[0] = "first" if overall_first else "first_in_data_collection"
            # Debezium's precedence for a row that is both: last, first, last_in_data_collection, first_in_...
            if table_last and s + n == n_all and (overall_last or flags[-1] != "first"):
                flags[-1] = "last" if overall_last else "last_in_data_collection"
            xids = pa.nulls(n, pa.int64()) if txid is None else int(txid)
            yield events.envelope.read_events(t, texts, n, ts_us=ts_us, offset=snap_lsn,
                                              snapshot=pa.array(flags, pa.string()), txId=xids, lsn=snap_lsn,
                                              sequence=sequence(snap_lsn, n))
