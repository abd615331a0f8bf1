"""Membership: a worker's heartbeat thread, which renews its lease, rebalances and applies its assignments.

A worker joins once its Spark session is up. Then every ``heartbeat.interval.ms`` (or at once after
:meth:`GroupMember.wake`, e.g. when a connector was created):

1. renew the lease (``session.timeout.ms``); when it had run out (the worker was paused, or cut off from the
   store), join again: connectors still assigned under the same epoch keep running, those given to others are
   stopped by step 3, and their commits were refused by the fence meanwhile;
2. run a rebalance (:func:`~.assignment.plan`, one at a time across the group under the store's lock);
3. hand the assignments to :meth:`~.service.GroupService.apply`.

A worker that cannot reach the store for longer than its session stops every query it runs
(:meth:`~.service.GroupService.fence_all`): others may have taken them over.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from .assignment import plan
from .store import GroupStore

if TYPE_CHECKING:
    from .service import GroupService

__all__ = ["GroupMember"]

log = logging.getLogger(__name__)


class GroupMember:
    """The heartbeat thread of one worker (see the module docstring)."""

    def __init__(self, service: GroupService, store: GroupStore, *, heartbeat_ms: int, session_ms: int):
        self.service, self.store = service, store
        self.heartbeat_s, self.session_ms = heartbeat_ms / 1000, session_ms
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_ok = time.monotonic()
        self._fenced = False
        self._joined = False

    def start(self) -> None:
        """Join once the worker's Spark session is up (a worker still starting would hold connectors it cannot
        run yet), then heartbeat until :meth:`stop`."""
        self._thread = threading.Thread(target=self._loop, name="kconnect-group-member", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run the next heartbeat now."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stopping.is_set() and not self.service.wait_ready(timeout=1.0):
            pass
        self._last_ok = time.monotonic()
        while not self._stopping.is_set():
            self.tick()
            self._wake.wait(self.heartbeat_s)
            self._wake.clear()

    def tick(self) -> None:
        """One heartbeat: renew the lease, rebalance, apply the assignments."""
        me = self.service.worker_id
        try:
            if not self._joined:
                self.store.join(me, self.service.url, self.session_ms)
                self._joined = True
                log.info("Worker %s joined group %s", me, self.service.group_id)
            elif not self.store.heartbeat(me, self.session_ms):
                log.warning("Worker %s: its lease in group %s had run out; joining again", me,
                            self.service.group_id)
                self.store.join(me, self.service.url, self.session_ms)
            self._last_ok, self._fenced = time.monotonic(), False
            self.store.rebalance(plan)
            self.service.apply(self.store.assignments())
        except Exception:
            log.exception("Worker %s: heartbeat in group %s failed", me, self.service.group_id)
            if not self._fenced and time.monotonic() - self._last_ok > self.session_ms / 1000:
                log.error("Worker %s has not reached the group store for longer than session.timeout.ms: "
                          "stopping its connectors (others may run them now)", me)
                self._fenced = True
                self.service.fence_all()
