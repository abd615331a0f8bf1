"""The slot's changes over one kept streaming replication connection on the driver (``START_REPLICATION``).

Reading the slot with ``pg_logical_slot_peek_binary_changes`` decodes the WAL again from the slot's
``restart_lsn`` on every call (every batch end chosen, every batch read): at a steady 5,000 transactions/s
that is seconds of WAL per look. Debezium keeps one replication connection open and reads a continuous
stream; so does a streaming query here. :class:`ReplicationStream` holds the connection on the driver (in
Spark's long-lived driver-side runner), receives pgoutput messages on a thread that also answers the
server's keepalives, and keeps them, grouped by transaction, until Spark committed the batch holding them:

* :meth:`ReplicationStream.commits_after` gives the transactions available for a batch end (the driver
  chooses an end at a commit, exactly as the counted path of :mod:`.batch_end`);
* :meth:`ReplicationStream.take` gives a batch's messages as one Arrow record batch (``lsn`` int64,
  ``data`` binary: the shape of the peek), which travels in the read task to the executor, where the same
  decoders as for the peek turn it into events (:meth:`~.stream.SlotReader.decode_messages`);
* :meth:`ReplicationStream.confirm` reports a committed batch's end as the flush position: the slot moves
  only there, after Spark's commit (the server never moves a slot past the flush position a client reports).

**Protocol.** The connection is a psycopg 3 connection with ``replication=database``; psycopg 3 has no
replication API, so the COPY BOTH stream is driven through its libpq layer (``pgconn``): ``XLogData``
(``w``) and primary keepalive (``k``) messages in, standby status updates (``r``) out, as PostgreSQL's
streaming replication protocol defines them. psycopg2's ``LogicalReplicationConnection`` was not taken: it
would add a second client library, and since 2.8.3 it reports the server's WAL end as the flush position on
its own once the client confirmed everything it received, moving the slot past the query's checkpoint.

**Relations.** A walsender sends a table's ``R`` message once per connection (before its first change, and
again after the table changed), not once per batch like a peek. The stream keeps the latest ``R`` of every
table as of the oldest kept transaction, and :meth:`take` puts the ``R`` messages a batch needs first.

**Failures.** A broken connection (the server restarted, an operator ended the walsender) is noticed by the
thread; the next call reconnects from the slot's confirmed position (the last committed batch) and the
server sends again everything after it; transactions before a batch's start are skipped by the decoders.

>>> stream = ReplicationStream(session, settings)                          # doctest: +SKIP
>>> stream.open(start)                                                     # doctest: +SKIP
>>> batch = stream.take(lo, hi, wait_s=30)                                 # doctest: +SKIP
>>> stream.confirm(hi)                                                     # doctest: +SKIP
"""

from __future__ import annotations

import logging
import select
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConnectError
from .config import PostgresSettings
from .pgoutput import PG_EPOCH_US
from .session import PgSession, ReadInterrupted, is_transient, lsn_text, psycopg_module

__all__ = ["KEEP_BYTES_MAX", "MESSAGES_PER_CHUNK", "STATUS_INTERVAL_S", "ReplicationStream", "Transaction"]

log = logging.getLogger(__name__)

#: Seconds between two standby status updates when nothing asks for one (PostgreSQL's wal_sender_timeout is
#: 60 s by default; pg_receivewal's default status interval is 10 s).
STATUS_INTERVAL_S = 10.0
#: Received messages kept at most (bytes); beyond it the thread stops reading until a commit frees some (the
#: server then waits: TCP flow control), so a query that falls behind does not grow the driver without bound.
KEEP_BYTES_MAX = 256 * 1024 * 1024
#: Messages in one Arrow record batch of a batch's messages (the decoders' chunk).
MESSAGES_PER_CHUNK = 65_536
#: How long one wait of the thread for the socket lasts (seconds): the bound of a stop's delay.
_POLL_S = 0.2

_XLOG = struct.Struct(">QQq").unpack_from  # XLogData: data start, WAL end, send time
_KEEPALIVE = struct.Struct(">Qq?").unpack_from  # keepalive: WAL end, send time, reply requested
_STATUS = struct.Struct(">cQQQq?").pack  # 'r', write, flush, apply, client time, reply requested
_BEGIN = struct.Struct(">QqI").unpack_from  # final lsn, commit ts, xid
_COMMIT_END = struct.Struct(">Q").unpack_from
_CHANGE_TAGS = frozenset(b"IUDT")


def _record_batches(lsns: list[int], datas: list[bytes]) -> list[Any]:
    import pyarrow as pa

    return [pa.record_batch([pa.array(lsns[i:i + MESSAGES_PER_CHUNK], pa.int64()),
                             pa.array(datas[i:i + MESSAGES_PER_CHUNK], pa.binary())], names=["lsn", "data"])
            for i in range(0, len(lsns), MESSAGES_PER_CHUNK)]


def _now_pg_us() -> int:
    return int(time.time() * 1_000_000) - PG_EPOCH_US


@dataclass
class Transaction:
    """One committed transaction as received: its messages (``B`` to ``C``) and what a batch end needs."""

    commit_start: int  # LSN of the commit record (Begin's final LSN): batches select by it
    commit_end: int  # end LSN of the commit record: a batch end
    xid: int
    ts_us: int  # commit time, µs since the Unix epoch
    changes: int  # I/U/D/T messages
    lsns: list[int] = field(default_factory=list)
    datas: list[bytes] = field(default_factory=list)
    size: int = 0


class ReplicationStream:
    """The kept replication connection of one connector (driver): see the module docstring."""

    def __init__(self, session: PgSession, settings: PostgresSettings):
        self.session, self.settings = session, settings
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._conn: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.failure: BaseException | None = None  # what ended the thread's reading
        self._committed: deque[Transaction] = deque()
        self._open: Transaction | None = None
        self._relations: dict[int, bytes] = {}  # latest R message per relid before the oldest kept transaction
        self._kept_bytes = 0
        self.received = 0  # every transaction whose commit record starts before this LSN is kept (or confirmed)
        self.confirmed = 0  # the flush position reported: the end of the last committed batch
        self._last_status = 0.0
        self.opened_at = 0  # where the current connection started streaming

    def __getstate__(self) -> dict[str, Any]:
        return {"session": self.session, "settings": self.settings}  # a copy is a closed stream

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["session"], state["settings"])  # type: ignore[misc]

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    # ---------------------------------------------------------------------------------- connection
    def open(self, start: int) -> None:
        """Connect and stream from the slot: its confirmed position, or ``start`` when that is later (the
        slot lags a batch Spark committed when the driver stopped before it reported it)."""
        self.close()
        settings = self.settings
        slot = self.session.slot()
        if slot is None:
            raise ConnectError(f"Replication slot {settings.slot_name!r} does not exist: cannot stream from it")
        begin = max(slot[0], start)
        conn = self.session.retry(lambda: self._start(begin), "starting replication", is_retriable=is_transient)
        with self._lock:
            self._conn = conn
            self._stopping = False
            self.failure = None
            self._committed.clear()
            self._open = None
            self._relations.clear()
            self._kept_bytes = 0
            self.received = self.confirmed = self.opened_at = begin
            self._last_status = 0.0
        self._thread = threading.Thread(target=self._run, name=f"kconnect-{settings.name}-replication", daemon=True)
        self._thread.start()
        log.info("%s: streaming replication slot %s from %s", settings.name, settings.slot_name, lsn_text(begin))

    def _start(self, begin: int) -> Any:
        psycopg = psycopg_module()
        settings = self.settings
        conn = self.session.connect(replication="database")
        pgconn = conn.pgconn
        slot = settings.slot_name.replace('"', '""')
        publication = settings.publication_name.replace("'", "''")
        command = (f"START_REPLICATION SLOT \"{slot}\" LOGICAL {lsn_text(begin)} "
                   f"(proto_version '1', publication_names '{publication}')")
        try:
            pgconn.send_query(command.encode())
            pgconn.flush()
            while True:
                pgconn.consume_input()
                if not pgconn.is_busy():
                    break
                select.select([pgconn.socket], [], [], _POLL_S)
            result = pgconn.get_result()
            if result is None or result.status != psycopg.pq.ExecStatus.COPY_BOTH:
                error = psycopg.errors.error_from_result(result, encoding="utf-8") if result is not None else \
                    psycopg.OperationalError("START_REPLICATION returned no result")
                raise error
            pgconn.nonblocking = 1
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Report the confirmed position a last time and close the connection; the slot is free when this
        returns (waited for, at most a few seconds), so a next query or a slot drop finds it inactive."""
        thread = self._thread
        with self._lock:
            self._stopping = True
            conn, self._conn = self._conn, None
        if thread is not None:
            thread.join(timeout=5 * _POLL_S)
            self._thread = None
        if conn is None:
            return
        try:
            if not conn.pgconn.status:  # CONNECTION_OK
                self._send_status(conn, reply=False, flush=True)
                conn.pgconn.put_copy_end()
                conn.pgconn.flush()
        except Exception:  # a broken connection: nothing more to tell the server
            log.debug("%s: ending the replication stream failed", self.settings.name, exc_info=True)
        conn.close()
        self._wait_slot_released()

    def _wait_slot_released(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self.session.slot_holder() is None:
                    return
            except Exception:  # the server is gone: nothing holds the slot there
                log.debug("%s: checking the slot's holder failed", self.settings.name, exc_info=True)
                return
            time.sleep(0.02)

    def ensure(self, start: int) -> None:
        """Open the stream when it is closed, or again from the slot when its connection broke."""
        failure = self.failure
        if self._conn is not None and failure is None:
            return
        if failure is not None:
            log.warning("%s: the replication connection was lost (%s); reconnecting from the slot",
                        self.settings.name, str(failure).strip())
        self.open(max(start, self.confirmed))

    # ---------------------------------------------------------------------------------- the thread
    def _run(self) -> None:
        psycopg = psycopg_module()
        conn = self._conn
        try:
            while True:
                with self._lock:
                    if self._stopping or self._conn is not conn:
                        return
                    got = self._receive(conn)
                    if time.monotonic() - self._last_status >= STATUS_INTERVAL_S:
                        self._send_status(conn, reply=False)
                    if got:
                        self._arrived.notify_all()
                if not got:
                    select.select([conn.pgconn.socket], [], [], _POLL_S)
        except Exception as e:  # whatever ended the reading, the driver's next call reconnects (or reports it)
            with self._lock:
                if not self._stopping:
                    self.failure = e if isinstance(e, (psycopg.Error, OSError, ReadInterrupted)) else \
                        ReadInterrupted(f"{type(e).__name__}: {e}")
                    log.info("%s: replication connection lost: %s", self.settings.name, str(e).strip(),
                             exc_info=not isinstance(e, (psycopg.Error, OSError, ReadInterrupted)))
                self._arrived.notify_all()

    def _receive(self, conn: Any) -> bool:
        """Every message available now (lock held); False when there was none."""
        pgconn = conn.pgconn
        pgconn.consume_input()
        got = False
        while self._kept_bytes < KEEP_BYTES_MAX:
            n, data = pgconn.get_copy_data(1)
            if n == 0:
                break
            if n < 0:
                message = pgconn.get_error_message()
                if isinstance(message, bytes):
                    message = message.decode(errors="replace")
                raise ReadInterrupted(message.strip() or "the server ended the replication stream")
            got = True
            tag = data[0]
            if tag == 119:  # 'w'
                start = _XLOG(data, 1)[0]
                self._message(start, bytes(data[25:]))
            elif tag == 107:  # 'k'
                wal_end, _, reply = _KEEPALIVE(data, 1)
                if self._open is None and wal_end > self.received:
                    self.received = wal_end
                if reply:
                    self._send_status(conn, reply=False)
        return got

    def _message(self, lsn: int, payload: bytes) -> None:
        tag = payload[0]
        txn = self._open
        if tag == 66:  # 'B'
            final_lsn, ts, xid = _BEGIN(payload, 1)
            txn = self._open = Transaction(final_lsn, 0, xid, ts + PG_EPOCH_US, 0)
        elif txn is None:  # outside a transaction: only a relation matters
            if tag == 82:
                self._relations[struct.unpack_from(">I", payload, 1)[0]] = payload
            return
        if tag in _CHANGE_TAGS:
            txn.changes += 1
        txn.lsns.append(lsn)
        txn.datas.append(payload)
        txn.size += len(payload)
        self._kept_bytes += len(payload)
        if tag == 67:  # 'C'
            txn.commit_end = _COMMIT_END(payload, 10)[0]
            self._open = None
            if txn.commit_start >= self.confirmed:
                self._committed.append(txn)
            else:  # sent again after a reconnect, committed already
                self._forget(txn)
            self.received = max(self.received, txn.commit_end)

    def _send_status(self, conn: Any, reply: bool, flush: bool = False) -> None:
        """A standby status update: received (written) up to ``received``; with ``flush``, flushed and
        applied up to ``confirmed`` (the slot moves there), else no flush position.

        Only a confirmation carries the flush position: a walsender asked to stop waits until the client's
        flush position, or its write position when it reports none, reaches everything it sent (as
        pg_receivewal reports none). A flush position past ``confirmed`` would move the slot past the
        query's checkpoint, and one kept at ``confirmed`` would keep the server from shutting down."""
        pgconn = conn.pgconn
        done = self.confirmed if flush else 0
        pgconn.put_copy_data(_STATUS(b"r", self.received, done, done, _now_pg_us(), reply))
        pgconn.flush()
        self._last_status = time.monotonic()

    def _forget(self, txn: Transaction) -> None:
        """Drop a transaction from the kept messages, keeping its relations for later batches."""
        for payload in txn.datas:
            if payload[0] == 82:
                self._relations[struct.unpack_from(">I", payload, 1)[0]] = payload
        self._kept_bytes -= txn.size

    # ---------------------------------------------------------------------------------- the driver's side
    def _check(self) -> None:
        if self.failure is not None:
            raise ReadInterrupted(f"replication connection lost: {str(self.failure).strip()}")

    def catch_up(self, target: int, wait_s: float) -> bool:
        """Wait (at most ``wait_s``) until every transaction committed before ``target`` was received, asking
        the server where it is; True when it was."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            while self.received < target:
                self._check()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._conn is not None:
                    self._send_status(self._conn, reply=True)  # the server answers with a keepalive
                self._arrived.wait(min(left, 0.05))
            return True

    def commits_after(self, start: int) -> list[tuple[int, int, int, int]]:
        """(commit end, cumulative change count, xid, commit time) of each kept transaction, as
        :func:`~..cdc.batch_end.last_commit_within` takes them, counted from ``start``."""
        out = []
        n = 0
        with self._lock:
            self._check()
            for txn in self._committed:
                if txn.commit_start < start:
                    continue
                n += txn.changes
                out.append((txn.commit_end, n, txn.xid, txn.ts_us))
        return out

    def take(self, lo: int, hi: int, wait_s: float) -> list[Any] | None:
        """The messages of the transactions whose commit record starts in ``[lo, hi)``, after the relation
        messages they need, as Arrow record batches (``lsn``, ``data``) of at most :data:`MESSAGES_PER_CHUNK`
        messages; None when the stream cannot give them (it started after ``lo``, or did not reach ``hi``
        within ``wait_s``)."""
        if self.opened_at > lo or not self.catch_up(hi, wait_s):
            return None
        lsns: list[int] = []
        datas: list[bytes] = []
        with self._lock:
            self._check()
            relations = dict(self._relations)
            chosen = []
            for txn in self._committed:
                if txn.commit_start >= hi:
                    break
                if txn.commit_start >= lo:
                    chosen.append(txn)
                    continue
                for payload in txn.datas:  # kept but before the batch: only its relations count
                    if payload[0] == 82:
                        relations[struct.unpack_from(">I", payload, 1)[0]] = payload
            for payload in relations.values():
                lsns.append(lo)
                datas.append(payload)
            for txn in chosen:
                lsns.extend(txn.lsns)
                datas.extend(txn.datas)
        return _record_batches(lsns, datas)

    def confirm(self, lsn: int) -> None:
        """Spark committed the batch ending at ``lsn``: report it as flushed (the slot moves there) and drop
        the transactions it held."""
        with self._lock:
            if lsn <= self.confirmed:
                return
            self.confirmed = lsn
            while self._committed and self._committed[0].commit_end <= lsn:
                self._forget(self._committed.popleft())
            if self._conn is not None and self.failure is None:
                try:
                    self._send_status(self._conn, reply=False, flush=True)
                except Exception:  # the thread reports the broken connection; the next open resumes
                    log.debug("%s: reporting the flush position failed", self.settings.name, exc_info=True)
