"""``kconnect standalone`` in a subprocess: killed with SIGKILL and restarted (as ``kconnect worker``), its
connectors come back in their target states, from their checkpoints, with nothing lost or duplicated.

The worker sets default converters (StringConverter) as Kafka workers do, so the source writes bytes into the
topic store and the sink parses them back; the datagen connector overrides them with its own JsonConverter.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest
import requests

from .worker_helpers import Api, lines, wait_for

pytestmark = pytest.mark.timeout(600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kconnect(*args: str, log=None) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.Popen([sys.executable, "-m", "spark_connect_bridge.cli", *args], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _kill9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the worker and its Spark JVM, like a machine crash
    proc.wait(timeout=60)


def _records_in(api: Api, name: str) -> int:
    return int(api.get(f"/connectors/{name}/status")["metrics"]["records_in_total"])


def test_killed_worker_resumes_connectors_in_their_states_without_loss(tmp_path):
    port = _free_port()
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    (tmp_path / "worker.properties").write_text(f"""
listeners=http://127.0.0.1:{port}
offset.storage.dir={tmp_path}/state
topics.dir={tmp_path}/topics
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
trigger.interval.ms=500
warm.up.enable=false
spark.master=local[2]
spark.ui.enabled=false
spark.driver.host=127.0.0.1
spark.sql.shuffle.partitions=2
""")
    (tmp_path / "source.properties").write_text(f"name=lines\nconnector.class=FileStreamSource\nfile={src}\n"
                                                f"topic=connect-test\n")
    (tmp_path / "sink.properties").write_text(f"name=lines-sink\nconnector.class=FileStreamSink\nfile={out}\n"
                                              f"topics=connect-test\n")
    (tmp_path / "datagen.json").write_text(json.dumps({
        "name": "orders", "initial_state": "PAUSED",
        "config": {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
                   "max.interval": "0", "iterations": "10",
                   "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                   "value.converter.schemas.enable": "false"}}))
    src.write_text("".join(f"line-{i}\n" for i in range(1, 21)))
    api = Api(f"http://127.0.0.1:{port}")
    log1 = open(tmp_path / "worker1.log", "wb")
    p1 = _kconnect("standalone", str(tmp_path / "worker.properties"), str(tmp_path / "source.properties"),
                   str(tmp_path / "sink.properties"), str(tmp_path / "datagen.json"), "--no-live", log=log1)
    try:
        wait_for(lambda: lines(out) == [f"line-{i}" for i in range(1, 21)], timeout=240,
                 what="the first 20 lines through the first worker")
        # stdout is a file, not a terminal: no live table, but a line per state change and per new batches
        log = wait_for(lambda: "connector lines: " in (t := (tmp_path / "worker1.log").read_text()) and t,
                       what="a line for the source's batches in the worker's output")
        assert re.search(r"^\S+ \S+ connector lines \(source, 1 tasks\): RUNNING$", log, re.M), log
        assert re.search(r"^\S+ \S+ connector orders \(source, 1 tasks\): PAUSED$", log, re.M), log
        assert re.search(r"^\S+ \S+ connector lines: \d+ batch(es)?, [\d,]+ records in \([\d,]+ in, ", log, re.M), log
        assert api.state("orders") == "PAUSED"
        with open(src, "a") as f:
            f.writelines(f"line-{i}\n" for i in range(21, 41))
        wait_for(lambda: len(lines(out)) > 20, what="the second lines to start flowing")
        counted = wait_for(lambda: (n := _records_in(api, "lines")) > 20 and n,
                           what="the status to count some of lines 21-40")
    finally:
        _kill9(p1)
    with open(src, "a") as f:
        f.writelines(f"line-{i}\n" for i in range(41, 51))

    log2 = open(tmp_path / "worker2.log", "wb")
    p2 = _kconnect("worker", str(tmp_path / "worker.properties"), "--no-live", log=log2)
    try:
        wait_for(lambda: len(lines(out)) >= 50, timeout=240, what="50 lines through the restarted worker")
        assert lines(out) == [f"line-{i}" for i in range(1, 51)]  # nothing lost, nothing twice
        assert sorted(api.get("/connectors")) == ["lines", "lines-sink", "orders"]
        assert api.state("orders") == "PAUSED"
        api.wait_state("lines", "RUNNING")
        # The totals go on from what the killed worker had counted (saved as it counted them), plus lines 41-50
        # at least; a worker that lost them would count only what its own query reads again (at most 30).
        wait_for(lambda: _records_in(api, "lines") >= counted + 10, what="the source's total to go on")
        import deltalake

        assert deltalake.DeltaTable(str(tmp_path / "topics" / "connect-test")).count() == 50
        assert api.get("/connectors/lines/offsets") == {
            "offsets": [{"partition": {"filename": str(src)}, "offset": {"position": src.stat().st_size}}]}

        # the kconnect CLI over the same REST API
        cli = [sys.executable, "-m", "spark_connect_bridge.cli"]
        listed = subprocess.run(cli + ["connectors", "list", "--url", api.url], capture_output=True, text=True,
                                check=True).stdout
        assert "orders" in listed and "PAUSED" in listed and "lines-sink" in listed
        got = json.loads(subprocess.run(cli + ["offsets", "get", "lines", "--url", api.url], capture_output=True,
                                        text=True, check=True).stdout)
        assert got["offsets"][0]["offset"] == {"position": src.stat().st_size}
        subprocess.run(cli + ["connectors", "resume", "orders", "--url", api.url], check=True,
                       capture_output=True)
        api.wait_state("orders", "RUNNING")
        bad = subprocess.run(cli + ["connectors", "status", "missing", "--url", api.url], capture_output=True,
                             text=True)
        assert bad.returncode == 1 and "HTTP 404: Connector missing not found" in bad.stderr
        with open(src, "a") as f:
            f.writelines(f"line-{i}\n" for i in range(51, 61))
        wait_for(lambda: len(lines(out)) > 50, what="lines 51.. to start flowing")
        # An impatient Ctrl-C: the second one, while the worker stops its queries, ends the process at once (as
        # kill -9 of the Python process: its Spark JVM goes with it), never a worker left running its connectors.
        p2.send_signal(signal.SIGINT)
        wait_for(lambda: b"stopping ..." in (tmp_path / "worker2.log").read_bytes(), what="the first Ctrl-C",
                 interval=0.02)  # stopping three queries takes far longer
        p2.send_signal(signal.SIGINT)
        assert p2.wait(timeout=60) == 128 + signal.SIGINT
        assert b"stopping now" in (tmp_path / "worker2.log").read_bytes()
        wait_for(lambda: not _session_alive(p2.pid), timeout=60, what="the stopped worker's Spark JVM to exit")
    finally:
        if p2.poll() is None:
            _kill9(p2)

    p3 = _kconnect("worker", str(tmp_path / "worker.properties"), "--no-live", log=open(tmp_path / "w3.log", "wb"))
    try:
        wait_for(lambda: requests.get(api.url + "/health", timeout=5).status_code == 200, timeout=240,
                 what="the third worker's /health")
        api.wait_state("lines-sink", "RUNNING")
        wait_for(lambda: len(lines(out)) >= 60, timeout=240, what="60 lines through the third worker")
        assert lines(out) == [f"line-{i}" for i in range(1, 61)]
    finally:
        p3.send_signal(signal.SIGTERM)  # one signal: a clean stop
        try:
            p3.wait(timeout=120)
        finally:
            if p3.poll() is None:
                _kill9(p3)
    assert p3.returncode == 0, (tmp_path / "w3.log").read_text()[-3000:]


def _session_alive(sid: int) -> bool:
    """Whether any process of the session (the worker, its Spark JVM, Python workers) still runs."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
            if os.getsid(int(pid)) == sid and state != "Z":  # an exited process its new parent has not reaped
                return True
        except (OSError, IndexError):
            continue
    return False
