"""Kafka 4.1's ``plugin.version`` key (KIP-891) on a transform or predicate: accepted and checked.

Kafka Connect can load several versions of a plugin and picks one by a Maven version specification: ``latest``
(or unset) for the newest, a bare version such as ``4.1.0`` for exactly that one (Kafka encloses it in
``[...]``), or Maven ranges such as ``[1.0,2.0)`` and ``(,1.0],[1.2,)``. This bridge ships one version of each
plugin, the package version, so the key selects nothing: an invalid specification, or one that excludes that
version, is a config error when the chain is built, as Kafka reports it before the connector starts.

Versions compare as Maven's ``ComparableVersion`` does for the usual forms: numeric items numerically
(``1.0`` = ``1`` = ``1.0.0``), and a qualifier (``1.0-rc1``, ``1.0-SNAPSHOT``) before its release. Simplified:
qualifiers compare alphabetically among themselves (Maven ranks alpha < beta < milestone < rc < snapshot).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KAFKA_VERSION", "KEY", "available_versions", "version_problem"]

KEY = "plugin.version"
KAFKA_VERSION = "4.1.0"


class InvalidVersionSpec(ValueError):
    """Maven's ``InvalidVersionSpecificationException``."""


def _items(version: str) -> list[int | str]:
    """Numbers and lower-cased qualifiers, trailing zeros dropped (so ``1.0`` equals ``1``)."""
    items: list[int | str] = [int(t) if t.isdigit() else t.lower()
                              for t in re.findall(r"\d+|[A-Za-z]+", version)]
    while items and items[-1] == 0:
        items.pop()
    return items


def _compare(a: str, b: str) -> int:
    x, y = _items(a), _items(b)
    for i in range(max(len(x), len(y))):
        p = x[i] if i < len(x) else None
        q = y[i] if i < len(y) else None
        # A missing item is 0 next to a number (1.0-rc1 is 1-rc1) and the release next to a qualifier.
        if p is None and isinstance(q, int):
            p = 0
        if q is None and isinstance(p, int):
            q = 0
        if p == q:
            continue
        rank_p = (2, p) if isinstance(p, int) else (1, "") if p is None else (0, p)
        rank_q = (2, q) if isinstance(q, int) else (1, "") if q is None else (0, q)
        return -1 if rank_p < rank_q else 1
    return 0


@dataclass(frozen=True)
class _Restriction:
    lower: str | None
    lower_inclusive: bool
    upper: str | None
    upper_inclusive: bool

    def contains(self, version: str) -> bool:
        if self.lower is not None:
            c = _compare(version, self.lower)
            if c < 0 or (c == 0 and not self.lower_inclusive):
                return False
        if self.upper is not None:
            c = _compare(version, self.upper)
            if c > 0 or (c == 0 and not self.upper_inclusive):
                return False
        return True


def _restriction(spec: str) -> _Restriction:
    lower_inclusive, upper_inclusive = spec.startswith("["), spec.endswith("]")
    inner = spec[1:-1].strip()
    if "," not in inner:
        if not (lower_inclusive and upper_inclusive):
            raise InvalidVersionSpec(f"Single version must be surrounded by []: {spec}")
        return _Restriction(inner, True, inner, True)
    lo, _, hi = (s.strip() for s in inner.partition(","))
    if lo and hi:
        c = _compare(hi, lo)
        if c < 0 or (c == 0 and not (lower_inclusive and upper_inclusive)):
            raise InvalidVersionSpec(f"Range defies version ordering: {spec}")
    return _Restriction(lo or None, lower_inclusive, hi or None, upper_inclusive)


def _parse_ranges(spec: str) -> tuple[list[_Restriction], bool]:
    """Maven's ``VersionRange.createFromVersionSpec``: (restrictions, whether the spec was a bare version)."""
    restrictions: list[_Restriction] = []
    rest, upper = spec, None
    while rest.startswith(("[", "(")):
        ends = [i for i in (rest.find(")"), rest.find("]")) if i >= 0]
        if not ends:
            raise InvalidVersionSpec(f"Unbounded range: {spec}")
        r = _restriction(rest[:min(ends) + 1])
        if upper is not None and (r.lower is None or _compare(r.lower, upper) < 0):
            raise InvalidVersionSpec(f"Ranges overlap: {spec}")
        restrictions.append(r)
        upper = r.upper
        rest = rest[min(ends) + 1:].strip()
        if rest.startswith(","):
            rest = rest[1:].strip()
    if rest:
        if restrictions:
            raise InvalidVersionSpec(f"Only fully-qualified sets allowed in multiple set scenario: {spec}")
        return [], True
    return restrictions, False


def requirement(spec: str | None) -> list[_Restriction] | None:
    """Kafka's ``PluginUtils.connectorVersionRequirement``: None for latest, else the allowed ranges (a bare
    version is a hard requirement, as if written ``[version]``)."""
    if spec is None or spec == "latest":
        return None
    spec = spec.strip()
    restrictions, bare = _parse_ranges(spec)
    if bare or not restrictions:
        restrictions, _ = _parse_ranges(f"[{spec}]")
    return restrictions


def available_versions(class_name: str, package_version: str) -> tuple[str, ...]:
    """The versions ``class_name`` answers to: the package version, and for Kafka's own transforms and
    predicates also :data:`KAFKA_VERSION`, the Kafka release whose behaviour they reproduce (Kafka reports its
    built-ins under its own version, so a Kafka 4.1 config pinning ``4.1.0`` runs unchanged here)."""
    if class_name.startswith("org.apache.kafka."):
        return (package_version, KAFKA_VERSION)
    return (package_version,)


def version_problem(spec: object, key: str, class_name: str, available: tuple[str, ...]) -> str | None:
    """Why ``spec`` cannot select any of ``available`` (the versions of ``class_name`` here), or None."""
    if spec is None:
        return None
    try:
        allowed = requirement(str(spec))
    except InvalidVersionSpec as e:
        return f"Invalid value {spec} for configuration {key}: {e}"
    if allowed is None or any(r.contains(v) for r in allowed for v in available):
        return None
    return (f"Invalid value {spec} for configuration {key}: Plugin {class_name} not found that matches the "
            f"version range {str(spec).strip()}, available versions: [{', '.join(available)}]")
