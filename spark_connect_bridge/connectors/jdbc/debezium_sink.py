"""Debezium's JDBC sink connector (``io.debezium.connector.jdbc.JdbcSinkConnector``) over this project's JDBC sink.

Debezium's keys as its documentation gives them are read here and run by the same exactly-once bulk engine as
Confluent's sink (:mod:`.sink`): ``connection.url`` / ``connection.username`` / ``connection.password``,
``insert.mode`` (insert / upsert / update), ``delete.enabled``, ``primary.key.mode`` (none / kafka / record_key /
record_value) with ``primary.key.fields``, ``schema.evolution`` (none / basic: create missing tables, add missing
columns), ``table.name.format`` / ``collection.name.format`` (``${topic}``, ``${source.db}``, ``${source.schema}``,
``${source.table}``; dots become underscores, Debezium's default naming strategy), ``quote.identifiers``,
``batch.size``, ``use.time.zone`` / ``database.time_zone``, ``field.include.list`` / ``field.exclude.list``,
``flush.max.retries`` / ``flush.retry.delay.ms``. Every other key Debezium 3.5 declares is accepted with a
disposition (see the reference); ``hibernate.*`` keys (Hibernate ORM settings Debezium passes to its session
factory) have no effect: there is no Hibernate here, writes are SQL over each dialect's Python driver.

**Input.** Debezium's change events natively: a value with ``op`` and ``after`` is read as its ``after`` state;
``op=d`` deletes its key's row when ``delete.enabled`` (else it is skipped), ``op=t`` (truncate) and ``op=m``
(messages) are skipped. Flattened records (``ExtractNewRecordState``) are written as they are; a null value deletes
its key's row when ``delete.enabled`` and is skipped otherwise (Debezium's "flattened delete"). This runs as Column
expressions over the input (:meth:`DebeziumJdbcSinkConnector.input_frame`), after the converters and transforms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, NonEmptyString, Range, Type
from ...config.definition import Config
from ...core.topic_schemas import held_columns
from ...errors import ConfigProblem
from ..base import connector_config_def
from .dialects import JdbcUrl
from .sink import CONFIG_DEF as _CONFLUENT_DEF
from .sink import JdbcSinkConnector, _schemaless_message

__all__ = ["DebeziumJdbcSinkConnector"]

KAFKA_CLASS = "io.debezium.connector.jdbc.JdbcSinkConnector"
_TABLE_FORMAT = "${topic}"
#: the hidden column carrying each record's destination table from input_frame to the engine
TABLE_COL = "__kc_table"
_SOURCE_COL = "__kc_source"
_PLACEHOLDERS = ("${topic}", "${source.db}", "${source.schema}", "${source.table}")


def _check(cfg: Config) -> Iterable[ConfigProblem]:
    mode, pk = cfg.insert_mode, cfg.primary_key_mode
    if cfg.delete_enabled and pk != "record_key":
        yield ConfigProblem("delete.enabled", "Invalid value true for configuration delete.enabled: deletes need "
                                              "primary.key.mode=record_key (the event's key names the row)")
    if mode in ("upsert", "update") and pk == "none":
        yield ConfigProblem("primary.key.mode", f"Invalid value none for configuration primary.key.mode: "
                                                f"insert.mode={mode} needs a primary key (kafka, record_key or "
                                                f"record_value)")
    if pk == "kafka" and cfg.primary_key_fields and len(cfg.primary_key_fields) != 3:
        yield ConfigProblem("primary.key.fields", "Invalid value for configuration primary.key.fields: "
                                                  "primary.key.mode=kafka takes exactly three names (topic, "
                                                  "partition, offset columns)")
    if pk == "record_value" and not cfg.primary_key_fields:
        yield ConfigProblem("primary.key.fields", "Invalid value for configuration primary.key.fields: "
                                                  "primary.key.mode=record_value without primary.key.fields (every "
                                                  "value field as the key) is not implemented here; name the key "
                                                  "fields")
    for key in ("field.include.list", "field.exclude.list"):
        qualified = [f for f in cfg[key] if ":" in f]
        if qualified:
            yield ConfigProblem(key, f"Invalid value {','.join(qualified)} for configuration {key}: topic-qualified "
                                     "names (topic:field) are not implemented here; give field names")
    if cfg.field_include_list and cfg.field_exclude_list:
        yield ConfigProblem("field.exclude.list", "field.include.list and field.exclude.list cannot both be set")
    fmt = _format(cfg)
    rest = fmt
    for p in _PLACEHOLDERS:
        rest = rest.replace(p, "")
    if "${" in rest:
        yield ConfigProblem("collection.name.format", f"Invalid value {fmt} for configuration "
                                                      f"collection.name.format: placeholders are "
                                                      f"{', '.join(_PLACEHOLDERS)}")


def _format(cfg: Config) -> str:
    """The table name format: ``collection.name.format``, or the older ``table.name.format`` when only it is set
    (Debezium 3 reads the old name as a fallback)."""
    given = {k.lower() for k in cfg.originals}
    if "collection.name.format" not in given and "table.name.format" in given:
        return str(cfg.table_name_format)
    return str(cfg.collection_name_format)


_NO_POOL = ("there is no connection pool here: each Spark task opens one connection for its bulk load and the "
            "driver one for the batch's transaction")

CONFIG_DEF = (
    ConfigDef()
    .define("connection.url", Type.STRING, validator=JdbcUrl(), importance=Importance.HIGH,
            doc="JDBC connection URL: jdbc:postgresql://, jdbc:mysql://, jdbc:mariadb:// or jdbc:sqlite:.",
            group="Connection")
    .define("connection.username", Type.STRING, None, importance=Importance.HIGH,
            doc="Database user.", group="Connection")
    .define("connection.password", Type.PASSWORD, None, importance=Importance.HIGH,
            doc="Database password (never logged or shown).", group="Connection")
    .define("insert.mode", Type.STRING, "insert", CaseInsensitiveValidString("insert", "upsert", "update"),
            Importance.HIGH, "insert, upsert (insert or update by primary key) or update.", group="Runtime")
    .define("delete.enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Apply delete events (op=d) and null values as DELETEs of their key's row; needs "
                "primary.key.mode=record_key. Off: they are skipped.", group="Runtime")
    .define("primary.key.mode", Type.STRING, "none",
            CaseInsensitiveValidString("none", "kafka", "record_key", "record_value"), Importance.HIGH,
            "Where the primary key comes from: none, kafka (topic/partition/offset), record_key, record_value.",
            group="Runtime")
    .define("primary.key.fields", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Primary key field names (record_key: a subset of the key's fields, all when empty).",
            group="Runtime")
    .define("schema.evolution", Type.STRING, "none", CaseInsensitiveValidString("none", "basic"), Importance.MEDIUM,
            "basic: create a missing table and add missing columns (numeric and text columns are also widened, "
            "beyond Debezium); none: neither.", group="Runtime")
    .define("collection.name.format", Type.STRING, "${topic}", NonEmptyString(), Importance.MEDIUM,
            "Destination table: ${topic}, ${source.db}, ${source.schema}, ${source.table} are replaced per record; "
            "dots become underscores (Debezium's default naming strategy).", group="Runtime")
    .define("table.name.format", Type.STRING, "${topic}", NonEmptyString(), Importance.LOW,
            "The older name of collection.name.format (read when only it is set).", group="Runtime")
    .define("quote.identifiers", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Quote table and column names. Names are always quoted here, as given: the same as Debezium's "
                "unquoted names for lower-case names (PostgreSQL) or any case (MariaDB/MySQL, SQLite); a mixed-case "
                "name keeps its case on PostgreSQL where Debezium's false folds it.",
            group="Runtime")
    .define("batch.size", Type.INT, 500, Range.at_least(1), Importance.MEDIUM,
            "Rows per staged chunk (a micro-batch is committed as one transaction).", group="Runtime")
    .define("use.time.zone", Type.STRING, "UTC", importance=Importance.MEDIUM,
            doc="Time zone of TIMESTAMP-without-time-zone (DATETIME) values written.", group="Runtime")
    .define("database.time_zone", Type.STRING, "UTC", importance=Importance.LOW,
            doc="The older name of use.time.zone (read when only it is set).", group="Runtime")
    .define("field.include.list", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Value fields to write (all when empty); key fields are always written.", group="Runtime")
    .define("field.exclude.list", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Value fields not to write.", group="Runtime")
    .define("flush.max.retries", Type.INT, 5, Range.at_least(0), Importance.LOW,
            "Retries of a failed flush; with flush.retry.delay.ms the retry budget when errors.retry.timeout is "
            "0.", group="Runtime")
    .define("flush.retry.delay.ms", Type.LONG, 1000, Range.at_least(0), Importance.LOW,
            "Delay between flush retries.", group="Runtime")
    .define("offsets.table.name", Type.STRING, "__kconnect_offsets", NonEmptyString(), Importance.LOW,
            "Table recording the last committed micro-batch per query (exactly-once).", group="Exactly once")
    .check(_check)
    .accept(KAFKA_CLASS, group="Accepted (Debezium)", no_effect={
        "connection.pool.min_size": _NO_POOL,
        "connection.pool.max_size": _NO_POOL,
        "connection.pool.acquire_increment": _NO_POOL,
        "connection.pool.timeout": _NO_POOL,
        "connection.restart.on.errors": "every task and commit opens a new connection, and a lost connection is "
                                        "retried on a new one (errors.retry.timeout)",
        "dialect.postgres.unnest.insert.enabled": "PostgreSQL rows are always bulk loaded (binary COPY into a "
                                                  "staging table, then one INSERT ... SELECT)",
        "dialect.sqlserver.identity.insert": "SQL Server is not a dialect here (PostgreSQL, MariaDB/MySQL, "
                                             "SQLite)",
    }, not_supported={
        "dialect.postgres.postgis.schema": "PostGIS geometry types are not written here",
        "cloud.events.schema.name.pattern": "CloudEvents records are not unwrapped here: they are written as "
                                            "other records",
    }, refused={
        "truncate.enabled": "truncate events (op=t) are skipped; truncating the table is not implemented",
        "collection.naming.strategy": "Java naming strategies are not loaded; the default one is implemented "
                                      "(collection.name.format, dots to underscores)",
        "table.naming.strategy": "Java naming strategies are not loaded; the default one is implemented "
                                 "(collection.name.format, dots to underscores)",
        "column.naming.strategy": "Java naming strategies are not loaded; columns are named as the fields "
                                  "(the default)",
        "collection.table.format": "only the default ${table} is implemented",
    })
)


def _confluent(cfg: Config) -> Config:
    """The engine's (Confluent-keyed) settings for a parsed Debezium config."""
    full = connector_config_def(JdbcSinkConnector)
    common = {k: v for k, v in cfg.originals.items() if k in full and k not in _CONFLUENT_DEF and k in cfg}
    given = {k.lower() for k in cfg.originals}
    tz = cfg.database_time_zone if "database.time_zone" in given and "use.time.zone" not in given \
        else cfg.use_time_zone
    basic = cfg.schema_evolution == "basic"
    white = list(cfg.field_include_list)
    props: dict[str, Any] = {
        **common, "connection.url": cfg.connection_url, "insert.mode": str(cfg.insert_mode),
        "batch.size": cfg.batch_size, "delete.enabled": cfg.delete_enabled,
        "table.name.format": _TABLE_FORMAT, "pk.mode": str(cfg.primary_key_mode),
        "pk.fields": ",".join(cfg.primary_key_fields), "fields.whitelist": ",".join(white),
        "db.timezone": tz, "auto.create": basic, "auto.evolve": basic,
        # Always quoted, so any name Debezium writes can be written (a topic's dash included); see quote.identifiers
        "quote.sql.identifiers": "always",
        "max.retries": cfg.flush_max_retries, "retry.backoff.ms": cfg.flush_retry_delay_ms,
        "offsets.table.name": cfg.offsets_table_name,
    }
    if cfg.connection_username is not None:
        props["connection.user"] = cfg.connection_username
    if cfg.connection_password is not None:
        props["connection.password"] = cfg.password("connection.password")
    return full.parse(props, ignore_unknown=True)


class DebeziumJdbcSinkConnector(JdbcSinkConnector):
    """Debezium's JDBC sink: Debezium's keys and change events over the exactly-once JDBC sink."""

    kafka_class = KAFKA_CLASS
    config_def = CONFIG_DEF

    def __init__(self, config: Any, *, name: str):
        self.debezium_config = config
        super().__init__(_confluent(config), name=name)

    @classmethod
    def schemaless_problems(cls, settings: Any, schemaless: Mapping[str, str]) -> list[ConfigProblem]:
        """Debezium's sink binds fields by their schema: schemaless values are refused (keys too where they are
        the primary key or name deleted rows)."""
        problems = []
        if "value" in schemaless:
            problems.append(ConfigProblem(schemaless["value"], _schemaless_message(
                "Debezium's JDBC sink needs values with a Struct schema", schemaless["value"], "value")))
        if "key" in schemaless and (settings.primary_key_mode == "record_key" or settings.delete_enabled):
            problems.append(ConfigProblem(schemaless["key"], _schemaless_message(
                f"Debezium's JDBC sink with primary.key.mode={settings.primary_key_mode} needs keys with a schema",
                schemaless["key"], "key")))
        return problems

    @classmethod
    def input_frame(cls, df: Any, settings: Any) -> Any:
        """Debezium's reading of its records, as Column expressions: change events become their ``after`` state
        (deletes a null value, the engine's delete), skipped events are filtered out, excluded fields dropped,
        and each record's destination table (``collection.name.format``) set in :data:`TABLE_COL`."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        if "value" not in df.columns or not isinstance(df.schema["value"].dataType, StructType):
            return df
        vt: StructType = df.schema["value"].dataType
        names = vt.fieldNames()
        value = F.col("value")
        meta = dict(df.schema["value"].metadata)
        keep = value.isNotNull()
        source = None
        if "op" in names and "after" in names and isinstance(vt["after"].dataType, StructType):
            # A change event: its after state; op=d deletes (a null value for the engine) or is skipped; a
            # tombstone (the null value after a delete event) and op=t/m are skipped, as Debezium's sink does.
            op = value["op"]
            keep = op.isin("c", "r", "u", "d") if settings.delete_enabled else op.isin("c", "r", "u")
            keep = value.isNotNull() & keep
            if "source" in names and isinstance(vt["source"].dataType, StructType):
                source = value["source"]
            new_value = F.when(op == "d", F.lit(None)).otherwise(value["after"])
            meta = dict(vt["after"].metadata)
            vt = vt["after"].dataType
        else:
            # A flattened record (ExtractNewRecordState): a null value is a delete, skipped unless delete.enabled
            if settings.delete_enabled:
                keep = F.lit(True)
            new_value = value
        include, exclude = set(settings.field_include_list), set(settings.field_exclude_list)
        held = held_columns(meta)  # union field -> the topics' column (several topics' schemas in one input)
        dropped = [f.name for f in vt.fields
                   if (include and held.get(f.name, f.name) not in include) or held.get(f.name, f.name) in exclude]
        if dropped:
            new_value = new_value.dropFields(*dropped)
        out = df.filter(keep)
        if source is not None:
            out = out.withColumn(_SOURCE_COL, source)
        # The value keeps the layouts of its topics (the engine narrows each topic's rows to its own columns);
        # the destination table travels beside the topic, which the sink's topics and those layouts go by.
        out = out.withColumn("value", new_value.alias("value", metadata=meta)) \
            .withColumn(TABLE_COL, cls._table_column(_format(settings), source is not None))
        return out.drop(_SOURCE_COL) if source is not None else out

    def _table_name(self, topic: str) -> str:
        return topic  # the rows were grouped by TABLE_COL (see _rows_of)

    def _rows_of(self, batch: Any, part: int, seq: int) -> dict[str, Any]:
        """The engine's grouping, with each record's destination table (:data:`TABLE_COL`) as its group, when
        :meth:`input_frame` set it (else Debezium's default: the topic, dots as underscores)."""
        import pyarrow as pa

        names = batch.schema.names
        if TABLE_COL in names:
            i = names.index(TABLE_COL)
            cols = [batch.column(j) for j in range(len(names)) if j != i]
            kept = [n for n in names if n != TABLE_COL]
            topic = batch.column(names.index("topic")) if "topic" in names else None
            table = batch.column(i)
            if topic is not None:
                cols[kept.index("topic")] = table
            else:
                cols.append(table)
                kept.append("topic")
            batch = pa.RecordBatch.from_arrays(cols, names=kept)
        else:
            import pyarrow.compute as pc

            if "topic" in names:
                i = names.index("topic")
                cols = [batch.column(j) for j in range(len(names))]
                cols[i] = pc.replace_substring(cols[i], ".", "_")
                batch = pa.RecordBatch.from_arrays(cols, names=names)
        return super()._rows_of(batch, part, seq)

    @staticmethod
    def _table_column(fmt: str, has_source: bool) -> Any:
        """The destination table of each record: ``fmt`` with its placeholders replaced, dots to underscores."""
        import re

        from pyspark.sql import functions as F

        parts = []
        for piece in re.split(r"(\$\{[a-z.]+\})", fmt):
            if piece == "${topic}":
                parts.append(F.coalesce(F.col("topic"), F.lit("")))
            elif piece.startswith("${source."):
                field = piece[len("${source."):-1]
                parts.append(F.coalesce(F.col(_SOURCE_COL)[field], F.lit("")) if has_source else F.lit(""))
            elif piece:
                parts.append(F.lit(piece))
        return F.regexp_replace(F.concat(*parts), r"\.", "_")
