"""Starting a streaming query: one place for the checkpoint, the trigger and the query name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["start_query"]


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
