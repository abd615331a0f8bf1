"""Durable connector state: each connector's raw config and target state, one JSON file per connector.

Kafka Connect keeps connector configs and target states in ``config.storage.topic`` (or, in standalone mode,
nowhere but the command line). The worker here keeps them in ``<offset.storage.dir>/_connectors/``: one
``<storage name>.json`` file per connector (:func:`storage_name`), replaced atomically (write to a temporary file,
``fsync``, ``os.replace``), so a worker killed at any moment finds either the old or the new file, never half of
one. With a :class:`~spark_connect_bridge.runtime.secrets.ConfigCipher` the config is stored encrypted.

>>> store = StateStore("/tmp/kconnect-state")                                  # doctest: +SKIP
>>> store.put(ConnectorState("orders", {"connector.class": "datagen", ...}, "STARTED"))  # doctest: +SKIP
>>> [s.name for s in store.load_all()]                                         # doctest: +SKIP
['orders']
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ..core.locations import Locations, is_remote
from .secrets import ConfigCipher

__all__ = ["ConnectorState", "StateStore", "TARGET_STATES", "storage_name"]

log = logging.getLogger(__name__)

_MAX_STORAGE_NAME = 200


def storage_name(name: str) -> str:
    """The one path component that stands for connector ``name`` on disk: distinct names never share one, and
    none is ``.``, ``..``, hidden, or longer than a file name may be.

    Percent-encoding makes every character but letters, digits and ``_.-~`` a ``%XX`` escape (``/`` and ``%``
    included); a leading dot becomes ``%2E`` too (``.``, ``..``, ``.tmp``), which plain encoding cannot produce
    since ``%`` itself is escaped. Names whose encoding is longer than 200 characters keep a prefix plus a hash
    of the whole name; such a result is longer than 200 characters, so it never equals another name's encoding.

    >>> storage_name(".."), storage_name("a/b"), storage_name("orders")
    ('%2E.', 'a%2Fb', 'orders')
    """
    encoded = quote(name, safe="")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_STORAGE_NAME:
        encoded = encoded[:_MAX_STORAGE_NAME - 20] + "~" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:40]
    return encoded


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

    def to_json(self, cipher: ConfigCipher | None = None) -> dict[str, Any]:
        config: dict[str, Any] = {"config_encrypted": cipher.encrypt(self.config)} if cipher else \
            {"config": dict(self.config)}
        return {"name": self.name, **config, "target_state": self.target_state,
                "created": self.created, "topics_reset": dict(self.topics_reset), "generation": self.generation}

    @classmethod
    def from_json(cls, doc: dict[str, Any], cipher: ConfigCipher | None = None) -> ConnectorState:
        if "config_encrypted" in doc:
            if cipher is None:
                raise ValueError("the stored config is encrypted and no key is configured")
            config = cipher.decrypt(doc["config_encrypted"])
        else:  # written before configs were encrypted (or without a key): read as it is, encrypted on next write
            config = {str(k): str(v) for k, v in doc["config"].items()}
        return cls(doc["name"], config,
                   doc.get("target_state", "STARTED"), float(doc.get("created", 0.0)),
                   {str(k): int(v) for k, v in (doc.get("topics_reset") or {}).items()},
                   int(doc.get("generation", 0)))


class StateStore:
    """Connector configs and target states under ``directory`` (one JSON file per connector, a local directory or
    an ``s3a://`` prefix reached through ``locations``), encrypted under ``key_file`` when one is given."""

    def __init__(self, directory: str, key_file: str | None = None, locations: Locations | None = None):
        self.files = locations or Locations()
        self.directory = directory if is_remote(directory) else os.path.abspath(directory)
        self._cipher = ConfigCipher(key_file, self.files) if key_file else None

    def __repr__(self) -> str:
        return f"StateStore({self.directory!r})"

    def _path(self, name: str) -> str:
        return self.files.join(self.directory, storage_name(name) + ".json")

    def load_all(self) -> list[ConnectorState]:
        """Every stored connector, oldest first."""
        files = [f for f in self.files.names(self.directory) if f.endswith(".json") and not f.startswith(".")]
        out = []
        for f in files:
            try:
                out.append(ConnectorState.from_json(json.loads(self.files.read_text(self.files.join(
                    self.directory, f))), self._cipher))
            except (OSError, ValueError, KeyError) as e:
                # A damaged file must not keep the other connectors from starting; say which one.
                log.error("Cannot read the stored state of connector %s (%s): %s", unquote(f[:-5]), f, e)
        return sorted(out, key=lambda s: (s.created, s.name))

    def get(self, name: str) -> ConnectorState | None:
        try:
            return ConnectorState.from_json(json.loads(self.files.read_text(self._path(name))), self._cipher)
        except FileNotFoundError:
            return None

    def put(self, state: ConnectorState) -> None:
        """Replace the connector's file atomically (see :meth:`Locations.write_text`): a worker killed at any moment
        finds the old or the new state."""
        self.files.write_text(self._path(state.name), json.dumps(state.to_json(self._cipher), indent=1,
                                                                 sort_keys=True))

    def create(self, state: ConnectorState) -> bool:
        """Store a new connector; False when the name exists (one worker owns the directory: its service's
        lock orders the check and the write)."""
        if self.files.exists(self._path(state.name)):
            return False
        self.put(state)
        return True

    def delete(self, name: str) -> None:
        self.files.remove(self._path(name))
