"""RabbitMQ source and sink with the keys of Confluent's RabbitMQ connectors
(``io.confluent.connect.rabbitmq.RabbitMQSourceConnector`` and
``io.confluent.connect.rabbitmq.sink.RabbitMQSinkConnector``), on the pika client.

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

Both take Confluent's connection keys: TLS with ``rabbitmq.security.protocol=SSL`` and Kafka's client SSL keys under
``rabbitmq.https.`` (PEM files and PEM values here, where Confluent's read Java key stores), and automatic recovery
(``rabbitmq.automatic.recovery.enabled``, ``rabbitmq.network.recovery.interval.ms``): a lost connection is opened
again every interval until the broker is back; the source's consumer is registered again, and the messages it held
unacknowledged are redelivered by RabbitMQ (read again: at least once).

>>> spark.readStream.format("kconnect").options(**{"connector.class": "RabbitMQSourceConnector",
...     "rabbitmq.host": "127.0.0.1", "rabbitmq.queue": "orders", "kafka.topic": "orders"}).load()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ..config import (
    CaseInsensitiveValidString,
    ConfigDef,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Type,
    ValidList,
    ValidString,
)
from ..config.common import CONFLUENT_LICENSE_KEYS
from ..errors import ConfigError, ConfigProblem, ConnectError, RetriableError
from .base import CommitContext, SinkConnector, WriteContext
from .queue_source import Delivered, Inbox, QueueSourceConnector, now_us

__all__ = ["RabbitMQSourceConnector", "RabbitMQSinkConnector"]

log = logging.getLogger(__name__)

_SOURCE = "io.confluent.connect.rabbitmq.RabbitMQSourceConnector"
_SINK = "io.confluent.connect.rabbitmq.sink.RabbitMQSinkConnector"  # as Confluent's configuration reference names it
_TLS = "rabbitmq.https."
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# A stored password is kept for a config sent back masked only while these are unchanged too (beside the host, port,
# user and security protocol keys every connector's are): the server is verified against the same CAs and host name.
_TLS_DESTINATION = (_TLS + "ssl.truststore.location", _TLS + "ssl.endpoint.identification.algorithm",
                    "rabbitmq.virtual.host")
_PYTHON_TLS = "Python's ssl module (OpenSSL) makes the TLS connection"
_BY_VERSIONS = "the TLS versions are those of rabbitmq.https.ssl.enabled.protocols"
_PEM = "the trust store and key store are PEM files here (no store password; an encrypted key's is ssl.key.password)"
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
        .define("rabbitmq.requested.channel.max", Type.INT, 2047, Range.between(0, 65535), Importance.LOW,
                "Initially requested maximum channel number (0: the most AMQP allows, 65535).")
        .define("rabbitmq.requested.frame.max", Type.INT, 0, Range.at_least(0), Importance.LOW,
                "Initially requested maximum frame size, in octets (0: pika's largest, 131072; otherwise at least "
                "4096).")
        .define("rabbitmq.handshake.timeout.ms", Type.INT, 10000, Range.at_least(0), Importance.LOW,
                "The AMQP handshake timeout in milliseconds: with rabbitmq.connection.timeout.ms, the time a "
                "connection (TCP, TLS and AMQP handshakes) may take to open.")
        .define("rabbitmq.automatic.recovery.enabled", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Open a lost connection again (every rabbitmq.network.recovery.interval.ms until the broker is "
                    "back) and go on; false: a lost connection fails the query or the task.")
        .define("rabbitmq.topology.recovery.enabled", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Register the source's consumers again on a recovered connection (the connectors declare no "
                    "queue, exchange or binding of their own); false: a lost connection fails the query.")
        .define("rabbitmq.network.recovery.interval.ms", Type.INT, 10000, Range.at_least(0), Importance.LOW,
                "How long automatic recovery waits before each attempt to open the connection again.")
        .define("rabbitmq.security.protocol", Type.STRING, "PLAINTEXT", CaseInsensitiveValidString("PLAINTEXT", "SSL"),
                Importance.MEDIUM, "PLAINTEXT or SSL (TLS). With PLAINTEXT every rabbitmq.https. key is ignored.")
        .define(_TLS + "ssl.truststore.location", Type.STRING, "", importance=Importance.HIGH,
                doc="A PEM file of the CA certificates that validate the server (Confluent's: a Java trust store; "
                    "keytool -exportcert -rfc converts it). Blank: the system's CAs.")
        .define(_TLS + "ssl.truststore.certificates", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="Trusted CA certificates as PEM text (in place of, or beside, ssl.truststore.location).")
        .define(_TLS + "ssl.keystore.location", Type.STRING, "", importance=Importance.HIGH,
                doc="A PEM file with the client's certificate chain and private key, for brokers that ask for a "
                    "client certificate (Confluent's: a Java key store; openssl pkcs12 converts it).")
        .define(_TLS + "ssl.key.password", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="The password of the private key, if it is encrypted.")
        .define(_TLS + "ssl.keystore.key", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="The client's private key as PEM text (with ssl.keystore.certificate.chain; in place of "
                    "ssl.keystore.location).")
        .define(_TLS + "ssl.keystore.certificate.chain", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="The client's certificate chain as PEM text (with ssl.keystore.key).")
        .define(_TLS + "ssl.enabled.protocols", Type.LIST, ["TLSv1.2", "TLSv1.3"],
                ValidList(CaseInsensitiveValidString(*_TLS_VERSIONS)), Importance.MEDIUM,
                "The TLS versions allowed (TLSv1.2, TLSv1.3).")
        .define(_TLS + "ssl.endpoint.identification.algorithm", Type.STRING, "https",
                CaseInsensitiveValidString("https", ""), Importance.LOW,
                "https: the server's host name must match its certificate; empty: the certificate chain is still "
                "verified, the host name not.")
        .accept(_SOURCE, no_effect={
            "rabbitmq.shutdown.timeout.ms": "the source's consumer thread stops at once; messages it had not "
                                            "handed to a batch are redelivered by RabbitMQ",
            _TLS + "ssl.protocol": _BY_VERSIONS, _TLS + "ssl.provider": _PYTHON_TLS,
            _TLS + "ssl.keymanager.algorithm": _PYTHON_TLS, _TLS + "ssl.trustmanager.algorithm": _PYTHON_TLS,
            _TLS + "ssl.secure.random.implementation": _PYTHON_TLS,
            _TLS + "ssl.keystore.type": _PEM, _TLS + "ssl.truststore.type": _PEM,
            _TLS + "ssl.keystore.password": _PEM, _TLS + "ssl.truststore.password": _PEM,
        }, not_supported={
            _TLS + "ssl.cipher.suites": "Python's TLS (OpenSSL) chooses its ciphers; Java's cipher suite names do not "
                                        "apply",
        }, refused={
            _TLS + "ssl.engine.factory.class": "a Java SslEngineFactory cannot run here; set the rabbitmq.https.ssl.* "
                                               "keys",
        })
        .check(_tls_problems)
    )


def _secret(value: Any) -> str:
    return (value.value() if isinstance(value, Password) else value) or ""


def _tls_problems(config: Any) -> list[ConfigProblem]:
    if str(config["rabbitmq.security.protocol"]).upper() != "SSL":
        return []
    problems = []
    key, chain = _secret(config[_TLS + "ssl.keystore.key"]), _secret(config[_TLS + "ssl.keystore.certificate.chain"])
    if bool(key) != bool(chain):
        missing = "ssl.keystore.certificate.chain" if key else "ssl.keystore.key"
        problems.append(ConfigProblem(_TLS + missing, f"{_TLS}ssl.keystore.key and {_TLS}"
                                      f"ssl.keystore.certificate.chain go together: set {_TLS}{missing}"))
    if key and config[_TLS + "ssl.keystore.location"]:
        problems.append(ConfigProblem(_TLS + "ssl.keystore.location", f"Set either {_TLS}ssl.keystore.location or "
                                      f"{_TLS}ssl.keystore.key with its certificate chain, not both"))
    return problems


def _tls_context(config: Any) -> ssl.SSLContext:
    """The TLS context of ``rabbitmq.https.*``: the server verified against the trust store (or the system's CAs),
    its host name checked unless the endpoint identification algorithm is empty; a client certificate if given."""
    trust, cas = config[_TLS + "ssl.truststore.location"], _secret(config[_TLS + "ssl.truststore.certificates"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if trust or cas:
            context.load_verify_locations(cafile=trust or None, cadata=cas or None)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (OSError, ssl.SSLError, ValueError) as e:
        which = "ssl.truststore.location" if trust else "ssl.truststore.certificates"
        raise ConfigError([ConfigProblem(_TLS + which, f"Cannot load the CA certificates of {_TLS}{which} (PEM "
                                                       f"here; keytool -exportcert -rfc converts a Java trust "
                                                       f"store): {e}")]) from e
    by_name = {name.lower(): version for name, version in _TLS_VERSIONS.items()}
    versions = sorted(by_name[v] for v in (str(p).lower() for p in config[_TLS + "ssl.enabled.protocols"])
                      if v in by_name) or sorted(_TLS_VERSIONS.values())
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    context.check_hostname = bool(config[_TLS + "ssl.endpoint.identification.algorithm"])
    location = config[_TLS + "ssl.keystore.location"]
    password = _secret(config[_TLS + "ssl.key.password"]) or None
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif _secret(config[_TLS + "ssl.keystore.key"]):
            _load_pem_values(context, _secret(config[_TLS + "ssl.keystore.certificate.chain"]),
                             _secret(config[_TLS + "ssl.keystore.key"]), password)
    except (OSError, ssl.SSLError) as e:
        which = "ssl.keystore.location" if location else "ssl.keystore.key"
        raise ConfigError([ConfigProblem(_TLS + which, f"Cannot load the client certificate and key of {_TLS}{which} "
                                                       f"(PEM here, with {_TLS}ssl.key.password if the key is "
                                                       f"encrypted; openssl pkcs12 converts a Java key store): "
                                                       f"{e}")]) from e
    return context


def _load_pem_values(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """Load a certificate chain and key given as PEM text: OpenSSL reads them from a file, so they go through a
    private temporary file (mode 0600) removed at once."""
    fd, path = tempfile.mkstemp(prefix="kconnect-rabbitmq-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _parameters(config: Any) -> Any:
    import pika

    timeout = config["rabbitmq.connection.timeout.ms"] / 1000
    frame_max = config["rabbitmq.requested.frame.max"]
    tls = None
    if str(config["rabbitmq.security.protocol"]).upper() == "SSL":
        tls = pika.SSLOptions(_tls_context(config), server_hostname=config["rabbitmq.host"])
    return pika.ConnectionParameters(
        host=config["rabbitmq.host"], port=config["rabbitmq.port"], virtual_host=config["rabbitmq.virtual.host"],
        credentials=pika.PlainCredentials(config["rabbitmq.username"], _secret(config["rabbitmq.password"])),
        socket_timeout=timeout or None, blocked_connection_timeout=timeout or None,
        stack_timeout=(timeout + config["rabbitmq.handshake.timeout.ms"] / 1000) or None,
        heartbeat=config["rabbitmq.requested.heartbeat.seconds"],
        channel_max=config["rabbitmq.requested.channel.max"] or 65535,
        frame_max=max(frame_max, 4096) if frame_max else pika.spec.FRAME_MAX_SIZE, ssl_options=tls)


def _connect(config: Any) -> Any:
    import pika

    try:
        return pika.BlockingConnection(_parameters(config))
    except pika.exceptions.ProbableAuthenticationError as e:
        raise ConnectError(f"RabbitMQ refused the login of rabbitmq.username={config['rabbitmq.username']!r} "
                           f"(check rabbitmq.password)") from e
    except (pika.exceptions.AMQPError, ssl.SSLError) as e:
        if isinstance(e, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in repr(e):
            raise ConnectError(f"The TLS connection to RabbitMQ at rabbitmq.host={config['rabbitmq.host']}, "
                               f"rabbitmq.port={config['rabbitmq.port']} failed: check "
                               f"{_TLS}ssl.truststore.location (the CA of the server's certificate), "
                               f"{_TLS}ssl.endpoint.identification.algorithm and that the port is the broker's TLS "
                               f"listener: {e!r}") from e
        raise RetriableError(f"Cannot connect to RabbitMQ at rabbitmq.host={config['rabbitmq.host']}, "
                             f"rabbitmq.port={config['rabbitmq.port']}: {e!r}") from e


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()


def _recovers(config: Any) -> bool:
    return bool(config["rabbitmq.automatic.recovery.enabled"])


class _Consumer:
    """The source's driver-side channel: a thread consumes into the inbox; acks go through the connection's
    thread-safe callback queue (pika's channels belong to the thread that runs them).

    With automatic recovery a lost connection is opened again every ``rabbitmq.network.recovery.interval.ms`` and
    the consumers registered again. RabbitMQ redelivers what the lost channel held unacknowledged: the messages not
    yet numbered are dropped from the inbox (their copies come again), those already in a batch are read again
    (at least once). A delivery tag belongs to its channel, so a token is ``(generation, tag)`` and only the current
    channel's tags are acknowledged."""

    def __init__(self, config: Any, inbox: Inbox):
        self.config = config
        self.inbox = inbox
        self.failure: str | None = None
        self.generation = 0
        self._closing = threading.Event()
        self.connection, self.channel = self._consume()
        self.thread = threading.Thread(target=self._run, name="kconnect-rabbitmq-consumer", daemon=True)
        self.thread.start()

    def _consume(self) -> tuple[Any, Any]:
        import pika

        connection = _connect(self.config)
        channel = connection.channel()
        channel.basic_qos(prefetch_count=self.config["rabbitmq.prefetch.count"],
                          global_qos=self.config["rabbitmq.prefetch.global"])
        for queue in self.config["rabbitmq.queue"]:
            try:
                channel.basic_consume(queue, self._on_message)
            except pika.exceptions.ChannelClosedByBroker as e:
                connection.close()
                raise ConnectError(f"Cannot consume from rabbitmq.queue {queue!r}: {e.reply_text}") from e
        return connection, channel

    def _run(self) -> None:
        import pika

        while True:
            try:
                self.channel.start_consuming()
                return  # stopped by close()
            except pika.exceptions.AMQPConnectionError as e:
                if self._closing.is_set():
                    return
                if not (_recovers(self.config) and self.config["rabbitmq.topology.recovery.enabled"]):
                    self.failure = (f"The RabbitMQ connection was lost ({e!r}) and "
                                    f"rabbitmq.automatic.recovery.enabled or rabbitmq.topology.recovery.enabled is "
                                    f"false; the messages not acknowledged are redelivered to the next query")
                    return
                log.warning("RabbitMQ connection to rabbitmq.host=%s lost (%r): recovering every %d ms",
                            self.config["rabbitmq.host"], e, self.config["rabbitmq.network.recovery.interval.ms"])
                if not self._recover():
                    return
            except Exception as e:  # noqa: BLE001 - reported on the next trigger, never lost
                self.failure = f"The RabbitMQ consumer stopped: {e!r}"
                return

    def _recover(self) -> bool:
        """Open the connection again until it works or the source closes; False when it closes."""
        interval = self.config["rabbitmq.network.recovery.interval.ms"] / 1000
        while not self._closing.wait(interval):
            self.generation += 1  # from here on, deliveries are the new channel's
            self.inbox.drop_unnumbered(self._stale)
            try:
                self.connection, self.channel = self._consume()
            except (ConnectError, RetriableError) as e:
                log.warning("RabbitMQ recovery failed, retrying in %.1f s: %s", interval, e)
                continue
            log.warning("RabbitMQ connection to rabbitmq.host=%s recovered", self.config["rabbitmq.host"])
            return True
        return False

    def _stale(self, token: tuple[int, int]) -> bool:
        """Whether a token is a delivery of a lost channel (RabbitMQ requeued it)."""
        return token[0] < self.generation

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        headers = [(str(k), _text(v)) for k, v in (properties.headers or {}).items()]
        headers += [(f"rabbitmq.{name.replace('_', '.')}", _text(getattr(properties, name)))
                    for name in _PROPERTIES if getattr(properties, name) is not None]
        headers += [("rabbitmq.redelivered", b"true" if method.redelivered else b"false"),
                    ("rabbitmq.exchange", method.exchange.encode()),
                    ("rabbitmq.routing.key", method.routing_key.encode())]
        self.inbox.put(Delivered(None, body, now_us(), tuple(headers)), (self.generation, method.delivery_tag))

    def ack(self, tokens: Sequence[tuple[int, int]]) -> None:
        generation = self.generation
        tags = [tag for gen, tag in tokens if gen == generation]
        if not tags:
            return  # delivered on a lost channel: RabbitMQ requeued them
        last = max(tags)
        connection, channel = self.connection, self.channel
        done = threading.Event()

        def ack() -> None:
            try:
                channel.basic_ack(delivery_tag=last, multiple=True)
            except Exception:  # the channel was lost: RabbitMQ requeued its messages
                log.debug("RabbitMQ consumer: ack on a lost channel skipped", exc_info=True)
            finally:
                done.set()

        try:
            connection.add_callback_threadsafe(ack)
        except Exception:  # the connection is gone: its messages are requeued, nothing to ack
            log.debug("RabbitMQ consumer: ack on a closed connection skipped", exc_info=True)
            return
        deadline = time.monotonic() + 30
        while not done.wait(0.2) and self.generation == generation and time.monotonic() < deadline:
            pass

    def close(self) -> None:
        self._closing.set()
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
    destination_keys: ClassVar[tuple[str, ...]] = _TLS_DESTINATION
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
        .accept(_SOURCE, no_effect=CONFLUENT_LICENSE_KEYS)
    )

    def schema(self) -> Any:
        from pyspark.sql.types import BinaryType

        from ..core.records import record_schema

        return record_schema(BinaryType(), BinaryType())

    def _partition(self) -> dict[str, Any]:
        return {"rabbitmq.queue": ",".join(self.config["rabbitmq.queue"])}

    def _open(self, inbox: Inbox) -> _Consumer:
        return _Consumer(self.config, inbox)


class _Publisher:
    """The sink task's channel with publisher confirms: each message waits for RabbitMQ's confirm. With automatic
    recovery a lost connection is opened again every ``rabbitmq.network.recovery.interval.ms``, for up to
    ``rabbitmq.connection.timeout.ms`` of outage, and the unconfirmed message published again (at least once)."""

    def __init__(self, config: Any):
        import pika

        self.config = config
        self.exchange = config["rabbitmq.exchange"] or ""
        self.fixed_key = config["rabbitmq.routing.key"]
        self.mode = 2 if config["rabbitmq.delivery.mode"] == "PERSISTENT" else 1
        self.properties = pika.BasicProperties
        self.connection, self.channel = self._open()

    def _open(self) -> tuple[Any, Any]:
        connection = _connect(self.config)
        channel = connection.channel()
        channel.confirm_delivery()
        return connection, channel

    def publish(self, topic: str | None, body: bytes, headers: dict[str, Any] | None) -> None:
        import pika

        routing_key = self.fixed_key or topic or ""
        lost_since: float | None = None
        while True:
            try:
                self.channel.basic_publish(self.exchange, routing_key, body,
                                           self.properties(delivery_mode=self.mode, headers=headers), mandatory=True)
                return
            except pika.exceptions.UnroutableError as e:
                raise ConnectError(f"RabbitMQ could not route a message of topic {topic!r} (exchange "
                                   f"{self.exchange!r}, routing key {routing_key!r}): no queue is bound; check "
                                   f"rabbitmq.exchange and rabbitmq.routing.key") from e
            except pika.exceptions.NackError as e:
                raise RetriableError(f"RabbitMQ refused a message of topic {topic!r} (nack)") from e
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.ChannelWrongStateError) as e:
                lost_since = lost_since or time.monotonic()
                self._recover(e, lost_since)

    def _recover(self, error: Exception, lost_since: float) -> None:
        """Open the connection again after the interval, or raise when recovery is off or the outage too long."""
        where = f"rabbitmq.host={self.config['rabbitmq.host']}, rabbitmq.port={self.config['rabbitmq.port']}"
        if not _recovers(self.config):
            raise RetriableError(f"The RabbitMQ connection to {where} was lost ({error!r}); "
                                 f"rabbitmq.automatic.recovery.enabled is false") from error
        limit = self.config["rabbitmq.connection.timeout.ms"] / 1000
        while True:
            if time.monotonic() - lost_since > limit:
                raise RetriableError(f"The RabbitMQ connection to {where} was lost ({error!r}) and did not come back "
                                     f"within rabbitmq.connection.timeout.ms") from error
            log.warning("RabbitMQ connection to %s lost (%r): reconnecting in %d ms", where, error,
                        self.config["rabbitmq.network.recovery.interval.ms"])
            time.sleep(self.config["rabbitmq.network.recovery.interval.ms"] / 1000)
            try:
                self.connection, self.channel = self._open()
                return
            except RetriableError as e:
                error = e

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:  # a lost connection has nothing to close
            log.debug("RabbitMQ sink: close failed", exc_info=True)


class RabbitMQSinkConnector(SinkConnector):
    """Publishes record values to a RabbitMQ exchange (``io.confluent.connect.rabbitmq.sink.RabbitMQSinkConnector``)
    with publisher confirms, at least once."""

    kafka_class = _SINK
    destination_keys: ClassVar[tuple[str, ...]] = _TLS_DESTINATION
    config_def = (
        ConfigDef()
        .define("rabbitmq.exchange", Type.STRING, "", importance=Importance.HIGH,
                doc="The exchange to publish to (empty: the default exchange, routing by queue name).")
        .define("rabbitmq.routing.key", Type.STRING, "", importance=Importance.HIGH,
                doc="The routing key of every message (empty: the record's topic).")
        .define("rabbitmq.delivery.mode", Type.STRING, "PERSISTENT", ValidString("PERSISTENT", "TRANSIENT"),
                Importance.HIGH, "PERSISTENT (delivery mode 2: written to disk by a durable queue) or TRANSIENT.")
        .merge(_connection_keys())
        .accept(_SINK, no_effect=CONFLUENT_LICENSE_KEYS)
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
        publisher = _Publisher(self.config)
        sent = 0
        try:
            for batch in batches:
                names = batch.schema.names
                values = batch.column(names.index("value")).to_pylist()
                topics = batch.column(names.index("topic")).to_pylist() if "topic" in names else [None] * len(values)
                headers = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
                for i, (value, topic) in enumerate(zip(values, topics)):
                    amqp_headers = {h["key"]: (h["value"].decode("utf-8", "replace") if h["value"] is not None
                                               else None) for h in (headers[i] or [])} if headers else None
                    body = value.encode() if isinstance(value, str) else (value or b"")
                    publisher.publish(topic, body, amqp_headers or None)
                    sent += 1
        finally:
            publisher.close()
        return sent

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Nothing to do: RabbitMQ confirmed every message in :meth:`write`."""
