"""Debezium's schema change events from the binlog's DDL statements (``include.schema.changes``).

A DDL statement reaches the binlog as a query event with its default database. It becomes one record on the
topic ``<topic.prefix>`` when it is a DDL of tables, indexes or databases (``CREATE``/``ALTER``/``DROP``/
``RENAME TABLE``, ``CREATE``/``DROP INDEX``, ``CREATE``/``ALTER``/``DROP DATABASE``) of a captured database
(one holding a captured table, or named by ``database.include.list``): key ``{databaseName}``, value
``source`` (the statement's binlog position), ``ts_ms``, ``databaseName``, ``schemaName`` (null, as MySQL's),
``ddl``, ``tableChanges`` (``type`` CREATE/ALTER/DROP and ``id`` ``"db"."table"`` of each table the statement
changes). As Debezium, a ``DROP TABLE`` is one event per dropped table, each with the statement Debezium
writes for it (``DROP TABLE `db`.`t```, without the server's comment). Not reproduced: ``tableChanges.table``
(the table's columns after the change) is null, since the connector keeps no schema history (the binlog's
table maps describe each row instead); the snapshot emits no ``CREATE TABLE`` events.

>>> parse_ddl("ALTER TABLE `shop`.orders ADD COLUMN note text", "other")
Ddl(database='shop', changes=[('ALTER', 'shop', 'orders')], name='shop', table='orders')
>>> parse_ddl("GRANT SELECT ON *.* TO x", "shop") is None
True
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ...core.records import no_headers
from ..cdc.config import matches
from ..cdc.layout import Layout
from .config import Settings

__all__ = ["Ddl", "SchemaChanges", "parse_ddl"]

_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"({_NAME})(?:\s*\.\s*({_NAME}))?"
_COMMENTS = re.compile(r"/\*(?!!).*?\*/|--[^\n]*|#[^\n]*", re.S)
_TABLE = re.compile(rf"^(CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+"
                    rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?{_QUALIFIED}", re.I)
_DROP = re.compile(r"^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(IF\s+EXISTS\s+)?(.*?)\s*(?:RESTRICT|CASCADE)?\s*$",
                   re.I | re.S)
_EACH = re.compile(rf"\s*{_QUALIFIED}\s*(?:,|$)")
_RENAME = re.compile(rf"^RENAME\s+TABLES?\s+{_QUALIFIED}\s+TO\s+{_QUALIFIED}", re.I)
_INDEX = re.compile(rf"^(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
                    rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?{_NAME}\s+ON\s+{_QUALIFIED}", re.I)
_DATABASE = re.compile(rf"^(?:CREATE|ALTER|DROP)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_NAME})",
                       re.I)


def _name(text: str) -> str:
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def _table(first: str, second: str | None, default: str) -> tuple[str, str]:
    return (_name(first), _name(second)) if second else (default, _name(first))


class Ddl(NamedTuple):
    """A DDL statement as Debezium reports it: the database it belongs to (what the filters see), its table
    changes ``(type, database, table)``, and the ``databaseName`` and ``source.table`` of its event."""

    database: str
    changes: list[tuple[str, str, str]]
    name: str
    table: str | None


def parse_ddl(statement: str, default_db: str) -> Ddl | None:
    """A DDL statement of tables, indexes or databases as Debezium reports it; None for another statement.
    An index statement belongs to its table's database but is reported, as Debezium does, under the
    statement's default database, with no table change."""
    text = _COMMENTS.sub(" ", statement).strip()
    m = _DROP.match(text)
    if m:
        tables = [_table(t.group(1), t.group(2), default_db) for t in _EACH.finditer(m.group(2))]
        if tables:
            return Ddl(tables[0][0], [("DROP", db, table) for db, table in tables], tables[0][0], tables[0][1])
    m = _TABLE.match(text)
    if m:
        db, table = _table(m.group(2), m.group(3), default_db)
        return Ddl(db, [(m.group(1).upper(), db, table)], db, table)
    m = _RENAME.match(text)
    if m:
        db, table = _table(m.group(3), m.group(4), default_db)
        return Ddl(db, [("ALTER", db, table)], db, table)
    m = _INDEX.match(text)
    if m:
        db, _ = _table(m.group(1), m.group(2), default_db)
        return Ddl(db, [], default_db, "")
    m = _DATABASE.match(text)
    if m:
        return Ddl(_name(m.group(1)), [], _name(m.group(1)), None)
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
               gtid: str | None, offset: int) -> Any | None:
        """The record batch of one DDL statement (one record, or one per table a DROP TABLE drops), or None
        when it is no DDL of a captured database."""
        import pyarrow as pa

        ddl = parse_ddl(statement, default_db)
        if ddl is None or not self.captures(ddl.database):
            return None
        events: list[tuple[str, list[tuple[str, str, str]], str | None]]
        if ddl.changes and ddl.changes[0][0] == "DROP":  # Debezium: one event per dropped table, its own statement
            events = [(f"DROP TABLE `{db}`.`{table}`", [(kind, db, table)], table) for kind, db, table in ddl.changes]
        else:
            events = [(statement, ddl.changes, ddl.table)]
        value_t = self.schema.field("value").type
        key_t = self.schema.field("key").type
        values = []
        for text, table_changes, table in events:
            source = {"version": self.version, "connector": self.connector, "name": self.topic,
                      "ts_ms": ts * 1000, "snapshot": "false", "db": ddl.name, "ts_us": ts * 1_000_000,
                      "ts_ns": ts * 1_000_000_000, "table": table, "server_id": server_id, "gtid": gtid,
                      "file": file, "pos": pos, "row": 0,
                      "query": statement if self.settings.include_query else None}
            values.append({"source": source, "ts_ms": ts * 1000, "databaseName": ddl.name, "schemaName": None,
                           "ddl": text, "tableChanges": [{"type": kind, "id": f'"{db}"."{name}"', "table": None}
                                                         for kind, db, name in table_changes]})
        n = len(values)
        value = pa.array([{f.name: v.get(f.name) for f in value_t} for v in values], value_t)
        key = pa.array([{f.name: ddl.name if f.name == "databaseName" else None for f in key_t}] * n, key_t)
        columns = {"key": key, "value": value, "topic": pa.array([self.topic] * n, pa.string()),
                   "partition": pa.array([0] * n, pa.int32()),
                   "offset": pa.array([offset + i for i in range(n)], pa.int64()),
                   "timestamp": pa.array([ts * 1_000_000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))}
        arrays = [columns[f.name] if f.name in columns else no_headers(n) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
