"""``/connectors/{name}/offsets`` as Kafka's: offsets set on a stopped connector that never ran (KIP-980's
``initial_state: STOPPED``) or whose offsets were just reset are where it resumes; offsets a connector does not
use are refused with a 400 naming the key."""

from __future__ import annotations

import pytest
from runtime.worker_helpers import lines, wait_for

pytestmark = pytest.mark.timeout(600)


def _append(path, *new: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(f"{x}\n" for x in new)


def test_offsets_set_before_the_first_run_and_after_a_reset_are_where_it_resumes(start_worker, tmp_path):
    _, api = start_worker()
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    _append(src, "skip-1", "skip-2", "keep-3", "keep-4")
    partition = {"filename": str(src)}
    r = api.call("POST", "/connectors", {"name": "src", "initial_state": "STOPPED", "config": {
        "connector.class": "FileStreamSource", "file": str(src), "topic": "lines"}})
    assert r.status_code == 201, r.text
    assert api.get("/connectors/src/offsets") == {"offsets": []}
    skip = len("skip-1\nskip-2\n")
    r = api.call("PATCH", "/connectors/src/offsets", {"offsets": [{"partition": partition,
                                                                   "offset": {"position": skip}}]})
    assert r.status_code == 200, r.text
    assert api.call("PUT", "/connectors/sink/config", {"connector.class": "FileStreamSink", "file": str(out),
                                                        "topics": "lines"}).status_code == 201
    assert api.call("PUT", "/connectors/src/resume").status_code == 202
    wait_for(lambda: lines(out) == ["keep-3", "keep-4"], what="the lines after the offsets that were set")
    assert api.state("src") == "RUNNING"

    # stop -> DELETE offsets -> PATCH offsets: again from the offsets set
    assert api.call("PUT", "/connectors/src/stop").status_code == 204
    api.wait_state("src", "STOPPED")
    assert api.call("DELETE", "/connectors/src/offsets").status_code == 200
    r = api.call("PATCH", "/connectors/src/offsets", {"offsets": [{"partition": partition,
                                                                   "offset": {"position": skip + len("keep-3\n")}}]})
    assert r.status_code == 200, r.text
    _append(src, "new-5")
    assert api.call("PUT", "/connectors/src/resume").status_code == 202
    wait_for(lambda: lines(out) == ["keep-3", "keep-4", "keep-4", "new-5"], what="keep-4 and new-5 again")
    assert api.state("src") == "RUNNING"


def test_offsets_a_connector_does_not_use_are_refused(start_worker, tmp_path):
    _, api = start_worker()
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    assert api.call("POST", "/connectors", {"name": "src", "initial_state": "STOPPED", "config": {
        "connector.class": "FileStreamSource", "file": str(src), "topic": "lines"}}).status_code == 201
    assert api.call("POST", "/connectors", {"name": "sink", "initial_state": "STOPPED", "config": {
        "connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"), "topics": "lines"}}).status_code == 201
    bad_source = {
        "position": [{"partition": {"filename": str(src)}, "offset": {"position": "abc"}}],
        "pos": [{"partition": {"filename": str(src)}, "offset": {"pos": 5}}],
        "fielname": [{"partition": {"fielname": str(src)}, "offset": {"position": 5}}],
        "-5": [{"partition": {"filename": str(src)}, "offset": {"position": -5}}],
    }
    for key, entries in bad_source.items():
        r = api.call("PATCH", "/connectors/src/offsets", {"offsets": entries})
        assert r.status_code == 400 and key in r.json()["message"], (key, r.text)
    bad_sink = {
        "kafka_offset": {"kafka_topic": "lines", "kafka_partition": 0, "offset": "abc"},
        "kafka_partition": {"kafka_topic": "lines", "kafka_partition": "x", "offset": 3},
        "kafka_topic": {"kafka_topic": "../../etc", "kafka_partition": 0, "offset": 3},
    }
    for key, e in bad_sink.items():
        entry = {"partition": {"kafka_topic": e["kafka_topic"], "kafka_partition": e["kafka_partition"]},
                 "offset": {"kafka_offset": e["offset"]}}
        r = api.call("PATCH", "/connectors/sink/offsets", {"offsets": [entry]})
        assert r.status_code == 400 and key in r.json()["message"], (key, r.text)
    assert api.get("/connectors/src/offsets") == {"offsets": []}
