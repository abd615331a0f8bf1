"""Where a PostgreSQL micro-batch ends, chosen on the driver from the slot without decoding the batch.

**Offsets.** Source partition ``{"server": <topic.prefix>}``; stream position ``{"lsn": <LSN>}`` (plus
Debezium's ``"txId"``/``"ts_usec"`` when it is a commit end LSN). A micro-batch is every transaction whose
commit record starts in ``[start.lsn, end.lsn)`` (for commit end LSNs: whose commit end LSN is in
``(start.lsn, end.lsn]``). :meth:`BatchEnds.stream_end` does not decode the batch to count its changes (that
would be a second full server-side decode of every batch): ``end`` is ``max.records.per.trigger`` changes'
worth of WAL after ``start``, the WAL bytes per change measured on the first messages after ``start`` (within
:data:`WAL_BYTES_PER_CHANGE` and :data:`WAL_BYTES_PER_CHANGE_MAX`), never less than one transaction, so the
bound is approximate (:mod:`..cdc.batch_end`). With a signal table the end is still chosen at a counted
transaction boundary (incremental-snapshot chunks are placed by it). ``heartbeat.interval.ms`` moves the
offset (and so the slot) over WAL that holds no captured change but emits no heartbeat records.

Every question is a ``pg_logical_slot_peek_binary_changes`` over the slot, which never consumes it: the slot
is moved only after Spark committed a batch.

>>> ends = BatchEnds(session, settings, snapshots)                         # doctest: +SKIP
>>> ends.stream_end({"lsn": 23926592}, 100_000, None, layout)              # doctest: +SKIP
{'lsn': 49152000}
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ...errors import ConnectError
from ..cdc.batch_end import Heartbeat, end_by_bytes, last_commit_within
from ..cdc.layout import Layout
from ..offsets import Offsets
from .config import PostgresSettings, SnapshotMode
from .pgoutput import PG_EPOCH_US
from .session import PgSession, lsn_text
from .snapshot import Snapshots

__all__ = ["WAL_BYTES_PER_CHANGE", "WAL_BYTES_PER_CHANGE_MAX", "WAL_SAMPLE_CHANGES", "BatchEnds"]

log = logging.getLogger(__name__)

_CHANGE_TAGS = "73,85,68,84"  # I U D T
#: The fewest WAL bytes taken for one change when a batch end is chosen without decoding (see
#: BatchEnds._by_wal): a single-row insert of a narrow table writes ~100-250 bytes (SYSTEMS.md §1: 255 MB for
#: 1M rows of five columns), so a batch rarely holds more changes than asked.
WAL_BYTES_PER_CHANGE = 128
#: Change messages after a batch's start that the measured WAL bytes per change rests on (at least).
WAL_SAMPLE_CHANGES = 1_000
#: The most WAL bytes taken for one change: a sample of very wide rows followed by narrow ones (or deletes)
#: would otherwise make a batch many times the size asked. Rows wider than this make smaller batches.
WAL_BYTES_PER_CHANGE_MAX = 4_096


class BatchEnds:
    """The end of the next streaming batch, and the slot checks around it (driver)."""

    def __init__(self, session: PgSession, settings: PostgresSettings, snapshots: Snapshots):
        self.session, self.settings, self.snapshots = session, settings, snapshots
        self.heartbeat = Heartbeat(settings.heartbeat_interval_ms)
        self._last_lag_log = 0.0

    def stream_end(self, pos: dict[str, Any], max_records: int | None, until: Offsets | None,
                   layout: Layout) -> dict[str, Any]:
        """The end of the batch after ``pos``: at most ``max_records`` changes (about, see the module
        docstring), never past ``until`` (Trigger.AvailableNow's target); ``pos`` itself when nothing is
        there; a new snapshot's start when ``snapshot.mode=when_needed`` finds the slot gone."""
        settings = self.settings
        start = int(pos["lsn"])
        if settings.snapshot_mode is SnapshotMode.WHEN_NEEDED and self.session.slot() is None:
            log.warning("%s: slot %s is missing: snapshot.mode=when_needed takes a new snapshot", settings.name,
                        settings.slot_name)
            return self.snapshots.start(layout)
        self.check_slot(start)
        cap = None
        key = settings.partition_key
        if until is not None and key in until and "snapshot" not in until[key]:
            cap = int(until[key]["lsn"])
            if cap <= start:
                return pos
        flush = self.session.flush_lsn()
        upto = min(flush, cap) if cap is not None else flush
        if settings.signal_table is None:
            return self._by_wal(pos, start, upto, max_records)
        limit = None if max_records is None else max_records * 2 + 10_000
        while True:
            commits, total = self.commits(upto, limit)
            chosen, full = last_commit_within(commits, start, max_records)
            exhausted = limit is None or total < limit
            if chosen is not None and (exhausted or full):
                lsn, xid, ts = chosen
                return {"lsn": lsn, "txId": xid, "ts_usec": ts}
            if exhausted:
                break
            assert limit is not None  # without a limit the first peek is exhaustive
            limit *= 4
        return self._heartbeat(pos, start, upto)

    def check_slot(self, lsn: int) -> None:
        """Fail when the slot is gone (unless when_needed) or was moved past ``lsn`` by another consumer."""
        settings = self.settings
        slot = self.session.slot()
        if slot is None:
            if settings.snapshot_mode is SnapshotMode.WHEN_NEEDED:
                return
            raise ConnectError(f"Replication slot {settings.slot_name!r} does not exist any more: the "
                               f"changes after {lsn_text(lsn)} are gone. Start a new query (new checkpoint) to "
                               f"take a new snapshot, or use snapshot.mode=when_needed")
        if slot[0] > lsn:
            raise ConnectError(f"Replication slot {settings.slot_name!r} was advanced to "
                               f"{lsn_text(slot[0])}, past this query's offset {lsn_text(lsn)}: another consumer "
                               f"used the slot and those changes cannot be read again")

    def _by_wal(self, pos: dict[str, Any], start: int, upto: int, max_records: int | None) -> dict[str, Any]:
        """The end of the next batch without decoding it: ``max.records.per.trigger`` changes are taken as
        that many times the WAL bytes per change of the first changes after ``start`` (between
        :data:`WAL_BYTES_PER_CHANGE` and :data:`WAL_BYTES_PER_CHANGE_MAX`; never less than the first
        transaction, never past ``upto``).

        Counting the changes exactly needs the server to decode the whole range (~260k messages/s, SYSTEMS.md
        §1), which the executor then decodes again to read it: a second full decode per batch. Any LSN is a
        valid end, since a batch is the transactions whose commit record *starts* in ``[start, end)`` (see
        :class:`~.pgoutput.Decoder`), a split PostgreSQL applies too when the slot is advanced there; so an
        end is a pure function of the offsets and replays identically (the chosen end is in the checkpoint
        before the batch runs; how it was chosen need not be repeatable). Only the first changes are decoded
        here, to know that the batch is not empty (else: no batch, or a heartbeat) and how much WAL a change
        takes: with a fixed guess, rows wider than it made batches of a fraction of the size asked, and every
        extra batch costs a Spark job and another server-side decode from the slot's ``restart_lsn``."""
        first, per_change = self.first_commit_after(start, upto)
        if first is None:
            return self._heartbeat(pos, start, upto)
        return {"lsn": end_by_bytes(start=start, first=first, upto=upto, max_records=max_records,
                                    per_change=per_change, least=WAL_BYTES_PER_CHANGE,
                                    most=WAL_BYTES_PER_CHANGE_MAX)}

    def first_commit_after(self, start: int, upto: int) -> tuple[int | None, int]:
        """End LSN of the first commit after ``start`` up to ``upto`` holding captured changes (or None), and
        the WAL bytes per captured change after ``start`` seen on the way (0 when too few to tell). The peek
        starts at the slot's position, which may be behind ``start`` (batches read but not committed), so the
        row limit grows until a commit past ``start`` and :data:`WAL_SAMPLE_CHANGES` changes past it show up,
        or the range is exhausted."""
        limit = 1_000
        while True:
            row = self.session.query(f"""
                select min(l) filter (where tag = 67 and l > %s), count(*),
                       count(*) filter (where tag in ({_CHANGE_TAGS}) and l > %s),
                       max(l) filter (where tag in ({_CHANGE_TAGS}) and l > %s),
                       min(l) filter (where tag in ({_CHANGE_TAGS}) and l > %s)
                from (select (p.lsn - '0/0'::pg_lsn)::int8 as l, get_byte(p.data, 0) as tag
                      from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, %s::int4, 'proto_version',
                                                               '1', 'publication_names', %s::text) p) c""",
                                     (start, start, start, start, self.settings.slot_name, lsn_text(upto), limit,
                                      self.settings.publication_name))[0]
            commit, total, changes = row[0], int(row[1]), int(row[2])
            exhausted = total < limit
            if commit is not None and (changes >= WAL_SAMPLE_CHANGES or exhausted):
                per_change = (int(row[3]) - int(row[4])) // (changes - 1) if changes > 1 else 0
                return int(commit), per_change
            if exhausted:
                return None, 0
            limit *= 16

    def _heartbeat(self, pos: dict[str, Any], start: int, upto: int) -> dict[str, Any]:
        """Nothing captured after start: optionally move over WAL without captured changes (heartbeat)."""
        return {"lsn": upto} if self.heartbeat.due(start, upto) else pos

    def commits(self, upto: int, limit: int | None) -> tuple[list[tuple[int, int, int, int]], int]:
        """Commit end LSN, cumulative change count, xid and commit time (µs since the Unix epoch) of every
        transaction the slot holds up to ``upto`` (decoded on the server; only commit rows travel)."""
        rows = self.session.query(f"""
            with p as materialized (
                select (p.lsn - '0/0'::pg_lsn)::int8 as l, get_byte(p.data, 0) as tag, p.xid::text::int8 as xid,
                       count(*) filter (where get_byte(p.data, 0) in ({_CHANGE_TAGS}))
                           over (order by p.ord rows unbounded preceding) as n,
                       case when get_byte(p.data, 0) = 67 then substring(p.data from 19 for 8) end as ts
                from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, %s::int4, 'proto_version', '1',
                                                         'publication_names', %s::text)
                     with ordinality as p(lsn, xid, data, ord))
            select l, n, xid, ts, (select count(*) from p) from p where tag = 67
            union all select null, null, null, null, (select count(*) from p)""",
                                  (self.settings.slot_name, lsn_text(upto), limit, self.settings.publication_name))
        total = int(rows[-1][4])
        commits = [(int(end), int(n), int(x), int.from_bytes(ts, "big", signed=True) + PG_EPOCH_US)
                   for end, n, x, ts, _ in rows[:-1]]
        return commits, total

    def lag(self, lsn: int) -> int:
        """Bytes of WAL between ``lsn`` and the server's current WAL position."""
        return max(0, self.session.current_lsn() - lsn)

    def log_lag(self, end: dict[str, Any]) -> None:
        """Log the slot's lag behind the WAL at INFO, at most every 10 s."""
        now = time.monotonic()
        if now - self._last_lag_log < 10.0:
            return
        self._last_lag_log = now
        log.info("%s: replication slot %s lag %s bytes behind the WAL at offset %s", self.settings.name,
                 self.settings.slot_name, self.lag(int(end["lsn"])), lsn_text(int(end["lsn"])))
