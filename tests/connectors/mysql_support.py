"""Shared pieces of the MySQL/MariaDB CDC tests: the run's throwaway MariaDB (ROW binlog, full row metadata,
GTIDs), a fresh database per test, connector configs and reading ranges without Spark."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pymysql

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical
from tests.support import servers
from tests.support.mariadb import MariaDBServer

_server_ids = itertools.count(1000)


def server() -> tuple[str, int]:
    return servers.mariadb()


def execute(sql: str, params: Any = None, database: str | None = None) -> list[tuple]:
    host, port = server()
    with pymysql.connect(host=host, port=port, user="root", database=database, autocommit=True,
                         init_command="SET time_zone = '+00:00'") as conn, conn.cursor() as cur:
        out: list[tuple] = []
        for statement in [s for s in sql.split(";\n") if s.strip()]:
            cur.execute(statement, params)
            if cur.description:
                out = [tuple(r) for r in cur.fetchall()]
        return out


def new_database(prefix: str = "cdc", execute: Callable[..., Any] = execute) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    execute(f"CREATE DATABASE {name}")
    return name


@contextlib.contextmanager
def restartable_mariadb() -> Iterator[MariaDBServer]:
    """A MariaDB a test may stop and start again (same port and data): the run's own when this run started it
    (saves a server's initialisation), else a private one."""
    servers.mariadb()
    shared = servers._started.get("mariadb")
    if shared is not None:
        yield shared
        if shared.process is None:
            shared.start()
        return
    with MariaDBServer() as private:
        yield private


def config(db: str, port: int | None = None, **extra: Any) -> dict[str, str]:
    host, shared_port = server()
    port = port or shared_port
    return {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "database.hostname": host,
            "database.port": str(port), "database.user": "root", "database.server.id": str(next(_server_ids)),
            "topic.prefix": "shop", "database.include.list": db,
            **{k: str(v) for k, v in extra.items()}}


def read(connector: Any, start: dict, end: dict) -> list[dict]:
    return [row for t in connector.plan(start, end) for r in t.ranges for batch in connector.read_range(r)
            for row in batch.to_pylist()]


def source(cfg: dict) -> Any:
    return build_connector(cfg, kind="source")


def step(connector: Any, pos: dict, limit: int | None = None) -> tuple[dict, list[dict]]:
    end = canonical(connector.latest_offsets(pos, limit, None))
    return end, read(connector, pos, end)
