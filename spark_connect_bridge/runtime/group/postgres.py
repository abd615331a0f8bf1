"""The :class:`~.store.GroupStore` on PostgreSQL: rows with leases, epochs from a sequence, advisory locks.

Four tables, shared by every group in the database (rows carry their ``group.id``), created on first use:

* ``kconnect_group_members``: one row per worker, its REST URL and ``expires_at`` (the lease, renewed by each
  heartbeat, on the server's clock);
* ``kconnect_group_connectors``: each connector's stored state document (config encrypted under the group's
  key) and a restart counter; a create is ``INSERT ... ON CONFLICT DO NOTHING`` (of workers creating one name at
  once, exactly one inserts), a replace or a delete touches only a row that exists;
* ``kconnect_group_assignments``: each connector's owner, ``epoch`` (the fencing token, from the sequence
  ``kconnect_group_epochs``: every new owner's epoch is larger than any before it), a pending hand-over, and the
  owner's status report;
* rebalances of one group run one at a time under a transaction-scoped advisory lock, so any worker may run one
  and no leader election is needed.

A commit's fence check (:func:`spark_connect_bridge.runtime.group.fencing.check`) is one indexed ``SELECT``.

>>> store = PostgresGroupStore("postgresql://kconnect@db:5432/connect", "connect-cluster")  # doctest: +SKIP
>>> store.join("10.0.0.5:8083", "http://10.0.0.5:8083", 10_000)                            # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import ConnectError
from .store import Assignment, GroupView, Member, Move, StoredConnector

__all__ = ["PostgresGroupStore", "connect"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kconnect_group_members (
    group_id text NOT NULL, worker_id text NOT NULL, url text NOT NULL,
    joined_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, worker_id));
CREATE TABLE IF NOT EXISTS kconnect_group_connectors (
    group_id text NOT NULL, name text NOT NULL, doc jsonb NOT NULL,
    restarts bigint NOT NULL DEFAULT 0, only_failed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (group_id, name));
CREATE SEQUENCE IF NOT EXISTS kconnect_group_epochs;
CREATE TABLE IF NOT EXISTS kconnect_group_assignments (
    group_id text NOT NULL, connector text NOT NULL, worker_id text, epoch bigint NOT NULL,
    pending_worker text, state text, trace text, metrics jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, connector));
"""


def connect(url: str, password: str | None = None) -> Any:
    """A psycopg connection to the store's database (``group.store.url``, ``group.store.password``)."""
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - psycopg is a dependency of the jdbc extra
        raise ConnectError("The PostgreSQL group store needs psycopg: pip install 'spark_connect_bridge[jdbc]'") \
            from e
    kwargs: dict[str, Any] = {"connect_timeout": 10, "application_name": "kconnect-group"}
    if password:
        kwargs["password"] = password
    return psycopg.connect(url, **kwargs)


class PostgresGroupStore:
    """A group's shared state in PostgreSQL (see the module docstring). Thread-safe: one connection, one lock;
    a broken connection is opened again on the next call."""

    def __init__(self, url: str, group_id: str, *, password: str | None = None, rebalance_delay_ms: int = 0):
        self._url, self._password = url, password
        self.group_id = group_id
        self.rebalance_delay_ms = int(rebalance_delay_ms)
        self._lock = threading.RLock()
        self._conn: Any = None
        with self._tx() as cur:
            # One worker creates the tables; the others wait for it (CREATE ... IF NOT EXISTS races otherwise).
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('kconnect-group-schema'))")
            cur.execute(_SCHEMA)

    def __repr__(self) -> str:  # never the URL: it may carry a password
        return f"PostgresGroupStore(group_id={self.group_id!r})"

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._url, self._password)
            try:
                with self._conn.transaction(), self._conn.cursor() as cur:
                    yield cur
            except Exception:
                if self._conn.broken:
                    self._conn = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- membership ---------------------------------------------------------------------------------
    def join(self, worker_id: str, url: str, session_timeout_ms: int) -> None:
        with self._tx() as cur:
            cur.execute("INSERT INTO kconnect_group_members (group_id, worker_id, url, expires_at) "
                        "VALUES (%s, %s, %s, now() + make_interval(secs => %s)) "
                        "ON CONFLICT (group_id, worker_id) DO UPDATE SET url = EXCLUDED.url, "
                        "joined_at = now(), expires_at = EXCLUDED.expires_at",
                        (self.group_id, worker_id, url, session_timeout_ms / 1000))

    def heartbeat(self, worker_id: str, session_timeout_ms: int) -> bool:
        with self._tx() as cur:
            cur.execute("UPDATE kconnect_group_members SET expires_at = now() + make_interval(secs => %s) "
                        "WHERE group_id = %s AND worker_id = %s AND expires_at > now()",
                        (session_timeout_ms / 1000, self.group_id, worker_id))
            return bool(cur.rowcount)

    def leave(self, worker_id: str) -> None:
        with self._tx() as cur:
            cur.execute("DELETE FROM kconnect_group_members WHERE group_id = %s AND worker_id = %s",
                        (self.group_id, worker_id))

    def members(self) -> list[Member]:
        return [m for m in self._members() if m.live]

    def _members(self, cur: Any = None) -> list[Member]:
        sql = ("SELECT worker_id, url, expires_at > now(), "
               "expires_at + make_interval(secs => %s) <= now() FROM kconnect_group_members "
               "WHERE group_id = %s ORDER BY worker_id")
        params = (self.rebalance_delay_ms / 1000, self.group_id)
        if cur is None:
            with self._tx() as own:
                own.execute(sql, params)
                rows = own.fetchall()
        else:
            cur.execute(sql, params)
            rows = cur.fetchall()
        return [Member(w, u, bool(live), bool(gone)) for w, u, live, gone in rows]

    # -- connector states ---------------------------------------------------------------------------
    def put_connector(self, name: str, doc: dict[str, Any], *, create: bool = False) -> bool:
        with self._tx() as cur:
            if create:
                cur.execute("INSERT INTO kconnect_group_connectors (group_id, name, doc) VALUES (%s, %s, %s) "
                            "ON CONFLICT DO NOTHING", (self.group_id, name, json.dumps(doc)))
            else:  # only a connector that exists: one deleted through another worker is not brought back
                cur.execute("UPDATE kconnect_group_connectors SET doc = %s WHERE group_id = %s AND name = %s",
                            (json.dumps(doc), self.group_id, name))
            return bool(cur.rowcount)

    def get_connector(self, name: str) -> StoredConnector | None:
        with self._tx() as cur:
            cur.execute("SELECT name, doc, restarts, only_failed FROM kconnect_group_connectors "
                        "WHERE group_id = %s AND name = %s", (self.group_id, name))
            row = cur.fetchone()
        return StoredConnector(row[0], row[1], int(row[2]), bool(row[3])) if row else None

    def connectors(self) -> list[StoredConnector]:
        with self._tx() as cur:
            cur.execute("SELECT name, doc, restarts, only_failed FROM kconnect_group_connectors "
                        "WHERE group_id = %s ORDER BY name", (self.group_id,))
            return [StoredConnector(n, d, int(r), bool(o)) for n, d, r, o in cur.fetchall()]

    def delete_connector(self, name: str) -> bool:
        with self._tx() as cur:
            cur.execute("DELETE FROM kconnect_group_connectors WHERE group_id = %s AND name = %s",
                        (self.group_id, name))
            return bool(cur.rowcount)

    def request_restart(self, name: str, *, only_failed: bool = False) -> None:
        with self._tx() as cur:
            cur.execute("UPDATE kconnect_group_connectors SET restarts = restarts + 1, only_failed = %s "
                        "WHERE group_id = %s AND name = %s", (only_failed, self.group_id, name))

    # -- assignments --------------------------------------------------------------------------------
    def rebalance(self, decide: Callable[[GroupView], list[Move]]) -> list[Move]:
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("kconnect-rebalance:" + self.group_id,))
            members = self._members(cur)
            cur.execute("SELECT name FROM kconnect_group_connectors WHERE group_id = %s ORDER BY name",
                        (self.group_id,))
            names = tuple(r[0] for r in cur.fetchall())
            view = GroupView(tuple(members), names, self._assignments(cur))
            moves = decide(view)
            for move in moves:
                if move.worker_id is None:
                    cur.execute("DELETE FROM kconnect_group_assignments WHERE group_id = %s AND connector = %s",
                                (self.group_id, move.connector))
                elif move.pending:
                    cur.execute("UPDATE kconnect_group_assignments SET pending_worker = %s "
                                "WHERE group_id = %s AND connector = %s",
                                (move.worker_id, self.group_id, move.connector))
                else:
                    cur.execute("INSERT INTO kconnect_group_assignments (group_id, connector, worker_id, epoch, "
                                "state) VALUES (%s, %s, %s, nextval('kconnect_group_epochs'), 'UNASSIGNED') "
                                "ON CONFLICT (group_id, connector) DO UPDATE SET worker_id = EXCLUDED.worker_id, "
                                "epoch = EXCLUDED.epoch, pending_worker = NULL, state = 'UNASSIGNED', "
                                "trace = NULL, metrics = '{}', updated_at = now()",
                                (self.group_id, move.connector, move.worker_id))
            # Members gone for good that own nothing any more: forget them.
            cur.execute("DELETE FROM kconnect_group_members m WHERE m.group_id = %s "
                        "AND m.expires_at + make_interval(secs => %s) <= now() AND NOT EXISTS (SELECT 1 FROM "
                        "kconnect_group_assignments a WHERE a.group_id = m.group_id AND a.worker_id = m.worker_id)",
                        (self.group_id, self.rebalance_delay_ms / 1000))
            return moves

    def _assignments(self, cur: Any) -> dict[str, Assignment]:
        cur.execute("SELECT connector, worker_id, epoch, pending_worker, state, trace, metrics "
                    "FROM kconnect_group_assignments WHERE group_id = %s", (self.group_id,))
        return {c: Assignment(c, w, int(e), p, s, t, m or {}) for c, w, e, p, s, t, m in cur.fetchall()}

    def assignments(self) -> dict[str, Assignment]:
        with self._tx() as cur:
            return self._assignments(cur)

    def release(self, connector: str, worker_id: str, epoch: int) -> bool:
        with self._tx() as cur:
            cur.execute("UPDATE kconnect_group_assignments SET worker_id = pending_worker, pending_worker = NULL, "
                        "epoch = nextval('kconnect_group_epochs'), state = 'UNASSIGNED', trace = NULL, "
                        "metrics = '{}', updated_at = now() WHERE group_id = %s AND connector = %s "
                        "AND worker_id = %s AND epoch = %s AND pending_worker IS NOT NULL",
                        (self.group_id, connector, worker_id, epoch))
            return bool(cur.rowcount)

    def report(self, connector: str, worker_id: str, epoch: int, state: str, trace: str | None,
               metrics: dict[str, Any]) -> bool:
        with self._tx() as cur:
            cur.execute("UPDATE kconnect_group_assignments SET state = %s, trace = %s, metrics = %s, "
                        "updated_at = now() WHERE group_id = %s AND connector = %s AND worker_id = %s "
                        "AND epoch = %s", (state, trace, json.dumps(metrics), self.group_id, connector, worker_id,
                                           epoch))
            return bool(cur.rowcount)

    def current_epoch(self, connector: str) -> tuple[str | None, int] | None:
        with self._tx() as cur:
            cur.execute("SELECT worker_id, epoch FROM kconnect_group_assignments WHERE group_id = %s "
                        "AND connector = %s", (self.group_id, connector))
            row = cur.fetchone()
        return (row[0], int(row[1])) if row else None
