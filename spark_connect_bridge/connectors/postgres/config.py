"""The PostgreSQL connector's configuration: Debezium's keys, declared once, and the typed settings the parts
read.

:data:`CONFIG_DEF` is the declaration (docs, ``kconnect plugins``, the REST validate endpoint come from it).
:class:`PostgresSettings` is made once from the parsed config on the driver and travels to executors: modes
lower-cased (``snapshot.mode=schema_only`` is ``no_data``), lists as tuples, the password as a
:class:`~spark_connect_bridge.config.definition.Password` that never prints.

>>> PostgresSettings.from_config(config, name="shop-cdc").snapshot_mode      # doctest: +SKIP
<SnapshotMode.INITIAL: 'initial'>
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Lambda, NonEmptyString, Range, Type
from ...config.definition import Password
from ..cdc.accepted import accept_debezium, old_spellings
from ..cdc.columns import ColumnRules, define_column_rules
from ..cdc.config import SKIPPED_OPERATIONS, define_filters, define_signals, split_table
from ..offsets import partition_key

__all__ = ["CONFIG_DEF", "SNAPSHOT_MODES", "PostgresSettings", "PublicationMode", "SnapshotMode"]


class SnapshotMode(str, enum.Enum):
    """``snapshot.mode`` (``schema_only`` is Debezium's old name of ``no_data``)."""

    INITIAL = "initial"
    NEVER = "never"
    ALWAYS = "always"
    INITIAL_ONLY = "initial_only"
    NO_DATA = "no_data"
    WHEN_NEEDED = "when_needed"

    @property
    def snapshots(self) -> bool:
        """Whether a new slot starts with a snapshot of the captured tables."""
        return self in (SnapshotMode.INITIAL, SnapshotMode.ALWAYS, SnapshotMode.INITIAL_ONLY,
                        SnapshotMode.WHEN_NEEDED)


class PublicationMode(str, enum.Enum):
    """``publication.autocreate.mode``."""

    ALL_TABLES = "all_tables"
    DISABLED = "disabled"
    FILTERED = "filtered"
    NO_TABLES = "no_tables"


SNAPSHOT_MODES = tuple(m.value for m in SnapshotMode) + ("schema_only",)


CONFIG_DEF = (
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
            doc="Drop the slot when the connector's query stops (a moment after query.stop() returns; never on a "
                "crash or kill -9).",
            group="Replication")
    .define("publication.name", Type.STRING, "dbz_publication", NonEmptyString(), Importance.MEDIUM,
            "Name of the PostgreSQL publication the slot decodes.", group="Replication")
    .define("publication.autocreate.mode", Type.STRING, "all_tables",
            CaseInsensitiveValidString("all_tables", "disabled", "filtered", "no_tables"), Importance.MEDIUM,
            "all_tables: create the publication FOR ALL TABLES if missing; filtered: create/update it for "
            "the captured tables; disabled: it must exist; no_tables: create it empty.",
            group="Replication")
    .define("snapshot.mode", Type.STRING, "initial", CaseInsensitiveValidString(*SNAPSHOT_MODES),
            Importance.HIGH,
            "initial: snapshot when the query has no checkpoint, then stream; always: snapshot at every "
            "query start; initial_only: snapshot and stop; no_data (schema_only) and never: stream only; "
            "when_needed: snapshot when there is no checkpoint or the slot no longer has its position.",
            group="Snapshot")
    .define("tombstones.on.delete", Type.BOOLEAN, True, importance=Importance.MEDIUM,
            doc="Emit a tombstone (same key, null value) after each delete event.", group="Events")
    .define("skipped.operations", Type.LIST, ["t"], SKIPPED_OPERATIONS,
            Importance.LOW, "Operations not emitted: c (insert), u (update), d (delete), t (truncate), "
                            "none. Debezium's default skips truncates.", group="Events")
    .define("decimal.handling.mode", Type.STRING, "precise",
            CaseInsensitiveValidString("precise", "double", "string"), Importance.MEDIUM,
            "numeric columns as Decimal (precise), float64 (double) or string.", group="Events")
    .define("time.precision.mode", Type.STRING, "adaptive",
            CaseInsensitiveValidString("adaptive", "adaptive_time_microseconds", "connect", "isostring"),
            Importance.MEDIUM, "How date, time and timestamp columns are represented (Debezium's modes).",
            group="Events")
    .define("binary.handling.mode", Type.STRING, "bytes",
            CaseInsensitiveValidString("bytes", "base64", "base64-url-safe", "hex"), Importance.LOW,
            "bytea columns as bytes, or as a string: base64, base64-url-safe (both padded, as Java's encoders) "
            "or hex (lower case).", group="Events")
    .define("interval.handling.mode", Type.STRING, "numeric", CaseInsensitiveValidString("numeric", "string"),
            Importance.MEDIUM, "interval columns as MicroDuration (numeric: int64 microseconds, a month counted as "
                               "30.4375 days) or as an ISO-8601 string (string).", group="Events")
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
    .define("snapshot.fetch.size", Type.INT, 10240, Range.at_least(1), Importance.LOW,
            "Accepted for compatibility; snapshot chunks are bounded by max.records.per.trigger.",
            group="Snapshot")
    .define("max.queue.size", Type.INT, 8192, Range.at_least(1), Importance.LOW,
            "Accepted for compatibility (Debezium's in-memory queue); no effect.", group="Connector")
    .define("poll.interval.ms", Type.LONG, 500, Range.at_least(0), Importance.LOW,
            "Accepted for compatibility; Spark's trigger interval sets the polling rate.", group="Connector")
)
define_filters(CONFIG_DEF, "schema")
define_column_rules(CONFIG_DEF, "schema")
define_signals(CONFIG_DEF, "schema", "The table must be in the publication. The connector writes its watermark "
                                     "rows (snapshot-window-open/-close) into it and deletes them again.")
accept_debezium(CONFIG_DEF, "io.debezium.connector.postgresql.PostgresConnector")
old_spellings(CONFIG_DEF, "schema")



@dataclass(frozen=True)
class PostgresSettings:
    """The parsed config of one PostgreSQL connector, normalised (plain data: it travels to executors)."""

    name: str
    hostname: str
    port: int
    user: str
    password: Password | None
    dbname: str
    sslmode: str
    topic_prefix: str
    slot_name: str
    slot_drop_on_stop: bool
    publication_name: str
    publication_mode: PublicationMode
    schema_include: tuple[str, ...]
    schema_exclude: tuple[str, ...]
    table_include: tuple[str, ...]
    table_exclude: tuple[str, ...]
    column_include: tuple[str, ...]
    column_exclude: tuple[str, ...]
    snapshot_mode: SnapshotMode
    tombstones_on_delete: bool
    skipped_operations: frozenset[str]
    decimal_mode: str
    time_mode: str
    interval_mode: str
    binary_mode: str
    #: message.key.columns, column.propagate.source.type, column.mask/truncate...: per-column decisions
    column_rules: ColumnRules
    unavailable_placeholder: str
    heartbeat_interval_ms: int
    max_batch_size: int
    #: ``signal.data.collection`` as (schema, table), or None without a signal table
    signal_table: tuple[str, str] | None
    incremental_chunk_size: int
    retry_timeout_ms: int
    retry_delay_max_ms: int

    @classmethod
    def from_config(cls, config: Any, *, name: str) -> PostgresSettings:
        """The settings of a config parsed with :data:`CONFIG_DEF` (plus the common source keys)."""
        mode = config.snapshot_mode.lower()
        password = config.get("database.password")
        return cls(
            name=name, hostname=config.database_hostname, port=int(config.database_port),
            user=config.database_user,
            password=password if isinstance(password, Password) and password.value() else None,
            dbname=config.database_dbname, sslmode=config.database_sslmode.lower(),
            topic_prefix=config.topic_prefix, slot_name=config.slot_name,
            slot_drop_on_stop=bool(config.slot_drop_on_stop), publication_name=config.publication_name,
            publication_mode=PublicationMode(config.publication_autocreate_mode.lower()),
            schema_include=tuple(config.schema_include_list), schema_exclude=tuple(config.schema_exclude_list),
            table_include=tuple(config.table_include_list), table_exclude=tuple(config.table_exclude_list),
            column_include=tuple(config.column_include_list), column_exclude=tuple(config.column_exclude_list),
            snapshot_mode=SnapshotMode("no_data" if mode == "schema_only" else mode),
            tombstones_on_delete=bool(config.tombstones_on_delete),
            skipped_operations=frozenset(config.skipped_operations) - {"none"},
            decimal_mode=config.decimal_handling_mode.lower(), time_mode=config.time_precision_mode.lower(),
            interval_mode=config.interval_handling_mode.lower(),
            binary_mode=config.binary_handling_mode.lower(), column_rules=ColumnRules.from_config(config),
            unavailable_placeholder=config.unavailable_value_placeholder,
            heartbeat_interval_ms=int(config.heartbeat_interval_ms), max_batch_size=int(config.max_batch_size),
            signal_table=split_table(config.signal_data_collection),
            incremental_chunk_size=int(config.incremental_snapshot_chunk_size),
            retry_timeout_ms=int(config.get("errors.retry.timeout", 0)),
            retry_delay_max_ms=int(config.get("errors.retry.delay.max.ms", 60000)))

    @property
    def partition(self) -> dict[str, Any]:
        """The source partition: ``{"server": <topic.prefix>}``."""
        return {"server": self.topic_prefix}

    @property
    def partition_key(self) -> str:
        """The source partition as the key of the offsets map."""
        return partition_key(self.partition)
