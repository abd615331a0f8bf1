"""The events of a chunk of the binlog stream read in bulk: headers, table maps and rows events as numpy columns.

A binlog of single-row transactions holds four events per change (GTID, table map, rows event, XID), so following
it event by event in Python costs more than decoding the rows (:mod:`.rows`). Here every event's header is read at
once (kind, position, time, server id), the table maps of a chunk are parsed once per distinct body, and the rows
events become :class:`RowEvents`: where each one's row images start and end, its table map and its ``source``
fields. Only the few other events (GTID, query, XID, rotate) are left for the caller to follow one by one.

>>> heads = Headers.of(chunk, checksum=4)                                        # doctest: +SKIP
>>> events = row_events(buf, heads, indices, maps, captured, segments, file_no)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...errors import DataError
from ..cdc.layout import Table
from .binlog import Chunk, EventKind, TableMap

__all__ = ["WIDE", "Headers", "RowEvents", "Segment", "chunk_maps", "row_events"]

#: tables of this many columns or more count them in more than one byte: their events are followed one by one
WIDE = 251

#: rows event kind -> op code ('c', 'u', 'd'); other kinds: ''
_OP = np.array([EventKind.ROWS.get(k, "") for k in range(256)], dtype="<U1")
_IS_ROWS = _OP != ""


def _uint(buf: Any, at: Any, width: int) -> Any:
    """Little-endian unsigned integers of ``width`` bytes at ``at``."""
    out = np.zeros(len(at), dtype=np.int64)
    for k in range(width):
        out |= buf[at + k].astype(np.int64) << (8 * k)
    return out


@dataclass
class Headers:
    """The common headers of a chunk's events: ``starts``/``sizes`` (checksum included) and each event's
    ``kind``, ``log_pos`` (where it ends), ``ts`` (seconds) and ``server_id``."""

    buf: Any
    starts: Any
    sizes: Any
    kind: Any
    log_pos: Any
    ts: Any
    server_id: Any
    checksum: int

    @classmethod
    def of(cls, chunk: Chunk, checksum: int) -> Headers:
        buf = np.frombuffer(chunk.data, dtype=np.uint8)
        starts = np.asarray(chunk.starts, dtype=np.int64)
        return cls(buf, starts, np.asarray(chunk.sizes, dtype=np.int64), buf[starts + 4], _uint(buf, starts + 13, 4),
                   _uint(buf, starts, 4), _uint(buf, starts + 5, 4), checksum)

    @property
    def is_rows(self) -> Any:
        return _IS_ROWS[self.kind]


def chunk_maps(heads: Headers, parse: Callable[[bytes], TableMap]) -> dict[int, TableMap] | None:
    """The chunk's table maps by table id, each distinct body parsed once (``parse``: cached); None when one table
    id stands for two different tables in the chunk (a server restart reuses ids) or a table has :data:`WIDE`
    columns: follow such a chunk event by event."""
    at = np.flatnonzero(heads.kind == EventKind.TABLE_MAP)
    if not at.size:
        return {}
    body = heads.starts[at] + 19
    length = heads.sizes[at] - 19 - heads.checksum
    ids = _uint(heads.buf, body, 6)
    maps: dict[int, TableMap] = {}
    for table_id in np.unique(ids).tolist():
        same = np.flatnonzero(ids == table_id)
        first = int(same[0])
        size = int(length[first])
        if (length[same] != size).any():
            return None
        if same.size > 1:  # every body equal to the first one's
            rows = heads.buf[body[same][:, None] + np.arange(size)]
            if (rows != rows[0]).any():
                return None
        lo = int(body[first])
        maps[table_id] = parse(heads.buf[lo:lo + size].tobytes())
    return maps if all(len(m.types) < WIDE for m in maps.values()) else None


class Segment(NamedTuple):
    """The ``source`` fields shared by a run of rows events (one transaction, one binlog file)."""

    file: str
    file_no: int
    gtid: str | None
    thread: int | None
    query: str | None


@dataclass
class RowEvents:
    """Rows events of captured tables, in binlog order, as columns: ``maps[which[i]]`` is event ``i``'s table map
    and captured table, ``op`` its kind ('c'/'u'/'d'), ``[start, end)`` its row images, ``pos`` its position,
    ``segments[segment[i]]`` its transaction's fields."""

    maps: list[tuple[TableMap, Table]]
    which: Any
    op: Any
    start: Any
    end: Any
    pos: Any
    ts: Any
    server_id: Any
    segment: Any
    segments: Sequence[Segment]

    def __len__(self) -> int:
        return len(self.op)

    @classmethod
    def of_events(cls, events: list[tuple[TableMap, Table, str, int, int, int, int, int, Segment]]) -> RowEvents:
        """From events followed one by one: (table map, table, op, start, end, pos, ts, server id, segment)."""
        maps: dict[int, int] = {}
        pairs: list[tuple[TableMap, Table]] = []
        segments: dict[Segment, int] = {}
        which, segment = [], []
        for e in events:
            which.append(maps.setdefault(id(e[0]), len(maps)))
            if which[-1] == len(pairs):
                pairs.append((e[0], e[1]))
            segment.append(segments.setdefault(e[8], len(segments)))
        cols = list(zip(*(e[2:8] for e in events))) if events else [()] * 6
        start, end, pos, ts, server_id = (np.array(c, dtype=np.int64) for c in cols[1:])
        return cls(pairs, np.array(which, dtype=np.int64), np.array(cols[0], dtype="<U1"), start, end, pos, ts,
                   server_id, np.array(segment, dtype=np.int64), list(segments))


def row_events(heads: Headers, at: Any, tables: dict[int, TableMap], table_of: Callable[[TableMap], Table | None],
               segment: Any, segments: Sequence[Segment]) -> RowEvents:
    """The rows events at indices ``at`` of the chunk (``segment[i]``: index of event ``at[i]``'s segment), those of
    tables that ``table_of`` does not capture left out; every row image must carry every column."""
    buf = heads.buf
    body = heads.starts[at] + 19
    kind = heads.kind[at]
    ids = _uint(buf, body, 6)
    distinct = np.unique(ids)
    found = [tables.get(int(i)) for i in distinct.tolist()]
    for table_id, tmap in zip(distinct.tolist(), found):
        if tmap is None:
            first = int(at[np.flatnonzero(ids == table_id)[0]])
            pos = int(heads.log_pos[first] - heads.sizes[first])
            raise DataError(f"A rows event at {segments[int(segment[np.flatnonzero(ids == table_id)[0]])].file}:{pos} "
                            f"has no table map: the range does not start at a transaction boundary")
    pairs: list[tuple[TableMap, Table]] = []
    which = np.full(len(at), -1, dtype=np.int64)
    for table_id, tmap in zip(distinct.tolist(), found):
        assert tmap is not None
        t = table_of(tmap)
        if t is not None:
            which[ids == table_id] = len(pairs)
            pairs.append((tmap, t))
    keep = which >= 0
    at, body, kind, which, segment = at[keep], body[keep], kind[keep], which[keep], np.asarray(segment)[keep]
    p = body + 8 + np.where(kind >= EventKind.WRITE_V2, _uint(buf, body + 8, 2), 0)
    ncols = buf[p].astype(np.int64)
    op = _OP[kind]
    images = np.where(op == "u", 2, 1)
    for k, (tmap, t) in enumerate(pairs):
        mine = np.flatnonzero(which == k)
        n = len(tmap.types)
        width = (n + 7) // 8
        if (ncols[mine] != n).any():  # counted in one byte: tables of 251 columns or more are read one by one
            raise DataError(f"Rows events of {t.id} do not match their table map ({n} columns)")
        full = np.frombuffer(((1 << n) - 1).to_bytes(width, "little"), dtype=np.uint8)
        for image in range(2):
            has = mine[images[mine] > image]
            bits = buf[(p[has] + 1 + image * width)[:, None] + np.arange(width)] if has.size else None
            if bits is not None and ((bits & full) != full).any():
                pos = int(heads.log_pos[at[has[0]]] - heads.sizes[at[has[0]]])
                raise DataError(f"Rows of {t.id} at {segments[int(segment[has[0]])].file}:{pos} do not carry every "
                                f"column: set binlog_row_image=FULL on the server")
        p[mine] += 1 + width * images[mine]
    return RowEvents(pairs, which, op, p, heads.starts[at] + heads.sizes[at] - heads.checksum,
                     heads.log_pos[at] - heads.sizes[at], heads.ts[at], heads.server_id[at], segment, segments)
