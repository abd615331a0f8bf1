"""Confluent JDBC connectors open connections within ``connection.attempts`` / ``connection.backoff.ms``, and a
refused login is a plain error at once, not a transient failure retried for 20 s."""

from __future__ import annotations

import logging
import os
import time

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConnectError, RetriableError
from tests.support.postgres import PostgresCluster, free_port


@pytest.fixture(scope="module")
def password_pg():
    """A PostgreSQL whose user ``app`` must give its password (scram-sha-256); everything else is trusted."""
    with PostgresCluster() as pg:
        pg.execute("create role app login password 'right-horse-battery'")
        pg.execute("create table items (id int primary key, name text); insert into items values (1, 'one');"
                   "grant select on items to app")
        hba = os.path.join(pg.data, "pg_hba.conf")
        with open(hba, encoding="utf-8") as f:
            rules = f.read()
        with open(hba, "w", encoding="utf-8") as f:  # first match wins: app's rule goes before the trust lines
            f.write("host all app 127.0.0.1/32 scram-sha-256\n" + rules)
        pg.execute("select pg_reload_conf()")
        yield pg


def _source(port: int, password: str, **extra: str) -> dict[str, str]:
    # As Confluent's JDBC source documentation writes it.
    return {"name": "jdbc-items", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{port}/test", "connection.user": "app",
            "connection.password": password, "mode": "bulk", "table.whitelist": "items", "topic.prefix": "pg-",
            **extra}


def test_the_right_password_connects(password_pg):
    src = build_connector(_source(password_pg.port, "right-horse-battery"), kind="source")
    assert list(src.initial_offsets()) == ['{"table":"items"}']


def test_a_refused_login_fails_at_once_without_echoing_the_password(password_pg, caplog):
    src = build_connector(_source(password_pg.port, "wrong-horse-battery"), kind="source")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(ConnectError) as err:
        src.initial_offsets()
    assert time.monotonic() - started < 5  # connection.backoff.ms is 10 s: not one retry was made
    message = str(err.value)
    assert "refused the login" in message and "password authentication failed" in message
    assert "wrong-horse-battery" not in message
    assert not isinstance(err.value, RetriableError)
    assert not [r for r in caplog.records if "attempt" in r.getMessage()]


def test_an_unreachable_server_is_tried_connection_attempts_times(caplog):
    port = free_port()  # nothing listens there
    src = build_connector(_source(port, "x", **{"connection.attempts": "3", "connection.backoff.ms": "200"}),
                          kind="source")
    with caplog.at_level(logging.WARNING), pytest.raises(RetriableError) as err:
        src.initial_offsets()
    assert "after 3 attempt(s) (connection.attempts=3)" in str(err.value)
    retries = [r.getMessage() for r in caplog.records if "next in" in r.getMessage()]
    assert len(retries) == 2 and "attempt 1 of 3" in retries[0] and "attempt 2 of 3" in retries[1]


def test_errors_retry_timeout_keeps_trying_past_the_attempts(caplog):
    port = free_port()
    src = build_connector(_source(port, "x", **{"connection.attempts": "1", "connection.backoff.ms": "200",
                                                 "errors.retry.timeout": "1000"}), kind="source")
    with caplog.at_level(logging.WARNING), pytest.raises(RetriableError):
        src.initial_offsets()
    assert len([r for r in caplog.records if "next in" in r.getMessage()]) >= 3
