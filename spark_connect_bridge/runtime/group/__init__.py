"""Distributed mode: a group of kconnect workers that share configs, target states and statuses, spread the
connectors among themselves, and take over a dead worker's connectors from their checkpoints.

``kconnect distributed worker.properties`` runs one worker of the group named by ``group.id``; the workers
coordinate through Kafka (``bootstrap.servers``, as Kafka Connect's), PostgreSQL or an S3 bucket (``group.store.url``)
behind one small interface (:class:`~.store.GroupStore`). See the docs' "A group of workers" (docs/tasks/group.md).
"""

from __future__ import annotations

from ...errors import ConfigError, ConfigProblem
from ..standalone import run
from ..worker_config import load_worker_config
from .service import GroupService
from .store import GroupStore

__all__ = ["GroupService", "GroupStore", "run_distributed"]


def run_distributed(worker_properties: str, *, live: bool = True) -> int:
    """``kconnect distributed worker.properties`` (like ``connect-distributed``): exit code 2 on a startup
    failure."""
    config = load_worker_config(worker_properties)
    if not config.group_id:
        raise ConfigError([ConfigProblem("group.id", 'Missing required configuration "group.id" for a distributed '
                                                     'worker')],
                          context="worker config")
    return run(worker_properties, (), live=live, service_class=GroupService)
