"""Incremental snapshots of a PostgreSQL connector: chunks written into the WAL by the driver.

The signal table must be in the publication (its inserts reach the slot) and is never emitted. To keep a
batch a pure function of its offsets, the driver reads the next chunk (``incremental.snapshot.chunk.size``
rows after the last key, in primary-key order, restricted by the table's ``additional-conditions`` as SQL
with quoted identifiers and bound values) right after committing a low watermark row, and writes the chunk's
rows into the high watermark row: the executor then reads chunk and window from the slot
(:class:`~..cdc.signals.ChunkWindows`). One chunk is in flight at a time; under ``Trigger.AvailableNow`` a run
delivers at most one new chunk. The watermark rows are deleted in the high watermark's own transaction: the
table stays small, the WAL keeps them for replays. A filter PostgreSQL cannot apply (a value that does not fit
its column) stops that table's snapshot by a ``stop-snapshot`` row, so offsets and executor see it alike.

A batch's end is moved past the high watermark of a window it would cut (the executor needs a whole window),
and the offset's ``incremental`` entry is the state folded over the signals up to the end
(:func:`~..cdc.signals.fold`).

>>> chunks = IncrementalSnapshots(session, settings)                      # doctest: +SKIP
>>> chunks.write_chunk(pos, layout); end = chunks.end(pos, end, layout)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

from ...errors import ConnectError
from ..cdc.filters import Condition, parse_filter
from ..cdc.layout import Layout
from ..cdc.signals import CLOSE, OPEN, fold, state_of, state_text
from .config import PostgresSettings
from .pgoutput import PG_EPOCH_US, decode_tuple
from .session import PgSession, lsn_text, psycopg_module
from .snapshot import key_predicate

__all__ = ["IncrementalSnapshots", "filter_sql"]

log = logging.getLogger(__name__)


def filter_sql(conditions: list[Condition]) -> tuple[Any, list[Any]]:
    """The SQL of :func:`~..cdc.filters.parse_filter`'s conditions (identifiers quoted, values bound) and its
    parameters."""
    from psycopg import sql

    parts, params = [], []
    for col, op, values in conditions:
        if op in ("is null", "is not null"):
            parts.append(sql.SQL("{} " + op).format(sql.Identifier(col)))
        elif op in ("in", "not in"):
            marks = sql.SQL(", ").join(sql.SQL("%s") for _ in values)
            parts.append(sql.SQL("{} " + op + " ({})").format(sql.Identifier(col), marks))
            params += values
        else:
            parts.append(sql.SQL("{} " + op + " %s").format(sql.Identifier(col)))
            params += values
    return sql.SQL(" and ").join(parts), params


class IncrementalSnapshots:
    """The driver's half of incremental snapshots: the signals in a WAL range, the chunks, the batch ends."""

    def __init__(self, session: PgSession, settings: PostgresSettings):
        self.session, self.settings = session, settings

    def check_publication(self) -> None:
        """Fail before data moves when the signal table is not in the publication."""
        settings = self.settings
        assert settings.signal_table is not None
        pub = self.session.publication_tables()
        if pub is not None and settings.signal_table not in pub:
            raise ConnectError(f"The signal table {'.'.join(settings.signal_table)} is not in publication "
                               f"{settings.publication_name!r}: add it (ALTER PUBLICATION ... ADD TABLE) "
                               f"so that its inserts reach the replication slot")

    def signals(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """Rows inserted into the signal table by transactions with commit LSN in ``(lo, hi]``, in commit
        order, each with its transaction's commit LSN (``lsn``, as in offsets), ``txId`` and ``ts_usec``."""
        relid, cols = self.session.signal_table()
        rows = self.session.query("""
            with p as materialized (
                select (p.lsn - '0/0'::pg_lsn)::int8 as l, p.xid::text::int8 as xid, get_byte(p.data, 0) as tag,
                       p.data, p.ord
                from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, NULL::int4, 'proto_version', '1',
                                                         'publication_names', %s::text)
                     with ordinality as p(lsn, xid, data, ord)),
            s as (select * from p where tag = 73 and substring(data from 2 for 4) = %s::bytea)
            select l, xid, tag, data from s
            union all select l, xid, tag, data from p where tag = 67 and xid in (select xid from s)
            """, (self.settings.slot_name, lsn_text(hi), self.settings.publication_name, relid.to_bytes(4, "big")))
        # A transaction's inserts precede its commit row; group them by xid and stamp them at the commit.
        pending: dict[int, list[dict[str, Any]]] = {}
        out = []
        for lsn, xid, tag, data in sorted(rows, key=lambda r: (int(r[0]), -int(r[2]))):
            xid, data = int(xid), bytes(data)
            if tag == 73:
                vals = dict(zip(cols, decode_tuple(data, 6)[0]))
                text = {k: (v.decode() if isinstance(v, bytes) else None) for k, v in vals.items()}
                pending.setdefault(xid, []).append(text)
            else:
                end = int(lsn)
                ts = int.from_bytes(data[18:26], "big", signed=True) + PG_EPOCH_US
                for sig in pending.pop(xid, []):
                    if lo < end <= hi:
                        out.append({**sig, "lsn": end, "txId": xid, "ts_usec": ts})
        return out

    def write_chunk(self, pos: dict[str, Any], layout: Layout) -> None:
        """Write the next chunk (low watermark, rows, high watermark) into the WAL when a snapshot is running
        and not paused, and no chunk written earlier is still ahead of ``pos`` (one chunk in flight at a
        time). The high watermark names the snapshot it belongs to, so a stop-snapshot (or stop and a new
        execute-snapshot) committed while it is in flight drops it (:func:`~..cdc.signals.accepts`)."""
        from psycopg import sql

        psycopg = psycopg_module()
        settings = self.settings
        assert settings.signal_table is not None
        signals = self.signals(int(pos["lsn"]), self.session.flush_lsn())
        if any((sig.get("type") or "").strip() == CLOSE for sig in signals):
            return
        state = fold(state_of(pos), signals, layout, name=settings.name, quiet=True)  # self.end logs them
        if state is None or state.get("paused"):
            return
        t = layout.table_by_id(state["tables"][0])
        assert t is not None
        size = settings.incremental_chunk_size
        wid = uuid.uuid4().hex
        ident = sql.Identifier(*settings.signal_table)
        insert = sql.SQL("insert into {} (id, type, data) values (%s, %s, %s)").format(ident)
        self.session.query(insert, (f"{wid}-open", OPEN, json.dumps({"window": wid, "table": t.id})))
        # Read after the low watermark committed: every change the chunk may miss is in the window.
        cols, where, params = key_predicate(t, state["key"], None)
        text = state.get("filters", {}).get(t.id)
        if text:  # additional-conditions: checked when the signal was folded, bound values here
            conditions, problem = parse_filter(text, t)
            assert problem is None, problem
            cond, values = filter_sql(conditions)
            where = (where + sql.SQL(" and ") if params else sql.SQL("where ")) + cond
            params = params + values
        q = sql.SQL("select {} from {} {} order by {} limit %s").format(
            # aliased: ORDER BY a bare name would pick the text output column and sort keys as text
            sql.SQL(", ").join(sql.SQL("{}::text as {}").format(sql.Identifier(c.name), sql.Identifier(f"c{i}"))
                               for i, c in enumerate(t.columns)),
            sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
        try:
            rows = [list(r) for r in self.session.query(q, params + [size])]
        except (psycopg.DataError, psycopg.ProgrammingError) as e:
            if not text:
                raise
            # A filter whose values do not fit its columns ('abc' for an int): the table leaves the snapshot
            # by a stop-snapshot row in the WAL, so the offsets and the executor see it alike.
            log.error("%s: filter %r of the incremental snapshot of %s fails (%s): stopping the snapshot of %s",
                      settings.name, text, t.id, str(e).strip().splitlines()[0], t.id)
            stop = json.dumps({"data-collections": [re.escape(t.id)], "type": "incremental"})
            self.session.transaction([(insert, (f"{wid}-stop", "stop-snapshot", stop)),
                                      (sql.SQL("delete from {} where id = %s").format(ident), (f"{wid}-open",))])
            return
        names = [c.name for c in t.columns]
        keyidx = [names.index(c.name) for c in t.key]
        last = json.dumps([rows[-1][i] for i in keyidx]) if rows else state["key"]
        data = json.dumps({"window": wid, "table": t.id, "columns": names, "rows": rows, "after": state["key"],
                           "last": last, "done": len(rows) < size, "snapshot": state["signal"]},
                          separators=(",", ":"))
        self.session.transaction([(insert, (f"{wid}-close", CLOSE, data)),
                                  (sql.SQL("delete from {} where id in (%s, %s)").format(ident),
                                   (f"{wid}-open", f"{wid}-close"))])
        log.debug("%s: incremental snapshot chunk %s of %s: %d rows after key %s", settings.name, wid, t.id,
                  len(rows), state["key"] or "(start)")

    def end(self, pos: dict[str, Any], end: dict[str, Any], layout: Layout) -> dict[str, Any]:
        """``end`` moved past the high watermark of a chunk window it would cut (the executor needs a whole
        window), with the incremental snapshot state folded over the signals of ``(pos, end]``."""
        lo = int(pos["lsn"])
        signals = self.signals(lo, max(self.session.flush_lsn(), int(end["lsn"])))
        opened: dict[str, int] = {}
        e = int(end["lsn"])
        for sig in signals:
            kind = (sig.get("type") or "").strip()
            if kind == OPEN:
                opened[json.loads(sig["data"])["window"]] = sig["lsn"]
            elif kind == CLOSE:
                o = opened.get(json.loads(sig["data"])["window"])
                if o is not None and o <= e < sig["lsn"]:
                    end, e = {"lsn": sig["lsn"], "txId": sig["txId"], "ts_usec": sig["ts_usec"]}, sig["lsn"]
        state = fold(state_of(pos), [sig for sig in signals if sig["lsn"] <= e], layout, name=self.settings.name)
        end = {k: v for k, v in end.items() if k != "incremental"}
        if state is not None:
            end["incremental"] = state_text(state)
        return end
