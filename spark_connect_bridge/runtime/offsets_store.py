"""Read and change a connector's offsets in its Spark checkpoint (Kafka's ``/connectors/{c}/offsets``).

A streaming query's checkpoint holds an offset log (``offsets/<batch>``: line 1 ``v1``, line 2 the batch
metadata JSON, then one line per source with the exact offset JSON the source returned) and a commit log
(``commits/<batch>``). The committed offsets of a connector are the source line of the latest batch that has
a commit entry.

Altering offsets (only while the query is stopped) appends a batch to both logs: ``offsets/<N+1>`` with the
altered source offset and the metadata of batch ``N``, and ``commits/<N+1>``. Offset entries of batches that were
planned but never committed are removed first, so the restarted query plans its next batch from the altered
offsets. Spark sees an ordinary committed batch that read nothing.

>>> read_committed("/ckpt/orders")                                                   # doctest: +SKIP
{'{"filename":"/data/in.txt"}': {'position': 1234}}
>>> write_committed("/ckpt/orders", {'{"filename":"/data/in.txt"}': {"position": 0}})   # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

from ..connectors.offsets import dumps
from ..core.locations import Locations

__all__ = ["committed_batch", "read_committed", "write_committed"]

_LOCAL = Locations()  # local checkpoints; a worker passes its own (s3a:// checkpoints with its settings)


def _batches(files: Locations, directory: str) -> list[int]:
    return sorted(int(n) for n in files.names(directory) if n.isdigit())


def committed_batch(checkpoint: str, *, files: Locations = _LOCAL) -> int | None:
    """The id of the latest committed batch of the checkpoint (None: nothing committed yet)."""
    commits = set(_batches(files, files.join(checkpoint, "commits")))
    done = [b for b in _batches(files, files.join(checkpoint, "offsets")) if b in commits]
    return done[-1] if done else None


def _read_lines(files: Locations, path: str) -> list[str]:
    return files.read_text(path).split("\n")


def read_committed(checkpoint: str, *, files: Locations = _LOCAL) -> dict[str, Any] | None:
    """The source offset (parsed JSON) of the latest committed batch; None when nothing is committed.

    The query must have exactly one source (every connector query here has).
    """
    batch = committed_batch(checkpoint, files=files)
    if batch is None:
        return None
    lines = [ln for ln in _read_lines(files, files.join(checkpoint, "offsets", str(batch))) if ln.strip()]
    if len(lines) < 3:
        raise ValueError(f"Unexpected offset log entry {checkpoint}/offsets/{batch}: {len(lines)} lines")
    src = lines[2]
    return None if src == "-" else json.loads(src)


def _remove(files: Locations, directory: str, batch: int) -> None:
    for name in (str(batch), f".{batch}.crc"):
        files.remove(files.join(directory, name))


def write_committed(checkpoint: str, offsets: dict[str, Any], *, raw: bool = False,
                    files: Locations = _LOCAL) -> int:
    """Append a committed batch whose source offset is ``offsets``; returns its batch id.

    ``offsets`` is written canonically (:func:`spark_connect_bridge.connectors.offsets.dumps`) unless ``raw``.
    The checkpoint must have a committed batch (a query that never committed has nothing to alter: remove the
    checkpoint instead) and its query must not be running.
    """
    batch = committed_batch(checkpoint, files=files)
    if batch is None:
        raise ValueError(f"checkpoint {checkpoint} has no committed batch")
    off_dir, com_dir = files.join(checkpoint, "offsets"), files.join(checkpoint, "commits")
    for b in _batches(files, off_dir):
        if b > batch:  # planned, never committed: would be replayed from the old offsets
            _remove(files, off_dir, b)
    for b in _batches(files, com_dir):
        if b > batch:
            _remove(files, com_dir, b)
    lines = [ln for ln in _read_lines(files, files.join(off_dir, str(batch))) if ln.strip()]
    source = json.dumps(offsets) if raw else dumps(offsets)
    new = batch + 1
    files.write_text(files.join(off_dir, str(new)), "\n".join([lines[0], lines[1], source]))
    commit_lines = [ln for ln in _read_lines(files, files.join(com_dir, str(batch))) if ln.strip()]
    files.write_text(files.join(com_dir, str(new)), "\n".join(commit_lines))
    return new
