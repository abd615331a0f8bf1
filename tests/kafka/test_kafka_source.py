"""Source connectors into Kafka topics: records after transforms and converters produced by Spark's Kafka sink
with key, value and headers; KIP-158 topic creation; the at-least-once guarantee across a lost commit."""

from __future__ import annotations

import os
import time
from collections import Counter

from confluent_kafka.admin import AdminClient, ConfigResource

from spark_connect_bridge.bus.kafka import source_stream
from spark_connect_bridge.engine.pipeline import read_batch
from tests.kafka.conftest import consume


def run_once(spark, config, bootstrap, checkpoint) -> None:
    query = source_stream(spark, config, bus=bootstrap, checkpoint=str(checkpoint), trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def datagen(topic: str, **extra: str) -> dict[str, str]:
    return {"name": f"gen-{topic}", "connector.class": "io.confluent.kafka.connect.datagen.DatagenConnector",
            "kafka.topic": topic, "quickstart": "orders", "iterations": "30", "max.interval": "0",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "transforms": "origin", "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertHeader",
            "transforms.origin.header": "origin", "transforms.origin.value.literal": "datagen", **extra}


def _lose_last_commit(checkpoint) -> None:
    """The driver died after Spark's Kafka sink produced the last batch and before the commit log recorded it."""
    commits = checkpoint / "commits"
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


def test_source_records_are_produced_with_key_value_and_headers_into_a_topic_created_by_its_rules(
        spark, bootstrap, topic_name, tmp_path):
    topic = topic_name("orders")
    creation = {"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "3",
                "topic.creation.default.retention.ms": "3600000"}
    run_once(spark, datagen(topic, **creation), bootstrap, tmp_path / "ckpt")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["retention.ms"].value == "3600000"

    expected = read_batch(spark, datagen(topic)).collect()  # datagen is deterministic: the same 30 records
    got = consume(bootstrap, topic, 30)
    want = sorted((bytes(r.key), bytes(r.value), tuple((h.key, bytes(h.value)) for h in r.headers)) for r in expected)
    assert sorted((m.key(), m.value(), tuple(m.headers())) for m in got) == want
    assert all(m.headers() == [("origin", b"datagen")] for m in got)


def test_delivery_into_kafka_is_at_least_once_a_batch_produced_but_not_committed_is_produced_again(
        spark, bootstrap, topic_name, tmp_path):
    topic, source = topic_name("lines"), tmp_path / "in.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(5)))
    config = {"name": "lines", "connector.class": "FileStreamSource", "file": str(source), "topic": topic}
    checkpoint = tmp_path / "ckpt"
    run_once(spark, config, bootstrap, checkpoint)
    # The driver dies after Spark's Kafka sink produced batch 0 and before the commit log recorded it.
    _lose_last_commit(checkpoint)
    with open(source, "a") as f:
        f.write("line-5\nline-6\n")
    run_once(spark, config, bootstrap, checkpoint)
    values = Counter(m.value().decode() for m in consume(bootstrap, topic, 12))
    assert values == {**{f"line-{i}": 2 for i in range(5)}, "line-5": 1, "line-6": 1}
    # A clean restart produces nothing again.
    run_once(spark, config, bootstrap, checkpoint)
    consume(bootstrap, topic, 12)


def test_a_stream_into_kafka_writes_its_checkpoint_asynchronously_and_still_produces_a_lost_commit_again(
        spark, bootstrap, topic_name, tmp_path):
    """At a processing-time trigger a query straight into Kafka tracks its progress asynchronously (Spark's
    asyncProgressTrackingEnabled); a restart after the driver died between producing a batch and the commit log
    produces that batch again, and nothing is lost."""
    topic, source = topic_name("lines"), tmp_path / "in.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(5)))
    config = {"name": "lines", "connector.class": "FileStreamSource", "file": str(source), "topic": topic}
    checkpoint = tmp_path / "ckpt"

    def run_until(read: int) -> None:
        query = source_stream(spark, config, bus=bootstrap, checkpoint=str(checkpoint),
                              trigger={"processingTime": "200 milliseconds"})
        try:
            engine = query._jsq.streamingQuery().getClass().getSimpleName()
            assert engine == "AsyncProgressTrackingMicroBatchExecution"
            deadline = time.monotonic() + 120
            while sum(p["numInputRows"] for p in query.recentProgress) < read:
                assert query.exception() is None and time.monotonic() < deadline, query.exception()
                time.sleep(0.2)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()

    run_until(5)
    _lose_last_commit(checkpoint)
    with open(source, "a") as f:
        f.write("line-5\nline-6\n")
    run_until(7)  # the batch whose commit was lost, then the new lines
    values = Counter(m.value().decode() for m in consume(bootstrap, topic, 12))
    assert values == {**{f"line-{i}": 2 for i in range(5)}, "line-5": 1, "line-6": 1}


def test_a_tolerant_source_dead_letters_failed_records_to_its_kafka_dlq_topic(spark, bootstrap, topic_name,
                                                                             tmp_path):
    topic, dlq, source = topic_name("numbers"), topic_name("numbers-dlq"), tmp_path / "in.txt"
    source.write_text("".join(f"{v}\n" for v in ["1", "2", "x", "4", "y"]))
    config = {"name": "numbers", "connector.class": "FileStreamSource", "file": str(source), "topic": topic,
              "value.converter": "org.apache.kafka.connect.storage.StringConverter",
              "transforms": "cast", "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
              "transforms.cast.spec": "int32",
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
              "errors.deadletterqueue.topic.replication.factor": "1",
              "errors.deadletterqueue.context.headers.enable": "true"}
    run_once(spark, config, bootstrap, tmp_path / "ckpt")
    assert sorted(m.value() for m in consume(bootstrap, topic, 3)) == [b"1", b"2", b"4"]
    dead = consume(bootstrap, dlq, 2)
    assert sorted(m.value() for m in dead) == [b"x", b"y"]
    for msg in dead:
        ctx = dict(msg.headers())
        assert ctx["__connect.errors.stage"] == b"TRANSFORMATION"
        assert ctx["__connect.errors.class.name"] == b"org.apache.kafka.connect.transforms.Cast$Value"
        assert ctx["__connect.errors.connector.name"] == b"numbers"
