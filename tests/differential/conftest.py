"""Fixtures of the differential tests: Apache Kafka Connect itself (a standalone worker, tests/support/kafka_connect.py)
on a broker of its own, so that both sides write to topics of the same names; ours on the run's shared broker."""

from __future__ import annotations

import pytest

from tests.support import servers
from tests.support.kafka import KafkaBroker
from tests.support.kafka_connect import KafkaConnectWorker


@pytest.fixture(scope="session")
def reference_kafka():
    """A broker only Kafka Connect writes to (topic names are the configs' own, the same on both sides)."""
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def connect(reference_kafka):
    """The reference Kafka Connect worker (one JVM for the whole run: every case is a connector of it), with
    Debezium's PostgreSQL connector and JDBC sink and Apache Iceberg's sink as plugins."""
    plugins = ("debezium", "debezium-jdbc", "iceberg-kafka-connect")
    with KafkaConnectWorker(reference_kafka.bootstrap, plugins=plugins) as worker:
        yield worker


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The broker our pipelines produce to (the run's shared one)."""
    return servers.kafka()
