"""The change events of a binlog range: each block of the stream read as numpy columns (:mod:`.scan`: headers,
table maps, rows events), only GTID, query and rotate events followed one by one, row events grouped by table map
and decoded in bulk (:mod:`.rows`), records built per table and put back in binlog order (:mod:`.events`). A
block with signals to fold in (``signal.data.collection``), a table of 251 columns or more, or a table id that
meant another table earlier in the range is followed event by event instead.

A range ``(start, end]`` is every event after ``start`` up to the event that ends at ``end`` (both transaction
boundaries, see :mod:`.positions`). A lost connection or a stalled stream is retried within
``errors.retry.timeout``: the range is read again and the records already delivered are skipped (a re-read is
identical).

Debezium's behaviours kept: an update that changes the primary key is a delete (and its tombstone) of the old key
followed by a create of the new one; ``source`` carries ``server_id``, ``gtid``, ``file``, ``pos`` (the row
event's position), ``row``, ``thread`` (MySQL's BEGIN), ``query`` (``include.query``) and ``ts_ms`` (the event's
binlog time, seconds).

>>> for batch in StreamReader(session, layout, builder).read(start, end): ...    # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np

from ...core.retry import count_retry
from ...errors import DataError
from ..cdc.layout import Layout, Table
from ..cdc.signals import OPEN, ChunkWindows, State
from .binlog import (
    BinlogGone,
    Chunk,
    EventKind,
    StreamStalled,
    TableMap,
    file_number,
    lenenc,
    parse_table_map,
    read_chunks,
)
from .events import EventBuilder, record_offset
from .rows import column_values, split_images
from .scan import WIDE, Headers, RowEvents, Segment, chunk_maps, row_events
from .schema_changes import SchemaChanges
from .session import Session, is_retriable
from .types import MySqlType, from_text, to_text

__all__ = ["StreamReader"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<IBIIIH")
#: the events :meth:`StreamReader._event` acts on (the others, XID above all, only end a range)
_FOLLOWED = np.array([EventKind.ROTATE, EventKind.MARIADB_GTID, EventKind.MYSQL_GTID, EventKind.QUERY,
                      EventKind.ANNOTATE_ROWS, *EventKind.MARIADB_COMPRESSED])


class _Txn:
    __slots__ = ("gtid", "query", "thread")

    def __init__(self) -> None:
        self.gtid: str | None = None
        self.thread: int | None = None
        self.query: str | None = None


class _Pass:
    """Where a pass over a range is: the binlog file, the transaction, the table maps by table id (``wide``: one
    of 251 columns or more was met) and the captured table of each table map."""

    def __init__(self, file: str, end_no: int):
        self.file, self.file_no, self.end_no = file, file_number(file), end_no
        self.txn = _Txn()
        self.tables: dict[int, TableMap] = {}
        self.wide = False
        self._captured: dict[int, Table | None] = {}  # id of a table map -> its captured table

    def captured(self, layout: Layout) -> Callable[[TableMap], Table | None]:
        def table_of(tmap: TableMap) -> Table | None:
            if id(tmap) not in self._captured:
                self._captured[id(tmap)] = layout.table(tmap.database, tmap.table)
            return self._captured[id(tmap)]

        return table_of


def _at(file: str, pos: int) -> tuple[int, int]:
    return file_number(file), int(pos)


class _Signals:
    """The signal table's inserts met in a pass over a range, and the range's incremental snapshot chunk: its
    window opens at the chunk's low watermark position and closes at its high one (:mod:`.incremental`)."""

    def __init__(self, reader: StreamReader, collect: bool):
        settings = reader.settings
        self.table = settings.signal_table
        self.windows = ChunkWindows(reader.incremental, reader.layout, name=settings.name)
        self.collected: list[dict[str, Any]] | None = [] if collect else None
        self.pending: list[tuple[tuple[int, int], dict[str, Any]]] = []
        chunk = reader.chunk
        if chunk is not None and not collect:
            lo, hi = chunk["lo"], chunk["hi"]
            where = {"file": hi["file"], "pos": int(hi["pos"]), "ts_usec": int(chunk["ts_sec"]) * 1_000_000}
            self.pending = [(_at(lo["file"], lo["pos"]), {"type": OPEN, "data": json.dumps(
                                {"window": chunk["window"], "table": chunk["table"]}), **where}),
                            (_at(hi["file"], hi["pos"]), {**chunk["signal"], **where})]

    def is_signal(self, tmap: TableMap) -> bool:
        return self.table is not None and (tmap.database.lower(), tmap.table.lower()) == (
            self.table[0].lower(), self.table[1].lower())


class StreamReader:
    """Reads ranges of the binlog into record batches of ``layout``'s tables.

    With a signal table (``signal.data.collection``) its inserts drive the incremental snapshot from
    ``incremental`` (the state at the range's start), and ``chunk`` (the range end's chunk) is emitted where
    its window closes, but for the rows whose key the stream changed inside the window."""

    def __init__(self, session: Session, layout: Layout, builder: EventBuilder | None, checksum: int, *,
                 incremental: State | None = None, chunk: dict[str, Any] | None = None):
        self.session, self.layout, self.builder = session, layout, builder
        self.settings = session.settings
        self.checksum = checksum
        self.incremental, self.chunk = incremental, chunk
        self._maps: dict[bytes, TableMap] = {}
        self._current: dict[str, set[str]] = {}  # the tables' columns now, asked once per read
        self._signals: _Signals | None = None
        self._ddl = SchemaChanges(self.settings, layout, builder.schema, builder.version, builder.connector,
                                  session) if builder is not None and self.settings.include_schema_changes else None

    def signal_rows(self, start: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
        """The signal table's inserts in the range, in binlog order: ``id``, ``type``, ``data``, and where
        (``file``, ``pos`` of the row event, ``ts_usec``). Nothing else is decoded."""
        self._signals = _Signals(self, collect=True)
        for _ in self._read_once(start, end):
            pass
        assert self._signals.collected is not None
        return self._signals.collected

    # ---------------------------------------------------------------------------------- retries
    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        """Every record of the range; re-read after a lost connection or a stall, skipping what was delivered."""
        s = self.settings
        delivered = 0
        deadline = None if s.retry_timeout_ms < 0 else time.monotonic() + max(s.retry_timeout_ms / 1000.0, 0.0)
        delay = 0.3
        while True:
            seen = 0
            try:
                for batch in self._read_once(start, end):
                    n = batch.num_rows
                    if seen + n > delivered:
                        out = batch.slice(max(delivered - seen, 0))
                        delivered += out.num_rows
                        yield out
                    seen += n
                return
            except BinlogGone:
                raise
            except Exception as e:
                if not (isinstance(e, StreamStalled) or is_retriable(e)):
                    raise
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                count_retry()
                log.warning("%s: reading the binlog from %s:%s failed (%s); retrying in %.1f s", s.name,
                            start["file"], start["pos"], e, delay)
                time.sleep(delay)
                delay = min(delay * 2, s.retry_delay_max_ms / 1000.0)

    # ---------------------------------------------------------------------------------- one pass
    def _read_once(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        if self._signals is None or self._signals.collected is None:
            self._signals = _Signals(self, collect=False) if self.settings.signal_table is not None else None
        sig = self._signals
        end_file, end_pos = end["file"], int(end["pos"])
        end_no = file_number(end_file)
        if (file_number(start["file"]), int(start["pos"])) >= (end_no, end_pos):
            if sig is not None:
                yield from self._watermarks(sig, None)
            return
        st = _Pass(start["file"], end_no)
        annotate = self.settings.include_query and self.session.flavor() == "mariadb"
        for chunk in read_chunks(self.session, start["file"], int(start["pos"]), annotate=annotate):
            heads = Headers.of(chunk, self.checksum)
            maps = chunk_maps(heads, self._table_map) if sig is None else None
            if maps is not None and any(st.tables.get(k, m) is not m for k, m in maps.items()):
                maps = None  # a table id that meant another table in an earlier chunk
            if maps is not None and not st.wide:
                st.tables.update(maps)
                finished = yield from self._bulk(chunk.data, heads, st, end_pos)
            else:
                finished = yield from self._follow(chunk, st, sig, end_pos)
            if finished:
                break
        if sig is not None:
            yield from self._watermarks(sig, None)

    def _table_map(self, raw: bytes) -> TableMap:
        tmap = self._maps.get(raw)
        if tmap is None:
            tmap = self._maps[raw] = parse_table_map(raw)
        return tmap

    def _event(self, st: _Pass, data: Any, off: int, size: int) -> tuple[str, Any]:
        """Follows one event other than a rows event: ``("stop", None)`` for a rotation past the range's end,
        ``("rotated", None)`` for another rotation, ``("", record)`` else (a schema change record or None)."""
        ts, kind, server_id, _, log_pos, _ = _HEADER.unpack_from(data, off)
        body, body_end = off + 19, off + size - self.checksum
        if kind == EventKind.ROTATE:
            st.file = data[body + 8:body_end].decode()
            st.file_no = file_number(st.file)
            return ("stop" if st.file_no > st.end_no else "rotated"), None
        if kind == EventKind.TABLE_MAP:
            tmap = self._table_map(bytes(data[body:body_end]))
            st.tables[tmap.table_id] = tmap
            st.wide = st.wide or len(tmap.types) >= WIDE
        elif kind == EventKind.MARIADB_GTID:
            seq, domain = struct.unpack_from("<QI", data, body)
            st.txn = _Txn()
            st.txn.gtid = f"{domain}-{server_id}-{seq}"
        elif kind == EventKind.MYSQL_GTID:
            sid = data[body + 1:body + 17].hex()
            gno = struct.unpack_from("<q", data, body + 17)[0]
            st.txn = _Txn()
            st.txn.gtid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"
        elif kind == EventKind.QUERY:
            statement = self._query(data, body, body_end, st.txn, st.file, log_pos - size)
            if statement is not None and self._ddl is not None:
                db, text = statement
                return "", self._ddl.record(text, db, file=st.file, pos=log_pos - size, ts=ts, server_id=server_id,
                                            gtid=st.txn.gtid, offset=record_offset(st.file_no, log_pos - size, 0))
        elif kind == EventKind.ANNOTATE_ROWS:
            st.txn.query = data[body:body_end].decode("utf-8", "replace")
        elif kind in EventKind.MARIADB_COMPRESSED:
            raise DataError(f"Compressed row events at {st.file}:{log_pos - size}: turn log_bin_compress off on "
                            f"the server (this connector does not decompress binlog events)")
        return "", None

    def _bulk(self, data: bytes, heads: Headers, st: _Pass, end_pos: int) -> Generator[Any, None, bool]:
        """The chunk's rows events in bulk, the other events one by one (:mod:`.scan`); True at the range's end."""
        n = len(heads.starts)
        hits = np.flatnonzero(heads.log_pos >= end_pos).tolist()  # where the range may end (in its last file)
        at = np.flatnonzero(np.isin(heads.kind, _FOLLOWED))
        controls, c_start, c_size, c_pos = (a.tolist() for a in (at, heads.starts[at], heads.sizes[at],
                                                                  heads.log_pos[at]))
        seg_starts: list[int] = []
        segments: list[Segment] = []
        lo = flushed = h = 0
        cut, finished = n, False
        for j, i in enumerate([*controls, n]):
            seg_starts.append(lo)  # the table maps and rows events before event i share the fields of now
            segments.append(Segment(st.file, st.file_no, st.txn.gtid, st.txn.thread, st.txn.query))
            if st.file_no == st.end_no:
                while h < len(hits) and hits[h] < lo:
                    h += 1
                if h < len(hits) and hits[h] < i:
                    cut, finished = hits[h] + 1, True
                    break
            if i == n:
                break
            action, record = self._event(st, data, c_start[j], c_size[j])
            if record is not None:
                yield from self._flush(heads, st, flushed, i, seg_starts, segments)
                flushed = i
                yield record
            if action == "stop":
                cut, finished = i, True
                break
            lo = i + 1
            if action != "rotated" and st.file_no == st.end_no and c_pos[j] >= end_pos:
                cut, finished = i + 1, True
                break
        yield from self._flush(heads, st, flushed, cut, seg_starts, segments)
        return finished

    def _flush(self, heads: Headers, st: _Pass, lo: int, hi: int, seg_starts: list[int],
               segments: list[Segment]) -> Iterator[Any]:
        """The records of the rows events among events ``[lo, hi)`` of the chunk."""
        at = lo + np.flatnonzero(heads.is_rows[lo:hi])
        if not at.size:
            return
        segment = np.searchsorted(np.asarray(seg_starts), at, side="right") - 1
        events = row_events(heads, at, st.tables, st.captured(self.layout), segment, segments)
        if len(events):
            yield from self._records(heads.buf, events)

    def _follow(self, chunk: Chunk, st: _Pass, sig: _Signals | None, end_pos: int) -> Generator[Any, None, bool]:
        """The chunk's events one by one (signals, wide tables, table ids reused); True at the range's end."""
        data = chunk.data
        buf = np.frombuffer(data, dtype=np.uint8)
        rows: list[tuple] = []  # RowEvents.of_events' tuples
        for off, size in zip(chunk.starts, chunk.sizes):
            ts, kind, server_id, _, log_pos, _ = _HEADER.unpack_from(data, off)
            body, body_end = off + 19, off + size - self.checksum
            if sig is not None and sig.pending and (st.file_no, log_pos - size) >= sig.pending[0][0]:
                if rows:  # the changes before a window's edge, in order
                    yield from self._records(buf, RowEvents.of_events(rows))
                    rows = []
                yield from self._watermarks(sig, (st.file_no, log_pos - size))
            if kind in EventKind.ROWS:
                tmap = st.tables.get(int.from_bytes(data[body:body + 6], "little"))
                if tmap is None:
                    raise DataError(f"A rows event at {st.file}:{log_pos - size} has no table map: the range does "
                                    f"not start at a transaction boundary")
                t = st.captured(self.layout)(tmap)
                if t is None and sig is not None and sig.is_signal(tmap):
                    if rows:
                        yield from self._records(buf, RowEvents.of_events(rows))
                        rows = []
                    yield from self._signal(sig, data, tmap, kind, body, body_end, st.file, log_pos - size, ts)
                elif t is not None:
                    p = body + 8
                    if kind >= EventKind.WRITE_V2:
                        p += struct.unpack_from("<H", data, p)[0]
                    ncols, p = lenenc(data, p)
                    width = (ncols + 7) // 8
                    images = 2 if EventKind.ROWS[kind] == "u" else 1
                    every = (1 << ncols) - 1
                    for k in range(images):
                        if int.from_bytes(data[p + k * width:p + (k + 1) * width], "little") & every != every:
                            raise DataError(f"Rows of {t.id} at {st.file}:{log_pos - size} do not carry every column: "
                                            f"set binlog_row_image=FULL on the server")
                    p += width * images
                    segment = Segment(st.file, st.file_no, st.txn.gtid, st.txn.thread, st.txn.query)
                    rows.append((tmap, t, EventKind.ROWS[kind], p, body_end, log_pos - size, ts, server_id, segment))
            else:
                action, record = self._event(st, data, off, size)
                if record is not None:
                    if rows:
                        yield from self._records(buf, RowEvents.of_events(rows))
                        rows = []
                    yield record
                if action == "stop":
                    return (yield from self._last(buf, rows))
                if action == "rotated":
                    continue
            if log_pos >= end_pos and st.file_no == st.end_no:
                return (yield from self._last(buf, rows))
        yield from self._last(buf, rows)
        return False

    def _last(self, buf: Any, rows: list[tuple]) -> Generator[Any, None, bool]:
        if rows:
            yield from self._records(buf, RowEvents.of_events(rows))
        return True

    # ---------------------------------------------------------------------------------- signals
    def _signal(self, sig: _Signals, data: Any, tmap: TableMap, kind: int, body: int, body_end: int, file: str,
                pos: int, ts: int) -> Iterator[Any]:
        """Inserts into the signal table: collected (driver), or folded into the incremental snapshot."""
        import numpy as np

        if EventKind.ROWS[kind] != "c":
            return  # Debezium reads inserted signals only
        p = body + 8
        if kind >= EventKind.WRITE_V2:
            p += struct.unpack_from("<H", data, p)[0]
        ncols, p = lenenc(data, p)
        p += (ncols + 7) // 8
        buf = np.frombuffer(data, dtype=np.uint8)
        images = split_images(buf, tmap, np.array([p]), np.array([body_end]), np.array([1]))
        text = MySqlType("string", family="string")
        values = {name: column_values(buf, tmap, j, text, images.columns[j]).to_pylist()
                  for j, name in enumerate(tmap.names) if name in ("id", "type", "data")}
        where = {"file": file, "pos": pos, "ts_usec": ts * 1_000_000}
        for i in range(len(images.event)):
            row = {name: values[name][i] for name in values}
            if sig.collected is not None:
                sig.collected.append({**row, **where})
            else:
                yield from self._fold(sig, {**row, **where})

    def _watermarks(self, sig: _Signals, upto: tuple[int, int] | None) -> Iterator[Any]:
        """The chunk's watermarks at or before ``upto`` (all left at the range's end)."""
        while sig.pending and (upto is None or sig.pending[0][0] <= upto):
            _, row = sig.pending.pop(0)
            yield from self._fold(sig, row)

    def _fold(self, sig: _Signals, row: dict[str, Any]) -> Iterator[Any]:
        closed = sig.windows.signal(row, f"{row['file']}:{row['pos']}")
        if closed is None:
            return
        t, names, rows = closed
        if not rows:
            return
        import numpy as np
        import pyarrow as pa

        assert self.builder is not None
        n = len(rows)
        columns = list(zip(*rows))
        natural = {col.name: from_text(col.spec, list(columns[names.index(col.name)]))
                   for col in t.columns if col.name in names}
        file_no, pos = file_number(row["file"]), int(row["pos"])
        offsets = (file_no << 44) | (pos << 12) | np.minimum(np.arange(n), 4095)
        ones = np.ones(n, dtype=bool)
        source = {"ts_us": pa.array(np.full(n, int(row["ts_usec"]), dtype=np.int64)), "snapshot": "incremental",
                  "file": row["file"], "pos": pos, "row": 0}
        for lo in range(0, n, max(self.settings.batch_size, 1)):
            part = slice(lo, lo + max(self.settings.batch_size, 1))
            m = len(range(n)[part])
            batch, _ = self.builder.batch(t, np.array(["r"] * m), None, {k: v[part] for k, v in natural.items()},
                                          ~ones[part], ones[part], {**source, "ts_us": source["ts_us"][part]},
                                          offsets[part], np.arange(m))
            yield batch

    def _touch(self, t: Table, natural: dict[str, Any]) -> None:
        """Keys of changes made inside an open incremental snapshot window of ``t`` (every image)."""
        sig = self._signals
        if sig is None or not sig.windows.watches(t.id) or not t.key:
            return
        keys = [to_text(natural[c.name]) for c in t.key if c.name in natural]
        if len(keys) == len(t.key):
            sig.windows.touch(t.id, zip(*keys))

    def _query(self, data: Any, body: int, body_end: int, txn: _Txn, file: str, pos: int) -> tuple[str, str] | None:
        """A query event: the thread of a transaction's BEGIN, or a statement (DDL in ROW format) as its
        default database and text."""
        thread, _, db_len, _, status_len = struct.unpack_from("<IIBHH", data, body)
        text_at = body + 13 + status_len + db_len + 1
        head = bytes(data[text_at:min(text_at + 16, body_end)]).upper()
        if head.startswith(b"BEGIN"):
            txn.thread = thread
            return None
        if head.startswith((b"COMMIT", b"XA ", b"SAVEPOINT", b"ROLLBACK")):
            return None
        db = bytes(data[body + 13 + status_len:body + 13 + status_len + db_len]).decode("utf-8", "replace")
        statement = bytes(data[text_at:body_end]).decode("utf-8", "replace")
        log.info("%s: statement at %s:%d (database %s): %s", self.settings.name, file, pos, db or "-",
                 statement[:300])
        return db, statement

    # ---------------------------------------------------------------------------------- records
    def _records(self, buf: Any, events: RowEvents) -> Iterator[Any]:
        """The records of rows events (``buf``: the chunk as uint8), in binlog order."""
        assert self.builder is not None  # reading signals only, nothing is captured
        parts, order = [], []
        for k, (tmap, t) in enumerate(events.maps):
            built = self._group(buf, tmap, t, events, np.flatnonzero(events.which == k))
            if built is not None:
                parts.append(built[0])
                order.append(built[1])
        yield from self.builder.in_order(parts, order)

    def _group(self, buf: Any, tmap: TableMap, t: Table, events: RowEvents, members: Any) -> tuple[Any, Any] | None:
        """The records of one table map's events (``members``: their indices in ``events``)."""
        import pyarrow as pa

        kinds = events.op[members]
        images = split_images(buf, tmap, events.start[members], events.end[members], np.where(kinds == "u", 2, 1))
        self._check_columns(tmap, t)
        natural = {}
        for col in t.columns:
            if col.name in tmap.names:
                j = tmap.names.index(col.name)
                natural[col.name] = column_values(buf, tmap, j, col.spec, images.columns[j])
        self._touch(t, natural)
        first = np.flatnonzero(images.image == 0)
        op = kinds[images.event[first]]
        changed = self._key_changed(t, natural, first, op)
        rep = np.where(changed, 2, 1)
        rec = np.repeat(np.arange(len(first)), rep)
        second = np.zeros(len(rec), dtype=bool)
        second[1:] = rec[1:] == rec[:-1]
        ops = op[rec].astype(object)
        ops[changed[rec] & ~second] = "d"
        ops[changed[rec] & second] = "c"
        keep = ~np.isin(ops, list(self.settings.skipped))
        rec, ops = rec[keep], ops[keep].astype(str)
        if not len(rec):
            return None
        img = first[rec]
        b_valid = np.isin(ops, ("u", "d"))
        a_valid = np.isin(ops, ("c", "u"))
        after_img = np.where(op[rec] == "u", img + 1, img)  # the after image of an update (or of a key change)
        before = {k: v.take(pa.array(img)) for k, v in natural.items()} if b_valid.any() else {}
        after = {k: v.take(pa.array(after_img)) for k, v in natural.items()}
        ev = members[images.event[img]]  # each record's rows event
        seg = pa.array(events.segment[ev])
        segs = events.segments
        pos = events.pos[ev]
        row_no = images.row[img]
        file_no = np.array([g.file_no for g in segs], dtype=np.int64)[events.segment[ev]]
        offsets = (file_no << 44) | (pos << 12) | np.minimum(row_no, 4095)
        source = {"ts_us": pa.array(events.ts[ev] * 1_000_000), "snapshot": "false",
                  "file": pa.array([g.file for g in segs], pa.string()).take(seg), "pos": pa.array(pos),
                  "row": pa.array(row_no.astype(np.int32)), "server_id": pa.array(events.server_id[ev]),
                  "gtid": pa.array([g.gtid for g in segs], pa.string()).take(seg),
                  "thread": pa.array([g.thread for g in segs], pa.int64()).take(seg),
                  "query": pa.array([g.query for g in segs], pa.string()).take(seg)}
        order = (ev << 24) + (row_no << 1) + (ops == "c") * (rep[rec] == 2)
        assert self.builder is not None
        return self.builder.batch(t, ops, before, after, b_valid, a_valid, source, offsets, order, binlog=True)

    def _check_columns(self, tmap: TableMap, t: Table) -> None:
        """A column of the table map that the query's schema lacks: added after the query started (it is in the
        table now: the batch fails until a restart takes the new schema), or dropped since (an old row of a
        replayed range: its values are not emitted, the column is no longer part of the table)."""
        known = {c.name for c in t.columns}
        extra = [n for n in tmap.names if n not in known and self.settings.column_wanted(t.schema, t.table, n)]
        if not extra:
            return
        if t.id not in self._current:
            rows = self.session.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                                      "AND TABLE_NAME = %s", (t.schema, t.table))
            self._current[t.id] = {r[0].decode() if isinstance(r[0], bytes) else str(r[0]) for r in rows}
        dropped = [n for n in extra if n not in self._current[t.id]]
        if dropped:
            log.info("%s: rows of %s written before column(s) %s were dropped: those values are not emitted",
                     self.settings.name, t.id, ", ".join(dropped))
        extra = [n for n in extra if n in self._current[t.id]]
        if extra:
            raise DataError(f"Table {t.id} has columns {', '.join(extra)} that this query's schema does not have "
                            f"(the table changed after the query started): restart the query to pick up the new "
                            f"schema")

    @staticmethod
    def _key_changed(t: Table, natural: dict[str, Any], first: Any, op: Any) -> Any:
        """Update rows whose primary key changed (Debezium: delete of the old key, then create)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        changed = np.zeros(len(first), dtype=bool)
        updates = op == "u"
        if not t.key or not updates.any():
            return changed
        for col in t.key:
            arr = natural.get(col.name)
            if arr is None:
                continue
            old = arr.take(pa.array(first))
            new = arr.take(pa.array(np.minimum(first + 1, len(arr) - 1)))
            diff = pc.fill_null(pc.not_equal(old, new), True).to_numpy(zero_copy_only=False)
            changed |= diff & updates
        return changed

