"""Starting and stopping a streaming query: one place for the checkpoint, the trigger, the query name and the
graceful stop."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = ["start_query", "stop_query"]


def start_query(writer: Any, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                name: str | None = None) -> Any:
    """Start ``writer`` (a ``DataStreamWriter``) with its checkpoint, an optional trigger (the keyword arguments of
    ``DataStreamWriter.trigger``, e.g. ``{"availableNow": True}``) and an optional query name.

    >>> q = start_query(df.writeStream.format("noop"), "/tmp/ckpt", {"availableNow": True}, "orders")  # doctest: +SKIP
    """
    writer = writer.option("checkpointLocation", checkpoint)
    if name:
        writer = writer.queryName(name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def stop_query(query: Any, graceful_timeout_s: float) -> bool:
    """Stop ``query`` as Kafka Connect stops a task: let the batch in flight finish and commit (for at most
    ``graceful_timeout_s``, Kafka's ``task.shutdown.graceful.timeout.ms``), then stop. A batch still running at the
    deadline is cancelled; its records are read again from the checkpoint by the next run, so nothing is lost
    either way, but a finished batch is not written twice. Returns whether the stop was graceful.
    """
    deadline = time.monotonic() + graceful_timeout_s
    graceful = True
    while query.isActive and query.status.get("isTriggerActive"):
        if time.monotonic() >= deadline:
            graceful = False
            break
        time.sleep(0.1)
    query.stop()
    return graceful
