"""Reading a batch's changes from the replication slot on an executor.

**Reading the slot: SQL logical decoding functions, not the replication protocol.** A micro-batch must be a
pure function of its offsets (Spark replays an uncommitted batch after a crash). With
``pg_logical_slot_peek_binary_changes`` the slot is never consumed by reading: the same call over the same
range returns the same rows (SYSTEMS.md §1), ``upto_lsn`` bounds it to whole transactions, and the slot is
moved only by ``pg_replication_slot_advance`` when the connector commits, after Spark committed the batch.
Each call is a stateless session (relations are re-sent), so an executor needs nothing but the offsets and a
plain ``psycopg`` connection. The replication protocol would stream faster (no re-decoding from
``restart_lsn`` on every call), but it moves the slot by feedback, needs a long-lived connection per slot and
a client library psycopg 3 does not have. The slot serves one session at a time, so a batch is one read task.
Executors fetch the peek as Arrow (ADBC) and decode it in bulk (:mod:`.pgoutput_bulk`); with a signal table,
whose inserts drive incremental-snapshot windows change by change, the per-message path reads it.

A read interrupted by a lost connection or a slot busy with another session is retried from where it stopped
(a re-read is identical, so the events already delivered are skipped), through the session's retries.

>>> reader = SlotReader(session, settings, layout)                        # doctest: +SKIP
>>> batches = list(reader.stream(lo, hi))                                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from contextlib import closing
from typing import Any

from ...errors import ConnectError, RetriableError
from ..cdc.envelope import skip_rows
from ..cdc.layout import Layout
from ..cdc.signals import ChunkWindows, State
from . import pgoutput_bulk
from .config import PostgresSettings
from .events import ChangeEvents, sequence
from .pgoutput import Change, Decoder
from .session import (
    CONNECTION_LOST,
    PgSession,
    ReadInterrupted,
    SlotBusy,
    adbc_module,
    is_transient,
    lsn_text,
    psycopg_module,
)

__all__ = ["SlotReader"]

log = logging.getLogger(__name__)

#: The longest wait between two attempts to read the slot.
READ_RETRY_DELAY_MAX_MS = 10_000



class SlotReader:
    """The changes of the transactions with commit end LSN in ``(lo, hi]``, as events (executor)."""

    def __init__(self, session: PgSession, settings: PostgresSettings, layout: Layout,
                 events: ChangeEvents | None = None, incremental: State | None = None):
        self.session, self.settings, self.layout = session, settings, layout
        self.events = events if events is not None else ChangeEvents(layout, settings)
        #: the incremental snapshot at the range's start
        self.incremental = incremental

    def stream(self, lo: int, hi: int) -> Iterator[Any]:
        """Every change of the transactions with commit end LSN in ``(lo, hi]``; retried from where it
        stopped after a lost connection (a re-read is identical, so the first ``done`` events are skipped)."""
        # The signal table's inserts drive incremental-snapshot windows change by change: that mode keeps
        # the per-message path. Everything else reads Arrow through ADBC and decodes in bulk.
        bulk = adbc_module() is not None and self.settings.signal_table is None
        once = self._stream_bulk if bulk else self._stream_once
        done = 0
        reading: Any = None  # the generator of the current attempt

        def next_batch() -> Any:
            nonlocal reading
            if reading is None:
                reading = once(lo, hi, done)
            try:
                return next(reading)
            except StopIteration:
                return None
            except BaseException:
                reading = None  # the next attempt reads again, after the events delivered so far
                raise

        try:
            while True:
                batch = self.session.retry(next_batch, "reading the slot", is_retriable=is_transient,
                                           max_delay_ms=READ_RETRY_DELAY_MAX_MS)
                if batch is None:
                    return
                done += batch.num_rows
                yield batch
        finally:
            if reading is not None:
                reading.close()

    def _stream_once(self, lo: int, hi: int, skip: int) -> Iterator[Any]:
        settings = self.settings
        conn = self.session.connect(autocommit=False)
        try:
            self._check_readable(conn, lo, hi)
            cur = conn.cursor(name="kconnect_cdc", binary=True)
            cur.itersize = 20_000
            cur.execute("select (lsn - '0/0'::pg_lsn)::int8, data from pg_logical_slot_peek_binary_changes("
                        "%s::name, %s::pg_lsn, NULL::int4, 'proto_version', '1', 'publication_names', %s::text)",
                        (settings.slot_name, lsn_text(hi), settings.publication_name))
            dec = Decoder(lo, hi)
            window: list[Change] = []
            emitted = 0
            signal = settings.signal_table
            chunks = ChunkWindows(self.incremental, self.layout, name=settings.name)
            events = self.events

            def emit(batches: Iterator[Any]) -> Iterator[Any]:
                nonlocal emitted
                for b in batches:
                    emitted, b = skip_rows(b, emitted, skip)
                    if b is not None:
                        yield b

            for ch in dec.changes(cur):
                rel = ch.relation
                if signal is not None and (rel.schema, rel.table) == signal:
                    if ch.op == "c":
                        yield from emit(events.changes(window))
                        window = []
                        yield from emit(self._signal_row(ch, chunks))
                    continue
                if chunks.open:
                    self._touch(ch, chunks)
                window.append(ch)
                if len(window) >= events.batch:
                    yield from emit(events.changes(window))
                    window = []
            if window:
                yield from emit(events.changes(window))
            cur.close()
            conn.rollback()
        finally:
            conn.close()

    def _check_readable(self, conn: Any, lo: int, hi: int) -> None:
        position = self.session.slot_position(conn)
        if position is None or position > lo:
            raise ConnectError(f"Replication slot {self.settings.slot_name!r} "
                               f"{'does not exist' if position is None else 'is past ' + lsn_text(lo)}: the "
                               f"changes of this batch ({lsn_text(lo)}, {lsn_text(hi)}] cannot be read")

    def _stream_bulk(self, lo: int, hi: int, skip: int) -> Iterator[Any]:
        """:meth:`_stream_once` with the peek fetched as Arrow (ADBC's binary COPY, no Python object per
        message) and decoded a chunk at a time by :func:`~.pgoutput_bulk.decode_chunk`; a chunk it cannot
        take goes to the per-message decoder with the same state, so the events are the same either way. The
        connections are the ones this process kept from the connector's previous batch
        (:meth:`~.session.PgSession.reader_connections`)."""
        from psycopg import sql

        settings = self.settings
        with self.session.reader_connections() as conns:
            self._check_readable(conns.sql, lo, hi)
            query = sql.SQL("select (lsn - '0/0'::pg_lsn)::int8 as lsn, data from "
                            "pg_logical_slot_peek_binary_changes({}::name, {}::pg_lsn, NULL::int4, "
                            "'proto_version', '1', 'publication_names', {}::text)").format(
                sql.Literal(settings.slot_name), sql.Literal(lsn_text(hi)),
                sql.Literal(settings.publication_name)).as_string(conns.sql)
            dec = Decoder(lo, hi)
            emitted = 0
            # closed before the connections are (a generator left early would hold a cursor open on them)
            with closing(self._peek_chunks(conns.arrow, query)) as chunks:
                for rb in chunks:
                    for batch in self._decode_chunk(dec, rb):
                        emitted, batch = skip_rows(batch, emitted, skip)
                        if batch is not None:
                            yield batch

    def decode_messages(self, lo: int, hi: int, messages: Any) -> Iterator[Any]:
        """The events of a batch whose messages the driver received over its kept replication connection
        (:class:`~.replication.ReplicationStream`: Arrow record batches of ``lsn``/``data``, the shape of the
        peek's chunks), through the same decoders as a peek's chunks."""
        dec = Decoder(lo, hi)
        for rb in messages:
            yield from self._decode_chunk(dec, rb)

    def _decode_chunk(self, dec: Decoder, rb: Any) -> list[Any]:
        """The events of one record batch of the peek, in bulk; a chunk the bulk decoder cannot take goes to the
        per-message decoder from the same state."""
        events = self.events
        pa = events.pa
        lsn = rb.column(0).to_numpy()
        data = rb.column(1)
        if data.type != pa.binary():
            data = data.cast(pa.binary())
        state = (dec.keep, dec.xid, dec.ts, dec.done, dict(dec.relations))
        try:
            return list(events.bulk(pgoutput_bulk.decode_chunk(dec, lsn, data), data))
        except pgoutput_bulk.Unsupported as e:
            log.debug("%s: per-message decoding for a chunk (%s)", self.settings.name, e)
            dec.keep, dec.xid, dec.ts, dec.done = state[:4]
            dec.relations.clear()
            dec.relations.update(state[4])
            rows = zip(lsn.tolist(), data.to_pylist())
            return list(events.windowed(dec.changes(rows)))

    def _peek_chunks(self, aconn: Any, query: str) -> Generator[Any, None, None]:
        """The peek's record batches from ADBC (``aconn``). A failure of the server's query reaches the reader
        as an ArrowException without a SQLSTATE, so it is classified here (see :meth:`_peek_error`)."""
        pa = self.events.pa
        adbc = adbc_module()
        cur = aconn.cursor()
        try:
            cur.execute(query)
            reader = cur.fetch_record_batch()
            while True:
                try:
                    rb = reader.read_next_batch()
                except StopIteration:
                    return
                except (pa.ArrowException, adbc.Error) as e:
                    raise self._peek_error(e) from e
                yield rb
        finally:
            cur.close()

    def _peek_error(self, e: Exception) -> BaseException:
        """What a failed peek means: the slot busy with another session (:class:`~.session.SlotBusy`, retried
        for at least a minute, like psycopg's ObjectInUse), the server gone (the error of the check, or
        :class:`~.session.ReadInterrupted` by the message), or else the error itself (not retried)."""
        psycopg = psycopg_module()
        slot = self.settings.slot_name
        try:
            holder = self.session.slot_holder()
        except (psycopg.OperationalError, RetriableError) as lost:
            return lost.__cause__ if isinstance(lost, RetriableError) and lost.__cause__ is not None else lost
        if holder is not None:
            return SlotBusy(f"Replication slot {slot!r} is in use by PostgreSQL process {holder}")
        text = str(e)
        if "is active for PID" in text:  # the holder let go between the failed peek and the check above
            return SlotBusy(f"Replication slot {slot!r} was in use by another session")
        if any(m in text for m in CONNECTION_LOST):
            return ReadInterrupted(text.strip())
        return e

    # ---- incremental snapshot chunks (see .incremental)
    def _touch(self, ch: Change, chunks: ChunkWindows) -> None:
        """Remember the key of a change made inside an open chunk window (a truncate touches every key)."""
        rel = ch.relation
        tid = f"{rel.schema}.{rel.table}"
        if not chunks.watches(tid):
            return
        if ch.op == "t":
            chunks.truncate(tid)
            return
        t = self.layout.table(rel.schema, rel.table)
        if t is None:
            return
        idx = [rel.names.index(c.name) for c in t.key if c.name in rel.names]
        chunks.touch(tid, [tuple(tp[i].decode() for i in idx) for tp in (ch.old, ch.new)
                           if tp is not None and all(isinstance(tp[i], bytes) for i in idx)])

    def _signal_row(self, ch: Change, chunks: ChunkWindows) -> Iterator[Any]:
        """A signal-table insert: opens a chunk window, or closes one and emits its rows (op ``r``,
        ``source.snapshot=incremental``) but those whose key the stream changed inside the window."""
        vals = {k: (v.decode() if isinstance(v, bytes) else None)
                for k, v in zip(ch.relation.names, ch.new or ())}
        closed = chunks.signal(vals, lsn_text(ch.lsn))
        if closed is None:
            return
        t, names, rows = closed
        events = self.events
        pa = events.pa
        batch = max(events.batch, 1)
        for s in range(0, len(rows), batch):
            part = rows[s:s + batch]
            n = len(part)
            cols = list(zip(*part))
            texts = {name: pa.array(cols[i], pa.string()) for i, name in enumerate(names)}
            yield events.envelope.read_events(t, texts, n, ts_us=ch.ts_us, offset=ch.lsn,
                                              snapshot=pa.array(["incremental"] * n, pa.string()), txId=ch.xid,
                                              lsn=ch.lsn, sequence=sequence(ch.lsn, n))


