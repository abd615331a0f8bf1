"""Fencing: the epoch a worker holds a connector under is checked against the store before each sink commit.

The worker writes its fence file (:class:`FenceFile`: the store's connection settings, this worker's id and
``{sink app id: [connector, epoch]}`` of the queries it runs) into a private directory and names it in
``KCONNECT_COMMIT_FENCE`` before its Spark driver starts; every Python process Spark starts for a commit inherits
the variable, and :func:`spark_connect_bridge.core.fencing.before_commit` calls :func:`check` from there. A
worker that lost a connector (another worker holds it under a newer epoch) fails its commit with
:class:`~spark_connect_bridge.errors.FencedError`: the batch is not committed and the query stops; the new owner
replays it from the shared checkpoint, and the sinks' own batch-id idempotence covers a commit that had passed
its check just before the lease moved.

The file is mode 0600 in a 0700 directory, as it holds the store's password when there is one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from typing import Any

from ...core.fencing import FENCE_ENV
from ...errors import FencedError
from .postgres import connect

__all__ = ["FenceFile", "POSTGRES_CHECK", "check", "refuse_unless_held"]

log = logging.getLogger(__name__)


class FenceFile:
    """This worker's fence file; :meth:`hold` and :meth:`drop` change the epochs it commits under. ``checker``
    (``"module:function"``) is the store's check, ``settings`` what it needs to reach the store.

    >>> fence = FenceFile(POSTGRES_CHECK, {"url": "postgresql://db/connect", "password": None}, "g", "w:8083")
    >>> fence.remove()
    """

    def __init__(self, checker: str, settings: dict[str, Any], group_id: str, worker_id: str):
        self._dir = tempfile.mkdtemp(prefix="kconnect-fence-")
        os.chmod(self._dir, 0o700)
        self.path = os.path.join(self._dir, "fence.json")
        self._doc: dict[str, Any] = {**settings, "checker": checker, "group": group_id, "worker": worker_id,
                                     "apps": {}}
        self._lock = threading.Lock()
        self._write()

    def __repr__(self) -> str:
        return f"FenceFile({self.path!r})"

    def install(self) -> None:
        """Name the file in the environment of this process and of every process started after (Spark's)."""
        os.environ[FENCE_ENV] = self.path

    def hold(self, app_id: str, connector: str, epoch: int) -> None:
        with self._lock:
            self._doc["apps"][app_id] = [connector, int(epoch)]
            self._write()

    def drop(self, connector: str) -> None:
        with self._lock:
            self._doc["apps"] = {a: held for a, held in self._doc["apps"].items() if held[0] != connector}
            self._write()

    def set_worker(self, worker_id: str) -> None:
        with self._lock:
            self._doc["worker"] = worker_id
            self._write()

    def _write(self) -> None:
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self._doc, f)
        os.replace(tmp, self.path)  # a commit reads the old or the new file, never half of one

    def remove(self) -> None:
        if os.environ.get(FENCE_ENV) == self.path:
            del os.environ[FENCE_ENV]
        shutil.rmtree(self._dir, ignore_errors=True)


def check(doc: dict[str, Any], connector: str, epoch: int) -> None:
    """The PostgreSQL store's check: raise :class:`FencedError` unless ``doc``'s worker still holds ``connector``
    under ``epoch``."""
    with connect(doc["url"], doc.get("password")) as conn, conn.cursor() as cur:
        cur.execute("SELECT worker_id, epoch FROM kconnect_group_assignments WHERE group_id = %s "
                    "AND connector = %s", (doc["group"], connector))
        row = cur.fetchone()
    refuse_unless_held(doc, connector, epoch, (row[0], int(row[1])) if row else None)


#: The checker of a fence file of a PostgreSQL group.
POSTGRES_CHECK = f"{__name__}:check"


def refuse_unless_held(doc: dict[str, Any], connector: str, epoch: int, row: tuple[str | None, int] | None) -> None:
    """Raise :class:`FencedError` unless ``row`` (the store's owner and epoch of ``connector``) is ``doc``'s worker
    under ``epoch``."""
    if row is None or row[0] != doc["worker"] or row[1] != epoch:
        owner = f"worker {row[0]} under epoch {row[1]}" if row else "no worker"
        log.error("Worker %s fenced: connector %s belongs to %s now; its commit under epoch %d is refused",
                  doc["worker"], connector, owner, epoch)
        raise FencedError(f"Worker {doc['worker']} lost connector {connector}: it belongs to {owner} now; this "
                          f"commit (epoch {epoch}) is refused and the batch is left to the new owner")
