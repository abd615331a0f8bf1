"""Config keys that every Debezium CDC connector declares alike, and the filters they drive.

Debezium's filters are regular expressions matched in full, ignoring case: ``<container>.include.list`` /
``.exclude.list`` (the container is PostgreSQL's schema, MySQL's database), ``table.*`` over
``<container>.<table>``, ``column.*`` over ``<container>.<table>.<column>``; an include and an exclude list of
one kind are mutually exclusive. ``signal.data.collection`` names the signal table that drives incremental
snapshots (:mod:`.signals`).

>>> definition = define_filters(ConfigDef(), "schema")          # doctest: +SKIP
>>> matches(("shop\\\\..*",), "SHOP.orders")
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ...config import ConfigDef, Importance, Lambda, Range, Type
from ...errors import ConfigProblem

__all__ = ["REGEX_LIST", "SKIPPED_OPERATIONS", "define_filters", "define_signals", "exclusive", "matches",
           "regex_list", "split_table"]


def regex_list(values: list[str]) -> str | None:
    """Why a list of regular expressions is invalid, or None."""
    for item in values:
        try:
            re.compile(item)
        except re.error as e:
            return f"'{item}' is not a valid regular expression: {e}"
    return None


REGEX_LIST = Lambda(regex_list, "regular expressions")


def _skipped(values: list[str]) -> str | None:
    bad = [x for x in values if x not in ("c", "u", "d", "t", "none")]
    return f"unknown operations {', '.join(bad)}; allowed: c, u, d, t, none" if bad else None


#: ``skipped.operations``' validator
SKIPPED_OPERATIONS = Lambda(_skipped, "c, u, d, t or none")


def matches(patterns: Sequence[str], value: str) -> bool:
    """Whether a Debezium filter list matches ``value`` (in full, ignoring case)."""
    return any(re.fullmatch(p, value, re.IGNORECASE) for p in patterns)


def exclusive(container: str) -> Callable[[Any], list[ConfigProblem]]:
    """The check that no include and exclude list of one kind are both set."""

    def check(cfg: Any) -> list[ConfigProblem]:
        out = []
        for what in (container, "table", "column"):
            if cfg[f"{what}.include.list"] and cfg[f"{what}.exclude.list"]:
                out.append(ConfigProblem(f"{what}.exclude.list",
                                         f"{what}.include.list and {what}.exclude.list are mutually exclusive "
                                         f"(Debezium allows only one of them)"))
        return out

    return check


def define_filters(definition: ConfigDef, container: str) -> ConfigDef:
    """Declare the six filter lists of ``container`` (``schema`` or ``database``) and their exclusivity."""
    for what, doc in ((container, f"{container} names"), ("table", f"<{container}>.<table> names"),
                      ("column", f"<{container}>.<table>.<column> names")):
        for way, verb in (("include", "capture" if what != "column" else "emit"),
                          ("exclude", "not " + ("capture" if what != "column" else "emit"))):
            definition.define(f"{what}.{way}.list", Type.LIST, [], REGEX_LIST, Importance.MEDIUM,
                              f"Regular expressions of {doc} to {verb} (matched in full, ignoring case).",
                              group="Filters")
    return definition.check(exclusive(container))


def define_signals(definition: ConfigDef, container: str, how: str) -> ConfigDef:
    """Declare ``signal.data.collection`` (``<container>.<table>``; ``how``: what the database needs) and
    ``incremental.snapshot.chunk.size``."""
    return (
        definition
        .define("signal.data.collection", Type.STRING, "",
                Lambda(lambda v: None if not v or re.fullmatch(r"[^.\s]+\.[^.\s]+", v) else
                       f"expected <{container}>.<table>", f"<{container}>.<table> or empty"),
                Importance.MEDIUM,
                f"<{container}>.<table> of Debezium's signal table (id varchar primary key, type varchar, "
                f"data varchar). Inserting type 'execute-snapshot' with data '{{\"data-collections\": "
                f"[\"<{container}>.<table>\"], \"type\": \"incremental\"}}' starts an incremental snapshot of "
                f"those captured tables; 'stop-snapshot' (data-collections: the tables to drop from it, none: "
                f"all), 'pause-snapshot' and 'resume-snapshot' control it; 'log' logs data's message at INFO. "
                f"additional-conditions filters must be plain conditions (<column> <op> <literal>, IS [NOT] "
                f"NULL, [NOT] IN (...), joined by AND), never pasted SQL. Its rows are never emitted. {how} "
                f"Empty: no signals.", group="Snapshot")
        .define("incremental.snapshot.chunk.size", Type.INT, 1024, Range.at_least(1), Importance.MEDIUM,
                "Rows per incremental snapshot chunk (one chunk is read per micro-batch).", group="Snapshot")
    )


def split_table(value: str) -> tuple[str, str] | None:
    """``signal.data.collection`` as (container, table), or None when empty."""
    if not value:
        return None
    container, _, table = value.partition(".")
    return container, table
