"""Connections to PostgreSQL for one connector, with retries, and the SQL of its slot and publication.

A :class:`PgSession` opens psycopg connections from the settings (every session with
:data:`~.types.SESSION_OPTIONS`, so value text is the same everywhere), retries lost connections and a slot
busy with another session through the shared :func:`~spark_connect_bridge.retry.retry_call`
(``errors.retry.timeout``, ``errors.retry.delay.max.ms``; a slot still held by the backend of a crashed
driver is waited for at least a minute), and keeps the driver's one connection and the replication
connection that holds an exported snapshot. Pickled to executors without its connections; there
:meth:`PgSession.reader_connections` keeps the connections a batch read the slot with for the next batch of the
same connector in the same process (Spark reuses its Python workers; connecting is most of a small batch's read).

The slot is created over a replication connection (``CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')``, which
no SQL function offers) and moved only by ``pg_replication_slot_advance``, after Spark committed a batch.

>>> session = PgSession(settings)                                         # doctest: +SKIP
>>> session.slot()                                                        # doctest: +SKIP
(23926592, 23926520)
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ...core.retry import retry_call
from ...errors import ConnectError
from .config import PostgresSettings, PublicationMode
from .types import SESSION_OPTIONS

__all__ = ["BUSY_SLOT_WAIT_MS", "CONNECTION_LOST", "READER_KEEP_S", "READERS_KEPT_MAX", "PgSession", "ReadInterrupted",
           "ReaderConnections", "SlotBusy", "adbc_module", "is_busy", "is_transient", "lsn_text", "parse_lsn",
           "psycopg_module"]

log = logging.getLogger(__name__)

_INSTALL_HINT = "PostgreSQL CDC needs psycopg: pip install 'spark_connect_bridge[postgres]'"
#: How long a replication slot busy with another session is waited for, whatever errors.retry.timeout says:
#: the backend of a crashed driver holds it until PostgreSQL notices the lost client.
BUSY_SLOT_WAIT_MS = 60_000
#: libpq's words for a connection that went away under a query
CONNECTION_LOST = ("server closed the connection", "terminating connection", "could not receive data",
                   "no connection to the server", "connection to server", "SSL SYSCALL error")
#: How long the connections a batch read the slot with stay open after it, for the next batch's read (seconds).
#: A stream at a sub-second trigger reads every time; ADBC's connect alone took 50 ms idle and 300-500 ms at a
#: load average of 15 (it reads the server's type catalog), most of a small batch's read.
READER_KEEP_S = 10.0
#: The most connectors one process keeps reader connections for (two connections each); the least recently used
#: are closed first.
READERS_KEPT_MAX = 4


def lsn_text(lsn: int) -> str:
    """``0x16B3748`` -> ``'0/16B3748'``.

    >>> lsn_text(0x16B3748)
    '0/16B3748'
    """
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``'0/16B3748'`` -> ``0x16B3748``.

    >>> parse_lsn("1/0") == 1 << 32
    True
    """
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def psycopg_module() -> Any:
    """psycopg, or a ConnectError naming the extra to install."""
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - the extra is installed in tests
        raise ConnectError(_INSTALL_HINT) from e
    return psycopg


def adbc_module() -> Any:
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


def is_transient(e: BaseException) -> bool:
    """Errors worth retrying, as psycopg's OperationalError covers them for the per-message path: ADBC
    reports a slot busy with another session (SQLSTATE 55006) as a ProgrammingError, and a lost server
    as an OperationalError or by the connection (08) and operator intervention (57) classes."""
    psycopg, adbc = psycopg_module(), adbc_module()
    if isinstance(e, (psycopg.OperationalError, SlotBusy, ReadInterrupted)):
        return True
    if adbc is None or not isinstance(e, adbc.Error):
        return False
    state = getattr(e, "sqlstate", None) or ""
    return isinstance(e, adbc.OperationalError) or state == "55006" or state[:2] in ("08", "57", "53")


def is_busy(e: BaseException) -> bool:
    """The replication slot is active in another session (psycopg's ObjectInUse, ADBC's SQLSTATE 55006)."""
    return (isinstance(e, (psycopg_module().errors.ObjectInUse, SlotBusy))
            or getattr(e, "sqlstate", None) == "55006")


def _is_operational(e: BaseException) -> bool:
    return isinstance(e, psycopg_module().OperationalError)


@dataclass(eq=False)
class ReaderConnections:
    """The connections an executor reads the slot with: ``sql`` (psycopg: the slot check, the query's literals)
    and ``arrow`` (ADBC: the peek as Arrow)."""

    sql: Any
    arrow: Any
    expiry: threading.Timer | None = None  # closes them when kept unused for READER_KEEP_S

    def alive(self) -> bool:
        """Both still answer (a kept pair may have outlived a server restart or an ended backend)."""
        if self.sql.closed or self.sql.broken:
            return False
        try:
            self.sql.execute("select 1").fetchone()
            cur = self.arrow.cursor()
            try:
                cur.execute("select 1")
                cur.fetchone()
            finally:
                cur.close()
        except Exception:  # any failure means: open new ones (a failure of those is reported as usual)
            log.debug("a kept slot reader connection is gone; connecting again", exc_info=True)
            return False
        return True

    def close(self) -> None:
        for conn in (self.arrow, self.sql):
            try:
                conn.close()
            except Exception:  # closing a connection that is already broken
                log.debug("closing a slot reader connection failed", exc_info=True)


class _KeptReaders:
    """This process's idle reader connections by connector (:meth:`PgSession.reader_connections`): at most
    :data:`READERS_KEPT_MAX`, each closed after :data:`READER_KEEP_S` unused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: OrderedDict[str, ReaderConnections] = OrderedDict()

    def take(self, key: str) -> ReaderConnections | None:
        with self._lock:
            conns = self._idle.pop(key, None)
        if conns is not None and conns.expiry is not None:
            conns.expiry.cancel()
        return conns

    def keep(self, key: str, conns: ReaderConnections) -> None:
        with self._lock:
            evicted = [c for c in (self._idle.pop(key, None),) if c is not None]
            self._idle[key] = conns
            while len(self._idle) > READERS_KEPT_MAX:
                evicted.append(self._idle.popitem(last=False)[1])
        for old in evicted:
            if old.expiry is not None:
                old.expiry.cancel()
            old.close()
        conns.expiry = threading.Timer(READER_KEEP_S, self._expire, (key, conns))
        conns.expiry.daemon = True
        conns.expiry.start()

    def _expire(self, key: str, conns: ReaderConnections) -> None:
        with self._lock:
            if self._idle.get(key) is not conns:
                return  # taken since (a take cancels the timer; this one had fired already)
            del self._idle[key]
        conns.close()


_KEPT_READERS = _KeptReaders()


class PgSession:
    """The connections of one PostgreSQL connector (see the module docstring)."""

    def __init__(self, settings: PostgresSettings):
        self.settings = settings
        self._conn: Any = None  # driver connection (not pickled)
        self._snapshot_conn: Any = None  # replication connection holding the exported snapshot (driver)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = state["_snapshot_conn"] = None
        return state

    def __repr__(self) -> str:
        settings = self.settings
        return (f"PgSession({settings.user}@{settings.hostname}:{settings.port}/{settings.dbname}, "
                f"slot={settings.slot_name!r})")

    # ---------------------------------------------------------------------------------- connections
    def conninfo(self, **extra: Any) -> dict[str, Any]:
        """psycopg connection keywords (the password among them: never log this)."""
        settings = self.settings
        info: dict[str, Any] = {"host": settings.hostname, "port": settings.port, "user": settings.user,
                                "dbname": settings.dbname, "sslmode": settings.sslmode, "connect_timeout": 10,
                                "application_name": f"kconnect-{settings.name}"[:63], "options": SESSION_OPTIONS}
        if settings.password is not None:
            info["password"] = settings.password.value()
        info.update(extra)
        return info

    def retry(self, fn: Callable[[], Any], what: str, *,
              is_retriable: Callable[[BaseException], bool] = _is_operational, max_delay_ms: int | None = None) -> Any:
        """``fn()``, retried within errors.retry.timeout while ``is_retriable`` (a slot busy with another
        session: for at least :data:`BUSY_SLOT_WAIT_MS`)."""
        settings = self.settings
        return retry_call(fn, is_retriable=is_retriable, timeout_ms=settings.retry_timeout_ms,
                          max_delay_ms=settings.retry_delay_max_ms if max_delay_ms is None else max_delay_ms,
                          what=f"{settings.name}: {what}", describe=lambda e: str(e).strip(),
                          least_timeout_ms=lambda e: BUSY_SLOT_WAIT_MS if is_busy(e) else 0)

    def connect(self, autocommit: bool = True, **extra: Any) -> Any:
        """A new psycopg connection (``replication="database"`` for a replication connection)."""
        psycopg = psycopg_module()
        return self.retry(lambda: psycopg.connect(autocommit=autocommit, **self.conninfo(**extra)), "connect")

    def adbc_connect(self) -> Any:
        """An ADBC connection from the same keywords (a libpq URI; the password stays in it and is never
        logged)."""
        kw = self.conninfo()
        auth = quote(str(kw.pop("user")), safe="")
        if "password" in kw:
            auth += ":" + quote(str(kw.pop("password")), safe="")
        host = str(kw.pop("host"))
        host = f"[{host}]" if ":" in host else host
        uri = f"postgresql://{auth}@{host}:{kw.pop('port')}/{quote(str(kw.pop('dbname')), safe='')}"
        extra = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in kw.items())
        return adbc_module().connect(uri + (("?" + extra) if extra else ""), autocommit=True)

    @contextmanager
    def reader_connections(self) -> Iterator[ReaderConnections]:
        """The connections to read the slot with (executor): those this process kept from the connector's last
        batch when they still answer, else new ones. Kept again for :data:`READER_KEEP_S` when the block ends
        normally; closed when it raises, or when a generator reading inside it is closed before its end (a
        connection left in the middle of a result is not reused). An idle kept connection holds no slot: a peek
        releases the slot when it returns."""
        key = self._reader_key()
        conns = _KEPT_READERS.take(key)
        if conns is not None and not conns.alive():
            conns.close()
            conns = None
        if conns is None:
            sql_conn = self.connect()
            try:
                conns = ReaderConnections(sql_conn, self.adbc_connect())
            except BaseException:
                sql_conn.close()
                raise
        try:
            yield conns
        except BaseException:
            conns.close()
            raise
        _KEPT_READERS.keep(key, conns)

    def _reader_key(self) -> str:
        """Which kept reader connections are this connector's (a digest: the password is among the keywords)."""
        return hashlib.sha256(repr(sorted(self.conninfo().items())).encode()).hexdigest()

    def _driver(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def query(self, sql: Any, params: Any = None) -> list[tuple]:
        """Rows of ``sql`` on the driver's connection (reopened and retried when it was lost)."""
        psycopg = psycopg_module()

        def run() -> list[tuple]:
            try:
                cur = self._driver().execute(sql, params)
                return cur.fetchall() if cur.description else []
            except psycopg.OperationalError:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise

        return self.retry(run, "query")

    def transaction(self, statements: Sequence[tuple[Any, Any]]) -> None:
        """Run ``(sql, params)`` statements in one transaction on the driver's connection."""
        conn = self._driver()
        with conn.transaction():
            for sql, params in statements:
                conn.execute(sql, params)

    def close(self) -> None:
        """Close the driver's connections (the exported snapshot with them)."""
        self.release_snapshot()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---------------------------------------------------------------------------------- WAL and slot
    def flush_lsn(self) -> int:
        """The server's WAL flush position."""
        return int(self.query("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::int8")[0][0])

    def current_lsn(self) -> int:
        """The server's current WAL write position."""
        return int(self.query("select (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8")[0][0])

    def slot(self) -> tuple[int, int] | None:
        """(confirmed_flush_lsn, restart_lsn) of the slot, or None when it does not exist."""
        settings = self.settings
        rows = self.query("select (confirmed_flush_lsn - '0/0'::pg_lsn)::int8, (restart_lsn - '0/0'::pg_lsn)::int8,"
                          " database, plugin from pg_replication_slots where slot_name = %s", (settings.slot_name,))
        if not rows:
            return None
        cf, rl, db, plugin = rows[0]
        if db != settings.dbname or plugin != "pgoutput":
            raise ConnectError(f"Replication slot {settings.slot_name!r} belongs to database {db!r} with "
                               f"plugin {plugin!r}; choose another slot.name")
        return int(cf), int(rl)

    def create_slot(self, export: bool) -> tuple[int, str | None]:
        """Create the slot over a replication connection: its consistent point and, with ``export``, the name
        of the exported snapshot, whose connection stays open on the driver until :meth:`release_snapshot`."""
        psycopg = psycopg_module()
        slot = self.settings.slot_name
        conn = self.connect(replication="database")
        try:
            kind = "(SNAPSHOT 'export')" if export else "(SNAPSHOT 'nothing')"
            row = conn.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput {kind}').fetchone()
        except psycopg.Error as e:
            conn.close()
            raise ConnectError(f"Cannot create replication slot {slot!r}: {e}") from e
        assert row is not None
        lsn, name = parse_lsn(row[1]), row[2]
        if export:
            self.release_snapshot()
            self._snapshot_conn = conn
        else:
            conn.close()
        log.info("%s: created replication slot %s at %s%s", self.settings.name, slot, row[1],
                 f" with exported snapshot {name}" if export else "")
        return lsn, name

    def release_snapshot(self) -> None:
        """Close the connection that holds the exported snapshot (the snapshot is read, or never will be)."""
        if self._snapshot_conn is not None:
            self._snapshot_conn.close()
            self._snapshot_conn = None

    def drop_slot(self) -> None:
        self.query("select pg_drop_replication_slot(%s)", (self.settings.slot_name,))

    def advance_slot(self, lsn: int) -> None:
        """Move the slot to ``lsn`` (never backwards: an ERROR in PostgreSQL; nothing when already there)."""
        slot = self.slot()
        if slot is None or slot[0] >= lsn:
            return
        self.query("select pg_replication_slot_advance(%s, %s::pg_lsn)", (self.settings.slot_name, lsn_text(lsn)))
        log.debug("%s: advanced slot %s to %s", self.settings.name, self.settings.slot_name, lsn_text(lsn))

    def slot_position(self, conn: Any) -> int | None:
        """confirmed_flush_lsn of the slot read on ``conn`` (an executor's connection), None without a slot."""
        row = conn.execute("select (confirmed_flush_lsn - '0/0'::pg_lsn)::int8 from pg_replication_slots "
                           "where slot_name = %s", (self.settings.slot_name,)).fetchone()
        return None if row is None else int(row[0])

    def slot_holder(self) -> int | None:
        """The PostgreSQL process that has the slot active, if any (on a new connection)."""
        with self.connect() as conn:
            row = conn.execute("select active_pid from pg_replication_slots where slot_name = %s",
                               (self.settings.slot_name,)).fetchone()
        return None if row is None else row[0]

    # ---------------------------------------------------------------------------------- publication
    def publication_tables(self) -> set[tuple[str, str]] | None:
        """Tables of the publication, or None when it does not exist."""
        pub = self.settings.publication_name
        exists = self.query("select puballtables from pg_publication where pubname = %s", (pub,))
        if not exists:
            return None
        rows = self.query("select schemaname, tablename from pg_publication_tables where pubname = %s", (pub,))
        return {(s, t) for s, t in rows}

    def ensure_publication(self, tables: list[tuple[str, str]]) -> None:
        """Create (or, ``filtered``, update) the publication as publication.autocreate.mode says."""
        from psycopg import sql

        mode = self.settings.publication_mode
        pub = self.settings.publication_name
        existing = self.publication_tables()
        ident = sql.Identifier(pub)
        table_list = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in sorted(tables))
        if existing is None:
            if mode is PublicationMode.DISABLED:
                raise ConnectError(f"Publication {pub!r} does not exist and publication.autocreate.mode is "
                                   f"'disabled': create it (CREATE PUBLICATION {pub} FOR TABLE ...) or choose "
                                   f"another mode")
            if mode is PublicationMode.ALL_TABLES:
                self.query(sql.SQL("create publication {} for all tables").format(ident))
            elif mode is PublicationMode.FILTERED and tables:
                self.query(sql.SQL("create publication {} for table {}").format(ident, table_list))
            else:
                self.query(sql.SQL("create publication {}").format(ident))
            log.info("%s: created publication %s (%s)", self.settings.name, pub, mode.value)
        elif mode is PublicationMode.FILTERED and set(tables) != existing and tables:
            self.query(sql.SQL("alter publication {} set table {}").format(ident, table_list))
            log.info("%s: publication %s now covers %s", self.settings.name, pub,
                     ", ".join(f"{s}.{t}" for s, t in tables))

    def signal_table(self) -> tuple[int, list[str]]:
        """(relid, column names in order) of the signal table; fails when it is missing or malformed."""
        signal = self.settings.signal_table
        assert signal is not None
        rows = self.query("""
            select c.oid::int8, array_agg(a.attname::text order by a.attnum)
            from pg_class c join pg_namespace n on n.oid = c.relnamespace
            join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
            where n.nspname = %s and c.relname = %s group by c.oid""", signal)
        name = ".".join(signal)
        if not rows:
            raise ConnectError(f"The signal table {name} (signal.data.collection) does not exist: CREATE TABLE "
                               f"{name} (id varchar(42) primary key, type varchar(32) not null, data varchar)")
        relid, cols = int(rows[0][0]), list(rows[0][1])
        missing = [c for c in ("id", "type", "data") if c not in cols]
        if missing:
            raise ConnectError(f"The signal table {name} lacks the column(s) {', '.join(missing)}: Debezium's "
                               f"layout is (id varchar primary key, type varchar, data varchar)")
        return relid, cols
