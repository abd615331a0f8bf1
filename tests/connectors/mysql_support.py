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

#: a table with every MySQL type family, and a row of values for it (``TYPE_VALUES % id``)
TYPES = """
create table {db}.types (
  id int primary key, ti tinyint, tiu tinyint unsigned, si smallint, siu smallint unsigned, mi mediumint,
  miu mediumint unsigned, i int, iu int unsigned, bi bigint, biu bigint unsigned, f float, d double,
  dec1 decimal(10, 2), dec2 decimal(30, 10), b1 bit(1), b10 bit(10), ch char(5), vc varchar(300), tx text,
  bin binary(3), vb varbinary(10), bl blob, dt date, tm time(6), tm0 time, dtm datetime, dtm3 datetime(3),
  dtm6 datetime(6), ts timestamp(6) null, yr year, en enum('a', 'b''c', 'z'), st set('x', 'y', 'z'), js json,
  pt point)
"""

TYPE_VALUES = ("(%s, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
                "-9223372036854775808, 18446744073709551615, 1.5, -2.25, -12345678.91, "
                "-12345678901234567890.0123456789, 1, b'1000000011', 'ab', 'varchar ünïcode', 'long text', "
                "x'010203', x'ff00', x'00ff10', '1999-12-31', '-838:59:59.000000', '12:34:56', "
                "'2024-02-29 23:59:59', '2024-02-29 23:59:59.123', '1970-01-01 00:00:00.000001', "
                "'2024-01-02 03:04:05.500000', 2155, 'b''c', 'x,z', '{\"k\": [1, 2]}', "
                "ST_GeomFromText('POINT(1 2)', 4326))")


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
