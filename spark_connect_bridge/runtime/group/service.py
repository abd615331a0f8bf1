"""The service layer of a worker in a group: every REST operation on any worker, queries only on the owner.

:class:`GroupService` is the standalone :class:`~spark_connect_bridge.runtime.service.ConnectService` with three
things changed:

* connector states live in the group store (:class:`GroupStateStore` stands in for the per-worker JSON files),
  so a connector created through one worker is read through any other;
* a query runs only on the worker the group assigned the connector to, under the assignment's epoch (written to
  the fence file before the query starts, so its commits are checked against the store);
* requests that need the owner reach it through the store: a target state (pause, resume, stop) is part of the
  stored state; a restart bumps the connector's restart counter; the owner applies both on its next heartbeat.
  Status comes from the owner's reports (``worker_id`` says which worker runs the connector).

:class:`~.membership.GroupMember` drives it: every ``heartbeat.interval.ms`` it renews the lease, runs a
rebalance and calls :meth:`GroupService.apply` with the assignments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ...connectors.base import checkpoint_app_id
from ...core.locations import Locations
from ..errors import NotFoundError
from ..secrets import ConfigCipher
from ..service import ConnectService
from ..state import ConnectorState
from ..worker import ConnectorRuntime
from ..worker_config import WorkerConfig
from .bucket import BUCKET_CHECK, BucketGroupStore
from .fencing import POSTGRES_CHECK, FenceFile
from .kafka import KAFKA_CHECK, KafkaGroupStore, KafkaTopics
from .membership import GroupMember
from .postgres import PostgresGroupStore
from .store import Assignment, GroupStore

__all__ = ["GroupService", "GroupStateStore", "open_store", "fence_settings"]

log = logging.getLogger(__name__)


def _kafka_client(config: WorkerConfig) -> dict[str, str]:
    return {"bootstrap.servers": str(config.bootstrap_servers), **config.kafka_client}


def _kafka_topics(config: WorkerConfig) -> KafkaTopics:
    return KafkaTopics(str(config.config_storage_topic), str(config.status_storage_topic),
                       int(config.config_storage_replication_factor), int(config.status_storage_replication_factor),
                       int(config.status_storage_partitions))


def _s3a_settings(config: WorkerConfig) -> dict[str, str]:
    """The worker's ``spark.hadoop.fs.s3a.*`` settings (its bucket's endpoint and keys)."""
    return {k: v for k, v in config.spark_conf.items() if k.startswith("spark.hadoop.fs.s3a.")}


def _in_bucket(config: WorkerConfig) -> bool:
    return str(config.group_store_url or "").lower().startswith("s3a://")


def open_store(config: WorkerConfig) -> GroupStore:
    """The group store a worker config names: PostgreSQL or a bucket with ``group.store.url``, else Kafka
    (``bootstrap.servers`` and the config/status storage topics, as Kafka Connect's distributed worker)."""
    delay = config.scheduled_rebalance_max_delay_ms
    if _in_bucket(config):
        return BucketGroupStore(str(config.group_store_url), str(config.group_id), _s3a_settings(config),
                                rebalance_delay_ms=delay)
    if config.group_store_url:
        password = config.group_store_password
        return PostgresGroupStore(config.group_store_url, str(config.group_id),
                                  password=password.value() if password is not None else None,
                                  rebalance_delay_ms=delay)
    return KafkaGroupStore(_kafka_client(config), str(config.group_id), topics=_kafka_topics(config),
                           rebalance_delay_ms=delay, heartbeat_interval_ms=config.heartbeat_interval_ms)


def fence_settings(config: WorkerConfig) -> tuple[str, dict[str, Any]]:
    """The fence file's checker and what it needs to reach the worker config's store (see :mod:`.fencing`)."""
    if _in_bucket(config):
        return BUCKET_CHECK, {"url": str(config.group_store_url), "hadoop": _s3a_settings(config)}
    if config.group_store_url:
        password = config.group_store_password
        return POSTGRES_CHECK, {"url": config.group_store_url,
                                "password": password.value() if password is not None else None}
    return KAFKA_CHECK, {"kafka": _kafka_client(config), "config_topic": _kafka_topics(config).config}


class GroupStateStore:
    """The :class:`~spark_connect_bridge.runtime.state.StateStore` interface over a :class:`GroupStore`: configs
    are encrypted under the group's key file (``state.encryption.key.file``, the same for every worker)."""

    def __init__(self, store: GroupStore, key_file: str | None, locations: Locations | None = None):
        self.store = store
        self._cipher = ConfigCipher(key_file, locations) if key_file else None

    def __repr__(self) -> str:
        return f"GroupStateStore({self.store!r})"

    def decode(self, doc: dict[str, Any]) -> ConnectorState:
        return ConnectorState.from_json(doc, self._cipher)

    def load_all(self) -> list[ConnectorState]:
        out = []
        for stored in self.store.connectors():
            try:
                out.append(self.decode(stored.doc))
            except (ValueError, KeyError) as e:  # one damaged state must not keep the others from running
                log.error("Cannot read the stored state of connector %s: %s", stored.name, e)
        return sorted(out, key=lambda s: (s.created, s.name))

    def get(self, name: str) -> ConnectorState | None:
        stored = self.store.get_connector(name)
        return self.decode(stored.doc) if stored else None

    def put(self, state: ConnectorState) -> None:
        """Replace a stored connector's state; NotFoundError when it was deleted (through another worker)."""
        if not self.store.put_connector(state.name, state.to_json(self._cipher)):
            raise NotFoundError(f"Connector {state.name} not found")

    def create(self, state: ConnectorState) -> bool:
        """Store a new connector; False when the name exists already (created through another worker: of
        workers creating one name at once, exactly one gets True)."""
        return self.store.put_connector(state.name, state.to_json(self._cipher), create=True)

    def delete(self, name: str) -> None:
        """Delete a stored connector; NotFoundError when there was none (deleted through another worker)."""
        if not self.store.delete_connector(name):
            raise NotFoundError(f"Connector {name} not found")


class GroupService(ConnectService):
    """A worker of a group (see the module docstring). ``store`` defaults to the worker config's
    (:func:`open_store`)."""

    def __init__(self, config: WorkerConfig, spark: Any = None, store: GroupStore | None = None):
        super().__init__(config, spark)
        self.group_id = str(config.group_id)
        self.store: GroupStore = store or open_store(config)
        self.states = GroupStateStore(self.store, config.key_file, config.locations)  # type: ignore[assignment]
        self.fence = FenceFile(*fence_settings(config), self.group_id, self.worker_id)
        self.fence.install()  # before the Spark driver starts: its commit processes inherit the variable
        self.member = GroupMember(self, self.store, heartbeat_ms=config.heartbeat_interval_ms,
                                  session_ms=config.session_timeout_ms)
        #: connector -> epoch of the connectors this worker runs
        self.owned: dict[str, int] = {}
        self._releasing: set[str] = set()
        self._restarts_seen: dict[str, int] = {}
        self.cluster_id = "kconnect-group-" + self.group_id

    @property
    def url(self) -> str:
        return f"{self.config.scheme}://{self.worker_id}"

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Join the group and start the worker; connectors arrive with the first rebalance."""
        host = self.config.rest_advertised_host_name
        port = self.config.rest_advertised_port
        if host or port:
            own_host, _, own_port = self.worker_id.rpartition(":")
            self.worker_id = f"{host or own_host}:{port or own_port}"
        self.fence.set_worker(self.worker_id)
        self._sync()  # restarts asked for before this worker started are not replayed: their counts are seen
        self.worker.start()
        self.member.start()

    def shutdown(self) -> None:
        """Stop the queries and leave the group: the others take the connectors over at once."""
        self.member.stop()
        self.worker.shutdown()
        try:
            self.store.leave(self.worker_id)
        except Exception:  # the store is down: the lease runs out instead
            log.exception("Leaving group %s failed", self.group_id)
        self.fence.remove()
        self.store.close()

    # -- state from the store -----------------------------------------------------------------------
    def _sync(self) -> None:
        """Bring the local view of every connector in line with the store; apply changes to owned ones."""
        stored = {s.name: s for s in self.store.connectors()}
        with self._lock:
            for name in list(self.worker.runtimes):
                if name not in stored:
                    self._forget(name)
            for name, entry in stored.items():
                try:
                    state = self.states.decode(entry.doc)  # type: ignore[attr-defined]
                except (ValueError, KeyError) as e:
                    log.error("Cannot read the stored state of connector %s: %s", name, e)
                    continue
                rt = self.worker.runtimes.get(name)
                if rt is None:
                    self.worker.runtimes[name] = ConnectorRuntime(state, kind=self._kind_of(state.config))
                    self._restarts_seen.setdefault(name, entry.restarts)
                    continue
                old = rt.state
                changed = (old.config != state.config, old.target_state != state.target_state,
                           old.generation != state.generation)
                if any(changed):
                    rt.state, rt.kind = state, self._kind_of(state.config)
                else:
                    rt.state.topics_reset = state.topics_reset
                restart = changed[0] or changed[2]
                seen = self._restarts_seen.get(name, entry.restarts)
                self._restarts_seen[name] = entry.restarts
                if entry.restarts > seen and (not entry.only_failed or rt.phase == "FAILED"):
                    restart = True
                if name in self.owned and (any(changed) or restart):
                    self._run(rt, restart=restart and state.target_state == "STARTED")

    def _forget(self, name: str) -> None:
        """A connector deleted through another worker: stop it here if it ran here, and remove its checkpoints."""
        rt = self.worker.runtimes.pop(name)
        self._restarts_seen.pop(name, None)
        if self.owned.pop(name, None) is None:
            return
        self.fence.drop(name)

        def remove() -> None:
            self._stop_query(rt)
            self._remove_checkpoints(rt)

        self.worker.submit(remove)
        log.info("Connector %s deleted: stopped here", name)

    def _run(self, rt: ConnectorRuntime, *, restart: bool = False) -> Any:
        """Reconcile an owned connector's query under its epoch."""
        self.fence.hold(checkpoint_app_id(self.worker.checkpoint(rt.state)), rt.name, self.owned[rt.name])
        return super()._reconcile(rt, restart=restart)

    # -- assignments (called by GroupMember every heartbeat) ----------------------------------------
    def apply(self, assignments: Mapping[str, Assignment]) -> None:
        """Start what the group gave this worker, stop what it took away, hand over what a rebalance moves,
        and report the status of what runs here."""
        with self._lock:
            self._sync()
            for name, rt in list(self.worker.runtimes.items()):
                a = assignments.get(name)
                mine = a is not None and a.worker_id == self.worker_id
                if name in self._releasing:
                    continue
                if mine and a is not None and a.pending_worker is not None:
                    self._hand_over(rt, a)
                elif mine and a is not None and self.owned.get(name) != a.epoch:
                    restart = name in self.owned
                    self.owned[name] = a.epoch
                    rt.phase, rt.trace = "UNASSIGNED", None
                    log.info("Connector %s assigned to this worker (epoch %d)", name, a.epoch)
                    self._run(rt, restart=restart)
                elif not mine and name in self.owned:
                    log.warning("Connector %s now belongs to %s: stopping it here", name,
                                a.worker_id if a else "no worker")
                    self._stop_here(rt)
            self._report(assignments)

    def _hand_over(self, rt: ConnectorRuntime, a: Assignment) -> None:
        name, epoch = rt.name, a.epoch
        self._releasing.add(name)
        self.owned.pop(name, None)
        self.fence.drop(name)

        def stop_then_release() -> None:
            try:
                self._stop_query(rt)
                if self.store.release(name, self.worker_id, epoch):
                    log.info("Connector %s handed over to %s", name, a.pending_worker)
            finally:
                self._releasing.discard(name)

        self.worker.submit(stop_then_release)

    def _stop_here(self, rt: ConnectorRuntime) -> None:
        self.owned.pop(rt.name, None)
        self.fence.drop(rt.name)

        self.worker.submit(lambda: self._stop_query(rt))

    def _stop_query(self, rt: ConnectorRuntime) -> None:
        """Stop a query this worker no longer owns (herder thread), including a sink still waiting for its
        topics, which the worker's poll would otherwise start once they appear."""
        self.worker.stop_query(rt)
        rt.metrics.waiting_for_topics = False
        rt.phase, rt.trace = "UNASSIGNED", None

    def fence_all(self) -> None:
        """This worker cannot reach the store for longer than its session: others may own its connectors now."""
        with self._lock:
            for name in list(self.owned):
                rt = self.worker.runtimes.get(name)
                if rt is not None:
                    self._stop_here(rt)
                else:
                    self.owned.pop(name, None)

    def _report(self, assignments: Mapping[str, Assignment]) -> None:
        for name, epoch in list(self.owned.items()):
            rt = self.worker.runtimes.get(name)
            if rt is None:
                continue
            phase = self._phase(rt)
            a = assignments.get(name)
            trace = rt.trace if phase == "FAILED" else None
            metrics = rt.metrics.to_json()
            if a is not None and (a.state, a.trace, a.metrics) == (phase, trace, metrics):
                continue
            self.store.report(name, self.worker_id, epoch, phase, trace, metrics)

    # -- REST operations that differ from a standalone worker ---------------------------------------
    def _runtime(self, name: str) -> ConnectorRuntime:
        self._sync()
        return super()._runtime(name)

    def list_connectors(self) -> list[str]:
        self._sync()
        return super().list_connectors()

    def _reconcile(self, rt: ConnectorRuntime, *, restart: bool = False) -> Any:
        if rt.name in self.owned:
            return self._run(rt, restart=restart)
        if restart:  # the owner restarts it, wherever it runs
            self.store.request_restart(rt.name)
        self.member.wake()  # a new connector: assign it now rather than at the next heartbeat
        return None

    def create(self, config: Mapping[str, Any], *, initial_state: str | None = None) -> dict[str, Any]:
        self._sync()
        return super().create(config, initial_state=initial_state)

    def delete(self, name: str) -> None:
        with self._lock:
            rt = self._runtime(name)
            if name in self.owned:
                super().delete(name)  # NotFoundError (deleted through another worker meanwhile): still owned
                self.owned.pop(name)
                self.fence.drop(name)
                return
            self.states.delete(name)
            del self.worker.runtimes[name]
            owner = self.store.current_epoch(name)
            live = {m.worker_id for m in self.store.members()}
            if owner is None or owner[0] not in live:  # nobody runs it: remove its checkpoints from here
                self.worker.submit(lambda: self._remove_checkpoints(rt))
            rt.state.target_state = "STOPPED"
            log.info("Connector %s deleted", name)

    def _remove_checkpoints(self, rt: ConnectorRuntime) -> None:
        """(herder thread) Remove the deleted incarnation's checkpoint only: the name may have been created again
        through another worker meanwhile, under a new generation (a checkpoint of its own) this one has not seen."""
        self.worker.remove_checkpoint(rt.state)

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any] | None:
        with self._lock:
            if name in self.owned or name not in self.list_connectors():
                return super().restart(name, include_tasks=include_tasks, only_failed=only_failed)
            rt = self._runtime(name)
            if rt.state.target_state == "STARTED":
                self.store.request_restart(name, only_failed=only_failed)
            if not include_tasks and not only_failed:
                return None
            return self.status(name)

    def status(self, name: str) -> dict[str, Any]:
        rt = self._runtime(name)
        if name in self.owned:
            return super().status(name)
        a = self.store.assignments().get(name)
        live = a is not None and a.worker_id in {m.worker_id for m in self.store.members()}
        phase = a.state if live and a is not None and a.state else "UNASSIGNED"  # as its live owner last reported
        worker = a.worker_id if a is not None and a.worker_id else self.worker_id
        conn: dict[str, Any] = {"state": phase, "worker_id": worker}
        if phase == "FAILED" and a is not None and a.trace:
            conn["trace"] = a.trace
        tasks = []
        if phase != "STOPPED" and rt.state.target_state != "STOPPED":
            for i in range(self._tasks_max(rt)):
                task: dict[str, Any] = {"id": i, "state": phase, "worker_id": worker}
                if "trace" in conn:
                    task["trace"] = conn["trace"]
                tasks.append(task)
        metrics = dict(a.metrics) if a is not None and a.metrics else rt.metrics.to_json()
        return {"name": name, "connector": conn, "tasks": tasks, "type": rt.kind, "metrics": metrics}
