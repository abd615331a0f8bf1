"""Debezium's schema change events from the binlog's DDL statements (``include.schema.changes``).

A DDL statement reaches the binlog as a query event with its default database. It becomes one record on the
topic ``<topic.prefix>`` when it is a DDL of tables, indexes or databases (``CREATE``/``ALTER``/``DROP``/
``RENAME TABLE``, ``CREATE``/``DROP INDEX``, ``CREATE``/``ALTER``/``DROP DATABASE``) of a captured database
(one holding a captured table, or named by ``database.include.list``): key ``{databaseName}``, value
``source`` (the statement's binlog position), ``ts_ms``, ``databaseName``, ``schemaName`` (null, as MySQL's),
``ddl``, ``tableChanges`` (``type`` CREATE/ALTER/DROP and ``id`` ``"db"."table"`` of each table the statement
changes). Not reproduced: ``tableChanges.table`` (the table's columns after the change) is null, since the
connector keeps no schema history (the binlog's table maps describe each row instead); the snapshot emits no
``CREATE TABLE`` events.

>>> parse_ddl("ALTER TABLE `shop`.orders ADD COLUMN note text", "other")
('shop', [('ALTER', 'shop', 'orders')])
>>> parse_ddl("GRANT SELECT ON *.* TO x", "shop") is None
True
"""

from __future__ import annotations

import re
from typing import Any

from ...core.records import no_headers
from ..cdc.config import matches
from ..cdc.layout import Layout
from .config import Settings

__all__ = ["SchemaChanges", "parse_ddl"]

_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"({_NAME})(?:\s*\.\s*({_NAME}))?"
_COMMENTS = re.compile(r"/\*(?!!).*?\*/|--[^\n]*|#[^\n]*", re.S)
_TABLE = re.compile(rf"^(CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+"
                    rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?{_QUALIFIED}", re.I)
_RENAME = re.compile(rf"^RENAME\s+TABLES?\s+{_QUALIFIED}\s+TO\s+{_QUALIFIED}", re.I)
_INDEX = re.compile(rf"^(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
                    rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?{_NAME}\s+ON\s+{_QUALIFIED}", re.I)
_DATABASE = re.compile(rf"^(?:CREATE|ALTER|DROP)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_NAME})",
                       re.I)


def _name(text: str) -> str:
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def _table(first: str, second: str | None, default: str) -> tuple[str, str]:
    return (_name(first), _name(second)) if second else (default, _name(first))


def parse_ddl(statement: str, default_db: str) -> tuple[str, list[tuple[str, str, str]]] | None:
    """The database a DDL statement belongs to and its table changes ``(type, database, table)``; None for a
    statement that is no DDL of tables, indexes or databases."""
    text = _COMMENTS.sub(" ", statement).strip()
    m = _TABLE.match(text)
    if m:
        db, table = _table(m.group(2), m.group(3), default_db)
        return db, [(m.group(1).upper(), db, table)]
    m = _RENAME.match(text)
    if m:
        db, table = _table(m.group(3), m.group(4), default_db)
        return db, [("ALTER", db, table)]
    m = _INDEX.match(text)
    if m:
        db, table = _table(m.group(1), m.group(2), default_db)
        return db, [("ALTER", db, table)]
    m = _DATABASE.match(text)
    if m:
        return _name(m.group(1)), []
    return None


class SchemaChanges:
    """Schema change records of one layout's connector, one Arrow record batch per DDL statement."""

    def __init__(self, settings: Settings, layout: Layout, schema: Any, version: str, connector: str):
        self.settings, self.schema = settings, schema
        self.version, self.connector = version, connector
        self.topic = layout.prefix
        self.databases = {t.schema.lower() for t in layout.tables}

    def captures(self, database: str) -> bool:
        """A database holding a captured table, or one database.include.list names."""
        s = self.settings
        if database.lower() in self.databases:
            return True
        return bool(database and s.database_include) and matches(s.database_include, database) \
            and not matches(s.database_exclude, database)

    def record(self, statement: str, default_db: str, *, file: str, pos: int, ts: int, server_id: int,
               gtid: str | None, thread: int | None, offset: int) -> Any | None:
        """The record batch of one DDL statement, or None when it is no DDL of a captured database."""
        import pyarrow as pa

        parsed = parse_ddl(statement, default_db)
        if parsed is None or not self.captures(parsed[0]):
            return None
        database, changes = parsed
        value_t = self.schema.field("value").type
        key_t = self.schema.field("key").type
        source = {"version": self.version, "connector": self.connector, "name": self.topic, "ts_ms": ts * 1000,
                  "snapshot": "false", "db": database, "ts_us": ts * 1_000_000, "ts_ns": ts * 1_000_000_000,
                  "table": changes[0][2] if len(changes) == 1 else None, "server_id": server_id, "gtid": gtid,
                  "file": file, "pos": pos, "row": 0, "thread": thread,
                  "query": statement if self.settings.include_query else None}
        values = {"source": source, "ts_ms": ts * 1000, "databaseName": database, "schemaName": None,
                  "ddl": statement,
                  "tableChanges": [{"type": kind, "id": f'"{db}"."{table}"', "table": None}
                                   for kind, db, table in changes]}
        value = pa.array([{f.name: values.get(f.name) for f in value_t}], value_t)
        key = pa.array([{f.name: database if f.name == "databaseName" else None for f in key_t}], key_t)
        columns = {"key": key, "value": value, "topic": pa.array([self.topic], pa.string()),
                   "partition": pa.array([0], pa.int32()), "offset": pa.array([offset], pa.int64()),
                   "timestamp": pa.array([ts * 1_000_000], pa.int64()).cast(pa.timestamp("us", tz="UTC"))}
        arrays = [columns[f.name] if f.name in columns else no_headers(1) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
