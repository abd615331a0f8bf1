"""The worker with Kafka as its bus (bootstrap.servers, as in Kafka's connect-standalone.properties): sources
produce to Kafka, sinks consume it; consumer group connect-<name> shows the sinks' lag; sink offsets over REST in
Kafka Connect's shape, a PATCH moving the query, a DELETE resetting it and its group."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.kafka.conftest import describe_group
from tests.runtime.worker_helpers import lines, wait_for


def _append(path, *rows: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(r + "\n" for r in rows)


def test_worker_on_kafka_runs_file_source_to_file_sink_and_manages_sink_offsets(start_worker, bootstrap,
                                                                                topic_name, tmp_path):
    topic = topic_name("connect-test")
    _worker, api = start_worker(**{"bootstrap.servers": bootstrap,
                                  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                                  "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                                  "offset.flush.interval.ms": "10000"})
    src, out = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    _append(src, "a", "b", "c", "d", "e")
    assert api.call("POST", "/connectors", {"name": "local-file-source", "config": {
        "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(src), "topic": topic}}).status_code == 201
    assert api.call("POST", "/connectors", {"name": "local-file-sink", "config": {
        "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(out), "topics": topic}}).status_code == 201
    wait_for(lambda: lines(out) == ["a", "b", "c", "d", "e"], what="5 lines through Kafka")
    assert topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics

    group = "connect-local-file-sink"
    wait_for(lambda: describe_group(bootstrap, group).get((topic, 0)) == (5, 5, 0), what="group at offset 5")
    wait_for(lambda: api.get("/connectors/local-file-sink/offsets") == {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]},
        what="sink offsets over REST")

    # PATCH (stopped): the sink reads again from offset 2, and the group says so.
    assert api.call("PUT", "/connectors/local-file-sink/stop").status_code == 204
    api.wait_state("local-file-sink", "STOPPED")
    r = api.call("PATCH", "/connectors/local-file-sink/offsets", {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 2}}]})
    assert r.status_code == 200, r.text
    assert describe_group(bootstrap, group)[(topic, 0)] == (2, 5, 3)
    assert api.call("PUT", "/connectors/local-file-sink/resume").status_code == 202
    wait_for(lambda: lines(out) == ["a", "b", "c", "d", "e", "c", "d", "e"], what="c..e again after the PATCH")

    # DELETE (stopped): a new start from the earliest offsets; the consumer group is gone until it commits.
    assert api.call("PUT", "/connectors/local-file-sink/stop").status_code == 204
    api.wait_state("local-file-sink", "STOPPED")
    assert api.call("DELETE", "/connectors/local-file-sink/offsets").status_code == 200
    assert describe_group(bootstrap, group) == {}
    assert api.get("/connectors/local-file-sink/offsets") == {"offsets": []}
    _append(src, "f")
    assert api.call("PUT", "/connectors/local-file-sink/resume").status_code == 202
    wait_for(lambda: lines(out) == ["a", "b", "c", "d", "e", "c", "d", "e", "a", "b", "c", "d", "e", "f"],
             what="everything again after the reset")
    wait_for(lambda: describe_group(bootstrap, group).get((topic, 0)) == (6, 6, 0), what="group at offset 6")
