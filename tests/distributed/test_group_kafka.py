"""A group on Kafka: two ``kconnect distributed`` workers started with Kafka's ``connect-distributed.properties``
unchanged (conf/connect-distributed.properties), plus what a test must set: the run's broker, the ports, the shared
directories, short timeouts, and storage topics of the test's own (the broker is shared by the whole run).

One scenario, so that the two Spark drivers start once: a FileStreamSink created through both workers at the same
instant (one 201, one 409, the winner's config stored) and read through either; its owner paused (SIGSTOP) past its
session is fenced while the other takes the sink over; then the new owner is killed (``kill -9``) and the woken
worker resumes the sink from its checkpoint. The sink's file is checked row by row after each step: every record
exactly once, in order.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer

from spark_connect_bridge.bus.admin import ensure_topics
from spark_connect_bridge.jvm import classpath
from tests.distributed.group_helpers import GroupWorker, until
from tests.support import servers

pytestmark = pytest.mark.timeout(900)

SINK = "lines-sink"
#: Spark's Kafka source and its client jars: the bus of a worker with bootstrap.servers
KAFKA_JARS = ("spark-sql-kafka", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")


class Lines:
    """Numbered lines produced to the sink's topic, and what the sink's file holds."""

    def __init__(self, bootstrap: str, topic: str, out: Path):
        self.bootstrap, self.topic, self.out = bootstrap, topic, out
        self.written = 0

    def produce(self, n: int) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for i in range(self.written, self.written + n):
            producer.produce(self.topic, key=str(i).encode(), value=f"line-{i:05d}".encode())
        assert producer.flush(30) == 0
        self.written += n

    def rows(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []

    def all_once(self) -> bool:
        rows = self.rows()
        assert len(rows) == len(set(rows)), f"duplicates in the sink: {len(rows) - len(set(rows))}"
        return rows == [f"line-{i:05d}" for i in range(self.written)]


def test_kafka_s_connect_distributed_properties_run_a_group_that_fails_over_and_fences(tmp_path):
    bootstrap = servers.kafka()
    group = "connect-cluster-" + uuid.uuid4().hex[:6]
    store = {"bootstrap.servers": bootstrap, "config.storage.topic": group + "-configs",
             "status.storage.topic": group + "-status", "offset.storage.topic": group + "-offsets"}
    topic = group + "-lines"
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: (1, 1, {})})
    lines = Lines(bootstrap, topic, tmp_path / "out.txt")
    jars = [j for j in classpath("spark") if Path(j).name.startswith(KAFKA_JARS)]
    spark = {"spark.master": "local[1]", "spark.driver.memory": "512m", "spark.jars": ",".join(jars)}
    workers = [GroupWorker(tmp_path, store, group, f"w{i}", spark=spark).start() for i in range(2)]

    def explain() -> str:
        logs = "\n".join(f"--- {w.name} ({w.worker_id}):\n" + "\n".join(
            line for line in w.stderr().splitlines() if ("spark_connect_bridge" in line or "Error" in line)
            and ".worker_config:" not in line)[-2500:] + f"\n{w.name}'s threads:\n{w.stacks()[-2500:]}"
            for w in workers)
        return f"{lines.written} lines written; the sink holds {len(lines.rows())}\n{logs}"

    def wait(predicate, what: str):
        return until(predicate, what=what, timeout=300, explain=explain)

    try:
        for w in workers:
            w.wait_healthy()
        w0, w1 = workers
        lines.produce(100)
        config = {"connector.class": "FileStreamSink", "file": str(lines.out), "topics": topic,
                  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                  "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
        # The same name created through both workers at the same instant: one 201, one 409, the winner's config.
        start = threading.Barrier(2)

        def create(via: GroupWorker) -> requests.Response:
            start.wait(timeout=60)
            return via.call("POST", "/connectors", {"name": SINK, "config": {**config, "errors.log.enable": str(
                via is w0).lower()}})

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(create, workers))
        assert sorted(r.status_code for r in answers) == [201, 409], [r.text for r in answers]
        lost = next(r for r in answers if r.status_code == 409)
        assert lost.json() == {"error_code": 409, "message": f"Connector {SINK} already exists"}
        winner = next(r for r in answers if r.status_code == 201).json()["config"]["errors.log.enable"]
        assert w1.get("/connectors") == [SINK]
        assert {w.get(f"/connectors/{SINK}/config")["errors.log.enable"] for w in workers} == {winner}
        def running_on(via: GroupWorker) -> str | None:
            st = via.status(SINK)["connector"]
            assert st["state"] != "FAILED", st.get("trace")
            return st["worker_id"] if st["state"] == "RUNNING" else None

        owner_id = wait(lambda: running_on(w1), "the sink RUNNING, seen through the other worker")
        assert w0.status(SINK)["connector"]["worker_id"] == owner_id
        wait(lines.all_once, "the first 100 lines")

        # The owner paused past its session: the other worker takes the sink over; the woken one is fenced.
        zombie = next(w for w in workers if w.worker_id == owner_id)
        other = next(w for w in workers if w is not zombie)
        zombie.pause()
        try:
            wait(lambda: running_on(other) == other.worker_id,
                 "the other worker to take the paused worker's sink over")
            lines.produce(100)
            wait(lines.all_once, "the new owner to write 100 more lines")
        finally:
            zombie.resume()

        def fenced() -> bool:
            log = zombie.stderr()
            return "lease in group" in log and (f"Connector {SINK} now belongs to" in log or "fenced" in log)

        wait(fenced, "the woken worker to find its membership lost and stop the sink")
        lines.produce(100)
        wait(lines.all_once, "every line exactly once after the paused worker woke")

        # kill -9 of the owner: the woken worker resumes the sink from its checkpoint.
        other.kill_all()
        lines.produce(100)
        wait(lambda: running_on(zombie) == zombie.worker_id,
             "the remaining worker to take the killed worker's sink over")
        wait(lines.all_once, "every line exactly once after the kill")
        # What the failure messages above rely on: kill -USR1 prints a worker's Python threads.
        assert "spark_connect_bridge" in zombie.stacks()
    finally:
        for w in workers:
            w.stop()
