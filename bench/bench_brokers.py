"""Each broker source beside that broker's own Python client reading the same messages alone; prints records/s and
CPU seconds.

    PYTHONPATH=. .venv/bin/python bench/bench_brokers.py [mqtt|rabbitmq|redis|nats] [messages] [per trigger]

(``bench/bench_brokers.py 20000`` is MQTT; the default count is 200000.) For each broker a publisher first stores
``messages`` messages of 100 bytes; then three readers take them, each from a fresh queue, subject or stream
holding the same count: the broker's own client alone, and ours — the ``kconnect`` source into Spark's ``noop``
sink at a 100 ms processing-time trigger (``max.records.per.trigger``: ``per trigger``, 20000 by default) until
every message is in — twice: cold (the session's first query: Python workers start, the JVM's first run of the
path) and warm (a second query in the same session).
Each query's figure is printed twice: whole (from ``start()``: the streaming source's Python runner, its imports,
the first planning included) and steady (from the end of its first micro-batch with data to the last message: the
start amortised away, what a long-running query pays per record).

The baselines do what the source must do for its guarantee, no more:

* **MQTT** — one paho-mqtt client, persistent session, QoS 1, ``manual_ack`` (an ack per message as it arrives);
  ours acknowledges after each micro-batch's commit.
* **RabbitMQ** — one pika ``BlockingConnection`` consuming the queue (prefetch 20000) with an ack per message; ours
  acknowledges (``basic.ack`` multiple) after each micro-batch's commit.
* **Redis Streams** — redis-py reading the stream with ``XRANGE`` in chunks of 10000, ids and fields decoded; ours
  reads by id in the read task (XRANGE chunks) and moves the consumer group after each commit.
* **NATS JetStream** — nats-py, a pull consumer fetching batches of 1000 (AckPolicy ALL, the last of each batch
  acknowledged); ours reads each batch's sequence range through an ephemeral pull consumer in the read task and
  acknowledges a durable consumer after each commit.

CPU is this process tree's user+system time (the Spark JVM and its Python workers included for ours; the broker's
own processes left out: they serve both readers alike). The brokers are the tests' (tests/support/brokers.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from _proctree import descendants, proc_stats, proc_table

from tests.support.brokers import MosquittoServer, NatsServer, RabbitMQServer, RedisServer

PAYLOAD = b"x" * 100
PER_TRIGGER = 20_000
_server_pids: set[int] = set()


def _cpu() -> float:
    """CPU seconds of this process and every live descendant (the Spark JVM, its Python workers), exited children
    included; the broker server's own processes are left out (it serves both readers alike)."""
    procs = proc_table(reaped=True)
    server = descendants(_server_pids, procs) if _server_pids else set()
    return sum(procs[pid][2] for pid in descendants({os.getpid()}, procs) - server)


def _cpu_parts() -> dict[str, float]:
    """:func:`_cpu` split by process: ``driver`` (this Python process: the benchmark, pyspark's driver side and, for
    ours, nothing of the source), ``jvm`` (the Spark JVM's own threads: planning, offset and commit logs, Arrow to
    rows), ``jvm jit`` and ``jvm gc`` (its JIT compiler and garbage collector threads) and ``python`` (every Python
    process below the JVM, live or exited: the streaming source's Python runner, where latestOffset, planning and
    commit run, and the Python workers of the read tasks)."""
    stats = proc_stats()
    table = {pid: (st.ppid, st.name, st.cpu) for pid, st in stats.items()}
    server = descendants(_server_pids, table) if _server_pids else set()
    jvms = {pid for pid, st in stats.items() if st.name == "java"}
    below_jvm = descendants(jvms, table) - jvms
    parts = {"driver": 0.0, "jvm": 0.0, "jvm jit": 0.0, "jvm gc": 0.0, "python": 0.0}
    for pid in descendants({os.getpid()}, table) - server:
        st = stats[pid]
        if pid in jvms:
            jit, gc = _jvm_threads(pid)
            parts["jvm"] += st.cpu - jit - gc
            parts["jvm jit"] += jit
            parts["jvm gc"] += gc
            parts["python"] += st.children_cpu  # the Python workers and runners the JVM reaped
        elif pid in below_jvm:
            parts["python"] += st.cpu + st.children_cpu
        else:
            parts["driver"] += st.cpu + st.children_cpu
    return parts


def _jvm_threads(pid: int) -> tuple[float, float]:
    """CPU seconds of a live JVM's JIT compiler threads and of its garbage collector threads (``/proc/<pid>/task``;
    threads that ended are left out of both)."""
    jit = gc = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if "CompilerThre" in name:
            jit += cpu
        elif name.startswith(("GC Thread", "G1 ")):
            gc += cpu
    return jit, gc


def _split(before: dict[str, float], after: dict[str, float], records: int) -> str:
    return ", ".join(f"{k} {(after[k] - before[k]) / records * 1e6:.0f}" for k in after) + " CPU-us/record"


def ours(spark: Any, cfg: dict[str, str], n: int) -> tuple[str, tuple[int, float, float, str] | None]:
    """Run the source into ``noop`` until ``n`` records are in; return a summary of its micro-batches and the
    steady state: ``(records, wall seconds, CPU seconds)`` from the end of the query's first micro-batch with data
    (its start, the Python runner's imports, the first planning paid) to the end. A query whose Python runner could
    not start (Spark's fixed 10 s connect-back time-out, under load) is started again on its checkpoint, the time lost
    included."""
    ckpt = tempfile.mkdtemp()

    def start() -> Any:
        bound = {"max.records.per.trigger": str(PER_TRIGGER)}
        return (spark.readStream.format("kconnect").options(**cfg, **bound).load()
                .writeStream.format("noop").option("checkpointLocation", ckpt)
                .trigger(processingTime="100 milliseconds").start())

    q, progress, restarts = start(), [], 0
    read, first = 0, None
    while read < n:
        time.sleep(0.05)
        if q.exception() is not None:
            if "connect back" not in str(q.exception()) or restarts >= 5:
                raise RuntimeError(q.exception())
            progress += q.recentProgress
            q, restarts = start(), restarts + 1
        read = sum(p["numInputRows"] for p in progress + q.recentProgress)
        if first is None and read:
            first = (read, time.perf_counter(), _cpu(), _cpu_parts())
    end = (read, time.perf_counter(), _cpu(), _cpu_parts())
    q.stop()
    batches = [p for p in progress + q.recentProgress if p["numInputRows"]]
    phases: dict[str, int] = {}
    for p in batches:
        for phase, ms in p["durationMs"].items():
            phases[phase] = phases.get(phase, 0) + ms
    sizes = [p["numInputRows"] for p in batches]
    shown = str(sizes) if len(sizes) <= 12 else f"{sizes[:6]} ... {sizes[-3:]}"
    summary = (f"  {len(batches)} batches of {shown}; ms summed: "
               + ", ".join(f"{k} {v}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]))
               + (f"; restarted {restarts}x after Spark's connect-back time-out" if restarts else ""))
    steady = None
    if first is not None and end[0] > first[0]:
        steady = (end[0] - first[0], end[1] - first[1], end[2] - first[2], _split(first[3], end[3], end[0] - first[0]))
    return summary, steady


# -- MQTT ------------------------------------------------------------------------------------------------------------
class Mqtt:
    label, client = "MQTT", "paho-mqtt"
    server = MosquittoServer

    def __init__(self, broker: MosquittoServer):
        self.port = broker.port

    def prepare(self, run_id: str, n: int) -> dict[str, str]:
        import paho.mqtt.client as mqtt

        topic, client_id = f"bench/{run_id}", f"kconnect-bench-{run_id}"
        done = threading.Event()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        c.on_connect = lambda cl, u, f, rc, p: cl.subscribe(topic, 1)
        c.on_subscribe = lambda *a: done.set()
        c.connect("127.0.0.1", self.port)
        c.loop_start()
        done.wait(30)
        c.disconnect()
        c.loop_stop()
        p = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        p.max_inflight_messages_set(1000)
        p.connect("127.0.0.1", self.port)
        p.loop_start()
        # in windows: paho numbers a client's messages in flight with 16-bit ids, so more than 65535 queued at once
        # collide (ERR_QUEUE_SIZE)
        for i in range(0, n, 20_000):
            infos = [p.publish(topic, PAYLOAD, qos=1) for _ in range(min(20_000, n - i))]
            for info in infos:
                info.wait_for_publish(60)
        p.disconnect()
        p.loop_stop()
        # the client id kconnect derives from the name: kconnect-<name>
        return {"connector.class": "MqttSourceConnector", "name": f"bench-{run_id}",
                "mqtt.server.uri": f"tcp://127.0.0.1:{self.port}", "mqtt.topics": topic, "kafka.topic": "bench",
                "mqtt.qos": "1", "mqtt.clean.session.enabled": "false", "_client_id": client_id}

    def alone(self, cfg: dict[str, str], n: int) -> None:
        import paho.mqtt.client as mqtt

        got = [0]
        done = threading.Event()

        def on_message(client, userdata, msg):
            client.ack(msg.mid, msg.qos)
            got[0] += 1
            if got[0] >= n:
                done.set()

        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cfg["_client_id"], clean_session=False,
                        manual_ack=True)
        c.on_message = on_message
        c.connect("127.0.0.1", self.port)
        c.loop_start()
        done.wait(600)
        c.disconnect()
        c.loop_stop()


# -- RabbitMQ --------------------------------------------------------------------------------------------------------
class Rabbit:
    label, client = "RabbitMQ", "pika"
    server = RabbitMQServer

    def __init__(self, broker: RabbitMQServer):
        self.port = broker.port

    def prepare(self, run_id: str, n: int) -> dict[str, str]:
        import pika

        queue = f"bench-{run_id}"
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        ch = conn.channel()
        ch.queue_declare(queue)
        for _ in range(n):
            ch.basic_publish("", queue, PAYLOAD)
        ch.confirm_delivery()  # the publishes before it are in order on the channel: wait until the queue holds all
        while ch.queue_declare(queue, passive=True).method.message_count < n:
            time.sleep(0.05)
        conn.close()
        return {"connector.class": "RabbitMQSourceConnector", "name": f"bench-{run_id}", "rabbitmq.host": "127.0.0.1",
                "rabbitmq.port": str(self.port), "rabbitmq.queue": queue, "kafka.topic": "bench",
                "rabbitmq.prefetch.count": "20000"}

    def alone(self, cfg: dict[str, str], n: int) -> None:
        import pika

        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=20000)
        got = [0]

        def on_message(channel, method, properties, body):
            channel.basic_ack(method.delivery_tag)
            got[0] += 1
            if got[0] >= n:
                channel.stop_consuming()

        ch.basic_consume(cfg["rabbitmq.queue"], on_message)
        ch.start_consuming()
        conn.close()


# -- Redis Streams ---------------------------------------------------------------------------------------------------
class Redis:
    label, client = "Redis Streams", "redis-py"
    server = RedisServer

    def __init__(self, broker: RedisServer):
        self.uri = broker.uri

    def prepare(self, run_id: str, n: int) -> dict[str, str]:
        import redis

        stream = f"bench-{run_id}"
        client = redis.Redis.from_url(self.uri)
        for i in range(0, n, 5000):
            pipe = client.pipeline(transaction=False)
            for _ in range(min(5000, n - i)):
                pipe.xadd(stream, {"v": PAYLOAD})
            pipe.execute()
        client.close()
        return {"connector.class": "RedisStreamSourceConnector", "name": f"bench-{run_id}", "redis.uri": self.uri,
                "redis.stream.name": stream}

    def alone(self, cfg: dict[str, str], n: int) -> None:
        import redis

        client = redis.Redis.from_url(self.uri)
        low, got = "-", 0
        while got < n:
            entries = client.xrange(cfg["redis.stream.name"], min=low, count=10_000)
            rows = [(e[0].decode(), {k.decode(): v.decode() for k, v in e[1].items()}) for e in entries]
            got += len(rows)
            low = f"({rows[-1][0]}"
        client.close()


# -- NATS JetStream --------------------------------------------------------------------------------------------------
class Nats:
    label, client = "NATS JetStream", "nats-py"
    server = NatsServer

    def __init__(self, broker: NatsServer):
        self.uri = broker.uri

    def prepare(self, run_id: str, n: int) -> dict[str, str]:
        import nats

        stream = f"BENCH_{run_id}"

        async def publish() -> None:
            nc = await nats.connect(self.uri)
            js = nc.jetstream()
            await js.add_stream(name=stream, subjects=[f"bench.{run_id}"])
            for i in range(0, n, 1000):
                await asyncio.gather(*(js.publish(f"bench.{run_id}", PAYLOAD) for _ in range(min(1000, n - i))))
            await nc.close()

        asyncio.new_event_loop().run_until_complete(publish())
        return {"connector.class": "CamelNatssourceSourceConnector", "name": f"bench-{run_id}",
                "camel.kamelet.nats-source.servers": self.uri, "camel.kamelet.nats-source.topic": f"bench.{run_id}",
                "camel.kamelet.nats-source.jetstreamEnabled": "true",
                "camel.kamelet.nats-source.jetstreamName": stream, "topics": "bench"}

    def alone(self, cfg: dict[str, str], n: int) -> None:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig

        async def read() -> None:
            nc = await nats.connect(self.uri)
            sub = await nc.jetstream().pull_subscribe(
                cfg["camel.kamelet.nats-source.topic"], durable="bench-alone",
                stream=cfg["camel.kamelet.nats-source.jetstreamName"],
                config=ConsumerConfig(ack_policy=AckPolicy.ALL))
            got = 0
            while got < n:
                msgs = await sub.fetch(1000, timeout=5)
                _ = [(m.data, m.metadata.sequence.stream) for m in msgs]
                await msgs[-1].ack()
                got += len(msgs)
            await nc.close()

        asyncio.new_event_loop().run_until_complete(read())


BROKERS = {"mqtt": Mqtt, "rabbitmq": Rabbit, "redis": Redis, "nats": Nats}


def main() -> None:
    args = sys.argv[1:]
    kind = args.pop(0) if args and not args[0].isdigit() else "mqtt"
    n = int(args[0]) if args else 200_000
    global PER_TRIGGER
    PER_TRIGGER = int(args[1]) if len(args) > 1 else PER_TRIGGER
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.extraJavaOptions", os.environ.get("BENCH_JAVA_OPTIONS", "")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    bench = BROKERS[kind]
    with bench.server() as broker:
        _server_pids.add(broker.process.pid)
        b = bench(broker)
        print(f"{b.label}: {n} messages of {len(PAYLOAD)} bytes, up to {PER_TRIGGER} a trigger; {os.uname().nodename} "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()}", flush=True)
        for label, alone in ((f"{b.client} alone", True), (f"kconnect {b.label} source, cold", False),
                             (f"kconnect {b.label} source, warm", False)):
            cfg = b.prepare(uuid.uuid4().hex[:6], n)
            cpu, t, parts = _cpu(), time.perf_counter(), _cpu_parts()
            summary, steady = "", None
            if alone:
                b.alone(cfg, n)
            else:
                summary, steady = ours(spark, {k: v for k, v in cfg.items() if not k.startswith("_")}, n)
            wall, used = time.perf_counter() - t, _cpu() - cpu
            print(f"{label:38s} {n} messages: {wall:6.2f} s, {n / wall:9.0f} records/s, CPU {used:6.2f} s "
                  f"({used / n * 1e6:.0f} CPU-us/record; load {os.getloadavg()[0]:.1f})", flush=True)
            print(f"{'  by process':38s} {_split(parts, _cpu_parts(), n)}", flush=True)
            if steady:
                records, s_wall, s_cpu, s_parts = steady
                print(f"{'  steady (after its first batch)':38s} {records} messages: {s_wall:6.2f} s, "
                      f"{records / s_wall:9.0f} records/s, CPU {s_cpu:6.2f} s ({s_cpu / records * 1e6:.0f} "
                      f"CPU-us/record)", flush=True)
                print(f"{'  steady, by process':38s} {s_parts}", flush=True)
            if summary:
                print(summary, flush=True)

if __name__ == "__main__":
    main()
