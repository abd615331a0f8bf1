"""The filter language of ``additional-conditions`` in an incremental snapshot signal.

Debezium pastes a signal's ``filter`` into the chunk query, which would run any SQL a writer of the signal
table puts there. Here a filter must be conditions ``<column> <op> <literal>``, ``<column> IS [NOT] NULL``,
``<column> [NOT] IN (...)`` joined by ``AND`` (:func:`parse_filter`); each connector turns them into its
database's SQL with quoted identifiers and bound values. Another filter rejects the signal (logged), and one
the database cannot apply (a value that does not fit its column) stops that table's snapshot.
"""

from __future__ import annotations

import re
from typing import Any

from .layout import Table

__all__ = ["Condition", "fullmatch", "parse_filter"]

#: One condition: column, operator (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``is null``, ``is not null``,
#: ``in``, ``not in``) and its literal values as text.
Condition = tuple[str, str, list[Any]]


def fullmatch(pattern: str, text: str) -> bool:
    """``re.fullmatch`` where a pattern that is no regular expression matches nothing."""
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return False


_FILTER_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
                               |(?P<op><>|!=|<=|>=|=|<|>)|(?P<punct>[(),])|(?P<qid>"(?:[^"]|"")+")
                               |(?P<word>[A-Za-z_][A-Za-z0-9_$]*))""", re.VERBOSE)


def parse_filter(text: str, table: Table) -> tuple[list[Condition], str | None]:
    """An ``additional-conditions`` filter as conditions ``(column, operator, values)``, all to hold, or why
    it is rejected. Not SQL: a small language whose conditions become SQL with quoted identifiers and bound
    values, so a signal row cannot run code: ``<column> <op> <literal>`` (op ``= <> != < <= > >=``),
    ``<column> IS [NOT] NULL`` and ``<column> [NOT] IN (<literal>, ...)``, joined by ``AND``; literals are
    'strings', numbers, true/false, kept as text (PostgreSQL reads them as the column's type). Columns are
    the table's (bare names fold to lower case, as in SQL).

    >>> from spark_connect_bridge.connectors.cdc.layout import build_layout
    >>> from spark_connect_bridge.connectors.cdc.types import TypeSpec
    >>> orders = build_layout("shop", [("public", "orders", [("qty", TypeSpec("int32"), 0),
    ...                                                      ("color", TypeSpec("string"), 0)])]).tables[0]
    >>> parse_filter("qty > 10 AND color = 'blue'", orders)
    ([('qty', '>', ['10']), ('color', '=', ['blue'])], None)
    >>> parse_filter("price > 1", orders)
    ([], "'price' is not a column of public.orders")

    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text.rstrip()):
        m = _FILTER_TOKEN.match(text, pos)
        if m is None:
            return [], f"unexpected text at {text[pos:pos + 20].strip()!r}"
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    columns = {c.name for c in table.columns}
    out: list[Condition] = []
    i = 0

    def literal(tok: tuple[str, str]) -> tuple[bool, Any]:
        kind, v = tok
        if kind == "str":
            return True, v[1:-1].replace("''", "'")
        if kind == "num":
            return True, v
        if kind == "word" and v.lower() in ("true", "false"):
            return True, v.lower()
        return False, None

    expect = ("<column> <op> <literal>, <column> IS [NOT] NULL or <column> [NOT] IN (<literal>, ...), joined "
              "by AND")
    while True:
        if i >= len(tokens) or tokens[i][0] not in ("word", "qid"):
            return [], f"expected a column at condition {len(out) + 1} ({expect})"
        kind, name = tokens[i]
        col = name[1:-1].replace('""', '"') if kind == "qid" else name.lower()
        if col not in columns:
            return [], f"{col!r} is not a column of {table.id}"
        words = [v.lower() if k == "word" else v for k, v in tokens[i + 1:i + 4]]
        if words[:2] == ["is", "null"] or words[:3] == ["is", "not", "null"]:
            out.append((col, "is null" if words[1] == "null" else "is not null", []))
            i += 3 if words[1] == "null" else 4
        elif words[:2] == ["in", "("] or words[:3] == ["not", "in", "("]:
            op = "in" if words[0] == "in" else "not in"
            i += 3 if op == "in" else 4
            values = []
            while True:
                ok, v = literal(tokens[i]) if i < len(tokens) else (False, None)
                if not ok:
                    return [], f"expected a literal in the IN list of {col}"
                values.append(v)
                i += 1
                if i < len(tokens) and tokens[i] == ("punct", ","):
                    i += 1
                    continue
                if i < len(tokens) and tokens[i] == ("punct", ")"):
                    i += 1
                    break
                return [], f"expected , or ) in the IN list of {col}"
            out.append((col, op, values))
        elif i + 2 < len(tokens) and tokens[i + 1][0] == "op" and literal(tokens[i + 2])[0]:
            op = "<>" if tokens[i + 1][1] == "!=" else tokens[i + 1][1]
            out.append((col, op, [literal(tokens[i + 2])[1]]))
            i += 3
        else:
            return [], f"expected an operator and a literal after {col} ({expect})"
        if i == len(tokens):
            return out, None
        if tokens[i][0] != "word" or tokens[i][1].lower() != "and":
            return [], f"expected AND or the end after condition {len(out)} ({expect})"
        i += 1
