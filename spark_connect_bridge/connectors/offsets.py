"""Source offsets: JSON maps from a source partition to a source position, in one canonical form.

Kafka Connect keys every source offset by a *source partition* map (``{"filename": "/data/in.txt"}``) and stores
a *source position* map (``{"position": 1234}``). Spark stores a source's offset as the exact JSON string the
reader returns and compares offsets as strings, so the form must be canonical: here an offset is a dict from
the compact, key-sorted JSON text of each source partition to its position map, with every level key-sorted.

>>> o = canonical({partition_key({"filename": "/a"}): {"position": 10}})
>>> o
{'{"filename":"/a"}': {'position': 10}}
>>> to_rest(o)
[{'partition': {'filename': '/a'}, 'offset': {'position': 10}}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError, ConfigProblem

__all__ = ["Offsets", "partition_key", "parse_partition_key", "canonical", "to_rest", "from_rest", "dumps"]

Offsets = dict  # dict[str, dict[str, Any]]: partition key -> position map

_PRIMITIVES = (str, int, float, bool, type(None))


def _check_map(m: Mapping[str, Any], what: str) -> None:
    if not isinstance(m, Mapping):
        raise ConfigError([ConfigProblem("offsets", f"{what} must be a JSON object, got {type(m).__name__}")])
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, _PRIMITIVES):
            # Kafka: keys are strings and values primitives (no nested maps or lists).
            raise ConfigError([ConfigProblem("offsets", f"{what} must map strings to primitive values; "
                                                        f"{k!r} maps to {type(v).__name__}")])


def partition_key(partition: Mapping[str, Any]) -> str:
    """The canonical text of a source partition map (compact JSON, keys sorted)."""
    _check_map(partition, "a source partition")
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def parse_partition_key(key: str) -> dict[str, Any]:
    return json.loads(key)


def canonical(offsets: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """A new offsets dict with partitions and position keys in sorted order (json.dumps keeps order)."""
    return {k: {pk: offsets[k][pk] for pk in sorted(offsets[k])} for k in sorted(offsets)}


def dumps(offsets: Mapping[str, Mapping[str, Any]]) -> str:
    """The exact string Spark will store for ``offsets`` (``json.dumps`` of the canonical dict)."""
    return json.dumps(canonical(offsets))


def to_rest(offsets: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kafka's REST shape: ``[{"partition": {...}, "offset": {...}}, ...]``."""
    return [{"partition": parse_partition_key(k), "offset": dict(v)} for k, v in canonical(offsets).items()]


def from_rest(entries: Iterable[Mapping[str, Any]]) -> Offsets:
    """Inverse of :func:`to_rest`; ``"offset": null`` entries are kept as ``None`` (reset that partition)."""
    out: dict[str, Any] = {}
    for e in entries:
        if "partition" not in e:
            raise ConfigError([ConfigProblem("offsets", "every entry needs a 'partition' object")])
        off = e.get("offset")
        if off is not None:
            _check_map(off, "a source offset")
        out[partition_key(e["partition"])] = dict(off) if off is not None else None
    return {k: out[k] for k in sorted(out)}
