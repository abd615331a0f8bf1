"""Apache Kafka Connect itself, as the reference the differential tests and benchmarks run beside ours.

A standalone worker (``org.apache.kafka.connect.cli.ConnectStandalone``) from the ``kafka-connect`` profile of
``spark_connect_bridge/jvm/pom.xml`` (connect-runtime, connect-file, connect-json, connect-transforms, resolved from
Maven Central into ``~/.m2``), against a test Kafka broker. Debezium's PostgreSQL connector (profile ``debezium``)
and JDBC sink (``debezium-jdbc``) are plugin directories of its ``plugin.path``, each in its own class loader, as a
Kafka Connect installation has them. The worker starts with no connector; :meth:`KafkaConnectWorker.run` submits
configs through its REST API (one JVM serves a whole test run: many connectors, in one worker) and waits until
their output is complete. :func:`topic_records` reads what a topic holds, as bytes.

>>> with KafkaConnectWorker(bootstrap) as connect:                                  # doctest: +SKIP
...     connect.run({"name": "src", "connector.class": "FileStreamSource", "file": "/tmp/in.txt",
...                  "topic": "lines"}, done=connect.file_source_done("src", "/tmp/in.txt", ["lines"]))
{'src': None}
...     topic_records(bootstrap, "lines")
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from confluent_kafka import Consumer, TopicPartition

from spark_connect_bridge.jvm import classpath
from tests.support.postgres import free_port
from tests.support.process_server import ProcessServer

__all__ = ["ConnectorFailed", "KafkaConnectWorker", "TopicRecord", "topic_records"]

_LOG4J = """rootLogger.level=WARN
rootLogger.appenderRef.f.ref=F
appender.f.type=File
appender.f.name=F
appender.f.fileName={log}
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=%d %p %c - %m%n
"""
# What file_source_done reads: each poll's record count, each record handed to the producer, each empty poll.
_TASK_TRACE = """logger.sourcetask.name=org.apache.kafka.connect.runtime.AbstractWorkerSourceTask
logger.sourcetask.level=TRACE
"""
# Plugin directories of plugin.path: pom.xml profile -> what they hold.
PLUGINS = {"debezium": "Debezium's PostgreSQL connector", "debezium-jdbc": "Debezium's JDBC sink connector",
           "debezium-mariadb": "Debezium's MariaDB connector",
           "iceberg-kafka-connect": "Apache Iceberg's sink connector (with Parquet, Hadoop's client, PostgreSQL's "
                                    "driver)"}


class ConnectorFailed(AssertionError):
    """A connector or one of its tasks is FAILED in the reference worker (the message holds Connect's trace)."""


@dataclass(frozen=True)
class TopicRecord:
    """One Kafka record as a consumer sees it: everything but the timestamp, which differs by design."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class KafkaConnectWorker(ProcessServer):
    """A Kafka Connect standalone worker in a temporary directory, its REST API on a free 127.0.0.1 port.

    ``worker`` adds or overrides worker settings (the defaults: JsonConverter for keys and values, offsets
    flushed every 200 ms, a file offset store in the temp dir). ``plugins`` names plugin directories
    (:data:`PLUGINS`).
    """

    name = "Kafka Connect"

    def __init__(self, bootstrap: str, *, worker: Mapping[str, Any] | None = None, plugins: Sequence[str] = (),
                 trace_tasks: bool = True):
        unknown = sorted(set(plugins) - set(PLUGINS))
        if unknown:
            raise ValueError(f"Unknown plugin directories {unknown}: one of {sorted(PLUGINS)}")
        self.bootstrap = bootstrap
        self.port = free_port()
        self.root = tempfile.mkdtemp(prefix="kconnect-reference-")
        self.log = os.path.join(self.root, "connect.log")
        self.plugins = tuple(plugins)
        self.trace_tasks = trace_tasks
        self.settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "listeners": f"http://127.0.0.1:{self.port}",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.storage.file.filename": os.path.join(self.root, "offsets.dat"),
            "offset.flush.interval.ms": 200,
            "plugin.path": os.path.join(self.root, "plugins"),
            "plugin.discovery": "hybrid_warn",
            # a task stopped by a DELETE has 5 s to finish by default: the tests delete finished connectors
            "task.shutdown.graceful.timeout.ms": 2000,
        }
        self.settings.update(worker or {})
        self.process: subprocess.Popen | None = None
        self._classpath = os.pathsep.join(classpath("kafka-connect"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _plugin_dirs(self) -> None:
        """One directory per plugin, its jars linked into it: Connect gives each directory its own class loader.
        Jars of artifacts the worker has itself (kafka-clients, jackson, slf4j) are left out, as a plugin's
        package leaves out what the runtime provides: two jackson-databind copies make the JDBC sink's
        ServiceLoader find the worker's jackson modules for the plugin's own Module class ("not a subtype")."""
        provided = {_artifact(jar) for jar in classpath("kafka-connect")}
        for profile in self.plugins:
            target = os.path.join(self.root, "plugins", profile)
            os.makedirs(target, exist_ok=True)
            for jar in classpath(profile):
                if _artifact(jar) in provided:
                    continue
                link = os.path.join(target, os.path.basename(jar))
                if not os.path.exists(link):
                    os.symlink(jar, link)
        os.makedirs(os.path.join(self.root, "plugins"), exist_ok=True)

    def command(self) -> list[str]:
        """The java command line (C1 only and a serial GC: short runs of small data on a shared 2-core machine)."""
        return [os.environ.get("JAVA", shutil.which("java") or "java"), "-Xmx768m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={os.path.join(self.root, 'log4j2.properties')}",
                "-cp", self._classpath, "org.apache.kafka.connect.cli.ConnectStandalone",
                os.path.join(self.root, "worker.properties")]

    def start(self, timeout: float = 120) -> KafkaConnectWorker:
        self._plugin_dirs()
        with open(os.path.join(self.root, "worker.properties"), "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.settings.items())
        with open(os.path.join(self.root, "log4j2.properties"), "w") as f:
            f.write(_LOG4J.format(log=self.log) + (_TASK_TRACE if self.trace_tasks else ""))
        with open(self.log + ".stderr", "ab") as stderr:
            self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = self._wait_for_port(timeout)
        while True:  # the REST server listens before the herder has started: wait until it lists connectors
            try:
                if requests.get(f"{self.url}/connectors", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or (self.process and self.process.poll() is not None):
                raise RuntimeError(f"Kafka Connect did not start within {timeout}s:\n{self.server_log()}")
            time.sleep(0.3)

    def server_log(self) -> str:
        parts = []
        for path in (self.log, self.log + ".stderr"):
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    parts.append(f.read()[-6000:])
        return "\n".join(parts)

    # -- REST ---------------------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = requests.request(method, f"{self.url}{path}", timeout=60, **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"Kafka Connect {method} {path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def plugins_listed(self) -> list[str]:
        """The classes of ``GET /connector-plugins?connectorsOnly=false``."""
        return [p["class"] for p in self._call("GET", "/connector-plugins", params={"connectorsOnly": "false"})]

    def create(self, config: Mapping[str, Any]) -> str:
        """Submit one connector config (its ``name`` key names it); return the name."""
        config = {k: str(v) for k, v in config.items()}
        name = config.get("name") or f"reference-{uuid.uuid4().hex[:8]}"
        self._call("POST", "/connectors", json={"name": name, "config": {**config, "name": name}})
        return name

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{name}")

    def status(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/connectors/{name}/status")

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The connector's committed offsets (KIP-875 ``GET /connectors/{name}/offsets``)."""
        return self._call("GET", f"/connectors/{name}/offsets")["offsets"]

    def failure(self, name: str) -> str | None:
        """Connect's own trace when the connector or one of its tasks is FAILED, else None."""
        status = self.status(name)
        states = [("connector", status["connector"])] + [(f"task {t['id']}", t) for t in status.get("tasks", [])]
        for what, state in states:
            if state.get("state") == "FAILED":
                return f"{name}: {what} FAILED:\n{state.get('trace', '')}"
        return None

    def warnings(self, most: int = 40) -> str:
        """The last WARN/ERROR lines of this worker's log (for a test's failure message)."""
        with open(self.log, errors="replace") as f:
            return "".join([line for line in f if " WARN " in line or " ERROR " in line][-most:])

    def _task_log(self, name: str) -> list[str]:
        marker = f"WorkerSourceTask{{id={name}-0}} "
        with open(self.log, errors="replace") as f:
            return [line.split(marker, 1)[1] for line in f if marker in line]

    def file_source_done(self, name: str, path: str, topics: Sequence[str]) -> Callable[[], bool]:
        """For a FileStreamSource writing to ``topics``: true once its task has polled every line of ``path``
        (Kafka's line ends: ``\\n``, ``\\r\\n`` or a lone ``\\r``), run them all through its transforms (a poll
        followed by an empty one), and the topics hold every record it handed to its producer. Reads the task's
        TRACE log (``trace_tasks``): committed offsets alone cannot tell, as a record a transform drops never
        gets its offset committed."""
        if not self.trace_tasks:
            raise ValueError("file_source_done reads the source tasks' TRACE log: start the worker with trace_tasks")
        with open(path, "rb") as f:
            lines = len(re.findall(rb"\r\n|\r|\n", f.read()))

        def done() -> bool:
            log = self._task_log(name)
            polls = [i for i, line in enumerate(log) if line.startswith("About to send ")]
            polled = sum(int(log[i].split()[3]) for i in polls)
            if polled < lines or not any(line.startswith("Nothing to send") for line in log[polls[-1] + 1:]):
                return False
            produced = sum(line.startswith("Appending record to the topic") for line in log)
            return produced == 0 or _records_in(self.bootstrap, topics) >= produced
        return done

    def run(self, configs: Mapping[str, Any] | Iterable[Mapping[str, Any]], *,
            done: Callable[[], bool] | Mapping[str, Callable[[], bool]], timeout: float = 120,
            allow_failures: bool = False, keep: bool = False) -> dict[str, str | None]:
        """Submit connector configs together (their tasks run side by side in this worker) and wait until each
        one's ``done()`` (a callable, or one per connector name) is true; then delete them (unless ``keep``).
        A connector or task that fails raises :class:`ConnectorFailed` with Connect's trace, or with
        ``allow_failures`` counts as finished. Returns {name: its failure trace, or None}."""
        configs = [configs] if isinstance(configs, Mapping) else list(configs)
        names = [self.create(c) for c in configs]
        checks = {n: done for n in names} if callable(done) else dict(done)
        failures: dict[str, str | None] = {n: None for n in names}
        deadline = time.monotonic() + timeout
        try:
            pending = list(names)
            while pending:
                for name in list(pending):
                    failures[name] = self.failure(name)
                    if failures[name] is not None and not allow_failures:
                        raise ConnectorFailed(failures[name][:6000])
                    if failures[name] is not None or _ready(checks[name]):
                        pending.remove(name)
                if pending and time.monotonic() > deadline:
                    raise TimeoutError(f"Kafka Connect connectors {pending} did not complete within {timeout}s: "
                                       + "; ".join(f"{n}: {self.status(n)}" for n in pending)
                                       + "\nthe worker's last warnings:\n" + self.warnings())
                if pending:
                    time.sleep(0.2)
        finally:
            if not keep:
                for name in names:
                    try:
                        self.delete(name)
                    except RuntimeError:
                        pass  # a connector that could not be deleted leaves nothing a later run sees by name
        return failures


def _artifact(jar: str) -> str:
    """A jar's artifact id: its file name without the version (``jackson-databind-2.19.0.jar``: jackson-databind)."""
    name = os.path.basename(jar)
    match = re.match(r"(.+?)-\d[^-]*(?:-[A-Za-z][\w.]*)?\.jar$", name)
    return match.group(1) if match else name


def _ready(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except RuntimeError:  # the offsets endpoint answers 404 until the connector is registered
        return False


def first_and_last_times(bootstrap: str, topic: str, first: int | None = None) -> tuple[float, float]:
    """CreateTime (seconds) of the first record (or the one at offset ``first``) and the last record of a
    one-partition topic (benchmarks: from the first record a connector produced to its last)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        stamps = []
        for offset in (low if first is None else first, high - 1):
            consumer.assign([TopicPartition(topic, 0, offset)])
            msg = consumer.poll(30)
            if msg is None:
                raise TimeoutError(f"{topic}: no record at offset {offset}")
            stamps.append(msg.timestamp()[1] / 1000)
        return stamps[0], stamps[1]
    finally:
        consumer.close()


def _records_in(bootstrap: str, topics: Sequence[str]) -> int:
    """How many records the topics hold (sum of their partitions' high watermarks minus low)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reference-{uuid.uuid4().hex[:8]}"})
    try:
        total = 0
        for topic in topics:
            metadata = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if metadata is None or metadata.error is not None:
                continue
            for p in metadata.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                total += high - low
        return total
    finally:
        consumer.close()


def topic_records(bootstrap: str, topic: str, *, timeout: float = 60) -> list[TopicRecord]:
    """Every record ``topic`` holds now (all partitions, up to their high watermarks), in (partition, offset)
    order, as bytes. A topic that does not exist holds nothing."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reference-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": False})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        ends = {}
        for p in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > low:
                ends[p] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        got: dict[int, list[TopicRecord]] = {p: [] for p in ends}
        deadline = time.monotonic() + timeout
        while any((got[p][-1].offset + 1 if got[p] else 0) < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {sum(map(len, got.values()))} records of {topic}, expected up to {ends}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            got[msg.partition()].append(TopicRecord(
                msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                tuple((k, v) for k, v in (msg.headers() or []))))
        return [r for p in sorted(got) for r in got[p]]
    finally:
        consumer.close()
