"""Which tables a PostgreSQL connector captures, their columns' types, and its record schema.

One connector, one replication slot, one publication, many tables: the captured tables are those of the
catalog that the filters (``schema.*``/``table.*``/``column.*`` include and exclude lists, regular
expressions matched in full, ignoring case) let through, narrowed to the publication's tables when the
publication already decides them (``publication.autocreate.mode`` ``disabled``/``no_tables``, or an existing
``all_tables`` publication). System schemas and the signal table are never captured. Key columns stay even
when the column filters leave them out. The union of the tables is a :class:`~..cdc.layout.Layout`; the
envelope's ``source`` is Debezium's ``io.debezium.connector.postgresql.Source``.

>>> captured_layout(PgSession(settings), settings).tables                 # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

from ..cdc.config import matches
from ..cdc.envelope import record_type, source_fields
from ..cdc.layout import KeyedColumn, Layout, build_layout
from ..cdc.types import TypeSpec
from .config import PostgresSettings, PublicationMode
from .session import PgSession
from .types import jdbc_size, type_spec

__all__ = ["SOURCE_NAME", "captured_layout", "column_wanted", "pg_record_type", "source_type", "table_wanted"]

log = logging.getLogger(__name__)

SOURCE_NAME = "io.debezium.connector.postgresql.Source"
_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")


def table_wanted(settings: PostgresSettings, schema: str, table: str) -> bool:
    """Whether the filters capture ``schema.table`` (never a system table, never the signal table)."""
    s = settings
    if schema in _SYSTEM_SCHEMAS or schema.startswith("pg_"):
        return False
    if (schema, table) == s.signal_table:
        return False  # the signal table is read, never emitted
    if s.schema_include and not matches(s.schema_include, schema):
        return False
    if matches(s.schema_exclude, schema):
        return False
    tid = f"{schema}.{table}"
    if s.table_include and not matches(s.table_include, tid):
        return False
    return not matches(s.table_exclude, tid)


def column_wanted(settings: PostgresSettings, schema: str, table: str, column: str) -> bool:
    """Whether the column filters emit ``schema.table.column``."""
    cid = f"{schema}.{table}.{column}"
    if settings.column_include and not matches(settings.column_include, cid):
        return False
    return not matches(settings.column_exclude, cid)


def _catalog(session: PgSession, settings: PostgresSettings) -> list[tuple[str, str, list[KeyedColumn]]]:
    rows = session.query("""
        select n.nspname, c.relname, a.attname, t.typname, a.atttypmod, t.typcategory, et.typname,
               t.typtype = 'e',
               coalesce((select k.n from unnest(i.indkey) with ordinality k(a, n) where k.a = a.attnum), 0)
        from pg_class c
        join pg_namespace n on n.oid = c.relnamespace
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
                            and a.attgenerated = ''
        join pg_type t on t.oid = a.atttypid
        left join pg_type et on et.oid = t.typelem and t.typcategory = 'A'
        left join pg_index i on i.indrelid = c.oid and i.indisprimary
        where c.relkind in ('r', 'p') and not c.relispartition
          and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname !~ '^pg_'
        order by n.nspname, c.relname, a.attnum""")
    tables: dict[tuple[str, str], list[tuple[str, TypeSpec, int]]] = {}
    for schema, table, col, typname, typmod, cat, eltype, is_enum, keypos in rows:
        if not table_wanted(settings, schema, table):
            continue
        cols = tables.setdefault((schema, table), [])
        if not column_wanted(settings, schema, table, col) and not keypos:
            continue
        spec = type_spec(typname, typmod, category=cat, element=(eltype, typmod) if eltype else None,
                         is_enum=bool(is_enum), decimal_mode=settings.decimal_mode, time_mode=settings.time_mode,
                         interval_mode=settings.interval_mode, binary_mode=settings.binary_mode)
        if settings.column_rules:
            length, scale = jdbc_size(typname, typmod, eltype)
            spec = settings.column_rules.apply(schema, table, col, spec, (typname, length, scale))
        cols.append((col, spec, int(keypos)))
    rules = settings.column_rules
    return [(s, t, rules.key_positions(s, t, cols)) for (s, t), cols in tables.items()]


def captured_layout(session: PgSession, settings: PostgresSettings) -> Layout:
    """The captured tables and their fields, from the catalog (and the publication, where it decides)."""
    cat = _catalog(session, settings)
    mode = settings.publication_mode
    if mode in (PublicationMode.DISABLED, PublicationMode.NO_TABLES) or (
            mode is PublicationMode.ALL_TABLES and session.publication_tables()):
        pub = session.publication_tables()
        if pub is not None:
            cat = [c for c in cat if (c[0], c[1]) in pub]
    layout = build_layout(settings.topic_prefix, cat)
    if not layout.tables:
        log.warning("%s: no table matches the filters: the connector captures nothing", settings.name)
    return layout


def source_type() -> Any:
    """Debezium's PostgreSQL ``source`` struct."""
    from pyspark.sql import types as T

    return T.StructType([
        *source_fields(), T.StructField("schema", T.StringType()), T.StructField("table", T.StringType()),
        T.StructField("txId", T.LongType()), T.StructField("lsn", T.LongType()), T.StructField("xmin", T.LongType()),
        # Debezium 3.6's logical replication origin of the change: none here (pgoutput's origin messages are
        # not decoded), null as in Debezium for changes made on this server
        T.StructField("origin", T.StringType()), T.StructField("origin_lsn", T.LongType()),
    ])


def pg_record_type(layout: Layout) -> Any:
    """The Spark record schema of a PostgreSQL connector capturing ``layout``."""
    return record_type(layout, source_type(), SOURCE_NAME)
