"""Shared pieces of the MySQL/MariaDB CDC tests: the run's throwaway MariaDB (ROW binlog, full row metadata,
GTIDs), a fresh database per test, connector configs and reading ranges without Spark."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pymysql

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical
from tests.support import servers

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


def new_database(prefix: str = "cdc") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    execute(f"CREATE DATABASE {name}")
    return name


def config(db: str, **extra: Any) -> dict[str, str]:
    host, port = server()
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
