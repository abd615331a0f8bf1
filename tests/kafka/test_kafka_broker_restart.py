"""A broker restart mid-stream: a running sink query on Kafka resumes when its broker comes back, nothing lost or
duplicated (the sink is exactly-once per micro-batch, its positions are the checkpoint's)."""

from __future__ import annotations

import json

import pytest

from spark_connect_bridge.bus.kafka import sink_stream
from tests.kafka.conftest import produce
from tests.runtime.worker_helpers import lines, wait_for
from tests.support.kafka import KafkaBroker


@pytest.fixture
def own_broker():
    """A broker of this test alone (it is restarted)."""
    broker = KafkaBroker()
    broker.start()
    yield broker
    broker.destroy()


def test_a_sink_query_survives_a_broker_restart_with_nothing_lost(spark, own_broker, tmp_path):
    topic, out = "events", tmp_path / "events.txt"
    own_broker.create_topic(topic, partitions=2)
    config = {"name": "events-file", "connector.class": "FileStreamSink", "topics": topic, "file": str(out),
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "value.converter.spark.schema": "n INT",
              "transforms": "n", "transforms.n.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
              "transforms.n.field": "n"}
    query = sink_stream(spark, config, bus=own_broker.bootstrap, checkpoint=str(tmp_path / "ckpt"),
                        trigger={"processingTime": "500 milliseconds"})
    try:
        produce(own_broker.bootstrap, topic, [(str(n % 4).encode(), json.dumps({"n": n}).encode()) for n in range(20)])
        wait_for(lambda: len(lines(out)) == 20, what="the first 20 records")
        own_broker.restart()
        produce(own_broker.bootstrap, topic, [(str(n % 4).encode(), json.dumps({"n": n}).encode())
                                              for n in range(20, 40)])
        wait_for(lambda: len(lines(out)) >= 40, timeout=180, what="40 records after the broker restart")
        assert query.isActive and query.exception() is None
        assert sorted(int(v) for v in lines(out)) == list(range(40))
    finally:
        query.stop()
