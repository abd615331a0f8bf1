"""PostgreSQL change data capture with Debezium's configs and change events
(``io.debezium.connector.postgresql.PostgresConnector``).

One connector, one replication slot, one publication, many tables. The records are Debezium's change events:
``key`` the primary-key struct, ``value`` the envelope ``before``/``after``/``source``/``op``/``ts_ms``, topic
``<topic.prefix>.<schema>.<table>``, a tombstone after each delete (``tombstones.on.delete``).

**Reading the slot: SQL logical decoding functions, not the replication protocol.** A micro-batch must be a
pure function of its offsets (Spark replays an uncommitted batch after a crash). With
``pg_logical_slot_peek_binary_changes`` the slot is never consumed by reading: the same call over the same
range returns the same rows (SYSTEMS.md §1), ``upto_lsn`` bounds it to whole transactions, and the slot is
moved only by ``pg_replication_slot_advance`` in :meth:`PostgresConnector.commit`, after Spark committed the
batch. Each call is a stateless session (relations are re-sent), so an executor needs nothing but the offsets
and a plain ``psycopg`` connection. The replication protocol would stream faster (no re-decoding from
``restart_lsn`` on every call), but it moves the slot by feedback, needs a long-lived connection per slot and
a client library psycopg 3 does not have; its only use here is ``CREATE_REPLICATION_SLOT ... (SNAPSHOT
'export')``, which no SQL function offers.

**Offsets.** Source partition ``{"server": <topic.prefix>}``; stream position ``{"lsn": <LSN>}`` (plus
Debezium's ``"txId"``/``"ts_usec"`` when it is a commit end LSN). A micro-batch is every transaction whose
commit record starts in ``[start.lsn, end.lsn)`` (for commit end LSNs: whose commit end LSN is in
``(start.lsn, end.lsn]``). :meth:`latest_offsets` does not decode the batch to count its changes (that would
be a second full server-side decode of every batch): ``end`` is ``max.records.per.trigger`` changes' worth of
WAL after ``start``, the WAL bytes per change measured on the first messages after ``start`` (within
:data:`WAL_BYTES_PER_CHANGE` and :data:`WAL_BYTES_PER_CHANGE_MAX`), never less than one transaction, so the
bound is approximate (a batch whose later changes are much smaller than its first ones, such as deletes after
inserts, may hold more). With a signal table the end is still chosen at a counted transaction boundary
(incremental-snapshot chunks are placed by it). The slot serves one session at a time, so a batch is one read
task. Executors fetch the peek as Arrow (ADBC) and decode it in bulk (:mod:`.pgoutput_bulk`).

**Snapshot, then stream, without gap or duplicate.** The slot is created with an exported snapshot; every
snapshot chunk is read in a transaction that imports it (``SET TRANSACTION SNAPSHOT``), so the snapshot is
exactly the database at the slot's consistent point and streaming starts at that point. Snapshot positions
are ``{"lsn": <consistent point>, "snapshot": "true", "snapshot_name": ..., "snapshot_table": "s.t",
"snapshot_key": <JSON of the last primary key read, "" before the first>, "ts_usec": ..., "txId": <the
snapshot transaction's id, which every snapshot event's source.txId carries>}``: chunks are
primary-key ranges (``ctid`` ranges for tables without a key), so they too replay exactly. The exported
snapshot lives as long as the driver's replication connection: if the driver dies during the snapshot, the
remaining chunks are read from a fresh snapshot and logged as such (rows changed meanwhile are then read at
their newer state and their changes streamed again: at-least-once for that window, which a mirror applying
events in order absorbs).

**Many tables in one DataFrame.** ``before``/``after`` are one struct holding the union of every captured
table's columns (a column whose type differs between tables is kept apart, as ``<column>__<schema>_<table>``);
``key`` is the union of the key columns. ``topic`` says which table a row belongs to, and
:func:`table_events` narrows a DataFrame to one table's exact Debezium types (``connect.name`` =
``<prefix>.<schema>.<table>.Envelope``/``.Value``/``.Key``), for a per-table sink. ExtractNewRecordState works
on either shape.

Type mapping (Debezium's, ``decimal.handling.mode`` and ``time.precision.mode`` honoured): int2/int4/int8 →
int16/int32/int64; float4/float8; boolean; text types → string; numeric(p,s) → Decimal (``precise``), or
VariableScaleDecimal without a declared precision, or float64/string; date → ``io.debezium.time.Date``
(int32 days; Connect Date in ``connect`` mode); time → MicroTime/Time; timestamp → MicroTimestamp/Timestamp
(Connect Timestamp in ``connect`` mode); timestamptz → ZonedTimestamp ISO-8601 string in UTC; uuid, json,
jsonb, xml, interval (ISO-8601) → named strings; bytea → bytes; one-dimensional arrays → arrays; any other
type → its text form.

Unchanged TOAST values (a column PostgreSQL does not resend when an update leaves it unchanged): taken from
the old row when the table has ``REPLICA IDENTITY FULL``; otherwise set to ``unavailable.value.placeholder``
(Debezium's ``__debezium_unavailable_value``) for string and bytes columns, explicitly, never an empty value.

**Incremental snapshots on demand** (``signal.data.collection``, Debezium's signal table ``(id varchar primary
key, type varchar, data varchar)``, in the publication, never emitted): inserting ``type='execute-snapshot'``,
``data='{"data-collections": ["public.orders"], "type": "incremental"}'`` snapshots those tables in primary-key
chunks of ``incremental.snapshot.chunk.size`` rows, one chunk per micro-batch, as ``op=r`` events with
``source.snapshot="incremental"`` interleaved with the stream. Debezium's watermarks (DBLog) de-duplicate a
chunk against the changes streamed inside its window; to keep a batch a pure function of its offsets the
driver writes the chunk's rows into the high-watermark row, so the executor reads chunk and window from the
slot (see :meth:`PostgresConnector._write_chunk`). The progress (tables left, last key, paused) is the
offset's ``incremental`` entry, folded from the signal rows of each batch's range; the executor folds the same
rows, so a chunk is emitted exactly when the offsets count it. Debezium's other signals: ``stop-snapshot``
(``data-collections`` lists tables to drop from the running snapshot; none or empty stops it; a chunk in
flight for a stopped table is dropped), ``pause-snapshot``/``resume-snapshot`` (no chunk is written while
paused, the stream goes on; resume continues after the last key; the in-flight chunk is still delivered, as
Debezium delivers its open window), ``log`` (``data.message`` logged at INFO, its ``{}`` replaced by the
signal's position). ``additional-conditions`` (``[{"data-collection": "public.orders", "filter": "qty > 10
AND status IN ('new', 'paid')"}]``) restrict a table's chunks, but a filter is not pasted into the chunk query
as Debezium does (that would run any SQL a writer of the signal table puts there): it must be conditions
``<column> <op> <literal>``, ``<column> IS [NOT] NULL``, ``<column> [NOT] IN (...)`` joined by ``AND``
(:func:`_parse_filter`), which become SQL with quoted identifiers and bound values; another filter rejects the
signal (logged), and one PostgreSQL cannot apply (a value that does not fit its column) stops that table's
snapshot. Bad signals are logged and skipped. Not implemented: ``surrogate-key``, blocking snapshots, tables
without a primary key; under ``Trigger.AvailableNow`` a run delivers at most one new chunk.

Deviations from Debezium, all deliberate: envelope ``ts_ms`` is the commit time (the processing time would
make replays differ); ``heartbeat.interval.ms`` moves the offset (and so the slot) over WAL that holds no
captured change but emits no heartbeat records; only ``plugin.name=pgoutput``.

>>> df = (spark.readStream.format("kconnect")                                     # doctest: +SKIP
...       .options(**{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
...                   "database.hostname": "127.0.0.1", "database.port": "5432",
...                   "database.user": "postgres", "database.dbname": "shop",
...                   "topic.prefix": "shop", "table.include.list": "public.orders,public.customers"})
...       .load())
>>> orders = table_events(df, "public.orders")                                    # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import CaseInsensitiveValidString, ConfigDef, Importance, Lambda, NonEmptyString, Range, Type
from ..core.records import HEADERS_TYPE, arrow_schema, no_headers
from ..core.topic_schemas import TABLES_META
from ..errors import ConfigProblem, ConnectError, DataError
from ..version import __version__
from .base import ReadRange, ReadTask, SourceConnector
from .offsets import Offsets, partition_key
from .pgoutput import (
    PG_EPOCH_US,
    SESSION_OPTIONS,
    UNCHANGED,
    Change,
    Decoder,
    Relation,
    TypeSpec,
    decode_tuple,
    text_array,
    to_arrow,
    type_spec,
)
from .pgoutput_bulk import ChunkBuffer, Unsupported, decode_chunk, gather_binary

__all__ = ["PostgresConnector", "table_events", "lsn_text", "parse_lsn"]

log = logging.getLogger(__name__)

_INSTALL_HINT = "PostgreSQL CDC needs psycopg: pip install 'spark_connect_bridge[postgres]'"
_SNAPSHOT_MODES = ("initial", "never", "always", "initial_only", "no_data", "when_needed", "schema_only")
_SNAPSHOTTING = ("initial", "always", "initial_only", "when_needed")
_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
_CHANGE_TAGS = "73,85,68,84"  # I U D T
#: The fewest WAL bytes taken for one change when a batch end is chosen without decoding (see
#: PostgresConnector._stream_end_by_wal): a single-row insert of a narrow table writes ~100-250 bytes
#: (SYSTEMS.md §1: 255 MB for 1M rows of five columns), so a batch rarely holds more changes than asked.
WAL_BYTES_PER_CHANGE = 128
#: Change messages after a batch's start that the measured WAL bytes per change rests on (at least).
WAL_SAMPLE_CHANGES = 1_000
#: The most WAL bytes taken for one change: a sample of very wide rows followed by narrow ones (or deletes)
#: would otherwise make a batch many times the size asked. Rows wider than this make smaller batches.
WAL_BYTES_PER_CHANGE_MAX = 4_096
ENVELOPE_FIELDS = ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns")


def lsn_text(lsn: int) -> str:
    """``0x16B3748`` -> ``'0/16B3748'``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - the extra is installed in tests
        raise ConnectError(_INSTALL_HINT) from e
    return psycopg


def _adbc() -> Any:
    """ADBC's PostgreSQL DB-API module, or None (then the slot is read row by row with psycopg)."""
    try:
        import adbc_driver_postgresql.dbapi as adbc
    except ImportError:  # pragma: no cover - the postgres extra installs it
        return None
    return adbc


class SlotBusy(ConnectError):
    """The replication slot is active in another session (a peek found it so)."""


class ReadInterrupted(ConnectError):
    """The connection reading the slot was lost (the server restarted, or an operator ended it)."""


#: libpq's words for a connection that went away under a query
_CONNECTION_LOST = ("server closed the connection", "terminating connection", "could not receive data",
                    "no connection to the server", "connection to server", "SSL SYSCALL error")


def _transient(e: Exception, psycopg: Any, adbc: Any) -> bool:
    """Errors worth retrying, as psycopg's OperationalError covers them for the per-message path: ADBC
    reports a slot busy with another session (SQLSTATE 55006) as a ProgrammingError, and a lost server
    as an OperationalError or by the connection (08) and operator intervention (57) classes."""
    if isinstance(e, (psycopg.OperationalError, SlotBusy, ReadInterrupted)):
        return True
    if adbc is None or not isinstance(e, adbc.Error):
        return False
    state = getattr(e, "sqlstate", None) or ""
    return isinstance(e, adbc.OperationalError) or state == "55006" or state[:2] in ("08", "57", "53")


def _adbc_connect(info: dict[str, Any]) -> Any:
    """An ADBC connection from psycopg-style connection keywords (a libpq URI; the password stays in it
    and is never logged)."""
    from urllib.parse import quote

    kw = dict(info)
    auth = quote(str(kw.pop("user")), safe="")
    if "password" in kw:
        auth += ":" + quote(str(kw.pop("password")), safe="")
    host = str(kw.pop("host"))
    host = f"[{host}]" if ":" in host else host
    uri = f"postgresql://{auth}@{host}:{kw.pop('port')}/{quote(str(kw.pop('dbname')), safe='')}"
    extra = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in kw.items())
    return _adbc().connect(uri + (("?" + extra) if extra else ""), autocommit=True)


def _regex_list(v: list[str]) -> str | None:
    for item in v:
        try:
            re.compile(item)
        except re.error as e:
            return f"'{item}' is not a valid regular expression: {e}"
    return None


def _skipped_ops(v: list[str]) -> str | None:
    bad = [x for x in v if x not in ("c", "u", "d", "t", "none")]
    return f"unknown operations {', '.join(bad)}; allowed: c, u, d, t, none" if bad else None


def _exclusive(cfg: Any) -> list[ConfigProblem]:
    out = []
    for what in ("schema", "table", "column"):
        if cfg[f"{what}.include.list"] and cfg[f"{what}.exclude.list"]:
            out.append(ConfigProblem(f"{what}.exclude.list",
                                     f"{what}.include.list and {what}.exclude.list are mutually exclusive "
                                     f"(Debezium allows only one of them)"))
    return out


# ------------------------------------------------------------------------------------------------ layout
@dataclass(frozen=True)
class Column:
    name: str
    field: str  # the field of the union row struct that holds this column
    spec: TypeSpec
    key_position: int  # 1-based position in the primary key, 0 when not a key column


@dataclass(frozen=True)
class Table:
    schema: str
    table: str
    topic: str
    columns: tuple[Column, ...]

    @property
    def id(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def key(self) -> tuple[Column, ...]:
        return tuple(sorted((c for c in self.columns if c.key_position), key=lambda c: c.key_position))


@dataclass(frozen=True)
class Layout:
    """The captured tables and the union row/key structs (plain data: it travels to executors)."""

    prefix: str
    tables: tuple[Table, ...]
    row_fields: tuple[tuple[str, TypeSpec], ...]
    key_fields: tuple[tuple[str, TypeSpec], ...]

    def table(self, schema: str, name: str) -> Table | None:
        for t in self.tables:
            if t.schema == schema and t.table == name:
                return t
        return None


def _compat(spec: TypeSpec) -> tuple:
    return (spec.kind, spec.connect_name, spec.parameters, spec.precision, spec.scale,
            _compat(spec.element) if spec.element else None)


def build_layout(prefix: str, tables: Sequence[tuple[str, str, list[tuple[str, TypeSpec, int]]]]) -> Layout:
    """Union the captured tables' columns: same name and type share a field, a clash is qualified."""
    fields: dict[str, TypeSpec] = {}
    key_fields: dict[str, TypeSpec] = {}
    out = []
    for schema, name, cols in sorted(tables, key=lambda t: (t[0], t[1])):
        columns = []
        for col, spec, keypos in cols:
            f = col
            if f in fields and _compat(fields[f]) != _compat(spec):
                f = f"{col}__{schema}_{name}"
            fields.setdefault(f, spec)
            if keypos:
                key_fields.setdefault(f, spec)
            columns.append(Column(col, f, spec, keypos))
        out.append(Table(schema, name, f"{prefix}.{schema}.{name}", tuple(columns)))
    return Layout(prefix, tuple(out), tuple(fields.items()), tuple(key_fields.items()))


def _struct_of(fields: Sequence[tuple[str, TypeSpec]]) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f, s.spark_type(), True, s.metadata()) for f, s in fields])


def _source_type() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    snap_meta = {"connect.name": "io.debezium.data.Enum", "connect.version": 1,
                 "connect.parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,"
                                                   "last,false,incremental"}}
    return StructType([
        StructField("version", StringType()), StructField("connector", StringType()),
        StructField("name", StringType()), StructField("ts_ms", LongType()),
        StructField("snapshot", StringType(), True, snap_meta), StructField("db", StringType()),
        StructField("sequence", StringType()), StructField("ts_us", LongType()), StructField("ts_ns", LongType()),
        StructField("schema", StringType()), StructField("table", StringType()),
        StructField("txId", LongType()), StructField("lsn", LongType()), StructField("xmin", LongType()),
    ])


def _layout_meta(layout: Layout) -> dict[str, Any]:
    return {t.id: {"topic": t.topic, "columns": [c.name for c in t.columns],
                   "fields": [c.field for c in t.columns], "key": [c.name for c in t.key]}
            for t in layout.tables}


def _names(layout: Layout) -> tuple[str, str, str]:
    """connect.name of the envelope, row and key structs (exact for one table)."""
    if len(layout.tables) == 1:
        base = layout.tables[0].topic
    else:
        base = layout.prefix
    return f"{base}.Envelope", f"{base}.Value", f"{base}.Key"


def record_type(layout: Layout) -> Any:
    """The Spark record schema for ``layout``: Debezium envelope values, union row structs."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

    env_name, row_name, key_name = _names(layout)
    row = _struct_of(layout.row_fields)
    tables = _layout_meta(layout)
    row_meta = {"connect.name": row_name, TABLES_META: json.dumps(tables)}
    value = StructType([
        StructField("before", row, True, row_meta), StructField("after", row, True, row_meta),
        StructField("source", _source_type(), True, {"connect.name": "io.debezium.connector.postgresql.Source"}),
        StructField("op", StringType()), StructField("ts_ms", LongType()), StructField("ts_us", LongType()),
        StructField("ts_ns", LongType()),
    ])
    key = _struct_of(layout.key_fields) if layout.key_fields else BinaryType()
    return StructType([
        StructField("key", key, True, {"connect.name": key_name, TABLES_META: json.dumps(tables)}),
        StructField("value", value, True, {"connect.name": env_name, TABLES_META: json.dumps(tables)}),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("headers", HEADERS_TYPE),
    ])


# ------------------------------------------------------------------------------------------ the range
@dataclass(frozen=True)
class CdcRange(ReadRange):
    """A micro-batch of the slot plus what the executor needs to decode it (no catalog lookups there)."""

    layout: Layout | None = None


class PostgresConnector(SourceConnector):
    """Debezium's PostgreSQL connector over logical decoding (pgoutput)."""

    kafka_class = "io.debezium.connector.postgresql.PostgresConnector"
    default_max_records_per_trigger = 100_000
    config_def = (
        ConfigDef()
        .define("database.hostname", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="IP address or hostname of the PostgreSQL server.", group="Connection")
        .define("database.port", Type.INT, 5432, Range.between(1, 65535), Importance.HIGH,
                "Port of the PostgreSQL server.", group="Connection")
        .define("database.user", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="User with the REPLICATION attribute (and SELECT on the captured tables).", group="Connection")
        .define("database.password", Type.PASSWORD, None, importance=Importance.HIGH,
                doc="Password of database.user.", group="Connection")
        .define("database.dbname", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="The database to capture.", group="Connection")
        .define("database.sslmode", Type.STRING, "prefer",
                CaseInsensitiveValidString("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
                Importance.MEDIUM, "libpq sslmode of every connection.", group="Connection")
        .define("topic.prefix", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="Prefix of every topic (<prefix>.<schema>.<table>) and the source partition's name.",
                group="Connector")
        .define("plugin.name", Type.STRING, "pgoutput",
                Lambda(lambda v: None if v == "pgoutput" else
                       "only pgoutput is supported (built into PostgreSQL 10+; decoderbufs needs a server "
                       "extension this connector does not use)", "pgoutput"),
                Importance.MEDIUM, "Logical decoding output plugin. Debezium's default is decoderbufs; here "
                                   "pgoutput, the only one supported.", group="Replication")
        .define("slot.name", Type.STRING, "debezium", NonEmptyString(), Importance.MEDIUM,
                "Name of the logical replication slot (one per connector).", group="Replication")
        .define("slot.drop.on.stop", Type.BOOLEAN, False, importance=Importance.LOW,
                doc="Drop the slot when the connector stops (only when Spark calls stop(); never on a crash).",
                group="Replication")
        .define("publication.name", Type.STRING, "dbz_publication", NonEmptyString(), Importance.MEDIUM,
                "Name of the PostgreSQL publication the slot decodes.", group="Replication")
        .define("publication.autocreate.mode", Type.STRING, "all_tables",
                CaseInsensitiveValidString("all_tables", "disabled", "filtered", "no_tables"), Importance.MEDIUM,
                "all_tables: create the publication FOR ALL TABLES if missing; filtered: create/update it for "
                "the captured tables; disabled: it must exist; no_tables: create it empty.",
                group="Replication")
        .define("schema.include.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of schema names to capture.", group="Filters")
        .define("schema.exclude.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of schema names not to capture.", group="Filters")
        .define("table.include.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of <schema>.<table> names to capture.", group="Filters")
        .define("table.exclude.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of <schema>.<table> names not to capture.",
                group="Filters")
        .define("column.include.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of <schema>.<table>.<column> names to emit.",
                group="Filters")
        .define("column.exclude.list", Type.LIST, [], Lambda(_regex_list, "regular expressions"),
                Importance.MEDIUM, "Regular expressions of <schema>.<table>.<column> names not to emit.",
                group="Filters")
        .define("snapshot.mode", Type.STRING, "initial", CaseInsensitiveValidString(*_SNAPSHOT_MODES),
                Importance.HIGH,
                "initial: snapshot when the query has no checkpoint, then stream; always: snapshot at every "
                "query start; initial_only: snapshot and stop; no_data (schema_only) and never: stream only; "
                "when_needed: snapshot when there is no checkpoint or the slot no longer has its position.",
                group="Snapshot")
        .define("tombstones.on.delete", Type.BOOLEAN, True, importance=Importance.MEDIUM,
                doc="Emit a tombstone (same key, null value) after each delete event.", group="Events")
        .define("skipped.operations", Type.LIST, ["t"], Lambda(_skipped_ops, "c, u, d, t or none"),
                Importance.LOW, "Operations not emitted: c (insert), u (update), d (delete), t (truncate), "
                                "none. Debezium's default skips truncates.", group="Events")
        .define("decimal.handling.mode", Type.STRING, "precise",
                CaseInsensitiveValidString("precise", "double", "string"), Importance.MEDIUM,
                "numeric columns as Decimal (precise), float64 (double) or string.", group="Events")
        .define("time.precision.mode", Type.STRING, "adaptive",
                CaseInsensitiveValidString("adaptive", "adaptive_time_microseconds", "connect", "isostring"),
                Importance.MEDIUM, "How date, time and timestamp columns are represented (Debezium's modes).",
                group="Events")
        .define("unavailable.value.placeholder", Type.STRING, "__debezium_unavailable_value",
                importance=Importance.LOW,
                doc="Value of an unchanged TOASTed string/bytes column PostgreSQL did not send (tables without "
                    "REPLICA IDENTITY FULL).", group="Events")
        .define("heartbeat.interval.ms", Type.INT, 0, Range.at_least(0), Importance.MEDIUM,
                "When > 0, at most this often move the offset over WAL that holds no captured change, so "
                "the slot does not retain WAL of other tables' traffic. No heartbeat records are emitted.",
                group="Replication")
        .define("max.batch.size", Type.INT, 2048, Range.at_least(1), Importance.LOW,
                "Events per Arrow record batch handed to Spark.", group="Connector")
        .define("signal.data.collection", Type.STRING, "",
                Lambda(lambda v: None if not v or re.fullmatch(r"[^.\s]+\.[^.\s]+", v) else
                       "expected <schema>.<table>", "<schema>.<table> or empty"),
                Importance.MEDIUM,
                "<schema>.<table> of Debezium's signal table (id varchar primary key, type varchar, data "
                "varchar). Inserting type 'execute-snapshot' with data '{\"data-collections\": "
                "[\"public.orders\"], \"type\": \"incremental\"}' starts an incremental snapshot of those "
                "captured tables; 'stop-snapshot' (data-collections: the tables to drop from it, none: all), "
                "'pause-snapshot' and 'resume-snapshot' control it; 'log' logs data's message at INFO. "
                "additional-conditions filters must be plain conditions (<column> <op> <literal>, IS [NOT] "
                "NULL, [NOT] IN (...), joined by AND), never pasted SQL. The table must be in the publication; "
                "its rows are never emitted. The connector writes its watermark rows (snapshot-window-open/"
                "-close) into it and deletes them again. Empty: no signals.", group="Snapshot")
        .define("incremental.snapshot.chunk.size", Type.INT, 1024, Range.at_least(1), Importance.MEDIUM,
                "Rows per incremental snapshot chunk (one chunk is read per micro-batch).", group="Snapshot")
        .define("snapshot.fetch.size", Type.INT, 10240, Range.at_least(1), Importance.LOW,
                "Accepted for compatibility; snapshot chunks are bounded by max.records.per.trigger.",
                group="Snapshot")
        .define("max.queue.size", Type.INT, 8192, Range.at_least(1), Importance.LOW,
                "Accepted for compatibility (Debezium's in-memory queue); no effect.", group="Connector")
        .define("poll.interval.ms", Type.LONG, 500, Range.at_least(0), Importance.LOW,
                "Accepted for compatibility; Spark's trigger interval sets the polling rate.", group="Connector")
        .check(_exclusive)
    )

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._layout: Layout | None = None
        self._conn: Any = None  # driver connection (not pickled)
        self._snapshot_conn: Any = None  # replication connection holding the exported snapshot (driver)
        self._snapshot_name: str | None = None
        self._initial: Offsets | None = None
        self._last_heartbeat = 0.0
        self._last_lag_log = 0.0
        self._started = False  # snapshot.mode=always: first latest_offsets of this process

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = state["_snapshot_conn"] = None
        return state

    # ---------------------------------------------------------------------------------- connections
    @property
    def _key(self) -> str:
        return partition_key({"server": self.config["topic.prefix"]})

    @property
    def _signal(self) -> tuple[str, str] | None:
        s = self.config["signal.data.collection"]
        return (s.split(".", 1)[0], s.split(".", 1)[1]) if s else None

    @property
    def _mode(self) -> str:
        m = self.config["snapshot.mode"].lower()
        return "no_data" if m == "schema_only" else m

    def _conninfo(self, **extra: Any) -> dict[str, Any]:
        pw = self.config.get("database.password")
        info = {"host": self.config["database.hostname"], "port": self.config["database.port"],
                "user": self.config["database.user"], "dbname": self.config["database.dbname"],
                "sslmode": self.config["database.sslmode"].lower(), "connect_timeout": 10,
                "application_name": f"kconnect-{self.name}"[:63], "options": SESSION_OPTIONS}
        if pw is not None and pw.value():
            info["password"] = pw.value()
        info.update(extra)
        return info

    def _connect(self, autocommit: bool = True, **extra: Any) -> Any:
        psycopg = _psycopg()
        return self._retry(lambda: psycopg.connect(autocommit=autocommit, **self._conninfo(**extra)), "connect")

    def _retry(self, fn: Callable[[], Any], what: str) -> Any:
        """Retry connection failures and a slot busy with another session within errors.retry.timeout
        (a slot still held by the backend of a crashed driver is retried for at least a minute)."""
        psycopg = _psycopg()
        timeout = self.config.get("errors.retry.timeout", 0)
        delay_max = self.config.get("errors.retry.delay.max.ms", 60000) / 1000.0
        start, delay = time.monotonic(), 0.3
        while True:
            try:
                return fn()
            except psycopg.OperationalError as e:
                busy = isinstance(e, psycopg.errors.ObjectInUse)
                limit = float("inf") if timeout < 0 else max(timeout / 1000.0, 60.0 if busy else 0.0)
                if time.monotonic() - start + delay > limit:
                    raise
                log.warning("%s: %s failed (%s); retrying in %.1fs", self.name, what, str(e).strip(), delay)
                time.sleep(delay)
                delay = min(delay * 2, delay_max)

    def _driver(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _query(self, sql: Any, params: Any = None) -> list[tuple]:
        psycopg = _psycopg()

        def run() -> list[tuple]:
            try:
                cur = self._driver().execute(sql, params)
                return cur.fetchall() if cur.description else []
            except psycopg.OperationalError:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise

        return self._retry(run, "query")

    # ---------------------------------------------------------------------------------- catalog
    def _match(self, patterns: list[str], value: str) -> bool:
        return any(re.fullmatch(p, value, re.IGNORECASE) for p in patterns)

    def _wanted(self, schema: str, table: str) -> bool:
        c = self.config
        if schema in _SYSTEM_SCHEMAS or schema.startswith("pg_"):
            return False
        if (schema, table) == self._signal:
            return False  # the signal table is read, never emitted
        if c["schema.include.list"] and not self._match(c["schema.include.list"], schema):
            return False
        if self._match(c["schema.exclude.list"], schema):
            return False
        tid = f"{schema}.{table}"
        if c["table.include.list"] and not self._match(c["table.include.list"], tid):
            return False
        return not self._match(c["table.exclude.list"], tid)

    def _column_wanted(self, schema: str, table: str, column: str) -> bool:
        c, cid = self.config, f"{schema}.{table}.{column}"
        if c["column.include.list"] and not self._match(c["column.include.list"], cid):
            return False
        return not self._match(c["column.exclude.list"], cid)

    def _publication_tables(self) -> set[tuple[str, str]] | None:
        """Tables of the publication, or None when it does not exist."""
        pub = self.config["publication.name"]
        exists = self._query("select puballtables from pg_publication where pubname = %s", (pub,))
        if not exists:
            return None
        rows = self._query("select schemaname, tablename from pg_publication_tables where pubname = %s", (pub,))
        return {(s, t) for s, t in rows}

    def _catalog(self) -> list[tuple[str, str, list[tuple[str, TypeSpec, int]]]]:
        rows = self._query("""
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
        dmode, tmode = self.config["decimal.handling.mode"].lower(), self.config["time.precision.mode"].lower()
        tables: dict[tuple[str, str], list[tuple[str, TypeSpec, int]]] = {}
        for schema, table, col, typname, typmod, cat, eltype, is_enum, keypos in rows:
            if not self._wanted(schema, table):
                continue
            cols = tables.setdefault((schema, table), [])
            if not self._column_wanted(schema, table, col) and not keypos:
                continue
            spec = type_spec(typname, typmod, category=cat, element=(eltype, typmod) if eltype else None,
                             is_enum=bool(is_enum), decimal_mode=dmode, time_mode=tmode)
            cols.append((col, spec, int(keypos)))
        return [(s, t, cols) for (s, t), cols in tables.items()]

    def _ensure_publication(self, tables: list[tuple[str, str]]) -> None:
        from psycopg import sql

        mode = self.config["publication.autocreate.mode"].lower()
        pub = self.config["publication.name"]
        existing = self._publication_tables()
        ident = sql.Identifier(pub)
        table_list = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in sorted(tables))
        if existing is None:
            if mode == "disabled":
                raise ConnectError(f"Publication {pub!r} does not exist and publication.autocreate.mode is "
                                   f"'disabled': create it (CREATE PUBLICATION {pub} FOR TABLE ...) or choose "
                                   f"another mode")
            if mode == "all_tables":
                self._query(sql.SQL("create publication {} for all tables").format(ident))
            elif mode == "filtered" and tables:
                self._query(sql.SQL("create publication {} for table {}").format(ident, table_list))
            else:
                self._query(sql.SQL("create publication {}").format(ident))
            log.info("%s: created publication %s (%s)", self.name, pub, mode)
        elif mode == "filtered" and set(tables) != existing and tables:
            self._query(sql.SQL("alter publication {} set table {}").format(ident, table_list))
            log.info("%s: publication %s now covers %s", self.name, pub, ", ".join(f"{s}.{t}" for s, t in tables))

    def layout(self) -> Layout:
        """The captured tables and their fields (queried once per process)."""
        if self._layout is None:
            cat = self._catalog()
            mode = self.config["publication.autocreate.mode"].lower()
            if mode in ("disabled", "no_tables") or (mode == "all_tables" and self._publication_tables()):
                pub = self._publication_tables()
                if pub is not None:
                    cat = [c for c in cat if (c[0], c[1]) in pub]
            self._layout = build_layout(self.config["topic.prefix"], cat)
            if not self._layout.tables:
                log.warning("%s: no table matches the filters: the connector captures nothing", self.name)
        return self._layout

    # ---------------------------------------------------------------------------------- driver
    def schema(self) -> Any:
        return record_type(self.layout())

    def _slot(self) -> tuple[int, int] | None:
        """(confirmed_flush_lsn, restart_lsn) of the slot, or None when it does not exist."""
        rows = self._query("select (confirmed_flush_lsn - '0/0'::pg_lsn)::int8, (restart_lsn - '0/0'::pg_lsn)::int8,"
                           " database, plugin from pg_replication_slots where slot_name = %s",
                           (self.config["slot.name"],))
        if not rows:
            return None
        cf, rl, db, plugin = rows[0]
        if db != self.config["database.dbname"] or plugin != "pgoutput":
            raise ConnectError(f"Replication slot {self.config['slot.name']!r} belongs to database {db!r} with "
                               f"plugin {plugin!r}; choose another slot.name")
        return int(cf), int(rl)

    def _create_slot(self, export: bool) -> tuple[int, str | None]:
        """Create the slot over a replication connection; with ``export`` keep the connection (and so the
        exported snapshot) open on the driver until the snapshot is committed."""
        psycopg = _psycopg()
        slot = self.config["slot.name"]
        conn = self._connect(replication="database")
        try:
            kind = "(SNAPSHOT 'export')" if export else "(SNAPSHOT 'nothing')"
            row = conn.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput {kind}').fetchone()
        except psycopg.Error as e:
            conn.close()
            raise ConnectError(f"Cannot create replication slot {slot!r}: {e}") from e
        assert row is not None
        lsn, name = parse_lsn(row[1]), row[2]
        if export:
            self._snapshot_conn, self._snapshot_name = conn, name
        else:
            conn.close()
        log.info("%s: created replication slot %s at %s%s", self.name, slot, row[1],
                 f" with exported snapshot {name}" if export else "")
        return lsn, name

    def _drop_slot(self) -> None:
        self._query("select pg_drop_replication_slot(%s)", (self.config["slot.name"],))

    def _snapshot_start(self) -> dict[str, Any]:
        """Create the slot with an exported snapshot and return the first snapshot position."""
        if self._slot() is not None:  # snapshot.mode=always: a new slot for a new consistent snapshot
            log.warning("%s: dropping replication slot %s to take a new consistent snapshot (a snapshot that "
                        "matches the slot exists only when the slot is created)", self.name,
                        self.config["slot.name"])
            self._drop_slot()
        lsn, name = self._create_slot(export=True)
        tables = [t.id for t in self.layout().tables]
        if not tables:
            return {"lsn": lsn}
        # Debezium's snapshot events carry the snapshot transaction's id (txid_current() in the transaction
        # that reads the snapshot). Taken once here and kept in the offsets, so that every chunk, replayed or
        # read from a fresh snapshot after a driver crash, carries the same one.
        conn = self._connect()
        try:
            self._snapshot_tx(conn, name or "", read_only=False)
            ts, txid = conn.execute("select (extract(epoch from clock_timestamp()) * 1000000)::int8, "
                                    "txid_current()").fetchone()
            conn.execute("rollback")
        finally:
            conn.close()
        return {"lsn": lsn, "snapshot": "true", "snapshot_name": name or "", "snapshot_table": tables[0],
                "snapshot_key": "", "ts_usec": int(ts), "txId": int(txid)}

    def initial_offsets(self) -> Offsets:
        if self._initial is not None:
            return self._initial
        layout = self.layout()
        tables = [(t.schema, t.table) for t in layout.tables]
        if self._signal is not None:
            self._signal_table()  # fails early when it is missing or malformed
            tables.append(self._signal)
        self._ensure_publication(tables)
        if self._signal is not None:
            pub = self._publication_tables()
            if pub is not None and self._signal not in pub:
                raise ConnectError(f"The signal table {'.'.join(self._signal)} is not in publication "
                                   f"{self.config['publication.name']!r}: add it (ALTER PUBLICATION ... ADD TABLE) "
                                   f"so that its inserts reach the replication slot")
        slot = self._slot()
        if slot is not None:
            # Never drop an existing slot here: Spark may ask for initial offsets of a query that resumes
            # from its checkpoint (Trigger.AvailableNow), and the slot may hold another query's position.
            if self._mode in _SNAPSHOTTING:
                log.warning("%s: replication slot %s exists: streaming from its position %s without a new "
                            "snapshot. Drop the slot or choose another slot.name for a consistent snapshot",
                            self.name, self.config["slot.name"], lsn_text(slot[0]))
            pos = {"lsn": slot[0]}
        elif self._mode in _SNAPSHOTTING:
            pos = self._snapshot_start()
        else:
            pos = {"lsn": self._create_slot(export=False)[0]}
        self._initial = {self._key: pos}
        self._started = True
        return self._initial

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        pos = dict(start.get(self._key) or self.initial_offsets()[self._key])
        if self._mode == "always" and not self._started:
            self._started = True
            if "snapshot" not in pos:
                log.info("%s: snapshot.mode=always: taking a new snapshot at query start", self.name)
                return {self._key: self._snapshot_start()}
        self._started = True
        if "snapshot" in pos:
            end = self._snapshot_end(pos, max_records, until)
        elif self._mode == "initial_only":
            end = pos
        else:
            if self._signal is not None:
                self._write_chunk(pos)
            end = self._stream_end(pos, max_records, until)
            if self._signal is not None and "snapshot" not in end:
                end = self._incremental_end(pos, end)
        self._log_lag(end)
        return {self._key: end}

    def _log_lag(self, end: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._last_lag_log < 10.0:
            return
        self._last_lag_log = now
        lag = self.lag({self._key: end})
        log.info("%s: replication slot %s lag %s bytes behind the WAL at offset %s", self.name,
                 self.config["slot.name"], lag, lsn_text(int(end["lsn"])))

    def lag(self, current: Offsets) -> int | None:
        """Bytes of WAL between the offset and the server's current WAL position."""
        pos = current.get(self._key)
        if not pos:
            return None
        rows = self._query("select (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8")
        return max(0, int(rows[0][0]) - int(pos["lsn"]))

    def _check_slot(self, lsn: int) -> None:
        slot = self._slot()
        if slot is None:
            if self._mode == "when_needed":
                return
            raise ConnectError(f"Replication slot {self.config['slot.name']!r} does not exist any more: the "
                               f"changes after {lsn_text(lsn)} are gone. Start a new query (new checkpoint) to "
                               f"take a new snapshot, or use snapshot.mode=when_needed")
        if slot[0] > lsn:
            raise ConnectError(f"Replication slot {self.config['slot.name']!r} was advanced to "
                               f"{lsn_text(slot[0])}, past this query's offset {lsn_text(lsn)}: another consumer "
                               f"used the slot and those changes cannot be read again")

    def _stream_end(self, pos: dict[str, Any], max_records: int | None, until: Offsets | None) -> dict[str, Any]:
        start = int(pos["lsn"])
        if self._mode == "when_needed" and self._slot() is None:
            log.warning("%s: slot %s is missing: snapshot.mode=when_needed takes a new snapshot", self.name,
                        self.config["slot.name"])
            return self._snapshot_start()
        self._check_slot(start)
        cap = None
        if until is not None and self._key in until and "snapshot" not in until[self._key]:
            cap = int(until[self._key]["lsn"])
            if cap <= start:
                return pos
        flush = int(self._query("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::int8")[0][0])
        upto = min(flush, cap) if cap is not None else flush
        if self._signal is None:
            return self._stream_end_by_wal(pos, start, upto, max_records)
        limit = None if max_records is None else max_records * 2 + 10_000
        while True:
            commits, total = self._commits(upto, limit)
            after = [c for c in commits if c[0] > start]
            before = [c for c in commits if c[0] <= start]
            base = before[-1][1] if before else 0
            chosen = None
            for lsn, n, xid, ts in after:
                if max_records is not None and chosen is not None and n - base > max_records:
                    break
                chosen = (lsn, xid, ts)
            exhausted = limit is None or total < limit
            if chosen is not None and (exhausted or (after and after[-1][1] - base > max_records)):
                lsn, xid, ts = chosen
                return {"lsn": lsn, "txId": xid, "ts_usec": ts}
            if exhausted:
                break
            limit *= 4
        return self._heartbeat(pos, start, upto)

    def _stream_end_by_wal(self, pos: dict[str, Any], start: int, upto: int,
                           max_records: int | None) -> dict[str, Any]:
        """The end of the next batch without decoding it: ``max.records.per.trigger`` changes are taken as
        that many times the WAL bytes per change of the first changes after ``start`` (between
        :data:`WAL_BYTES_PER_CHANGE` and :data:`WAL_BYTES_PER_CHANGE_MAX`; never less than the first
        transaction, never past ``upto``).

        Counting the changes exactly needs the server to decode the whole range (~260k messages/s, SYSTEMS.md
        §1), which the executor then decodes again to read it: a second full decode per batch. Any LSN is a
        valid end, since a batch is the transactions whose commit record *starts* in ``[start, end)`` (see
        :class:`~.pgoutput.Decoder`), a split PostgreSQL applies too when the slot is advanced there; so an
        end is a pure function of the offsets and replays identically (the chosen end is in the checkpoint
        before the batch runs; how it was chosen need not be repeatable). Only the first changes are decoded
        here, to know that the batch is not empty (else: no batch, or a heartbeat) and how much WAL a change
        takes: with a fixed guess, rows wider than it made batches of a fraction of the size asked, and every
        extra batch costs a Spark job and another server-side decode from the slot's ``restart_lsn``."""
        first, per_change = self._first_commit_after(start, upto)
        if first is None:
            return self._heartbeat(pos, start, upto)
        if max_records is None:
            return {"lsn": max(first, upto)}
        step = max_records * min(max(WAL_BYTES_PER_CHANGE, per_change), WAL_BYTES_PER_CHANGE_MAX)
        return {"lsn": max(first, min(upto, start + step))}

    def _first_commit_after(self, start: int, upto: int) -> tuple[int | None, int]:
        """End LSN of the first commit after ``start`` up to ``upto`` holding captured changes (or None), and
        the WAL bytes per captured change after ``start`` seen on the way (0 when too few to tell). The peek
        starts at the slot's position, which may be behind ``start`` (batches read but not committed), so the
        row limit grows until a commit past ``start`` and :data:`WAL_SAMPLE_CHANGES` changes past it show up,
        or the range is exhausted."""
        limit = 1_000
        while True:
            row = self._query(f"""
                select min(l) filter (where tag = 67 and l > %s), count(*),
                       count(*) filter (where tag in ({_CHANGE_TAGS}) and l > %s),
                       max(l) filter (where tag in ({_CHANGE_TAGS}) and l > %s),
                       min(l) filter (where tag in ({_CHANGE_TAGS}) and l > %s)
                from (select (p.lsn - '0/0'::pg_lsn)::int8 as l, get_byte(p.data, 0) as tag
                      from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, %s::int4, 'proto_version',
                                                               '1', 'publication_names', %s::text) p) c""",
                              (start, start, start, start, self.config["slot.name"], lsn_text(upto), limit,
                               self.config["publication.name"]))[0]
            commit, total, changes = row[0], int(row[1]), int(row[2])
            exhausted = total < limit
            if commit is not None and (changes >= WAL_SAMPLE_CHANGES or exhausted):
                per_change = (int(row[3]) - int(row[4])) // (changes - 1) if changes > 1 else 0
                return int(commit), per_change
            if exhausted:
                return None, 0
            limit *= 16

    def _heartbeat(self, pos: dict[str, Any], start: int, upto: int) -> dict[str, Any]:
        """Nothing captured after start: optionally move over WAL without captured changes (heartbeat)."""
        hb = self.config["heartbeat.interval.ms"]
        now = time.monotonic()
        if hb > 0 and upto > start and (now - self._last_heartbeat) * 1000 >= hb:
            self._last_heartbeat = now
            return {"lsn": upto}
        return pos

    def _commits(self, upto: int, limit: int | None) -> tuple[list[tuple[int, int, int, int]], int]:
        """Commit end LSN, cumulative change count, xid and commit time (µs since the Unix epoch) of every
        transaction the slot holds up to ``upto`` (decoded on the server; only commit rows travel)."""
        rows = self._query(f"""
            with p as materialized (
                select (p.lsn - '0/0'::pg_lsn)::int8 as l, get_byte(p.data, 0) as tag, p.xid::text::int8 as xid,
                       count(*) filter (where get_byte(p.data, 0) in ({_CHANGE_TAGS}))
                           over (order by p.ord rows unbounded preceding) as n,
                       case when get_byte(p.data, 0) = 67 then substring(p.data from 19 for 8) end as ts
                from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, %s::int4, 'proto_version', '1',
                                                         'publication_names', %s::text)
                     with ordinality as p(lsn, xid, data, ord))
            select l, n, xid, ts, (select count(*) from p) from p where tag = 67
            union all select null, null, null, null, (select count(*) from p)""",
                           (self.config["slot.name"], lsn_text(upto), limit, self.config["publication.name"]))
        total = int(rows[-1][4])

        commits = [(int(l), int(n), int(x), int.from_bytes(ts, "big", signed=True) + PG_EPOCH_US)
                   for l, n, x, ts, _ in rows[:-1]]
        return commits, total

    # ---- snapshot chunks
    def _snapshot_tx(self, conn: Any, name: str, *, read_only: bool = True) -> bool:
        """Begin a REPEATABLE READ transaction on ``conn`` importing snapshot ``name``; False when the
        snapshot no longer exists (its exporting connection is gone) and a fresh one is used instead."""
        psycopg = _psycopg()
        begin = "begin isolation level repeatable read" + (" read only" if read_only else "")
        conn.execute(begin)
        if name:
            try:
                conn.execute(f"set transaction snapshot '{name}'")
                return True
            except psycopg.errors.InvalidParameterValue:
                conn.execute("rollback")
                conn.execute(begin)
                log.warning("%s: exported snapshot %s is gone (the driver that created the slot stopped): "
                            "reading the rest of the snapshot from a new one; changes made meanwhile to rows "
                            "not yet read may be delivered twice", self.name, name)
                return False
        return False

    def _snapshot_end(self, pos: dict[str, Any], max_records: int | None, until: Offsets | None) -> dict[str, Any]:
        from psycopg import sql

        layout = self.layout()
        ids = [t.id for t in layout.tables]
        stream_pos = {"lsn": int(pos["lsn"])}
        if pos["snapshot_table"] not in ids:
            return stream_pos
        budget = max_records
        i, key = ids.index(pos["snapshot_table"]), pos["snapshot_key"]
        if budget is None:
            # Everything: the rest of the snapshot plus the stream available now, in one range.
            return self._stream_end(stream_pos, None, until) if self._mode != "initial_only" else stream_pos
        conn = self._connect()
        try:
            self._snapshot_tx(conn, pos.get("snapshot_name", ""))
            while i < len(ids):
                t = layout.tables[i]
                cols, where, params = _key_predicate(t, key, None)
                q = sql.SQL("select {} from {} {} order by {} offset %s limit 2").format(
                    sql.SQL(", ").join(sql.SQL("{}::text").format(c) for c in cols),
                    sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
                rows = conn.execute(q, params + [budget - 1]).fetchall()
                if len(rows) == 2:  # the chunk ends inside the table (else the table ends within budget)
                    return {**pos, "snapshot_table": t.id, "snapshot_key": json.dumps(list(rows[0]))}
                n = conn.execute(sql.SQL("select count(*) from {} {}").format(
                    sql.Identifier(t.schema, t.table), where), params).fetchone()[0]
                budget -= int(n)
                i, key = i + 1, ""
                if budget <= 0 and i < len(ids):
                    return {**pos, "snapshot_table": ids[i], "snapshot_key": ""}
            return stream_pos
        finally:
            conn.close()

    # ---- incremental snapshots (signal table)
    # Debezium's watermark algorithm (DBLog), made replayable. Debezium reads a chunk between a low and a
    # high watermark it writes into the signal table, buffers the chunk and drops every buffered row whose key
    # the stream changes between the two watermarks. A chunk read cannot be repeated here: PostgreSQL cannot
    # read a table "as of" an LSN, and Spark replays a micro-batch from its offsets. So the driver writes the
    # chunk itself into the WAL: the high watermark row carries the chunk's rows (their text forms) in its
    # ``data``. The executor then finds the low watermark, the changes in the window and the chunk, all in the
    # slot, and de-duplicates there: a batch stays a pure function of its LSN range, exactly like a streamed
    # change. Offsets only say where the snapshot stands ("incremental": remaining tables, last key emitted),
    # folded from the signal rows of each batch's range, so they are small and a crashed driver's chunk that
    # reached the WAL is emitted and counted like any other. The watermark rows are deleted in the high
    # watermark's own transaction: the table stays small, the WAL keeps them for replays.
    _OPEN, _CLOSE = "snapshot-window-open", "snapshot-window-close"

    def _signal_table(self) -> tuple[int, list[str]]:
        """(relid, column names in order) of the signal table; fails when it is missing or malformed."""
        assert self._signal is not None
        rows = self._query("""
            select c.oid::int8, array_agg(a.attname::text order by a.attnum)
            from pg_class c join pg_namespace n on n.oid = c.relnamespace
            join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
            where n.nspname = %s and c.relname = %s group by c.oid""", self._signal)
        name = ".".join(self._signal)
        if not rows:
            raise ConnectError(f"The signal table {name} (signal.data.collection) does not exist: CREATE TABLE "
                               f"{name} (id varchar(42) primary key, type varchar(32) not null, data varchar)")
        relid, cols = int(rows[0][0]), list(rows[0][1])
        missing = [c for c in ("id", "type", "data") if c not in cols]
        if missing:
            raise ConnectError(f"The signal table {name} lacks the column(s) {', '.join(missing)}: Debezium's "
                               f"layout is (id varchar primary key, type varchar, data varchar)")
        return relid, cols

    def _signals(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """Rows inserted into the signal table by transactions with commit LSN in ``(lo, hi]``, in commit
        order, each with its transaction's commit LSN (``lsn``, as in offsets), ``txId`` and ``ts_usec``."""

        relid, cols = self._signal_table()
        rows = self._query("""
            with p as materialized (
                select (p.lsn - '0/0'::pg_lsn)::int8 as l, p.xid::text::int8 as xid, get_byte(p.data, 0) as tag,
                       p.data, p.ord
                from pg_logical_slot_peek_binary_changes(%s::name, %s::pg_lsn, NULL::int4, 'proto_version', '1',
                                                         'publication_names', %s::text)
                     with ordinality as p(lsn, xid, data, ord)),
            s as (select * from p where tag = 73 and substring(data from 2 for 4) = %s::bytea)
            select l, xid, tag, data from s
            union all select l, xid, tag, data from p where tag = 67 and xid in (select xid from s)
            """,
                           (self.config["slot.name"], lsn_text(hi), self.config["publication.name"],
                            relid.to_bytes(4, "big")))
        # A transaction's inserts precede its commit row; group them by xid and stamp them at the commit.
        pending: dict[int, list[dict[str, Any]]] = {}
        out = []
        for lsn, xid, tag, data in sorted(rows, key=lambda r: (int(r[0]), -int(r[2]))):
            xid, data = int(xid), bytes(data)
            if tag == 73:
                vals = dict(zip(cols, decode_tuple(data, 6)[0]))
                text = {k: (v.decode() if isinstance(v, bytes) else None) for k, v in vals.items()}
                pending.setdefault(xid, []).append(text)
            else:
                l = int(lsn)
                ts = int.from_bytes(data[18:26], "big", signed=True) + PG_EPOCH_US
                for sig in pending.pop(xid, []):
                    if lo < l <= hi:
                        out.append({**sig, "lsn": l, "txId": xid, "ts_usec": ts})
        return out

    def _fold(self, state: dict[str, Any] | None, signals: list[dict[str, Any]], quiet: bool = False,
              layout: Layout | None = None) -> dict[str, Any] | None:
        """The incremental snapshot after ``signals`` (in commit order), Debezium's signal actions:
        execute-snapshot adds tables; stop-snapshot removes the listed tables, or stops the whole snapshot;
        pause-snapshot/resume-snapshot stop and restart the writing of chunks; log logs its message; a high
        watermark the state accepts (:meth:`_accepts`) moves the last key (or finishes its table). Bad
        signals are logged and skipped. ``quiet``: log at DEBUG and leave out the log signal's message (the
        same signals are folded again with ``quiet=False`` once per batch, by :meth:`_incremental_end`).
        Pure: the executor folds the same rows to decide which chunks to emit."""
        layout = layout or self.layout()
        say = log.debug if quiet else log.warning
        tell = log.debug if quiet else log.info
        for sig in signals:
            kind, raw, sid = (sig.get("type") or "").strip(), sig.get("data") or "", sig.get("id")
            if kind == self._OPEN:
                continue
            if kind == self._CLOSE:
                d = json.loads(raw)
                if self._accepts(state, d):
                    assert state is not None
                    if d["done"]:
                        state = self._with_tables(state, state["tables"][1:], "")
                    else:
                        state = {**state, "key": d["last"]}
                    if not state["tables"]:
                        tell("%s: incremental snapshot %s finished", self.name, state["signal"])
                        state = None
                continue
            if kind == "log":
                if not quiet:
                    self._log_signal(sig, raw)
                continue
            if kind not in self._ACTIONS:
                say("%s: signal %s of type %r ignored: supported types are %s", self.name, sid, kind,
                    ", ".join(self._ACTIONS + ("log",)))
                continue
            data, problem = self._signal_data(raw)
            if problem:
                say("%s: signal %s (%s) ignored: %s (data: %s)", self.name, sid, kind, problem, raw[:200])
                continue
            if kind == "execute-snapshot":
                tables, filters, problem = self._snapshot_request(data, layout)
                if problem:
                    say("%s: signal %s ignored: %s (data: %s)", self.name, sid, problem, raw[:200])
                    continue
                base = state or {"signal": sid or "", "tables": [], "key": ""}
                added = [t for t in tables if t not in base["tables"]]
                filters = {**base.get("filters", {}), **{t: f for t, f in filters.items() if t in added}}
                state = self._with_tables({**base, "filters": filters}, base["tables"] + added, base["key"])
                tell("%s: signal %s: incremental snapshot of %s%s", self.name, sid, ", ".join(tables),
                     " (paused: it starts on resume-snapshot)" if state.get("paused") else "")
            elif state is None:
                tell("%s: signal %s (%s) ignored: no incremental snapshot is running", self.name, sid, kind)
            elif kind == "stop-snapshot":
                state = self._stop(state, data, layout, sid, tell, say)
            elif kind == "pause-snapshot":
                if not state.get("paused"):
                    tell("%s: signal %s: incremental snapshot %s paused after key %s of %s", self.name, sid,
                         state["signal"], state["key"] or "(start)", state["tables"][0])
                state = {**state, "paused": True}
            elif state.get("paused"):  # resume-snapshot
                tell("%s: signal %s: incremental snapshot %s resumed", self.name, sid, state["signal"])
                state = {k: v for k, v in state.items() if k != "paused"}
            else:
                tell("%s: signal %s (resume-snapshot) ignored: the incremental snapshot is not paused", self.name,
                     sid)
        return state

    #: the signal types that act on the incremental snapshot (``log`` only logs)
    _ACTIONS = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot")

    @staticmethod
    def _accepts(state: dict[str, Any] | None, close: dict[str, Any]) -> bool:
        """Whether a high watermark's chunk belongs to the running snapshot: the table it is at, the key it
        stands after, the snapshot that wrote it (absent in watermarks of older versions). A chunk the state
        does not accept (its table was stopped meanwhile, or a stale chunk) is neither counted nor emitted."""
        return (state is not None and bool(state["tables"]) and state["tables"][0] == close["table"]
                and state["key"] == close["after"] and close.get("snapshot", state["signal"]) == state["signal"])

    @staticmethod
    def _signal_data(raw: str) -> tuple[dict[str, Any], str | None]:
        """A signal's ``data`` as a JSON object (empty data: ``{}``), and its ``type`` checked: only
        incremental snapshots are supported."""
        if not raw.strip():
            return {}, None
        try:
            d = json.loads(raw)
        except ValueError as e:
            return {}, f"data is not JSON ({e})"
        if not isinstance(d, dict):
            return {}, "data must be a JSON object"
        kind = d.get("type", "incremental")
        if not isinstance(kind, str) or kind.lower() != "incremental":
            return {}, f"snapshot type {kind!r} is not supported (only incremental)"
        return d, None

    @staticmethod
    def _collections(names: Any, layout: Layout) -> tuple[list[str], str | None]:
        """Captured tables named by ``data-collections`` (names or regular expressions), in layout order
        per name; or why they are rejected."""
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return [], "data-collections must be a non-empty list of <schema>.<table> names"
        tables = []
        for n in names:
            n = n.strip()
            found = [t for t in layout.tables if t.id == n or _fullmatch(n, t.id)]
            if not found:
                return [], f"{n!r} is not a captured table (captured: {', '.join(t.id for t in layout.tables)})"
            tables += [t.id for t in found if t.id not in tables]
        return tables, None

    def _stop(self, state: dict[str, Any], data: dict[str, Any], layout: Layout, sid: Any,
              tell: Callable[..., None], say: Callable[..., None]) -> dict[str, Any] | None:
        """stop-snapshot: without data-collections (or an empty list) the whole incremental snapshot stops;
        with them, those tables leave it (the current one at once: its chunk in flight is dropped)."""
        names = data.get("data-collections")
        if not names:
            tell("%s: signal %s: incremental snapshot %s stopped (%s left unread)", self.name, sid,
                 state["signal"], ", ".join(state["tables"]))
            return None
        tables, problem = self._collections(names, layout)
        if problem:
            say("%s: signal %s (stop-snapshot) ignored: %s", self.name, sid, problem)
            return state
        absent = [t for t in tables if t not in state["tables"]]
        if absent:
            say("%s: signal %s: %s not part of the running incremental snapshot", self.name, sid,
                ", ".join(absent))
        left = [t for t in state["tables"] if t not in tables]
        if len(left) == len(state["tables"]):
            return state
        tell("%s: signal %s: %s removed from incremental snapshot %s", self.name, sid,
             ", ".join(t for t in state["tables"] if t in tables), state["signal"])
        if not left:
            tell("%s: incremental snapshot %s stopped", self.name, state["signal"])
            return None
        return self._with_tables(state, left, state["key"] if left[0] == state["tables"][0] else "")

    @staticmethod
    def _with_tables(state: dict[str, Any], tables: list[str], key: str) -> dict[str, Any]:
        """``state`` with these tables left and the current one after ``key``; the filters of tables that
        left are dropped (and the entry when none is left, so offsets without filters stay as they were)."""
        out = {**state, "tables": tables, "key": key}
        filters = {t: f for t, f in state.get("filters", {}).items() if t in tables}
        if filters:
            out["filters"] = filters
        else:
            out.pop("filters", None)
        return out

    def _log_signal(self, sig: dict[str, Any], raw: str) -> None:
        """Debezium's log signal: ``data.message`` at INFO, its first ``{}`` replaced by the signal's
        position (as Debezium fills in the offset)."""
        data, problem = self._signal_data(raw)
        message = data.get("message") if not problem else None
        if not isinstance(message, str) or not message:
            log.warning("%s: log signal %s ignored: its data has no 'message' (data: %s)", self.name, sig.get("id"),
                        raw[:200])
            return
        where = json.dumps({k: sig[k] for k in ("lsn", "txId", "ts_usec") if k in sig}, sort_keys=True)
        log.info("%s", message.replace("{}", where, 1))

    @staticmethod
    def _snapshot_request(data: dict[str, Any],
                          layout: Layout) -> tuple[list[str], dict[str, str], str | None]:
        """Tables and filters (table -> filter text) of an execute-snapshot signal's data, or the reason it
        is rejected."""
        for unsupported in ("additional-condition", "surrogate-key"):
            if data.get(unsupported):
                return [], {}, (f"{unsupported} is not supported"
                                + (" (use additional-conditions)" if unsupported == "additional-condition" else ""))
        tables, problem = PostgresConnector._collections(data.get("data-collections"), layout)
        if problem:
            return [], {}, problem
        for tid in tables:
            t = layout.table(*tid.split(".", 1))
            if t is not None and not t.key:
                return [], {}, f"table {t.id} has no primary key (incremental snapshots read chunks by key)"
        filters, problem = PostgresConnector._filters(data.get("additional-conditions") or [], tables, layout)
        return (tables, filters, None) if problem is None else ([], {}, problem)

    @staticmethod
    def _filters(conditions: Any, tables: list[str], layout: Layout) -> tuple[dict[str, str], str | None]:
        """``additional-conditions`` (``[{"data-collection": ..., "filter": ...}]``) as table -> filter
        text, each filter checked by :func:`_parse_filter` against its table."""
        if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
            return {}, "additional-conditions must be a list of {\"data-collection\": ..., \"filter\": ...}"
        out: dict[str, str] = {}
        for c in conditions:
            name, text = c.get("data-collection"), c.get("filter")
            if not isinstance(text, str) or not text.strip():
                return {}, f"additional-conditions: the filter of {name!r} must be a non-empty string"
            found, problem = PostgresConnector._collections([name], layout)
            if problem:
                return {}, f"additional-conditions: {problem}"
            for tid in found:
                if tid not in tables:
                    return {}, f"additional-conditions: {tid} is not in data-collections"
                t = layout.table(*tid.split(".", 1))
                assert t is not None
                _, problem = _parse_filter(text, t)
                if problem:
                    return {}, f"additional-conditions: filter {text!r} of {tid} is not supported: {problem}"
                out[tid] = text
        return out, None

    @staticmethod
    def _incr_state(pos: dict[str, Any]) -> dict[str, Any] | None:
        return json.loads(pos["incremental"]) if pos.get("incremental") else None

    def _write_chunk(self, pos: dict[str, Any]) -> None:
        """Write the next chunk (low watermark, rows, high watermark) into the WAL when a snapshot is running
        and not paused, and no chunk written earlier is still ahead of ``pos`` (one chunk in flight at a
        time). The high watermark names the snapshot it belongs to, so a stop-snapshot (or stop and a new
        execute-snapshot) committed while it is in flight drops it (:meth:`_accepts`)."""
        from psycopg import sql

        flush = int(self._query("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::int8")[0][0])
        signals = self._signals(int(pos["lsn"]), flush)
        if any((s.get("type") or "").strip() == self._CLOSE for s in signals):
            return
        state = self._fold(self._incr_state(pos), signals, quiet=True)  # _incremental_end logs them
        if state is None or state.get("paused"):
            return
        t = self.layout().table(*state["tables"][0].split(".", 1))
        assert t is not None
        size = self.config["incremental.snapshot.chunk.size"]
        wid = uuid.uuid4().hex
        ident = sql.Identifier(*self._signal)
        insert = sql.SQL("insert into {} (id, type, data) values (%s, %s, %s)").format(ident)
        self._query(insert, (f"{wid}-open", self._OPEN, json.dumps({"window": wid, "table": t.id})))
        # Read after the low watermark committed: every change the chunk may miss is in the window.
        cols, where, params = _key_predicate(t, state["key"], None)
        text = state.get("filters", {}).get(t.id)
        if text:  # additional-conditions: checked when the signal was folded, bound values here
            conditions, problem = _parse_filter(text, t)
            assert problem is None, problem
            cond, values = _filter_sql(conditions)
            where = (where + sql.SQL(" and ") if params else sql.SQL("where ")) + cond
            params = params + values
        q = sql.SQL("select {} from {} {} order by {} limit %s").format(
            # aliased: ORDER BY a bare name would pick the text output column and sort keys as text
            sql.SQL(", ").join(sql.SQL("{}::text as {}").format(sql.Identifier(c.name), sql.Identifier(f"c{i}"))
                               for i, c in enumerate(t.columns)),
            sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
        try:
            rows = [list(r) for r in self._query(q, params + [size])]
        except (_psycopg().DataError, _psycopg().ProgrammingError) as e:
            if not text:
                raise
            # A filter whose values do not fit its columns ('abc' for an int): the table leaves the snapshot
            # by a stop-snapshot row in the WAL, so the offsets and the executor see it alike.
            log.error("%s: filter %r of the incremental snapshot of %s fails (%s): stopping the snapshot of %s",
                      self.name, text, t.id, str(e).strip().splitlines()[0], t.id)
            stop = json.dumps({"data-collections": [re.escape(t.id)], "type": "incremental"})
            conn = self._driver()
            with conn.transaction():
                conn.execute(insert, (f"{wid}-stop", "stop-snapshot", stop))
                conn.execute(sql.SQL("delete from {} where id = %s").format(ident), (f"{wid}-open",))
            return
        names = [c.name for c in t.columns]
        keyidx = [names.index(c.name) for c in t.key]
        last = json.dumps([rows[-1][i] for i in keyidx]) if rows else state["key"]
        data = json.dumps({"window": wid, "table": t.id, "columns": names, "rows": rows, "after": state["key"],
                           "last": last, "done": len(rows) < size, "snapshot": state["signal"]},
                          separators=(",", ":"))
        conn = self._driver()
        with conn.transaction():
            conn.execute(insert, (f"{wid}-close", self._CLOSE, data))
            conn.execute(sql.SQL("delete from {} where id in (%s, %s)").format(ident), (f"{wid}-open",
                                                                                      f"{wid}-close"))
        log.debug("%s: incremental snapshot chunk %s of %s: %d rows after key %s", self.name, wid, t.id,
                  len(rows), state["key"] or "(start)")

    def _incremental_end(self, pos: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
        """``end`` moved past the high watermark of a chunk window it would cut (the executor needs a whole
        window), with the incremental snapshot state folded over the signals of ``(pos, end]``."""
        lo = int(pos["lsn"])
        flush = int(self._query("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::int8")[0][0])
        signals = self._signals(lo, max(flush, int(end["lsn"])))
        opened: dict[str, int] = {}
        e = int(end["lsn"])
        for s in signals:
            kind = (s.get("type") or "").strip()
            if kind == self._OPEN:
                opened[json.loads(s["data"])["window"]] = s["lsn"]
            elif kind == self._CLOSE:
                o = opened.get(json.loads(s["data"])["window"])
                if o is not None and o <= e < s["lsn"]:
                    end, e = {"lsn": s["lsn"], "txId": s["txId"], "ts_usec": s["ts_usec"]}, s["lsn"]
        state = self._fold(self._incr_state(pos), [s for s in signals if s["lsn"] <= e])
        end = {k: v for k, v in end.items() if k != "incremental"}
        if state is not None:
            end["incremental"] = json.dumps(state, sort_keys=True, separators=(",", ":"))
        return end

    def commit(self, end: Offsets) -> None:
        pos = end.get(self._key)
        if not pos:
            return
        if "snapshot" not in pos and self._snapshot_conn is not None:
            self._snapshot_conn.close()  # the snapshot is committed: release the exported snapshot
            self._snapshot_conn = None
        lsn = int(pos["lsn"])
        slot = self._slot()
        if slot is None or slot[0] >= lsn:
            return  # never backwards (an ERROR in PostgreSQL), nothing to do when already there
        self._query("select pg_replication_slot_advance(%s, %s::pg_lsn)", (self.config["slot.name"], lsn_text(lsn)))
        log.debug("%s: advanced slot %s to %s", self.name, self.config["slot.name"], lsn_text(lsn))

    def stop(self) -> None:
        if self._snapshot_conn is not None:
            self._snapshot_conn.close()
            self._snapshot_conn = None
        if self.config["slot.drop.on.stop"] and self._slot() is not None:
            self._drop_slot()
            log.info("%s: dropped replication slot %s (slot.drop.on.stop)", self.name, self.config["slot.name"])
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        s, e = start.get(self._key), end.get(self._key)
        if s == e or e is None:
            return []
        # One task: a slot serves one session at a time.
        return [ReadTask(0, (CdcRange({"server": self.config["topic.prefix"]}, s, e, self.layout()),))]

    # ---------------------------------------------------------------------------------- executor
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        layout = getattr(rng, "layout", None) or self.layout()
        builder = _Builder(self, layout)
        start = dict(rng.start) if rng.start else self.initial_offsets()[self._key]
        end = dict(rng.end)
        if "snapshot" in start:
            yield from builder.snapshot(start, end)
        if "snapshot" not in end and (self._mode != "initial_only"):
            builder.incremental = self._incr_state(start)
            lo = int(start["lsn"])
            hi = int(end["lsn"])
            if hi > lo:
                yield from builder.stream(lo, hi)


def _fullmatch(pattern: str, text: str) -> bool:
    """``re.fullmatch`` where a pattern that is no regular expression matches nothing."""
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return False


_FILTER_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
                               |(?P<op><>|!=|<=|>=|=|<|>)|(?P<punct>[(),])|(?P<qid>"(?:[^"]|"")+")
                               |(?P<word>[A-Za-z_][A-Za-z0-9_$]*))""", re.VERBOSE)


def _parse_filter(text: str, table: Table) -> tuple[list[tuple[str, str, list[Any]]], str | None]:
    """An ``additional-conditions`` filter as conditions ``(column, operator, values)``, all to hold, or why
    it is rejected. Not SQL: a small language whose conditions become SQL with quoted identifiers and bound
    values, so a signal row cannot run code: ``<column> <op> <literal>`` (op ``= <> != < <= > >=``),
    ``<column> IS [NOT] NULL`` and ``<column> [NOT] IN (<literal>, ...)``, joined by ``AND``; literals are
    'strings', numbers, true/false, kept as text (PostgreSQL reads them as the column's type). Columns are
    the table's (bare names fold to lower case, as in SQL).

    >>> _parse_filter("qty > 10 AND color = 'blue'", orders)                       # doctest: +SKIP
    ([('qty', '>', ['10']), ('color', '=', ['blue'])], None)
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
    out: list[tuple[str, str, list[Any]]] = []
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


def _filter_sql(conditions: list[tuple[str, str, list[Any]]]) -> tuple[Any, list[Any]]:
    """The SQL of :func:`_parse_filter`'s conditions (identifiers quoted, values bound) and its parameters."""
    from psycopg import sql

    parts, params = [], []
    for col, op, values in conditions:
        if op in ("is null", "is not null"):
            parts.append(sql.SQL("{} " + op).format(sql.Identifier(col)))
        elif op in ("in", "not in"):
            marks = sql.SQL(", ").join(sql.SQL("%s") for _ in values)
            parts.append(sql.SQL("{} " + op + " ({})").format(sql.Identifier(col), marks))
            params += values
        else:
            parts.append(sql.SQL("{} " + op + " %s").format(sql.Identifier(col)))
            params += values
    return sql.SQL(" and ").join(parts), params


def _key_predicate(t: Table, after: str, upto: str | None) -> tuple[list[Any], Any, list[Any]]:
    """Key columns (``ctid`` without a primary key) and the WHERE clause of the chunk ``(after, upto]``."""
    from psycopg import sql

    key = t.key
    if key:
        cols = [sql.Identifier(c.name) for c in key]
        types = [sql.SQL(c.spec.pg_type.replace("[]", "") or "text") for c in key]
    else:
        cols, types = [sql.SQL("ctid")], [sql.SQL("tid")]
    conds, params = [], []
    for bound, op in ((after, ">"), (upto, "<=")):
        if bound:
            vals = json.loads(bound)
            row = sql.SQL(", ").join(sql.SQL("%s::{}").format(ty) for ty in types)
            conds.append(sql.SQL("({}) {} ({})").format(sql.SQL(", ").join(cols), sql.SQL(op), row))
            params.extend(vals)
    where = sql.SQL("where ") + sql.SQL(" and ").join(conds) if conds else sql.SQL("")
    return cols, where, params


# ------------------------------------------------------------------------------------------ arrow
class _Windows(dict):
    """The open incremental-snapshot chunk windows of a batch being read (window id -> (table, keys the
    stream changed inside it; None after a truncate)) and the incremental snapshot state, folded over the
    batch's signal rows from the range's start offset."""

    def __init__(self, state: dict[str, Any] | None):
        super().__init__()
        self.state = state


class _Builder:
    """Turns decoded changes and snapshot rows into record batches of the connector's record schema."""

    def __init__(self, conn: PostgresConnector, layout: Layout):
        import pyarrow as pa

        self.c, self.layout = conn, layout
        self.schema = arrow_schema(record_type(layout))
        value_t = self.schema.field("value").type
        self.row_t = value_t.field("before").type
        self.source_t = value_t.field("source").type
        self.key_t = self.schema.field("key").type
        self.value_t = value_t
        self.prefix = layout.prefix
        self.db = conn.config["database.dbname"]
        self.batch = conn.config["max.batch.size"]
        skipped = set(conn.config["skipped.operations"]) - {"none"}
        self.skipped = skipped
        self.tombstones = conn.config["tombstones.on.delete"]
        self.placeholder = conn.config["unavailable.value.placeholder"].encode()

        self.version = __version__
        self.pa = pa
        self.incremental: dict[str, Any] | None = None  # the incremental snapshot at the range's start

    # ---- stream
    def stream(self, lo: int, hi: int) -> Iterator[Any]:
        """Every change of the transactions with commit end LSN in ``(lo, hi]``; retried from where it
        stopped after a lost connection (a re-read is identical, so the first ``done`` events are skipped)."""
        psycopg = _psycopg()
        adbc = _adbc()
        # The signal table's inserts drive incremental-snapshot windows change by change: that mode keeps
        # the per-message path. Everything else reads Arrow through ADBC and decodes in bulk.
        once = self._stream_bulk if adbc is not None and self.c._signal is None else self._stream_once
        retryable: tuple[type, ...] = (psycopg.OperationalError, SlotBusy, ReadInterrupted) + (
            (adbc.Error,) if adbc else ())
        done = 0
        start, delay = time.monotonic(), 0.5
        while True:
            try:
                for batch in once(lo, hi, done):
                    done += batch.num_rows
                    yield batch
                return
            except retryable as e:
                if not _transient(e, psycopg, adbc):
                    raise
                timeout = self.c.config.get("errors.retry.timeout", 0)
                busy = (isinstance(e, (psycopg.errors.ObjectInUse, SlotBusy))
                        or getattr(e, "sqlstate", None) == "55006")
                limit = float("inf") if timeout < 0 else max(timeout / 1000.0, 60.0 if busy else 0.0)
                if time.monotonic() - start + delay > limit:
                    raise
                log.warning("%s: reading the slot failed (%s); retrying in %.1fs", self.c.name, str(e).strip(),
                            delay)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _stream_once(self, lo: int, hi: int, skip: int) -> Iterator[Any]:
        c = self.c
        conn = c._connect(autocommit=False)
        try:
            self._check_readable(conn, lo, hi)
            cur = conn.cursor(name="kconnect_cdc", binary=True)
            cur.itersize = 20_000
            cur.execute("select (lsn - '0/0'::pg_lsn)::int8, data from pg_logical_slot_peek_binary_changes("
                        "%s::name, %s::pg_lsn, NULL::int4, 'proto_version', '1', 'publication_names', %s::text)",
                        (c.config["slot.name"], lsn_text(hi), c.config["publication.name"]))
            dec = Decoder(lo, hi)
            window: list[Change] = []
            emitted = 0
            signal = c._signal
            chunks = _Windows(self.incremental)

            def emit(batches: Iterator[Any]) -> Iterator[Any]:
                nonlocal emitted
                for b in batches:
                    emitted, b = self._skip(b, emitted, skip)
                    if b is not None:
                        yield b

            for ch in dec.changes(cur):
                rel = ch.relation
                if signal is not None and (rel.schema, rel.table) == signal:
                    if ch.op == "c":
                        yield from emit(self._changes_batches(window))
                        window = []
                        yield from emit(self._signal_row(ch, chunks))
                    continue
                if chunks:
                    self._touch(ch, chunks)
                window.append(ch)
                if len(window) >= self.batch:
                    yield from emit(self._changes_batches(window))
                    window = []
            if window:
                yield from emit(self._changes_batches(window))
            cur.close()
            conn.rollback()
        finally:
            conn.close()

    def _check_readable(self, conn: Any, lo: int, hi: int) -> None:
        c = self.c
        row = conn.execute("select (confirmed_flush_lsn - '0/0'::pg_lsn)::int8 from pg_replication_slots "
                           "where slot_name = %s", (c.config["slot.name"],)).fetchone()
        if row is None or int(row[0]) > lo:
            raise ConnectError(f"Replication slot {c.config['slot.name']!r} "
                               f"{'does not exist' if row is None else 'is past ' + lsn_text(lo)}: the "
                               f"changes of this batch ({lsn_text(lo)}, {lsn_text(hi)}] cannot be read")

    def _stream_bulk(self, lo: int, hi: int, skip: int) -> Iterator[Any]:
        """:meth:`_stream_once` with the peek fetched as Arrow (ADBC's binary COPY, no Python object per
        message) and decoded a chunk at a time by :func:`~.pgoutput_bulk.decode_chunk`; a chunk it cannot
        take goes to the per-message decoder with the same state, so the events are the same either way."""
        from psycopg import sql

        c = self.c
        with c._connect() as conn:
            self._check_readable(conn, lo, hi)
            query = sql.SQL("select (lsn - '0/0'::pg_lsn)::int8 as lsn, data from "
                            "pg_logical_slot_peek_binary_changes({}::name, {}::pg_lsn, NULL::int4, "
                            "'proto_version', '1', 'publication_names', {}::text)").format(
                sql.Literal(c.config["slot.name"]), sql.Literal(lsn_text(hi)),
                sql.Literal(c.config["publication.name"])).as_string(conn)
        dec = Decoder(lo, hi)
        emitted = 0
        for rb in self._peek_chunks(query):
            lsn = rb.column(0).to_numpy()
            data = rb.column(1)
            if data.type != self.pa.binary():
                data = data.cast(self.pa.binary())
            state = (dec.keep, dec.xid, dec.ts, dec.done, dict(dec.relations))
            try:
                out = list(self._bulk_batches(decode_chunk(dec, lsn, data), data))
            except Unsupported as e:
                log.debug("%s: per-message decoding for a chunk (%s)", c.name, e)
                dec.keep, dec.xid, dec.ts, dec.done = state[:4]
                dec.relations.clear()
                dec.relations.update(state[4])
                rows = zip(lsn.tolist(), data.to_pylist())
                out = list(self._windowed(dec.changes(rows)))
            for b in out:
                emitted, b = self._skip(b, emitted, skip)
                if b is not None:
                    yield b

    def _peek_chunks(self, query: str) -> Iterator[Any]:
        """The peek's record batches from ADBC. A failure of the server's query reaches the reader as an
        ArrowException without a SQLSTATE, so it is classified here (see :meth:`_peek_error`)."""
        pa = self.pa
        adbc = _adbc()
        with _adbc_connect(self.c._conninfo()) as aconn:
            cur = aconn.cursor()
            try:
                cur.execute(query)
                reader = cur.fetch_record_batch()
                while True:
                    try:
                        rb = reader.read_next_batch()
                    except StopIteration:
                        return
                    except (pa.ArrowException, adbc.Error) as e:
                        raise self._peek_error(e) from e
                    yield rb
            finally:
                cur.close()

    def _peek_error(self, e: Exception) -> Exception:
        """What a failed peek means: the slot busy with another session (:class:`SlotBusy`, retried for at
        least a minute, like psycopg's ObjectInUse), the server gone (psycopg's OperationalError from the
        check, or :class:`ReadInterrupted` by the message), or else the error itself (not retried)."""
        psycopg = _psycopg()
        c = self.c
        try:
            with c._connect() as conn:
                row = conn.execute("select active_pid from pg_replication_slots where slot_name = %s",
                                   (c.config["slot.name"],)).fetchone()
        except psycopg.OperationalError as lost:
            return lost
        if row is not None and row[0] is not None:
            return SlotBusy(f"Replication slot {c.config['slot.name']!r} is in use by PostgreSQL process "
                            f"{row[0]}")
        text = str(e)
        if "is active for PID" in text:  # the holder let go between the failed peek and the check above
            return SlotBusy(f"Replication slot {c.config['slot.name']!r} was in use by another session")
        if any(m in text for m in _CONNECTION_LOST):
            return ReadInterrupted(text.strip())
        return e

    def _windowed(self, changes: Iterator[Change]) -> Iterator[Any]:
        window: list[Change] = []
        for ch in changes:
            window.append(ch)
            if len(window) >= self.batch:
                yield from self._changes_batches(window)
                window = []
        if window:
            yield from self._changes_batches(window)

    def _bulk_batches(self, chunk: Any, data: Any) -> Iterator[Any]:
        """Events of a decoded chunk in message order: built per relation, then put back in order."""
        import numpy as np

        pa = self.pa
        cb = ChunkBuffer(data)
        parts, order = [], []
        for g in chunk.groups:
            rel = g.relation
            t = self.layout.table(rel.schema, rel.table)
            if t is None:
                continue  # published but not captured (filters)
            built = self._group_batch(g, t, cb)
            if built is not None:
                parts.append(built[0])
                order.append(built[1])
        if not parts:
            return
        table = pa.Table.from_batches(parts, schema=self.schema)
        if len(parts) > 1:
            table = table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        yield from table.combine_chunks().to_batches(max_chunksize=max(self.batch, 1))

    def _group_batch(self, g: Any, t: Table, cb: Any) -> tuple[Any, Any] | None:
        """One relation's events (Debezium's: a delete and its tombstone, creates, updates) and their order
        keys (message position * 2 + 1 for a tombstone)."""
        import numpy as np

        pa = self.pa
        rel = g.relation
        self._check_columns(rel, t)
        is_i, is_u, is_d = g.op == 73, g.op == 85, g.op == 68
        names = rel.names
        keyidx = [names.index(c.name) for c in t.key if c.name in names]
        full_u = is_u & g.old_full
        if keyidx and full_u.any():
            # Debezium turns an update of the primary key into delete + create: the per-message path does.
            sub = np.flatnonzero(full_u)
            for i in keyidx:
                assert g.old is not None and g.new is not None
                ov, nv = g.old.valid[i][sub], g.new.valid[i][sub]
                if (ov != nv).any():
                    raise Unsupported("update of the primary key")
                old_k = gather_binary(cb, g.old.starts[i][sub], g.old.lens[i][sub], ov)
                new_k = gather_binary(cb, g.new.starts[i][sub], g.new.lens[i][sub], nv)
                if not old_k.equals(new_k):
                    raise Unsupported("update of the primary key")
        skipped = self.skipped
        emit = ~((is_i & ("c" in skipped)) | (is_u & ("u" in skipped)) | (is_d & ("d" in skipped)))
        reps = emit.astype(np.int64) * np.where(is_d & bool(self.tombstones), 2, 1)
        n = int(reps.sum())
        if n == 0:
            return None
        src = np.repeat(np.arange(len(g.op)), reps)
        sub = np.arange(n) - np.repeat(np.cumsum(reps) - reps, reps)
        tomb = sub == 1
        b_valid = (is_d | full_u)[src]
        a_valid = (is_i | is_u)[src]

        def texts(spans: Any, valid: Any) -> dict[str, Any]:
            out: dict[str, Any] = {col.name: None for col in t.columns}
            if spans is None or not valid.any():
                return out
            for j, name in enumerate(names):
                if name in out:
                    out[name] = gather_binary(cb, spans.starts[j][src], spans.lens[j][src],
                                              spans.valid[j][src] & valid).cast(pa.string())
            return out

        before, b_typed = self._row_struct(t, texts(g.old, b_valid), b_valid, n)
        after, a_typed = self._row_struct(t, texts(g.new, a_valid), a_valid, n)
        lsn = pa.array(g.lsn[src])
        ts = pa.array(g.ts_us[src])
        source = self._source(n, t, ts, pa.array(g.xid[src]), lsn, pa.repeat(pa.scalar("false"), n))
        ops = np.array(["c", "u", "d"], dtype=object)[np.where(is_i, 0, np.where(is_u, 1, 2))[src]]
        key = self._key(t, a_typed, b_typed, a_valid, np.ones(n, dtype=bool), n)
        record = self._record(t, n, key, before, after, source, pa.array(ops, pa.string()), ts, tomb, lsn)
        return record, g.index[src] * 2 + sub

    # ---- incremental snapshot chunks (see PostgresConnector._write_chunk)
    def _touch(self, ch: Change, chunks: _Windows) -> None:
        """Remember the key of a change made inside an open chunk window (a truncate touches every key)."""
        rel = ch.relation
        tid = f"{rel.schema}.{rel.table}"
        for wid, (table, seen) in list(chunks.items()):
            if table != tid or seen is None:
                continue
            if ch.op == "t":
                chunks[wid] = (table, None)
                continue
            t = self.layout.table(rel.schema, rel.table)
            if t is None:
                continue
            idx = [rel.names.index(c.name) for c in t.key if c.name in rel.names]
            for tp in (ch.old, ch.new):
                if tp is not None and all(isinstance(tp[i], bytes) for i in idx):
                    seen.add(tuple(tp[i].decode() for i in idx))

    def _signal_row(self, ch: Change, chunks: _Windows) -> Iterator[Any]:
        """A signal-table insert: opens a chunk window, or closes one and emits its rows (op ``r``,
        ``source.snapshot=incremental``) but those whose key the stream changed inside the window. Every
        signal is folded into the batch's incremental snapshot state as the driver folds it for the offsets
        (:meth:`PostgresConnector._fold`): a chunk is emitted exactly when the offsets count it."""
        vals = {k: (v.decode() if isinstance(v, bytes) else None)
                for k, v in zip(ch.relation.names, ch.new or ())}
        kind = (vals.get("type") or "").strip()
        before = chunks.state
        chunks.state = self.c._fold(before, [vals], quiet=True, layout=self.layout)
        if kind not in (PostgresConnector._OPEN, PostgresConnector._CLOSE):
            return  # no signal row becomes an event
        d = json.loads(vals.get("data") or "")
        if kind == PostgresConnector._OPEN:
            chunks[d["window"]] = (d["table"], set())
            return
        opened = chunks.pop(d["window"], None)
        if not PostgresConnector._accepts(before, d):
            log.debug("%s: incremental snapshot chunk %s of %s dropped: not part of the running snapshot (stopped "
                      "meanwhile)", self.c.name, d["window"], d["table"])
            return
        if opened is None:
            raise ConnectError(f"Incremental snapshot chunk {d['window']} of {d['table']} ends at "
                               f"{lsn_text(ch.lsn)} but its window did not open in this batch: the batch cannot "
                               f"de-duplicate it (its offsets were not chosen by this connector)")
        t = self.layout.table(*d["table"].split(".", 1))
        seen = opened[1]
        if t is None or seen is None or not d["rows"]:
            return
        names = d["columns"]
        idx = [names.index(c.name) for c in t.key]
        rows = [r for r in d["rows"] if tuple(r[i] for i in idx) not in seen]
        pa = self.pa
        import numpy as np

        for s in range(0, len(rows), max(self.batch, 1)):
            part = rows[s:s + self.batch]
            n = len(part)
            cols = list(zip(*part))
            texts = {name: pa.array(cols[i], pa.string()) for i, name in enumerate(names)}
            valid = np.ones(n, dtype=bool)
            after, a_typed = self._row_struct(t, texts, valid, n)
            ts = pa.array([ch.ts_us] * n, pa.int64())
            lsn = pa.array([ch.lsn] * n, pa.int64())
            source = self._source(n, t, ts, pa.array([ch.xid] * n, pa.int64()), lsn,
                                  pa.array(["incremental"] * n, pa.string()))
            key = self._key(t, a_typed, {}, valid, np.ones(n, dtype=bool), n)
            yield self._record(t, n, key, pa.nulls(n, self.row_t), after, source, pa.array(["r"] * n, pa.string()),
                               ts, np.zeros(n, dtype=bool), lsn)

    @staticmethod
    def _skip(batch: Any, emitted: int, skip: int) -> tuple[int, Any]:
        n = batch.num_rows
        if emitted + n <= skip:
            return emitted + n, None
        if emitted < skip:
            batch = batch.slice(skip - emitted)
        return emitted + n, batch

    def _changes_batches(self, changes: list[Change]) -> Iterator[Any]:
        """Events of ``changes`` in LSN order: built per relation in bulk, then put back in order."""
        pa = self.pa
        import numpy as np

        events: dict[int, tuple[Relation, Table, list]] = {}
        seq = 0
        for ch in changes:
            rel = ch.relation
            entry = events.get(id(rel))
            if entry is None:
                t = self.layout.table(rel.schema, rel.table)
                if t is None:
                    continue  # published but not captured (filters)
                entry = events[id(rel)] = (rel, t, [])
            rel, t, evs = entry
            for ev in self._expand(ch, rel, t):
                evs.append((seq,) + ev)
                seq += 1
        if not events:
            return
        parts, order = [], []
        for rel, t, evs in events.values():
            if evs:
                parts.append(self._relation_batch(rel, t, evs))
                order.append(np.fromiter((e[0] for e in evs), dtype=np.int64, count=len(evs)))
        table = pa.Table.from_batches(parts, schema=self.schema)
        perm = np.argsort(np.concatenate(order), kind="stable")
        table = table.take(pa.array(perm))
        yield from table.combine_chunks().to_batches(max_chunksize=max(self.batch, 1))

    def _expand(self, ch: Change, rel: Relation, t: Table) -> Iterator[tuple]:
        """(op, lsn, xid, ts, before, after, tombstone) events of one change, Debezium's way."""
        op = ch.op
        if op == "t":
            if "t" not in self.skipped:
                yield ("t", ch.lsn, ch.xid, ch.ts_us, None, None, False)
            return
        if op == "c":
            if "c" not in self.skipped:
                yield ("c", ch.lsn, ch.xid, ch.ts_us, None, ch.new, False)
            return
        if op == "d":
            if "d" not in self.skipped:
                yield ("d", ch.lsn, ch.xid, ch.ts_us, ch.old, None, False)
                if self.tombstones:
                    yield ("d", ch.lsn, ch.xid, ch.ts_us, ch.old, None, True)
            return
        new, old = ch.new, ch.old
        if old is not None and UNCHANGED in new and ch.old_kind == "O":
            new = tuple(o if n is UNCHANGED else n for n, o in zip(new, old))
        if old is not None:
            names = rel.names
            keyidx = [names.index(c.name) for c in t.key if c.name in names]
            if keyidx and any(old[i] != new[i] for i in keyidx):
                # A changed primary key: Debezium emits a delete (+ tombstone) of the old key and a create.
                if "d" not in self.skipped:
                    yield ("d", ch.lsn, ch.xid, ch.ts_us, old, None, False)
                    if self.tombstones:
                        yield ("d", ch.lsn, ch.xid, ch.ts_us, old, None, True)
                if "c" not in self.skipped:
                    yield ("c", ch.lsn, ch.xid, ch.ts_us, None, new, False)
                return
        if "u" not in self.skipped:
            yield ("u", ch.lsn, ch.xid, ch.ts_us, old if ch.old_kind == "O" else None, new, False)

    def _columns(self, rel: Relation, t: Table, tuples: list, valid: list[bool]) -> dict[str, Any]:
        """Text arrays per captured column of ``t`` from ``rel``-shaped tuples (None rows -> nulls)."""
        names = rel.names
        pos = {n: i for i, n in enumerate(names)}
        self._check_columns(rel, t)
        width = len(names)
        empty = (None,) * width
        rows = [tp if tp is not None else empty for tp in tuples]
        cols = list(zip(*rows)) if rows else [()] * width
        out = {}
        n = len(tuples)
        for col in t.columns:
            i = pos.get(col.name)
            if i is None:
                out[col.name] = None
                continue
            vals = cols[i]
            if UNCHANGED in vals:
                vals = self._placeholder(t, col, vals)
            out[col.name] = text_array(vals) if n else None
        return out

    def _check_columns(self, rel: Relation, t: Table) -> None:
        known = {c.name for c in t.columns}
        extra = [n for n in rel.names if n not in known and self.c._column_wanted(rel.schema, rel.table, n)]
        if extra:
            raise DataError(f"Table {t.id} has columns {', '.join(extra)} that this query's schema does not "
                            f"have (the table changed after the query started): restart the query to pick up "
                            f"the new schema")

    def _placeholder(self, t: Table, col: Column, vals: Sequence[Any]) -> list[Any]:
        if col.spec.kind in ("string", "bytes"):
            ph = self.placeholder if col.spec.kind == "string" else b"\\x" + self.placeholder.hex().encode()
            return [ph if v is UNCHANGED else v for v in vals]
        log.warning("%s: column %s.%s kept its unchanged TOAST value, which PostgreSQL does not send and type "
                    "%s cannot hold a placeholder for: emitted as null. Set REPLICA IDENTITY FULL on %s to "
                    "receive it", self.c.name, t.id, col.name, col.spec.pg_type, t.id)
        return [None if v is UNCHANGED else v for v in vals]

    def _row_struct(self, t: Table, texts: dict[str, Any], valid: Any, n: int) -> tuple[Any, dict[str, Any]]:
        pa = self.pa
        typed = {}
        by_field = {c.field: c for c in t.columns}
        arrays = []
        for f in self.row_t:
            col = by_field.get(f.name)
            if col is None or texts.get(col.name) is None:
                arrays.append(pa.nulls(n, f.type))
                continue
            arr = to_arrow(col.spec, texts[col.name])
            if arr.type != f.type:
                arr = arr.cast(f.type)
            typed[col.name] = arr
            arrays.append(arr)
        mask = pa.array(~valid) if n else None
        return pa.StructArray.from_arrays(arrays, fields=list(self.row_t), mask=mask), typed

    def _relation_batch(self, rel: Relation, t: Table, evs: list[tuple]) -> Any:
        import numpy as np

        pa = self.pa
        n = len(evs)
        _, ops, lsns, xids, tss, befores, afters, tombs = zip(*evs)
        b_valid = np.fromiter((b is not None for b in befores), dtype=bool, count=n)
        a_valid = np.fromiter((a is not None for a in afters), dtype=bool, count=n)
        before, b_typed = self._row_struct(t, self._columns(rel, t, list(befores), list(b_valid)), b_valid, n)
        after, a_typed = self._row_struct(t, self._columns(rel, t, list(afters), list(a_valid)), a_valid, n)
        ts = pa.array(tss, pa.int64())
        source = self._source(n, t, ts, pa.array(xids, pa.int64()), pa.array(lsns, pa.int64()),
                              pa.array(["false"] * n, pa.string()))
        tomb = np.array(tombs, dtype=bool)
        truncate = np.array([o == "t" for o in ops], dtype=bool)
        key = self._key(t, a_typed, b_typed, a_valid, ~truncate, n)
        return self._record(t, n, key, before, after, source, pa.array(ops, pa.string()), ts, tomb,
                            pa.array(lsns, pa.int64()))

    def _source(self, n: int, t: Table, ts_us: Any, xid: Any, lsn: Any, snapshot: Any) -> Any:
        pa = self.pa
        import pyarrow.compute as pc

        const = lambda v, ty: pa.repeat(pa.scalar(v, ty), n)  # noqa: E731
        ts_ms = pc.divide(ts_us, 1000)
        arrays = {"version": const(self.version, pa.string()), "connector": const("postgresql", pa.string()),
                  "name": const(self.prefix, pa.string()), "ts_ms": ts_ms, "snapshot": snapshot,
                  "db": const(self.db, pa.string()), "sequence": pa.nulls(n, pa.string()), "ts_us": ts_us,
                  "ts_ns": pc.multiply(ts_us, 1000), "schema": const(t.schema, pa.string()),
                  "table": const(t.table, pa.string()), "txId": xid, "lsn": lsn, "xmin": pa.nulls(n, pa.int64())}
        return pa.StructArray.from_arrays([arrays[f.name] for f in self.source_t], fields=list(self.source_t))

    def _key(self, t: Table, a_typed: dict, b_typed: dict, a_valid: Any, present: Any, n: int) -> Any:
        pa = self.pa
        import pyarrow.compute as pc

        if not isinstance(self.key_t, pa.StructType):
            return pa.nulls(n, self.key_t)
        keycols = {c.field: c for c in t.key}
        arrays = []
        for f in self.key_t:
            col = keycols.get(f.name)
            if col is None:
                arrays.append(pa.nulls(n, f.type))
                continue
            a = a_typed.get(col.name)
            b = b_typed.get(col.name)
            a = a if a is not None else pa.nulls(n, f.type)
            b = b if b is not None else pa.nulls(n, f.type)
            arrays.append(pc.if_else(pa.array(a_valid), a, b))
        mask = pa.array(~(present & bool(t.key)))
        return pa.StructArray.from_arrays(arrays, fields=list(self.key_t), mask=mask)

    def _record(self, t: Table, n: int, key: Any, before: Any, after: Any, source: Any, op: Any, ts_us: Any,
                tomb: Any, offset: Any) -> Any:
        pa = self.pa
        import pyarrow.compute as pc

        value = pa.StructArray.from_arrays(
            [before, after, source, op, pc.divide(ts_us, 1000), ts_us, pc.multiply(ts_us, 1000)],
            fields=list(self.value_t), mask=pa.array(tomb))
        ts = ts_us.cast(pa.timestamp("us", tz="UTC"))
        return pa.RecordBatch.from_arrays(
            [key, value, pa.repeat(pa.scalar(t.topic, pa.string()), n), pa.repeat(pa.scalar(0, pa.int32()), n),
             offset, ts, no_headers(n)], schema=self.schema)

    # ---- snapshot
    def snapshot(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        """Snapshot rows (op ``r``) from ``start``'s chunk position up to ``end``'s, read under the exported
        snapshot, in key order."""
        from psycopg import sql

        layout = self.layout
        ids = [t.id for t in layout.tables]
        if start["snapshot_table"] not in ids:
            return
        first = ids.index(start["snapshot_table"])
        if "snapshot" in end:
            last, last_key = ids.index(end["snapshot_table"]), end["snapshot_key"]
            if not last_key:  # the end table has not started: stop after the previous one
                last, last_key = last - 1, None
        else:
            last, last_key = len(ids) - 1, None
        conn = self.c._connect()
        try:
            self.c._snapshot_tx(conn, start.get("snapshot_name", ""))
            ts_us = int(start.get("ts_usec", 0))
            for i in range(first, last + 1):
                t = layout.tables[i]
                lo = start["snapshot_key"] if i == first else ""
                hi = last_key if i == last else None
                cols, where, params = _key_predicate(t, lo, hi)
                select = sql.SQL(", ").join(sql.Identifier(c.name) for c in t.columns)
                q = sql.SQL("copy (select {} from {} {} order by {}) to stdout (format csv)").format(
                    select, sql.Identifier(t.schema, t.table), where, sql.SQL(", ").join(cols))
                yield from self._snapshot_table(conn, t, q, params, ts_us, int(start["lsn"]), start.get("txId"),
                                                table_first=not lo,
                                                table_last=hi is None, overall_last=(hi is None and i == len(ids) - 1),
                                                overall_first=(i == 0 and not lo))
            conn.execute("commit")
        finally:
            conn.close()

    def _snapshot_table(self, conn: Any, t: Table, q: Any, params: list[Any], ts_us: int, snap_lsn: int,
                        txid: int | None, *,
                        table_first: bool, table_last: bool, overall_first: bool,
                        overall_last: bool) -> Iterator[Any]:
        import io

        import numpy as np
        import pyarrow.csv as pcsv

        pa = self.pa
        buf = io.BytesIO()
        with conn.cursor().copy(q, params or None) as cp:
            for block in cp:
                buf.write(block)
        data = buf.getvalue()
        if not data:
            return
        names = [c.name for c in t.columns]
        tbl = pcsv.read_csv(
            io.BytesIO(data),
            read_options=pcsv.ReadOptions(column_names=[f"c{i}" for i in range(len(names))]),
            parse_options=pcsv.ParseOptions(newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(column_types={f"c{i}": pa.string() for i in range(len(names))},
                                                strings_can_be_null=True, quoted_strings_can_be_null=False,
                                                null_values=[""]))
        n_all = tbl.num_rows
        for s in range(0, n_all, max(self.batch, 1)):
            part = tbl.slice(s, self.batch)
            n = part.num_rows
            texts = {name: part.column(i).combine_chunks() for i, name in enumerate(names)}
            valid = np.ones(n, dtype=bool)
            after, a_typed = self._row_struct(t, texts, valid, n)
            before = pa.nulls(n, self.row_t)
            flags = ["true"] * n
            if table_first and s == 0:
                flags[0] = "first" if overall_first else "first_in_data_collection"
            if table_last and s + n == n_all:
                flags[-1] = "last" if overall_last else "last_in_data_collection"
            ts = pa.array([ts_us] * n, pa.int64())
            lsn = pa.array([snap_lsn] * n, pa.int64())
            xids = pa.nulls(n, pa.int64()) if txid is None else pa.array([int(txid)] * n, pa.int64())
            source = self._source(n, t, ts, xids, lsn, pa.array(flags, pa.string()))
            key = self._key(t, a_typed, {}, valid, np.ones(n, dtype=bool), n)
            yield self._record(t, n, key, before, after, source, pa.array(["r"] * n, pa.string()), ts,
                               np.zeros(n, dtype=bool), lsn)


def table_events(df: Any, table: str) -> Any:
    """One table's events with that table's exact Debezium types.

    Keeps the rows whose topic is the table's and narrows ``key`` and ``value`` (a Debezium envelope, or an
    unwrapped row after ExtractNewRecordState) from the union structs to the table's own columns, with
    ``connect.name`` ``<prefix>.<schema>.<table>.Key`` / ``.Envelope`` / ``.Value`` in the column metadata.

    >>> orders = table_events(df, "public.orders")      # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    meta = None
    for f in df.schema.fields:
        if f.name in ("value", "key") and TABLES_META in (f.metadata or {}):
            meta = json.loads(f.metadata[TABLES_META])
            break
    if meta is None:
        value_t = df.schema["value"].dataType
        if isinstance(value_t, StructType) and "after" in value_t.fieldNames():
            m = value_t["after"].metadata or {}
            meta = json.loads(m[TABLES_META]) if TABLES_META in m else None
    if meta is None:
        raise DataError("table_events needs the DataFrame of a PostgreSQL CDC connector (its key/value columns "
                        f"carry the '{TABLES_META}' metadata)")
    if table not in meta:
        raise DataError(f"Table {table!r} is not captured by this connector; captured: {', '.join(sorted(meta))}")
    info = meta[table]
    topic = info["topic"]
    pairs = list(zip(info["columns"], info["fields"]))
    field_of = dict(pairs)

    def narrow(col: Any, struct_t: StructType, names: list[str], name: str) -> Any:
        meta_of = {f.name: f.metadata for f in struct_t.fields}
        parts = [col[field_of[c]].alias(c, metadata=meta_of.get(field_of[c]) or {}) for c in names]
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts))

    out = df.where(F.col("topic") == topic)
    value_t = df.schema["value"].dataType
    prefix = topic
    if isinstance(value_t, StructType) and "after" in value_t.fieldNames() and "op" in value_t.fieldNames():
        row_t = value_t["after"].dataType
        cols = [info["columns"]]
        row_meta = {"connect.name": f"{prefix}.Value"}
        fields = []
        for f in value_t.fields:
            if f.name in ("before", "after"):
                fields.append(narrow(F.col("value")[f.name], row_t, cols[0], f.name).alias(f.name, metadata=row_meta))
            else:
                fields.append(F.col("value")[f.name].alias(f.name, metadata=f.metadata or {}))
        value = F.when(F.col("value").isNull(), F.lit(None)).otherwise(F.struct(*fields))
        out = out.withColumn("value", value.alias("value", metadata={"connect.name": f"{prefix}.Envelope"}))
    elif isinstance(value_t, StructType):
        out = out.withColumn("value", narrow(F.col("value"), value_t, info["columns"], "value")
                             .alias("value", metadata={"connect.name": f"{prefix}.Value"}))
    key_t = df.schema["key"].dataType
    if isinstance(key_t, StructType) and info["key"]:
        out = out.withColumn("key", narrow(F.col("key"), key_t, info["key"], "key")
                             .alias("key", metadata={"connect.name": f"{prefix}.Key"}))
    return out
