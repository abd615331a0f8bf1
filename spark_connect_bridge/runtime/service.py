"""The worker's service layer: connector lifecycle, stored configs and target states, status, offsets, plugins.

The REST API (:mod:`spark_connect_bridge.rest`) and the ``kconnect`` CLI are thin layers over
:class:`ConnectService`. Its methods take and return plain JSON-able values in Kafka Connect's REST shapes and
raise domain errors (:class:`NotFoundError`, :class:`AlreadyExistsError`, :class:`BadRequestError`,
:class:`ForbiddenError`, :class:`~spark_connect_bridge.errors.ConfigError`) that the REST layer maps to HTTP
statuses in one place.

Configs and target states are written durably before a call returns; the Spark side follows asynchronously
(in request order) on the worker's herder thread, as Kafka Connect's does. Status is what the queries do.

>>> svc = ConnectService(parse_worker_config({"offset.storage.dir": "/tmp/w"}), spark=spark)  # doctest: +SKIP
>>> svc.start()                                                                          # doctest: +SKIP
>>> svc.create({"name": "lines", "connector.class": "FileStreamSource", "file": "/tmp/in.txt",
...             "topic": "lines"})                                                       # doctest: +SKIP
>>> svc.status("lines")["connector"]["state"]                                            # doctest: +SKIP
'RUNNING'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..bus import admin as kafka_admin
from ..bus import groups as kafka_groups
from ..config import ConfigDef
from ..config.files import ConnectorRequest
from ..connectors.base import connector_config_def
from ..connectors.delta_files import committed_version, latest_version, read_commit
from ..connectors.factory import connector_class
from ..connectors.offsets import canonical, from_rest, parse_partition_key, partition_key, to_rest
from ..core import plugins
from ..core.locations import Locations
from ..errors import ConfigError, PluginNotFoundError
from ..version import __version__
from . import offsets_store
from .errors import AlreadyExistsError, BadRequestError, ConflictError, ForbiddenError, NotFoundError
from .secrets import mask_config
from .state import ConnectorState, StateStore
from .validate import check_config, validate_connector_config
from .worker import ConnectorRuntime, Worker
from .worker_config import WorkerConfig

__all__ = ["ConnectService", "NotFoundError", "AlreadyExistsError", "BadRequestError", "ForbiddenError",
           "ConflictError"]

log = logging.getLogger(__name__)

_INITIAL_STATES = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}
_SINK_PARTITION_KEYS = ("kafka_topic", "kafka_partition")


def _generation() -> int:
    # Unique per incarnation of a connector name: a checkpoint path (and so a topic-store app id) is never reused.
    return time.time_ns() // 1000


def _config_error_message(e: ConfigError, kind: str | None) -> str:
    lines = [str(p) for p in e.problems]
    return (f"Connector configuration is invalid and contains the following {len(lines)} error(s):\n"
            + "\n".join(lines) + "\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`")


class ConnectService:
    """Connector lifecycle over one :class:`~spark_connect_bridge.runtime.worker.Worker`."""

    def __init__(self, config: WorkerConfig, spark: Any = None):
        self.config = config
        self.worker = Worker(config, spark)
        self.states = StateStore(config.locations.join(config.state_dir, "_connectors"), key_file=config.key_file,
                                 locations=config.locations)
        self._lock = threading.RLock()
        self.worker_id = f"{config.host}:{config.port}"
        self.cluster_id = "kconnect-" + hashlib.sha256(config.state_dir.encode()).hexdigest()[:22]

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Load every stored connector and start the worker: each comes back in its target state, from its
        checkpoint."""
        with self._lock:
            for st in self.states.load_all():
                rt = ConnectorRuntime(st, kind=self._kind_of(st.config))
                self.worker.runtimes[st.name] = rt
                self._reconcile(rt)
        self.worker.start()

    def shutdown(self) -> None:
        """Stop every query; stored target states are kept for the next start."""
        self.worker.shutdown()

    @property
    def ready(self) -> bool:
        return self.worker.started.is_set()

    def wait_ready(self, timeout: float = 180.0) -> bool:
        return self.worker.started.wait(timeout)

    def _reconcile(self, rt: ConnectorRuntime, *, restart: bool = False) -> Any:
        return self.worker.submit(lambda: self.worker.reconcile(rt, restart=restart))

    # -- helpers ------------------------------------------------------------------------------------
    def _runtime(self, name: str) -> ConnectorRuntime:
        rt = self.worker.runtimes.get(name)
        if rt is None:
            raise NotFoundError(f"Connector {name} not found")
        return rt

    @staticmethod
    def _kind_of(config: Mapping[str, str]) -> str:
        try:
            return connector_class(config).plugin_type
        except ConfigError:
            return "unknown"

    def _validate(self, config: dict[str, str]) -> str:
        """Validate a whole connector config as the worker will run it; return its kind."""

        try:
            return check_config(config, self.worker.config).kind
        except ConfigError as e:
            raise BadRequestError(_config_error_message(e, None)) from e

    def _tasks_max(self, rt: ConnectorRuntime) -> int:
        try:
            return max(1, self.worker.checked(rt).prepared.settings.tasks_max)
        except ConfigError:  # a config that no longer checks (its status says why): one task
            return 1

    # -- configs ------------------------------------------------------------------------------------
    def list_connectors(self) -> list[str]:
        return sorted(self.worker.runtimes)

    def create(self, config: Mapping[str, Any], *, initial_state: str | None = None) -> dict[str, Any]:
        """``POST /connectors``: a new connector (409 if the name exists)."""
        if isinstance(config, ConnectorRequest) and initial_state is None:
            initial_state = config.initial_state
        cfg = {str(k): str(v) for k, v in config.items() if v is not None}
        name = cfg.get("name", "")
        self._check_name(name)
        target = self._target_of(initial_state)
        with self._lock:
            if name in self.worker.runtimes:
                raise AlreadyExistsError(f"Connector {name} already exists")
            kind = self._validate(cfg)
            st = ConnectorState(name, cfg, target, generation=_generation())
            if not self.states.create(st):  # created through another worker of a group meanwhile
                raise AlreadyExistsError(f"Connector {name} already exists")
            rt = ConnectorRuntime(st, kind=kind)
            self.worker.runtimes[name] = rt
            self._reconcile(rt)
            log.info("Connector %s created (%s, %s)", name, kind, target)
            return self.info(name)

    @staticmethod
    def _target_of(initial_state: str | None) -> str:
        if initial_state is None:
            return "STARTED"
        target = _INITIAL_STATES.get(str(initial_state).upper())
        if target is None:
            raise BadRequestError(f"Invalid initial state {initial_state}: one of RUNNING, PAUSED, STOPPED")
        return target

    @staticmethod
    def _check_name(name: str) -> None:
        if not name or not name.strip():
            raise BadRequestError("Connector name is null or empty")
        if any(ord(c) < 0x20 or ord(c) == 0x7f for c in name):
            raise BadRequestError(f"Connector name {name!r} contains ISO control characters")
        if "/" in name:
            raise BadRequestError(f"Connector name {name!r} may not contain '/' (it could not be addressed in a URL)")

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """``PUT /connectors/{name}/config``: create or replace; returns (created, info)."""
        cfg = {str(k): str(v) for k, v in config.items() if v is not None}
        if cfg.get("name", name) != name:
            raise BadRequestError(f"Connector name configuration ({cfg['name']}) doesn't match connector name in "
                                  f"the URL ({name})")
        cfg["name"] = name
        with self._lock:
            # In a group another worker may create or delete the name meanwhile: each step is atomic in the
            # store, and a lost race takes the other way once (replace what was created, create what was deleted).
            if name in self.worker.runtimes:
                try:
                    return False, self._replace_config(name, cfg)
                except NotFoundError:
                    pass
            try:
                return True, self.create(cfg)
            except AlreadyExistsError:
                return False, self._replace_config(name, cfg)

    def _replace_config(self, name: str, cfg: dict[str, str]) -> dict[str, Any]:
        rt = self._runtime(name)
        kind = self._validate(cfg)
        self.states.put(dataclasses.replace(rt.state, config=cfg))  # NotFoundError: deleted meanwhile
        rt.state.config, rt.kind = cfg, kind
        if rt.state.target_state == "STARTED":
            rt.restarting = True
            self._reconcile(rt, restart=True)
        return self.info(name)

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """``PATCH /connectors/{name}/config``: merge; a null value removes the key."""
        with self._lock:
            rt = self._runtime(name)
            if "name" in patch and patch["name"] != name:
                raise BadRequestError(f"Connector name configuration ({patch['name']}) doesn't match connector "
                                      f"name in the URL ({name})")
            cfg = dict(rt.state.config)
            for k, v in patch.items():
                if v is None:
                    cfg.pop(k, None)
                else:
                    cfg[k] = str(v).lower() if isinstance(v, bool) else str(v)
            return self.put_config(name, cfg)[1]

    def raw_config(self, name: str) -> dict[str, str]:
        return dict(self._runtime(name).state.config)

    def get_config(self, name: str) -> dict[str, str]:
        """``GET /connectors/{name}/config``: passwords masked, provider references as they are."""
        return mask_config(self.raw_config(name))

    def info(self, name: str) -> dict[str, Any]:
        """Kafka's ConnectorInfo."""
        rt = self._runtime(name)
        tasks = [] if rt.state.target_state == "STOPPED" else \
            [{"connector": name, "task": i} for i in range(self._tasks_max(rt))]
        return {"name": name, "config": mask_config(rt.state.config), "tasks": tasks, "type": rt.kind}

    def tasks(self, name: str) -> list[dict[str, Any]]:
        """``GET /connectors/{name}/tasks``: one entry per task (a Spark input partition of the query)."""
        info = self.info(name)
        return [{"id": t, "config": dict(info["config"], **{"task.id": str(t["task"])})} for t in info["tasks"]]

    def delete(self, name: str) -> None:
        """``DELETE /connectors/{name}``: stop it and delete its config and checkpoint (a new connector with the
        same name starts fresh)."""
        with self._lock:
            rt = self._runtime(name)
            self.states.delete(name)  # NotFoundError: deleted through another worker of a group meanwhile
            del self.worker.runtimes[name]
            rt.state.target_state = "STOPPED"

            def remove() -> None:
                self.worker.stop_query(rt)
                self._remove_checkpoints(rt)

            self.worker.submit(remove)
            log.info("Connector %s deleted", name)

    def _remove_checkpoints(self, rt: ConnectorRuntime) -> None:
        """(herder thread) Remove a deleted connector's checkpoints, but a re-created one's."""
        new = self.worker.runtimes.get(rt.name)
        keep = self.worker.checkpoint(new.state) if new is not None else None
        self.worker.remove_checkpoints(rt.name, keep=keep)

    # -- target states ------------------------------------------------------------------------------
    def _set_target(self, name: str, target: str) -> None:
        with self._lock:
            rt = self._runtime(name)
            if rt.state.target_state != target:
                rt.state.target_state = target
                self.states.put(rt.state)
            self._reconcile(rt)

    def pause(self, name: str) -> None:
        self._set_target(name, "PAUSED")

    def resume(self, name: str) -> None:
        """Resume a PAUSED or STOPPED connector from its checkpoint."""
        self._set_target(name, "STARTED")

    def stop(self, name: str, *, wait: float | None = 60.0) -> None:
        """Stop the connector's query (it keeps its checkpoint); required before offsets change."""
        self._set_target(name, "STOPPED")
        if wait:
            self.worker.submit(lambda: None).result(timeout=wait)

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any] | None:
        """``POST /connectors/{name}/restart``. Connector and tasks are one Spark query here, so restarting
        either restarts the query. Returns None (HTTP 204) for a plain restart, else the status with RESTARTING
        markers (HTTP 202)."""
        with self._lock:
            rt = self._runtime(name)
            failed = rt.phase == "FAILED"
            do = rt.state.target_state == "STARTED" and (failed or not only_failed)
            if do:
                rt.restarting = True
                self._reconcile(rt, restart=True)
            if not include_tasks and not only_failed:
                return None
            return self.status(name)

    def restart_task(self, name: str, task: int) -> None:
        with self._lock:
            rt = self._runtime(name)
            self._check_task(rt, task)
            rt.restarting = True
            self._reconcile(rt, restart=True)

    def _check_task(self, rt: ConnectorRuntime, task: int) -> None:
        if rt.state.target_state == "STOPPED" or not 0 <= task < self._tasks_max(rt):
            raise NotFoundError(f"Task {rt.name}-{task} not found")

    # -- status -------------------------------------------------------------------------------------
    def _phase(self, rt: ConnectorRuntime) -> str:
        if self.worker.spark_lost is not None:
            return "FAILED"
        if rt.restarting:
            return "RESTARTING"
        target = rt.state.target_state
        if target == "PAUSED" and rt.phase != "FAILED":
            return "PAUSED" if rt.query is None else rt.phase
        if target == "STOPPED":
            return "STOPPED" if rt.query is None else rt.phase
        return rt.phase

    def status(self, name: str) -> dict[str, Any]:
        """Kafka's ConnectorStateInfo plus ``"metrics"`` (records/s in and out, batch duration, lag,
        dead-lettered records)."""
        rt = self._runtime(name)
        phase = self._phase(rt)
        conn: dict[str, Any] = {"state": phase, "worker_id": self.worker_id}
        trace = self.worker.spark_lost or rt.trace
        if phase == "FAILED" and trace:
            conn["trace"] = trace
        tasks = []
        if phase != "STOPPED" and rt.state.target_state != "STOPPED":
            for i in range(self._tasks_max(rt)):
                t: dict[str, Any] = {"id": i, "state": phase, "worker_id": self.worker_id}
                if phase == "FAILED" and trace:
                    t["trace"] = trace
                tasks.append(t)
        return {"name": name, "connector": conn, "tasks": tasks, "type": rt.kind,
                "metrics": rt.metrics.to_json()}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        rt = self._runtime(name)
        self._check_task(rt, task)
        for t in self.status(name)["tasks"]:
            if t["id"] == task:
                return t
        raise NotFoundError(f"Task {name}-{task} not found")

    def expanded(self, expand: list[str]) -> dict[str, Any]:
        """``GET /connectors?expand=status&expand=info``."""
        out: dict[str, Any] = {}
        for name in self.list_connectors():
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = self.status(name)
                if "info" in expand:
                    entry["info"] = self.info(name)
            except NotFoundError:  # deleted meanwhile
                continue
            out[name] = entry
        return out

    # -- topics -------------------------------------------------------------------------------------
    def topics(self, name: str) -> dict[str, Any]:
        """``GET /connectors/{name}/topics``: topics the connector wrote (source) or read (sink)."""
        if not self.config.topic_tracking_enable:
            raise ForbiddenError("Topic tracking is disabled.")
        rt = self._runtime(name)
        return {name: {"topics": self._active_topics(rt)}}

    def _active_topics(self, rt: ConnectorRuntime) -> list[str]:
        store = self.worker.store
        if store.format != "delta":
            return []
        if rt.kind == "source":
            app = self.worker.app_id(rt.state)
            out = []
            for t in store.topics():
                v = committed_version(store.table_path(t), app)
                if v is not None and v > rt.state.topics_reset.get(t, -1):
                    out.append(t)
            return out
        offsets = offsets_store.read_committed(self.worker.checkpoint(rt.state),
                                               files=self.config.locations) or {}
        out = []
        for key, pos in offsets.items():
            topic = os.path.basename(parse_partition_key(key).get("table", ""))
            if topic and int(pos.get("version", -1)) > rt.state.topics_reset.get(topic, -1):
                out.append(topic)
        return sorted(out)

    def reset_topics(self, name: str) -> None:
        """``PUT /connectors/{name}/topics/reset``: forget the active topics seen so far."""
        if not self.config.topic_tracking_enable or not self.config.topic_tracking_allow_reset:
            raise ForbiddenError("Topic tracking reset is disabled.")
        with self._lock:
            rt = self._runtime(name)
            marks: dict[str, int] = {}
            store = self.worker.store
            if store.format == "delta":
                if rt.kind == "source":
                    app = self.worker.app_id(rt.state)
                    for t in store.topics():
                        v = committed_version(store.table_path(t), app)
                        if v is not None:
                            marks[t] = v
                else:
                    offsets = offsets_store.read_committed(self.worker.checkpoint(rt.state),
                                               files=self.config.locations) or {}
                    for key, pos in offsets.items():
                        topic = os.path.basename(parse_partition_key(key).get("table", ""))
                        marks[topic] = int(pos.get("version", -1))
            rt.state.topics_reset = marks
            self.states.put(rt.state)

    # -- offsets ------------------------------------------------------------------------------------
    def get_offsets(self, name: str) -> dict[str, Any]:
        """``GET /connectors/{name}/offsets``: the last committed offsets in the query's checkpoint. Sink
        connectors report Kafka's sink shape (``kafka_topic``/``kafka_partition`` → ``kafka_offset``: the offset
        of the next record to read, i.e. the number of records of the topic the sink has consumed)."""
        rt = self._runtime(name)
        raw = offsets_store.read_committed(self.worker.checkpoint(rt.state), files=self.config.locations)
        if not raw:
            return {"offsets": []}
        if rt.kind == "sink":
            return {"offsets": kafka_groups.to_rest(raw) if self.worker.bus else _sink_to_rest(raw)}
        return {"offsets": to_rest(raw)}

    def _require_stopped(self, rt: ConnectorRuntime) -> None:
        if rt.state.target_state != "STOPPED":
            raise BadRequestError(f"Connectors must be in the STOPPED state before their offsets can be modified. "
                                  f"This can be done for the specified connector by issuing a 'PUT' request to "
                                  f"the '/connectors/{rt.name}/stop' endpoint")

    def alter_offsets(self, name: str, body: Mapping[str, Any]) -> dict[str, str]:
        """``PATCH /connectors/{name}/offsets`` (connector STOPPED): the restarted query starts from them."""
        entries = body.get("offsets") if isinstance(body, Mapping) else None
        if not entries:
            raise BadRequestError("The offsets to be altered may not be null or empty")
        if not isinstance(entries, list) or not all(
                isinstance(e, Mapping) and isinstance(e.get("partition"), Mapping)
                and (e.get("offset") is None or isinstance(e.get("offset"), Mapping)) for e in entries):
            raise BadRequestError('offsets must be a list of {"partition": {...}, "offset": {...} or null} objects')
        with self._lock:
            rt = self._runtime(name)
            self._require_stopped(rt)
            if rt.kind == "sink" and self.worker.bus is not None:
                return self._alter_kafka_sink_offsets(rt, entries)
            try:
                if rt.kind == "sink":
                    changes = self._sink_from_rest(entries)
                else:
                    if any(set(e.get("partition") or {}) == set(_SINK_PARTITION_KEYS) for e in entries):
                        raise BadRequestError("Sink-style partitions (kafka_topic, kafka_partition) given for a "
                                              "source connector")
                    changes = from_rest(entries)
                    self._check_source_offsets(rt, entries)
            except ConfigError as e:
                raise BadRequestError(str(e)) from e
            checkpoint = self.worker.checkpoint(rt.state)

            def alter() -> None:
                self.worker.stop_query(rt)
                current = offsets_store.read_committed(checkpoint, files=self.config.locations) or {}
                merged = dict(current)
                for k, v in changes.items():
                    if v is None:
                        merged.pop(k, None)
                    else:
                        merged[k] = v
                if offsets_store.committed_batch(checkpoint, files=self.config.locations) is None:
                    _seed_checkpoint(checkpoint, self.config.locations)
                offsets_store.write_committed(checkpoint, canonical(merged), files=self.config.locations)

            self.worker.submit(alter).result(timeout=120)
        return {"message": "The offsets for this connector have been altered successfully"}

    @staticmethod
    def _check_source_offsets(rt: ConnectorRuntime, entries: Any) -> None:
        """Kafka's alterOffsets contract: the connector refuses partitions and positions it does not use."""

        cls = connector_class(rt.state.config)
        problems = [p for e in entries for p in cls.offset_problems(dict(e["partition"]), e.get("offset"))]
        if problems:
            raise BadRequestError("Invalid offsets for connector " + rt.name + ": " + "; ".join(problems))

    def reset_offsets(self, name: str) -> dict[str, str]:
        """``DELETE /connectors/{name}/offsets`` (connector STOPPED): a new, empty checkpoint."""
        with self._lock:
            rt = self._runtime(name)
            self._require_stopped(rt)
            rt.state.generation = _generation()
            rt.state.topics_reset = {}
            self.states.put(rt.state)
            keep = self.worker.checkpoint(rt.state)

            def reset() -> None:
                self.worker.stop_query(rt)
                self.worker.remove_checkpoints(name, keep=keep, totals=False)
                if rt.kind == "sink" and self.worker.bus is not None:  # Kafka Connect deletes the sink's group
                    kafka_admin.delete_group(self.worker.bus.admin_config(), _kafka_group(rt))

            self.worker.submit(reset).result(timeout=120)
        return {"message": "The offsets for this connector have been reset successfully"}

    def _alter_kafka_sink_offsets(self, rt: ConnectorRuntime, entries: Any) -> dict[str, str]:
        """PATCH for a sink on the Kafka bus: the positions go to the checkpoint (the restarted query reads from
        them) and to the consumer group, in Kafka Connect's sink shape."""
        try:
            kafka_groups.merge_rest({}, entries)
        except ConfigError as e:
            raise BadRequestError(str(e)) from e
        checkpoint = self.worker.checkpoint(rt.state)
        bus = self.worker.bus
        assert bus is not None

        def alter() -> None:
            self.worker.stop_query(rt)
            current = offsets_store.read_committed(checkpoint, files=self.config.locations) or {}
            merged = kafka_groups.merge_rest(current, entries)
            if offsets_store.committed_batch(checkpoint, files=self.config.locations) is None:
                _seed_checkpoint(checkpoint, self.config.locations)
            offsets_store.write_committed(checkpoint, merged, raw=True, files=self.config.locations)
            kafka_admin.commit_group_offsets(bus.admin_config(), _kafka_group(rt), merged)

        self.worker.submit(alter).result(timeout=120)
        return {"message": "The offsets for this connector have been altered successfully"}

    def _sink_from_rest(self, entries: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for e in entries:
            part = e.get("partition") if isinstance(e, Mapping) else None
            if not isinstance(part, Mapping) or set(part) != set(_SINK_PARTITION_KEYS):
                raise BadRequestError("Sink connector offsets need partitions of the form "
                                      '{"kafka_topic": <topic>, "kafka_partition": 0}')
            topic = part["kafka_topic"]
            if not isinstance(topic, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic) or \
                    topic in (".", ".."):
                raise BadRequestError(f"Invalid value {topic!r} for kafka_topic: a Kafka topic name")
            if part["kafka_partition"] != 0 or isinstance(part["kafka_partition"], bool):
                raise BadRequestError(f"Topic-store topics have one partition (0); got kafka_partition="
                                      f"{part['kafka_partition']!r}")
            key = partition_key({"table": self.worker.store.table_path(str(part["kafka_topic"]))})
            off = e.get("offset")
            if off is None:
                out[key] = None
                continue
            if not isinstance(off, Mapping) or "kafka_offset" not in off:
                raise BadRequestError('Sink connector offsets need {"kafka_offset": <offset>}')
            value = off["kafka_offset"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BadRequestError(f"Invalid value {value!r} for kafka_offset: a non-negative integer")
            out[key] = {"version": _version_at(self.worker.store.table_path(str(part["kafka_topic"])),
                                               int(off["kafka_offset"]), str(part["kafka_topic"]))}
        return out

    # -- plugins ------------------------------------------------------------------------------------
    @staticmethod
    def plugins(connectors_only: bool = True) -> list[dict[str, str]]:
        rows = plugins.describe_all(["connector"] if connectors_only else None)
        seen, out = set(), []
        for r in rows:
            if (r["class"], r["type"]) not in seen:
                seen.add((r["class"], r["type"]))
                out.append(r)
        return out

    @staticmethod
    def plugin_config(plugin: str) -> list[dict[str, Any]]:
        """``GET /connector-plugins/{plugin}/config``: Kafka's ConfigKeyInfo list."""
        cls = _resolve_any(plugin)
        return _definition_of(cls).to_rest()

    def validate(self, plugin: str, props: Mapping[str, Any]) -> dict[str, Any]:
        """``PUT /connector-plugins/{plugin}/config/validate``: Kafka's ConfigInfos (200 even when invalid)."""

        return validate_connector_config(plugin, {str(k): ("" if v is None else str(v)) for k, v in props.items()},
                                         lambda config: check_config(config, self.worker.config))

    # -- root ---------------------------------------------------------------------------------------
    def server_info(self) -> dict[str, Any]:
        return {"version": __version__, "commit": _commit(), "kafka_cluster_id": self.cluster_id}

    def health(self) -> tuple[int, dict[str, str]]:
        if self.worker.spark_lost is not None:
            return 503, {"status": "unhealthy", "message": self.worker.spark_lost}
        if self.ready:
            return 200, {"status": "healthy", "message": "Worker has completed startup and is ready to handle "
                                                         "requests."}
        return 503, {"status": "starting", "message": "Worker is still starting up."}


def _version_records(table: str, upto: int) -> list[int]:
    """Records each version 0..``upto`` of a topic-store table added (Delta ``numRecords`` statistics)."""
    import json

    counts = []
    for version in range(upto + 1):
        n = 0
        for action in read_commit(table, version):
            add = action.get("add")
            if add and add.get("dataChange", True):
                n += int(json.loads(add.get("stats") or "{}").get("numRecords", 0))
        counts.append(n)
    return counts


def _version_at(table: str, offset: int, topic: str) -> int:
    """The topic-store version after which the record at Kafka offset ``offset`` (the number of records before
    it) comes: offsets are alterable at version boundaries, which a sink consumes whole."""

    if offset < 0:
        raise BadRequestError(f"Invalid kafka_offset {offset} for topic {topic}: offsets start at 0")
    if offset == 0:
        return -1
    latest = latest_version(table)
    counts = _version_records(table, latest) if latest is not None else []
    total = 0
    for version, n in enumerate(counts):
        total += n
        if total == offset:
            return version
        if total > offset:
            raise BadRequestError(f"Invalid kafka_offset {offset} for topic {topic}: the topic store commits "
                                  f"records in batches and a sink resumes at a batch boundary; the nearest are "
                                  f"{total - n} and {total}")
    raise BadRequestError(f"Invalid kafka_offset {offset} for topic {topic}: the topic holds {total} records")


def _sink_to_rest(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kafka's sink offsets: ``kafka_offset`` is the offset of the next record to read, i.e. the number of
    records of the topic before it (as a Kafka consumer group's committed offset)."""
    out = []
    for key, pos in canonical(raw).items():
        part = parse_partition_key(key)
        if "table" in part and "version" in pos:
            table = str(part["table"]).rstrip("/")
            topic = os.path.basename(table)
            consumed = sum(_version_records(table, int(pos["version"]))) if int(pos["version"]) >= 0 else 0
            out.append({"partition": {"kafka_topic": topic, "kafka_partition": 0},
                        "offset": {"kafka_offset": consumed}})
        else:  # a non-Delta topic store: the reader's own offsets, as they are
            out.append({"partition": part, "offset": dict(pos)})
    return out


def _kafka_group(rt: ConnectorRuntime) -> str:
    """The consumer group of a sink on the Kafka bus (Kafka Connect's ``connect-<name>``)."""
    return str(rt.state.config.get("consumer.override.group.id") or f"connect-{rt.name}")


def _seed_checkpoint(checkpoint: str, files: Locations) -> None:
    """An empty committed batch 0, so offsets can be set before the connector ever ran."""
    # Spark refuses a checkpoint without its query id (STREAMING_CHECKPOINT_MISSING_METADATA_FILE).
    metadata = files.join(checkpoint, "metadata")
    if not files.exists(metadata):
        files.write_text(metadata, json.dumps({"id": str(uuid.uuid4())}) + "\n")
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}})
    files.write_text(files.join(checkpoint, "offsets", "0"), f"v1\n{meta}\n{{}}")
    files.write_text(files.join(checkpoint, "commits", "0"), 'v1\n{"nextBatchWatermarkMs":0}')


def _resolve_any(plugin: str) -> type:
    for family in plugins.FAMILIES:
        try:
            return plugins.resolve_class(family, plugin, key="plugin")
        except PluginNotFoundError:
            continue
    raise NotFoundError(f"Unknown plugin {plugin}.")


def _definition_of(cls: Any) -> Any:
    if getattr(cls, "plugin_type", None) in ("source", "sink"):
        return connector_config_def(cls)
    return getattr(cls, "config_def", None) or ConfigDef()


def _commit() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        with open(os.path.join(here, ".git", "HEAD"), encoding="utf-8") as f:
            head = f.read().strip()
        if head.startswith("ref: "):
            with open(os.path.join(here, ".git", head[5:]), encoding="utf-8") as f:
                return f.read().strip()[:12]
        return head[:12]
    except OSError:
        return "unknown"
