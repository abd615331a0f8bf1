"""Dead letters of a sink, through Kafka Connect and through ours: the same topic (JSON with schemas, some messages
broken) read by the same FileStreamSink config with ``errors.tolerance=all``, a dead-letter topic and its context
headers; the dead-letter topics compared record by record (key and value bytes, header names and values).

Kafka Connect runs the config in the differential package's one worker against its broker, ours with the Kafka
bus's ``sink_stream`` against the run's broker; each broker holds the same input topic. What can only differ is
named in :data:`CAN_DIFFER` (the task id, Java's exception text and stack trace); the rest is compared. One
difference, checked exactly: a payload that does not fit its schema is read as 0 by Kafka and dead-lettered here.
FileStreamSink's lines are Connect's ``Struct{...}`` text on both sides.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Producer

from spark_connect_bridge.bus.kafka import sink_stream
from tests.support.kafka_connect import _records_in, topic_records

JSON = "org.apache.kafka.connect.json.JsonConverter"
TOPIC = "dlq-input"
DLQ = "dlq-dead-letters"
GOOD = b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"n"}],"optional":false},' \
       b'"payload":{"n":%d}}'
MESSAGES = [
    (b"k1", GOOD % 1),
    (b"k2", b"{not json"),
    (None, GOOD % 2),
    (b"k3", b'{"n": 3}'),  # plain JSON where the converter expects the envelope
    # a payload that does not fit its schema (a string for the int32 n): Kafka's JsonConverter reads it as 0 (Jackson's
    # intValue of a text node), ours fails the record (the JsonConverter's docstring)
    (b"k4", GOOD.replace(b"%d", b'"x"')),
    (b"k5", GOOD % 5),
]
#: headers whose values can only differ: the task (Spark's partition here), Java's exception text and trace
CAN_DIFFER = ("__connect.errors.task.id", "__connect.errors.exception.message",
              "__connect.errors.exception.stacktrace")


def _config(path: str) -> dict[str, str]:
    return {"name": "dlq-sink", "connector.class": "FileStreamSink", "topics": TOPIC, "file": path,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": JSON,
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": DLQ,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"}


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in MESSAGES:
        producer.produce(TOPIC, key=key, value=value)
    producer.flush(30)


@pytest.fixture(scope="module")
def dead_letters(spark, connect, reference_kafka, bootstrap, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("dlq"))
    for broker in (reference_kafka.bootstrap, bootstrap):
        _produce(broker)
    bad = 3

    def done() -> bool:  # every input record consumed (committed), the file flushed with them
        committed = [o["offset"]["kafka_offset"] for o in connect.offsets("dlq-sink")]
        return committed == [len(MESSAGES)] and os.path.exists(f"{root}/theirs.txt")
    # both sides at once: ours runs in the background while Kafka Connect's task starts
    query = sink_stream(spark, _config(f"{root}/ours.txt"), bus=bootstrap, checkpoint=f"{root}/ckpt",
                        trigger={"availableNow": True}, query_name="differential-dead-letters")
    connect.run(_config(f"{root}/theirs.txt"), done=done, timeout=120)
    query.awaitTermination()
    assert query.exception() is None
    deadline = time.monotonic() + 30
    while _records_in(bootstrap, [DLQ]) < bad and time.monotonic() < deadline:
        time.sleep(0.2)
    with open(f"{root}/theirs.txt") as a, open(f"{root}/ours.txt") as b:
        files = (a.read(), b.read())
    return topic_records(reference_kafka.bootstrap, DLQ), topic_records(bootstrap, DLQ), files


def _headers(record) -> list[tuple[str, bytes | None]]:
    return [(k, None if k in CAN_DIFFER else v) for k, v in record.headers]


MISFIT = MESSAGES[4]


def test_good_records_reach_the_sink_as_connect_structs(dead_letters):
    """FileStreamSink writes a value's toString(), Connect's ``Struct{n=1}``, on both sides."""
    _, _, (theirs, ours) = dead_letters
    assert theirs == "Struct{n=1}\nStruct{n=2}\nStruct{n=0}\nStruct{n=5}\n"
    assert ours == "Struct{n=1}\nStruct{n=2}\nStruct{n=5}\n"  # the misfit payload is dead-lettered here


def test_dead_letters_are_the_same_records(dead_letters):
    theirs, ours, _ = dead_letters
    assert [(r.key, r.value) for r in theirs] == [MESSAGES[1], MESSAGES[3]]
    assert [(r.key, r.value) for r in ours if (r.key, r.value) != MISFIT] == [(r.key, r.value) for r in theirs]
    assert [(r.key, r.value) for r in ours][-1] == MISFIT


def test_dead_letter_headers_are_kafkas(dead_letters):
    theirs, ours, _ = dead_letters
    ours = [r for r in ours if (r.key, r.value) != MISFIT]
    for a, b in zip(theirs, ours):
        assert [k for k, _ in b.headers] == [k for k, _ in a.headers]
        assert _headers(b) == _headers(a)
