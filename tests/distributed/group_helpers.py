"""A group of ``kconnect distributed`` workers as real processes on loopback, sharing one directory (checkpoints,
topic store, key file) and one group store (Kafka, or PostgreSQL), each driven over HTTP."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests

from tests.support.postgres import free_port
from tests.support.processes import interrupt, wait_or_kill
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parents[2]


def worker_properties(shared: Path, store: Mapping[str, str], port: int, group: str, session_timeout_ms: int = 4000,
                      spark: Mapping[str, str] | None = None) -> str:
    """The README's conf file as it is, then this worker's settings: its port, the group, the store (``store``:
    ``{"group.store.url": ...}`` after ``conf/connect-distributed-postgres.properties``; else the Kafka keys, e.g.
    ``bootstrap.servers``, after Kafka's ``conf/connect-distributed.properties``), the shared directories, short
    timeouts, no warm-up query (``warm.up.enable=false``) and a light Spark driver (``spark``: other spark.* keys,
    e.g. a cluster's). Later keys win."""
    spark = dict(spark or {"spark.master": "local[1]", "spark.driver.memory": "512m"})
    own = {"group.id": group, "listeners": f"http://127.0.0.1:{port}", "rest.advertised.host.name": "127.0.0.1",
           "rest.advertised.port": str(port), "heartbeat.interval.ms": str(max(100, session_timeout_ms // 8)),
           "session.timeout.ms": str(session_timeout_ms), "scheduled.rebalance.max.delay.ms": "0",
           **store, "offset.storage.dir": str(shared / "state"),
           "topics.dir": str(shared / "topics"), "connector.allowed.paths": str(shared),
           "trigger.interval.ms": "500", "status.interval.ms": "200", "spark.sql.shuffle.partitions": "1",
           "spark.ui.enabled": "false", "spark.python.authenticate.socketTimeout": "300s",
           "warm.up.enable": "false", **spark}  # start-up itself is tests/runtime/test_warm_up.py's
    conf = "connect-distributed-postgres.properties" if "group.store.url" in store else "connect-distributed.properties"
    readme = (ROOT / "conf" / conf).read_text()
    return readme + "\n# --- this test worker ---\n" + "".join(f"{k}={v}\n" for k, v in own.items())


class GroupWorker:
    """One ``kconnect distributed`` process and a JSON client of its REST API."""

    def __init__(self, shared: Path, store: Mapping[str, str], group: str, name: str, *,
                 session_timeout_ms: int = 4000, spark: Mapping[str, str] | None = None):
        self.name, self.shared = name, shared
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker_id = f"127.0.0.1:{self.port}"
        self.props = shared / f"{name}.properties"
        self.props.write_text(worker_properties(shared, store, self.port, group, session_timeout_ms, spark))
        self.stderr_path = shared / f"{name}.stderr"
        self.proc: subprocess.Popen | None = None
        self._stderr: Any = None
        self._interrupted = False

    def start(self) -> GroupWorker:
        kconnect = Path(sys.executable).with_name("kconnect")
        cmd = [str(kconnect)] if kconnect.exists() else [sys.executable, "-m", "spark_connect_bridge.cli"]
        self._stderr = open(self.stderr_path, "a")
        # A session of its own: pause() and kill_all() reach the worker's Spark JVM and Python workers too.
        self.proc = subprocess.Popen(cmd + ["-v", "distributed", str(self.props), "--no-live"], cwd=self.shared,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr, start_new_session=True)
        return self

    def wait_healthy(self) -> None:
        until(lambda: self.alive() and requests.get(self.url + "/health", timeout=5).status_code == 200,
              timeout=300, what=f"{self.name}'s /health")

    def alive(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.stderr()[-3000:]
        return True

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        self.alive()
        return requests.request(method, self.url + path, json=body, timeout=60)

    def get(self, path: str) -> Any:
        r = self.call("GET", path)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def status(self, name: str) -> dict:
        return self.get(f"/connectors/{name}/status")

    def stderr(self) -> str:
        if self._stderr is not None:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self._interrupted = self._interrupted or sig == signal.SIGINT

    def pause(self) -> None:
        """SIGSTOP to every process of the worker (its Spark JVM too), as a paused machine or a long GC."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def kill_all(self) -> None:
        """``kill -9`` of every process of the worker (its Spark JVM too), as a machine that died."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def kill(self) -> None:
        """``kill -9``: no clean leave, no query stop; its lease runs out."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        """A clean stop (SIGINT, as Ctrl-C): queries stopped, the group left."""
        if self.proc is not None:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGCONT)  # a paused worker's JVM too
            if self._interrupted:  # one Ctrl-C already sent: a second one would stop it at once, not cleanly
                wait_or_kill(self.proc)
            else:
                interrupt(self.proc)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
