"""Debezium's description of a table in schema change events (``tableChanges[].table``), from information_schema.

Debezium keeps a schema history by parsing every DDL statement into an in-memory model of the tables; each schema
change event carries the changed table as that model describes it: ``defaultCharsetName``,
``primaryKeyColumnNames``, ``comment`` and per column ``name``, ``jdbcType`` (``java.sql.Types``), ``typeName``
(= ``typeExpression``, ``" UNSIGNED"`` appended), ``charsetName`` (text columns), ``length``/``scale`` (as the
type is written: ``int(11)`` -> 11, ``decimal(8,3)`` -> 8, 3, ``datetime(3)`` -> 3; ENUM 1, SET its members'
length with the commas), ``position``, ``optional``, ``autoIncremented``, ``generated`` (Debezium sets it for
AUTO_INCREMENT columns, not for generated ones), ``comment``, ``defaultValueExpression`` (unquoted; a
``CURRENT_TIMESTAMP`` default of a NOT NULL timestamp as the epoch, as Debezium writes it) and ``enumValues``
(the quoted members).

Here the server's own catalog is that model: the table is described as information_schema shows it when the
statement is read (a snapshot reads it with its rows). Differences that follow: a type written without a length
in a streamed ``CREATE TABLE`` (``id int``) has Debezium's length null but the catalog's display width here
(``int(11)`` -> 11); a table changed again before the batch holding the first statement is read (or re-read) is
described as it is after the later change; a table dropped since is described as null.

>>> describe(session, "shop", ["orders"])["orders"]["primaryKeyColumnNames"]      # doctest: +SKIP
['id']
"""

from __future__ import annotations

import re
from typing import Any

from .session import Session

__all__ = ["describe", "jdbc_type"]

#: java.sql.Types of MySQL's types as Debezium's DDL parser assigns them (MySqlDataTypeResolver)
_JDBC = {"bit": -7, "tinyint": 5, "bool": 5, "boolean": 5, "smallint": 5, "mediumint": 4, "int": 4, "integer": 4,
         "bigint": -5, "float": 6, "double": 8, "real": 8, "decimal": 3, "numeric": 2, "date": 91, "time": 92,
         "datetime": 93, "timestamp": 2014, "year": 4, "char": 1, "varchar": 12, "binary": -2, "varbinary": -3,
         "tinyblob": -3, "blob": 2004, "mediumblob": 2004, "longblob": 2004, "tinytext": 12, "text": 12,
         "mediumtext": 12, "longtext": 12, "enum": 1, "set": 1, "json": 1111}
_TEXT = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")
_ARGS = re.compile(r"^\w+\s*\(([^)]*)\)")
_MEMBER = re.compile(r"'(?:[^']|'')*'")
_NOW = re.compile(r"^current_timestamp(\(\d*\))?$", re.I)


def jdbc_type(data_type: str) -> int:
    """java.sql.Types of a MySQL type name as Debezium reports it (spatial and unknown types: OTHER, 1111)."""
    return _JDBC.get(data_type.lower(), 1111)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _length_scale(data_type: str, column_type: str, members: list[str] | None) -> tuple[int | None, int | None]:
    if data_type == "enum":
        return 1, None
    if data_type == "set":
        assert members is not None
        return sum(len(m[1:-1].replace("''", "'")) for m in members) + max(len(members) - 1, 0), None
    m = _ARGS.match(column_type)
    if not m:
        return None, None
    args = [a.strip() for a in m.group(1).split(",")]
    length = int(args[0]) if args[0].isdigit() else None
    scale = int(args[1]) if len(args) > 1 and args[1].isdigit() else None
    return length, scale


def _default(value: str | None, data_type: str, optional: bool) -> str | None:
    """Debezium's defaultValueExpression of information_schema's COLUMN_DEFAULT (MariaDB quotes literals and
    writes an explicit NULL default as ``NULL``; MySQL writes literals bare)."""
    if value is None or value == "NULL":
        return None
    if _NOW.match(value):
        return "1970-01-01 00:00:00" if data_type in ("timestamp", "datetime") and not optional else None
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def describe(session: Session, database: str, tables: list[str]) -> dict[str, dict[str, Any]]:
    """Debezium's ``table`` structs of ``tables`` of ``database`` as the server has them now (a table that is
    not there is left out)."""
    if not tables:
        return {}
    marks = ", ".join(["%s"] * len(tables))
    rows = session.query(f"""
        SELECT t.TABLE_NAME, co.CHARACTER_SET_NAME, t.TABLE_COMMENT
        FROM information_schema.TABLES t
        LEFT JOIN information_schema.COLLATIONS co ON co.COLLATION_NAME = t.TABLE_COLLATION
        WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME IN ({marks})""", (database, *tables))
    out: dict[str, dict[str, Any]] = {}
    for name, charset, comment in rows:
        out[str(_text(name))] = {"defaultCharsetName": _text(charset), "primaryKeyColumnNames": [],
                                 "columns": [], "comment": _text(comment) or None}
    if not out:
        return out
    columns = session.query(f"""
        SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE, COLUMN_TYPE,
               CHARACTER_SET_NAME, COLUMN_KEY, EXTRA, COLUMN_COMMENT
        FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({marks})
        ORDER BY TABLE_NAME, ORDINAL_POSITION""", (database, *tables))
    for table, name, position, default, nullable, data_type, column_type, charset, _, extra, comment in columns:
        entry = out.get(str(_text(table)))
        if entry is None:
            continue
        dt, ct = str(_text(data_type)).lower(), str(_text(column_type)).lower()
        members = _MEMBER.findall(str(_text(column_type))) if dt in ("enum", "set") else None
        length, scale = _length_scale(dt, ct, members)
        type_name = dt.upper() + (" UNSIGNED" if " unsigned" in ct else "")
        optional = str(_text(nullable)).upper() == "YES"
        auto = "auto_increment" in str(_text(extra)).lower()
        entry["columns"].append({
            "name": _text(name), "jdbcType": jdbc_type(dt), "nativeType": None, "typeName": type_name,
            "typeExpression": type_name, "charsetName": _text(charset) if dt in _TEXT else None, "length": length,
            "scale": scale if dt in ("decimal", "numeric") else None, "position": int(position),
            "optional": optional, "autoIncremented": auto, "generated": auto,
            "comment": _text(comment) or None, "defaultValueExpression": _default(_text(default), dt, optional),
            "enumValues": members})
    keys = session.query(f"""
        SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
        WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({marks}) AND CONSTRAINT_NAME = 'PRIMARY'
        ORDER BY TABLE_NAME, ORDINAL_POSITION""", (database, *tables))
    for table, name in keys:
        entry = out.get(str(_text(table)))
        if entry is not None:
            entry["primaryKeyColumnNames"].append(_text(name))
    return out
