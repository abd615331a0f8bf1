"""Incremental snapshots of the MySQL and MariaDB connectors: Debezium's signals, chunks between binlog watermarks.

Signals are rows inserted into the signal table (``signal.data.collection``, Debezium's ``(id, type, data)``
table): the binlog carries them, the driver reads them (:meth:`~.stream.StreamReader.signal_rows`) and folds
them into the offset's ``incremental`` entry with the shared state machine (:func:`~..cdc.signals.fold`), and
each executor folds the same rows from the same range.

**Chunks without writes (Debezium's ``read.only`` watermarks).** The connector never writes to the database:
the driver reads the next chunk (``incremental.snapshot.chunk.size`` rows after the last key in key order,
restricted by the table's ``additional-conditions``) between a low and a high watermark, two binlog positions.
MariaDB gives the exact position of the chunk's consistent snapshot (``binlog_snapshot_file/_position``), so
low = high and no change can fall between; MySQL's are the positions before and after the read (Debezium's
GTID watermarks). The chunk's rows (in :func:`~.types.to_text` form) travel in the batch's end offset (the
offset's ``chunk`` entry, kept by Spark's checkpoint, so a replay emits the same rows); the executor opens the
window at the low watermark and, at the high one, emits the rows whose key the stream did not change inside
the window (:class:`~..cdc.signals.ChunkWindows`), as op ``r`` with ``source.snapshot=incremental``. A batch
holding a chunk always reaches its high watermark. ``read.only`` is accepted: both values behave alike.

One chunk per micro-batch, and a batch holding one reaches the binlog's head (where the chunk is read), as the
PostgreSQL connector's. The driver reads each batch's range of the binlog for signals (decoding only the signal
table's rows); under ``Trigger.AvailableNow`` a run ends with the binlog it found and delivers at most one new
chunk.

>>> IncrementalSnapshots(session, settings, signal_reader).end(pos, end, layout)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from ...errors import ConnectError
from ..cdc.filters import Condition, parse_filter
from ..cdc.layout import Layout, Table
from ..cdc.signals import CLOSE, fold, state_of, state_text
from .binlog import file_number
from .config import Settings
from .session import BinlogPosition, Session, pymysql_module
from .snapshot import quote
from .types import from_python, sql_value, to_text

__all__ = ["IncrementalSnapshots", "filter_sql"]

log = logging.getLogger(__name__)


def filter_sql(conditions: list[Condition]) -> tuple[str, list[Any]]:
    """The SQL of :func:`~..cdc.filters.parse_filter`'s conditions (identifiers quoted, values bound)."""
    parts, params = [], []
    for col, op, values in conditions:
        if op in ("is null", "is not null"):
            parts.append(f"{quote(col)} {op}")
        elif op in ("in", "not in"):
            parts.append(f"{quote(col)} {op} ({', '.join(['%s'] * len(values))})")
            params += values
        else:
            parts.append(f"{quote(col)} {'<>' if op == '!=' else op} %s")
            params += values
    return " AND ".join(parts), params


def _at(pos: dict[str, Any]) -> tuple[int, int]:
    return file_number(pos["file"]), int(pos["pos"])


class IncrementalSnapshots:
    """The driver's half: the signals of a binlog range, the next chunk, the batch's end and offsets.

    ``signal_rows(start, end)`` reads the signal table's inserts of a range
    (:meth:`~.stream.StreamReader.signal_rows`)."""

    def __init__(self, session: Session, settings: Settings,
                 signal_rows: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]):
        self.session, self.settings = session, settings
        self.signal_rows = signal_rows

    def check_table(self) -> None:
        """Fail before data moves when the signal table is missing or lacks Debezium's columns."""
        assert self.settings.signal_table is not None
        db, table = self.settings.signal_table
        rows = self.session.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                                  "AND TABLE_NAME = %s", (db, table))
        names = {(r[0].decode() if isinstance(r[0], bytes) else str(r[0])).lower() for r in rows}
        if not names:
            raise ConnectError(f"The signal table {db}.{table} (signal.data.collection) does not exist: CREATE "
                               f"TABLE {db}.{table} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data "
                               f"VARCHAR(2048) NULL)")
        missing = [c for c in ("id", "type", "data") if c not in names]
        if missing:
            raise ConnectError(f"The signal table {db}.{table} lacks the column(s) {', '.join(missing)}: Debezium's "
                               f"signal table has id, type and data")

    def end(self, pos: dict[str, Any], end: dict[str, Any], layout: Layout,
            position: Callable[[BinlogPosition], dict[str, Any]]) -> dict[str, Any]:
        """``end`` with the incremental snapshot folded over the signals of ``(pos, end]`` and, when a snapshot
        runs there and is not paused, the next chunk: ``end`` then moves to the chunk's high watermark (at the
        binlog's head), and the signals up to it are folded too."""
        signals = self.signal_rows(pos, end)
        state = fold(state_of(pos), signals, layout, name=self.settings.name, quiet=True)
        chunk = None
        if state is not None and not state.get("paused"):
            chunk = self._chunk(state, layout)
            hi = chunk["hi"]
            if _at(hi) > _at(end):
                moved = position(BinlogPosition(hi["file"], int(hi["pos"]), self.session.gtids_at(hi["file"],
                                                                                                 int(hi["pos"]))))
                signals += self.signal_rows(end, moved)
                end = moved
        rows = list(signals)
        if chunk is not None:
            rows.append({**chunk["signal"], "id": chunk["window"]})
        state = fold(state_of(pos), rows, layout, name=self.settings.name)
        out = {k: v for k, v in end.items() if k not in ("incremental", "chunk")}
        if state is not None:
            out["incremental"] = state_text(state)
        if chunk is not None:
            out["chunk"] = chunk
        return out

    def _chunk(self, state: dict[str, Any], layout: Layout) -> dict[str, Any]:
        """The next chunk of the snapshot's current table, between its watermarks (see the module docstring)."""
        settings = self.settings
        t = layout.table_by_id(state["tables"][0])
        assert t is not None
        size = settings.incremental_chunk_size
        wid = uuid.uuid4().hex
        where, params = self._after(t, state["key"])
        text = state.get("filters", {}).get(t.id)
        if text:  # additional-conditions: checked when the signal was folded, bound values here
            conditions, problem = parse_filter(text, t)
            assert problem is None, problem
            cond, values = filter_sql(conditions)
            where, params = (f"{where} AND {cond}" if where else f"WHERE {cond}"), params + values
        order = ", ".join(quote(c.name) for c in t.key)
        sql = (f"SELECT {', '.join(quote(c.name) for c in t.columns)} FROM {quote(t.schema)}.{quote(t.table)} "
               f"{where} ORDER BY {order} LIMIT {int(size)}")
        pymysql = pymysql_module()
        try:
            lo, rows, hi = self._read(sql, params)
        except pymysql.err.MySQLError as e:
            if not text:
                raise
            # A filter MySQL cannot apply: the table leaves the snapshot, for the offsets and executors alike.
            log.error("%s: filter %r of the incremental snapshot of %s fails (%s): stopping the snapshot of %s",
                      settings.name, text, t.id, e, t.id)
            at = self.session.binlog_position()
            mark = {"file": at.file, "pos": at.pos}
            stop = json.dumps({"data-collections": [re.escape(t.id)], "type": "incremental"})
            return {"window": wid, "table": t.id, "lo": mark, "hi": mark, "ts_sec": int(time.time()),
                    "signal": {"type": "stop-snapshot", "data": stop}}
        names = [c.name for c in t.columns]
        columns = list(zip(*rows)) if rows else [()] * len(names)
        texts = [to_text(from_python(c.spec, list(columns[i]))) for i, c in enumerate(t.columns)]
        chunk_rows = [list(r) for r in zip(*texts)] if rows else []
        keyidx = [names.index(c.name) for c in t.key]
        last = json.dumps([chunk_rows[-1][i] for i in keyidx]) if chunk_rows else state["key"]
        close = {"window": wid, "table": t.id, "columns": names, "rows": chunk_rows, "after": state["key"],
                 "last": last, "done": len(chunk_rows) < size, "snapshot": state["signal"]}
        log.debug("%s: incremental snapshot chunk %s of %s: %d rows after key %s", settings.name, wid, t.id,
                  len(chunk_rows), state["key"] or "(start)")
        return {"window": wid, "table": t.id, "lo": lo, "hi": hi, "ts_sec": int(time.time()),
                "signal": {"type": CLOSE, "data": json.dumps(close, separators=(",", ":"))}}

    @staticmethod
    def _after(t: Table, key: str) -> tuple[str, list[Any]]:
        """WHERE clause of the keys after ``key`` (JSON of the last key's texts; '' for the table's start)."""
        if not key:
            return "", []
        values = json.loads(key)
        cols = ", ".join(quote(c.name) for c in t.key)
        return (f"WHERE ({cols}) > ({', '.join(['%s'] * len(values))})",
                [sql_value(c.spec, v) for c, v in zip(t.key, values)])

    def _read(self, sql: str, params: list[Any]) -> tuple[dict[str, Any], list[tuple], dict[str, Any]]:
        """(low watermark, rows, high watermark) of a chunk query."""
        session = self.session
        conn = session.connect()
        try:
            with conn.cursor() as cur:
                if session.flavor() == "mariadb":
                    at = session.consistent_snapshot(cur)
                    lo = {"file": at.file, "pos": at.pos}
                    cur.execute(sql, params)
                    rows = [tuple(r) for r in cur.fetchall()]
                    cur.execute("COMMIT")
                    return lo, rows, lo
                before = session.binlog_position()
                cur.execute(sql, params)
                rows = [tuple(r) for r in cur.fetchall()]
                after = session.binlog_position()
                return {"file": before.file, "pos": before.pos}, rows, {"file": after.file, "pos": after.pos}
        finally:
            conn.close()
