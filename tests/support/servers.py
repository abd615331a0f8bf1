"""The test run's shared servers: started on first use, once per test process, stopped at its end.

Each is a throwaway instance on 127.0.0.1 (free port, temp dir). To use a server of your own instead, set:

- ``KCONNECT_TEST_POSTGRES=host:port`` (superuser ``postgres`` without a password, ``wal_level=logical``),
- ``KCONNECT_TEST_MARIADB=host:port`` (``root`` without a password; ROW binlog for CDC tests),
- ``KCONNECT_TEST_KAFKA=host:port`` (a Kafka 4.x broker's bootstrap address),
- ``KCONNECT_TEST_S3=host:port`` (an S3 API that accepts any credentials, such as ``moto_server``),
- ``KCONNECT_TEST_GCS=host:port`` (a GCS JSON API that takes anonymous requests, such as ``gcp-storage-emulator``),
- ``KCONNECT_TEST_AZURITE=host:port`` (an Azure Blob API with Azurite's ``devstoreaccount1`` account),
- ``KCONNECT_TEST_HDFS=host:rpcport:httpport`` (an HDFS NameNode with WebHDFS and permissions off),
- ``KCONNECT_TEST_MQTT=host:port`` (an MQTT 3.1.1 server with anonymous access, in-flight window >= 1000),
- ``KCONNECT_TEST_RABBITMQ=host:port`` (RabbitMQ with the ``guest`` user),
- ``KCONNECT_TEST_NATS=host:port`` (a NATS server with JetStream and anonymous access).

>>> host, port = postgres()          # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Callable
from typing import Any

from tests.support.azurite import AzuriteServer
from tests.support.brokers import MosquittoServer, NatsServer, RabbitMQServer, RedisServer
from tests.support.gcs import GcsEmulator
from tests.support.hdfs import MiniHdfs
from tests.support.kafka import KafkaBroker
from tests.support.mariadb import MariaDBServer
from tests.support.postgres import PostgresCluster
from tests.support.s3 import MotoS3Server

__all__ = ["postgres", "mariadb", "kafka", "s3", "gcs", "azurite", "hdfs", "mosquitto", "rabbitmq", "rabbitmq_server",
           "redis", "nats",
           "stop_all", "start_times"]

_started: dict[str, Any] = {}
start_times: dict[str, float] = {}  # seconds each server took to start (printed at the end of the run)


def _address(env: str) -> tuple[str, int] | None:
    value = os.environ.get(env)
    if not value:
        return None
    host, _, port = value.rpartition(":")
    return host or "127.0.0.1", int(port)


def _shared(name: str, env: str, make: Callable[[], Any]) -> tuple[str, int]:
    own = _address(env)
    if own:
        return own
    if name not in _started:
        began = time.monotonic()
        server = make()
        try:
            server.start()
            start_times[name] = time.monotonic() - began
        except BaseException:
            server.destroy()
            raise
        _started[name] = server
    return "127.0.0.1", _started[name].port


def postgres() -> tuple[str, int]:
    """(host, port) of the run's PostgreSQL; a database ``test`` exists."""
    return _shared("postgres", "KCONNECT_TEST_POSTGRES", PostgresCluster)


def mariadb() -> tuple[str, int]:
    """(host, port) of the run's MariaDB."""
    return _shared("mariadb", "KCONNECT_TEST_MARIADB", MariaDBServer)


def kafka() -> str:
    """The bootstrap address of the run's Kafka broker."""
    host, port = _shared("kafka", "KCONNECT_TEST_KAFKA", KafkaBroker)
    return f"{host}:{port}"


def s3() -> str:
    """The endpoint URL (``http://127.0.0.1:<port>``) of the run's S3 server (moto's server mode)."""
    host, port = _shared("s3", "KCONNECT_TEST_S3", MotoS3Server)
    return f"http://{host}:{port}"


def gcs() -> str:
    """The endpoint URL (``http://127.0.0.1:<port>``) of the run's GCS server (gcp-storage-emulator)."""
    host, port = _shared("gcs", "KCONNECT_TEST_GCS", GcsEmulator)
    return f"http://{host}:{port}"


def azurite() -> str:
    """The Blob endpoint URL (``http://127.0.0.1:<port>``) of the run's Azurite."""
    host, port = _shared("azurite", "KCONNECT_TEST_AZURITE", AzuriteServer)
    return f"http://{host}:{port}"


def hdfs() -> tuple[str, str]:
    """(``hdfs://127.0.0.1:<rpc port>``, WebHDFS ``http://127.0.0.1:<http port>``) of the run's HDFS
    (MiniDFSCluster)."""
    own = os.environ.get("KCONNECT_TEST_HDFS")
    if own:
        host, rpc, http = own.rsplit(":", 2)
        return f"hdfs://{host}:{rpc}", f"http://{host}:{http}"
    _shared("hdfs", "KCONNECT_TEST_HDFS", MiniHdfs)
    server = _started["hdfs"]
    return server.url, server.webhdfs


def mosquitto() -> tuple[str, int]:
    """(host, port) of the run's Mosquitto."""
    return _shared("mosquitto", "KCONNECT_TEST_MQTT", MosquittoServer)


def rabbitmq() -> tuple[str, int]:
    """(host, port) of the run's RabbitMQ (user ``guest``, password ``guest``)."""
    return _shared("rabbitmq", "KCONNECT_TEST_RABBITMQ", RabbitMQServer)


def rabbitmq_server() -> RabbitMQServer:
    """The run's own RabbitMQ node (started here even when ``KCONNECT_TEST_RABBITMQ`` names another): its TLS
    listener (``tls_port``, ``tls`` files) and its ``rabbitmqctl`` are the tests'."""
    name = "rabbitmq" if not os.environ.get("KCONNECT_TEST_RABBITMQ") else "rabbitmq-own"
    _shared(name, "", RabbitMQServer)
    return _started[name]


def redis() -> str:
    """The URI (``redis://127.0.0.1:<port>``) of the run's Redis."""
    host, port = _shared("redis", "KCONNECT_TEST_REDIS", RedisServer)
    return f"redis://{host}:{port}"


def nats() -> str:
    """The URL (``nats://127.0.0.1:<port>``) of the run's NATS server (JetStream on)."""
    host, port = _shared("nats", "KCONNECT_TEST_NATS", NatsServer)
    return f"nats://{host}:{port}"


def stop_all() -> None:
    """Stop and remove every server this process started."""
    while _started:
        _, server = _started.popitem()
        server.destroy()


atexit.register(stop_all)
