"""MQTT source and sink with the keys of Confluent's MQTT connectors (``io.confluent.connect.mqtt.MqttSourceConnector``
and ``MqttSinkConnector``), on the paho-mqtt client (MQTT 3.1.1, as Confluent's paho mqttv3 client).

**MqttSourceConnector** subscribes to ``mqtt.topics`` with ``mqtt.qos`` and acknowledges each QoS 1/2 message only
after Spark has committed the micro-batch that read it (:mod:`.queue_source`). With
``mqtt.clean.session.enabled=false`` the session is persistent (client id ``kconnect-<connector name>``, stable
across restarts): the broker keeps the subscription and the unacknowledged messages while the query is down and
delivers them again, so nothing is lost (at least once). With the default ``true`` (Confluent's default too) a
restart starts a new session and the messages in flight at a crash are lost. Records as Confluent's: ``key`` the
MQTT topic (string), ``value`` the payload (binary), ``topic`` ``kafka.topic``; headers ``mqtt.message.id``,
``mqtt.qos``, ``mqtt.retained`` and ``mqtt.duplicate``. A retained message is delivered when the subscription is
made (``mqtt.retained`` is ``true``); a persistent session that the broker still holds is not subscribed again, so
a restart does not read the retained messages again.

**MqttSinkConnector** publishes each record's value to the MQTT topic named by the record's ``topic`` with
``mqtt.qos`` and ``mqtt.retained.enabled``, and waits for the broker's acknowledgements (QoS 1/2) before the task
ends: at least once.

>>> spark.readStream.format("kconnect").options(**{"connector.class": "MqttSourceConnector",
...     "mqtt.server.uri": "tcp://127.0.0.1:1883", "mqtt.topics": "sensors/#", "kafka.topic": "sensors",
...     "mqtt.qos": "1", "mqtt.clean.session.enabled": "false"}).load()          # doctest: +SKIP
"""

from __future__ import annotations

import logging
import ssl
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..config import ConfigDef, Importance, Lambda, NonEmptyString, Password, Range, Type, ValidList
from ..config.common import CONFLUENT_LICENSE_KEYS
from ..errors import ConfigError, ConfigProblem, ConnectError, RetriableError
from .base import CommitContext, SinkConnector, WriteContext
from .queue_source import Delivered, Inbox, QueueSourceConnector, now_us

__all__ = ["MqttSourceConnector", "MqttSinkConnector"]

log = logging.getLogger(__name__)

_SCHEMES = ("tcp", "ssl", "mqtt", "mqtts")


def _uri_problem(uri: str) -> str | None:
    parts = urlsplit(uri)
    if parts.scheme not in _SCHEMES or not parts.hostname:
        return f"an MQTT server URI such as tcp://host:1883 or ssl://host:8883 (schemes: {', '.join(_SCHEMES)})"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "a port between 0 and 65535"
    return None


def _secret(value: Any) -> str | None:
    """A password key's value (a default is a plain string, a set value a Password), None when blank."""
    return (value.value() if isinstance(value, Password) else value) or None




def _connection_keys() -> ConfigDef:
    return (
        ConfigDef()
        .define("mqtt.server.uri", Type.LIST, validator=ValidList(Lambda(_uri_problem, "tcp://host:port or ssl://host:port"),
                                                                   non_empty=True),
                importance=Importance.HIGH, doc="List of MQTT brokers to connect to (tried in order).")
        .define("mqtt.clean.session.enabled", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Whether the client and server forget the session across restarts and reconnects. false: a "
                    "persistent session (client id kconnect-<name>), which the source needs for at-least-once.")
        .define("mqtt.connect.timeout.seconds", Type.INT, 30, Range.at_least(1), Importance.LOW,
                "Sets the connection timeout value.")
        .define("mqtt.keepalive.interval.seconds", Type.INT, 60, Range.at_least(1), Importance.LOW,
                "Sets the keep alive interval.")
        .define("mqtt.username", Type.STRING, "", importance=Importance.HIGH,
                doc="Username to connect with, or blank to connect without a username.")
        .define("mqtt.password", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="Password to connect with, or blank to connect without a password.")
        .define("mqtt.ssl.trust.store.path", Type.STRING, "", importance=Importance.HIGH,
                doc="The CA certificates (PEM) that validate the server's certificate on ssl:// (Confluent's: a "
                    "Java TrustStore; convert it with keytool -exportcert -rfc). Blank: the system's CAs.")
        .define("mqtt.ssl.trust.store.password", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="Not needed for a PEM file (a Java TrustStore's password).")
        .define("mqtt.ssl.key.store.path", Type.STRING, "", importance=Importance.HIGH,
                doc="The client certificate and its private key (one PEM file) for TLS client authentication.")
        .define("mqtt.ssl.key.store.password", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="Not needed for a PEM file (a Java KeyStore's password).")
        .define("mqtt.ssl.key.password", Type.PASSWORD, "", importance=Importance.HIGH,
                doc="The password of the private key in mqtt.ssl.key.store.path, if it is encrypted.")
    )


class _Connection:
    """Connects a paho client to the first server of ``mqtt.server.uri`` that answers."""

    def __init__(self, config: Any, client_id: str, clean: bool, manual_ack: bool = False):
        import paho.mqtt.client as mqtt

        self.config = config
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean,
                                  protocol=mqtt.MQTTv311, manual_ack=manual_ack)
        user = config["mqtt.username"]
        if user:
            self.client.username_pw_set(user, _secret(config["mqtt.password"]))
        self.client.reconnect_delay_set(1, 30)

    def _tls(self) -> None:
        key_path = self.config["mqtt.ssl.key.store.path"]
        try:
            self.client.tls_set(ca_certs=self.config["mqtt.ssl.trust.store.path"] or None,
                                certfile=key_path or None, keyfile=key_path or None,
                                keyfile_password=_secret(self.config["mqtt.ssl.key.password"]),
                                cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError([ConfigProblem("mqtt.ssl.trust.store.path",
                                             f"Cannot load the TLS files of mqtt.ssl.trust.store.path / "
                                             f"mqtt.ssl.key.store.path (PEM files here): {e}")]) from e

    def connect(self) -> None:
        errors = []
        for uri in self.config["mqtt.server.uri"]:
            parts = urlsplit(uri)
            secure = parts.scheme in ("ssl", "mqtts")
            if secure:
                self._tls()
            try:
                self.client.connect(parts.hostname, parts.port or (8883 if secure else 1883),
                                    keepalive=self.config["mqtt.keepalive.interval.seconds"])
                return
            except OSError as e:
                errors.append(f"{uri}: {e}")
        raise RetriableError(f"Cannot connect to any MQTT server of mqtt.server.uri: {'; '.join(errors)}")


_QOS_HEADERS = tuple(("mqtt.qos", b"%d" % q) for q in range(3))
_RETAINED_HEADERS = {False: ("mqtt.retained", b"false"), True: ("mqtt.retained", b"true")}
_DUPLICATE_HEADERS = {False: ("mqtt.duplicate", b"false"), True: ("mqtt.duplicate", b"true")}


class _Subscription:
    """The source's driver-side session: receives into an inbox, acknowledges what Spark committed."""

    def __init__(self, connector: MqttSourceConnector, inbox: Inbox):
        config = connector.config
        self.inbox = inbox
        self.qos = int(config["mqtt.qos"])
        self.topics = list(config["mqtt.topics"])
        self.clean = bool(config["mqtt.clean.session.enabled"])
        self.ready = threading.Event()
        self.failure: str | None = None
        self.connection = _Connection(config, f"kconnect-{connector.name}", self.clean, manual_ack=True)
        client = self.connection.client
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        client.on_disconnect = self._on_disconnect
        self.connection.connect()
        client.loop_start()
        if not self.ready.wait(config["mqtt.connect.timeout.seconds"]):
            client.loop_stop()
            raise RetriableError(self.failure or f"No subscription to {self.topics} within "
                                                 f"mqtt.connect.timeout.seconds={config['mqtt.connect.timeout.seconds']}")

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            self.failure = f"The MQTT server refused the connection: {reason}"
            log.warning("MQTT source: %s", self.failure)
            return
        if not self.clean and flags.session_present:
            # The broker holds our subscription: subscribing again would resend the retained messages.
            log.info("MQTT source: resumed the persistent session (subscription held by the server)")
            self.ready.set()
            return
        client.subscribe([(t, self.qos) for t in self.topics])

    def _on_subscribe(self, client: Any, userdata: Any, mid: Any, reasons: Any, properties: Any) -> None:
        refused = [str(t) for t, r in zip(self.topics, reasons) if r.is_failure]
        if refused:
            self.failure = f"The MQTT server refused the subscription to {refused} (mqtt.topics)"
        self.ready.set()

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            log.warning("MQTT source: disconnected (%s); paho reconnects", reason)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        token = (msg.mid, msg.qos) if msg.qos else None
        if msg.dup and token is not None and self.inbox.holds(token):
            return  # a redelivery of a message held here since before a reconnect
        # the three flag headers are shared constants: one new pair per message (this runs for every message)
        headers = (("mqtt.message.id", b"%d" % msg.mid), _QOS_HEADERS[msg.qos], _RETAINED_HEADERS[bool(msg.retain)],
                   _DUPLICATE_HEADERS[bool(msg.dup)])
        self.inbox.put(Delivered(msg.topic, msg.payload, now_us(), headers), token)

    def ack(self, tokens: Sequence[Any]) -> None:
        for token in tokens:
            if token is not None:
                self.connection.client.ack(*token)

    def close(self) -> None:
        self.connection.client.loop_stop()
        self.connection.client.disconnect()


class MqttSourceConnector(QueueSourceConnector):
    """Reads MQTT messages (``io.confluent.connect.mqtt.MqttSourceConnector``), acknowledged after Spark's commit."""

    kafka_class = "io.confluent.connect.mqtt.MqttSourceConnector"
    partition_fields: ClassVar[dict[str, type] | None] = {"mqtt.topics": str}
    config_def = (
        ConfigDef()
        .define("mqtt.topics", Type.LIST, validator=ValidList(NonEmptyString(), non_empty=True),
                importance=Importance.HIGH, doc="The MQTT topics (filters, with + and #) to subscribe to.")
        .define("kafka.topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="The topic of the records (Kafka's topic the original writes to).")
        .define("mqtt.qos", Type.INT, 0, Range.between(0, 2), Importance.MEDIUM,
                "The MQTT QoS level to subscribe with. 1 and 2 are acknowledged after Spark's commit.")
        .define("records.buffer.queue.max.batch.size", Type.INT, 4096, Range.at_least(1), Importance.LOW,
                "The most records of one micro-batch when max.records.per.trigger is not set (the original's: "
                "records of one poll).")
        .define("records.buffer.queue.empty.timeout", Type.INT, 100, Range.at_least(0), Importance.LOW,
                "How long (ms) a trigger waits for a first message when none is held.")
        .merge(_connection_keys())
        .accept("io.confluent.connect.mqtt.MqttSourceConnector", no_effect={
            **CONFLUENT_LICENSE_KEYS,
            "records.buffer.queue.size": "the messages wait on the driver until Spark commits the batch that read "
                                         "them; the MQTT server's in-flight window bounds how many"})
    )

    @property
    def default_max_records_per_trigger(self) -> int:  # type: ignore[override]
        return int(self.config["records.buffer.queue.max.batch.size"])

    @property
    def poll_wait(self) -> float:  # type: ignore[override]
        return int(self.config["records.buffer.queue.empty.timeout"]) / 1000

    def schema(self) -> Any:
        from pyspark.sql.types import BinaryType, StringType

        from ..core.records import record_schema

        return record_schema(StringType(), BinaryType())

    def _partition(self) -> dict[str, Any]:
        return {"mqtt.topics": ",".join(self.config["mqtt.topics"])}

    def _open(self, inbox: Inbox) -> _Subscription:
        if self.config["mqtt.qos"] and self.config["mqtt.clean.session.enabled"]:
            log.warning("%s: mqtt.clean.session.enabled=true: messages received but not yet committed when the "
                        "query stops are lost (the server forgets the session); set it to false for at-least-once",
                        self.name)
        return _Subscription(self, inbox)


class MqttSinkConnector(SinkConnector):
    """Publishes record values to MQTT (``io.confluent.connect.mqtt.MqttSinkConnector``), at least once."""

    kafka_class = "io.confluent.connect.mqtt.MqttSinkConnector"
    config_def = (
        ConfigDef()
        .define("mqtt.qos", Type.INT, 0, Range.between(0, 2), Importance.MEDIUM,
                "The MQTT QoS level to publish with; 1 and 2 wait for the server's acknowledgement.")
        .define("mqtt.retained.enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Whether the messages are published with the retained flag.")
        .merge(_connection_keys())
        .accept("io.confluent.connect.mqtt.MqttSinkConnector", no_effect=CONFLUENT_LICENSE_KEYS)
    )

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType

        problems = []
        for column in ("topic", "value"):
            if column not in schema.fieldNames():
                problems.append(f"needs a '{column}' column")
        if "value" in schema.fieldNames() and not isinstance(schema["value"].dataType, (BinaryType, StringType)):
            problems.append(f"publishes a binary or string value, not {schema['value'].dataType.simpleString()} "
                            f"(set value.converter, e.g. ByteArrayConverter or JsonConverter)")
        if problems:
            raise ConfigError(f"MqttSinkConnector {'; '.join(problems)}; the input has {schema.fieldNames()}")

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> int:
        connection = _Connection(self.config, f"kconnect-{self.name}-{ctx.partition_id}-{uuid.uuid4().hex[:8]}",
                                 clean=True)
        client = connection.client
        client.max_inflight_messages_set(1000)  # paho's default of 20 unacknowledged publishes is slow
        connection.connect()
        client.loop_start()
        qos, retain = int(self.config["mqtt.qos"]), bool(self.config["mqtt.retained.enabled"])
        sent = []
        try:
            for batch in batches:
                topics = batch.column(batch.schema.get_field_index("topic")).to_pylist()
                values = batch.column(batch.schema.get_field_index("value")).to_pylist()
                for topic, value in zip(topics, values):
                    if topic is None:
                        raise ConnectError("MqttSinkConnector: a record has no topic (the MQTT topic it is "
                                           "published to)")
                    payload = value.encode() if isinstance(value, str) else value
                    sent.append(client.publish(topic, payload, qos=qos, retain=retain))
            timeout = float(self.config["mqtt.connect.timeout.seconds"])
            for info in sent:
                info.wait_for_publish(timeout)
                if not info.is_published():
                    raise RetriableError(f"MqttSinkConnector: the MQTT server did not acknowledge a message "
                                         f"within mqtt.connect.timeout.seconds={timeout:g} (rc {info.rc})")
        finally:
            client.disconnect()
            client.loop_stop()
        return len(sent)

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Nothing to do: every message was acknowledged by the server in :meth:`write`."""
