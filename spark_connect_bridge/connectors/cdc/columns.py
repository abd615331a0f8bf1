"""Debezium's keys that change a column's key role, schema or values: ``message.key.columns``,
``column.propagate.source.type``/``datatype.propagate.source.type``, ``column.mask.with.<n>.chars`` and
``column.truncate.to.<n>.chars``.

They are decided per column once, when the layout is built (:meth:`ColumnRules.apply`): a key position, schema
parameters, and a :attr:`~.types.TypeSpec.mapper` the envelope builder applies to each batch's row arrays in bulk
(the key is built from the values before the mapper, as Debezium builds it without its column mappers).

Debezium's syntax: ``message.key.columns`` is ``<table regex>:<column>,<column>;...`` over fully qualified table
names (``inventory.customers:pk1,pk2;(.*).purchaseorders:pk3``); the other keys are lists of regular expressions
of fully qualified column names (``<schema>.<table>.<column>``) or, for ``datatype.propagate.source.type``, of
fully qualified type names (``<schema>.<table>.<type>``: Debezium's ``ColumnMappers`` matches the table's id, a
dot and the type name, so a bare ``int8`` matches no column there and none here; ``.+\\.int8`` does). Every match
is in full and ignores case; the first rule that matches a column decides, in Debezium's order: truncation,
masking, propagation by column, by type.

>>> rules = ColumnRules(key_columns=(r"public\\.orders\\.(customer|note)",))
>>> [c for c in ("id", "customer", "note") if rules.is_key("public", "orders", c)]
['customer', 'note']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...config import ConfigDef, Importance, Lambda, Type
from ...errors import ConfigProblem
from .config import REGEX_LIST
from .layout import KeyedColumn
from .types import TypeSpec

__all__ = ["MASK", "TRUNCATE", "ColumnRules", "define_column_rules", "key_columns_problem"]

#: the pattern-named keys, as Debezium matches them
TRUNCATE = r"column\.truncate\.to\.(\d+)\.chars"
MASK = r"column\.mask\.with\.(\d+)\.chars"
#: string kinds a mapper changes (Debezium's masks and truncation apply to character columns only)
_CHARACTER_TYPES = ("varchar", "bpchar", "text", "char", "character varying", "character", "name", "citext",
                    "tinytext", "mediumtext", "longtext", "nvarchar", "nchar")


def _key_entries(text: str) -> list[tuple[str, list[str]]]:
    out = []
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        table, sep, columns = entry.rpartition(":")
        out.append((table.strip() if sep else "", [c.strip() for c in columns.split(",")]))
    return out


def key_columns_problem(text: str | None) -> str | None:
    """Why a ``message.key.columns`` value is invalid, or None."""
    for table, columns in _key_entries(text or ""):
        if not table or not all(columns):
            return (f"'{table}:{','.join(columns)}' is not <table regex>:<column>,<column>,... (entries separated "
                    "by ';')")
        for pattern in (f"{table}.{c}" for c in columns):
            try:
                re.compile(pattern)
            except re.error as e:
                return f"'{pattern}' is not a valid regular expression: {e}"
    return None


def define_column_rules(definition: ConfigDef, container: str) -> ConfigDef:
    """Declare the keys of this module on ``definition`` (``container``: ``schema`` or ``database``)."""
    column = f"<{container}>.<table>.<column>"
    definition.define(
        "message.key.columns", Type.STRING, "", Lambda(key_columns_problem, "<table regex>:<column>,...;..."),
        Importance.MEDIUM,
        f"Custom record keys: '<table regex>:<column>,<column>;...' (table regexes over <{container}>.<table>, "
        "matched in full ignoring case). A matching table's key is those columns, in the table's column order; "
        "other tables keep their primary key.", group="Events")
    definition.define(
        "column.propagate.source.type", Type.LIST, [], REGEX_LIST, Importance.LOW,
        f"Regular expressions of {column} names whose schema gets the parameters "
        "__debezium.source.column.type (the database type name, upper case), __debezium.source.column.length "
        "and __debezium.source.column.scale (the JDBC column size and decimal digits).", group="Events")
    definition.define(
        "datatype.propagate.source.type", Type.LIST, [], REGEX_LIST, Importance.LOW,
        f"Regular expressions of fully qualified type names, <{container}>.<table>.<type> with the type as the "
        "catalog names it (.+\\.int8, shop\\.orders\\.varchar; matched in full ignoring case, as Debezium's "
        "ColumnMappers: a bare type name matches no column), whose columns get the __debezium.source.column.* "
        "schema parameters.", group="Events")
    definition.pattern(TRUNCATE.replace("(\\d+)", "\\d+"),
                       f"column.truncate.to.<n>.chars: regular expressions of {column} names of character columns "
                       "whose values are cut to n characters (schema parameter truncateLength=n; a column "
                       "declared no longer than n is left alone).")
    definition.pattern(MASK.replace("(\\d+)", "\\d+"),
                       f"column.mask.with.<n>.chars: regular expressions of {column} names of character columns "
                       "whose values are replaced by n asterisks.")
    return definition.check(_pattern_problems)


def _pattern_keys(originals: Mapping[str, Any]) -> Iterable[tuple[str, str, int, Any]]:
    for key, value in originals.items():
        for kind, pattern in (("truncate", TRUNCATE), ("mask", MASK)):
            m = re.fullmatch(pattern, key, re.IGNORECASE)
            if m:
                yield key, kind, int(m.group(1)), value


def _as_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(v.strip() for v in str(value or "").split(",") if v.strip())


def _pattern_problems(cfg: Any) -> list[ConfigProblem]:
    out = []
    for key, kind, n, value in _pattern_keys(cfg.originals):
        if kind == "truncate" and n <= 0:
            out.append(ConfigProblem(key, f"Invalid configuration {key}: the length must be positive"))
        problem = REGEX_LIST(list(_as_list(value)))
        if problem:
            out.append(ConfigProblem(key, f"Invalid value {value} for configuration {key}: {problem}"))
    return out


def _full(patterns: Iterable[str], value: str) -> bool:
    return any(re.fullmatch(p, value, re.IGNORECASE) for p in patterns)


@dataclass(frozen=True)
class ColumnRules:
    """The column keys of one connector, parsed (plain data: it travels to executors)."""

    #: ``message.key.columns`` as regexes of ``<container>.<table>.<column>``, and of the tables they name
    key_columns: tuple[str, ...] = ()
    key_tables: tuple[str, ...] = ()
    propagate_columns: tuple[str, ...] = ()
    propagate_types: tuple[str, ...] = ()
    #: (kind, n, column regexes), in Debezium's order: truncations, then masks
    mappers: tuple[tuple[str, int, tuple[str, ...]], ...] = ()

    @classmethod
    def from_config(cls, config: Any) -> ColumnRules:
        entries = _key_entries(config.message_key_columns or "")
        mappers = sorted(((kind, n, _as_list(value)) for _, kind, n, value in _pattern_keys(config.originals)),
                         key=lambda m: m[0] != "truncate")
        return cls(key_columns=tuple(f"{t}.{c}" for t, cols in entries for c in cols),
                   key_tables=tuple(t for t, _ in entries),
                   propagate_columns=tuple(config.column_propagate_source_type),
                   propagate_types=tuple(config.datatype_propagate_source_type), mappers=tuple(mappers))

    def __bool__(self) -> bool:
        return bool(self.key_columns or self.propagate_columns or self.propagate_types or self.mappers)

    def is_key(self, container: str, table: str, column: str) -> bool:
        """Whether ``message.key.columns`` makes ``column`` a key column of its table."""
        return _full(self.key_columns, f"{container}.{table}.{column}")

    def keys_table(self, container: str, table: str) -> bool:
        """Whether ``message.key.columns`` decides the key of ``container.table``."""
        return _full(self.key_tables, f"{container}.{table}")

    def key_positions(self, container: str, table: str, columns: list[tuple[str, TypeSpec, int]]
                      ) -> list[KeyedColumn]:
        """``columns`` (name, spec, primary key position) with the key positions ``message.key.columns`` gives
        (the matching columns in the table's order) before the primary key position, unchanged for a table it does
        not name (see :func:`~.layout.build_layout`)."""
        if not self.keys_table(container, table):
            return list(columns)
        out: list[KeyedColumn] = []
        n = 0
        for name, spec, primary in columns:
            key = self.is_key(container, table, name)
            n += key
            out.append((name, spec, n if key else 0, primary))
        return out

    def apply(self, container: str, table: str, column: str, spec: TypeSpec, source: tuple[str, int, int | None]
              ) -> TypeSpec:
        """``spec`` with the column's mapper and schema parameters (``source``: the database type name, the JDBC
        column size and decimal digits, for the propagated parameters)."""
        cid = f"{container}.{table}.{column}"
        type_name, length, scale = source
        # MySQL's db_type is its COLUMN_TYPE (varchar(20)): the name before the size
        character = spec.kind == "string" and spec.db_type.lower().split("(")[0].strip() in _CHARACTER_TYPES
        rules = [*self.mappers, ("propagate", 0, self.propagate_columns)]
        # the first rule matching the column decides, as Debezium's ColumnMappers.mapperFor
        rule = next((r for r in rules if _full(r[2], cid)), None)
        if rule is None and _full(self.propagate_types, f"{container}.{table}.{type_name}"):
            rule = ("propagate", 0, ())
        if rule is None:
            return spec
        kind, n, _ = rule
        extra: tuple[tuple[str, str], ...] = ()
        mapper: tuple[str, Any] | None = None
        if kind == "propagate":  # Debezium 3.6 names the column too (seen beside it)
            extra = (("__debezium.source.column.type", type_name.upper()),
                     ("__debezium.source.column.name", column))
            if length >= 0:
                extra += (("__debezium.source.column.length", str(length)),)
            if scale is not None:
                extra += (("__debezium.source.column.scale", str(scale)),)
        elif kind == "truncate" and character and (length < 0 or length > n):
            mapper, extra = ("truncate", n), (("truncateLength", str(n)),)
        elif kind == "mask":  # Debezium's MaskStrings marks any column it matches; it masks character ones
            mapper, extra = ("mask", "*" * n) if character else None, (("masked", "true"),)
        if not extra and mapper is None:
            return spec
        return replace(spec, parameters=spec.parameters + extra, mapper=mapper, key_parameters=spec.parameters)
