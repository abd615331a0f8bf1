"""The hook every sink commit passes first: a worker that lost a connector's lease must not commit for it.

A distributed worker group (:mod:`spark_connect_bridge.runtime.group`) hands each connector to one worker under a
lease with an epoch. A worker that was paused (SIGSTOP, a long GC, a network partition) may wake up after the
group gave its connectors to another worker, with a micro-batch half done. Spark runs a Python sink's commit in a
fresh process on the driver (the streaming sink runner, the batch commit worker), so the check cannot rely on the
worker's own Python objects: the worker describes its fence in a small JSON file (mode 0600) and names it in the
``KCONNECT_COMMIT_FENCE`` environment variable, which every process Spark starts inherits.

The file holds ``"checker"`` (``"module:function"``, resolved like plugin catalog entries) and ``"apps"``
(``{app id: [connector, epoch]}``: the sink app ids of the queries the worker runs). :func:`before_commit` calls
``checker(doc, connector, epoch)`` for a commit of one of those app ids; the checker raises
:class:`~spark_connect_bridge.errors.FencedError` when the epoch is no longer current. Without the variable (a
standalone worker, a notebook) the hook costs one ``os.environ`` lookup.

>>> before_commit("ckpt-0123456789abcdef")  # no fence configured: returns at once
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

__all__ = ["FENCE_ENV", "before_commit", "fenced_app"]

FENCE_ENV = "KCONNECT_COMMIT_FENCE"

#: App id prefixes of the writes a query makes besides its own sink: its dead-letter sink's.
_DERIVED_PREFIXES = ("dlq-",)


def fenced_app(app_id: str) -> str:
    """The app id a commit is fenced under: a dead-letter write (``dlq-<app id>``) is its query's."""
    for prefix in _DERIVED_PREFIXES:
        if app_id.startswith(prefix):
            return app_id[len(prefix):]
    return app_id


def before_commit(app_id: str | None) -> None:
    """Raise :class:`~spark_connect_bridge.errors.FencedError` when this worker no longer owns the connector
    whose query commits under ``app_id`` (nothing to check without a fence file or for another app id)."""
    path = os.environ.get(FENCE_ENV)
    if not path or not app_id:
        return
    with open(path, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    held = (doc.get("apps") or {}).get(fenced_app(app_id))
    if held is None:
        return
    connector, epoch = held
    module, _, attribute = str(doc["checker"]).partition(":")
    getattr(importlib.import_module(module), attribute)(doc, str(connector), int(epoch))
