"""Durable connector state: each connector's raw config and target state, one JSON file per connector.

Kafka Connect keeps connector configs and target states in ``config.storage.topic`` (or, in standalone mode,
nowhere but the command line). The worker here keeps them in ``<offset.storage.dir>/_connectors/``: one
``<quoted name>.json`` file per connector, replaced atomically (write to a temporary file, ``fsync``,
``os.replace``), so a worker killed at any moment finds either the old or the new file, never half of one.

>>> store = StateStore("/tmp/kconnect-state")                                  # doctest: +SKIP
>>> store.put(ConnectorState("orders", {"connector.class": "datagen", ...}, "STARTED"))  # doctest: +SKIP
>>> [s.name for s in store.load_all()]                                         # doctest: +SKIP
['orders']
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["ConnectorState", "StateStore", "TARGET_STATES"]

log = logging.getLogger(__name__)

#: Kafka's TargetState values: what the user asked for (the actual state is derived from the query).
TARGET_STATES = ("STARTED", "PAUSED", "STOPPED")


@dataclass
class ConnectorState:
    """What survives a worker restart: the raw config as submitted, the target state, and bookkeeping."""

    name: str
    config: dict[str, str]
    target_state: str = "STARTED"
    created: float = field(default_factory=time.time)
    #: Topics written to the topic store before the last ``PUT /connectors/{c}/topics/reset``:
    #: ``{topic: last app-transaction version seen at reset}``.
    topics_reset: dict[str, int] = field(default_factory=dict)
    #: Checkpoint generation: resetting the offsets starts a new, empty checkpoint directory (and so a new
    #: topic-store app id, which a reused directory would not give).
    generation: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": dict(self.config), "target_state": self.target_state,
                "created": self.created, "topics_reset": dict(self.topics_reset), "generation": self.generation}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "ConnectorState":
        return cls(doc["name"], {str(k): str(v) for k, v in doc["config"].items()},
                   doc.get("target_state", "STARTED"), float(doc.get("created", 0.0)),
                   {str(k): int(v) for k, v in (doc.get("topics_reset") or {}).items()},
                   int(doc.get("generation", 0)))


def atomic_write_json(path: str, doc: Any) -> None:
    """Write ``doc`` to ``path`` so that a crash leaves either the old or the new content."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass


class StateStore:
    """Connector configs and target states under ``directory`` (one JSON file per connector)."""

    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)

    def __repr__(self) -> str:
        return f"StateStore({self.directory!r})"

    def _path(self, name: str) -> str:
        # Connector names may hold any printable character: quote them into a safe file name.
        return os.path.join(self.directory, quote(name, safe="") + ".json")

    def load_all(self) -> list[ConnectorState]:
        """Every stored connector, oldest first."""
        try:
            files = [f for f in os.listdir(self.directory) if f.endswith(".json") and not f.startswith(".")]
        except FileNotFoundError:
            return []
        out = []
        for f in files:
            try:
                with open(os.path.join(self.directory, f), encoding="utf-8") as fh:
                    out.append(ConnectorState.from_json(json.load(fh)))
            except (OSError, ValueError, KeyError) as e:
                # A damaged file must not keep the other connectors from starting; say which one.
                log.error("Cannot read the stored state of connector %s (%s): %s", unquote(f[:-5]), f, e)
        return sorted(out, key=lambda s: (s.created, s.name))

    def get(self, name: str) -> ConnectorState | None:
        try:
            with open(self._path(name), encoding="utf-8") as fh:
                return ConnectorState.from_json(json.load(fh))
        except FileNotFoundError:
            return None

    def put(self, state: ConnectorState) -> None:
        atomic_write_json(self._path(state.name), state.to_json())

    def delete(self, name: str) -> None:
        try:
            os.unlink(self._path(name))
        except FileNotFoundError:
            pass
