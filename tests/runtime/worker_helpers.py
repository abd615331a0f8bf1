"""Helpers for worker tests: an in-process worker on the test run's Spark session, a REST client, waits."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from spark_connect_bridge.runtime.standalone import RunningWorker
from tests.support.waiting import until as wait_for


class Api:
    """A tiny JSON client of the worker's REST API (``api.get("/connectors")``)."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None):
        self.url, self.auth = url, auth

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> requests.Response:
        return requests.request(method, self.url + path, json=body, params=params or None, auth=self.auth,
                                timeout=120)

    def get(self, path: str, **params: Any) -> Any:
        r = self.call("GET", path, **params)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def state(self, name: str) -> str:
        return self.get(f"/connectors/{name}/status")["connector"]["state"]

    def wait_state(self, name: str, state: str, timeout: float = 120.0) -> dict:
        return wait_for(lambda: (s := self.get(f"/connectors/{name}/status"))["connector"]["state"] == state and s,
                        timeout=timeout, what=f"{name} to be {state}")


@pytest.fixture
def start_worker(spark, tmp_path):
    """Start in-process workers on the shared Spark session; closed at the end of the test."""
    started: list[RunningWorker] = []

    def start(**overrides: str) -> tuple[RunningWorker, Api]:
        cfg = {"offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics"),
               "connector.allowed.paths": str(tmp_path),
               "listeners": "http://127.0.0.1:0", "trigger.interval.ms": "500", "status.interval.ms": "200"}
        cfg.update(overrides)
        w = RunningWorker.start(cfg, spark=spark)
        started.append(w)
        assert w.service.wait_ready(60)
        return w, Api(w.url)

    yield start
    for w in started:
        w.close()


def lines(path) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def ciphers_made_together(key_file: str, n: int, locations: Any = None) -> list[Any]:
    """``n`` ConfigCiphers of one key file made at the same moment (workers starting together); asserts none failed
    and each decrypts what every other encrypted (they all took one key)."""
    import threading

    from spark_connect_bridge.runtime.secrets import ConfigCipher

    ciphers, errors, start = [], [], threading.Barrier(n)

    def make() -> None:
        start.wait()
        try:
            ciphers.append(ConfigCipher(key_file, locations))
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=make) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(ciphers) == n
    for c in ciphers:
        token = c.encrypt({"password": "secret"})
        assert all(other.decrypt(token) == {"password": "secret"} for other in ciphers)
    return ciphers
