"""The one field-path parser of every SMT that takes field names (Kafka's ``SingleFieldPath``, KIP-821).

``V1``: the whole string is one field name (dots and backticks are literal). ``V2``: the path is split on
``.``; a step wrapped in backticks may contain dots; a backtick closes a step only when followed by ``.`` or
the end, and a backslash right before a closing backtick escapes it.

>>> parse_path("foo.`bar.baz`", "V2")
['foo', 'bar.baz']
>>> parse_path("foo.bar", "V1")
['foo.bar']
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StringType, StructType

__all__ = ["parse_path", "resolve", "Resolved", "SYNTAX_VERSIONS"]

SYNTAX_VERSIONS = ("V1", "V2")
_BT = "`"


def parse_path(path: str, version: str = "V1") -> list[str]:
    """Split ``path`` into steps; raise ``ValueError`` with Kafka's message for an unclosed backtick."""
    if version.upper() == "V1":
        return [path]
    steps: list[str] = []
    i, n = 0, len(path)
    while True:
        if i < n and path[i] == _BT:
            # A backtick-wrapped step: find a closing backtick followed by '.' or the end, not escaped.
            j = i + 1
            buf: list[str] = []
            closed = False
            while j < n:
                c = path[j]
                if c == "\\" and j + 1 < n and path[j + 1] == _BT and (j + 2 == n or path[j + 2] == "."):
                    buf.append(_BT)
                    j += 2
                    continue
                if c == _BT and (j + 1 == n or path[j + 1] == "."):
                    closed = True
                    break
                buf.append(c)
                j += 1
            if not closed:
                raise ValueError(f"Incomplete backtick pair in path: [{path}], consider adding a backslash "
                                 f"before backtick at position {i} to escape it")
            steps.append("".join(buf))
            i = j + 1
            if i == n:
                return steps
            i += 1  # the '.'
            continue
        dot = path.find(".", i)
        if dot < 0:
            steps.append(path[i:])
            return steps
        steps.append(path[i:dot])
        i = dot + 1


@dataclass
class Resolved:
    """A field reached through a path: its Column, its Spark type (None when the path does not exist in a
    struct schema), and a per-row condition under which Kafka throws (an intermediate that is not a Map)."""

    column: Column
    dtype: DataType | None
    metadata: dict
    not_a_map: Column | None = None


def resolve(operand: Column, dtype: DataType, steps: list[str]) -> Resolved:
    """Follow ``steps`` from ``operand`` (a struct or a string-keyed map, possibly nested)."""
    col, cur, md = operand, dtype, {}
    not_a_map: Column | None = None
    for step in steps:
        if isinstance(cur, StructType):
            if step not in cur.fieldNames():
                return Resolved(col, None, {}, not_a_map)
            sf = cur[step]
            col, cur, md = col.getField(step), sf.dataType, dict(sf.metadata)
        elif isinstance(cur, MapType) and isinstance(cur.keyType, StringType):
            col, cur, md = F.try_element_at(col, F.lit(step)), cur.valueType, {}
        else:
            # Kafka: an intermediate that is not a Map/Struct fails when it holds a value.
            bad = col.isNotNull()
            not_a_map = bad if not_a_map is None else (not_a_map | bad)
            return Resolved(F.lit(None), None, {}, not_a_map)
    return Resolved(col, cur, md, not_a_map)
