"""Kafka Connect's REST contract where ours differed: JSON 405s for the methods Kafka does not serve, a listen
backlog that holds bursts of clients, and ``/admin/loggers`` (KIP-495)."""

from __future__ import annotations

import concurrent.futures
import logging

import pytest
import requests

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE", "PATCH"])
def test_unsupported_methods_answer_a_json_405(rest_only, method):
    _, api = rest_only()
    r = requests.request(method, api.url + "/connectors", timeout=30)
    assert r.status_code == 405
    assert set(r.headers["Allow"].split(", ")) == {"GET", "POST"}
    if method != "HEAD":
        assert r.headers["Content-Type"] == "application/json" and r.json()["error_code"] == 405
    r = requests.request(method, api.url + "/no/such/thing", timeout=30)
    assert r.status_code == 404


def test_fifty_concurrent_clients_are_all_served(rest_only):
    _, api = rest_only()

    def one(i: int) -> int:
        return requests.get(api.url + "/connectors", timeout=60).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        statuses = list(pool.map(one, range(200)))
    assert statuses == [200] * 200


def test_admin_loggers_read_and_set_levels(rest_only):
    _, api = rest_only()
    name = "spark_connect_bridge.runtime"
    child = logging.getLogger(name + ".worker")
    before = (logging.getLogger(name).level, child.level)
    try:
        assert api.get("/admin/loggers")["root"]["level"] in ("INFO", "WARN", "ERROR", "DEBUG")
        r = api.call("PUT", f"/admin/loggers/{name}", {"level": "DEBUG"})
        assert r.status_code == 200 and name in r.json() and name + ".worker" in r.json()
        assert child.getEffectiveLevel() == logging.DEBUG
        got = api.get(f"/admin/loggers/{name}")
        assert got["level"] == "DEBUG" and isinstance(got["last_modified"], int)
        assert api.get("/admin/loggers")[name]["level"] == "DEBUG"
        assert api.call("PUT", f"/admin/loggers/{name}", {"level": "LOUD"}).status_code == 400
        assert api.call("PUT", f"/admin/loggers/{name}", {}).status_code == 400
        assert api.call("GET", "/admin/loggers/no.such.logger.anywhere").status_code == 404
    finally:
        logging.getLogger(name).setLevel(before[0])
        child.setLevel(before[1])
