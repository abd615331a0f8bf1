"""Issue 33, item 1 and the dead Spark session of item 2, on a worker started as a user starts it (``kconnect
standalone``, a subprocess), driven over HTTP only.

1. Code through Python's module path: connectors write ``deltalake.py`` into the worker's own directory (allowed here
   on purpose, as the old default allowed it); the connectors that follow import ``deltalake`` in fresh Python
   processes and must not run the planted one. Every Python process Spark starts runs with ``PYTHONSAFEPATH``.
2. ``java_method('java.lang.System', 'exit', 0)`` stopped the JVM while every connector still said RUNNING: here the
   JVM is killed, and every connector's status says FAILED with the cause, ``/health`` says so, and the worker exits.
"""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.acceptance.test_worker_http import HttpWorker
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    root = tmp_path_factory.mktemp("process-attacks")
    # A new Python process per task (no reuse): every task after the plant imports its modules afresh, as a
    # worker's new processes do sooner or later.
    w = HttpWorker(root, {"connector.allowed.paths": ".", "rest.sql.expressions.enable": "true",
                          "spark.python.worker.reuse": "false"})
    yield w
    w.close()


def _descendants(pid: int, word: str) -> list[psutil.Process]:
    """The processes under ``pid`` whose command line has ``word`` (those that end meanwhile left out)."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if word in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_a_module_planted_in_the_workers_directory_is_never_imported(worker):
    root, marker = worker.root, worker.root / "planted.ran"
    (root / "seed.txt").write_text("seed\n")
    # The chain: a Sql transform makes the line, a FileStreamSink writes it as deltalake.py in the worker's
    # directory (the Python workers' working directory).
    code = f'import pathlib; pathlib.Path("{marker}").write_text("ran")'
    worker.create("plant-src", {"connector.class": "FileStreamSource", "file": str(root / "seed.txt"),
                                "topic": "plant", "transforms": "q", "transforms.q.type": "Sql",
                                "transforms.q.select": f"'{code}' AS value"})
    worker.create("plant-sink", {"connector.class": "FileStreamSink", "file": str(root / "deltalake.py"),
                                 "topics": "plant"})
    planted = root / "deltalake.py"
    until(lambda: worker.healthy("plant-src", "plant-sink") and planted.exists()
          and planted.read_text().strip() == code, timeout=300, what="deltalake.py planted in the worker's directory")
    # A connector started now commits to the topic store (Delta, through deltalake) in a new Python process: without
    # PYTHONSAFEPATH it fails with "cannot import name 'DeltaTable' from 'deltalake' (<worker dir>/deltalake.py)".
    (root / "more.txt").write_text("a\nb\n")
    worker.create("after-src", {"connector.class": "FileStreamSource", "file": str(root / "more.txt"),
                                "topic": "after"})
    until(lambda: worker.healthy("after-src")
          and worker.get("/connectors/after-src/status")["metrics"]["records_out_total"] >= 2, timeout=300,
          what="the records of the connector started after the plant, committed")
    assert not marker.exists(), "a Python process of the worker imported the planted deltalake.py"
    daemons = _descendants(worker.proc.pid, "pyspark.daemon")
    assert daemons, "no Python daemon under the worker"
    for daemon in daemons:
        assert daemon.environ().get("PYTHONSAFEPATH") == "1", daemon.cmdline()
        assert daemon.cwd() == str(root)  # what made the attack work: the daemons run in the worker's directory


def test_a_dead_spark_jvm_fails_every_connector_and_the_worker_exits(worker):
    names = worker.get("/connectors")
    assert names, "the connectors of the previous test"
    jvms = _descendants(worker.proc.pid, "org.apache.spark.deploy.SparkSubmit")
    assert len(jvms) == 1, [p.cmdline()[:2] for p in jvms]
    jvms[0].send_signal(signal.SIGKILL)  # as System.exit through java_method did

    def all_failed() -> bool:
        for name in names:
            status = worker.get(f"/connectors/{name}/status")
            if status["connector"]["state"] != "FAILED" or "Spark session is gone" not in status["connector"]["trace"]:
                return False
            assert all(t["state"] == "FAILED" for t in status["tasks"])
        return True

    until(all_failed, timeout=60, what="every connector FAILED with the cause")
    health = worker.call("GET", "/health")
    assert health.status_code == 503 and "Spark session is gone" in health.json()["message"]
    assert worker.proc.wait(120) == 1  # a supervisor restarts it; each connector resumes from its checkpoint
    assert "Spark session is gone" in worker.stderr()
