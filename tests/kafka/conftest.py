"""Fixtures of the Kafka-bus tests: the run's Kafka broker, unique topic names, confluent-kafka clients that
produce and consume like any other application on the cluster, and an embedded Schema Registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from spark_connect_bridge.jvm import classpath
from tests.runtime.worker_helpers import start_worker  # noqa: F401 - a fixture of the worker tests
from tests.support import servers
from tests.support.kafka import GROUPS_TOOL


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The bootstrap address of the run's shared broker."""
    return servers.kafka()


@pytest.fixture
def topic_name():
    """``topic_name("orders")`` -> a topic name no other test uses."""
    return lambda base="t": f"{base}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, records: Iterable[tuple[Any, Any] | tuple[Any, Any, list]],
            serializer: Any = None) -> None:
    """Produce ``(key, value[, headers])`` records (bytes/str, or objects a ``SerializingProducer`` serializes)."""
    producer = serializer or Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for rec in records:
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else None
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int, *, timeout: float = 60.0, deserializing: Any = None,
            isolation: str = "read_uncommitted") -> list[Any]:
    """Read ``count`` messages of ``topic`` from the start (fails after ``timeout`` seconds with what it got)."""
    conf = {"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation}
    consumer = deserializing(conf) if deserializing else Consumer(conf)
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
    finally:
        consumer.close()
    assert len(out) == count, f"got {len(out)} of {count} messages from {topic}"
    return out


def describe_group(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, int, int]]:
    """``kafka-consumer-groups --describe``: (topic, partition) -> (current offset, log end offset, lag)."""
    text = kafka_tool(GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    rows = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group:
            rows[(cols[1], int(cols[2]))] = (int(cols[3]) if cols[3] != "-" else -1, int(cols[4]),
                                             int(cols[5]) if cols[5] != "-" else -1)
    return rows


def kafka_tool(main: str, *args: str) -> str:
    """Run a Kafka command-line tool (its main class, e.g. kafka-consumer-groups') on the broker's classpath."""
    java = os.environ.get("JAVA", shutil.which("java") or "java")
    done = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", os.pathsep.join(classpath("kafka-broker")),
                           main, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """An embedded Confluent-compatible Schema Registry on 127.0.0.1 (a thread), for the whole session."""
    from spark_connect_bridge.converters.registry_server import serve

    server = serve(port=0, db_path=str(tmp_path_factory.mktemp("registry") / "registry.db"))
    yield server
    server.shutdown()
