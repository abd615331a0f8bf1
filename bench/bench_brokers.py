"""MQTT source vs paho-mqtt alone, reading the same messages from one Mosquitto; prints records/s and CPU seconds.

    PYTHONPATH=. .venv/bin/python bench/bench_brokers.py [messages]

Both read ``messages`` QoS 1 messages that a publisher queued in a persistent session (clean session off) before
the reader connects, and acknowledge them: the baseline is one paho client (``manual_ack``, an ack per message as
it arrives), ours the ``kconnect`` MQTT source into Spark's ``noop`` sink at a 100 ms processing-time trigger until
every message is in (acked after each micro-batch's commit), twice: cold (the session's first query: Python workers
start, the JVM's first run of the path) and warm (a second query over a new topic in the same session). CPU is this
process tree's user+system time (the Spark
JVM and its Python workers included for ours; Mosquitto left out). The Mosquitto is the tests'
(tests/support/brokers.py), with its in-flight window raised.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from _proctree import descendants, proc_table

from tests.support.brokers import MosquittoServer


def _cpu() -> float:
    """CPU seconds of this process and every live descendant (the Spark JVM, its Python workers), exited children
    included; the Mosquitto server's own process is left out (it serves both readers alike)."""
    procs = proc_table(reaped=True)
    return sum(procs[pid][2] for pid in descendants({os.getpid()}, procs) if procs[pid][1] != "mosquitto")


def _session(port: int, client_id: str, topic: str) -> None:
    """Create a persistent session subscribed to ``topic`` (so messages published next are queued for it)."""
    import paho.mqtt.client as mqtt

    done = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
    c.on_connect = lambda cl, u, f, rc, p: cl.subscribe(topic, 1)
    c.on_subscribe = lambda *a: done.set()
    c.connect("127.0.0.1", port)
    c.loop_start()
    done.wait(30)
    c.disconnect()
    c.loop_stop()


def _publish(port: int, topic: str, n: int) -> None:
    import paho.mqtt.client as mqtt

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    c.max_inflight_messages_set(1000)
    c.connect("127.0.0.1", port)
    c.loop_start()
    infos = [c.publish(topic, b"x" * 100, qos=1) for _ in range(n)]
    for info in infos:
        info.wait_for_publish(60)
    c.disconnect()
    c.loop_stop()


def paho_alone(port: int, client_id: str, topic: str, n: int) -> None:
    import paho.mqtt.client as mqtt

    got = [0]
    done = threading.Event()

    def on_message(client, userdata, msg):
        client.ack(msg.mid, msg.qos)
        got[0] += 1
        if got[0] >= n:
            done.set()

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False, manual_ack=True)
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    done.wait(600)
    c.disconnect()
    c.loop_stop()


def ours(spark, port: int, name: str, topic: str, n: int) -> None:
    cfg = {"connector.class": "MqttSourceConnector", "name": name, "mqtt.server.uri": f"tcp://127.0.0.1:{port}",
           "mqtt.topics": topic, "kafka.topic": "bench", "mqtt.qos": "1", "mqtt.clean.session.enabled": "false",
           "max.records.per.trigger": "20000"}
    q = (spark.readStream.format("kconnect").options(**cfg).load().writeStream.format("noop")
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(processingTime="100 milliseconds").start())
    read = 0
    while read < n:
        time.sleep(0.1)
        read = sum(p["numInputRows"] for p in q.recentProgress)
    q.stop()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with MosquittoServer() as broker:
        for label, run in (("paho-mqtt alone", paho_alone), ("kconnect MQTT source, cold", None),
                           ("kconnect MQTT source, warm", None)):
            run_id = uuid.uuid4().hex[:6]
            topic, client_id = f"bench/{run_id}", f"kconnect-bench-{run_id}"
            _session(broker.port, client_id, topic)
            _publish(broker.port, topic, n)
            cpu, t = _cpu(), time.perf_counter()
            if run is None:
                ours(spark, broker.port, f"bench-{run_id}", topic, n)
            else:
                run(broker.port, client_id, topic, n)
            wall, used = time.perf_counter() - t, _cpu() - cpu
            print(f"{label:27s} {n} messages: {wall:6.2f} s, {n / wall:9.0f} records/s, CPU {used:6.2f} s "
                  f"({used / n * 1e6:.0f} CPU-us/record; load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
