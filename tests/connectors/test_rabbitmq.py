"""The RabbitMQ source and sink against RabbitMQ 3.10 (Debian's package), with Confluent's RabbitMQ connector keys:
pika publishes and consumes as a user's service would; our source acknowledges after Spark's commit, so messages
published while the query is down, and those it had not acknowledged, are read after a restart (at least once)."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support import servers

pika = pytest.importorskip("pika")


@pytest.fixture(scope="module")
def broker():
    return servers.rabbitmq()


def _channel(broker):
    connection = pika.BlockingConnection(pika.ConnectionParameters(*broker))
    return connection, connection.channel()


def _publish(broker, queue, values):
    connection, channel = _channel(broker)
    channel.queue_declare(queue, durable=True)
    for v in values:
        channel.basic_publish("", queue, str(v).encode(),
                              pika.BasicProperties(message_id=f"m{v}", headers={"origin": "test"}, delivery_mode=2))
    connection.close()


def _rows(spark, path):
    try:
        return spark.read.parquet(str(path)).collect()
    except Exception:  # noqa: BLE001 - no file committed yet
        return []


def _poll(predicate, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _source(broker, queue, **extra):
    return {"connector.class": "io.confluent.connect.rabbitmq.RabbitMQSourceConnector", "name": f"rmq-{queue}",
            "rabbitmq.host": broker[0], "rabbitmq.port": str(broker[1]), "rabbitmq.queue": queue,
            "kafka.topic": "orders", "rabbitmq.prefetch.count": "500", **extra}


def _start(spark, config, out, ckpt):
    df = spark.readStream.format("kconnect").options(**config).load()
    return (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
            .trigger(processingTime="200 milliseconds").start())


def _queued(broker, queue):
    connection, channel = _channel(broker)
    n = channel.queue_declare(queue, durable=True, passive=True).method.message_count
    connection.close()
    return n


def test_source_reads_every_message_across_a_restart_with_headers(spark, broker, tmp_path):
    queue = f"orders-{uuid.uuid4().hex[:6]}"
    _publish(broker, queue, range(150))
    config = _source(broker, queue, **{"max.records.per.trigger": "60"})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = _start(spark, config, out, ckpt)
    try:
        _poll(lambda: len(_rows(spark, out)) >= 150, what="150 records")
    finally:
        query.stop()
    first_run = len(_rows(spark, out))
    _publish(broker, queue, range(150, 300))
    query = _start(spark, config, out, ckpt)
    try:
        _poll(lambda: {int(r.value) for r in _rows(spark, out)} >= set(range(300)), what="every message")
        _poll(lambda: _queued(broker, queue) == 0, what="the queue acknowledged empty")
    finally:
        query.stop()
    rows = _rows(spark, out)
    assert sorted({int(r.value) for r in rows}) == list(range(300))
    # At least once: only the batches not yet acknowledged at the stop (at most 60 records each) come again.
    assert len(rows) - 300 <= 60 and first_run >= 150, (len(rows), first_run)
    sample = next(r for r in rows if r.value == b"7")
    headers = {h.key: h.value for h in sample.headers}
    assert headers["origin"] == b"test" and headers["rabbitmq.message.id"] == b"m7"
    assert headers["rabbitmq.delivery.mode"] == b"2" and headers["rabbitmq.routing.key"] == queue.encode()
    assert sample.key is None and sample.topic == "orders"


def test_sink_publishes_every_value_with_confirms(spark, broker):
    queue = f"alerts-{uuid.uuid4().hex[:6]}"
    connection, channel = _channel(broker)
    channel.queue_declare(queue, durable=True)
    connection.close()
    df = spark.createDataFrame([(queue, f"a{i}") for i in range(200)], "topic string, value string")
    (df.write.format("kconnect").mode("append")
     .options(**{"connector.class": "io.confluent.connect.rabbitmq.RabbitMQSinkConnector", "name": "rmq-sink",
                 "rabbitmq.host": broker[0], "rabbitmq.port": str(broker[1]), "rabbitmq.exchange": "",
                 "rabbitmq.delivery.mode": "PERSISTENT"}).save())
    connection, channel = _channel(broker)
    got = []
    while (message := channel.basic_get(queue, auto_ack=True))[0] is not None:
        got.append((message[2].decode(), message[1].delivery_mode))
    connection.close()
    assert sorted(got) == sorted((f"a{i}", 2) for i in range(200))


@pytest.mark.parametrize(("key", "value", "message"), [
    ("rabbitmq.port", "0", "Invalid value 0 for configuration rabbitmq.port"),
    ("rabbitmq.queue", "", "Invalid value  for configuration rabbitmq.queue"),
    ("rabbitmq.prefetch.cont", "5", 'did you mean "rabbitmq.prefetch.count"?'),
])
def test_source_config_errors_name_the_key(key, value, message):
    from spark_connect_bridge.connectors.factory import build_connector
    from spark_connect_bridge.errors import ConfigError

    config = {**_source(("127.0.0.1", 5672), "q"), "rabbitmq.password": "s3cret-pw", key: value}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert message in str(e.value) and "s3cret-pw" not in str(e.value)


def test_a_wrong_password_fails_naming_the_key_not_the_password(broker):
    from spark_connect_bridge.connectors.factory import build_connector

    config = {**_source(broker, "q"), "rabbitmq.password": "wrong-pw-123"}
    with pytest.raises(Exception, match=r"rabbitmq\.password") as e:
        build_connector(config).latest_offsets({}, None, None)
    assert "wrong-pw-123" not in str(e.value)
