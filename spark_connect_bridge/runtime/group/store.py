"""The one interface a distributed worker group coordinates through (:class:`GroupStore`) and its values.

A store keeps, for one ``group.id``: the members and their leases (Kafka's group membership), each connector's
stored state (``config.storage.topic``: config, target state, checkpoint generation), restart requests, each
connector's assignment (owner, epoch, a pending hand-over) and the owner's status report
(``status.storage.topic``). Offsets are not in it: they stay in each query's checkpoint, on storage every worker
reaches (``offset.storage.dir``).

Every decision about time is made on the store's clock (leases expire on it), so workers' clocks need not agree.
Three stores implement it: Kafka's group protocol and compacted topics (:mod:`.kafka`, where the worker has
``bootstrap.servers``), PostgreSQL (:mod:`.postgres`, ``group.store.url=postgresql://...``) and an S3 bucket
(:mod:`.bucket`, ``group.store.url=s3a://...``: one object changed by compare-and-swap). On Kafka only the group's
leader rebalances (:meth:`GroupStore.rebalance` returns no moves on the others) and a finished hand-over
(:meth:`GroupStore.release`) takes effect at the leader's next rebalance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Member", "Assignment", "StoredConnector", "GroupView", "Move", "GroupStore"]


@dataclass(frozen=True)
class Member:
    """A worker of the group: its id (``host:port``, as Kafka's), its REST URL and whether its lease is live."""

    worker_id: str
    url: str
    live: bool = True
    #: Its lease ran out longer ago than ``scheduled.rebalance.max.delay.ms``: its connectors go to others.
    gone: bool = False


@dataclass(frozen=True)
class Assignment:
    """Who runs a connector, under which epoch (the fencing token), and what its owner last reported."""

    connector: str
    worker_id: str | None
    epoch: int
    #: The worker the connector moves to once its owner has stopped it (an incremental rebalance's revocation).
    pending_worker: str | None = None
    state: str | None = None
    trace: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredConnector:
    """A connector's stored state: the :class:`~spark_connect_bridge.runtime.state.ConnectorState` document
    (config encrypted under the group's key) and the count of restarts requested through any worker."""

    name: str
    doc: dict[str, Any]
    restarts: int = 0
    only_failed: bool = False


@dataclass(frozen=True)
class GroupView:
    """What a rebalance decides from: the members, the connectors and their current assignments."""

    members: tuple[Member, ...]
    connectors: tuple[str, ...]
    assignments: dict[str, Assignment]


@dataclass(frozen=True)
class Move:
    """One change a rebalance makes: give ``connector`` to ``worker_id`` now (a new epoch; ``None`` deletes the
    assignment of a deleted connector), or, with ``pending``, ask its owner to hand it over."""

    connector: str
    worker_id: str | None
    pending: bool = False


class GroupStore(Protocol):
    """Membership, connector states, assignments with epochs, statuses: what a group of workers shares."""

    # -- membership ---------------------------------------------------------------------------------
    def join(self, worker_id: str, url: str, session_timeout_ms: int) -> None:
        """Add (or renew) ``worker_id`` with a lease of ``session_timeout_ms``."""

    def heartbeat(self, worker_id: str, session_timeout_ms: int) -> bool:
        """Renew the lease; False when it had already run out (the worker must stop its work and join again)."""

    def leave(self, worker_id: str) -> None:
        """Remove the member and free its connectors for the others at once (a clean shutdown)."""

    def members(self) -> list[Member]:
        """Every member whose lease has not run out."""

    # -- connector states (config.storage.topic) ----------------------------------------------------
    def put_connector(self, name: str, doc: dict[str, Any], *, create: bool = False) -> bool:
        """Store a connector's state: with ``create``, only if the name is new (False: it exists); without, only
        if it exists (False: it was deleted). Atomic across the group: of workers creating one name at once,
        exactly one stores its state."""

    def get_connector(self, name: str) -> StoredConnector | None:
        """One connector's stored state."""

    def connectors(self) -> list[StoredConnector]:
        """Every stored connector."""

    def delete_connector(self, name: str) -> bool:
        """Delete a connector's state (its owner stops it and removes its checkpoints); False: there was none."""

    def request_restart(self, name: str, *, only_failed: bool = False) -> None:
        """Ask the owner, wherever it runs, to restart the connector's query."""

    # -- assignments (epochs are fencing tokens) ----------------------------------------------------
    def rebalance(self, decide: Callable[[GroupView], list[Move]]) -> list[Move]:
        """Apply ``decide``'s moves atomically, one rebalance at a time across the group; a new owner gets an
        epoch larger than every epoch before it."""

    def assignments(self) -> dict[str, Assignment]:
        """Every connector's assignment and status report."""

    def release(self, connector: str, worker_id: str, epoch: int) -> bool:
        """The owner stopped the connector: hand it to the pending worker (a new epoch). False: not ours."""

    def report(self, connector: str, worker_id: str, epoch: int, state: str, trace: str | None,
               metrics: dict[str, Any]) -> bool:
        """The owner's status of the connector; False (nothing written) when the epoch is no longer current."""

    def current_epoch(self, connector: str) -> tuple[str | None, int] | None:
        """The connector's owner and epoch (None: not assigned)."""

    def close(self) -> None:
        """Release the store's connections."""
