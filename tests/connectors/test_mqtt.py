"""The MQTT source and sink against Mosquitto (Debian's package), with Confluent's MQTT connector configs: paho-mqtt
publishes and subscribes as a user's device would; our source acknowledges after Spark's commit, so a restart and a
killed driver lose nothing (at least once: duplicates only from the micro-batch in flight)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.support import servers
from tests.support.killed_driver import kill, start_driver

paho = pytest.importorskip("paho.mqtt.client")


@pytest.fixture(scope="module")
def broker():
    return servers.mosquitto()


def _publisher(broker):
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex[:6]}")
    client.connect(*broker)
    client.loop_start()
    return client


def _publish(broker, topic, values, qos=1, retain=False):
    client = _publisher(broker)
    infos = [client.publish(topic, str(v).encode(), qos=qos, retain=retain) for v in values]
    for info in infos:
        info.wait_for_publish(30)
    client.disconnect()
    client.loop_stop()


def _source(broker, name, topics, **extra):
    return {"connector.class": "io.confluent.connect.mqtt.MqttSourceConnector", "name": name,
            "mqtt.server.uri": f"tcp://{broker[0]}:{broker[1]}", "mqtt.topics": topics, "kafka.topic": "readings",
            "mqtt.qos": "1", "mqtt.clean.session.enabled": "false", **extra}


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


def _start(spark, config, out, ckpt):
    df = spark.readStream.format("kconnect").options(**config).load()
    return (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
            .trigger(processingTime="200 milliseconds").start())


def _subscribed(query):
    return _poll(lambda: query.recentProgress, 240, "the first trigger (the subscription)")


def test_source_reads_every_message_across_a_restart_and_the_retained_one_once(spark, broker, tmp_path):
    topic = f"plant/{uuid.uuid4().hex[:6]}"
    _publish(broker, f"{topic}/status", ["online"], retain=True)
    config = _source(broker, f"mqtt-restart-{uuid.uuid4().hex[:6]}", f"{topic}/#")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = _start(spark, config, out, ckpt)
    try:
        _subscribed(query)
        _publish(broker, f"{topic}/t1", range(100))
        _poll(lambda: len(_rows(spark, out)) >= 101, what="101 records")
    finally:
        query.stop()
    first_run = len(_rows(spark, out))
    _publish(broker, f"{topic}/t1", range(100, 200))  # while the query is down: the persistent session keeps them
    query = _start(spark, config, out, ckpt)
    try:
        _poll(lambda: {r.value for r in _rows(spark, out)} >= {str(i).encode() for i in range(200)},
              what="the messages published while the query was down")
    finally:
        query.stop()
    rows = _rows(spark, out)
    readings = [r for r in rows if r.key == f"{topic}/t1"]
    assert sorted({int(r.value) for r in readings}) == list(range(200))
    # At least once: a message is read twice only if its batch was the one in flight at the stop.
    assert len(readings) - 200 <= first_run - 1, len(readings)
    status = [r for r in rows if r.key == f"{topic}/status"]
    assert [(r.value, r.topic) for r in status] == [(b"online", "readings")]  # not read again on the restart
    headers = {h.key: h.value for h in status[0].headers}
    assert headers["mqtt.retained"] == b"true" and headers["mqtt.qos"] == b"1"
    assert all(r.partition == 0 and r.timestamp is not None for r in rows)
    assert sorted(r.offset for r in rows) == list(range(1, len(rows) + 1))


def test_source_loses_nothing_when_the_driver_is_killed(spark, broker, tmp_path):
    topic = f"killed/{uuid.uuid4().hex[:6]}"
    config = _source(broker, f"mqtt-kill-{uuid.uuid4().hex[:6]}", topic, **{"max.records.per.trigger": "50"})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    driver = start_driver(config, out, ckpt, tmp_path)
    try:
        _poll(lambda: (ckpt / "offsets" / "0").exists() or driver.poll() is not None, 300, "the first batch")
        assert driver.poll() is None, "the driver exited"
        stop = threading.Event()

        def publish_steadily():
            for start in range(0, 1000, 20):
                if stop.is_set():
                    break
                _publish(broker, topic, range(start, start + 20))
                time.sleep(0.05)

        publisher = threading.Thread(target=publish_steadily)
        publisher.start()
        _poll(lambda: len(_rows(spark, out)) >= 200, 300, "200 records before the kill")
        kill(driver)  # the driver, its JVM and its Python workers, mid-stream
        publisher.join()
    finally:
        kill(driver)
    query = _start(spark, config, out, ckpt)  # the restart, on the same checkpoint
    try:
        _poll(lambda: {int(r.value) for r in _rows(spark, out)} >= set(range(1000)), 180, "every message")
    finally:
        query.stop()
    values = [int(r.value) for r in _rows(spark, out)]
    assert sorted(set(values)) == list(range(1000))
    # Duplicates only from the batches in flight at the kill: the broker's unacknowledged messages, each batch
    # at most max.records.per.trigger=50 (the one being written and the one just committed but not yet acked).
    assert len(values) - 1000 <= 100, len(values) - 1000


def _collect(broker, topic, expected, retained_only=False):
    got: list = []
    done = threading.Event()
    subscribed = threading.Event()
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"sub-{uuid.uuid4().hex[:6]}")

    def on_message(c, userdata, msg):
        got.append((msg.topic, msg.payload, msg.retain, msg.qos))
        if len(got) >= expected:
            done.set()

    client.on_message = on_message
    client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, 1)
    client.on_subscribe = lambda *a: subscribed.set()
    client.connect(*broker)
    client.loop_start()
    assert subscribed.wait(30)
    return client, got, done


def test_sink_publishes_each_value_to_its_topic_and_retains_the_last(spark, broker):
    base = f"out/{uuid.uuid4().hex[:6]}"
    client, got, done = _collect(broker, f"{base}/#", 300)
    rows = [(f"{base}/{'even' if i % 2 == 0 else 'odd'}", f"v{i}") for i in range(300)]
    # one partition: a topic's values in the order of one task's writes (two tasks writing the same topics at once
    # leave either task's last value retained, as two Kafka Connect tasks would)
    df = spark.createDataFrame(rows, "topic string, value string").coalesce(1)
    (df.write.format("kconnect").mode("append")
     .options(**{"connector.class": "io.confluent.connect.mqtt.MqttSinkConnector", "name": "mqtt-sink-test",
                 "mqtt.server.uri": f"tcp://{broker[0]}:{broker[1]}", "mqtt.qos": "1",
                 "mqtt.retained.enabled": "true"}).save())
    assert done.wait(60), len(got)
    client.disconnect()
    client.loop_stop()
    assert sorted((t, p) for t, p, _, _ in got) == sorted((t, v.encode()) for t, v in rows)
    assert {q for *_, q in got} == {1}
    # A subscriber that comes later gets the last value of each topic, retained.
    late, retained, done = _collect(broker, f"{base}/#", 2)
    assert done.wait(30)
    late.disconnect()
    late.loop_stop()
    assert {t: p.decode() for t, p, r, _ in retained if r} == {
        f"{base}/even": "v298", f"{base}/odd": "v299"}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("mqtt.qos", "3", "Invalid value 3 for configuration mqtt.qos"),
    ("mqtt.server.uri", "http://broker:1883", "an MQTT server URI such as tcp://host:1883"),
    ("mqtt.topics", "", "Invalid value  for configuration mqtt.topics"),
    ("mqtt.qoss", "1", 'did you mean "mqtt.qos"?'),
])
def test_source_config_errors_name_the_key(key, value, message):
    from spark_connect_bridge.connectors.factory import build_connector
    from spark_connect_bridge.errors import ConfigError

    config = {**_source(("127.0.0.1", 1883), "bad", "a/#"), "mqtt.password": "s3cret-pw", key: value}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert message in str(e.value) and "s3cret-pw" not in str(e.value)


def test_an_unreachable_server_fails_naming_the_key(spark):
    config = _source(("127.0.0.1", 1), "unreachable", "a/#")
    from spark_connect_bridge.connectors.factory import build_connector

    with pytest.raises(Exception, match=r"mqtt\.server\.uri"):
        build_connector(config).latest_offsets({}, None, None)


def test_the_docs_mqtt_example_runs(spark, broker):
    """docs/tasks/brokers/mqtt.md's MQTT block, as written, with ``mqtt_uri`` the test's Mosquitto."""
    from tests.test_readme import _located_blocks

    blocks = _located_blocks("python", needs="mosquitto")
    assert len(blocks) == 1
    namespace = {"spark": spark, "mqtt_uri": f"tcp://{broker[0]}:{broker[1]}"}
    page, block = blocks[0]
    exec(compile(block, page, "exec"), namespace)
    query = namespace["query"]
    try:
        _subscribed(query)
        _publish(broker, "plant/boiler/temperature", [71.5, 72.0])
        _publish(broker, "plant/boiler/pressure", [3])  # not subscribed
        rows = _poll(lambda: spark.table("temperatures").collect() if spark.table("temperatures").count() >= 2
                     else None, what="the two readings")
    finally:
        query.stop()
    assert sorted(tuple(r) for r in rows) == [("plant/boiler/temperature", "71.5"),
                                              ("plant/boiler/temperature", "72.0")]


def test_a_rest_user_cannot_send_the_stored_password_to_another_server():
    """The attack: PUT the config back with the masked password and mqtt.server.uri pointing at a server of one's
    own. The worker refuses (runtime/secrets.restore_masked), naming the key, never the secret."""
    from spark_connect_bridge.errors import ConfigError
    from spark_connect_bridge.runtime.secrets import mask_config, restore_masked

    stored = {**_source(("10.0.0.5", 1883), "plant", "a/#"), "mqtt.username": "plant",
              "mqtt.password": "s3cret-pw"}
    shown = mask_config(stored)
    assert "s3cret-pw" not in str(shown)
    assert restore_masked(shown, stored)["mqtt.password"] == "s3cret-pw"  # unchanged destination: kept
    evil = {**shown, "mqtt.server.uri": "tcp://attacker.example:1883"}
    with pytest.raises(ConfigError) as e:
        restore_masked(evil, stored)
    assert "mqtt.password" in str(e.value) and "mqtt.server.uri" in str(e.value)
    assert "s3cret-pw" not in str(e.value)
