"""RabbitMQ source and sink with the keys of Confluent's RabbitMQ connectors
(``io.confluent.connect.rabbitmq.RabbitMQSourceConnector`` and ``RabbitMQSinkConnector``), on the pika client.

**RabbitMQSourceConnector** consumes ``rabbitmq.queue`` (one channel, ``rabbitmq.prefetch.count`` unacknowledged
messages at most) and acknowledges a message only after Spark has committed the micro-batch that read it
(:mod:`.queue_source`): a driver that stops or dies leaves them unacknowledged, RabbitMQ requeues them and the
restarted query reads them (at least once). Records: ``key`` null, ``value`` the body (binary), ``topic``
``kafka.topic``; the message's AMQP headers as record headers (values as text), and its properties as
``rabbitmq.*`` headers (``rabbitmq.message.id``, ``rabbitmq.content.type``, ``rabbitmq.delivery.mode``, ...,
``rabbitmq.redelivered``, ``rabbitmq.exchange``, ``rabbitmq.routing.key``).

**RabbitMQSinkConnector** publishes each record's value to ``rabbitmq.exchange`` with ``rabbitmq.routing.key``
and ``rabbitmq.delivery.mode``, record headers as AMQP headers, with publisher confirms: a task ends only once
RabbitMQ has confirmed every message (at least once).

>>> spark.readStream.format("kconnect").options(**{"connector.class": "RabbitMQSourceConnector",
...     "rabbitmq.host": "127.0.0.1", "rabbitmq.queue": "orders", "kafka.topic": "orders"}).load()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ..config import ConfigDef, Importance, NonEmptyString, Password, Range, Type, ValidList, ValidString
from ..errors import ConfigError, ConnectError, RetriableError
from .base import CommitContext, SinkConnector, WriteContext
from .queue_source import Delivered, Inbox, QueueSourceConnector, now_us

__all__ = ["RabbitMQSourceConnector", "RabbitMQSinkConnector"]

log = logging.getLogger(__name__)

_SOURCE = "io.confluent.connect.rabbitmq.RabbitMQSourceConnector"
_SINK = "io.confluent.connect.rabbitmq.RabbitMQSinkConnector"
_PROPERTIES = ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id", "reply_to",
               "expiration", "message_id", "timestamp", "type", "user_id", "app_id")


def _connection_keys() -> ConfigDef:
    return (
        ConfigDef()
        .define("rabbitmq.host", Type.STRING, "localhost", NonEmptyString(), Importance.HIGH,
                "The RabbitMQ host to connect to.")
        .define("rabbitmq.port", Type.INT, 5672, Range.between(1, 65535), Importance.MEDIUM,
                "The RabbitMQ port to connect to.")
        .define("rabbitmq.username", Type.STRING, "guest", importance=Importance.HIGH,
                doc="The username to authenticate to RabbitMQ with.")
        .define("rabbitmq.password", Type.PASSWORD, "guest", importance=Importance.HIGH,
                doc="The password to authenticate to RabbitMQ with.")
        .define("rabbitmq.virtual.host", Type.STRING, "/", importance=Importance.HIGH,
                doc="The virtual host to use when connecting to the broker.")
        .define("rabbitmq.connection.timeout.ms", Type.INT, 60000, Range.at_least(0), Importance.LOW,
                "Connection TCP establishment timeout in milliseconds.")
        .define("rabbitmq.requested.heartbeat.seconds", Type.INT, 60, Range.at_least(0), Importance.LOW,
                "Requested heartbeat timeout, in seconds.")
    )


def _password(config: Any) -> str:
    value = config["rabbitmq.password"]
    return (value.value() if isinstance(value, Password) else value) or ""


def _parameters(config: Any) -> Any:
    import pika

    return pika.ConnectionParameters(
        host=config["rabbitmq.host"], port=config["rabbitmq.port"], virtual_host=config["rabbitmq.virtual.host"],
        credentials=pika.PlainCredentials(config["rabbitmq.username"], _password(config)),
        socket_timeout=config["rabbitmq.connection.timeout.ms"] / 1000,
        blocked_connection_timeout=config["rabbitmq.connection.timeout.ms"] / 1000,
        heartbeat=config["rabbitmq.requested.heartbeat.seconds"])


def _connect(config: Any) -> Any:
    import pika

    try:
        return pika.BlockingConnection(_parameters(config))
    except pika.exceptions.ProbableAuthenticationError as e:
        raise ConnectError(f"RabbitMQ refused the login of rabbitmq.username={config['rabbitmq.username']!r} "
                           f"(check rabbitmq.password)") from e
    except pika.exceptions.AMQPError as e:
        raise RetriableError(f"Cannot connect to RabbitMQ at rabbitmq.host={config['rabbitmq.host']}, "
                             f"rabbitmq.port={config['rabbitmq.port']}: {e!r}") from e


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()


class _Consumer:
    """The source's driver-side channel: a thread consumes into the inbox; acks go through the connection's
    thread-safe callback queue (pika's channels belong to the thread that runs them)."""

    def __init__(self, config: Any, inbox: Inbox):
        self.inbox = inbox
        self.failure: str | None = None
        self.connection = _connect(config)
        self.channel = self.connection.channel()
        self.channel.basic_qos(prefetch_count=config["rabbitmq.prefetch.count"],
                               global_qos=config["rabbitmq.prefetch.global"])
        import pika

        for queue in config["rabbitmq.queue"]:
            try:
                self.channel.basic_consume(queue, self._on_message)
            except pika.exceptions.ChannelClosedByBroker as e:
                self.connection.close()
                raise ConnectError(f"Cannot consume from rabbitmq.queue {queue!r}: {e.reply_text}") from e
        self.thread = threading.Thread(target=self._run, name="kconnect-rabbitmq-consumer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.channel.start_consuming()
        except Exception as e:  # noqa: BLE001 - reported on the next trigger, never lost
            self.failure = f"The RabbitMQ consumer stopped: {e!r}"

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        headers = [(str(k), _text(v)) for k, v in (properties.headers or {}).items()]
        headers += [(f"rabbitmq.{name.replace('_', '.')}", _text(getattr(properties, name)))
                    for name in _PROPERTIES if getattr(properties, name) is not None]
        headers += [("rabbitmq.redelivered", b"true" if method.redelivered else b"false"),
                    ("rabbitmq.exchange", method.exchange.encode()),
                    ("rabbitmq.routing.key", method.routing_key.encode())]
        self.inbox.put(Delivered(None, body, now_us(), tuple(headers)), method.delivery_tag)

    def ack(self, tokens: Sequence[int]) -> None:
        last = max(tokens)
        done = threading.Event()

        def ack() -> None:
            self.channel.basic_ack(delivery_tag=last, multiple=True)
            done.set()

        self.connection.add_callback_threadsafe(ack)
        done.wait(30)

    def close(self) -> None:
        try:
            self.connection.add_callback_threadsafe(self.channel.stop_consuming)
            self.thread.join(10)
            self.connection.close()
        except Exception:
            log.debug("RabbitMQ consumer: close failed", exc_info=True)


class RabbitMQSourceConnector(QueueSourceConnector):
    """Consumes RabbitMQ queues (``io.confluent.connect.rabbitmq.RabbitMQSourceConnector``), acknowledged after
    Spark's commit."""

    kafka_class = _SOURCE
    partition_fields: ClassVar[dict[str, type] | None] = {"rabbitmq.queue": str}
    config_def = (
        ConfigDef()
        .define("kafka.topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="The topic of the records (Kafka's topic the original writes to).")
        .define("rabbitmq.queue", Type.LIST, validator=ValidList(NonEmptyString(), non_empty=True),
                importance=Importance.HIGH, doc="The RabbitMQ queues to consume from.")
        .define("rabbitmq.prefetch.count", Type.INT, 0, Range.at_least(0), Importance.MEDIUM,
                "The most unacknowledged messages RabbitMQ hands the source (0: no limit). A micro-batch's "
                "messages stay unacknowledged until Spark's commit, so this bounds a micro-batch.")
        .define("rabbitmq.prefetch.global", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Apply rabbitmq.prefetch.count to the whole channel rather than to each consumer.")
        .merge(_connection_keys())
    )

    def schema(self) -> Any:
        from pyspark.sql.types import BinaryType

        from ..core.records import record_schema

        return record_schema(BinaryType(), BinaryType())

    def _partition(self) -> dict[str, Any]:
        return {"rabbitmq.queue": ",".join(self.config["rabbitmq.queue"])}

    def _open(self, inbox: Inbox) -> _Consumer:
        return _Consumer(self.config, inbox)


class RabbitMQSinkConnector(SinkConnector):
    """Publishes record values to a RabbitMQ exchange (``io.confluent.connect.rabbitmq.RabbitMQSinkConnector``)
    with publisher confirms, at least once."""

    kafka_class = _SINK
    config_def = (
        ConfigDef()
        .define("rabbitmq.exchange", Type.STRING, "", importance=Importance.HIGH,
                doc="The exchange to publish to (empty: the default exchange, routing by queue name).")
        .define("rabbitmq.routing.key", Type.STRING, "", importance=Importance.HIGH,
                doc="The routing key of every message (empty: the record's topic).")
        .define("rabbitmq.delivery.mode", Type.STRING, "PERSISTENT", ValidString("PERSISTENT", "TRANSIENT"),
                Importance.HIGH, "PERSISTENT (delivery mode 2: written to disk by a durable queue) or TRANSIENT.")
        .merge(_connection_keys())
    )

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType

        if "value" not in schema.fieldNames():
            raise ConfigError(f"RabbitMQSinkConnector needs a 'value' column; the input has {schema.fieldNames()}")
        if not isinstance(schema["value"].dataType, (BinaryType, StringType)):
            raise ConfigError(f"RabbitMQSinkConnector publishes a binary or string value, not "
                              f"{schema['value'].dataType.simpleString()} (set value.converter, e.g. "
                              f"ByteArrayConverter or JsonConverter)")

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> int:
        import pika

        connection = _connect(self.config)
        sent = 0
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            exchange = self.config["rabbitmq.exchange"] or ""
            fixed_key = self.config["rabbitmq.routing.key"]
            mode = 2 if self.config["rabbitmq.delivery.mode"] == "PERSISTENT" else 1
            for batch in batches:
                names = batch.schema.names
                values = batch.column(names.index("value")).to_pylist()
                topics = batch.column(names.index("topic")).to_pylist() if "topic" in names else [None] * len(values)
                headers = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
                for i, (value, topic) in enumerate(zip(values, topics)):
                    amqp_headers = {h["key"]: (h["value"].decode("utf-8", "replace") if h["value"] is not None
                                               else None) for h in (headers[i] or [])} if headers else None
                    body = value.encode() if isinstance(value, str) else (value or b"")
                    try:
                        channel.basic_publish(exchange, fixed_key or topic or "", body,
                                              pika.BasicProperties(delivery_mode=mode, headers=amqp_headers or None),
                                              mandatory=True)
                    except pika.exceptions.UnroutableError as e:
                        raise ConnectError(f"RabbitMQ could not route a message of topic {topic!r} (exchange "
                                           f"{exchange!r}, routing key {fixed_key or topic!r}): no queue is bound; "
                                           f"check rabbitmq.exchange and rabbitmq.routing.key") from e
                    except pika.exceptions.NackError as e:
                        raise RetriableError(f"RabbitMQ refused a message of topic {topic!r} (nack)") from e
                    sent += 1
        finally:
            connection.close()
        return sent

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Nothing to do: RabbitMQ confirmed every message in :meth:`write`."""
