"""PostgreSQL change data capture with Debezium's configs and change events
(``io.debezium.connector.postgresql.PostgresConnector``): the connector SPI, over the parts of this package.

One connector, one replication slot, one publication, many tables. The records are Debezium's change events:
``key`` the primary-key struct, ``value`` the envelope ``before``/``after``/``source``/``op``/``ts_ms``, topic
``<topic.prefix>.<schema>.<table>``, a tombstone after each delete (``tombstones.on.delete``).

Where each part lives: :mod:`.config` (keys and typed settings), :mod:`.session` (connections, retries, slot
and publication SQL), :mod:`.layout` (captured tables), :mod:`.snapshot` (the initial snapshot),
:mod:`.batch_end` (offsets and where a batch ends), :mod:`.incremental` with :mod:`..cdc.signals` (incremental
snapshots on demand), :mod:`.stream` (reading the slot), :mod:`.events` with :mod:`..cdc.envelope` (Debezium's
events), :mod:`.pgoutput`/:mod:`.pgoutput_bulk` (decoding) and :mod:`.types` (type mapping).

Deviations from Debezium, all deliberate: envelope ``ts_ms`` is the commit time (the processing time would
make replays differ); ``heartbeat.interval.ms`` moves the offset (and so the slot) over WAL that holds no
captured change but emits no heartbeat records; only ``plugin.name=pgoutput``.

>>> df = (spark.readStream.format("kconnect")                                     # doctest: +SKIP
...       .options(**{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
...                   "database.hostname": "127.0.0.1", "database.port": "5432",
...                   "database.user": "postgres", "database.dbname": "shop",
...                   "topic.prefix": "shop", "table.include.list": "public.orders,public.customers"})
...       .load())
>>> orders = table_events(df, "public.orders")                                    # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..base import ReadRange, ReadTask, SourceConnector
from ..cdc.batch_end import last_commit_within
from ..cdc.layout import Layout
from ..cdc.signals import state_of
from ..offsets import Offsets
from .batch_end import BatchEnds
from .config import CONFIG_DEF, PostgresSettings, SnapshotMode
from .events import ChangeEvents
from .incremental import IncrementalSnapshots
from .layout import captured_layout, pg_record_type
from .replication import ReplicationStream
from .session import PgSession, is_transient, lsn_text
from .snapshot import Snapshots
from .stream import SlotReader

__all__ = ["CATCH_UP_WAIT_S", "TRIGGER_CATCH_UP_WAIT_S", "CdcRange", "PostgresConnector"]

log = logging.getLogger(__name__)

#: How long the driver waits for its replication connection to have received every transaction committed
#: before Trigger.AvailableNow's target is taken, or a batch it chose is planned (in a steady stream: a few ms).
CATCH_UP_WAIT_S = 30.0
#: The same before a trigger's batch end is chosen: a batch that ends a little short is followed by the next
#: trigger's, and the server's flush position may stand inside a record the walsender cannot read yet.
TRIGGER_CATCH_UP_WAIT_S = 1.0


@dataclass(frozen=True)
class CdcRange(ReadRange):
    """A micro-batch of the slot plus what the executor needs to decode it (no catalog lookups there)."""

    layout: Layout | None = None
    #: the batch's pgoutput messages as the driver's replication connection received them (Arrow record
    #: batches ``lsn``/``data``); None: the executor reads the slot with a peek
    messages: list[Any] | None = None


class PostgresConnector(SourceConnector):
    """Debezium's PostgreSQL connector over logical decoding (pgoutput)."""

    kafka_class = "io.debezium.connector.postgresql.PostgresConnector"
    default_max_records_per_trigger = 100_000
    config_def = CONFIG_DEF

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self.settings = PostgresSettings.from_config(config, name=name)
        self.session = PgSession(self.settings)
        self._snapshots = Snapshots(self.session, self.settings)
        self._ends = BatchEnds(self.session, self.settings, self._snapshots)
        self._incremental = IncrementalSnapshots(self.session, self.settings)
        self._layout: Layout | None = None
        self._initial: Offsets | None = None
        self._started = False  # snapshot.mode=always: first latest_offsets of this process
        self._streaming = False  # a streaming query's driver: the slot is read over a kept connection
        self._replication = ReplicationStream(self.session, self.settings)

    @property
    def _key(self) -> str:
        return self.settings.partition_key

    def layout(self) -> Layout:
        """The captured tables and their fields (queried once per process)."""
        if self._layout is None:
            self._layout = captured_layout(self.session, self.settings)
        return self._layout

    # ---------------------------------------------------------------------------------- driver
    def schema(self) -> Any:
        return pg_record_type(self.layout())

    def initial_offsets(self) -> Offsets:
        if self._initial is not None:
            return self._initial
        settings, session = self.settings, self.session
        layout = self.layout()
        tables = [(t.schema, t.table) for t in layout.tables]
        if settings.signal_table is not None:
            session.signal_table()  # fails early when it is missing or malformed
            tables.append(settings.signal_table)
        session.ensure_publication(tables)
        if settings.signal_table is not None:
            self._incremental.check_publication()
        slot = session.slot()
        if slot is not None:
            # Never drop an existing slot here: Spark may ask for initial offsets of a query that resumes
            # from its checkpoint (Trigger.AvailableNow), and the slot may hold another query's position.
            if settings.snapshot_mode.snapshots:
                log.warning("%s: replication slot %s exists: streaming from its position %s without a new "
                            "snapshot. Drop the slot or choose another slot.name for a consistent snapshot",
                            self.name, settings.slot_name, lsn_text(slot[0]))
            pos = {"lsn": slot[0]}
        elif settings.snapshot_mode.snapshots:
            pos = self._snapshots.start(layout)
        else:
            pos = {"lsn": session.create_slot(export=False)[0]}
        self._initial = {self._key: pos}
        self._started = True
        return self._initial

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        settings = self.settings
        pos = dict(start.get(self._key) or self.initial_offsets()[self._key])
        layout = self.layout()
        if settings.snapshot_mode is SnapshotMode.ALWAYS and not self._started:
            self._started = True
            if "snapshot" not in pos:
                log.info("%s: snapshot.mode=always: taking a new snapshot at query start", self.name)
                return {self._key: self._snapshots.start(layout)}
        self._started = True
        if "snapshot" in pos:
            end = self._snapshots.end(pos, layout, max_records)
            if end is None:  # no bound: the rest of the snapshot plus the stream available now, in one range
                stream_pos = {"lsn": int(pos["lsn"])}
                end = stream_pos if settings.snapshot_mode is SnapshotMode.INITIAL_ONLY else \
                    self._ends.stream_end(stream_pos, None, until, layout)
        elif settings.snapshot_mode is SnapshotMode.INITIAL_ONLY:
            end = pos
        elif self._kept(pos):
            end = self._kept_end(pos, max_records, until)
        else:
            if settings.signal_table is not None:
                self._incremental.write_chunk(pos, layout)
            end = self._ends.stream_end(pos, max_records, until, layout)
            if settings.signal_table is not None and "snapshot" not in end:
                end = self._incremental.end(pos, end, layout)
        self._ends.log_lag(end)
        return {self._key: end}

    def lag(self, current: Offsets) -> int | None:
        """Bytes of WAL between the offset and the server's current WAL position."""
        pos = current.get(self._key)
        if not pos:
            return None
        return self._ends.lag(int(pos["lsn"]))

    def commit(self, end: Offsets) -> None:
        pos = end.get(self._key)
        if not pos:
            return
        if "snapshot" not in pos:
            self.session.release_snapshot()  # the snapshot is committed: release the exported snapshot
        if self._replication.is_open:  # the slot is active in the walsender: it moves by the flush reported
            self._replication.confirm(int(pos["lsn"]))
        else:
            self.session.advance_slot(int(pos["lsn"]))

    def stop(self) -> None:
        settings = self.settings
        self._replication.close()
        self.session.release_snapshot()
        if settings.slot_drop_on_stop and self.session.slot() is not None:
            self.session.drop_slot()
            log.info("%s: dropped replication slot %s (slot.drop.on.stop)", self.name, settings.slot_name)
        self.session.close()

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        s, e = start.get(self._key), end.get(self._key)
        if s == e or e is None:
            return []
        messages = self._kept_messages(s, e) if s is not None and self._kept(s) and "snapshot" not in e else None
        # One task: a slot serves one session at a time.
        return [ReadTask(0, (CdcRange(self.settings.partition, s, e, self.layout(), messages),))]

    # ---------------------------------------------------------------------------------- the kept stream
    def begin_stream(self) -> None:
        self._streaming = True

    def _kept(self, pos: dict[str, Any]) -> bool:
        """Whether the batch after ``pos`` is read over the kept replication connection: in a streaming
        query, past the snapshot, without a signal table (whose inserts the per-message path reads from a
        peek). Otherwise the connection is closed, so that peeks find the slot free."""
        settings = self.settings
        kept = (self._streaming and settings.signal_table is None and "snapshot" not in pos
                and settings.snapshot_mode is not SnapshotMode.INITIAL_ONLY)
        if kept and not self._replication.is_open and self.session.slot() is None:
            kept = False  # no slot (snapshot.mode=when_needed takes a new one on the peek path)
        if not kept and self._replication.is_open:
            self._replication.close()
        return kept

    def _open_stream(self, start: int) -> None:
        """The kept connection, (re)opened when closed or broken (the slot's position checked first)."""
        stream = self._replication
        if not stream.is_open or stream.failure is not None:
            self._ends.check_slot(start)
            stream.ensure(start)

    def _kept_end(self, pos: dict[str, Any], max_records: int | None, until: Offsets | None) -> dict[str, Any]:
        """The end of the batch after ``pos`` from the transactions the kept connection received, once it
        received every transaction committed before the server's flush position of now: the last commit
        within ``max_records`` changes (at least one transaction), never past ``until``; with none, ``pos``
        (or, when a heartbeat is due, the position the server confirmed it sent everything before)."""
        start = int(pos["lsn"])
        stream = self._replication
        wait_s = CATCH_UP_WAIT_S if max_records is None and until is None else TRIGGER_CATCH_UP_WAIT_S

        def look() -> tuple[list[tuple[int, int, int, int]], int]:
            self._open_stream(start)
            if not stream.catch_up(self.session.flush_lsn(), wait_s):
                log.info("%s: the replication connection did not catch up with the server within %.0f s",
                         self.name, wait_s)
            return stream.commits_after(start), stream.received

        commits, received = self.session.retry(look, "streaming the replication slot", is_retriable=is_transient)
        key = self._key
        if until is not None and key in until and "snapshot" not in until[key]:
            cap = int(until[key]["lsn"])
            commits = [c for c in commits if c[0] <= cap]
            received = min(received, cap)
        chosen, _ = last_commit_within(commits, start, max_records)
        if chosen is not None:
            lsn, xid, ts = chosen
            return {"lsn": lsn, "txId": xid, "ts_usec": ts}
        return {"lsn": received} if self._ends.heartbeat.due(start, received) else pos

    def _kept_messages(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any] | None:
        """The messages of the batch ``(start, end]`` from the kept connection (None: read by a peek, after
        the connection is closed so the slot is free for it)."""
        lo, hi = int(start["lsn"]), int(end["lsn"])
        stream = self._replication

        def take() -> list[Any] | None:
            self._open_stream(lo)
            return stream.take(lo, hi, CATCH_UP_WAIT_S)

        messages = self.session.retry(take, "streaming the replication slot", is_retriable=is_transient)
        if messages is None:
            log.info("%s: the replication connection cannot give the batch (%s, %s]: reading it from the slot",
                     self.name, lsn_text(lo), lsn_text(hi))
            stream.close()
        return messages

    # ---------------------------------------------------------------------------------- executor
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        layout = getattr(rng, "layout", None) or self.layout()
        events = ChangeEvents(layout, self.settings)
        start = dict(rng.start) if rng.start else self.initial_offsets()[self._key]
        end = dict(rng.end)
        if "snapshot" in start:
            yield from self._snapshots.read(start, end, events)
        if "snapshot" not in end and self.settings.snapshot_mode is not SnapshotMode.INITIAL_ONLY:
            lo, hi = int(start["lsn"]), int(end["lsn"])
            if hi > lo:
                reader = SlotReader(self.session, self.settings, layout, events, incremental=state_of(start))
                messages = getattr(rng, "messages", None)
                yield from reader.stream(lo, hi) if messages is None else reader.decode_messages(lo, hi, messages)


