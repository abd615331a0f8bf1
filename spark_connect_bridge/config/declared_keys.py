"""The keys the original classes declare, as checked-in data (``declared/<class>.json``).

Each file holds the ``ConfigDef`` of one Kafka, Debezium or Confluent class: every key's name, type, default,
importance and first line of documentation, and the artifact it came from (``source``). Files of classes on Maven
Central are dumped from the jars by ``python -m tests.support.dump_configdefs``; the others are written from the
originals' sources (their ``source`` says which file of which repository).

>>> keys = declared("org.apache.kafka.connect.transforms.Flatten")
>>> keys["delimiter"].default
'.'
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["DECLARED_DIR", "DeclaredKey", "declared", "declared_classes", "source_of"]

DECLARED_DIR = Path(__file__).parent / "declared"


@dataclass(frozen=True)
class DeclaredKey:
    """One key as the original declares it (``default`` as the original's string form; None when required or
    null)."""

    name: str
    type: str
    default: str | None
    required: bool
    importance: str | None
    doc: str
    internal: bool = False


def _strip_variant(cls: str) -> str:
    return cls.removesuffix("$Value").removesuffix("$Key")


@functools.cache
def _load(cls: str) -> dict[str, Any]:
    path = DECLARED_DIR / f"{_strip_variant(cls)}.json"
    if not path.exists():
        raise KeyError(f"No declared keys for {cls} (no {path.name} in {DECLARED_DIR})")
    with open(path) as f:
        return json.load(f)


def declared(cls: str) -> Mapping[str, DeclaredKey]:
    """The keys ``cls`` declares (a Key/Value SMT variant reads its SMT's file)."""
    data = _load(cls)
    return MappingProxyType({k["name"]: DeclaredKey(k["name"], k["type"], k.get("default"), bool(k.get("required")),
                                                    k.get("importance"), k.get("doc", ""), bool(k.get("internal")))
                             for k in data["keys"]})


def source_of(cls: str) -> str:
    """Where the keys of ``cls`` came from (artifact and version, or the source file)."""
    return str(_load(cls)["source"])


def declared_classes() -> list[str]:
    """Every class with a data file."""
    return sorted(p.stem for p in DECLARED_DIR.glob("*.json"))
