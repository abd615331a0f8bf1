"""PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1), decoded one at a time.

:class:`Decoder` turns the ``data`` column of ``pg_logical_slot_peek_binary_changes(..., 'proto_version', '1',
...)`` into change tuples. It keeps only per-call state (relations arrive again in every call, see SYSTEMS.md
§1), selects whole transactions by the LSN of their commit record, and leaves column values as the raw text
bytes PostgreSQL sent: per-message work is a few ``struct`` unpacks and slices (pure-Python decoding costs
~6.7 µs per message; everything else is done per column, in bulk, by :mod:`.types`). The vectorised twin that
shares this decoder's state is :mod:`.pgoutput_bulk`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import DataError

__all__ = ["Relation", "Change", "Decoder", "decode_tuple", "relation_message", "UNCHANGED", "PG_EPOCH_US"]

#: Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
PG_EPOCH_US = 946_684_800_000_000


class _Unchanged:
    """Kind ``'u'``: an unchanged TOASTed value that PostgreSQL did not send."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()

_U16 = struct.Struct(">H").unpack_from
_U32 = struct.Struct(">I").unpack_from
_I32 = struct.Struct(">i").unpack_from
_BEGIN = struct.Struct(">QqI").unpack_from  # final lsn, commit ts, xid
_INT = int.from_bytes


@dataclass
class Relation:
    """An ``R`` message: a table's identity and its columns as the decoding session sees them."""

    relid: int
    schema: str
    table: str
    replident: str
    columns: list[tuple[int, str, int, int]]  # (flags, name, type oid, typmod)

    @property
    def names(self) -> list[str]:
        return [c[1] for c in self.columns]


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end].decode(), end + 1


def _relation(data: bytes) -> Relation:
    relid = _U32(data, 1)[0]
    schema, pos = _cstring(data, 5)
    table, pos = _cstring(data, pos)
    replident = chr(data[pos])
    ncols = _U16(data, pos + 1)[0]
    pos += 3
    cols = []
    for _ in range(ncols):
        flags = data[pos]
        name, pos = _cstring(data, pos + 1)
        typoid, typmod = _U32(data, pos)[0], _I32(data, pos + 4)[0]
        pos += 8
        cols.append((flags, name, typoid, typmod))
    return Relation(relid, schema, table, replident, cols)


def _tuple(data: bytes, pos: int) -> tuple[tuple, int]:
    """TupleData at ``pos``: ('t' text -> bytes, 'n' -> None, 'u' -> UNCHANGED, 'b' binary -> bytes)."""
    n = (data[pos] << 8) | data[pos + 1]
    pos += 2
    vals: list[Any] = []
    append = vals.append
    for _ in range(n):
        kind = data[pos]
        if kind == 116 or kind == 98:  # 't' / 'b'
            ln = _INT(data[pos + 1:pos + 5], "big")
            pos += 5
            append(data[pos:pos + ln])
            pos += ln
        elif kind == 110:  # 'n'
            append(None)
            pos += 1
        elif kind == 117:  # 'u'
            append(UNCHANGED)
            pos += 1
        else:
            raise DataError(f"pgoutput: unknown tuple column kind {kind!r}")
    return tuple(vals), pos


def decode_tuple(data: bytes, pos: int) -> tuple[tuple, int]:
    """Public name of the TupleData parser (the CDC driver reads signal-table inserts with it)."""
    return _tuple(data, pos)


def relation_message(data: bytes) -> Relation:
    """Public name of the Relation message parser (the bulk decoder reads the few ``R`` messages with it)."""
    return _relation(data)


@dataclass
class Change:
    """One decoded change. ``op`` is ``c``/``u``/``d``/``t``; tuples hold raw text bytes per column of
    ``relation`` (``old`` is the ``K``/``O`` tuple when PostgreSQL sent one)."""

    __slots__ = ("lsn", "new", "old", "old_kind", "op", "relation", "ts_us", "xid")
    relation: Relation
    op: str
    lsn: int
    xid: int
    ts_us: int
    old: tuple | None
    new: tuple | None
    old_kind: str


@dataclass
class Decoder:
    """Decode peeked rows ``(lsn, data)`` into changes of the transactions whose commit record starts in
    ``[lo, hi)``, i.e. whose commit end LSN is in ``(lo, hi]`` when ``lo``/``hi`` are commit end LSNs.

    ``relations`` maps relid to the latest :class:`Relation` seen in this call (every call re-sends them).
    The open transaction's state (``keep``, ``xid``, ``ts``) and ``done`` (a Begin at or past ``hi`` was
    seen) carry over between calls of :meth:`changes`, so the rows may come in chunks, and chunks may
    alternate with :func:`~.pgoutput_bulk.decode_chunk`, which shares this state.
    """

    lo: int
    hi: int | None
    relations: dict[int, Relation] = field(default_factory=dict)
    commits: int = 0
    last_commit_end: int | None = None
    keep: bool = False
    xid: int = 0
    ts: int = 0
    done: bool = False

    def changes(self, rows: Iterable[tuple[int, bytes]]) -> Iterator[Change]:
        if self.done:
            return
        relations = self.relations
        lo, hi = self.lo, self.hi
        keep, xid, ts = self.keep, self.xid, self.ts
        for lsn, data in rows:
            tag = data[0]
            if tag == 66:  # 'B'
                final_lsn, ts, xid = _BEGIN(data, 1)
                if hi is not None and final_lsn >= hi:
                    self.done = True
                    return
                keep = final_lsn >= lo
                ts += PG_EPOCH_US
                self.keep, self.xid, self.ts = keep, xid, ts
            elif tag == 73:  # 'I'
                if keep:
                    new, _ = _tuple(data, 6)
                    yield Change(relations[_U32(data, 1)[0]], "c", lsn, xid, ts, None, new, "")
            elif tag == 85:  # 'U'
                if keep:
                    rel = relations[_U32(data, 1)[0]]
                    kind = data[5]
                    old = None
                    okind = ""
                    pos = 5
                    if kind == 75 or kind == 79:  # 'K' / 'O'
                        old, pos = _tuple(data, 6)
                        okind = chr(kind)
                    new, _ = _tuple(data, pos + 1)
                    yield Change(rel, "u", lsn, xid, ts, old, new, okind)
            elif tag == 68:  # 'D'
                if keep:
                    old, _ = _tuple(data, 6)
                    yield Change(relations[_U32(data, 1)[0]], "d", lsn, xid, ts, old, None, chr(data[5]))
            elif tag == 67:  # 'C'
                if keep:
                    self.commits += 1
                    self.last_commit_end = _INT(data[10:18], "big")
                keep = self.keep = False
            elif tag == 82:  # 'R'
                rel = _relation(data)
                relations[rel.relid] = rel
            elif tag == 84 and keep:  # 'T'
                n = _U32(data, 1)[0]
                for i in range(n):
                    relid = _U32(data, 6 + 4 * i)[0]
                    yield Change(relations[relid], "t", lsn, xid, ts, None, None, "")
            # 'Y' (type), 'O' (origin), 'M' (message) carry nothing a change event needs.
