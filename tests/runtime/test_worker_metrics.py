"""What the worker reports over HTTP is true: totals never go backwards across pause/resume, sink offsets are the
number of records consumed (Kafka's committed offset), and altering them re-delivers exactly from there."""

from __future__ import annotations

import pytest

from spark_connect_bridge.runtime import worker as worker_module
from tests.runtime.worker_helpers import lines, wait_for

pytestmark = pytest.mark.timeout(900)


def _append(path, *new: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(f"{x}\n" for x in new)


def _metrics(api, name: str) -> dict:
    return api.get(f"/connectors/{name}/status")["metrics"]


def test_totals_survive_pause_resume_and_worker_restarts_and_sink_offsets_count_records(start_worker, tmp_path):
    _worker, api = start_worker()
    src_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"
    _append(src_file, "a", "b", "c")
    assert api.call("PUT", "/connectors/src/config", {"connector.class": "FileStreamSource",
                                                      "file": str(src_file), "topic": "lines"}).status_code == 201
    assert api.call("PUT", "/connectors/sink/config", {"connector.class": "FileStreamSink", "file": str(out_file),
                                                       "topics": "lines"}).status_code == 201
    wait_for(lambda: lines(out_file) == ["a", "b", "c"], what="3 lines in the sink file")
    wait_for(lambda: _metrics(api, "src")["records_out_total"] == 3, what="the source's totals")
    seen = []

    def totals_so_far(name: str, want: int) -> bool:
        m = _metrics(api, name)
        seen.append(m["records_out_total"])
        return m["records_out_total"] == want

    assert api.call("PUT", "/connectors/src/pause").status_code == 202
    api.wait_state("src", "PAUSED")
    assert _metrics(api, "src")["records_out_total"] == 3
    _append(src_file, "d", "e")
    assert api.call("PUT", "/connectors/src/resume").status_code == 202
    api.wait_state("src", "RUNNING")
    wait_for(lambda: totals_so_far("src", 5), what="5 records out in total")
    assert seen == sorted(seen) and seen[0] >= 3  # never backwards
    wait_for(lambda: lines(out_file) == ["a", "b", "c", "d", "e"], what="5 lines in the sink file")

    # Kafka's committed offset of a sink: the offset of the next record, i.e. the 5 records it consumed.
    assert api.call("PUT", "/connectors/sink/stop").status_code == 204
    api.wait_state("sink", "STOPPED")
    assert api.get("/connectors/sink/offsets") == {"offsets": [
        {"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}
    # between the two batches (a, b, c) and (d, e): the sink re-reads d and e
    r = api.call("PATCH", "/connectors/sink/offsets", {"offsets": [
        {"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]})
    assert r.status_code == 200, r.text
    assert api.get("/connectors/sink/offsets")["offsets"][0]["offset"] == {"kafka_offset": 3}
    # inside a batch: refused with the boundaries around it
    r = api.call("PATCH", "/connectors/sink/offsets", {"offsets": [
        {"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]})
    assert r.status_code == 400 and "nearest are 0 and 3" in r.json()["message"]
    assert api.call("PUT", "/connectors/sink/resume").status_code == 202
    wait_for(lambda: lines(out_file) == ["a", "b", "c", "d", "e", "d", "e"], what="d and e delivered again")

    # A restarted worker goes on from the totals the first one saved (its new queries read nothing new)...
    _worker.close()
    _append(src_file, "f")
    _, api = start_worker()
    wait_for(lambda: _metrics(api, "src")["records_in_total"] == 6, timeout=240,
             what="the source's totals to go on to 6")
    # ... but a new connector of the same name starts from 0 (it reads the whole file again: 6 records)
    assert api.call("DELETE", "/connectors/src").status_code == 204
    wait_for(lambda: api.call("PUT", "/connectors/src/config", {
        "connector.class": "FileStreamSource", "file": str(src_file), "topic": "lines"}).status_code == 201,
        what="the name to be free")
    wait_for(lambda: _metrics(api, "src")["records_in_total"] == 6 and api.state("src") == "RUNNING",
             what="the new connector's 6 records")


def test_stopping_a_query_silences_spark_cancellation_errors_for_a_while(spark, monkeypatch, tmp_path):
    """Spark logs a batch cancelled by ``query.stop()`` as ERROR with a TaskKilledException trace: the worker
    silences those loggers while it stops queries, then restores them."""
    from spark_connect_bridge.runtime.worker_config import parse_worker_config

    w = worker_module.Worker(parse_worker_config({"offset.storage.dir": str(tmp_path / "state"),
                                                         "topics.dir": str(tmp_path / "topics")}), spark=spark)
    levels = worker_module._Log4jLevels(spark._jvm)
    name = "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec"
    before = levels.get(name)
    w._quiet_cancellation()
    assert levels.get(name) == "OFF"
    w._restore_cancellation_logs()  # too early: still quiet
    assert levels.get(name) == "OFF"
    monkeypatch.setattr(worker_module, "_QUIET_SECONDS", 0.0)
    w._quiet_until = 0.0
    w._restore_cancellation_logs()
    assert levels.get(name) == before


def test_a_topic_store_sink_reads_a_backlog_in_batches_of_its_max_records_per_trigger(start_worker, tmp_path):
    """A sink started after its topic filled reads the backlog in micro-batches of at most its
    max.records.per.trigger (unset: 50,000), not in one batch that the sink path would cache whole. The topic
    store's source takes whole Delta versions: the source writes three, of 4, 4 and 2 records."""
    worker, api = start_worker()
    src_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"
    assert api.call("PUT", "/connectors/src/config", {"connector.class": "FileStreamSource",
                                                      "file": str(src_file), "topic": "lines"}).status_code == 201
    for written, new in ((4, range(0, 4)), (8, range(4, 8)), (10, range(8, 10))):
        _append(src_file, *[f"line-{i}" for i in new])
        wait_for(lambda n=written: _metrics(api, "src")["records_out_total"] == n, what=f"{written} records out")
    assert api.call("PUT", "/connectors/sink/config", {"connector.class": "FileStreamSink", "file": str(out_file),
                                                       "topics": "lines", "max.records.per.trigger": "4"}
                    ).status_code == 201
    wait_for(lambda: lines(out_file) == [f"line-{i}" for i in range(10)], what="10 lines in the sink file")

    def sizes() -> list[int]:
        query = worker.service.worker.runtimes["sink"].query
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    wait_for(lambda: sum(sizes()) == 10, what="the sink's progress of its 10 records")
    assert max(sizes()) <= 4, sizes()

