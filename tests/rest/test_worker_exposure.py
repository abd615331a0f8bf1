"""What the worker exposes besides its REST API, and the storage paths connector names map to: both checked on a
running worker."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
import requests
from runtime.worker_helpers import wait_for

pytestmark = pytest.mark.timeout(600)


def _append(path, *new: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(f"{x}\n" for x in new)


def _url_name(name: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in "./%" else c for c in name)


# -- 3. connector names cannot address other connectors' storage --------------------------------------------------
def test_dot_names_cannot_delete_other_connectors_checkpoints(start_worker, tmp_path):
    worker, api = start_worker()
    src = tmp_path / "in.txt"
    _append(src, "a", "b", "c")
    cfg = {"connector.class": "FileStreamSource", "file": str(src), "topic": "lines"}
    assert api.call("POST", "/connectors", {"name": "victim", "config": cfg}).status_code == 201
    wait_for(lambda: api.get("/connectors/victim/offsets")["offsets"], what="the victim's committed offsets")
    checkpoints = tmp_path / "state" / "checkpoints"
    for name in (".", "..", "%2E", "%2E%2E"):
        r = api.call("POST", "/connectors", {"name": name, "config": dict(cfg, topic="other"),
                                             "initial_state": "STOPPED"})
        assert r.status_code == 201, (name, r.text)
        assert api.get(f"/connectors/{_url_name(name)}")["name"] == name
    assert sorted(os.listdir(tmp_path / "state" / "_connectors")) == sorted(
        ["%2E.json", "%2E..json", "%252E.json", "%252E%252E.json", "victim.json"])
    for name in (".", "..", "%2E", "%2E%2E"):
        assert api.call("DELETE", f"/connectors/{_url_name(name)}").status_code == 204
    worker.service.worker.submit(lambda: None).result(timeout=60)  # the deletions ran
    assert (checkpoints / "victim").is_dir()
    assert api.get("/connectors") == ["victim"]
    assert api.get("/connectors/victim/offsets")["offsets"][0]["offset"] == {"position": src.stat().st_size}
    assert api.state("victim") == "RUNNING"


def test_connector_names_are_trimmed_strings(start_worker, tmp_path):
    _, api = start_worker()
    cfg = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "t"}
    r = api.call("POST", "/connectors", {"name": "  padded  ", "config": cfg, "initial_state": "STOPPED"})
    assert r.status_code == 201 and r.json()["name"] == "padded" and r.headers["Location"] == "/connectors/padded"
    for bad in (12, {"a": 1}, ["x"], "   ", ""):
        r = api.call("POST", "/connectors", {"name": bad, "config": cfg})
        assert r.status_code == 400 and r.json()["error_code"] == 400, (bad, r.text)
    r = api.call("POST", "/connectors", {"name": "n", "config": dict(cfg, **{"tasks.max": {"x": 1}})})
    assert r.status_code == 400 and "tasks.max" in r.json()["message"]
    assert api.get("/connectors") == ["padded"]


# -- 7. the worker's own Spark listens on loopback only ------------------------------------------------------------
def _listening(pid: int) -> list[tuple[str, int]]:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    out = []
    for p in procs:
        try:
            out += [(c.laddr.ip, c.laddr.port) for c in p.net_connections(kind="inet") if c.status == "LISTEN"]
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.slow
def test_worker_spark_binds_loopback_only(tmp_path):
    props = tmp_path / "worker.properties"
    props.write_text(f"offset.storage.dir={tmp_path}/state\ntopics.dir={tmp_path}/topics\n"
                     f"listeners=http://127.0.0.1:0\nwarm.up.enable=false\nspark.master=local[1]\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("SPARK_LOCAL_IP", None)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from spark_connect_bridge.cli import main; "
                                                   "sys.exit(main())", "standalone", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            hit = re.search(r"REST API on (http://\S+),", line or "")
            url = hit.group(1) if hit else None
        assert url, "the worker did not start"
        wait_for(lambda: requests.get(url + "/health", timeout=5).status_code == 200, timeout=180,
                 what="the worker's Spark")
        # the Spark UI and the driver's RPC/block manager ports, all of them
        sockets = wait_for(lambda: (s := _listening(proc.pid)) and len(s) >= 3 and s, what="Spark's listeners")
        assert all(ip in ("127.0.0.1", "::ffff:127.0.0.1", "::1") for ip, _ in sockets), sockets
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_worker_config_binds_a_local_spark_to_loopback(tmp_path):
    from spark_connect_bridge.runtime.worker_config import parse_worker_config

    cfg = parse_worker_config({"offset.storage.dir": str(tmp_path)})
    assert cfg.spark_conf["spark.driver.bindAddress"] == cfg.spark_conf["spark.driver.host"] == "127.0.0.1"
    assert cfg.spark_env == {"SPARK_LOCAL_IP": "127.0.0.1"}
    exposed = parse_worker_config({"offset.storage.dir": str(tmp_path), "spark.driver.bindAddress": "0.0.0.0"})
    assert exposed.spark_conf["spark.driver.bindAddress"] == "0.0.0.0" and exposed.spark_env == {}
    off = parse_worker_config({"offset.storage.dir": str(tmp_path), "spark.bind.loopback": "false"})
    assert "spark.driver.bindAddress" not in off.spark_conf and off.spark_env == {}
    cluster = parse_worker_config({"offset.storage.dir": str(tmp_path), "spark.master": "spark://m:7077"})
    assert "spark.driver.bindAddress" not in cluster.spark_conf
