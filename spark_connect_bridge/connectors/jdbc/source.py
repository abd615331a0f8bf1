"""Confluent's JDBC source connector (``io.confluent.connect.jdbc.JdbcSourceConnector``) over PostgreSQL,
MariaDB/MySQL and SQLite, without its out-of-order-commit data loss.

Records: ``key`` null (as Confluent's), ``value`` a struct of the row's columns, ``topic`` = ``topic.prefix`` +
table name (``topic.prefix`` alone in query mode), ``partition`` the table's index, ``offset`` the row's
incrementing id (timestamp mode: its timestamp in µs; bulk: its ordinal in the read), ``timestamp`` the row's
timestamp column (timestamp modes). Several tables are one stream: the value struct is the union of their columns
(by name; a column a table lacks is null); run one connector per table for exact per-table schemas.

Offsets are Confluent's: partition ``{"table": "<name>"}`` (``{"query": "query"}`` in query mode) and position
``{"incrementing": n}``, ``{"timestamp": ms, "timestamp_nanos": ns}`` or both. A micro-batch reads
``(start, end]`` with ``ORDER BY (timestamp, id)``, so a replayed batch reads the same rows.

**No loss on out-of-order commits.** Confluent's source reads ``id > last`` and loses a row whose transaction
commits after a larger id was read. Here ``end`` is only advanced to a position once no transaction that was
running when that position was observed can still commit a smaller one (see :meth:`_observe_pg`); on
MariaDB/MySQL and SQLite a position must have been visible for ``incrementing.delay.interval.ms`` and timestamps
lag ``timestamp.delay.interval.ms`` behind the database clock.

>>> df = (spark.readStream.format("kconnect")                                   # doctest: +SKIP
...       .option("connector.class", "io.confluent.connect.jdbc.JdbcSourceConnector")
...       .option("connection.url", "jdbc:postgresql://127.0.0.1:5432/shop")
...       .option("mode", "timestamp+incrementing").option("incrementing.column.name", "id")
...       .option("timestamp.column.name", "updated_at").option("table.whitelist", "orders")
...       .option("topic.prefix", "pg-").load())
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...config import CaseInsensitiveValidString, Importance, Range, Type
from ...core.records import no_headers, record_schema
from ...errors import ConfigError, ConfigProblem
from ..base import ReadRange, ReadTask, SourceConnector
from ..offsets import Offsets, parse_partition_key, partition_key
from .dialects import (
    Dialect,
    JdbcConnection,
    PostgresDialect,
    connection_config_def,
    mysql_arrow_schema,
    parse_jdbc_url,
    rows_to_batch,
    with_retries,
)

__all__ = ["JdbcSourceConnector"]

log = logging.getLogger(__name__)

_MODES = ("bulk", "timestamp", "incrementing", "timestamp+incrementing")
_UTC = dt.timezone.utc
_TS, _ID = "__kc_ts", "__kc_id"
TIME_NAME = "org.apache.kafka.connect.data.Time"


def _check(cfg: Any) -> Any:
    mode = (cfg.get("mode") or "").lower()
    if not mode:
        yield ConfigProblem("mode", "Missing required configuration \"mode\": one of " + ", ".join(_MODES))
    if mode in ("incrementing", "timestamp+incrementing") and not cfg.get("incrementing.column.name") \
            and not cfg.get("query"):
        pass  # Confluent then uses the table's auto-increment column; we look it up per table
    if mode in ("timestamp", "timestamp+incrementing") and not cfg.get("timestamp.column.name"):
        yield ConfigProblem("timestamp.column.name", f"Invalid value for configuration timestamp.column.name: "
                                                     f"mode {mode} needs at least one timestamp column")
    if cfg.get("query") and (cfg.get("table.whitelist") or cfg.get("table.blacklist")):
        yield ConfigProblem("query", "query mode and table.whitelist/table.blacklist are mutually exclusive")
    if cfg.get("table.whitelist") and cfg.get("table.blacklist"):
        yield ConfigProblem("table.whitelist", "table.whitelist and table.blacklist are mutually exclusive")


CONFIG_DEF = (
    connection_config_def("Database")
    .define("catalog.pattern", Type.STRING, None, importance=Importance.MEDIUM,
            doc="Catalog of the tables to copy (MySQL: the database).", group="Database")
    .define("schema.pattern", Type.STRING, None, importance=Importance.MEDIUM,
            doc="Schema of the tables to copy (PostgreSQL; default: the current schema).", group="Database")
    .define("table.whitelist", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Tables to copy (all tables of table.types when empty).", group="Database")
    .define("table.include.list", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Alias of table.whitelist.", group="Database")
    .define("table.blacklist", Type.LIST, [], importance=Importance.MEDIUM, doc="Tables not to copy.",
            group="Database")
    .define("table.exclude.list", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Alias of table.blacklist.", group="Database")
    .define("table.types", Type.LIST, ["TABLE"], importance=Importance.LOW,
            doc="Kinds of tables to copy: TABLE, VIEW.", group="Database")
    .define("dialect.name", Type.STRING, "", importance=Importance.LOW,
            doc="Database dialect; chosen from connection.url when empty.", group="Database")
    .define("db.timezone", Type.STRING, "UTC", importance=Importance.MEDIUM,
            doc="Time zone of TIMESTAMP-without-time-zone (DATETIME) values in the database.", group="Database")
    .define("quote.sql.identifiers", Type.STRING, "always", CaseInsensitiveValidString("always", "never"),
            Importance.MEDIUM, "Quote identifiers; 'never' accepts only plain names.", group="Database")
    .define("table.poll.interval.ms", Type.LONG, 60000, Range.at_least(0), Importance.LOW,
            "Confluent: how often to look for new tables. Here the tables are fixed when the query starts "
            "(a new table needs a restart: a stream's schema cannot change).", group="Database")
    .define("mode", Type.STRING, "", CaseInsensitiveValidString("", *_MODES), Importance.HIGH,
            "How rows are detected: bulk, incrementing, timestamp or timestamp+incrementing.", group="Mode")
    .define("incrementing.column.name", Type.STRING, "", importance=Importance.MEDIUM,
            doc="Strictly incrementing column (id); its position is the offset.", group="Mode")
    .define("timestamp.column.name", Type.LIST, [], importance=Importance.MEDIUM,
            doc="Timestamp column(s); several are COALESCE'd in order.", group="Mode")
    .define("timestamp.initial", Type.LONG, None, importance=Importance.LOW,
            doc="Epoch ms to start timestamp modes from; -1: the current time; unset: the epoch.", group="Mode")
    .define("timestamp.delay.interval.ms", Type.LONG, 0, Range.at_least(0), Importance.HIGH,
            "Rows are read only once their timestamp is this much older than the database clock.", group="Mode")
    .define("incrementing.delay.interval.ms", Type.LONG, None, Range.at_least(0), Importance.MEDIUM,
            "MariaDB/MySQL/SQLite: an id is passed only after it has been visible this long (a transaction "
            "holding a smaller id commits within it). Default: 2000 on MariaDB/MySQL, 0 on SQLite (one "
            "writer at a time); PostgreSQL tracks running transactions instead.", group="Mode")
    .define("visibility.wait.ms", Type.LONG, 1000, Range.at_least(0), Importance.LOW,
            "PostgreSQL: how long one trigger waits for running transactions to finish before it passes "
            "rows observed while they ran (the rest comes in a later trigger).", group="Mode")
    .define("validate.non.null", Type.BOOLEAN, True, importance=Importance.LOW,
            doc="Fail when the incrementing or timestamp columns are nullable.", group="Mode")
    .define("query", Type.STRING, "", importance=Importance.MEDIUM,
            doc="Copy the result of this query instead of tables (it is wrapped as a sub-select).",
            group="Mode")
    .define("query.suffix", Type.STRING, "", importance=Importance.LOW,
            doc="Not supported: appending raw SQL is unsafe; must stay empty.", group="Mode")
    .define("transaction.isolation.mode", Type.STRING, "DEFAULT",
            CaseInsensitiveValidString("DEFAULT", "READ_UNCOMMITTED", "READ_COMMITTED", "REPEATABLE_READ",
                                       "SERIALIZABLE", "SQL_SERVER_SNAPSHOT"), Importance.LOW,
            "Accepted for compatibility: every range is read in one REPEATABLE READ snapshot.", group="Mode")
    .define("numeric.mapping", Type.STRING, None,
            CaseInsensitiveValidString("none", "precision_only", "best_fit", "best_fit_eager_double"),
            Importance.LOW, "How NUMERIC/DECIMAL columns map: none/precision_only = Decimal, best_fit = the "
                            "smallest integer or a double.", group="Mode")
    .define("numeric.precision.mapping", Type.BOOLEAN, False, importance=Importance.LOW,
            doc="Deprecated: numeric.mapping=precision_only.", group="Mode")
    .define("timestamp.granularity", Type.STRING, "connect_logical",
            CaseInsensitiveValidString("connect_logical", "nanos_long", "nanos_string", "nanos_iso_datetime_string"),
            Importance.LOW, "Only connect_logical (Spark timestamps, µs) is produced.", group="Mode")
    .define("poll.interval.ms", Type.INT, 5000, Range.at_least(0), Importance.HIGH,
            "Bulk mode: the table is re-read at most once per interval (other modes: use the trigger "
            "interval).", group="Connector")
    .define("batch.max.rows", Type.INT, 100, Range.at_least(1), Importance.LOW,
            "Rows per Arrow batch (at least 10,000 are used: a micro-batch is bounded by "
            "max.records.per.trigger).", group="Connector")
    .define("topic.prefix", Type.STRING, validator=None, importance=Importance.HIGH,
            doc="Prefix of the topic names (table name appended; the topic itself in query mode).",
            group="Connector")
    .check(_check)
    .accept("io.confluent.connect.jdbc.JdbcSourceConnector", group="Accepted (Confluent)", no_effect={
        "date.calendar.system": "dates are proleptic Gregorian here (Spark's and java.time's calendar, "
                                "PROLEPTIC_GREGORIAN); the LEGACY hybrid Julian calendar of dates before 1582-10-15 "
                                "is not reproduced",
        "max.buffer.size": "a micro-batch's size is bounded by batch.max.rows and max.records.per.trigger",
        "poll.linger.ms": "Spark's trigger interval sets when the next micro-batch polls",
        "query.retry.attempts": "a failed query fails the micro-batch; errors.retry.timeout retries it, and a "
                                "restarted query resumes from the Spark checkpoint",
    }, refused={
        "incrementing.column.mapping": "per-table incrementing columns are not implemented; use "
                                       "incrementing.column.name",
        "timestamp.columns.mapping": "per-table timestamp columns are not implemented; use timestamp.column.name",
        "jdbc.credentials.provider.class": "Java credentials providers are not loaded; give connection.user and "
                                           "connection.password (a config provider such as ${file:...} keeps "
                                           "them out of the file)",
        "query.masked": "the masked form of query is not implemented; use query",
    })
)


@dataclass(frozen=True)
class _Table:
    """What executors need to read one source partition (plain values, pickled)."""

    key: str  # partition key text
    name: str | None  # table name (None: query mode)
    topic: str
    index: int
    ts_cols: tuple[str, ...]
    id_col: str | None
    ts_naive: bool  # timestamp column without time zone (interpret in db.timezone)
    columns: tuple[tuple[str, str], ...]  # (column name, arrow type string) as read
    split_col: str | None = None  # bulk mode: integer key a read can be split on (tasks.max > 1)


class JdbcSourceConnector(JdbcConnection, SourceConnector):
    """Copies tables or a query's rows from PostgreSQL, MariaDB/MySQL or SQLite (Confluent's JDBC source)."""

    kafka_class = "io.confluent.connect.jdbc.JdbcSourceConnector"
    config_def = CONFIG_DEF

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        if config.get("query.suffix"):
            raise ConfigError([ConfigProblem("query.suffix", "Invalid value for configuration query.suffix: raw "
                                                             "SQL suffixes are not supported (they would be pasted "
                                                             "into statements); leave it empty")])
        self._info = parse_jdbc_url(config.connection_url, config.get("connection.user"),
                                    config.get("connection.password"))
        self._mode = config.mode
        self._tables: list[_Table] | None = None
        self._arrow_schema: Any = None
        # Driver-only visibility state (see _observe_pg): candidates not yet safe, the best safe one.
        self._pending: list[tuple[dict, Any]] = []
        self._time_cols: set[str] = set()

    def _retry(self, fn: Any, what: str) -> Any:
        return with_retries(fn, self._dialect(), timeout_ms=max(self.config.errors_retry_timeout,
                                                                 (self.config.connection_attempts - 1)
                                                                 * self.config.connection_backoff_ms),
                            max_delay_ms=self.config.errors_retry_delay_max_ms, what=what)

    # -- discovery ---------------------------------------------------------------------------------
    def _discover(self) -> list[_Table]:
        if self._tables is not None:
            return self._tables
        d = self._dialect()
        prefix = self.config.topic_prefix or ""
        ts_cols = tuple(self.config.timestamp_column_name) if self._mode.startswith("timestamp") else ()
        conn = self._open(d.connect)
        try:
            if self.config.get("query"):
                names: list[str | None] = [None]
            else:
                names = list(self._table_names(conn, d))
                if not names:
                    raise ConfigError([ConfigProblem("table.whitelist", f"no table to copy in "
                                                                        f"{d.info.describe()}")])
            tables = []
            for i, n in enumerate(names):
                schema = self._result_schema(conn, d, n)
                id_col = self._id_col(conn, d, n, schema) if "incrementing" in self._mode else None
                for c in ts_cols + ((id_col,) if id_col else ()):
                    if c not in schema.names:
                        raise ConfigError([ConfigProblem("timestamp.column.name" if c in ts_cols
                                                         else "incrementing.column.name",
                                                         f"column {c!r} does not exist in "
                                                         f"{n or 'the query result'}; columns: {schema.names}")])
                if self.config.validate_non_null and n is not None:
                    self._validate_non_null(conn, d, n, ts_cols + ((id_col,) if id_col else ()))
                naive = d.info.kind != "postgresql" or any(c in self._naive_cols for c in ts_cols)
                key = partition_key({"query": "query"} if n is None else {"table": n})
                split = self._split_col(conn, d, n, schema) if self._mode == "bulk" and n is not None and \
                    self.config.tasks_max > 1 else None
                tables.append(_Table(key, n, prefix if n is None else prefix + n, i, ts_cols, id_col, naive,
                                     tuple((f.name, str(f.type)) for f in schema), split))
                self._merge_schema(schema)
        finally:
            conn.close()
        self._tables = tables
        return tables

    def _table_names(self, conn: Any, d: Dialect) -> list[str]:
        white = self.config.table_whitelist or self.config.table_include_list
        black = set(self.config.table_blacklist or self.config.table_exclude_list)
        if white:
            return sorted(white)
        types = [t.upper() for t in self.config.table_types]
        cur = conn.cursor()
        if d.info.kind == "sqlite":
            kinds = [k for k, t in (("table", "TABLE"), ("view", "VIEW")) if t in types]
            cur.execute(f"SELECT name FROM sqlite_master WHERE type IN ({','.join('?' * len(kinds))}) "
                        "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_\\_k%' ESCAPE '\\'", kinds)
        else:
            kinds = [k for k, t in (("BASE TABLE", "TABLE"), ("VIEW", "VIEW")) if t in types]
            schema = self.config.get("schema.pattern") if d.info.kind == "postgresql" else \
                self.config.get("catalog.pattern")
            where = "table_schema = %s" if schema else \
                ("table_schema = current_schema()" if d.info.kind == "postgresql" else "table_schema = DATABASE()")
            cur.execute(f"SELECT table_name FROM information_schema.tables WHERE {where} AND table_type IN "
                        f"({','.join(['%s'] * len(kinds))})", ([schema] if schema else []) + kinds)
        names = sorted(r[0] for r in cur.fetchall() if r[0] not in black and not r[0].startswith("__kc"))
        cur.close()
        return names

    def _from(self, d: Dialect, name: str | None) -> str:
        if name is None:
            return f"({self.config['query']}) kc_q"
        return d.table(name)

    def _result_schema(self, conn: Any, d: Dialect, name: str | None) -> Any:
        import pyarrow as pa

        self._naive_cols: set[str] = getattr(self, "_naive_cols", set())

        sql = f"SELECT * FROM {self._from(d, name)} WHERE 1 = 0"
        if isinstance(d, PostgresDialect):
            with d.adbc_read(sql) as reader:
                raw = reader.read_all().schema
            self._naive_cols |= {f.name for f in raw if _is_ts(f.type) and f.type.tz is None}
            self._time_cols |= {f.name for f in raw if pa.types.is_time(f.type)}
            return pa.schema([pa.field(f.name, self._pg_type(f)) for f in raw])
        cur = conn.cursor()
        if d.info.kind == "mysql":
            cur.execute(sql)
            s = mysql_arrow_schema(cur.description)
            cur.fetchall()
            cur.close()
            self._time_cols |= {f.name for f in s if pa.types.is_duration(f.type)}
            return pa.schema([pa.field(f.name, pa.timestamp("us", tz="UTC") if _is_ts(f.type) else
                                       pa.int32() if pa.types.is_duration(f.type) else
                                       self._numeric(f.type.precision, f.type.scale)
                                       if pa.types.is_decimal(f.type) else f.type) for f in s])
        # SQLite: declared types of a table; a query's column types come from its first rows.
        if name is not None:
            cur.execute("SELECT name, type FROM pragma_table_info(?)", (name,))
            return pa.schema([pa.field(n, self._sqlite_numeric(t) or _sqlite_type(t)) for n, t in cur.fetchall()])
        cur.execute(f"SELECT * FROM {self._from(d, name)} LIMIT 100")
        rows = cur.fetchall()
        names = [c[0] for c in cur.description]
        cols: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in names]
        return pa.schema([pa.field(n, pa.array(list(c)).type if rows and any(v is not None for v in c)
                                   else pa.string()) for n, c in zip(names, cols)])

    def _pg_type(self, f: Any) -> Any:
        import pyarrow as pa

        t = f.type
        md = f.metadata or {}
        pgt = md.get(b"POSTGRESQL:type", b"").decode()
        if pgt == "numeric":
            typmod = int(md.get(b"POSTGRESQL:typmod", b"-1") or -1)
            p, s = (((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF) if typmod >= 4 else (None, None)
            return self._numeric(p, s)
        if isinstance(t, pa.ExtensionType) or pgt in ("json", "jsonb", "uuid"):
            return pa.string()
        if _is_ts(t):
            return pa.timestamp("us", tz="UTC")
        if pa.types.is_time(t):
            return pa.int32()
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_list(t) or pa.types.is_struct(t) or pa.types.is_interval(t) or pa.types.is_duration(t):
            return pa.string()
        return t

    def _sqlite_numeric(self, decl: str) -> Any:
        """SQLite DECIMAL/NUMERIC(p, s) columns under an explicit ``numeric.mapping`` (without one they stay
        doubles, as before: SQLite stores them as REAL or INTEGER)."""
        import re

        if not (self.config.get("numeric.mapping") or self.config.numeric_precision_mapping):
            return None
        d = (decl or "").upper()
        if "DEC" not in d and "NUM" not in d:
            return None
        m = re.search(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", d)
        return self._numeric(int(m.group(1)), int(m.group(2) or 0)) if m else self._numeric(None, None)

    def _numeric(self, p: int | None, s: int | None) -> Any:
        import pyarrow as pa

        mapping = (self.config.get("numeric.mapping") or
                   ("precision_only" if self.config.numeric_precision_mapping else "none")).lower()
        if mapping.startswith("best_fit"):
            if p is not None and s == 0 and p <= 18:
                return pa.int8() if p <= 2 else pa.int16() if p <= 4 else pa.int32() if p <= 9 else pa.int64()
            if p is None or s is None or mapping == "best_fit_eager_double" or p <= 15:
                return pa.float64()
        if p is None or p > 38:
            return pa.decimal128(38, 10)
        return pa.decimal128(p, s)

    def _id_col(self, conn: Any, d: Dialect, name: str | None, schema: Any) -> str:
        col = self.config.incrementing_column_name
        if col:
            return col
        if name is None:
            raise ConfigError([ConfigProblem("incrementing.column.name", "query mode needs "
                                                                         "incrementing.column.name")])
        cur = conn.cursor()
        if d.info.kind == "postgresql":
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s AND "
                        "(column_default LIKE 'nextval(%%' OR is_identity = 'YES') ORDER BY ordinal_position",
                        (name.split(".")[-1],))
        elif d.info.kind == "mysql":
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND "
                        "table_name = %s AND extra LIKE '%%auto_increment%%'", (name,))
        else:
            cur.execute("SELECT name FROM pragma_table_info(?) WHERE pk = 1 AND upper(type) = 'INTEGER'",
                        (name,))
        rows = cur.fetchall()
        cur.close()
        if len(rows) != 1:
            raise ConfigError([ConfigProblem("incrementing.column.name", f"table {name} has no single "
                                                                         "auto-increment column; set "
                                                                         "incrementing.column.name")])
        return rows[0][0]

    def _split_col(self, conn: Any, d: Dialect, name: str, schema: Any) -> str | None:
        """Bulk mode: the integer column whose value ranges split one table's read over tasks:
        ``incrementing.column.name`` when set, else a single-column integer primary key (None: not split)."""
        import pyarrow as pa

        col = self.config.incrementing_column_name
        if not col:
            cur = conn.cursor()
            bare = name.split(".")[-1]
            if d.info.kind == "sqlite":
                cur.execute("SELECT name FROM pragma_table_info(?) WHERE pk > 0", (bare,))
            else:
                where = "table_schema = current_schema()" if d.info.kind == "postgresql" else \
                    "table_schema = DATABASE()"
                cur.execute(f"SELECT k.column_name FROM information_schema.table_constraints c JOIN "
                            f"information_schema.key_column_usage k ON k.constraint_name = c.constraint_name AND "
                            f"k.table_schema = c.table_schema AND k.table_name = c.table_name WHERE "
                            f"c.constraint_type = 'PRIMARY KEY' AND c.{where} AND c.table_name = %s", (bare,))
            rows = cur.fetchall()
            cur.close()
            col = rows[0][0] if len(rows) == 1 else ""
        if col in schema.names and pa.types.is_integer(schema.field(col).type):
            return col
        return None

    def _validate_non_null(self, conn: Any, d: Dialect, name: str, cols: tuple[str, ...]) -> None:
        cur = conn.cursor()
        bare = name.split(".")[-1]
        if d.info.kind == "sqlite":
            cur.execute("SELECT name, \"notnull\" OR pk FROM pragma_table_info(?)", (bare,))
            nullable = {n for n, nn in cur.fetchall() if not nn}
        else:
            where = "table_schema = current_schema()" if d.info.kind == "postgresql" else \
                "table_schema = DATABASE()"
            cur.execute(f"SELECT column_name, is_nullable FROM information_schema.columns WHERE {where} AND "
                        "table_name = %s", (bare,))
            nullable = {r[0] for r in cur.fetchall() if r[1] == "YES"}
        cur.close()
        bad = [c for c in cols if c in nullable]
        # Confluent: several COALESCE'd timestamp columns may be nullable as long as the last one is not.
        ts = self.config.timestamp_column_name
        if len(ts) > 1:
            bad = [c for c in bad if c not in ts[:-1]]
        if bad:
            raise ConfigError([ConfigProblem("validate.non.null", f"Cannot make incremental queries using "
                                                                  f"nullable columns {bad} of table {name}; "
                                                                  "make them NOT NULL or set "
                                                                  "validate.non.null=false")])

    def _merge_schema(self, schema: Any) -> None:
        import pyarrow as pa

        if self._arrow_schema is None:
            self._arrow_schema = schema
            return
        fields = list(self._arrow_schema)
        names = [f.name for f in fields]
        for f in schema:
            if f.name not in names:
                fields.append(f)
            elif fields[names.index(f.name)].type != f.type:
                fields[names.index(f.name)] = pa.field(f.name, pa.string())
        self._arrow_schema = pa.schema(fields)

    # -- schema ------------------------------------------------------------------------------------
    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

        self._discover()
        time_cols = self._time_columns()
        fields = []
        for f in self._arrow_schema:
            if f.name in time_cols:
                fields.append(StructField(f.name, IntegerType(), True, {"connect.name": TIME_NAME}))
            else:
                fields.append(StructField(f.name, from_arrow_type(f.type), True))
        return record_schema(BinaryType(), StructType(fields))

    def _time_columns(self) -> set[str]:
        # TIME columns were mapped to int32 milliseconds (Connect Time).
        return self._time_cols

    # -- offsets -----------------------------------------------------------------------------------
    def _initial_position(self) -> dict:
        pos: dict[str, Any] = {}
        if self._mode == "bulk":
            return {"poll": 0}
        if "incrementing" in self._mode:
            pos["incrementing"] = -1
        if self._mode.startswith("timestamp"):
            init = self.config.get("timestamp.initial")
            us = 0 if init is None else (int(time.time() * 1e6) if init == -1 else init * 1000)
            pos.update(_ts_pos(us))
        return pos

    def initial_offsets(self) -> Offsets:
        return {t.key: self._initial_position() for t in self._discover()}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        tables = self._discover()
        start = {t.key: start.get(t.key) or self._initial_position() for t in tables}
        if self._mode == "bulk":
            rnd = int(time.time() * 1000) // max(1, self.config.poll_interval_ms) + 1
            end = {k: {"poll": max(int(v.get("poll", 0)), rnd)} for k, v in start.items()}
            if until is not None:
                end = {k: until.get(k, v) for k, v in end.items()}
            return end
        per_table = None if max_records is None else max(1, -(-max_records // len(tables)))
        d = self._dialect()
        wait_ms = self.config.visibility_wait_ms
        if d.info.kind != "postgresql":
            wait_ms = max(wait_ms, self._incr_delay_ms(d) + 100)
        deadline = time.monotonic() + wait_ms / 1000.0
        safe = None
        held: list[Any] = []  # one control connection for the whole call (a failed one is dropped, then retried)

        def on_conn(fn: Any) -> Any:
            if not held:
                held.append(d.connect())
            try:
                return fn(held[0])
            except BaseException:
                _close_quietly(held.pop())
                raise

        try:
            while True:
                cand, guard = self._retry(lambda: on_conn(lambda c: self._observe(c, d, tables, start, per_table)),
                                          "latest offsets")
                self._pending.append((cand, guard))
                self._pending = self._pending[-32:]
                got = self._retry(lambda: on_conn(lambda c: self._promote(c, d)), "visibility check")
                safe = got if got is not None else safe
                if (safe is not None and safe is cand) or time.monotonic() >= deadline:
                    break
                time.sleep(0.05 if d.info.kind == "postgresql" else
                           min(0.25, max(0.01, deadline - time.monotonic())))
        finally:
            if held:
                _close_quietly(held.pop())
        end = dict(start)
        if safe is not None:
            for k, pos in safe.items():
                if _pos_key(pos) > _pos_key(end[k]):
                    end[k] = pos
        if until is not None:
            end = {k: (until[k] if k in until and _pos_key(until[k]) < _pos_key(v) else v) for k, v in end.items()}
        return end

    def _incr_delay_ms(self, d: Dialect) -> int:
        v = self.config.get("incrementing.delay.interval.ms")
        if v is not None:
            return v
        return 2000 if d.info.kind == "mysql" else 0

    def _promote(self, conn: Any, d: Dialect) -> dict | None:
        """The newest pending candidate that is now safe (dropping it and older ones), or None."""
        if d.info.kind == "postgresql":
            conn.autocommit = True
            ok = [self._pg_finished(conn, g) for _, g in self._pending]
        else:
            now = time.monotonic()
            ok = [now - g >= self._incr_delay_ms(d) / 1000.0 for _, g in self._pending]
        best = None
        for i in range(len(ok) - 1, -1, -1):
            if ok[i]:
                best = self._pending[i][0]
                self._pending = self._pending[i + 1:]
                break
        return best

    # PostgreSQL: a position M observed under MVCC snapshot S may be passed once every transaction that could
    # still commit a smaller position has ended. Those are (a) the transactions S saw as running (S's xip list:
    # their rows are invisible to S whatever ids/timestamps they hold) and (b) transactions without an xid yet
    # (a nextval() or now() taken before their first write), which pg_stat_activity lists by (pid, xact_start);
    # we read it in the same transaction, right after S. A transaction that starts after S draws ids from the
    # sequence after M was drawn, and stamps now() later than M's timestamp, so it cannot go below M. Hence:
    # candidate M is safe when none of S's running xids is still 'in progress' and none of those sessions is
    # still in the same transaction. This bounds every read by the oldest transaction that was running, like
    # the snapshot xmin, but per observation, and waits only for transactions of this database.
    def _observe(self, conn: Any, d: Dialect, tables: list[_Table], start: dict, limit: int | None
                 ) -> tuple[dict, Any]:
        cur = conn.cursor()
        guard: Any
        if d.info.kind == "postgresql":
            conn.autocommit = True
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur.execute("SELECT pg_current_snapshot()::text, clock_timestamp()")
            snap, now = cur.fetchone()
            _xmin, _xmax, xip = snap.split(":")
            cur.execute("SELECT a.pid, a.xact_start::text, a.backend_xid::text, a.datname = current_database() "
                        "FROM pg_stat_activity a WHERE a.xact_start IS NOT NULL AND a.pid <> pg_backend_pid()")
            acts = cur.fetchall()
            other_db = {x for _, _, x, ours in acts if x and not ours}
            guard = ([x for x in xip.split(",") if x and x not in other_db],
                     [(p, s) for p, s, _, ours in acts if ours])
            now_us = _to_us(now)
        else:
            if d.info.kind == "mysql":
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cur.execute("SELECT UTC_TIMESTAMP(6)")
                now_us = _to_us(cur.fetchone()[0].replace(tzinfo=_UTC))
            else:
                cur.execute("BEGIN")
                now_us = int(time.time() * 1e6)
            guard = time.monotonic()
        ts_upper = now_us - self.config.timestamp_delay_interval_ms * 1000
        cand = {}
        for t in tables:
            cand[t.key] = self._max_position(cur, d, t, start[t.key], limit, ts_upper) or start[t.key]
        cur.execute("ROLLBACK")
        return cand, guard

    @staticmethod
    def _pg_finished(conn: Any, guard: Any) -> bool:
        xids, sessions = guard
        cur = conn.cursor()
        if xids:
            cur.execute("SELECT count(*) FROM unnest(%s::text[]) x WHERE pg_xact_status(x::xid8) = 'in progress'",
                        (xids,))
            if cur.fetchone()[0]:
                return False
        if sessions:
            cur.execute("SELECT count(*) FROM pg_stat_activity a JOIN unnest(%s::int[], %s::text[]) s(pid, xs) "
                        "ON a.pid = s.pid AND a.xact_start::text = s.xs",
                        ([p for p, _ in sessions], [s for _, s in sessions]))
            if cur.fetchone()[0]:
                return False
        return True

    def _pos_exprs(self, d: Dialect, t: _Table) -> tuple[str | None, str | None]:
        ts = None
        if t.ts_cols:
            cols = [d.quote(c) for c in t.ts_cols]
            ts = cols[0] if len(cols) == 1 else f"COALESCE({', '.join(cols)})"
            if d.info.kind == "sqlite":
                ts = f"strftime('%Y-%m-%d %H:%M:%f', {ts})"
        return ts, (d.quote(t.id_col) if t.id_col else None)

    def _ts_param(self, d: Dialect, t: _Table, us: int) -> Any:
        instant = dt.datetime(1970, 1, 1, tzinfo=_UTC) + dt.timedelta(microseconds=us)
        if d.info.kind == "postgresql" and not t.ts_naive:
            return instant
        from zoneinfo import ZoneInfo

        local = instant.astimezone(ZoneInfo(self.config.db_timezone)).replace(tzinfo=None)
        if d.info.kind == "sqlite":
            return local.strftime("%Y-%m-%d %H:%M:%S.") + f"{local.microsecond // 1000:03d}"
        return local

    def _range_where(self, d: Dialect, t: _Table, start: dict | None, end: dict | None) -> tuple[str, list]:
        """``(start, end]`` over (timestamp, id) as portable SQL with bound parameters."""
        ts, idc = self._pos_exprs(d, t)
        conds, params = [], []
        p = "{p}"
        for bound, op_ts, op_id in ((start, ">", ">"), (end, "<", "<=")):
            if bound is None:
                continue
            if ts and idc:
                v = self._ts_param(d, t, _pos_us(bound))
                conds.append(f"({ts} {op_ts} {p} OR ({ts} = {p} AND {idc} {op_id} {p}))")
                params += [v, v, int(bound["incrementing"])]
            elif ts:
                conds.append(f"{ts} {'>' if op_ts == '>' else '<='} {p}")
                params.append(self._ts_param(d, t, _pos_us(bound)))
            elif idc:
                conds.append(f"{idc} {op_id} {p}")
                params.append(int(bound["incrementing"]))
        return (" AND ".join(conds) or "1 = 1"), params

    def _order(self, d: Dialect, t: _Table, desc: bool = False) -> str:
        ts, idc = self._pos_exprs(d, t)
        s = " DESC" if desc else ""
        return ", ".join(f"{c}{s}" for c in (ts, idc) if c)

    def _max_position(self, cur: Any, d: Dialect, t: _Table, start: dict, limit: int | None,
                      ts_upper_us: int) -> dict | None:
        ts, idc = self._pos_exprs(d, t)
        where, params = self._range_where(d, t, start, None)
        if ts:
            where += " AND " + f"{ts} <= {{p}}"
            params.append(self._ts_param(d, t, ts_upper_us))
        sel = ", ".join(f"{c} AS {n}" for c, n in ((ts, _TS), (idc, _ID)) if c)
        inner = f"SELECT {sel} FROM {self._from(d, t.name)} WHERE {where}"
        if limit is not None:
            outer_order = ", ".join(f"{n} DESC" for c, n in ((ts, _TS), (idc, _ID)) if c)
            q = f"SELECT * FROM ({inner} ORDER BY {self._order(d, t)} LIMIT {int(limit)}) kc_m " \
                f"ORDER BY {outer_order} LIMIT 1"
        else:
            q = f"{inner} ORDER BY {self._order(d, t, desc=True)} LIMIT 1"
        cur.execute(d.sql(q), params)
        row = cur.fetchone()
        if row is None:
            return None
        pos: dict[str, Any] = {}
        i = 0
        if ts:
            v = row[0]
            if isinstance(v, str):  # SQLite text timestamps (db.timezone wall time)
                v = dt.datetime.strptime(v, "%Y-%m-%d %H:%M:%S.%f")
            if isinstance(v, dt.datetime) and v.tzinfo is None:
                from zoneinfo import ZoneInfo

                v = v.replace(tzinfo=ZoneInfo(self.config.db_timezone))
            pos.update(_ts_pos(_to_us(v)))
            i = 1
        if idc:
            pos["incrementing"] = int(row[i])
        return pos

    def lag(self, current: Offsets) -> int | None:
        return None

    # -- planning ----------------------------------------------------------------------------------
    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        """Changed tables round-robin over ``tasks.max`` tasks; beyond Kafka, when there are fewer tables
        than tasks, a table's range is split into key ranges (id values, or timestamp spans) so one large
        initial load is read in parallel."""
        tables = {t.key: t for t in self._discover()}
        ranges = [ReadRange(parse_partition_key(k), start.get(k), v) for k, v in end.items()
                  if start.get(k) != v and k in tables]
        n = self.config.tasks_max
        if ranges and len(ranges) < n:
            per = max(1, n // len(ranges))
            split: list[ReadRange] = []
            for r in ranges:
                split += self._split_bulk(r, tables[partition_key(r.partition)], per) if self._mode == "bulk" \
                    else self._split(r, per)
            ranges = split
        n = max(1, min(n, len(ranges)))
        groups: list[list[ReadRange]] = [[] for _ in range(n)]
        for i, r in enumerate(ranges):
            groups[i % n].append(r)
        return [ReadTask(i, tuple(g)) for i, g in enumerate(groups) if g]

    def _split_bulk(self, r: ReadRange, t: _Table, parts: int) -> list[ReadRange]:
        """A bulk read split into ``parts`` value ranges of the table's integer key (``split`` in the range's
        end: its index, and the bounds ``(lo, hi]``, None meaning unbounded), cut between the key's current
        min and max. Every row falls in exactly one range whatever the table holds when the ranges are read."""
        if parts <= 1 or t.split_col is None:
            return [r]
        d = self._dialect()
        conn = self._open(d.connect)
        try:
            cur = conn.cursor()
            k = d.quote(t.split_col)
            cur.execute(f"SELECT min({k}), max({k}) FROM {self._from(d, t.name)}")
            lo, hi = cur.fetchone()
            cur.close()
        finally:
            conn.close()
        if lo is None or int(hi) - int(lo) < parts:
            return [r]
        cuts = [None] + [int(lo) + (int(hi) - int(lo)) * i // parts for i in range(1, parts)] + [None]
        return [ReadRange(r.partition, r.start, {**r.end, "split": [i, cuts[i], cuts[i + 1]]})
                for i in range(parts)]

    def _split(self, r: ReadRange, parts: int) -> list[ReadRange]:
        s = r.start or self._initial_position()
        if parts <= 1:
            return [r]
        if self._mode == "incrementing":
            lo, hi = int(s["incrementing"]), int(r.end["incrementing"])
            if hi - lo < parts * 1000:
                return [r]
            cuts = [lo + (hi - lo) * i // parts for i in range(1, parts)]
            bounds: list[dict[str, Any]] = [{"incrementing": c} for c in cuts]
        else:
            lo, hi = _pos_us(s), _pos_us(r.end)
            if hi - lo < parts * 1000:
                return [r]
            # (ts, +max id) so that rows sharing a timestamp stay in one range.
            bounds = []
            for i in range(1, parts):
                b = _ts_pos(lo + (hi - lo) * i // parts)
                if "incrementing" in self._mode:
                    b["incrementing"] = 2 ** 63 - 1
                bounds.append(b)
        return [ReadRange(r.partition, start, end) for start, end in zip([r.start, *bounds], [*bounds, r.end])]

    # -- executor ----------------------------------------------------------------------------------
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import pyarrow as pa

        t = next(t for t in self._discover() if t.key == partition_key(rng.partition))
        d = self._dialect()
        target = self._arrow_schema
        read_schema = pa.schema([pa.field(c, parse_sql_type(ty)) for c, ty in t.columns])
        # PostgreSQL NUMERIC(p <= 18, s) columns travel as their unscaled bigint (value * 10^s, exact): ADBC hands
        # NUMERIC over as decimal text, which costs it and Arrow's cast back far more (~0.4 s of Python CPU per
        # million rows, measured) than the server's multiplication (~0.1 s).
        scaled = {f.name for f in read_schema if d.info.kind == "postgresql" and pa.types.is_decimal(f.type)
                  and 0 <= f.type.scale <= f.type.precision <= 18}
        cols = ", ".join(f"({d.quote(c)} * 1{'0' * read_schema.field(c).type.scale})::int8 AS {d.quote(c)}"
                         if c in scaled else d.quote(c) for c, _ in t.columns)
        base = 0
        if self._mode == "bulk":
            where, params, order = "1 = 1", [], self._bulk_order(t)
            if "split" in (rng.end or {}):
                i, lo, hi = rng.end["split"]
                assert t.split_col is not None, "only a table with a split column has split ranges (_split_bulk)"
                k = d.quote(t.split_col)
                conds = [f"{k} > {{p}}"] * (lo is not None) + [f"{k} <= {{p}}"] * (hi is not None)
                where, params = " AND ".join(conds), [v for v in (lo, hi) if v is not None]
                base = int(i) << 40  # offsets (ordinals) of split reads do not collide
        else:
            where, params = self._range_where(d, t, rng.start, rng.end)
            order = " ORDER BY " + self._order(d, t)
        sql = f"SELECT {cols} FROM {self._from(d, t.name)} WHERE {where}{order}"
        rows = max(10_000, self.config.batch_max_rows)
        seq = base

        def gen() -> Iterator[Any]:
            for raw in d.read_arrow(sql, params, rows):
                if isinstance(raw, list):  # SQLite rows
                    raw = rows_to_batch(raw, pa.schema([pa.field(f.name, _sqlite_wire(f.type))
                                                        for f in read_schema]))
                yield raw

        for raw in self._retry(lambda: _first_then(gen()), f"read {t.name or 'query'}"):
            batch = self._convert(raw, read_schema, scaled)
            n = batch.num_rows
            if n == 0:
                continue
            yield self._records(batch, t, target, seq)
            seq += n

    def _bulk_order(self, t: _Table) -> str:
        return ""

    def _convert(self, raw: Any, read_schema: Any, scaled: set[str] | frozenset[str] = frozenset()) -> Any:
        """Database Arrow types → the declared ones (numeric text → decimal, naive → UTC, time → ms); columns in
        ``scaled`` hold decimals' unscaled integers."""
        import pyarrow as pa
        import pyarrow.compute as pc

        tz = self.config.db_timezone
        arrays = []
        for f in read_schema:
            a = raw.column(raw.schema.get_field_index(f.name))
            if isinstance(a.type, pa.ExtensionType):
                a = a.storage
            if f.name in scaled:  # the same 128-bit unscaled integers, read with the column's scale
                a = pc.cast(a, pa.decimal128(19, 0)).view(f.type)
            elif pa.types.is_timestamp(f.type):
                if pa.types.is_string(a.type):
                    a = pc.cast(a, pa.timestamp("us"))
                if a.type.tz is None:
                    a = pc.assume_timezone(a.cast(pa.timestamp("us")), tz, ambiguous="earliest",
                                           nonexistent="earliest")
                a = a.cast(pa.timestamp("us", tz="UTC"))
            elif f.name in self._time_columns() or (pa.types.is_int32(f.type) and
                                                     (pa.types.is_time(a.type) or pa.types.is_duration(a.type))):
                a = pc.divide(a.cast(pa.int64()) if pa.types.is_duration(a.type) else
                              a.cast(pa.time64("us")).cast(pa.int64()), 1000).cast(pa.int32())
            elif pa.types.is_decimal(f.type) and pa.types.is_string(a.type):
                a = pc.cast(a, pa.decimal128(38, f.type.scale)).cast(f.type, safe=False)
            elif a.type != f.type:
                a = pc.cast(a, f.type)
            arrays.append(a)
        return pa.RecordBatch.from_arrays(arrays, schema=read_schema)

    def _records(self, batch: Any, t: _Table, target: Any, seq: int) -> Any:
        import numpy as np
        import pyarrow as pa

        n = batch.num_rows
        cols = []
        for f in target:
            if f.name in batch.schema.names:
                a = batch.column(batch.schema.get_field_index(f.name))
                cols.append(a if a.type == f.type else a.cast(f.type))
            else:
                cols.append(pa.nulls(n, f.type))
        value = pa.StructArray.from_arrays(cols, fields=list(target))
        if t.id_col:
            offset = batch.column(batch.schema.get_field_index(t.id_col)).cast(pa.int64())
        elif t.ts_cols:
            offset = self._ts_col(batch, t).cast(pa.int64())
        else:
            offset = pa.array(np.arange(seq, seq + n, dtype=np.int64))
        ts = self._ts_col(batch, t) if t.ts_cols else pa.nulls(n, pa.timestamp("us", tz="UTC"))
        return pa.RecordBatch.from_arrays(
            [pa.nulls(n, pa.binary()), value, pa.repeat(pa.scalar(t.topic, pa.string()), n),
             pa.array(np.full(n, t.index, dtype=np.int32)), offset, ts, no_headers(n)],
            names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])

    @staticmethod
    def _ts_col(batch: Any, t: _Table) -> Any:
        import pyarrow.compute as pc

        cols = [batch.column(batch.schema.get_field_index(c)) for c in t.ts_cols]
        return cols[0] if len(cols) == 1 else pc.coalesce(*cols)


def _close_quietly(conn: Any) -> None:
    """Close a control connection that may already be broken (its error is the one being reported)."""
    try:
        conn.close()
    except Exception as e:  # noqa: BLE001 - the caller is already handling the failure that broke it
        log.debug("closing a failed connection: %s", type(e).__name__)


def _first_then(it: Iterator[Any]) -> Iterator[Any]:
    """Start ``it`` (connect + execute happen at the first item) so that retries cover the connection."""
    try:
        first = next(it)
    except StopIteration:
        return iter(())

    def chain() -> Iterator[Any]:
        yield first
        yield from it

    return chain()


def _is_ts(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_timestamp(t)


def _sqlite_type(decl: str) -> Any:
    import pyarrow as pa

    d = (decl or "").upper()
    if "INT" in d:
        return pa.int64()
    if any(k in d for k in ("CHAR", "CLOB", "TEXT")):
        return pa.string()
    if "BLOB" in d:
        return pa.binary()
    if any(k in d for k in ("REAL", "FLOA", "DOUB")):
        return pa.float64()
    if "DATETIME" in d or "TIMESTAMP" in d:
        return pa.timestamp("us", tz="UTC")
    if "DATE" in d:
        return pa.date32()
    if "BOOL" in d:
        return pa.bool_()
    if "DEC" in d or "NUM" in d:
        return pa.float64()
    return pa.string()


def _sqlite_wire(t: Any) -> Any:
    """How SQLite hands a declared type over (text dates and timestamps)."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return pa.string()
    if pa.types.is_boolean(t):
        return pa.int64()
    if pa.types.is_decimal(t) or t in (pa.int8(), pa.int16(), pa.int32()):
        return pa.float64()  # numeric.mapping of a DECIMAL/NUMERIC column: REAL or INTEGER values, cast after
    return t


def parse_sql_type(s: str) -> Any:
    import pyarrow as pa

    simple = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "bool": pa.bool_(), "string": pa.string(),
              "binary": pa.binary(), "date32[day]": pa.date32(), "timestamp[us, tz=UTC]": pa.timestamp("us", "UTC")}
    if s in simple:
        return simple[s]
    if s.startswith("decimal128("):
        p, sc = s[len("decimal128("):-1].split(",")
        return pa.decimal128(int(p), int(sc))
    return pa.string()


def _to_us(v: dt.datetime) -> int:
    delta = v - dt.datetime(1970, 1, 1, tzinfo=_UTC)
    return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds


def _ts_pos(us: int) -> dict[str, int]:
    """Confluent's timestamp offset: epoch milliseconds plus the nanoseconds within the second."""
    return {"timestamp": us // 1000, "timestamp_nanos": (us % 1_000_000) * 1000}


def _pos_us(pos: dict) -> int:
    return (int(pos["timestamp"]) // 1000) * 1_000_000 + int(pos.get("timestamp_nanos", 0)) // 1000


def _pos_key(pos: dict) -> tuple:
    if "poll" in pos:
        return (int(pos["poll"]),)
    return (_pos_us(pos) if "timestamp" in pos else 0, int(pos.get("incrementing", -1)))
