"""Connections to a MySQL or MariaDB server and the SQL the connector runs: the catalog, the binlog's files and
position, server-side listings of binlog events, consistent snapshots.

Every connection is a pymysql connection in UTC (``time_zone = '+00:00'``, so TIMESTAMP values read as UTC) with
``utf8mb4``. Connection failures are retried with Kafka's backoff (``errors.retry.timeout``,
``errors.retry.delay.max.ms``) through :func:`~spark_connect_bridge.core.retry.retry_call`; a refused login fails
at once. The password is never part of a message.

>>> with Session(settings) as session:                                              # doctest: +SKIP
...     session.binlog_position()
BinlogPosition(file='mysql-bin.000002', pos=1234, gtids='0-1-42')
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from ...core.retry import retry_call
from ...errors import ConnectError
from ..cdc.layout import Layout, build_layout
from ..cdc.types import TypeSpec
from .config import Settings
from .types import source_column_type, type_spec

__all__ = ["Session", "BinlogPosition", "pymysql_module", "INSTALL_HINT"]

log = logging.getLogger(__name__)

INSTALL_HINT = "MySQL/MariaDB CDC needs pymysql and mysql-replication: pip install 'spark_connect_bridge[mysql]'"
#: pymysql error codes of a refused login: access denied, unknown database, auth plugin
_LOGIN_ERRORS = (1044, 1045, 1049, 1698)


def pymysql_module() -> Any:
    try:
        import pymysql
    except ImportError as e:  # pragma: no cover - the extra is installed in tests
        raise ConnectError(INSTALL_HINT) from e
    return pymysql


def is_retriable(e: BaseException) -> bool:
    """Lost or refused connections, timeouts, deadlocks: worth another attempt."""
    pymysql = pymysql_module()
    if isinstance(e, pymysql.err.OperationalError):
        code = e.args[0] if e.args else 0
        return code not in _LOGIN_ERRORS and (code in (1205, 1213, 1040, 1053, 1927) or code >= 2000)
    return isinstance(e, (pymysql.err.InterfaceError, ConnectionError, TimeoutError))


@dataclass(frozen=True)
class BinlogPosition:
    """A place in the binlog: the file, the byte position of the next event, the GTID set executed up to it
    ('' when unknown)."""

    file: str
    pos: int
    gtids: str = ""


class Session:
    """One driver- or executor-side conversation with the server (a connection opened on first use)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._conn: Any = None
        self._flavor: str | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a connection that already broke
                self._conn.close()
            self._conn = None

    # ---------------------------------------------------------------------------------- connections
    def connect(self, **extra: Any) -> Any:
        """A new pymysql connection (retried within errors.retry.timeout)."""
        pymysql = pymysql_module()
        s = self.settings
        kwargs: dict[str, Any] = {"host": s.host, "port": s.port, "user": s.user, "charset": "utf8mb4",
                                  "connect_timeout": s.connect_timeout_s, "autocommit": True, "local_infile": False,
                                  "init_command": "SET time_zone = '+00:00'"}
        password = s.password.value() if s.password is not None else None
        if password:
            kwargs["password"] = password
        if s.ssl_mode == "disabled":
            kwargs["ssl_disabled"] = True  # and no TLS context built for nothing (~0.1 s a connection)
        else:
            kwargs["ssl"] = {} if s.ssl_mode in ("preferred", "required") else {"check_hostname":
                                                                                   s.ssl_mode == "verify_identity"}
        kwargs.update(extra)
        return retry_call(lambda: pymysql.connect(**kwargs), is_retriable=is_retriable,
                          timeout_ms=s.retry_timeout_ms, max_delay_ms=s.retry_delay_max_ms,
                          what=f"{s.name}: connecting to {s.host}:{s.port}")

    def _driver(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._conn = self.connect()
        return self._conn

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        """Rows of ``sql`` (retried on a lost connection: every statement here only reads)."""

        def run() -> list[tuple]:
            try:
                with self._driver().cursor() as cur:
                    cur.execute(sql, params)
                    return [tuple(r) for r in cur.fetchall()] if cur.description else []
            except Exception as e:
                if is_retriable(e):
                    self.close()
                raise

        s = self.settings
        return retry_call(run, is_retriable=is_retriable, timeout_ms=s.retry_timeout_ms,
                          max_delay_ms=s.retry_delay_max_ms, what=f"{s.name}: query")

    # ---------------------------------------------------------------------------------- server
    def flavor(self) -> str:
        """'mariadb' or 'mysql', from the server's version string (a MySqlConnector config may capture a
        MariaDB server, as Debezium's did before its MariaDB connector)."""
        if self._flavor is None:
            version = str(self.query("SELECT VERSION()")[0][0])
            self._flavor = "mariadb" if "mariadb" in version.lower() else "mysql"
        return self._flavor

    def variable(self, name: str) -> str | None:
        rows = self.query("SHOW GLOBAL VARIABLES LIKE %s", (name,))
        return str(rows[0][1]) if rows else None

    def check_binlog(self) -> None:
        """Fail with what to change when the server's binlog cannot serve change data capture."""
        problems = []
        if (self.variable("log_bin") or "OFF").upper() != "ON":
            problems.append("log_bin is OFF (start the server with log-bin)")
        fmt = (self.variable("binlog_format") or "").upper()
        if fmt != "ROW":
            problems.append(f"binlog_format is {fmt or 'unknown'} (ROW is needed)")
        image = (self.variable("binlog_row_image") or "FULL").upper()
        if image != "FULL":
            problems.append(f"binlog_row_image is {image} (FULL is needed)")
        meta = self.variable("binlog_row_metadata")
        if meta is None or meta.upper() != "FULL":
            problems.append(f"binlog_row_metadata is {meta or 'not supported'} (FULL is needed: MariaDB 10.5+, "
                            f"MySQL 8.0.14+; the table maps then carry each row's column names)")
        if problems:
            raise ConnectError(f"{self.settings.name}: the server's binlog cannot be captured: "
                               + "; ".join(problems))

    def binlog_position(self) -> BinlogPosition:
        """The end of the binlog now: always between two transactions."""
        try:
            rows = self.query("SHOW BINARY LOG STATUS")
        except Exception:  # noqa: BLE001 - servers before MySQL 8.2 / MariaDB 10.5.2 know only the old name
            rows = self.query("SHOW MASTER STATUS")
        if not rows:
            raise ConnectError(f"{self.settings.name}: the server has no binary log (start it with log-bin)")
        file, pos = str(rows[0][0]), int(rows[0][1])
        return BinlogPosition(file, pos, self.gtids_at(file, pos, rows[0]))

    def gtids_at(self, file: str, pos: int, status: tuple | None = None) -> str:
        """The GTID set executed up to ``file``:``pos`` (MariaDB: BINLOG_GTID_POS; MySQL: only at the binlog's
        end, from its status; '' elsewhere)."""
        if self.flavor() == "mariadb":
            rows = self.query("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            return str(rows[0][0] or "") if rows else ""
        if status is not None and len(status) >= 5:
            return str(status[4] or "").replace("\n", "")
        return ""

    def binlog_files(self) -> list[tuple[str, int]]:
        """(file, size) of every binlog file the server still has, oldest first."""
        return [(str(r[0]), int(r[1])) for r in self.query("SHOW BINARY LOGS")]

    def binlog_events(self, file: str, pos: int, skip: int, count: int) -> list[tuple[int, str, int, str]]:
        """(position, type, end position, info) of ``count`` events after ``skip`` from ``file``:``pos``, listed
        by the server (the events are read there; only this listing travels)."""
        rows = self.query(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {int(skip)}, {int(count)}", (file,))
        return [(int(r[1]), str(r[2]), int(r[4]), str(r[5] or "")) for r in rows]

    # ---------------------------------------------------------------------------------- catalog
    def layout(self) -> Layout:
        """The captured tables (the filters applied) and their columns, from information_schema."""
        s = self.settings
        rows = self.query("""
            SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.NUMERIC_PRECISION,
                   c.NUMERIC_SCALE, c.DATETIME_PRECISION, COALESCE(k.ORDINAL_POSITION, 0)
            FROM information_schema.COLUMNS c
            JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
            LEFT JOIN information_schema.KEY_COLUMN_USAGE k
              ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME AND k.COLUMN_NAME = c.COLUMN_NAME
             AND k.CONSTRAINT_NAME = 'PRIMARY'
            WHERE t.TABLE_TYPE = 'BASE TABLE'
              AND c.TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
            ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION""")
        tables: dict[tuple[str, str], list] = {}
        for db, table, col, dt, ct, prec, scale, fsp, keypos in rows:
            db, table, col = _text(db), _text(table), _text(col)
            if not s.table_wanted(db, table):
                continue
            cols = tables.setdefault((db, table), [])
            if not keypos and not s.column_wanted(db, table, col):
                continue
            spec: TypeSpec = type_spec(_text(dt), _text(ct), prec, scale, fsp, s)
            if s.column_rules:
                spec = s.column_rules.apply(db, table, col, spec, source_column_type(_text(ct)))
            cols.append((col, spec, int(keypos)))
        rules = s.column_rules
        layout = build_layout(s.prefix, [(d, t, rules.key_positions(d, t, cols)) for (d, t), cols in tables.items()])
        if not layout.tables:
            log.warning("%s: no table matches the filters: the connector captures nothing", s.name)
        return layout

    # ---------------------------------------------------------------------------------- snapshots
    @staticmethod
    def consistent_snapshot(cur: Any) -> BinlogPosition:
        """MariaDB: start a read-only consistent-snapshot transaction on ``cur``'s connection and return the
        binlog position it is consistent with (``binlog_snapshot_file``/``_position``; gtids left out)."""
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        return BinlogPosition(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))

    def snapshot_position(self) -> BinlogPosition:
        """The binlog position of a consistent snapshot taken now.

        MariaDB reports the position of a ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` itself
        (``binlog_snapshot_file``/``_position``), without a lock. MySQL needs the global read lock for the moment
        the position is read (``snapshot.locking.mode`` minimal/extended); ``none`` reads it without a lock."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                if self.flavor() == "mariadb":
                    at = self.consistent_snapshot(cur)
                    cur.execute("ROLLBACK")
                    return BinlogPosition(at.file, at.pos, self.gtids_at(at.file, at.pos))
                locked = self.settings.locking_mode != "none"
                if locked:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                try:
                    return self.binlog_position()
                finally:
                    if locked:
                        cur.execute("UNLOCK TABLES")
        finally:
            conn.close()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
