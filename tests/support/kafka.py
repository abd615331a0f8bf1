"""A throwaway Apache Kafka broker for tests and benchmarks: KRaft, one node (broker + controller), loopback,
free ports, temp dir. The jars come from Maven Central through the ``kafka-broker`` profile of the project's
``spark_connect_bridge/jvm/pom.xml`` (resolved once into ``~/.m2``); Java 17 runs it.

>>> with KafkaBroker() as kafka:                       # doctest: +SKIP
...     kafka.create_topic("orders", partitions=2)
...     kafka.bootstrap                                 # '127.0.0.1:PORT'

The command-line tools run from the same classpath: :meth:`tool` takes a tool's main class and arguments
(``kafka-topics.sh`` is ``org.apache.kafka.tools.TopicCommand``, ``kafka-consumer-groups.sh`` is
``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from typing import Any

from spark_connect_bridge.jvm import classpath
from tests.support.postgres import free_port
from tests.support.process_server import ProcessServer

__all__ = ["KafkaBroker", "TOPICS_TOOL", "GROUPS_TOOL"]

TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
_LOG4J = """rootLogger.level=WARN
rootLogger.appenderRef.f.ref=F
appender.f.type=File
appender.f.name=F
appender.f.fileName={log}
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=%d %p %c - %m%n
"""


class KafkaBroker(ProcessServer):
    """A single-node KRaft Kafka broker in a temporary directory; :meth:`destroy` removes everything."""

    name = "Kafka"

    def __init__(self, port: int | None = None, settings: dict[str, Any] | None = None):
        self.port = port or free_port()
        self.controller_port = free_port()
        self.root = tempfile.mkdtemp(prefix="kconnect-kafka-")
        self.log = os.path.join(self.root, "server.log")
        self.settings = {
            "process.roles": "broker,controller", "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": os.path.join(self.root, "logs"), "num.partitions": 1,
            "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0, "log.flush.interval.messages": 10000,
            "group.min.session.timeout.ms": 500,  # worker groups on Kafka with short sessions (tests/distributed)
        }
        self.settings.update(settings or {})
        self.process: subprocess.Popen | None = None
        self._classpath = os.pathsep.join(classpath("kafka-broker"))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        """The java command line of the broker (``kafka.Kafka``) or a tool; a tool, a short run, compiles with C1
        only."""
        short = ["-XX:TieredStopAtLevel=1"] if main != "kafka.Kafka" else []
        return [os.environ.get("JAVA", shutil.which("java") or "java"), f"-Xmx{heap}", "-XX:+UseSerialGC", *short,
                f"-Dlog4j2.configurationFile={os.path.join(self.root, 'log4j2.properties')}",
                "-cp", self._classpath, main, *args]

    def _format(self) -> None:
        config = os.path.join(self.root, "server.properties")
        with open(config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.settings.items())
        with open(os.path.join(self.root, "log4j2.properties"), "w") as f:
            f.write(_LOG4J.format(log=self.log))
        # a cluster id (base64 of a UUID) that starts with "-" would be read as an option by the storage tool
        cluster_id = "k" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")[1:]
        subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", config),
                       check=True, capture_output=True, text=True)

    def start(self, timeout: float = 90) -> KafkaBroker:
        if not os.path.exists(os.path.join(self.root, "server.properties")):
            self._format()
        self.process = subprocess.Popen(self._java("kafka.Kafka", os.path.join(self.root, "server.properties"),
                                                   heap="768m"),
                                        stdout=subprocess.DEVNULL, stderr=open(self.log + ".stderr", "ab"))
        deadline = self._wait_for_port(timeout)
        self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline: float) -> None:
        """The port opens before the broker has registered with its controller: list topics until it answers."""
        while True:
            done = subprocess.run(self._java(TOPICS_TOOL, "--bootstrap-server", self.bootstrap, "--list"),
                                  capture_output=True, text=True)
            if done.returncode == 0 or time.monotonic() > deadline:
                return
            time.sleep(0.5)

    def server_log(self) -> str:
        parts = []
        for path in (self.log, self.log + ".stderr"):
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    parts.append(f.read()[-4000:])
        return "\n".join(parts)

    # -- tools -------------------------------------------------------------------------------------
    def tool(self, main: str, *args: str) -> str:
        """Run a Kafka command-line tool's main class against this broker's classpath; return its stdout."""
        done = subprocess.run(self._java(main, *args), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def create_topic(self, name: str, partitions: int = 1, **config: Any) -> None:
        extra = [a for k, v in config.items() for a in ("--config", f"{k.replace('_', '.')}={v}")]
        self.tool(TOPICS_TOOL, "--bootstrap-server", self.bootstrap, "--create", "--topic", name,
                  "--partitions", str(partitions), "--replication-factor", "1", *extra)

    def topics(self) -> list[str]:
        return sorted(self.tool(TOPICS_TOOL, "--bootstrap-server", self.bootstrap, "--list").split())
