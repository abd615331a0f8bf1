"""A throwaway PostgreSQL cluster for tests and benchmarks: ``wal_level=logical``, loopback only, temp dir.

Started from the Debian binaries (``/usr/lib/postgresql/<v>/bin``). ``initdb`` refuses to run as root, so when
the caller is root the data directory is handed to the ``postgres`` user and the server runs as that user
(``runuser``). Authentication is ``trust`` on 127.0.0.1; the superuser is ``postgres``.

>>> with PostgresCluster() as pg:                   # doctest: +SKIP
...     with psycopg.connect(pg.dsn()) as conn:
...         conn.execute("select 1")

In pytest, use one cluster per session (it takes ~2 s to start)::

    @pytest.fixture(scope="session")
    def pg_cluster():
        with PostgresCluster() as pg:
            yield pg
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["PostgresCluster", "pg_bin_dir", "free_port"]


def pg_bin_dir() -> str:
    """The newest installed PostgreSQL binary directory (``PG_BIN`` overrides)."""
    if os.environ.get("PG_BIN"):
        return os.environ["PG_BIN"]
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    if not dirs:
        raise RuntimeError("No PostgreSQL binaries under /usr/lib/postgresql/*/bin: apt-get install postgresql")
    return dirs[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """A private PostgreSQL server in a temporary directory; :meth:`stop` removes everything.

    ``settings`` are extra ``postgresql.conf`` lines (``{"max_wal_size": "4GB"}``).
    """

    def __init__(self, port: int | None = None, settings: Mapping[str, Any] | None = None,
                 database: str = "test"):
        self.bin = pg_bin_dir()
        self.port = port or free_port()
        self.database = database
        self.settings = {"wal_level": "logical", "max_replication_slots": 20, "max_wal_senders": 20,
                         "listen_addresses": "'127.0.0.1'", "fsync": "off",
                         "full_page_writes": "off", "shared_buffers": "'128MB'", "max_wal_size": "'2GB'",
                         "log_min_messages": "warning", "TimeZone": "'UTC'"}
        self.settings.update(settings or {})
        self.root = tempfile.mkdtemp(prefix="kconnect-pg-")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "server.log")
        self._user: str | None = "postgres" if os.geteuid() == 0 else None
        self.running = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self._user:
            cmd = ["runuser", "-u", self._user, "--"] + cmd
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def init(self) -> PostgresCluster:
        if self._user:
            shutil.chown(self.root, self._user)
            os.chmod(self.root, 0o700)
        self._run(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--locale=C.UTF-8")
        conf = "".join(f"{k} = {v}\n" for k, v in self.settings.items())
        conf += f"port = {self.port}\nunix_socket_directories = '{self.root}'\n"
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(conf)
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as f:
            f.write("host replication all 127.0.0.1/32 trust\n")
        return self

    def start(self) -> PostgresCluster:
        if not os.path.exists(self.data):
            self.init()
        r = self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", self.log, "-w", "-t", "60",
                      "start", check=False)
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {r.stdout}{r.stderr}\n{self.server_log()}")
        self.running = True
        self._wait_ready()
        self._ensure_database()
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: smart, fast or immediate); the data directory stays."""
        if self.running:
            self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "-t", "60", "stop",
                      check=False)
            self.running = False

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    # -- access ------------------------------------------------------------------------------------
    def dsn(self, database: str | None = None, **extra: Any) -> str:
        parts = {"host": "127.0.0.1", "port": self.port, "user": "postgres", "dbname": database or self.database}
        parts.update(extra)
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def connector_config(self, database: str | None = None) -> dict[str, str]:
        """Debezium-style connection keys for this server."""
        return {"database.hostname": "127.0.0.1", "database.port": str(self.port), "database.user": "postgres",
                "database.password": "", "database.dbname": database or self.database}

    def execute(self, sql: str, params: Any = None, database: str | None = None) -> list[tuple]:
        """Run one statement in autocommit mode; return its rows (empty when it returns none)."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def drop_slots(self, where: str = "true", database: str | None = None, timeout: float = 30.0) -> None:
        """Drop the replication slots ``where`` selects (a condition on ``pg_replication_slots``), waiting for each
        to be free: a stopped query's streaming runner lets go of its slot a moment after ``query.stop()`` or
        ``awaitTermination()`` returned (PostgreSQL's ObjectInUse meanwhile)."""
        import time

        sql = f"select pg_drop_replication_slot(slot_name) from pg_replication_slots where {where}"
        free = f"select count(*) from pg_replication_slots where ({where}) and active"
        deadline = time.monotonic() + timeout
        while self.execute(free, database=database)[0][0] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.execute(sql, database=database)

    def new_database(self, prefix: str) -> str:
        """Create a database with a fresh name (``<prefix>_<8 hex>``), so each test has its own tables,
        publication and slot; return its name."""
        import uuid

        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.execute(f'create database "{name}"', database="postgres")
        return name

    def server_log(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            if not conn.execute("select 1 from pg_database where datname = %s", (self.database,)).fetchone():
                conn.execute(f'create database "{self.database}"')
