"""A worker driven over real HTTP on 127.0.0.1 through a connector's whole lifecycle.

FileStreamSource -> topic store -> FileStreamSink: create, status, pause, resume, stop, offsets change, a failed
connector restarted, delete and re-create with the same name (which starts fresh).
"""

from __future__ import annotations

import pytest
from runtime.worker_helpers import lines, wait_for

pytestmark = pytest.mark.timeout(600)


def _append(path, *new: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(f"{x}\n" for x in new)


def test_connector_lifecycle_over_http(start_worker, tmp_path):
    worker, api = start_worker()
    src_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"
    _append(src_file, *[f"line-{i}" for i in range(1, 6)])

    # create: 201 + Location, ConnectorInfo
    r = api.call("POST", "/connectors", {"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(src_file), "topic": "lines", "tasks.max": "1"}})
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/connectors/src"
    assert r.json() == {"name": "src", "config": {"connector.class": "FileStreamSource", "file": str(src_file),
                                                   "topic": "lines", "tasks.max": "1", "name": "src"},
                        "tasks": [{"connector": "src", "task": 0}], "type": "source"}
    r = api.call("PUT", "/connectors/sink/config", {"connector.class": "FileStreamSink", "file": str(out_file),
                                                     "topics": "lines"})
    assert r.status_code == 201, r.text
    assert sorted(api.get("/connectors")) == ["sink", "src"]

    status = api.wait_state("src", "RUNNING")
    assert status["tasks"] == [{"id": 0, "state": "RUNNING", "worker_id": worker.service.worker_id}]
    assert status["type"] == "source"
    wait_for(lambda: lines(out_file) == [f"line-{i}" for i in range(1, 6)], what="5 lines in the sink file")
    api.wait_state("sink", "RUNNING")
    metrics = wait_for(lambda: (m := api.get("/connectors/src/status")["metrics"])["records_in_total"] == 5 and m,
                       what="source metrics")
    assert metrics["lag"] == 0  # FileStreamSource knows its lag: the bytes not read yet
    both = api.get("/connectors", expand=["status", "info"])
    assert both["src"]["info"]["type"] == "source" and both["sink"]["status"]["connector"]["state"] == "RUNNING"
    # The sink's file shows the lines once the sink committed; Spark records the batch a moment later.
    wait_for(lambda: api.get("/connectors/sink/topics") == {"sink": {"topics": ["lines"]}}, what="sink topics")
    assert api.get("/connectors/src/topics") == {"src": {"topics": ["lines"]}}

    # pause: nothing moves; resume: from the checkpoint
    assert api.call("PUT", "/connectors/src/pause").status_code == 202
    api.wait_state("src", "PAUSED")
    _append(src_file, "line-6", "line-7")
    assert api.get("/connectors/src/status")["tasks"][0]["state"] == "PAUSED"
    assert lines(out_file) == [f"line-{i}" for i in range(1, 6)]
    assert api.call("PUT", "/connectors/src/resume").status_code == 202
    wait_for(lambda: lines(out_file) == [f"line-{i}" for i in range(1, 8)], what="7 lines after resume")

    # offsets: 400 unless stopped; stop; change; resume from the changed offsets
    partition = {"filename": str(src_file)}
    r = api.call("PATCH", "/connectors/src/offsets", {"offsets": [{"partition": partition,
                                                                   "offset": {"position": 0}}]})
    assert r.status_code == 400 and r.json()["error_code"] == 400 and "STOPPED" in r.json()["message"]
    assert api.call("PUT", "/connectors/src/stop").status_code == 204
    st = api.wait_state("src", "STOPPED")
    assert st["tasks"] == [] and api.get("/connectors/src")["tasks"] == []
    size = src_file.stat().st_size
    assert api.get("/connectors/src/offsets") == {"offsets": [{"partition": partition,
                                                              "offset": {"position": size}}]}
    _append(src_file, "line-8", "line-9", "line-10")
    skip_to = size + len("line-8\nline-9\n")
    r = api.call("PATCH", "/connectors/src/offsets", {"offsets": [{"partition": partition,
                                                                   "offset": {"position": skip_to}}]})
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert api.get("/connectors/src/offsets")["offsets"][0]["offset"] == {"position": skip_to}
    assert api.call("PUT", "/connectors/src/resume").status_code == 202
    expected = [f"line-{i}" for i in range(1, 8)] + ["line-10"]
    wait_for(lambda: lines(out_file) == expected, what="line-10 only after the offsets change")
    sink_offsets = api.get("/connectors/sink/offsets")["offsets"]
    assert [o["partition"] for o in sink_offsets] == [{"kafka_topic": "lines", "kafka_partition": 0}]
    assert sink_offsets[0]["offset"]["kafka_offset"] > 0

    # a truncated file fails the source (the sink keeps running); fix it and restart
    full = src_file.read_text()
    src_file.write_text("x\n")
    failed = api.wait_state("src", "FAILED")
    assert "shorter" in failed["connector"]["trace"] and failed["tasks"][0]["state"] == "FAILED"
    assert "trace" in failed["tasks"][0]
    assert api.state("sink") == "RUNNING"
    src_file.write_text(full + "line-11\n")
    r = api.call("POST", "/connectors/src/restart", includeTasks="true", onlyFailed="true")
    assert r.status_code == 202, r.text
    assert r.json()["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in r.json()["tasks"]] == ["RESTARTING"]
    api.wait_state("src", "RUNNING")
    wait_for(lambda: lines(out_file) == expected + ["line-11"], what="line-11 after the restart")
    assert api.call("POST", "/connectors/src/restart").status_code == 204
    assert api.call("POST", "/connectors/src/tasks/0/restart").status_code == 204
    assert api.call("POST", "/connectors/src/tasks/3/restart").status_code == 404
    api.wait_state("src", "RUNNING")

    # delete, then re-create with the same name: a fresh start (every line of the new file again)
    assert api.call("DELETE", "/connectors/src").status_code == 204
    assert api.call("GET", "/connectors/src").status_code == 404
    other = tmp_path / "in2.txt"
    _append(other, "again-1", "again-2")
    r = api.call("POST", "/connectors", {"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(other), "topic": "lines"}})
    assert r.status_code == 201, r.text
    wait_for(lambda: lines(out_file) == expected + ["line-11", "again-1", "again-2"],
             what="the re-created connector's lines")
    assert api.get("/connectors/src/offsets")["offsets"][0]["offset"] == {"position": other.stat().st_size}

    # reset offsets (stopped): the source reads its file from the start again
    api.call("PUT", "/connectors/src/stop")
    assert api.call("DELETE", "/connectors/src/offsets").json() == {
        "message": "The offsets for this connector have been reset successfully"}
    assert api.get("/connectors/src/offsets") == {"offsets": []}
    api.call("PUT", "/connectors/src/resume")
    wait_for(lambda: lines(out_file)[-4:] == ["again-1", "again-2", "again-1", "again-2"],
             what="the file read again after the reset")


def test_errors_use_kafka_bodies_and_statuses(start_worker, tmp_path):
    _worker, api = start_worker()
    r = api.call("GET", "/connectors/nope/status")
    assert (r.status_code, r.json()) == (404, {"error_code": 404, "message": "Connector nope not found"})
    r = api.call("POST", "/connectors", {"name": "bad", "config": {"connector.class": "FileStreamSource",
                                                                   "tasks.max": "0", "fiel": "x"}})
    assert r.status_code == 400
    body = r.json()
    assert body["error_code"] == 400
    assert body["message"].startswith("Connector configuration is invalid and contains the following")
    assert 'did you mean "file"' in body["message"] and "tasks.max" in body["message"]
    cfg = {"connector.class": "FileStreamSource", "file": str(tmp_path / "x.txt"), "topic": "t"}
    r = api.call("POST", "/connectors", {"name": "s", "config": cfg, "initial_state": "STOPPED"})
    assert r.status_code == 201
    r = api.call("POST", "/connectors", {"name": "s", "config": cfg})
    assert (r.status_code, r.json()["error_code"]) == (409, 409)
    r = api.call("PUT", "/connectors/s/config", dict(cfg, name="other"))
    assert r.status_code == 400 and "doesn't match" in r.json()["message"]
    r = api.call("PATCH", "/connectors/s/offsets", {"offsets": []})
    assert r.status_code == 400
    r = api.call("GET", "/connectors/s/tasks/0/status")
    assert r.status_code == 404  # a stopped connector has no tasks
    assert api.call("GET", "/no/such/path").json()["error_code"] == 404
    r = requests_raw(api.url + "/connectors", b"{not json")
    assert r.status_code == 400 and r.json()["error_code"] == 400
    assert api.state("s") == "STOPPED"
    r = api.call("PATCH", "/connectors/s/config", {"tasks.max": "2", "topic": None})
    assert r.status_code == 400 and "topic" in r.json()["message"]
    r = api.call("PATCH", "/connectors/s/config", {"tasks.max": "2"})
    assert r.status_code == 200 and r.json()["config"]["tasks.max"] == "2"
    assert api.call("PATCH", "/connectors/nope/config", {"a": "b"}).status_code == 404


def requests_raw(url: str, data: bytes):
    import requests

    return requests.post(url, data=data, headers={"Content-Type": "application/json"}, timeout=30)
