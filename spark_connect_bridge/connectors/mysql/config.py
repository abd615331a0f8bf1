"""The configuration of Debezium's MySQL and MariaDB connectors: the keys (one :class:`ConfigDef`) and the typed,
frozen :class:`Settings` every part of the connector reads (parsed once, on the driver; shipped to executors).

Debezium's keys run unchanged. Keys that only steer Debezium's Kafka plumbing (``schema.history.internal.*``,
``database.history.*``) are accepted and documented as such: the binlog's own table maps are the schema history
here (see :mod:`.binlog`).

>>> config = CONFIG_DEF.parse({"database.hostname": "db", "database.user": "debezium", "topic.prefix": "shop",
...                            "database.server.id": "184054"})
>>> Settings.of(config, name="inventory", flavor="mariadb").snapshot_mode == "initial"
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, NonEmptyString, Range, Type
from ..cdc.accepted import accept_debezium, old_spellings
from ..cdc.columns import ColumnRules, define_column_rules
from ..cdc.config import REGEX_LIST, SKIPPED_OPERATIONS, define_filters, define_signals, matches, split_table

__all__ = ["CONFIG_DEF", "SNAPSHOT_MODES", "Settings"]

SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "when_needed", "never", "recovery", "always",
                  "schema_only", "schema_only_recovery")
#: the modes that read the tables' rows before streaming (when there is no position yet)
SNAPSHOTTING = ("initial", "initial_only", "when_needed", "always")


def _accepted(definition: ConfigDef, keys: dict[str, tuple[Type, Any, str]]) -> ConfigDef:
    for name, (typ, default, doc) in keys.items():
        definition.define(name, typ, default, importance=Importance.LOW, doc=doc, group="Compatibility")
    return definition


_HISTORY_DOC = ("Accepted for compatibility: Debezium keeps its schema history in a Kafka topic or a file. Here "
                "the binlog's own table maps (binlog_row_metadata=FULL) carry each row's columns, so a replayed "
                "range decodes with the schema it was written with; no history store is needed.")

CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="IP address or hostname of the MySQL/MariaDB server.", group="Connection")
    .define("database.port", Type.INT, 3306, Range.between(1, 65535), Importance.HIGH,
            "Port of the server.", group="Connection")
    .define("database.user", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="User with REPLICATION SLAVE, REPLICATION CLIENT (BINLOG MONITOR on MariaDB) and SELECT on the "
                "captured tables.", group="Connection")
    .define("database.password", Type.PASSWORD, None, importance=Importance.HIGH,
            doc="Password of database.user.", group="Connection")
    .define("database.server.id", Type.LONG, validator=Range.between(1, 2**32 - 1), importance=Importance.HIGH,
            doc="Replica server id the binlog reader registers with; unique among the server's replicas. Each "
                "read task uses this id (one task reads at a time).", group="Connection")
    .define("database.ssl.mode", Type.STRING, "disabled",
            CaseInsensitiveValidString("disabled", "preferred", "required", "verify_ca", "verify_identity"),
            Importance.MEDIUM, "TLS for every connection (Debezium's values).", group="Connection")
    .define("connect.timeout.ms", Type.INT, 30000, Range.at_least(1), Importance.LOW,
            "Connection timeout.", group="Connection")
    .define("topic.prefix", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Prefix of every topic (<prefix>.<database>.<table>) and the source partition's name.",
            group="Connector")
    .define("snapshot.mode", Type.STRING, "initial", CaseInsensitiveValidString(*SNAPSHOT_MODES), Importance.HIGH,
            "initial: snapshot when the query has no checkpoint, then stream; initial_only: snapshot and stop; "
            "no_data (schema_only): stream from the current position; never: stream from the oldest binlog "
            "file; when_needed: snapshot when there is no position or the binlog lost it; recovery "
            "(schema_only_recovery): stream from the checkpoint's position (the schema comes from the table "
            "maps); always: snapshot at every query start.", group="Snapshot")
    .define("snapshot.locking.mode", Type.STRING, "minimal",
            CaseInsensitiveValidString("minimal", "minimal_percona", "extended", "none"), Importance.MEDIUM,
            "How the binlog position of the snapshot is taken on MySQL: minimal/extended take a global read "
            "lock (FLUSH TABLES WITH READ LOCK) for the moment the position is read; none takes no lock (not "
            "consistent under writes). MariaDB needs no lock (binlog_snapshot_file/position).", group="Snapshot")
    .define("snapshot.fetch.size", Type.INT, 10240, Range.at_least(1), Importance.LOW,
            "Rows fetched per round trip while reading a snapshot chunk.", group="Snapshot")
    .define("bigint.unsigned.handling.mode", Type.STRING, "long", CaseInsensitiveValidString("long", "precise"),
            Importance.MEDIUM, "BIGINT UNSIGNED as int64 (long: values above 2^63-1 wrap, as in Debezium) or "
                               "Decimal(20,0) (precise).", group="Events")
    .define("decimal.handling.mode", Type.STRING, "precise",
            CaseInsensitiveValidString("precise", "double", "string"), Importance.MEDIUM,
            "DECIMAL/NUMERIC as Decimal (precise), float64 (double) or string.", group="Events")
    .define("time.precision.mode", Type.STRING, "adaptive_time_microseconds",
            CaseInsensitiveValidString("adaptive_time_microseconds", "adaptive", "connect"), Importance.MEDIUM,
            "adaptive_time_microseconds/adaptive: DATE as io.debezium.time.Date, TIME as MicroTime, DATETIME(0-3) "
            "as Timestamp (ms), DATETIME(4-6) as MicroTimestamp; connect: Kafka Connect's Date/Time/Timestamp "
            "(milliseconds). TIMESTAMP is always a ZonedTimestamp string in UTC.", group="Events")
    .define("binary.handling.mode", Type.STRING, "bytes",
            CaseInsensitiveValidString("bytes", "base64", "base64-url-safe", "hex"), Importance.MEDIUM,
            "BINARY/VARBINARY/BLOB (and BIT(n>1)) as bytes or as base64/base64-url-safe/hex strings.",
            group="Events")
    .define("include.schema.changes", Type.BOOLEAN, True, importance=Importance.MEDIUM,
            doc="Emit Debezium's schema change events (key databaseName; value source, ts_ms, databaseName, "
                "schemaName, ddl, tableChanges) on the topic <topic.prefix> for the DDL of the captured "
                "databases, in binlog order with the change events (key and value columns hold the union of "
                "both kinds; converters and sinks narrow each topic to its own fields, and Spark spends about "
                "twice the CPU per change event on the wider columns: false keeps the change events' own shape). "
                "A column added while the query runs still fails the batch with a message to restart the "
                "query.", group="Events")
    .define("include.query", Type.BOOLEAN, False, importance=Importance.LOW,
            doc="Put the statement that changed each row in source.query (MariaDB annotate rows events; MySQL "
                "needs binlog_rows_query_log_events=ON).", group="Events")
    .define("tombstones.on.delete", Type.BOOLEAN, True, importance=Importance.MEDIUM,
            doc="Emit a tombstone (same key, null value) after each delete event.", group="Events")
    .define("skipped.operations", Type.LIST, ["t"], SKIPPED_OPERATIONS,
            Importance.LOW, "Operations not emitted: c (insert), u (update), d (delete), t (truncate: never "
                            "emitted by this connector, as Debezium's MySQL connector), none.", group="Events")
    .define("heartbeat.interval.ms", Type.INT, 0, Range.at_least(0), Importance.MEDIUM,
            "When > 0: the binlog reader asks the server for heartbeats this often (so an idle or stalled "
            "stream is noticed within binlog.read.timeout.ms), and at most this often the offset moves over "
            "binlog that holds no captured change. No heartbeat records are emitted.", group="Connector")
    .define("binlog.read.timeout.ms", Type.INT, 60000, Range.at_least(1000), Importance.LOW,
            "A binlog stream that sends nothing (not even a heartbeat) this long is stalled: the read is "
            "retried from its last whole transaction within errors.retry.timeout.", group="Connector")
    .define("max.batch.size", Type.INT, 4096, Range.at_least(1), Importance.LOW,
            "Events per Arrow record batch handed to Spark.", group="Connector")
    .define("max.queue.size", Type.INT, 8192, Range.at_least(1), Importance.LOW,
            "Accepted for compatibility (Debezium's in-memory queue); no effect.", group="Connector")
    .define("poll.interval.ms", Type.LONG, 500, Range.at_least(0), Importance.LOW,
            "Accepted for compatibility; Spark's trigger interval sets the polling rate.", group="Connector")
    .define("gtid.source.includes", Type.LIST, [], REGEX_LIST, Importance.LOW,
            "Accepted for compatibility; offsets record every GTID of the server.", group="Connector")
    .define("gtid.source.excludes", Type.LIST, [], REGEX_LIST, Importance.LOW,
            "Accepted for compatibility; offsets record every GTID of the server.", group="Connector")
)
define_filters(CONFIG_DEF, "database")
define_column_rules(CONFIG_DEF, "database")
define_signals(CONFIG_DEF, "database", "The connector only reads it (its inserts in the binlog): chunks are read "
                                       "between binlog watermarks, as Debezium's read.only mode.")

CONFIG_DEF.define("read.only", Type.BOOLEAN, False, importance=Importance.LOW,
                  doc="Accepted: incremental snapshots never write to the signal table (both values behave as "
                      "Debezium's read.only=true): each chunk is read between two binlog positions (Debezium's "
                      "GTID watermarks) and travels with the batch's offsets.",
                  group="Snapshot")
_accepted(CONFIG_DEF, {
    "schema.history.internal.kafka.topic": (Type.STRING, None, _HISTORY_DOC),
    "schema.history.internal.kafka.bootstrap.servers": (Type.STRING, None, _HISTORY_DOC),
    "schema.history.internal": (Type.STRING, None, _HISTORY_DOC),
    "schema.history.internal.file.filename": (Type.STRING, None, _HISTORY_DOC),
    "schema.history.internal.store.only.captured.tables.ddl": (Type.BOOLEAN, False, _HISTORY_DOC),
    "database.include.list.for.ddl": (Type.STRING, None, _HISTORY_DOC),
    "database.history.kafka.topic": (Type.STRING, None, _HISTORY_DOC),
    "database.history.kafka.bootstrap.servers": (Type.STRING, None, _HISTORY_DOC),
    "event.processing.failure.handling.mode": (Type.STRING, "fail", "Accepted; a row that cannot be decoded "
                                                                    "fails the batch naming its position."),
    "connect.keep.alive": (Type.BOOLEAN, True, "Accepted; every read opens its own binlog connection."),
})

accept_debezium(CONFIG_DEF, "io.debezium.connector.mysql.MySqlConnector")
accept_debezium(CONFIG_DEF, "io.debezium.connector.mariadb.MariaDbConnector")
old_spellings(CONFIG_DEF, "database")

@dataclass(frozen=True)
class Settings:
    """What the connector's parts read: parsed once from the config (plus the server flavor) into plain,
    picklable values. The password stays a :class:`~spark_connect_bridge.config.Password`."""

    name: str
    flavor: str  # "mariadb" or "mysql": the connector class, confirmed by the server
    host: str
    port: int
    user: str
    password: Any
    server_id: int
    ssl_mode: str
    connect_timeout_s: float
    prefix: str
    snapshot_mode: str
    locking_mode: str
    fetch_size: int
    bigint_mode: str
    decimal_mode: str
    time_mode: str
    binary_mode: str
    include_query: bool
    tombstones: bool
    skipped: frozenset[str]
    heartbeat_ms: int
    read_timeout_s: float
    batch_size: int
    database_include: tuple[str, ...]
    database_exclude: tuple[str, ...]
    table_include: tuple[str, ...]
    table_exclude: tuple[str, ...]
    column_include: tuple[str, ...]
    column_exclude: tuple[str, ...]
    retry_timeout_ms: int
    retry_delay_max_ms: int
    #: ``signal.data.collection`` as (database, table), or None without a signal table
    signal_table: tuple[str, str] | None = None
    incremental_chunk_size: int = 1024
    read_only: bool = False
    include_schema_changes: bool = False
    #: message.key.columns, the propagate keys, column masks and truncation (cdc/columns.py)
    column_rules: ColumnRules = field(default_factory=ColumnRules)

    @classmethod
    def of(cls, config: Any, *, name: str, flavor: str) -> Settings:
        mode = config.snapshot_mode
        mode = {"schema_only": "no_data", "schema_only_recovery": "recovery"}.get(mode, mode)
        return cls(
            name=name, flavor=flavor, host=config.database_hostname, port=config.database_port,
            user=config.database_user, password=config.get("database.password"),
            server_id=config.database_server_id, ssl_mode=config.database_ssl_mode,
            connect_timeout_s=config.connect_timeout_ms / 1000.0, prefix=config.topic_prefix,
            snapshot_mode=mode, locking_mode=config.snapshot_locking_mode,
            fetch_size=config.snapshot_fetch_size, bigint_mode=config.bigint_unsigned_handling_mode,
            decimal_mode=config.decimal_handling_mode, time_mode=config.time_precision_mode,
            binary_mode=config.binary_handling_mode, include_query=config.include_query,
            tombstones=config.tombstones_on_delete, skipped=frozenset(config.skipped_operations) - {"none"},
            heartbeat_ms=config.heartbeat_interval_ms, read_timeout_s=config.binlog_read_timeout_ms / 1000.0,
            batch_size=config.max_batch_size,
            database_include=tuple(config.database_include_list),
            database_exclude=tuple(config.database_exclude_list),
            table_include=tuple(config.table_include_list), table_exclude=tuple(config.table_exclude_list),
            column_include=tuple(config.column_include_list),
            column_exclude=tuple(config.column_exclude_list),
            retry_timeout_ms=config.get("errors.retry.timeout", 0) or 0,
            retry_delay_max_ms=config.get("errors.retry.delay.max.ms", 60000) or 60000,
            signal_table=split_table(config.signal_data_collection),
            incremental_chunk_size=config.incremental_snapshot_chunk_size, read_only=config.read_only,
            include_schema_changes=config.include_schema_changes, column_rules=ColumnRules.from_config(config))

    # ---- filters (Debezium's: regular expressions matched in full, case-insensitively)
    def table_wanted(self, database: str, table: str) -> bool:
        if database.lower() in ("mysql", "information_schema", "performance_schema", "sys"):
            return False
        if self.signal_table is not None and (database.lower(), table.lower()) == (
                self.signal_table[0].lower(), self.signal_table[1].lower()):
            return False  # the signal table is read, never emitted
        if self.database_include and not matches(self.database_include, database):
            return False
        if matches(self.database_exclude, database):
            return False
        tid = f"{database}.{table}"
        if self.table_include and not matches(self.table_include, tid):
            return False
        return not matches(self.table_exclude, tid)

    def column_wanted(self, database: str, table: str, column: str) -> bool:
        cid = f"{database}.{table}.{column}"
        if self.column_include and not matches(self.column_include, cid):
            return False
        return not matches(self.column_exclude, cid)
