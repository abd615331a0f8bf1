"""Where a CDC micro-batch ends: at a transaction boundary, bounded by a count of changes or of log bytes.

A micro-batch must be a pure function of its offsets (Spark replays an uncommitted batch after a crash), so
the driver chooses each batch's end position before the batch runs and keeps it in the checkpoint; how it was
chosen need not be repeatable. Two ways, shared by every log-based connector:

* counted: the last transaction whose cumulative change count stays within ``max.records.per.trigger``
  (never less than one transaction): :func:`last_commit_within`;
* estimated, without decoding the batch: that many changes' worth of log bytes, the bytes per change
  measured on the first changes after the start (within bounds), never less than the first transaction:
  :func:`end_by_bytes`. The bound is approximate (a batch whose later changes are much smaller than its first
  ones, such as deletes after inserts, may hold more).

With nothing captured after the start the offset stays, unless a :class:`Heartbeat` is due
(``heartbeat.interval.ms``): then it moves over the log that holds no captured change, so the database does
not retain log for other tables' traffic. No heartbeat records are emitted.

>>> last_commit_within([(10, 3, 1, 0), (20, 5, 2, 0), (30, 9, 3, 0)], start=10, max_records=4)
((20, 2, 0), True)
>>> end_by_bytes(start=1000, first=1100, upto=10**9, max_records=100, per_change=200, least=128, most=4096)
21000
"""

from __future__ import annotations

import time
from collections.abc import Sequence

__all__ = ["Heartbeat", "end_by_bytes", "last_commit_within"]

#: (commit end position, cumulative change count, transaction id, commit time in µs) of one transaction
Commit = tuple[int, int, int, int]


def last_commit_within(commits: Sequence[Commit], start: int, max_records: int | None
                       ) -> tuple[tuple[int, int, int] | None, bool]:
    """The last commit after ``start`` whose changes since ``start`` stay within ``max_records`` (the first
    one after ``start`` whatever its size), as (position, transaction id, commit time); and whether
    ``commits`` hold more changes than that, so that no later commit can be chosen."""
    after = [c for c in commits if c[0] > start]
    before = [c for c in commits if c[0] <= start]
    base = before[-1][1] if before else 0
    chosen = None
    for pos, n, xid, ts in after:
        if max_records is not None and chosen is not None and n - base > max_records:
            break
        chosen = (pos, xid, ts)
    full = max_records is not None and bool(after) and after[-1][1] - base > max_records
    return chosen, full


def end_by_bytes(*, start: int, first: int, upto: int, max_records: int | None, per_change: int, least: int,
                 most: int) -> int:
    """``max_records`` changes' worth of log after ``start`` at ``per_change`` bytes each (taken within
    ``[least, most]``): never before ``first`` (the end of the first transaction), never past ``upto``."""
    if max_records is None:
        return max(first, upto)
    step = max_records * min(max(least, per_change), most)
    return max(first, min(upto, start + step))


class Heartbeat:
    """``heartbeat.interval.ms``: whether the offset may move over log without captured changes now."""

    def __init__(self, interval_ms: int):
        self.interval_ms = interval_ms
        self._last = 0.0

    def due(self, start: int, upto: int) -> bool:
        """True (and the interval restarts) when heartbeats are on, there is log after ``start`` and the
        interval has passed since the last one."""
        now = time.monotonic()
        if self.interval_ms > 0 and upto > start and (now - self._last) * 1000 >= self.interval_ms:
            self._last = now
            return True
        return False
