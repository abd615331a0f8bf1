"""Reading and writing a worker group's compacted topics on Kafka (see :mod:`.kafka`).

:class:`TopicReader` reads topics from the beginning, ``read_committed``, and keeps up with them.
:class:`TransactionalWriter` writes under one ``transactional.id``: its ``init_transactions`` fences every other
producer of that id (another worker's, or this process's former one), so a transaction commits only if no other
producer of the id was initialised since this one was. A writer that reads the topics to their end after its
``init_transactions`` and then commits has therefore decided on everything committed under the id before it: the
group's leader writes its decisions so (``<group.id>-leader``), and every worker its connector configs
(``<group.id>-configs``), which makes a create of a name that exists, or an update of a deleted connector,
impossible whichever workers race.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ...bus.admin import admin_client
from ...errors import ConnectError, FencedError

__all__ = ["Record", "TopicReader", "TransactionalWriter", "client_library"]

log = logging.getLogger(__name__)

_TIMEOUT = 30.0

#: ``(topic, key, value)``; a ``None`` value is a tombstone
Record = tuple[str, str, Any]


def client_library() -> Any:
    """confluent-kafka, or an error saying which extra installs it."""
    try:
        import confluent_kafka
    except ImportError as e:  # an optional client library
        raise ConnectError("A worker group on Kafka needs confluent-kafka: pip install 'spark_connect_bridge[kafka]'") \
            from e
    return confluent_kafka


def encode(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value).encode("utf-8")


class TopicReader:
    """Reads compacted topics from the beginning, ``read_committed``, into ``{topic: {key: value}}`` and keeps up
    with them: :meth:`catch_up` reads to the end (the last stable offset) of every partition."""

    def __init__(self, client: Mapping[str, str], topics: list[str], *, fetch_wait_ms: int = 500):
        kafka = client_library()
        self._kafka = kafka
        self._admin = admin_client(client)
        self._consumer = kafka.Consumer({**client, "group.id": "kconnect-reader-" + uuid.uuid4().hex,
                                         "enable.auto.commit": False, "isolation.level": "read_committed",
                                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                                         "fetch.wait.max.ms": fetch_wait_ms})
        meta = self._consumer.list_topics(timeout=_TIMEOUT)
        self._partitions = []
        for topic in topics:
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise ConnectError(f"Kafka topic {topic} of the worker group is not available")
            self._partitions += [kafka.TopicPartition(topic, p, kafka.OFFSET_BEGINNING) for p in info.partitions]
        self._consumer.assign(self._partitions)
        self.values: dict[str, dict[str, Any]] = {topic: {} for topic in topics}
        self._next = {(tp.topic, tp.partition): 0 for tp in self._partitions}

    def catch_up(self, timeout: float = _TIMEOUT, written: Mapping[tuple[str, int], int] | None = None) -> None:
        """Read every partition to its end, and at least to ``written`` (``{(topic, partition): offset}``: past
        this process's own writes, whose transaction markers may not have reached the partition yet); raise
        ConnectError when the brokers do not answer in time."""
        kafka = self._kafka
        from confluent_kafka.admin import OffsetSpec

        # The last stable offsets, from the admin client: the consumer's own request would queue behind its
        # long-polling fetch.
        spec = {kafka.TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in self._partitions}
        deadline = time.monotonic() + timeout
        while True:
            futures = self._admin.list_offsets(spec, isolation_level=kafka.IsolationLevel.READ_COMMITTED,
                                               request_timeout=timeout)
            try:
                ends = {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
                break
            except kafka.KafkaException as e:  # a topic just created: its leader is not known everywhere yet
                error = e.args[0]
                transient = error.retriable() or error.code() in (
                    kafka.KafkaError.NOT_LEADER_FOR_PARTITION, kafka.KafkaError.LEADER_NOT_AVAILABLE,
                    kafka.KafkaError.UNKNOWN_TOPIC_OR_PART)
                if not transient or time.monotonic() > deadline:
                    raise ConnectError(f"Reading the worker group's topics failed: {e.args[0].str()}") from e
                time.sleep(0.2)
        for key, offset in (written or {}).items():
            if key in ends:
                ends[key] = max(ends[key], offset)
        while True:
            # An end-of-partition event moves the position past transaction markers, which are never delivered.
            waiting = [k for k, end in ends.items() if self._next[k] < end]
            if not waiting:
                return
            if time.monotonic() > deadline:
                topics = ", ".join(sorted({topic for topic, _ in waiting}))
                raise ConnectError(f"Reading the worker group's topics timed out ({topics})")
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            key = (msg.topic(), msg.partition())
            error = msg.error()
            if error is not None:
                if error.code() == kafka.KafkaError._PARTITION_EOF:
                    self._next[key] = max(self._next[key], msg.offset())
                    continue
                raise ConnectError(f"Reading the worker group's topic {msg.topic()} failed: {error.str()}")
            self._next[key] = msg.offset() + 1
            record_key = msg.key().decode("utf-8") if msg.key() is not None else ""
            value = msg.value()
            if value is None:
                self.values[msg.topic()].pop(record_key, None)
                continue
            try:
                self.values[msg.topic()][record_key] = json.loads(value)
            except ValueError as e:  # not a record of ours, nor Kafka Connect's: left alone, and said so
                log.error("Record %s at offset %d of topic %s is not JSON (%s): ignored", record_key, msg.offset(),
                          msg.topic(), e)

    def close(self) -> None:
        self._consumer.close()


class TransactionalWriter:
    """The producer of one ``transactional.id`` (see the module docstring). Not thread-safe: its owner locks.

    :meth:`ready` initialises a producer when there is none (fencing every other one of the id) and says whether
    it did; :meth:`commit` writes records in one transaction and raises :class:`FencedError` when another producer
    of the id was initialised since (this one is then dropped: the next :meth:`ready` makes a new one).
    """

    #: librdkafka's code for "this instance has been fenced by a newer instance", and the broker's
    _FENCED = ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "TRANSACTION_COORDINATOR_FENCED")

    def __init__(self, client: Mapping[str, str], transactional_id: str,
                 on_delivery: Callable[[Any, Any], None]):
        self._client = dict(client)
        self.transactional_id = transactional_id
        self._on_delivery = on_delivery
        self._producer: Any = None

    def __repr__(self) -> str:  # never the client settings: they may carry a SASL password
        return f"TransactionalWriter({self.transactional_id!r})"

    def ready(self) -> bool:
        """Make sure a producer is initialised; True when this call initialised it (so fenced the others)."""
        if self._producer is not None:
            return False
        kafka = client_library()
        producer = kafka.Producer({**self._client, "transactional.id": self.transactional_id,
                                   "transaction.timeout.ms": 10_000, "linger.ms": 0,
                                   "partitioner": "murmur2_random",  # Java's partitioner: Connect's keys
                                   "logger": log})
        try:
            producer.init_transactions(_TIMEOUT)
        except kafka.KafkaException as e:
            raise ConnectError(f"Initialising the transactional producer {self.transactional_id} failed: "
                               f"{e.args[0].str()}") from e
        self._producer = producer
        return True

    def commit(self, records: list[Record]) -> None:
        """Write ``records`` in one transaction (after :meth:`ready`)."""
        kafka = client_library()
        self.ready()
        producer = self._producer
        try:
            producer.begin_transaction()
            for topic, key, value in records:
                producer.produce(topic, key=key.encode("utf-8"), value=encode(value), on_delivery=self._on_delivery)
            producer.commit_transaction(_TIMEOUT)
        except kafka.KafkaException as e:
            error = e.args[0]
            self.drop()  # a new producer's init_transactions aborts whatever this one left open
            if error.name() in self._FENCED:
                raise FencedError(f"Producer {self.transactional_id} was fenced: another producer of the id was "
                                  f"initialised since ({error.str()})") from e
            raise ConnectError(f"Writing a transaction of {self.transactional_id} failed: {error.str()}") from e

    def drop(self) -> None:
        """Forget the producer (fenced, failed, or no longer entitled to write). A fenced producer's ``flush``
        raises its fatal error again: there is nothing of it to deliver, and the caller has the error already."""
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(client_library().KafkaException):
                producer.flush(0)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(_TIMEOUT)
        self._producer = None
