"""Fixtures and builders for the JDBC connector tests: throwaway PostgreSQL/MariaDB databases on the run's
shared servers (tests/support/servers.py), SQLite files in tmp dirs, and Arrow record batches."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pytest

from tests.support import servers

# (host, port) of the run's PostgreSQL and MariaDB (tests/support/servers.py), set by the pg_db/my_db fixtures.
PG: tuple[str, int] = ("127.0.0.1", 0)
MY: tuple[str, int] = ("127.0.0.1", 0)


def ensure_postgres() -> None:
    global PG
    PG = servers.postgres()


def ensure_mariadb() -> None:
    global MY
    MY = servers.mariadb()


@pytest.fixture(scope="module")
def pg_db():
    """A fresh PostgreSQL database; yields its name and drops it afterwards."""
    import psycopg

    ensure_postgres()
    name = "kc_jdbc_" + uuid.uuid4().hex[:10]
    with psycopg.connect(host=PG[0], port=PG[1], user="postgres", dbname="test", autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(host=PG[0], port=PG[1], user="postgres", dbname="test", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def my_db():
    """A fresh MariaDB database; yields its name and drops it afterwards."""
    import pymysql

    ensure_mariadb()
    name = "kc_jdbc_" + uuid.uuid4().hex[:10]
    c = pymysql.connect(host=MY[0], port=MY[1], user="root", autocommit=True)
    c.cursor().execute(f"CREATE DATABASE `{name}`")
    yield name
    c.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    c.close()


def pg_url(db: str) -> str:
    return f"jdbc:postgresql://{PG[0]}:{PG[1]}/{db}?user=postgres"


def my_url(db: str) -> str:
    return f"jdbc:mariadb://{MY[0]}:{MY[1]}/{db}?user=root"


def pg_conn(db: str, autocommit: bool = True):
    import psycopg

    return psycopg.connect(host=PG[0], port=PG[1], user="postgres", dbname=db, autocommit=autocommit)


def my_conn(db: str, autocommit: bool = True):
    import pymysql

    return pymysql.connect(host=MY[0], port=MY[1], user="root", database=db, autocommit=autocommit)


def query(conn, sql: str, params=None) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    rows = cur.fetchall() if cur.description else []
    cur.close()
    return [tuple(r) for r in rows]


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def records(values: list[dict | None], value_type: pa.DataType, *, keys: list | None = None,
            key_type: pa.DataType = pa.binary(), topic: str = "t", partition: int = 0,
            first_offset: int = 0) -> pa.RecordBatch:
    """A record batch (key, value, topic, partition, offset, timestamp, headers)."""
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [pa.array(keys if keys is not None else [None] * n, key_type), pa.array(values, value_type),
         pa.array([topic] * n), pa.array([partition] * n, pa.int32()),
         pa.array(range(first_offset, first_offset + n), pa.int64()),
         pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * n, pa.timestamp("us", tz="UTC")),
         pa.nulls(n, HEADERS)],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])
