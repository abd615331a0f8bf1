"""Rogue database servers (issue 33.3 and 33.4): a fake PostgreSQL that asks for the password in clear text, a
fake MySQL that asks for a local file. The worker gives neither the stored password nor any file away."""

from __future__ import annotations

import secrets

import pytest

from security.rogue_servers import FakeMySQL, FakePostgres
from spark_connect_bridge.connectors.jdbc.dialects import MySQLDialect, parse_jdbc_url
from tests.support.waiting import until


def _pg_source(url: str, password: str) -> dict[str, str]:
    # As Confluent's JDBC source documentation writes it.
    return {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": url,
            "connection.user": "app", "connection.password": password, "mode": "bulk", "table.whitelist": "items",
            "topic.prefix": "pg-", "connection.attempts": "1"}


def test_a_masked_password_never_goes_to_a_new_host(start_worker):
    _, api = start_worker()
    stored_secret = "stored-" + secrets.token_hex(8)
    with FakePostgres() as fake:
        config = _pg_source("jdbc:postgresql://127.0.0.1:1/app", stored_secret)  # nothing listens on port 1
        r = api.call("POST", "/connectors", {"name": "j", "config": config, "initial_state": "STOPPED"})
        assert r.status_code == 201, r.text
        # The attack: GET, point connection.url at the attacker's server, PUT back with the masked password.
        edited = dict(api.get("/connectors/j/config"),
                      **{"connection.url": f"jdbc:postgresql://127.0.0.1:{fake.port}/app"})
        assert edited["connection.password"] == "[hidden]"
        r = api.call("PUT", "/connectors/j/config", edited)
        assert r.status_code == 400, r.text
        assert "connection.password" in r.json()["message"] and "connection.url" in r.json()["message"]
        # The same edit carrying a password of its own is the sender's to give: the fake receives that one, which
        # shows the connector does connect to the new host (the stored secret would have gone the same way).
        r = api.call("PUT", "/connectors/j/config", dict(edited, **{"connection.password": "typed-anew"}))
        assert r.status_code == 200, r.text
        assert api.call("PUT", "/connectors/j/resume").status_code == 202
        until(lambda: fake.passwords, timeout=120, what="the connector to log in to the fake PostgreSQL")
        api.wait_state("j", "FAILED")
        assert set(fake.passwords) == {"typed-anew"}
        assert stored_secret.encode() not in fake.received


@pytest.fixture
def secret_file(tmp_path):
    """A file the worker can read and must never send (as its state encryption key)."""
    path = tmp_path / "state.key"
    token = "key-" + secrets.token_hex(16)
    path.write_text(token)
    return path, token.encode()


def test_a_jdbc_source_sends_no_file_to_a_rogue_mysql(start_worker, secret_file):
    path, token = secret_file
    _, api = start_worker()
    with FakeMySQL(str(path)) as fake:  # answers the client's first statement with a LOCAL INFILE request
        config = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
                  "connection.url": f"jdbc:mysql://127.0.0.1:{fake.port}/app", "connection.user": "app",
                  "connection.password": "pw", "mode": "bulk", "table.whitelist": "items", "topic.prefix": "my-",
                  "connection.attempts": "1"}
        assert api.call("POST", "/connectors", {"name": "m", "config": config}).status_code == 201
        until(lambda: fake.file_requests, timeout=120, what="the connector to query the fake MySQL")
        api.wait_state("m", "FAILED")
        assert token not in fake.received


def test_load_data_sends_only_the_file_it_loads(secret_file, tmp_path):
    # The JDBC sink stages rows with LOAD DATA LOCAL INFILE; a rogue server answers it naming another file.
    path, token = secret_file
    staged = tmp_path / "stage.tsv"
    staged.write_text("1\tone\n")
    with FakeMySQL(str(path), on_load_data_only=True) as fake:
        dialect = MySQLDialect(parse_jdbc_url(f"jdbc:mysql://127.0.0.1:{fake.port}/app", "app", "pw"))
        conn = dialect.connect(local_infile=True)
        with pytest.raises(Exception, match="nothing was sent"):
            dialect.load_data(conn, "stage", ["id", "name"], str(staged))
        assert fake.file_requests == 1 and token not in fake.received
    with FakeMySQL(str(staged), on_load_data_only=True) as honest:  # asks for the file being loaded: it comes
        dialect = MySQLDialect(parse_jdbc_url(f"jdbc:mysql://127.0.0.1:{honest.port}/app", "app", "pw"))
        conn = dialect.connect(local_infile=True)
        dialect.load_data(conn, "stage", ["id", "name"], str(staged))
        conn.close()
        assert b"1\tone\n" in honest.received
