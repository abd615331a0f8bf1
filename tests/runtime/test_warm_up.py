"""The worker's warm-up query (engine/warmup.py, worker config ``warm.up.enable``): it runs through the connectors'
path and leaves nothing behind; a worker whose warm-up fails says so once and serves connectors all the same."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from spark_connect_bridge.engine.warmup import warm_up

from .worker_helpers import Api, lines, wait_for

pytestmark = pytest.mark.timeout(600)


def test_warm_up_runs_a_kconnect_query_and_removes_its_directory(spark, tmp_path):
    seconds = warm_up(spark, str(tmp_path / "warm"))
    assert seconds > 0
    assert os.listdir(tmp_path / "warm") == []  # its file and checkpoint are gone
    assert not [q for q in spark.streams.active if q.name == "kconnect-warm-up"]


def test_worker_whose_warm_up_fails_logs_it_and_runs_connectors(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "state"
    state.mkdir()
    (state / "_warm_up").write_text("a file where the warm-up makes its directory")
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line-{i}\n" for i in range(1, 6)))
    (tmp_path / "worker.properties").write_text(f"""
listeners=http://127.0.0.1:{port}
offset.storage.dir={state}
connector.allowed.paths={tmp_path}
topics.dir={tmp_path}/topics
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
trigger.interval.ms=500
spark.master=local[2]
spark.ui.enabled=false
spark.driver.host=127.0.0.1
spark.sql.shuffle.partitions=2
""")
    log_path = tmp_path / "worker.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "spark_connect_bridge.cli", "worker",
                                 str(tmp_path / "worker.properties"), "--no-live"], stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    api = Api(f"http://127.0.0.1:{port}")
    try:
        wait_for(lambda: "warm-up query failed" in log_path.read_text(), timeout=300, what="the warm-up's failure")
        for name, config in (("lines", {"connector.class": "FileStreamSource", "file": str(src),
                                        "topic": "lines"}),
                             ("lines-sink", {"connector.class": "FileStreamSink", "file": str(out),
                                             "topics": "lines"})):
            assert api.call("POST", "/connectors", {"name": name, "config": config}).status_code == 201
        wait_for(lambda: lines(out) == [f"line-{i}" for i in range(1, 6)], timeout=240,
                 what="the lines through the worker whose warm-up failed")
        text = log_path.read_text()
        assert len(re.findall(r"warm-up query failed", text)) == 1, text
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
