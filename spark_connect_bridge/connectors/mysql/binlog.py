"""Reading a range of the binlog over the replication protocol: the dump request, the event stream cut into
chunks, and the events a change data capture needs, parsed once per event header.

python-mysql-replication (``mysql-replication``) speaks the same protocol but builds a Python object per event
and decodes every value in Python: 1.8k single-row events/s here (``bench/bench_mysql_cdc.py`` measures it).
So this module asks for the stream the way that library does (``@master_binlog_checksum``,
``@mariadb_slave_capability=4``, ``@master_heartbeat_period``, ``COM_BINLOG_DUMP`` with ``BINLOG_DUMP_NON_BLOCK``
on a pymysql connection) but reads the socket in large blocks and hands whole chunks of events to
:mod:`.scan` and :mod:`.rows`, which read the events' headers and decode the row images of many events at once
with numpy. The library remains the decoder of MySQL's binary JSON (:func:`pymysqlreplication.packet` helpers are
not needed elsewhere).

**Table maps are the schema history.** With ``binlog_row_metadata=FULL`` every table map carries its columns'
names (and types), so each row image is decoded with the columns of the table map written just before it: a
replayed range decodes old rows with the schema they were written with, whatever DDL came after.

**A range** is every event from ``start`` (a transaction boundary) up to the event ending at ``end`` (another
one); with ``BINLOG_DUMP_NON_BLOCK`` the server ends the stream at the binlog's end. A stalled stream (nothing,
not even a heartbeat, for ``binlog.read.timeout.ms``) raises :class:`StreamStalled`; the caller re-reads the
range and skips what it delivered.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import ConnectError, DataError
from .session import Session, pymysql_module

__all__ = ["Chunk", "TableMap", "StreamStalled", "BinlogGone", "read_chunks", "parse_table_map", "EventKind",
           "file_number", "lenenc"]

log = logging.getLogger(__name__)

COM_BINLOG_DUMP = 0x12
_DUMP_NON_BLOCK = 0x01
_DUMP_SEND_ANNOTATE_ROWS = 0x02


class EventKind:
    QUERY = 2
    ROTATE = 4
    FORMAT_DESCRIPTION = 15
    XID = 16
    TABLE_MAP = 19
    WRITE_V1, UPDATE_V1, DELETE_V1 = 23, 24, 25
    HEARTBEAT = 27
    MYSQL_GTID, MYSQL_ANONYMOUS_GTID = 33, 34
    WRITE_V2, UPDATE_V2, DELETE_V2 = 30, 31, 32
    ANNOTATE_ROWS = 160
    MARIADB_GTID = 162
    MARIADB_COMPRESSED = frozenset(range(166, 172))
    ROWS: ClassVar[dict[int, str]] = {23: "c", 30: "c", 24: "u", 31: "u", 25: "d", 32: "d"}


class StreamStalled(ConnectError):
    """The binlog stream sent nothing for binlog.read.timeout.ms."""


class BinlogGone(ConnectError):
    """The server no longer has the binlog file a position names (purged)."""


def file_number(name: str) -> int:
    """``mysql-bin.000042`` -> 42 (the sequence number every binlog file name ends with)."""
    suffix = name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 0


@dataclass
class TableMap:
    """A table map event: the table and its columns' binlog types, metadata and names."""

    table_id: int
    database: str
    table: str
    types: bytes
    meta: tuple[int, ...]  # per column: the type's metadata word (0 when it has none)
    names: tuple[str, ...]
    body: bytes = field(repr=False, default=b"")


def lenenc(buf: bytes | memoryview, p: int) -> tuple[int, int]:
    first = buf[p]
    if first < 251:
        return first, p + 1
    if first == 252:
        return buf[p + 1] | buf[p + 2] << 8, p + 3
    if first == 253:
        return buf[p + 1] | buf[p + 2] << 8 | buf[p + 3] << 16, p + 4
    return int.from_bytes(bytes(buf[p + 1:p + 9]), "little"), p + 9


#: metadata bytes per column type in a table map (types not listed have none)
_META_BYTES = {4: 1, 5: 1, 15: 2, 253: 2, 16: 2, 246: 2, 252: 1, 255: 1, 245: 1, 254: 2, 17: 1, 18: 1, 19: 1,
               247: 2, 248: 2}


def parse_table_map(body: bytes) -> TableMap:
    """A table map event's body (after the common header, without the checksum)."""
    table_id = int.from_bytes(body[0:6], "little")
    p = 8
    db_len = body[p]
    database = body[p + 1:p + 1 + db_len].decode()
    p += db_len + 2
    t_len = body[p]
    table = body[p + 1:p + 1 + t_len].decode()
    p += t_len + 2
    ncols, p = lenenc(body, p)
    types = bytes(body[p:p + ncols])
    p += ncols
    meta_len, p = lenenc(body, p)
    meta_block = body[p:p + meta_len]
    p += meta_len + (ncols + 7) // 8  # the nullability bitmap is not needed: row images have their own
    meta = []
    q = 0
    for t in types:
        n = _META_BYTES.get(t, 0)
        if n == 1:
            meta.append(meta_block[q])
        elif n == 2:
            # STRING keeps (real type, length) big-endian; the others are little-endian words
            meta.append(meta_block[q] << 8 | meta_block[q + 1] if t == 254 else meta_block[q] | meta_block[q + 1] << 8)
        else:
            meta.append(0)
        q += n
    names: list[str] = []
    while p < len(body):  # optional metadata: type, length, value
        kind = body[p]
        length, p = lenenc(body, p + 1)
        if kind == 4:  # COLUMN_NAME
            q, end = p, p + length
            while q < end:
                n, q = lenenc(body, q)
                names.append(bytes(body[q:q + n]).decode("utf-8", "replace"))
                q += n
        p += length
    if len(names) != ncols:
        raise DataError(f"The table map of {database}.{table} carries no column names: set "
                        f"binlog_row_metadata=FULL on the server (MariaDB 10.5+, MySQL 8.0.14+)")
    return TableMap(table_id, database, table, types, tuple(meta), tuple(names), bytes(body))


@dataclass
class Chunk:
    """Events of the stream in one buffer: ``starts[i]`` is where event ``i``'s common header begins in
    ``data``, ``sizes[i]`` its size (checksum included)."""

    data: bytes
    starts: list[int]
    sizes: list[int]


def _open(session: Session, file: str, pos: int, *, annotate: bool) -> Any:
    s = session.settings
    conn = session.connect(read_timeout=s.read_timeout_s, write_timeout=s.read_timeout_s)
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_checksum'")
        row = cur.fetchone()
        if row is not None and str(row[1]).upper() != "NONE":
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
        # The library's reason holds here too: MariaDB otherwise replaces GTID events by dummies (capability < 4).
        cur.execute("SET @mariadb_slave_capability = 4")
        if s.heartbeat_ms > 0:
            period = min(s.heartbeat_ms / 1000.0, s.read_timeout_s / 2.0)
            cur.execute("SET @master_heartbeat_period = %s", (int(period * 1_000_000_000),))
    flags = _DUMP_NON_BLOCK | (_DUMP_SEND_ANNOTATE_ROWS if annotate else 0)
    conn._execute_command(COM_BINLOG_DUMP, struct.pack("<IHI", pos, flags, s.server_id) + file.encode())
    return conn


def checksum_size(session: Session) -> int:
    value = session.variable("binlog_checksum")
    return 0 if value is None or value.upper() == "NONE" else 4


def read_chunks(session: Session, file: str, pos: int, *, annotate: bool = False,
                block: int = 1 << 20) -> Iterator[Chunk]:
    """The events from ``file``:``pos`` to the binlog's end, as chunks of whole events (the server's
    rotate and format description events at the start included)."""

    pymysql = pymysql_module()
    conn = _open(session, file, pos, annotate=annotate)
    sock = conn._rfile
    buf = b""
    big = bytearray()  # an event split over several 16 MiB packets
    try:
        while True:
            try:
                more = sock.read1(block)
            except TimeoutError as e:
                raise StreamStalled(f"{session.settings.name}: the binlog stream from {file}:{pos} sent nothing "
                                    f"for {session.settings.read_timeout_s:.0f} s") from e
            if not more:
                raise pymysql.err.OperationalError(2013, "Lost connection to server during the binlog dump")
            data = buf + more if buf else more
            starts: list[int] = []
            sizes: list[int] = []
            off, n = 0, len(data)
            while off + 4 <= n:
                length = data[off] | data[off + 1] << 8 | data[off + 2] << 16
                if off + 4 + length > n:
                    break
                body = off + 4
                if length == 0xFFFFFF and not big and starts:  # keep the order: what came before goes first
                    yield Chunk(data, starts, sizes)
                    starts, sizes = [], []
                if length == 0xFFFFFF or big:
                    big += data[body + (0 if big else 1):body + length]
                    if length < 0xFFFFFF:
                        yield Chunk(bytes(big), [0], [len(big)])
                        big = bytearray()
                    off = body + length
                    continue
                tag = data[body]
                if tag == 0:
                    starts.append(body + 1)
                    sizes.append(length - 1)
                elif tag == 0xFE and length < 9:  # EOF: the end of the binlog (non-blocking dump)
                    if starts:
                        yield Chunk(data, starts, sizes)
                    return
                elif tag == 0xFF:
                    code = data[body + 1] | data[body + 2] << 8
                    message = data[body + 9:body + length].decode("utf-8", "replace")
                    if code == 1236:
                        raise BinlogGone(f"{session.settings.name}: the server cannot send the binlog from "
                                         f"{file}:{pos}: {message}")
                    raise pymysql.err.OperationalError(code, message)
                off = body + length
            buf = data[off:]
            if starts:
                yield Chunk(data, starts, sizes)
    finally:
        with contextlib.suppress(Exception):  # the connection is being dropped anyway
            conn._force_close()
