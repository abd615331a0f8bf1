"""Database dialects for the JDBC connectors: URL parsing, identifier quoting, connections, Arrow reads, bulk
staging writes and retry classification, behind one small interface.

Confluent's connectors take JDBC URLs (``jdbc:postgresql://host:5432/db?user=u&password=p``,
``jdbc:mysql://`` / ``jdbc:mariadb://``, ``jdbc:sqlite:path``); here each maps to a Python client:

* PostgreSQL: ADBC (Arrow-native reads; ``adbc_ingest`` = binary COPY for writes) plus psycopg 3 for control
  statements;
* MariaDB/MySQL: pymysql (server-side cursors for reads, multi-row INSERTs for writes);
* SQLite: the standard library's sqlite3.

Identifiers from configs are always quoted by :meth:`Dialect.quote` (never pasted into SQL); values are bound
as parameters (``%s`` / ``?`` / ``$n``, per client), except the integer and timestamp bounds of a PostgreSQL
read, rendered as typed literals from the values themselves (see :meth:`PostgresDialect.read_arrow`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from ...config import ConfigDef, Importance, Password, Range, Type
from ...core.retry import count_retry, is_transient_os_error, retry_call
from ...errors import ConfigError, ConfigProblem, ConnectError, RetriableError

__all__ = [
    "ConnInfo",
    "Dialect",
    "JdbcConnection",
    "connection_config_def",
    "dialect_for",
    "mask_url",
    "masked_repr",
    "parse_jdbc_url",
    "with_retries",
]

log = logging.getLogger(__name__)

_PLAIN_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class ConnInfo:
    """A parsed ``connection.url`` (+ ``connection.user`` / ``connection.password``). Never shows the password."""

    kind: str  # "postgresql" | "mysql" | "sqlite"
    host: str | None = None
    port: int | None = None
    database: str | None = None
    path: str | None = None
    user: str | None = None
    password: Password | None = field(default=None, repr=False)
    params: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """Where this connects, for messages (no credentials)."""
        if self.kind == "sqlite":
            return f"sqlite:{self.path}"
        return f"{self.kind}://{self.host}:{self.port}/{self.database or ''}"


# The URL properties accepted (in any case), the harmless documented ones of pgjdbc and MariaDB
# Connector/J: TLS modes, timeouts, names. Everything else is refused: socketFactory, sslfactory, loggerFile,
# sslpasswordcallback, authenticationPluginClassName, allowLoadLocalInfile, autoDeserialize... can load a class,
# write or read a local file, or make the client send one (a rogue server's LOAD DATA LOCAL INFILE).
_URL_PROPERTIES: dict[str, tuple[str, ...]] = {
    "postgresql": (
        "ssl", "sslmode", "sslrootcert", "sslcert", "sslkey", "connectTimeout", "connect_timeout", "socketTimeout",
        "loginTimeout", "tcpKeepAlive", "ApplicationName", "application_name", "currentSchema", "options",
        "stringtype", "reWriteBatchedInserts", "prepareThreshold", "targetServerType", "readOnly",
        "defaultRowFetchSize", "gssEncMode", "channelBinding"),
    "mysql": (
        "ssl", "useSSL", "sslMode", "requireSSL", "verifyServerCertificate", "trustServerCertificate",
        "connectTimeout", "socketTimeout", "characterEncoding", "useUnicode", "serverTimezone", "connectionTimeZone",
        "rewriteBatchedStatements", "useServerPrepStmts", "cachePrepStmts", "zeroDateTimeBehavior", "tinyInt1isBit",
        "tcpKeepAlive", "permitMysqlScheme", "useAffectedRows"),
}


_SERVER_URL = re.compile(r"^jdbc:(postgresql|mysql|mariadb)://([^/?]*)(?:/([^?]*))?(?:\?(.*))?$", re.IGNORECASE)


def _refused_properties(url: str) -> str | None:
    """Why the properties of a PostgreSQL or MySQL/MariaDB JDBC URL are refused (``None``: all allowed)."""
    m = _SERVER_URL.match(url.strip())
    if not m:
        return None
    allowed = _URL_PROPERTIES["postgresql" if m.group(1).lower() == "postgresql" else "mysql"]
    lower = {p.lower() for p in allowed}
    refused = [k for k, _ in parse_qsl(m.group(4) or "", keep_blank_values=True)
               if k not in ("user", "password") and k.lower() not in lower]
    if not refused:
        return None
    return (f"the URL {'property' if len(refused) == 1 else 'properties'} {', '.join(refused)} "
            f"{'is' if len(refused) == 1 else 'are'} not accepted (such properties can load a class, read or write "
            f"a local file, or make the client send one); allowed: {', '.join(allowed)}")


class JdbcUrl:
    """A non-empty JDBC URL whose properties are all on the allowlist (:data:`_URL_PROPERTIES`)."""

    def __call__(self, value: Any) -> str | None:
        if not str(value).strip():
            return "String may not be empty"
        return _refused_properties(str(value))

    def describe(self) -> str:
        return "non-empty string; URL properties from the allowlist"


def parse_jdbc_url(url: str, user: str | None = None, password: Password | str | None = None,
                   *, key: str = "connection.url") -> ConnInfo:
    """Parse a JDBC URL; ``?user=&password=`` parameters are honoured (explicit user/password win).

    >>> parse_jdbc_url("jdbc:postgresql://db:5433/shop?user=app").describe()
    'postgresql://db:5433/shop'
    """
    if isinstance(password, str):
        password = Password(password)
    u = (url or "").strip()
    m = _SERVER_URL.match(u)
    if m:
        scheme = m.group(1).lower()
        kind = "postgresql" if scheme == "postgresql" else "mysql"
        hostport = m.group(2) or "localhost"
        if "@" in hostport:
            raise ConfigError([ConfigProblem(key, f"Invalid value for configuration {key}: put credentials in "
                                                  "connection.user/connection.password or ?user=&password=")])
        hostport = hostport.split(",")[0]  # failover lists: the first host
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            port_s = rest.lstrip(":")
        else:
            host, _, port_s = hostport.partition(":")
        try:
            port = int(port_s) if port_s else (5432 if kind == "postgresql" else 3306)
        except ValueError:
            raise ConfigError([ConfigProblem(key, f"Invalid value for configuration {key}: port {port_s!r} is not "
                                                  "a number")]) from None
        refused = _refused_properties(u)
        if refused:
            raise ConfigError([ConfigProblem(key, f"Invalid value for configuration {key}: {refused}")])
        params = []
        url_user, url_password = None, None
        for k, v in parse_qsl(m.group(4) or "", keep_blank_values=True):
            if k == "user":
                url_user = v
            elif k == "password":
                url_password = Password(v)
            else:
                params.append((k, v))
        return ConnInfo(kind, host or "localhost", port, unquote(m.group(3) or "") or None, None,
                        user or url_user, password if password is not None and password.value() is not None
                        else url_password, tuple(params))
    m = re.match(r"^jdbc:sqlite:(.*)$", u, re.IGNORECASE)
    if m:
        path = m.group(1).split("?")[0]
        path = path.removeprefix("//")
        if not path or path == ":memory:":
            raise ConfigError([ConfigProblem(key, f"Invalid value {u} for configuration {key}: an in-memory SQLite "
                                                  "database cannot be shared by Spark's processes; use a file path")])
        return ConnInfo("sqlite", path=path)
    shown = mask_url(u)
    raise ConfigError([ConfigProblem(key, f"Invalid value {shown} for configuration {key}: expected "
                                          "jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db, "
                                          "jdbc:mariadb://host:port/db or jdbc:sqlite:<path>")])


def mask_url(text: str) -> str:
    """``text`` with every ``password=...`` URL parameter hidden."""
    return re.sub(r"(password=)[^&\s'\"]*", r"\1[hidden]", text, flags=re.IGNORECASE)


def masked_repr(connector: Any) -> str:
    """A connector's repr with the password in ``connection.url`` (``?password=``) hidden."""
    return mask_url(f"{type(connector).__name__}(name={connector.name!r}, config={connector.config!r})")


# ------------------------------------------------------------------------------------------------ config
def connection_config_def(group: str) -> Any:
    """The connection keys Confluent's JDBC source and sink share (a ConfigDef declared once; ``group`` as each
    names it)."""

    return (ConfigDef()
            .define("connection.url", Type.STRING, validator=JdbcUrl(), importance=Importance.HIGH,
                    doc="JDBC connection URL: jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db, "
                        "jdbc:mariadb://host:port/db or jdbc:sqlite:<path>; ?user=&password= are honoured, other "
                        "properties only from an allowlist (see Securing the worker).",
                    group=group)
            .define("connection.user", Type.STRING, None, importance=Importance.HIGH,
                    doc="JDBC connection user.", group=group)
            .define("connection.password", Type.PASSWORD, None, importance=Importance.HIGH,
                    doc="JDBC connection password (never logged or shown).", group=group)
            .define("connection.attempts", Type.INT, 3, Range.at_least(1), Importance.LOW,
                    "Maximum number of attempts to get a valid connection.", group=group)
            .define("connection.backoff.ms", Type.LONG, 10000, Range.at_least(0), Importance.LOW,
                    "Backoff time in ms between connection attempts.", group=group))


class JdbcConnection:
    """What the JDBC source and sink share: their connection info, dialect and masked repr (a mixin over
    :class:`~spark_connect_bridge.connectors.base.SourceConnector` / ``SinkConnector``)."""

    config: Any
    _info: ConnInfo

    def __repr__(self) -> str:
        return masked_repr(self)

    def _dialect(self) -> Dialect:
        return dialect_for(self._info, quote_identifiers=self.config.quote_sql_identifiers == "always",
                           timezone=self.config.db_timezone)

    def _open(self, connect: Callable[[], Any], what: str = "connect") -> Any:
        """A connection from ``connect`` within ``connection.attempts`` / ``connection.backoff.ms``."""
        return connect_with_attempts(connect, self._dialect(), attempts=self.config.connection_attempts,
                                     backoff_ms=self.config.connection_backoff_ms,
                                     retry_timeout_ms=self.config.errors_retry_timeout, what=what)


# ------------------------------------------------------------------------------------------------ retries
def with_retries(fn: Callable[[], Any], dialect: Dialect, *, timeout_ms: int, max_delay_ms: int,
                 what: str) -> Any:
    """Run ``fn`` through the shared :func:`spark_connect_bridge.core.retry.retry_call`, classifying errors with the
    dialect and hiding the password in messages. A refused login is never retried."""
    return retry_call(fn, is_retriable=lambda e: _transient(dialect, e),
                      timeout_ms=timeout_ms, max_delay_ms=max_delay_ms,
                      what=f"{what} on {dialect.info.describe()}", describe=lambda e: _scrub(str(e), dialect.info))


def _transient(dialect: Dialect, e: BaseException) -> bool:
    return not dialect.is_login_error(e) and (dialect.is_retriable(e) or is_transient_os_error(e))


def connect_with_attempts(connect: Callable[[], Any], dialect: Dialect, *, attempts: int, backoff_ms: int,
                          retry_timeout_ms: int = 0, what: str = "connect") -> Any:
    """Open a connection as Confluent's JDBC connectors do: at most ``connection.attempts`` attempts,
    ``connection.backoff.ms`` apart (longer only when ``errors.retry.timeout`` asks for it: -1 forever).

    Only transient failures (refused or reset connections, a server starting up) are retried. A refused login
    (wrong password, unknown user or database, no pg_hba.conf entry) fails at once with a ConnectError: it does
    not fix itself, and retrying it only delays the error and may lock the account.

    >>> connect_with_attempts(d.connect, d, attempts=3, backoff_ms=10000)    # doctest: +SKIP
    """
    started = time.monotonic()
    where = f"{what} on {dialect.info.describe()}"
    attempt = 0
    while True:
        attempt += 1
        try:
            return connect()
        except Exception as e:
            text = _scrub(str(e), dialect.info)
            if dialect.is_login_error(e):
                raise ConnectError(f"{where} failed: the server refused the login ({type(e).__name__}: {text}). "
                                   f"Check connection.url, connection.user and connection.password; a refused "
                                   f"login is not retried") from e
            if not _transient(dialect, e):
                raise
            elapsed_ms = (time.monotonic() - started) * 1000
            within_timeout = retry_timeout_ms < 0 or elapsed_ms + backoff_ms < retry_timeout_ms
            if attempt >= attempts and not within_timeout:
                raise RetriableError(f"{where} failed after {attempt} attempt(s) (connection.attempts={attempts}): "
                                     f"{type(e).__name__}: {text}") from e
            log.warning("%s failed (%s: %s); attempt %d of %d, next in %.1f s", where, type(e).__name__, text,
                        attempt, attempts, backoff_ms / 1000)
            count_retry()  # a re-attempt is a retry in the batch's report
            time.sleep(backoff_ms / 1000)


def _scrub(text: str, info: ConnInfo) -> str:
    pw = info.password.value() if info.password is not None else None
    return text.replace(pw, "[hidden]") if pw else text


# ------------------------------------------------------------------------------------------------ dialects
_PG_LOGIN_REFUSED = ("authentication failed", "no pg_hba.conf entry", "does not exist", "permission denied for "
                     "database", "is not permitted to log in")

class Dialect:
    """What the connectors need from a database. Subclasses: PostgreSQL, MySQL/MariaDB, SQLite."""

    name = "generic"
    param = "%s"  # DB-API placeholder of the control connection
    quote_char = '"'

    def __init__(self, info: ConnInfo, *, quote_identifiers: bool = True, timezone: str = "UTC"):
        self.info = info
        self.quote_identifiers = quote_identifiers
        self.timezone = timezone

    # -- identifiers ---------------------------------------------------------------------------------
    def quote(self, ident: str) -> str:
        """Quote one identifier (``quote.sql.identifiers=never`` accepts only plain names, left unquoted)."""
        if not self.quote_identifiers:
            if not _PLAIN_IDENT.match(ident):
                raise ConfigError([ConfigProblem("quote.sql.identifiers",
                                                 f"identifier {ident!r} is not a plain SQL name; it must be quoted "
                                                 "(quote.sql.identifiers=always)")])
            return ident
        q = self.quote_char
        return q + ident.replace(q, q + q) + q

    def table(self, name: str | Sequence[str]) -> str:
        """A possibly schema-qualified table name (``schema.table`` split on dots), quoted."""
        parts = name.split(".") if isinstance(name, str) else list(name)
        return ".".join(self.quote(p) for p in parts)

    # -- connections ---------------------------------------------------------------------------------
    def connect(self) -> Any:
        raise NotImplementedError

    def is_retriable(self, e: BaseException) -> bool:
        raise NotImplementedError

    def is_login_error(self, e: BaseException) -> bool:
        """The server refused the login (credentials, unknown user or database): never transient."""
        return False

    def is_data_error(self, e: BaseException) -> bool:
        """A statement failed because of the data (constraint, value out of range), not the system."""
        raise NotImplementedError

    def wrap_error(self, e: BaseException, what: str) -> ConnectError:
        return ConnectError(f"{what} failed on {self.info.describe()}: {type(e).__name__}: "
                            f"{_scrub(str(e), self.info)}")

    # -- reads ---------------------------------------------------------------------------------------
    def read_arrow(self, sql: str, params: Sequence[Any], batch_rows: int) -> Iterator[Any]:
        """Run a SELECT (written with ``{p}`` placeholders, see :meth:`sql`) and yield Arrow record batches."""
        raise NotImplementedError

    def sql(self, template: str, n_params: int | None = None) -> str:
        """Render ``{p}`` placeholders in ``template`` for the control connection."""
        return template.replace("{p}", self.param)

    # -- type mapping (sink DDL) ---------------------------------------------------------------------
    def sql_type(self, t: Any, *, key: bool = False) -> str:
        raise NotImplementedError

    def widen(self, have: str, want: str) -> str | None:
        """The column type to alter a ``have`` column to so that it holds ``want`` values; None: no change."""
        raise NotImplementedError

    def supports_row_values(self) -> bool:
        return True


def _arrow_sql_common(t: Any, names: dict[str, str]) -> str | None:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return names["bool"]
    if pa.types.is_int8(t) or pa.types.is_int16(t):
        return names["int16"] if not pa.types.is_int8(t) else names.get("int8", names["int16"])
    if pa.types.is_int32(t):
        return names["int32"]
    if pa.types.is_int64(t):
        return names["int64"]
    if pa.types.is_float32(t):
        return names["float32"]
    if pa.types.is_floating(t):
        return names["float64"]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return names["bytes"]
    return None


class PostgresDialect(Dialect):
    name = "PostgreSqlDatabaseDialect"

    def _conninfo(self) -> dict[str, Any]:
        i = self.info
        kw: dict[str, Any] = {"host": i.host, "port": i.port, "dbname": i.database or "postgres"}
        if i.user:
            kw["user"] = i.user
        if i.password is not None and i.password.value() is not None:
            kw["password"] = i.password.value()
        for k, v in i.params:
            if k in ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name",
                     "options"):
                kw[k] = v
            elif k == "ApplicationName":
                kw["application_name"] = v
        return kw

    def connect(self) -> Any:
        try:
            import psycopg
        except ImportError as e:  # pragma: no cover
            raise ConnectError("The PostgreSQL dialect needs psycopg: pip install "
                               "'spark_connect_bridge[jdbc]'") from e
        kw = self._conninfo()
        kw.setdefault("connect_timeout", 10)
        conn = psycopg.connect(**kw)
        with conn.cursor() as cur:
            cur.execute("SELECT set_config('TimeZone', %s, false)", (self.timezone,))
        conn.commit()
        return conn

    def adbc_connect(self, *, autocommit: bool = False, shared: bool = False, refresh: bool = False) -> Any:
        """An ADBC connection (binary COPY in and out of Arrow). With ``autocommit=True`` the caller runs its own
        ``BEGIN`` / ``SAVEPOINT`` / ``COMMIT``: the driver then never issues a ``BEGIN`` of its own, so a
        failed statement can be rolled back to a savepoint (its implicit transactions cannot).

        ``shared=True``: the connection comes from this process's ADBC database object for this URL. Creating
        that object costs a connection and a scan of the server's type catalog (~0.1 s), a connection from it
        a few ms; but it only knows the types that existed when it was made: see :meth:`adbc_read`, which
        renews it (``refresh=True``) when a result has a type it does not know."""
        try:
            import adbc_driver_postgresql.dbapi as adbc
        except ImportError as e:  # pragma: no cover
            raise ConnectError("The PostgreSQL dialect needs adbc-driver-postgresql: pip install "
                               "'spark_connect_bridge[jdbc]'") from e
        from urllib.parse import quote as q

        kw = self._conninfo()
        auth = ""
        if "user" in kw:
            auth = q(kw.pop("user"), safe="")
            if "password" in kw:
                auth += ":" + q(kw.pop("password"), safe="")
            auth += "@"
        host = kw.pop("host")
        host = f"[{host}]" if ":" in host else host
        uri = f"postgresql://{auth}{host}:{kw.pop('port')}/{q(kw.pop('dbname'), safe='')}"
        extra = "&".join(f"{k}={q(str(v), safe='')}" for k, v in kw.items())
        uri += ("?" + extra) if extra else ""
        conn = _adbc_shared_connect(uri, autocommit, refresh) if shared else None
        if conn is None:
            conn = adbc.connect(uri, autocommit=autocommit)
        cur = conn.cursor()
        cur.execute("SELECT set_config('TimeZone', $1, false)", (self.timezone,))
        cur.fetchall()
        cur.close()
        if not autocommit:
            conn.commit()
        return conn

    @contextlib.contextmanager
    def adbc_read(self, sql: str, params: Sequence[Any] | None = None, *, begin: str | None = None
                  ) -> Iterator[Any]:
        """Run ``sql`` (``$n`` placeholders; after ``begin``, if given) on a shared-database ADBC connection (see
        :meth:`adbc_connect`), closed on leaving the block; yield the result's record batch reader. A result
        with a column type the shared database does not know yet (created after it: ADBC then hands raw bytes
        typed ``unnamed<oid:N>``) is read again on a renewed one."""
        for refresh in (False, True):
            conn = self.adbc_connect(shared=True, refresh=refresh)
            try:
                cur = conn.cursor()
                if begin:
                    cur.execute(begin)
                cur.execute(sql, params)
                reader = cur.fetch_record_batch()
                if refresh or not _unknown_pg_types(reader.schema):
                    yield reader
                    return
            finally:
                conn.close()

    def for_adbc(self) -> PostgresDialect:
        """This dialect with ``$n`` placeholders, for statements run on an ADBC connection."""
        import copy

        d = copy.copy(self)
        d.__class__ = _PostgresAdbcDialect
        return d

    def is_login_error(self, e: BaseException) -> bool:
        # libpq reports a refused login as a FATAL message without a SQLSTATE (psycopg: OperationalError,
        # sqlstate None; ADBC: the same text): classes 28 (invalid authorization) and 3D (no such database).
        text = str(e)
        return "FATAL" in text and any(p in text for p in _PG_LOGIN_REFUSED)

    def is_retriable(self, e: BaseException) -> bool:
        try:
            import psycopg
            from psycopg import errors as pe
        except ImportError:  # pragma: no cover
            return False
        if isinstance(e, (pe.DeadlockDetected, pe.SerializationFailure, pe.LockNotAvailable,
                          pe.AdminShutdown, pe.CannotConnectNow)):
            return True
        if isinstance(e, psycopg.OperationalError) and not isinstance(e, psycopg.errors.QueryCanceled):
            return True
        try:
            import adbc_driver_manager as am
        except ImportError:  # pragma: no cover
            return False
        if isinstance(e, am.OperationalError):
            return True
        if isinstance(e, am.Error):
            state = getattr(e, "sqlstate", None) or ""
            return state[:2] in ("08", "40", "57") or "could not connect" in str(e).lower()
        return False

    def is_data_error(self, e: BaseException) -> bool:
        import psycopg

        if isinstance(e, (psycopg.IntegrityError, psycopg.DataError)):
            return True
        state = getattr(getattr(e, "diag", None), "sqlstate", None) or getattr(e, "sqlstate", None) or ""
        return state[:2] in ("22", "23")

    def read_arrow(self, sql: str, params: Sequence[Any], batch_rows: int) -> Iterator[Any]:
        # ADBC streams a statement without parameters through binary COPY (batches of ~16 MB while the server
        # is still sending), but runs one with parameters as a prepared statement whose whole result it buffers
        # into a single batch first: no overlap of server, Python and Spark, and the result held in memory
        # twice. So the integer and timestamp bounds of a read are rendered as typed literals (their text is
        # made here from int/datetime values, never from config strings); other values stay bound.
        literals = [_pg_literal(v) for v in params]
        bind = any(v is None for v in literals)
        n = 0

        def ph(_m: Any) -> str:
            nonlocal n
            n += 1
            return f"${n}" if bind else literals[n - 1]  # type: ignore[return-value]

        q = re.sub(r"\{p\}", ph, sql)
        # Read-only and repeatable: one snapshot for the whole range.
        with self.adbc_read(q, list(params) if bind and params else None,
                            begin="BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY") as reader:
            yield from reader

    def sql_type(self, t: Any, *, key: bool = False) -> str:
        import pyarrow as pa

        s = _arrow_sql_common(t, {"bool": "BOOLEAN", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT",
                                  "float32": "REAL", "float64": "DOUBLE PRECISION", "bytes": "BYTEA"})
        if s:
            return s
        if pa.types.is_timestamp(t):
            return "TIMESTAMP" if t.tz is None else "TIMESTAMPTZ"
        if pa.types.is_time(t):
            return "TIME"
        return "TEXT"

    def widen(self, have: str, want: str) -> str | None:
        order = ["smallint", "integer", "bigint", "numeric"]
        floats = ["real", "double precision"]
        h, w = have.lower(), want.lower()
        if h in order and w in order and order.index(w) > order.index(h):
            return want
        if h in floats and w in floats and floats.index(w) > floats.index(h):
            return want
        if h in order[:3] and w in floats:
            return "DOUBLE PRECISION"
        if h.startswith("character varying") and w == "text":
            return "TEXT"
        return None


#: This process's ADBC database objects by connection URI (adbc_driver_manager's shared-database holders).
_ADBC_DATABASES: dict[str, Any] = {}
_ADBC_LOCK = threading.Lock()


def _adbc_shared_connect(uri: str, autocommit: bool, refresh: bool) -> Any:
    """A DB-API connection on this process's ADBC database object for ``uri`` (made, or renewed with
    ``refresh``, here); None where adbc-driver-manager cannot share one (the caller then connects alone)."""
    import adbc_driver_manager
    import adbc_driver_postgresql
    from adbc_driver_manager import dbapi

    # _SharedDatabase is adbc-driver-manager's private holder (what its own Connection.adbc_clone() shares):
    # where it is missing or its shape changed, the caller connects alone (slower planning, same results).
    holder = getattr(dbapi, "_SharedDatabase", None)
    if holder is None:  # pragma: no cover - adbc-driver-manager without it
        return None
    try:
        with _ADBC_LOCK:
            db = _ADBC_DATABASES.get(uri)
            if db is None or refresh:
                if db is not None:
                    db.close()  # the cache's reference; connections still open keep it alive until they close
                db = _ADBC_DATABASES[uri] = holder(adbc_driver_postgresql.connect(uri))
            db = db.clone()  # this call's reference, handed to the connection below
        try:
            return dbapi.Connection(db, adbc_driver_manager.AdbcConnection(db._db), autocommit=autocommit)
        finally:
            db.close()  # the connection took its own reference
    except (AttributeError, TypeError) as e:  # pragma: no cover - a different adbc-driver-manager
        log.debug("ADBC database sharing unavailable (%s): connecting per read", type(e).__name__)
        return None


def _unknown_pg_types(schema: Any) -> bool:
    """Whether ADBC typed a column (or a nested field) of ``schema`` as an unknown PostgreSQL type."""
    def unknown(f: Any) -> bool:
        md = f.metadata or {}
        if md.get(b"POSTGRESQL:type", b"").startswith(b"unnamed<oid:"):
            return True
        t = f.type
        return any(unknown(t.field(i)) for i in range(t.num_fields)) if t.num_fields else False

    return any(unknown(f) for f in schema)


def _pg_literal(v: Any) -> str | None:
    """A PostgreSQL literal for an int or datetime value (text built from the value, no string input); None
    for any other type (the caller binds it instead)."""
    import datetime as dt

    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            return f"'{v.isoformat(sep=' ')}'::timestamp"
        try:
            return f"'{v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=' ')}+00'::timestamptz"
        except OverflowError:
            return None
    return None


class _PostgresAdbcDialect(PostgresDialect):
    """PostgreSQL statements for an ADBC cursor: libpq numbers its placeholders (``$1``, ``$2``, ...)."""

    def sql(self, template: str, n_params: int | None = None) -> str:
        n = 0

        def ph(_m: Any) -> str:
            nonlocal n
            n += 1
            return f"${n}"

        return re.sub(r"\{p\}", ph, template)


@functools.cache
def _own_file_connection_class() -> Any:
    """A pymysql ``Connection`` that answers a server's ``LOAD DATA LOCAL INFILE`` request only with the file
    :meth:`MySQLDialect.load_data` is loading (``own_file``). pymysql itself sends whatever file the server names,
    and a rogue server may name any file of the worker (its state encryption key, say)."""
    import pymysql
    from pymysql.connections import Connection, MySQLResult
    from pymysql.protocol import LoadLocalPacketWrapper

    class OwnFileResult(MySQLResult):
        def _read_load_local_packet(self, first_packet: Any) -> None:
            conn: Any = self.connection
            asked = LoadLocalPacketWrapper(first_packet).filename
            if conn.own_file is None or asked != os.fsencode(conn.own_file):
                conn._force_close()  # nothing was sent; the protocol cannot go on
                raise pymysql.err.OperationalError(
                    2000, "The MySQL server asked for a local file other than the one being loaded; nothing was "
                          "sent (a rogue server's LOAD DATA LOCAL INFILE request)")
            super()._read_load_local_packet(first_packet)  # type: ignore[misc]  # not in the stubs

    class OwnFileConnection(Connection):
        own_file: str | None = None

        def _read_query_result(self, unbuffered: bool = False) -> Any:
            # pymysql's own method, with OwnFileResult for MySQLResult.
            self._result = None
            result = OwnFileResult(self)
            if unbuffered:
                result.init_unbuffered_query()
            else:
                result.read()
            self._result = result
            if result.server_status is not None:
                self.server_status = result.server_status
            return result.affected_rows

    return OwnFileConnection


class MySQLDialect(Dialect):
    name = "MySqlDatabaseDialect"
    quote_char = "`"

    def connect(self, *, local_infile: bool = False) -> Any:
        """A pymysql connection. ``local_infile=True`` announces LOAD DATA LOCAL support, but the client answers
        a file request only while :meth:`load_data` runs its own statement (``_local_infile`` is switched on
        just for it), so no other statement can make the client send a file."""
        try:
            connection_class = _own_file_connection_class()
        except ImportError as e:  # pragma: no cover
            raise ConnectError("The MySQL/MariaDB dialect needs pymysql: pip install "
                               "'spark_connect_bridge[jdbc]'") from e
        i = self.info
        conn = connection_class(
            host=i.host, port=i.port or 3306, user=i.user or "root",
            password=(i.password.value() if i.password is not None else None) or "", database=i.database,
            charset="utf8mb4", autocommit=False, connect_timeout=10, local_infile=local_infile, binary_prefix=True)
        # pymysql has no public switch for it: a private attribute, set and reset around load_data's statement.
        conn._local_infile = False
        with conn.cursor() as cur:
            cur.execute("SET time_zone = %s", (_mysql_tz(self.timezone),))
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
        return conn

    def quote(self, ident: str) -> str:
        # ANSI_QUOTES is set on our sessions, but backticks work regardless of sql_mode.
        return super().quote(ident)

    def load_data(self, conn: Any, table: str, columns: Sequence[str], path: str) -> None:
        """``LOAD DATA LOCAL INFILE`` of a tab-separated file written by :func:`mysql_tsv` into ``table``.

        LOCAL loads turn conversion errors into warnings (the server cannot stop the upload), so any warning
        fails the load instead of leaving silently altered rows."""
        cols = ", ".join(self.quote(c) for c in columns)
        cur = conn.cursor()
        conn._local_infile, conn.own_file = True, path
        try:
            cur.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE {self.quote(table)} CHARACTER SET utf8mb4 "
                        "FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
                        f"({cols})", (path,))
        finally:
            conn._local_infile, conn.own_file = False, None
        cur.execute("SHOW WARNINGS LIMIT 3")
        warnings = cur.fetchall()
        cur.close()
        if warnings:
            raise ConnectError(f"LOAD DATA into {table} gave warnings: {[w[2] for w in warnings]}")

    def is_login_error(self, e: BaseException) -> bool:
        import pymysql

        # 1044/1045 access denied, 1049 unknown database, 1698 access denied (auth plugin)
        return isinstance(e, pymysql.err.OperationalError) and bool(e.args) and e.args[0] in (1044, 1045, 1049,
                                                                                             1698)

    def is_retriable(self, e: BaseException) -> bool:
        import pymysql

        if isinstance(e, pymysql.err.OperationalError):
            code = e.args[0] if e.args else 0
            return code in (1205, 1213, 2003, 2006, 2013, 2055, 1040, 1053, 1927) or code >= 2000
        return isinstance(e, (pymysql.err.InterfaceError, ConnectionError))

    def is_data_error(self, e: BaseException) -> bool:
        import pymysql

        return isinstance(e, (pymysql.err.IntegrityError, pymysql.err.DataError))

    def read_arrow(self, sql: str, params: Sequence[Any], batch_rows: int) -> Iterator[Any]:
        import pymysql

        conn = self.connect()
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            cur.execute(self.sql(sql), tuple(params))
            schema = mysql_arrow_schema(cur.description)
            while True:
                rows = cur.fetchmany(batch_rows)
                if not rows:
                    break
                yield rows_to_batch(rows, schema)
            cur.close()
        finally:
            conn.close()

    def sql_type(self, t: Any, *, key: bool = False) -> str:
        import pyarrow as pa

        s = _arrow_sql_common(t, {"bool": "BOOLEAN", "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT",
                                  "int64": "BIGINT", "float32": "FLOAT", "float64": "DOUBLE",
                                  "bytes": "VARBINARY(255)" if key else "LONGBLOB"})
        if s:
            return s
        if pa.types.is_timestamp(t):
            return "DATETIME(6)"
        if pa.types.is_time(t):
            return "TIME(3)"
        return "VARCHAR(255)" if key else "LONGTEXT"

    def widen(self, have: str, want: str) -> str | None:
        order = ["tinyint", "smallint", "int", "bigint"]
        floats = ["float", "double"]
        h, w = have.lower().split("(")[0], want.lower().split("(")[0]
        if h in order and w in order and order.index(w) > order.index(h):
            return want
        if h in floats and w in floats and floats.index(w) > floats.index(h):
            return want
        if h in ("varchar", "text", "mediumtext") and w == "longtext":
            return want
        return None


def _mysql_tz(tz: str) -> str:
    """MariaDB needs its time zone tables for names; offsets always work."""
    if tz.upper() in ("UTC", "Z", "GMT"):
        return "+00:00"
    if re.match(r"^[+-]\d\d:\d\d$", tz):
        return tz
    import datetime
    from zoneinfo import ZoneInfo

    off = datetime.datetime.now(ZoneInfo(tz)).utcoffset() or datetime.timedelta(0)
    mins = int(off.total_seconds() // 60)
    return f"{'+' if mins >= 0 else '-'}{abs(mins) // 60:02d}:{abs(mins) % 60:02d}"


class SqliteDialect(Dialect):
    name = "SqliteDatabaseDialect"
    param = "?"

    def connect(self) -> Any:
        import sqlite3

        assert self.info.path is not None, "parse_jdbc_url gives every SQLite URL a path"
        conn = sqlite3.connect(self.info.path, timeout=60, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 60000")
        return conn

    def is_retriable(self, e: BaseException) -> bool:
        import sqlite3

        return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))

    def is_data_error(self, e: BaseException) -> bool:
        import sqlite3

        return isinstance(e, (sqlite3.IntegrityError, sqlite3.DataError))

    def read_arrow(self, sql: str, params: Sequence[Any], batch_rows: int) -> Iterator[Any]:
        conn = self.connect()
        try:
            conn.execute("BEGIN")  # one read snapshot for the range
            cur = conn.execute(self.sql(sql), tuple(params))
            while True:
                rows = cur.fetchmany(batch_rows)
                if not rows:
                    break
                yield rows  # typed by the caller (SQLite values carry no declared type)
            conn.execute("COMMIT")
        finally:
            conn.close()

    def sql_type(self, t: Any, *, key: bool = False) -> str:
        import pyarrow as pa

        s = _arrow_sql_common(t, {"bool": "INTEGER", "int16": "INTEGER", "int32": "INTEGER", "int64": "INTEGER",
                                  "float32": "REAL", "float64": "REAL", "bytes": "BLOB"})
        if s:
            return "NUMERIC" if s.startswith("DECIMAL") else s
        if pa.types.is_timestamp(t):
            return "TIMESTAMP"
        return "TEXT"

    def widen(self, have: str, want: str) -> str | None:
        return None  # SQLite columns take any value


def dialect_for(info: ConnInfo, *, quote_identifiers: bool = True, timezone: str = "UTC") -> Dialect:
    cls = {"postgresql": PostgresDialect, "mysql": MySQLDialect, "sqlite": SqliteDialect}[info.kind]
    return cls(info, quote_identifiers=quote_identifiers, timezone=timezone)


# ------------------------------------------------------------------------------------------------ MySQL typing
def mysql_tsv(table: Any, timezone: str) -> bytes | None:
    """``table`` as LOAD DATA's default text format (tab-separated, ``\\`` escapes, ``\\N`` for NULL), built with
    Arrow compute (no per-row Python): timestamps as ``timezone`` wall time, booleans as 0/1. None when a
    column has no text form here (binary, nested): the caller then inserts rows instead."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    cols = []
    for a in table.columns:
        a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
        t = a.type
        if pa.types.is_timestamp(t):
            if t.tz is not None:
                a = pc.local_timestamp(a.cast(pa.timestamp("us", tz=timezone)))
            a = pc.strftime(a.cast(pa.timestamp("us")), format="%Y-%m-%d %H:%M:%S")
        elif pa.types.is_boolean(t):
            a = a.cast(pa.int8()).cast(pa.string())
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            a = a.cast(pa.string())
            for old, new in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
                a = pc.replace_substring(a, old, new)
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_date(t):
            a = a.cast(pa.string())
        else:
            return None
        cols.append(pc.fill_null(a, "\\N"))
    if not n:
        return b""
    lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*cols, "\t"), pa.repeat("\n", n), "")
    # The rows' bytes are contiguous in the array's data buffer: the file is its used span.
    import numpy as np

    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + n + 1]
    return lines.buffers()[2].to_pybytes()[int(offsets[0]):int(offsets[-1])]


def mysql_arrow_schema(description: Sequence[Any]) -> Any:
    """Arrow types of a pymysql result from its cursor description (type code, precision, scale, flags)."""
    import pyarrow as pa
    from pymysql.constants import FIELD_TYPE as F

    fields = []
    for d in description:
        name, code, _disp, _size, prec, scale, _null = d[:7]
        if code == F.TINY:
            t = pa.int8()
        elif code in (F.SHORT, F.YEAR):
            t = pa.int16() if code == F.SHORT else pa.int32()
        elif code in (F.LONG, F.INT24):
            t = pa.int32()
        elif code == F.LONGLONG:
            t = pa.int64()
        elif code == F.FLOAT:
            t = pa.float32()
        elif code == F.DOUBLE:
            t = pa.float64()
        elif code in (F.DECIMAL, F.NEWDECIMAL):
            p = max(1, min(38, (prec or 10) - (1 if scale else 0) - 1 if prec else 10))
            t = pa.decimal128(max(p, scale or 0, 1), scale or 0)
        elif code == F.DATE:
            t = pa.date32()
        elif code in (F.DATETIME, F.TIMESTAMP):
            t = pa.timestamp("us")
        elif code == F.TIME:
            t = pa.duration("us")
        elif code == F.BIT:
            t = pa.binary()
        elif code in (F.BLOB, F.TINY_BLOB, F.MEDIUM_BLOB, F.LONG_BLOB, F.VAR_STRING, F.STRING, F.VARCHAR):
            # pymysql returns bytes for binary collations (charset 63), str otherwise.
            t = pa.string()
        else:
            t = pa.string()
        fields.append(pa.field(name, t))
    return pa.schema(fields)


def rows_to_batch(rows: Sequence[Sequence[Any]], schema: Any) -> Any:
    """Column-wise Arrow arrays from DB-API rows (one C-level conversion per column)."""
    import pyarrow as pa

    cols: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in schema]
    arrays = []
    for f, col in zip(schema, cols):
        t = f.type
        if pa.types.is_string(t) and any(isinstance(v, (bytes, bytearray)) for v in col):
            t = pa.binary()
        if pa.types.is_decimal(t):
            arr = pa.array(col, pa.decimal128(38, t.scale)).cast(t, safe=False)
        else:
            arr = pa.array(col, t)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=schema.names)
