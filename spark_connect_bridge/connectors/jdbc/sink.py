"""Confluent's JDBC sink connector (``io.confluent.connect.jdbc.JdbcSinkConnector``), exactly once, in bulk.

Input records are typed: ``value`` a struct (its fields become columns), ``key`` a struct or a primitive
(``pk.mode=record_key``). ``insert.mode`` insert / upsert / update, ``pk.mode`` none / kafka / record_key /
record_value, ``pk.fields``, ``fields.whitelist``, ``table.name.format`` (``${topic}``), ``auto.create``,
``auto.evolve`` (adds columns and, beyond Confluent, widens integer/float/text types), ``delete.enabled``
(a tombstone deletes its key's row) and ``db.timezone`` behave as Confluent's.

**Exactly once.** Executors stage their rows in bulk into a staging table per task (PostgreSQL: an UNLOGGED
table filled by ADBC ingest, i.e. binary COPY; MariaDB: multi-row INSERTs; SQLite: executemany). The driver's
:meth:`JdbcSinkConnector.commit` then, in **one database transaction**, applies the staged rows of the batch
(last record per key wins; tombstones become DELETEs; upserts are ``INSERT ... SELECT ... ON CONFLICT`` /
``ON DUPLICATE KEY UPDATE``) and records ``(app_id, batch_id)`` in the offsets table
(``offsets.table.name``, default ``__kconnect_offsets``). A replayed batch finds its id there and is skipped; a
crash before the commit leaves only staging tables, which are dropped later.

With ``commit.scope=task`` (PostgreSQL, ``insert.mode=insert`` without deletes, streaming queries) rows are not
staged: each task COPYs (ADBC ingest) straight into the table and, in the same transaction on the same
connection, records its own offsets row (``task:<query hash>:<partition>``); the driver then records the batch.
A replayed task finds its row and writes nothing. Rows are written once instead of twice, at the price of a
micro-batch becoming visible task by task.

**Row errors.** When the database rejects the batch because of its data (a constraint, a value out of range),
the driver bisects the batch under savepoints to find the rejected rows. With ``errors.tolerance=none`` the
batch fails naming the first rejected record's topic/partition/offset; with ``errors.tolerance=all`` the other
rows are committed and the rejected ones are handed to :meth:`JdbcSinkConnector.report_rejected` (logged, and
kept in :attr:`JdbcSinkConnector.last_rejected` for the pipeline's dead-letter routing). Connection errors,
deadlocks and serialization failures are retried with backoff (``errors.retry.timeout``,
``errors.retry.delay.max.ms``) and then raise :class:`~spark_connect_bridge.errors.RetriableError`.

>>> (df.writeStream.format("kconnect")                                              # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.jdbc.JdbcSinkConnector")
...    .option("connection.url", "jdbc:postgresql://127.0.0.1:5432/shop")
...    .option("insert.mode", "upsert").option("pk.mode", "record_key").option("delete.enabled", "true")
...    .option("auto.create", "true").option("checkpointLocation", "/tmp/ckpt").start())
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from ...config import CaseInsensitiveValidString, Importance, NonEmptyString, Range, Type
from ...core.topic_schemas import narrow_arrow, topic_layouts
from ...errors import ConfigError, ConfigProblem, ConnectError, DataError, RecordError
from ..base import CommitContext, SinkConnector, WriteContext
from .dialects import (
    Dialect,
    JdbcConnection,
    MySQLDialect,
    PostgresDialect,
    connection_config_def,
    mysql_tsv,
    parse_jdbc_url,
    with_retries,
)
from .source import parse_sql_type

__all__ = ["JdbcSinkConnector", "RejectedRecord"]

log = logging.getLogger(__name__)

_META = ("__kc_op", "__kc_ord", "__kc_tix", "__kc_kpart", "__kc_koff")
_FLUSH_BYTES = 32 << 20
_KAFKA_PK = ("__connect_topic", "__connect_partition", "__connect_offset")
# PostgreSQL column types (information_schema data_type) that take an Arrow type's binary COPY encoding as is.
_COPY_TYPES = {"bool": ("boolean",), "int16": ("smallint",), "int32": ("integer",), "int64": ("bigint",),
               "float32": ("real",), "float64": ("double precision",), "decimal": ("numeric",),
               "string": ("text", "character varying"), "binary": ("bytea",), "date": ("date",),
               "timestamp": ("timestamp without time zone",), "timestamptz": ("timestamp with time zone",)}


def _arrow_kind(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return "timestamptz" if t.tz is not None else "timestamp"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "binary"
    return str(t) if str(t) in ("bool", "int16", "int32", "int64") else \
        {"float": "float32", "double": "float64"}.get(str(t), "")


def _check(cfg: Any) -> Any:
    mode, pk = cfg.insert_mode, cfg.pk_mode
    if cfg.delete_enabled and pk != "record_key":
        yield ConfigProblem("delete.enabled", "Invalid value true for configuration delete.enabled: deletes need "
                                              "pk.mode=record_key (the tombstone's key names the row)")
    if mode in ("upsert", "update") and pk == "none":
        yield ConfigProblem("pk.mode", f"Invalid value none for configuration pk.mode: insert.mode={mode} needs "
                                       "a primary key (kafka, record_key or record_value)")
    if pk == "kafka" and cfg.pk_fields and len(cfg.pk_fields) != 3:
        yield ConfigProblem("pk.fields", "Invalid value for configuration pk.fields: pk.mode=kafka takes exactly "
                                         "three names (topic, partition, offset columns)")
    if pk == "record_value" and not cfg.pk_fields:
        yield ConfigProblem("pk.fields", "Invalid value for configuration pk.fields: pk.mode=record_value needs "
                                         "the value fields that form the primary key")


CONFIG_DEF = (
    connection_config_def("Connection")
    .define("dialect.name", Type.STRING, "", importance=Importance.LOW,
            doc="Database dialect; chosen from connection.url when empty.", group="Connection")
    .define("insert.mode", Type.STRING, "insert", CaseInsensitiveValidString("insert", "upsert", "update"),
            Importance.HIGH, "insert, upsert (insert or update by primary key) or update.", group="Writes")
    .define("batch.size", Type.INT, 3000, Range.at_least(1), Importance.MEDIUM,
            "Rows per staged chunk (writes are bulk; a micro-batch is committed as one transaction).",
            group="Writes")
    .define("delete.enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Treat tombstones (null values) as deletes of their key's row; needs pk.mode=record_key.",
            group="Writes")
    .define("table.types", Type.LIST, ["TABLE"], importance=Importance.LOW,
            doc="Kinds of destination tables: TABLE, VIEW.", group="Writes")
    .define("table.name.format", Type.STRING, "${topic}", NonEmptyString(), Importance.MEDIUM,
            "Destination table name; ${topic} is replaced by the record's topic (schema.table allowed).",
            group="Data Mapping")
    .define("pk.mode", Type.STRING, "none", CaseInsensitiveValidString("none", "kafka", "record_key",
                                                                        "record_value"), Importance.HIGH,
            "Where the primary key comes from: none, kafka (topic/partition/offset), record_key, record_value.",
            group="Data Mapping")
    .define("pk.fields", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Primary key field names (see pk.mode).", group="Data Mapping")
    .define("fields.whitelist", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Value fields to write (all when empty).", group="Data Mapping")
    .define("db.timezone", Type.STRING, "UTC", importance=Importance.MEDIUM,
            doc="Time zone of TIMESTAMP-without-time-zone (DATETIME) columns.", group="Data Mapping")
    .define("auto.create", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="CREATE TABLE a missing destination table from the record schema.", group="DDL Support")
    .define("auto.evolve", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="ALTER TABLE to add missing columns (and widen integer/float/text types).", group="DDL Support")
    .define("quote.sql.identifiers", Type.STRING, "always", CaseInsensitiveValidString("always", "never"),
            Importance.MEDIUM, "Quote identifiers; 'never' accepts only plain names.", group="DDL Support")
    .define("max.retries", Type.INT, 10, Range.at_least(0), Importance.MEDIUM,
            "Confluent's retry count; here retries follow errors.retry.timeout (used when that is 0: "
            "max.retries × retry.backoff.ms).", group="Retries")
    .define("retry.backoff.ms", Type.INT, 3000, Range.at_least(0), Importance.MEDIUM,
            "Confluent's backoff between retries.", group="Retries")
    .define("trim.sensitive.log", Type.BOOLEAN, False, importance=Importance.LOW,
            doc="Accepted for compatibility: values are never logged.", group="Retries")
    .define("offsets.table.name", Type.STRING, "__kconnect_offsets", NonEmptyString(), Importance.LOW,
            "Table recording the last committed micro-batch per query (exactly-once).", group="Exactly once")
    .define("commit.scope", Type.STRING, "batch", CaseInsensitiveValidString("batch", "task"), Importance.MEDIUM,
            "batch: a micro-batch becomes visible at once, in one driver transaction (rows are staged first). "
            "task (PostgreSQL, insert.mode=insert without deletes, streaming): each Spark task COPYs its rows "
            "straight into the table and commits them with its own offsets row, so rows are written once; still "
            "exactly once, but a micro-batch is visible task by task, and a lost connection fails the task "
            "instead of being retried.", group="Exactly once")
    # The exactly-once tests make a commit fail after staging (before the transaction) or after the transaction
    # committed (before Spark records the batch). Internal: not in the docs, REST or validate; the commit runs in a
    # Python process Spark starts, so an option is the one way in.
    .define("fault.injection.point", Type.STRING, "none",
            CaseInsensitiveValidString("none", "after-stage", "after-apply"), Importance.LOW,
            "Testing only: fail the commit after staging or after the transaction committed.", internal=True)
    .check(_check)
    .accept("io.confluent.connect.jdbc.JdbcSinkConnector", group="Accepted (Confluent)", no_effect={
        "date.calendar.system": "dates are proleptic Gregorian here (Spark's and java.time's calendar, "
                                "PROLEPTIC_GREGORIAN); the LEGACY hybrid Julian calendar of dates before 1582-10-15 "
                                "is not reproduced",
        "mssql.use.merge.holdlock": "SQL Server is not a dialect here (PostgreSQL, MariaDB/MySQL, SQLite)",
        "replace.null.with.default": "Spark types carry no field defaults: a null is written as null, which is "
                                     "what Kafka's default of true gives for a schema without defaults",
    }, refused={
        "date.timezone": "DATE values are written as they are (the default DB_TIMEZONE keeps them as given); "
                         "UTC conversion is not implemented",
        "jdbc.credentials.provider.class": "Java credentials providers are not loaded; give connection.user and "
                                           "connection.password (a config provider such as ${file:...} keeps "
                                           "them out of the file)",
        "string.output.value.column.name": "a string value is written to the record_value column (the default); "
                                           "another name is not implemented",
        "timestamp.fields.list": "fields are written with their own types; converting listed fields to "
                                 "timestamps is not implemented",
        "timestamp.precision.mode": "timestamps are written with microsecond precision (Spark's; the default); "
                                    "nanoseconds are not implemented",
    })
)


@dataclass(frozen=True)
class _Stage:
    table: str  # destination table name (unquoted, maybe schema.table)
    stage: str  # staging table name
    columns: tuple[tuple[str, str], ...]  # data columns (name, arrow type string)
    pk: tuple[str, ...]
    rows: int
    topics: tuple[str, ...] = ()  # __kc_tix indexes this list (topics are not repeated per row)
    # What the task saw, so the commit can leave out work (None: unknown, do everything): how many tombstones,
    # and whether no key occurs twice among this stage's rows.
    deletes: int | None = None
    unique_keys: bool | None = None
    key_range: tuple[Any, Any] | None = None  # (min, max) of a one-column integer key


@dataclass(frozen=True)
class _Staged:
    """Commit message of one task: its staging tables."""

    partition_id: int
    stages: tuple[_Stage, ...]


@dataclass(frozen=True)
class _Direct:
    """Commit message of a task that committed its rows itself (``commit.scope=task``)."""

    partition_id: int
    rejected: tuple[RejectedRecord, ...] = ()


@dataclass(frozen=True)
class RejectedRecord:
    """A record the database rejected: its coordinates and the error."""

    topic: str | None
    partition: int | None
    offset: int | None
    error: str


def _key_stats(keys: list[Any]) -> tuple[bool | None, tuple[Any, Any] | None]:
    """Whether no key occurs twice among the rows of these Arrow tables (key columns only), and the range of
    a one-column key without nulls (tasks whose ranges do not overlap share no key). Only for integer keys
    (None, None: unknown otherwise): Arrow compares text by bytes, but the database by its collation, where
    'A' and 'a' or 'a' and 'a ' may be one key (MariaDB's default collations), so distinct strings here prove
    nothing there."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not keys:
        return True, None
    t = pa.concat_tables(keys)
    if not all(pa.types.is_integer(f.type) for f in t.schema):
        return None, None
    if t.num_columns > 1:
        return t.group_by(t.column_names).aggregate([]).num_rows == t.num_rows, None
    col = t.column(0)
    unique = pc.count_distinct(col, mode="all").as_py() == t.num_rows
    if not unique or col.null_count:
        return unique, None
    mm = pc.min_max(col)
    return True, (mm["min"].as_py(), mm["max"].as_py())


def _schemaless_message(requirement: str, key: str, side: str) -> str:
    """Confluent's reason for refusing a schemaless record, said of the config that makes every record so."""
    prefix = key[: -len("schemas.enable")]
    return (f"{requirement}, but {key}=false reads every {side} without a schema (in Kafka Connect a HashMap {side} "
            f"and null {side} schema, which the JDBC sink refuses record by record). Give the {side}s a schema: "
            f"{key}=true with schema'd messages, {prefix}schema.content (a Connect schema) or {prefix}spark.schema")


class JdbcSinkConnector(JdbcConnection, SinkConnector):
    """Writes records to PostgreSQL, MariaDB/MySQL or SQLite tables (Confluent's JDBC sink), exactly once."""

    kafka_class = "io.confluent.connect.jdbc.JdbcSinkConnector"
    delivery = "exactly-once"
    config_def = CONFIG_DEF

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._info = parse_jdbc_url(config.connection_url, config.get("connection.user"),
                                    config.get("connection.password"))
        self.last_rejected: list[RejectedRecord] = []
        self._layouts: dict[str, dict[str, Any]] | None = None  # per topic, when the input holds several schemas
        self._key_layouts: dict[str, dict[str, Any]] | None = None  # the key's own, when it has one per topic

    def _retry(self, fn: Any, what: str) -> Any:
        timeout = self.config.errors_retry_timeout
        if timeout == 0:
            timeout = self.config.max_retries * self.config.retry_backoff_ms
        return with_retries(fn, self._dialect(), timeout_ms=timeout,
                            max_delay_ms=self.config.errors_retry_delay_max_ms, what=what)

    @property
    def _pk_mode(self) -> str:
        return self.config.pk_mode

    # -- driver: input checks -----------------------------------------------------------------------
    @classmethod
    def schemaless_problems(cls, settings: Any, schemaless: Mapping[str, str]) -> list[ConfigProblem]:
        """Confluent's sink refuses schemaless records (its RecordValidator, per record): values always (they are
        bound as Structs), keys where the key is the primary key (pk.mode=record_key) or deletes need it."""
        configured = (f"Sink connector '{settings['name']}' is configured with 'delete.enabled="
                      f"{str(bool(settings.delete_enabled)).lower()}' and 'pk.mode={settings.pk_mode}' and therefore "
                      f"requires records with a non-null")
        problems = []
        if "value" in schemaless:
            problems.append(ConfigProblem(schemaless["value"], _schemaless_message(
                f"{configured} Struct value and non-null Struct schema", schemaless["value"], "value")))
        if "key" in schemaless and (settings.pk_mode == "record_key" or settings.delete_enabled):
            problems.append(ConfigProblem(schemaless["key"], _schemaless_message(
                f"{configured} key and non-null Struct or primitive key schema", schemaless["key"], "key")))
        return problems

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import ArrayType, MapType, StructType

        names = schema.fieldNames()
        problems = []
        if "value" not in names:
            raise DataError(f"The JDBC sink needs a 'value' column; the input has {names}")
        # Several schemas in one input (one CDC connector over many tables): each topic's table gets only its
        # own columns (see spark_connect_bridge.core.topic_schemas).
        layouts = topic_layouts(schema, "value") if "topic" in names else None
        self._layouts = layouts if layouts and len(layouts) > 1 else None
        # Keys parsed from several topics' messages carry a layout of their own (a CDC connector's share the
        # value's).
        key_layouts = topic_layouts(schema, "key") if self._layouts and "key" in names else None
        self._key_layouts = key_layouts if key_layouts and len(key_layouts) > 1 else None
        vt = schema["value"].dataType
        if not isinstance(vt, StructType):
            raise DataError(f"The JDBC sink needs struct values (a schema'd record, e.g. JsonConverter with "
                            f"schemas.enable=true or Avro); the value is {vt.simpleString()}")
        white = set(self.config.fields_whitelist)
        for f in vt.fields:
            if white and f.name not in white:
                continue  # not written (Confluent's sink maps only the listed fields)
            if isinstance(f.dataType, (StructType, MapType, ArrayType)):
                problems.append(f"value field {f.name!r} is {f.dataType.simpleString()}: only primitive fields "
                                f"can be written to a column (flatten it with the Flatten transform)")
        pk = self._pk_mode
        fields = self.config.pk_fields
        if pk == "record_key":
            if "key" not in names:
                problems.append("pk.mode=record_key needs a 'key' column")
            else:
                kt = schema["key"].dataType
                if isinstance(kt, StructType):
                    missing = [f for f in fields if f not in kt.fieldNames()]
                    if missing:
                        problems.append(f"pk.fields {missing} are not fields of the key {kt.simpleString()}")
                elif len(fields) != 1:
                    problems.append("pk.mode=record_key with a primitive key needs exactly one pk.fields name "
                                    "(the column for the key)")
        if pk == "record_value":
            missing = [f for f in fields if f not in vt.fieldNames()]
            if missing:
                problems.append(f"pk.fields {missing} are not fields of the value {vt.simpleString()}")
        if problems:
            raise ConfigError([ConfigProblem("pk.fields" if "pk" in p else "", p) for p in problems],
                              context=f"connector {self.name!r} (JdbcSinkConnector)")

    # -- executor: stage --------------------------------------------------------------------------------
    def _table_name(self, topic: str) -> str:
        return self.config.table_name_format.replace("${topic}", topic)

    def _rows(self, batch: Any, part: int, seq: int) -> dict[str, Any]:
        """Flatten one record batch into {table name: [(Arrow table of data + meta columns, pk, topic)]}; with
        several schemas, each topic's rows narrowed to that topic's own columns first."""
        import pyarrow as pa
        import pyarrow.compute as pc

        layouts = self._layouts
        if not layouts or "topic" not in batch.schema.names:
            return self._rows_of(batch, part, seq)
        table = pa.Table.from_batches([batch])
        out: dict[str, list] = {}
        start = seq
        for t in pc.unique(table.column("topic")).to_pylist():
            sub = table.filter(pc.equal(table.column("topic"), t)) if t is not None else \
                table.filter(pc.is_null(table.column("topic")))
            if t in layouts:
                sub = narrow_arrow(sub, layouts[t], (self._key_layouts or {}).get(t))
            for rb in sub.to_batches():
                for name, parts in self._rows_of(rb, part, start).items():
                    out.setdefault(name, []).extend(parts)
                start += rb.num_rows
        return out

    def _rows_of(self, batch: Any, part: int, seq: int) -> dict[str, Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
        value = col["value"]
        topic = col.get("topic", pa.nulls(n, pa.string()))
        kpart = col.get("partition", pa.nulls(n, pa.int32()))
        koff = col.get("offset", pa.nulls(n, pa.int64()))
        tomb = value.is_null()
        if pc.any(tomb).as_py() and not self.config.delete_enabled:
            i = pc.index(tomb, True).as_py()
            raise RecordError("JDBC sink: a tombstone (null value) arrived and delete.enabled=false; "
                              "set delete.enabled=true (with pk.mode=record_key) or drop tombstones with "
                              "a Filter transform", stage="TASK_PUT", topic=topic[i].as_py(),
                              partition=kpart[i].as_py(), offset=koff[i].as_py())
        out: dict[str, Any] = {}
        pk = self._pk_mode
        fields = self.config.pk_fields
        if pk == "kafka":
            names = fields or list(_KAFKA_PK)
            out.update({names[0]: topic, names[1]: kpart, names[2]: koff})
        elif pk == "record_key":
            key = col["key"]
            if pa.types.is_struct(key.type):
                kids = key.flatten()
                for f, a in zip(key.type, kids):
                    if not fields or f.name in fields:
                        out[f.name] = a
            else:
                out[fields[0]] = key
        pk_cols = list(out) if pk in ("kafka", "record_key") else list(fields) if pk == "record_value" else []
        white = set(self.config.fields_whitelist)
        for f, a in zip(value.type, value.flatten()):
            if f.name in out:
                continue
            if white and f.name not in white and f.name not in pk_cols:
                continue
            out[f.name] = a
        out["__kc_op"] = pc.if_else(tomb, "d", "u")
        out["__kc_ord"] = pa.array(np.arange(seq, seq + n, dtype=np.int64) + (part << 40))
        out["__kc_tix"] = pa.nulls(n, pa.int16())  # set per staging table in write()
        out["__kc_kpart"], out["__kc_koff"] = kpart.cast(pa.int32()), koff.cast(pa.int64())
        for k, a in list(out.items()):
            if pa.types.is_large_string(a.type):
                out[k] = a.cast(pa.string())
        table = pa.table(out)
        tables: dict[str, list] = {}
        topics = pc.unique(topic).to_pylist()
        for t in topics:
            sub = table if len(topics) == 1 else table.filter(pc.equal(topic, t))
            tables.setdefault(self._table_name(t or ""), []).append((sub, tuple(pk_cols), t))
        return tables

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> _Staged | _Direct | None:
        d = self._dialect()
        if self._direct(d, ctx.batch_id):
            return self._write_direct(d, batches, ctx)
        import pyarrow as pa
        import pyarrow.compute as pc

        conn = self._open(lambda: d.connect(local_infile=True) if isinstance(d, MySQLDialect) else d.connect())
        stages: dict[str, dict[str, Any]] = {}
        prefix = self._stage_prefix(ctx.app_id, ctx.batch_id)
        seq = 0
        self._adbc: Any = None  # the ADBC connection of PostgreSQL's bulk loads, opened on first use
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                for name, parts in self._rows(batch, ctx.partition_id, seq).items():
                  for table, pk, topic in parts:
                    st = stages.get(name)
                    if st is None:
                        st = stages[name] = {"stage": f"{prefix}{uuid.uuid4().hex[:8]}", "schema": table.schema,
                                             "pk": pk, "rows": 0, "topics": [], "deletes": 0, "keys": []}
                        self._retry(lambda st=st, table=table: self._create_stage(conn, d, st["stage"],
                                                                                  table.schema),
                                    "create staging table")
                    elif not table.schema.equals(st["schema"]):
                        table = table.select(st["schema"].names).cast(st["schema"])
                    if topic not in st["topics"]:
                        st["topics"].append(topic)
                    ix = table.schema.get_field_index("__kc_tix")
                    table = table.set_column(ix, "__kc_tix", pa.array(
                        [st["topics"].index(topic)] * table.num_rows, pa.int16()))
                    if pk:
                        st["deletes"] += pc.sum(pc.equal(table.column("__kc_op"), "d")).as_py() or 0
                        st["keys"].append(table.select(list(pk)))
                    # Buffer Spark's small Arrow batches into ~32 MB bulk loads (one COPY each).
                    st.setdefault("buf", []).append(table)
                    st["bytes"] = st.get("bytes", 0) + table.nbytes
                    st["rows"] += table.num_rows
                    if st["bytes"] >= _FLUSH_BYTES:
                        self._flush(conn, d, st)
                seq += batch.num_rows
            for st in stages.values():
                self._flush(conn, d, st)
            if d.info.kind != "postgresql":
                conn.commit()
        finally:
            conn.close()
            if self._adbc is not None:
                self._adbc.close()
                self._adbc = None
        if not stages:
            return None
        return _Staged(ctx.partition_id, tuple(
            _Stage(name, st["stage"], tuple((f.name, str(f.type)) for f in st["schema"] if f.name not in _META),
                   st["pk"], st["rows"], tuple(st["topics"]), st["deletes"] if st["pk"] else None,
                   *(_key_stats(st["keys"]) if st["pk"] else (None, None))) for name, st in stages.items()))

    # -- executor: commit.scope=task --------------------------------------------------------------------
    def _direct(self, d: Dialect, batch_id: int | None) -> TypeGuard[PostgresDialect]:
        """Whether tasks write straight into the tables: only plain inserts, where the order of records across
        tasks does not matter and nothing has to be merged with the existing rows (PostgreSQL, micro-batches)."""
        return (self.config.commit_scope == "task" and isinstance(d, PostgresDialect)
                and batch_id is not None and self.config.insert_mode == "insert"
                and not self.config.delete_enabled)

    @staticmethod
    def _task_key(ctx: WriteContext) -> str:
        """The offsets-table key of one task of a query (the query's own key is ``ctx.app_id``)."""
        return f"task:{hashlib.sha256(ctx.app_id.encode()).hexdigest()[:32]}:{ctx.partition_id}"

    def _task_done(self, cur: Any, d: Dialect, ctx: WriteContext, batch_id: int) -> tuple[int | None, tuple] | None:
        """``None`` when this task still has to write batch ``batch_id``; else (the rows it wrote, or None
        when the whole batch is committed, and the records it rejected)."""
        off = d.table(self.config.offsets_table_name)
        cur.execute(d.sql(f"SELECT app_id, batch_id, rejected FROM {off} WHERE app_id IN ({{p}}, {{p}})"),
                    [ctx.app_id, self._task_key(ctx)])
        rows = {r[0]: r for r in cur.fetchall()}
        query = rows.get(ctx.app_id)
        if query is not None and int(query[1]) >= batch_id:
            return None, ()
        task = rows.get(self._task_key(ctx))
        if task is not None and int(task[1]) >= batch_id:
            info = json.loads(task[2])
            return info["rows"], tuple(RejectedRecord(**r) for r in info["rejected"])
        return None

    def _write_direct(self, d: PostgresDialect, batches: Iterator[Any], ctx: WriteContext) -> _Direct:
        """COPY the task's rows into their tables and record the task's offsets row, in ONE transaction.

        A replayed task (Spark retried it, or the query restarted on its checkpoint) finds its row and writes
        nothing; it checks that it was given as many records as the committed attempt, since a different
        split of the batch would otherwise lose or double rows silently. Two attempts running at once
        (speculation) serialize on the offsets row: the second sees the first's commit and rolls back."""
        batch_id = ctx.batch_id
        assert batch_id is not None, "commit.scope=task writes micro-batches only (see _direct)"
        ddl = self._open(d.connect)
        conn = None
        try:
            self._retry(lambda: self._ensure_offsets(ddl, d), "create the offsets table")
            conn = self._open(lambda: d.adbc_connect(autocommit=True))
            dd = d.for_adbc()
            cur = conn.cursor()
            prior = self._task_done(cur, dd, ctx, batch_id)
            if prior is not None:
                return self._replayed(batches, ctx, *prior)
            cur.execute("BEGIN")
            tables: dict[str, dict[str, Any]] = {}
            seq = rows = 0
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                for name, parts in self._rows(batch, ctx.partition_id, seq).items():
                    for table, pk, topic in parts:
                        st = tables.setdefault(name, {"pk": pk, "topics": [], "buf": [], "bytes": 0,
                                                      "schema": table.schema, "plan": None, "rejected": []})
                        self._buffer(st, table, topic)
                        if st["bytes"] >= _FLUSH_BYTES:
                            self._flush_direct(cur, dd, ddl, name, st)
                seq += batch.num_rows
                rows += batch.num_rows
            for name, st in tables.items():
                self._flush_direct(cur, dd, ddl, name, st)
            rejected = tuple(r for st in tables.values() for r in st["rejected"])
            off = dd.table(self.config.offsets_table_name)
            info = json.dumps({"rows": rows, "rejected": [r.__dict__ for r in rejected]})
            cur.execute(dd.sql(f"INSERT INTO {off} (app_id, batch_id, rejected) VALUES ({{p}}, {{p}}, {{p}}) "
                               f"ON CONFLICT (app_id) DO UPDATE SET batch_id = excluded.batch_id, rejected = "
                               f"excluded.rejected WHERE {off}.batch_id < excluded.batch_id RETURNING batch_id"),
                        [self._task_key(ctx), ctx.batch_id, info])
            if not cur.fetchall():  # another attempt of this task committed first
                cur.execute("ROLLBACK")
                prior = self._task_done(cur, dd, ctx, batch_id)
                return _Direct(ctx.partition_id, prior[1] if prior else ())
            cur.execute("COMMIT")
            return _Direct(ctx.partition_id, rejected)
        finally:
            ddl.close()
            if conn is not None:
                conn.close()

    def _replayed(self, batches: Iterator[Any], ctx: WriteContext, rows: int | None,
                  rejected: tuple) -> _Direct:
        if rows is not None:
            n = sum(b.num_rows for b in batches)
            if n != rows:
                raise ConnectError(f"JDBC sink {self.name}: the replay of batch {ctx.batch_id} gives task "
                                   f"{ctx.partition_id} {n} records where the committed attempt had {rows}; "
                                   "commit.scope=task needs the same split on replay (use commit.scope=batch)")
        log.info("JDBC sink %s: task %s of batch %s already committed; skipping the replay", self.name,
                 ctx.partition_id, ctx.batch_id)
        return _Direct(ctx.partition_id, rejected)

    @staticmethod
    def _buffer(st: dict, table: Any, topic: str | None) -> None:
        """Append ``table`` to the buffer of its destination, its topic as an index (``__kc_tix``)."""
        import pyarrow as pa

        if not table.schema.equals(st["schema"]):
            table = table.select(st["schema"].names).cast(st["schema"])
        if topic not in st["topics"]:
            st["topics"].append(topic)
        ix = table.schema.get_field_index("__kc_tix")
        table = table.set_column(ix, "__kc_tix", pa.repeat(pa.scalar(st["topics"].index(topic), pa.int16()),
                                                           table.num_rows))
        st["buf"].append(table)
        st["bytes"] += table.nbytes
        st.setdefault("rows", 0)
        st["rows"] += table.num_rows

    def _plan_direct(self, ddl: Any, d: Dialect, name: str, st: dict) -> str:
        """Create/evolve the table (committed DDL, as the driver would) and choose how rows go in: ``copy`` when
        every column's Arrow type is exactly the column's type (binary COPY sends no casts), else ``stage``
        (a temporary table in the task's transaction, then INSERT ... SELECT with assignment casts)."""
        stage = self._stage_of(name, st, "")
        for attempt in (0, 1):  # two tasks may create or evolve the same table at the same moment
            try:
                self._ensure_table(ddl, d, name, [stage])
                break
            except Exception as e:
                ddl.rollback()
                if attempt or not (d.is_data_error(e) or "already exists" in str(e)):
                    raise
        have = self._existing_columns(ddl.cursor(), d, name) or {}
        ddl.commit()
        ok = all(have.get(f.name, "").lower() in _COPY_TYPES.get(_arrow_kind(f.type), ())
                 for f in st["schema"] if f.name not in _META)
        return "copy" if ok else "stage"

    def _stage_of(self, name: str, st: dict, stage: str) -> _Stage:
        return _Stage(name, stage, tuple((f.name, str(f.type)) for f in st["schema"] if f.name not in _META),
                      st["pk"], st.get("rows", 0), tuple(st["topics"]))

    def _flush_direct(self, cur: Any, d: Dialect, ddl: Any, name: str, st: dict) -> None:
        """Write the buffered rows of one table inside the task's transaction; rows the database rejects are
        isolated under savepoints (as the driver does for staged batches)."""
        import pyarrow as pa

        if not st["buf"]:
            return
        data = pa.concat_tables(st["buf"])
        st["buf"], st["bytes"] = [], 0
        if st["plan"] is None:
            st["plan"] = self._plan_direct(ddl, self._dialect(), name, st)
        parts = name.split(".")
        cols = [n for n in data.schema.names if n not in _META]

        def write() -> None:
            if st["plan"] == "copy":
                cur.adbc_ingest(parts[-1], data.select(cols), mode="append",
                                db_schema_name=parts[0] if len(parts) > 1 else None)
            else:
                tmp = self._temp_stage(cur, d, st, data.select(cols))
                q = ", ".join(d.quote(c) for c in cols)
                cur.execute(f"INSERT INTO {d.table(name)} ({q}) SELECT {q} FROM {d.quote(tmp)}")

        if under_savepoint(cur, d, "kc_chunk", write) is None:
            return
        tmp = self._temp_stage(cur, d, st, data)
        st["rejected"] += self._apply(None, cur, d, name, [self._stage_of(name, st, tmp)])

    def _temp_stage(self, cur: Any, d: Dialect, st: dict, data: Any) -> str:
        """A temporary table (dropped at commit) holding ``data``, for INSERT ... SELECT."""
        tmp = f"__kc_t_{uuid.uuid4().hex[:12]}"
        cols = ", ".join(f"{d.quote(f.name)} {self._stage_type(d, f)}" for f in data.schema)
        cur.execute(f"CREATE TEMPORARY TABLE {d.quote(tmp)} ({cols}) ON COMMIT DROP")
        cur.adbc_ingest(tmp, data, mode="append", temporary=True)
        return tmp

    def _flush(self, conn: Any, d: Dialect, st: dict) -> None:
        import pyarrow as pa

        if not st.get("buf"):
            return
        data = pa.concat_tables(st["buf"])
        st["buf"], st["bytes"] = [], 0
        for chunk in data.to_batches(max_chunksize=max(self.config.batch_size, 1 << 20)):
            self._retry(lambda chunk=chunk: self._stage_rows(conn, d, st["stage"], chunk), "stage rows")

    @staticmethod
    def _stage_prefix(app_id: str, batch_id: int | None) -> str:
        app = hashlib.sha256(app_id.encode()).hexdigest()[:10]
        return f"__kc_s_{app}_{'b' if batch_id is None else batch_id}_"

    def _create_stage(self, conn: Any, d: Dialect, stage: str, schema: Any) -> None:
        cols = ", ".join(f"{d.quote(f.name)} {self._stage_type(d, f)}" for f in schema)
        kind = "UNLOGGED TABLE" if d.info.kind == "postgresql" else "TABLE"
        cur = conn.cursor()
        cur.execute(f"CREATE {kind} {d.quote(stage)} ({cols})")
        cur.close()
        conn.commit()

    @staticmethod
    def _stage_type(d: Dialect, f: Any) -> str:
        import pyarrow as pa

        if f.name == "__kc_op":
            return "CHAR(1)"
        if d.info.kind == "mysql" and pa.types.is_string(f.type):
            return "LONGTEXT"
        return d.sql_type(f.type)

    def _stage_rows(self, conn: Any, d: Dialect, stage: str, chunk: Any) -> None:
        import pyarrow as pa

        if isinstance(d, PostgresDialect):
            # ADBC bulk ingest = binary COPY into the staging table, straight from Arrow.
            if self._adbc is None:
                self._adbc = d.adbc_connect()
            try:
                cur = self._adbc.cursor()
                cur.adbc_ingest(stage, pa.Table.from_batches([chunk]), mode="append")
                cur.close()
                self._adbc.commit()
            except Exception:
                self._adbc.close()
                self._adbc = None
                raise
            return
        if d.info.kind == "mysql" and self._load_data(conn, d, stage, chunk):
            return
        cols = [self._py_column(d, chunk.column(i)) for i in range(chunk.num_columns)]
        rows = list(zip(*cols))
        names = ", ".join(d.quote(n) for n in chunk.schema.names)
        ph = ", ".join([d.param] * chunk.num_columns)
        cur = conn.cursor()
        if d.info.kind == "sqlite":
            cur.execute("BEGIN")
        cur.executemany(f"INSERT INTO {d.quote(stage)} ({names}) VALUES ({ph})", rows)
        if d.info.kind == "sqlite":
            cur.execute("COMMIT")
        cur.close()

    def _load_data(self, conn: Any, d: Any, stage: str, chunk: Any) -> bool:
        """MariaDB/MySQL: stage ``chunk`` with LOAD DATA LOCAL INFILE from an Arrow-built text file (False when
        a column has no text form; the caller then inserts rows)."""
        import tempfile

        import pyarrow as pa

        data = mysql_tsv(pa.Table.from_batches([chunk]), self.config.db_timezone)
        if data is None:
            return False
        with tempfile.NamedTemporaryFile(prefix="kc_load_", suffix=".tsv") as f:
            f.write(data)
            f.flush()
            d.load_data(conn, stage, chunk.schema.names, f.name)
        return True

    def _py_column(self, d: Dialect, a: Any) -> list:
        """Python values for DB-API drivers (MariaDB/SQLite): timestamps as db.timezone wall time."""
        import pyarrow as pa
        import pyarrow.compute as pc

        t = a.type
        if pa.types.is_timestamp(t):
            if t.tz is not None:
                a = pc.local_timestamp(a.cast(pa.timestamp("us", tz=self.config.db_timezone)))
            if d.info.kind == "sqlite":
                return pc.strftime(a, format="%Y-%m-%d %H:%M:%S").to_pylist() if len(a) else []
            return a.to_pylist()
        if d.info.kind == "sqlite" and (pa.types.is_decimal(t) or pa.types.is_date(t)):
            return a.cast(pa.string()).to_pylist()
        return a.to_pylist()

    # -- driver: commit ---------------------------------------------------------------------------------
    def commit(self, messages: Sequence[_Staged | _Direct | None], ctx: CommitContext) -> None:
        d = self._dialect()
        stages = [s for m in messages if isinstance(m, _Staged) for s in m.stages]
        direct = [r for m in messages if isinstance(m, _Direct) for r in m.rejected]
        try:
            self._retry(lambda: self._commit_once(d, stages, ctx, direct), "commit")
        finally:
            if self.config.fault_injection_point != "after-stage":
                self._retry(lambda: self._drop_stages(d, ctx, stages), "drop staging tables")

    def abort(self, messages: Sequence[_Staged], ctx: CommitContext) -> None:
        stages = [s for m in messages if isinstance(m, _Staged) for s in m.stages]
        self._retry(lambda: self._drop_stages(self._dialect(), ctx, stages), "drop staging tables")

    def _ensure_offsets(self, conn: Any, d: Dialect) -> None:
        cur = conn.cursor()
        off = d.table(self.config.offsets_table_name)
        try:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {off} (app_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                        "batch_id BIGINT NOT NULL, rejected TEXT)")
        except Exception as e:
            if not d.is_data_error(e):
                raise
            conn.rollback()
        existing = self._existing_columns(cur, d, self.config.offsets_table_name) or {}
        if existing and "rejected" not in {c.lower() for c in existing}:
            cur.execute(f"ALTER TABLE {off} ADD COLUMN rejected TEXT")  # tables of earlier versions
        conn.commit()

    def _commit_once(self, d: Dialect, stages: list[_Stage], ctx: CommitContext,
                     direct: Sequence[RejectedRecord] = ()) -> None:
        conn = d.connect()
        try:
            cur = conn.cursor()
            self._ensure_offsets(conn, d)
            self.last_rejected = []
            if ctx.batch_id is not None and self._done(cur, d, ctx.app_id, ctx.batch_id, lock=False):
                log.info("JDBC sink %s: batch %s of %s already committed; skipping the replay", self.name,
                         ctx.batch_id, ctx.app_id)
                return
            by_table: dict[str, list[_Stage]] = {}
            for s in stages:
                by_table.setdefault(s.table, []).append(s)
            for table, ss in by_table.items():
                self._ensure_table(conn, d, table, ss)  # DDL outside the data transaction (MySQL commits DDL)
            if self.config.fault_injection_point == "after-stage":
                raise ConnectError("fault injected after staging (fault.injection.point=after-stage)")
            self._begin(cur, d)
            if ctx.batch_id is not None and self._done(cur, d, ctx.app_id, ctx.batch_id, lock=True):
                conn.rollback()
                return
            rejected: list[RejectedRecord] = list(direct)  # from tasks that committed their rows themselves
            for table, ss in by_table.items():
                rejected += self._apply(conn, cur, d, table, ss)
            if ctx.batch_id is not None:
                self._record(cur, d, ctx, rejected)
            conn.commit()
            self.last_rejected = rejected
            if rejected:
                self.report_rejected(rejected, ctx)
        except BaseException:
            try:
                conn.rollback()
            except Exception:
                log.debug("rollback failed", exc_info=True)
            raise
        finally:
            conn.close()
        if self.config.fault_injection_point == "after-apply":
            raise ConnectError("fault injected after the commit transaction (fault.injection.point=after-apply)")

    def report_rejected(self, rejected: list[RejectedRecord], ctx: CommitContext) -> None:
        """Hook for rows the database rejected under ``errors.tolerance=all`` (the pipeline routes them to the
        dead-letter sink); logs each one."""
        for r in rejected:
            log.warning("JDBC sink %s rejected record topic=%s partition=%s offset=%s: %s", self.name, r.topic,
                        r.partition, r.offset, r.error)

    @staticmethod
    def _begin(cur: Any, d: Dialect) -> None:
        if d.info.kind == "sqlite":
            cur.execute("BEGIN IMMEDIATE")
        elif d.info.kind == "mysql":
            cur.execute("START TRANSACTION")

    def _done(self, cur: Any, d: Dialect, app_id: str, batch_id: int, *, lock: bool) -> bool:
        """True when ``batch_id`` of ``app_id`` was committed already; then :attr:`last_rejected` is what that commit
        rejected (kept in the offsets row, in the same transaction as the data), so a replay after a crash
        still dead-letters them."""
        off = d.table(self.config.offsets_table_name)
        lock_sql = " FOR UPDATE" if lock and d.info.kind != "sqlite" else ""
        cur.execute(d.sql(f"SELECT batch_id, rejected FROM {off} WHERE app_id = {{p}}{lock_sql}"), (app_id,))
        row = cur.fetchone()
        done = row is not None and int(row[0]) >= batch_id
        if done and int(row[0]) == batch_id and row[1]:
            self.last_rejected = [RejectedRecord(**r) for r in json.loads(row[1])]
        return done

    def _record(self, cur: Any, d: Dialect, ctx: CommitContext, rejected: Sequence[RejectedRecord] = ()) -> None:
        off = d.table(self.config.offsets_table_name)
        text = json.dumps([r.__dict__ for r in rejected]) if rejected else None
        if d.info.kind == "mysql":
            cur.execute(f"INSERT INTO {off} (app_id, batch_id, rejected) VALUES (%s, %s, %s) "
                        "ON DUPLICATE KEY UPDATE batch_id = VALUES(batch_id), rejected = VALUES(rejected)",
                        (ctx.app_id, ctx.batch_id, text))
        else:
            cur.execute(d.sql(f"INSERT INTO {off} (app_id, batch_id, rejected) VALUES ({{p}}, {{p}}, {{p}}) "
                              "ON CONFLICT (app_id) DO UPDATE SET batch_id = excluded.batch_id, "
                              "rejected = excluded.rejected"), (ctx.app_id, ctx.batch_id, text))

    # -- DDL ------------------------------------------------------------------------------------------
    def _existing_columns(self, cur: Any, d: Dialect, table: str) -> dict[str, str] | None:
        parts = table.split(".")
        if d.info.kind == "sqlite":
            cur.execute("SELECT name, type FROM pragma_table_info(?)", (parts[-1],))
            rows = cur.fetchall()
        elif d.info.kind == "postgresql":
            schema = parts[0] if len(parts) > 1 else None
            cur.execute("SELECT column_name, CASE WHEN data_type = 'numeric' THEN 'numeric' ELSE data_type END "
                        "FROM information_schema.columns WHERE table_name = %s AND table_schema = "
                        "COALESCE(%s, current_schema())", (parts[-1], schema))
            rows = cur.fetchall()
        else:
            cur.execute("SELECT column_name, column_type FROM information_schema.columns WHERE table_name = %s "
                        "AND table_schema = COALESCE(%s, DATABASE())", (parts[-1], parts[0] if len(parts) > 1
                                                                        else None))
            rows = cur.fetchall()
        return {r[0]: r[1] for r in rows} if rows else None

    def _ensure_table(self, conn: Any, d: Dialect, table: str, ss: list[_Stage]) -> None:
        cols: dict[str, Any] = {}
        for s in ss:
            for n, t in s.columns:
                cols.setdefault(n, parse_sql_type(t) if t != "string" else None)
        pk = ss[0].pk
        cur = conn.cursor()
        have = self._existing_columns(cur, d, table)
        if have is None:
            if not self.config.auto_create:
                raise ConnectError(f"Table {table!r} is missing and auto.create is disabled")
            defs = []
            for n, t in cols.items():
                sql_t = d.sql_type(t, key=n in pk) if t is not None else \
                    ("VARCHAR(255)" if n in pk and d.info.kind == "mysql" else "TEXT")
                defs.append(f"{d.quote(n)} {sql_t}{' NOT NULL' if n in pk else ''}")
            if pk:
                defs.append(f"PRIMARY KEY ({', '.join(d.quote(c) for c in pk)})")
            q = f"CREATE TABLE IF NOT EXISTS {d.table(table)} ({', '.join(defs)})"
            log.info("JDBC sink %s: auto-creating table %s", self.name, table)
            cur.execute(q)
            conn.commit()
            return
        missing = [n for n in cols if n not in have]
        if missing and not self.config.auto_evolve:
            raise ConnectError(f"Table {table!r} is missing columns {missing} and auto.evolve is disabled")
        changed = False
        for n in missing:
            t = cols[n]
            sql_t = d.sql_type(t) if t is not None else ("LONGTEXT" if d.info.kind == "mysql" else "TEXT")
            cur.execute(f"ALTER TABLE {d.table(table)} ADD COLUMN {d.quote(n)} {sql_t}")
            changed = True
        if self.config.auto_evolve:
            for n, t in cols.items():
                if n in have and t is not None:
                    wider = d.widen(have[n], d.sql_type(t))
                    if wider:
                        if d.info.kind == "postgresql":
                            cur.execute(f"ALTER TABLE {d.table(table)} ALTER COLUMN {d.quote(n)} TYPE {wider}")
                        elif d.info.kind == "mysql":
                            cur.execute(f"ALTER TABLE {d.table(table)} MODIFY COLUMN {d.quote(n)} {wider}")
                        changed = True
        if changed:
            conn.commit()

    # -- apply ------------------------------------------------------------------------------------------
    def _unique_across(self, cur: Any, d: Dialect, ss: list[_Stage]) -> bool:
        """Whether no key occurs twice in the batch, when every task said its own keys are unique: one stage
        is enough, and so are key ranges that do not overlap; else a look at the keys together (a hash
        aggregate over the key columns only, cheaper than sorting whole rows to keep the last per key)."""
        if not all(s.unique_keys for s in ss):
            return False
        if len(ss) == 1:
            return True
        ranges = [s.key_range for s in ss if s.key_range is not None]
        if len(ranges) == len(ss) and len({type(v) for r in ranges for v in r}) == 1:
            ranges.sort()
            if all(a[1] < b[0] for a, b in itertools.pairwise(ranges)):
                return True
        keys = ", ".join(d.quote(c) for c in ss[0].pk)
        union = " UNION ALL ".join(f"SELECT {keys} FROM {d.quote(s.stage)}" for s in ss)
        cur.execute(f"SELECT 1 FROM ({union}) kc_k GROUP BY {keys} HAVING COUNT(*) > 1 LIMIT 1")
        return cur.fetchone() is None

    def _source_sql(self, d: Dialect, ss: list[_Stage], cols: list[str], pk: tuple[str, ...],
                    unique: bool = False) -> str:
        sel = ", ".join(d.quote(c) for c in cols + list(_META))
        union = " UNION ALL ".join(f"SELECT {sel}, {i} AS kc_si FROM {d.quote(s.stage)}" for i, s in enumerate(ss))
        if not pk or unique or (self.config.insert_mode == "insert"
                                and not self.config.delete_enabled):
            # insert mode: every record is inserted (a duplicate key fails, as Confluent's); no dedup sort
            return f"SELECT * FROM ({union}) kc_u"
        part = ", ".join(d.quote(c) for c in pk)
        return (f"SELECT * FROM (SELECT kc_u.*, ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY "
                f"{d.quote('__kc_ord')} DESC) AS kc_rn FROM ({union}) kc_u) kc_d WHERE kc_rn = 1")

    def _statements(self, d: Dialect, table: str, ss: list[_Stage], rng: tuple[int, int] | None,
                    unique: bool = False) -> list:
        """The statements applying the staged rows of ``table`` (those with ``__kc_ord`` in ``rng``). With
        ``unique`` (no key twice in the batch) the last-per-key dedup is the identity and is left out."""
        cols = []
        for s in ss:
            for n, _ in s.columns:
                if n not in cols:
                    cols.append(n)
        # Every stage must have the same columns for the UNION: stages of one table come from one schema.
        pk = ss[0].pk
        src = self._source_sql(d, ss, cols, pk, unique)
        where, params = "", []
        if rng is not None:
            where = f" AND {d.quote('__kc_ord')} BETWEEN {{p}} AND {{p}}"
            params = [rng[0], rng[1]]
        tgt = d.table(table)
        qcols = ", ".join(d.quote(c) for c in cols)
        ups = f"SELECT {qcols} FROM ({src}) kc_s WHERE {d.quote('__kc_op')} = 'u'{where}"
        mode = self.config.insert_mode
        stmts = []
        # A batch known to hold no tombstone (every task counted them) needs no DELETE.
        if pk and self.config.delete_enabled and any(s.deletes != 0 for s in ss):
            keys = ", ".join(d.quote(c) for c in pk)
            stmts.append(((f"DELETE FROM {tgt} WHERE ({keys}) IN (SELECT {keys} FROM ({src}) kc_s WHERE "
                           f"{d.quote('__kc_op')} = 'd'{where})"), params))
        non_pk = [c for c in cols if c not in pk]
        if mode == "insert":
            stmts.append((f"INSERT INTO {tgt} ({qcols}) {ups}", params))
        elif mode == "upsert":
            if d.info.kind == "mysql":
                upd = ", ".join(f"{d.quote(c)} = VALUES({d.quote(c)})" for c in (non_pk or pk[:1]))
                stmts.append((f"INSERT INTO {tgt} ({qcols}) {ups} ON DUPLICATE KEY UPDATE {upd}", params))
            else:
                conflict = ", ".join(d.quote(c) for c in pk)
                action = "DO UPDATE SET " + ", ".join(f"{d.quote(c)} = excluded.{d.quote(c)}" for c in non_pk) \
                    if non_pk else "DO NOTHING"
                stmts.append((f"INSERT INTO {tgt} ({qcols}) {ups} ON CONFLICT ({conflict}) {action}", params))
        else:  # update
            if non_pk:
                on = " AND ".join(f"{tgt}.{d.quote(c)} = kc_s.{d.quote(c)}" for c in pk)
                if d.info.kind == "mysql":
                    sets = ", ".join(f"{tgt}.{d.quote(c)} = kc_s.{d.quote(c)}" for c in non_pk)
                    stmts.append(((f"UPDATE {tgt} JOIN ({ups}) kc_s ON {on} SET {sets}"), params))
                else:
                    sets = ", ".join(f"{d.quote(c)} = kc_s.{d.quote(c)}" for c in non_pk)
                    stmts.append((f"UPDATE {tgt} SET {sets} FROM ({ups}) kc_s WHERE {on}", params))
        return stmts

    def _run(self, cur: Any, d: Dialect, stmts: list) -> None:
        for q, params in stmts:
            cur.execute(d.sql(q), params)

    def _apply(self, conn: Any, cur: Any, d: Dialect, table: str, ss: list[_Stage]) -> list[RejectedRecord]:
        """Apply the staged rows of ``table``; on a data error, bisect to the rejected rows."""
        unique = bool(ss[0].pk) and self._unique_across(cur, d, ss)

        def apply_all() -> None:
            self._run(cur, d, self._statements(d, table, ss, None, unique))

        if under_savepoint(cur, d, "kc_all", apply_all) is None:
            return []
        # Bisect over the batch order (only on this failure path).
        pk = ss[0].pk
        cols = [n for n, _ in ss[0].columns]
        src = self._source_sql(d, ss, cols, pk, unique)
        cur.execute(f"SELECT {d.quote('__kc_ord')}, kc_si, {d.quote('__kc_tix')}, {d.quote('__kc_kpart')}, "
                    f"{d.quote('__kc_koff')} FROM ({src}) kc_s ORDER BY {d.quote('__kc_ord')}")
        rows = [(o, ss[si].topics[tix] if tix is not None and tix < len(ss[si].topics) else None, kp, ko)
                for o, si, tix, kp, ko in cur.fetchall()]
        rejected: list[RejectedRecord] = []
        tolerate = self.config.errors_tolerance == "all"

        def attempt(lo: int, hi: int) -> None:
            def apply_range() -> None:
                self._run(cur, d, self._statements(d, table, ss, (rows[lo][0], rows[hi][0]), unique))

            e = under_savepoint(cur, d, "kc_b", apply_range)
            if e is None:
                return
            if lo == hi:
                r = rows[lo]
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else e!r}"
                if not tolerate:
                    raise RecordError(f"JDBC sink: table {table!r} rejected the record: {msg}",
                                      stage="TASK_PUT", topic=r[1], partition=r[2], offset=r[3]) from e
                rejected.append(RejectedRecord(r[1], r[2], r[3], msg))
                return
            mid = (lo + hi) // 2
            attempt(lo, mid)
            attempt(mid + 1, hi)

        if rows:
            attempt(0, len(rows) - 1)
        return rejected

    def _drop_stages(self, d: Dialect, ctx: CommitContext, stages: list[_Stage]) -> None:
        """Drop this batch's staging tables and any left by earlier, crashed attempts of this query."""
        conn = d.connect()
        try:
            cur = conn.cursor()
            names = {s.stage for s in stages}
            app = self._stage_prefix(ctx.app_id, 0)[: -len("0_")]
            if d.info.kind == "sqlite":
                cur.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
                            (len(app), app))
            else:
                cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                            + ("current_schema()" if d.info.kind == "postgresql" else "DATABASE()")
                            + " AND substr(table_name, 1, %s) = %s", (len(app), app))
            for (n,) in cur.fetchall():
                b = n[len(app):].split("_")[0]
                if n in names or (ctx.batch_id is not None and b.isdigit() and int(b) <= ctx.batch_id):
                    cur.execute(f"DROP TABLE IF EXISTS {d.quote(n)}")
            conn.commit()
        finally:
            conn.close()


def under_savepoint(cur: Any, dialect: Dialect, name: str, action: Callable[[], Any]) -> Exception | None:
    """Run ``action()`` under the savepoint ``name``: None when it succeeded; when the database rejected rows (a data
    error of ``dialect``), the error, after rolling back to the savepoint. Any other error propagates."""
    cur.execute(f"SAVEPOINT {name}")
    try:
        action()
        cur.execute(f"RELEASE SAVEPOINT {name}")
    except Exception as e:  # the dialect tells data errors from the rest, which propagate
        if not dialect.is_data_error(e):
            raise
        cur.execute(f"ROLLBACK TO SAVEPOINT {name}")
        return e
    return None
