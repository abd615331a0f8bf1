"""A throwaway MariaDB server for tests and benchmarks: loopback, free port, temp dir, ROW binlog with full
row metadata and GTIDs (what binlog CDC needs), root without a password.

Started from Debian's ``mariadb-server`` binaries (``mariadb-install-db``, ``mariadbd``). As root the data
directory belongs to the ``mysql`` user and the server runs as that user.

>>> with MariaDBServer() as my:                       # doctest: +SKIP
...     my.execute("select 1")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

from tests.support.postgres import free_port
from tests.support.process_server import ProcessServer

__all__ = ["MariaDBServer", "mariadbd"]


def mariadbd() -> str:
    """The server binary (``MARIADBD`` overrides)."""
    path = os.environ.get("MARIADBD") or shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    if not os.path.exists(path):
        raise RuntimeError("No mariadbd: apt-get install mariadb-server (or set MARIADBD)")
    return path


class MariaDBServer(ProcessServer):
    """A private MariaDB server in a temporary directory; :meth:`destroy` removes everything."""

    name = "mariadbd"

    def __init__(self, port: int | None = None, settings: dict[str, Any] | None = None):
        self.port = port or free_port()
        self.root = tempfile.mkdtemp(prefix="kconnect-mariadb-")
        self.data = os.path.join(self.root, "data")
        self.socket = os.path.join(self.root, "mysqld.sock")
        self.log = os.path.join(self.root, "server.log")
        self.settings: dict[str, Any] = {
            "bind-address": "127.0.0.1", "port": self.port, "socket": self.socket, "datadir": self.data,
            "log-error": self.log, "pid-file": os.path.join(self.root, "mysqld.pid"),
            "server-id": 1, "log-bin": "mysql-bin", "binlog-format": "ROW", "binlog-row-image": "FULL",
            "binlog-row-metadata": "FULL", "gtid-strict-mode": 1, "skip-name-resolve": 1,
            "innodb-buffer-pool-size": "128M", "innodb-flush-log-at-trx-commit": 2, "sync-binlog": 0,
            "innodb-doublewrite": 0, "character-set-server": "utf8mb4", "collation-server": "utf8mb4_general_ci",
            "default-time-zone": "+00:00", "max-connections": 300,
        }
        self.settings.update(settings or {})
        self._user = "mysql" if os.geteuid() == 0 else None
        self.process: subprocess.Popen | None = None

    def _config(self) -> str:
        path = os.path.join(self.root, "my.cnf")
        with open(path, "w") as f:
            f.write("[mariadbd]\n" + "".join(f"{k}={v}\n" for k, v in self.settings.items()))
        return path

    def init(self) -> None:
        config = self._config()
        if self._user:
            shutil.chown(self.root, self._user, self._user)
        cmd = [shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db", f"--defaults-file={config}",
               f"--datadir={self.data}", "--auth-root-authentication-method=normal", "--skip-test-db"]
        if self._user:
            cmd.append(f"--user={self._user}")
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def start(self, timeout: float = 60) -> MariaDBServer:
        if not os.path.exists(self.data):
            self.init()
        cmd = [mariadbd(), f"--defaults-file={self._config()}"]
        if self._user:
            cmd.append(f"--user={self._user}")
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_for_port(timeout)
        self._grant_loopback_root()
        return self

    def _grant_loopback_root(self) -> None:
        """root over TCP from 127.0.0.1 (skip-name-resolve: 'localhost' would not match), no password."""
        import pymysql

        with pymysql.connect(unix_socket=self.socket, user="root") as conn, conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''")
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")

    def server_log(self) -> str:
        if not os.path.exists(self.log):
            return ""
        with open(self.log, errors="replace") as f:
            return f.read()[-4000:]

    def execute(self, sql: str, params: Any = None, database: str | None = None) -> list[tuple]:
        import pymysql

        with pymysql.connect(host="127.0.0.1", port=self.port, user="root", database=database,
                             autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
