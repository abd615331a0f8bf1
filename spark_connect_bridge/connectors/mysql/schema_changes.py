"""Debezium's schema change events from the binlog's DDL statements (``include.schema.changes``).

A DDL statement reaches the binlog as a query event with its default database. It becomes one record on the
topic ``<topic.prefix>`` when it is a DDL of tables, indexes or databases (``CREATE``/``ALTER``/``DROP``/
``RENAME TABLE``, ``CREATE``/``DROP INDEX``, ``CREATE``/``ALTER``/``DROP DATABASE``) of a captured database
(one holding a captured table, or named by ``database.include.list``): key ``{databaseName}``, value
``source`` (the statement's binlog position), ``ts_ms``, ``databaseName``, ``schemaName`` (null, as MySQL's),
``ddl``, ``tableChanges`` (``type`` CREATE/ALTER/DROP and ``id`` ``"db"."table"`` of each table the statement
changes, and ``table``: the table after a CREATE or ALTER as :mod:`.table_changes` describes it, null after a
DROP). As Debezium, a ``DROP TABLE`` is one event per dropped table, each with the statement Debezium writes
for it (``DROP TABLE `db`.`t```, without the server's comment).

**The snapshot's events.** Debezium's snapshot records the schema it starts from as schema change events before
the rows, and so does this one (:meth:`SchemaChanges.snapshot`): ``SET character_set_server=...``, a ``DROP
TABLE IF EXISTS`` of each captured table, then per captured database ``DROP DATABASE IF EXISTS``, ``CREATE
DATABASE`` (its charset and collation), ``USE`` and each table's ``SHOW CREATE TABLE``, at the snapshot's
position, ``snapshot`` true. Debezium's (with its default ``schema.history.internal.store.only.captured.tables.
ddl=false``) also records every other database's tables on the server; this one the captured databases' only.

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
from .session import Session
from .table_changes import describe

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
    """Schema change records of one layout's connector, one Arrow record batch per DDL statement (``session``:
    where the changed tables are described, :func:`~.table_changes.describe`)."""

    def __init__(self, settings: Settings, layout: Layout, schema: Any, version: str, connector: str,
                 session: Session):
        self.settings, self.schema, self.layout = settings, schema, layout
        self.version, self.connector = version, connector
        self.topic = layout.prefix
        self.databases = {t.schema.lower() for t in layout.tables}
        self.session = session

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
        ddl = parse_ddl(statement, default_db)
        if ddl is None or not self.captures(ddl.database):
            return None
        events: list[tuple[str, list[tuple[str, str, str]], str | None]]
        if ddl.changes and ddl.changes[0][0] == "DROP":  # Debezium: one event per dropped table, its own statement
            events = [(f"DROP TABLE `{db}`.`{table}`", [(kind, db, table)], table) for kind, db, table in ddl.changes]
        else:
            events = [(statement, ddl.changes, ddl.table)]
        where = {"file": file, "pos": pos, "ts": ts, "server_id": server_id, "gtid": gtid, "snapshot": "false",
                 "query": statement if self.settings.include_query else None}
        return self._batch([(ddl.name, table, text, self._changes(changes)) for text, changes, table in events],
                           offset, where)

    def snapshot(self, file: str, pos: int, ts: int, offset: int) -> Any | None:
        """The snapshot's schema change records (see the module's docstring), or None without captured tables."""
        if not self.layout.tables:
            return None
        charset, collation = self.session.query("SELECT @@character_set_server, @@collation_server")[0]
        events: list[tuple[str, str | None, str, list[dict[str, Any]]]] = [
            ("", None, f"SET character_set_server={_text(charset)}, collation_server={_text(collation)}", [])]
        by_db: dict[str, list[str]] = {}
        for t in self.layout.tables:
            by_db.setdefault(t.schema, []).append(t.table)
            events.append((t.schema, t.table, f"DROP TABLE IF EXISTS `{t.schema}`.`{t.table}`",
                           [{"type": "DROP", "id": f'"{t.schema}"."{t.table}"', "table": None}]))
        for db, tables in by_db.items():
            rows = self.session.query("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                                      "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (db,))
            events.append((db, None, f"DROP DATABASE IF EXISTS `{db}`", []))
            if rows:
                events.append((db, None, f"CREATE DATABASE `{db}` CHARSET {_text(rows[0][0])} COLLATE "
                                         f"{_text(rows[0][1])}", []))
            events.append((db, None, f"USE `{db}`", []))
            described = describe(self.session, db, tables)
            for table in tables:
                if table not in described:
                    continue  # dropped since the query started
                text = _text(self.session.query(f"SHOW CREATE TABLE `{db}`.`{table}`")[0][1])
                events.append((db, table, text, [{"type": "CREATE", "id": f'"{db}"."{table}"',
                                                  "table": described[table]}]))
        where = {"file": file, "pos": pos, "ts": ts, "server_id": 0, "gtid": None, "snapshot": "true",
                 "query": None}
        return self._batch(events, offset, where, same_offset=True)

    def _changes(self, changes: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """tableChanges of a statement: each changed table described (null for a DROP)."""
        wanted: dict[str, list[str]] = {}
        for kind, db, name in changes:
            if kind != "DROP":
                wanted.setdefault(db, []).append(name)
        described = {(db, name): table for db, names in wanted.items() for name, table in
                     describe(self.session, db, names).items()}
        return [{"type": kind, "id": f'"{db}"."{name}"', "table": described.get((db, name))}
                for kind, db, name in changes]

    def _batch(self, events: list[tuple[str, str | None, str, list[dict[str, Any]]]], offset: int,
               where: dict[str, Any], same_offset: bool = False) -> Any:
        """One record per (databaseName, source.table, ddl, tableChanges), all at one binlog position."""
        import pyarrow as pa

        value_t = self.schema.field("value").type
        key_t = self.schema.field("key").type
        ts = where["ts"]
        values = []
        for db, table, text, table_changes in events:
            source = {"version": self.version, "connector": self.connector, "name": self.topic,
                      "ts_ms": ts * 1000, "snapshot": where["snapshot"], "db": db, "ts_us": ts * 1_000_000,
                      "ts_ns": ts * 1_000_000_000, "table": table, "server_id": where["server_id"],
                      "gtid": where["gtid"], "file": where["file"], "pos": where["pos"], "row": 0,
                      "query": where["query"]}
            values.append({"source": source, "ts_ms": ts * 1000, "databaseName": db, "schemaName": None,
                           "ddl": text, "tableChanges": table_changes})
        n = len(values)
        value = pa.array([{f.name: v.get(f.name) for f in value_t} for v in values], value_t)
        key = pa.array([{f.name: v["databaseName"] if f.name == "databaseName" else None for f in key_t}
                        for v in values], key_t)
        columns = {"key": key, "value": value, "topic": pa.array([self.topic] * n, pa.string()),
                   "partition": pa.array([0] * n, pa.int32()),
                   "offset": pa.array([offset + (0 if same_offset else i) for i in range(n)], pa.int64()),
                   "timestamp": pa.array([ts * 1_000_000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))}
        arrays = [columns[f.name] if f.name in columns else no_headers(n) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
