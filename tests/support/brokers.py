"""Throwaway message brokers for the tests and benchmarks, from Debian's packages, each on 127.0.0.1 and a free port
in a temp dir: Mosquitto (``mosquitto``), RabbitMQ (``rabbitmq-server``), Redis (``redis-server``) and NATS with
JetStream (``nats-server``).

>>> with MosquittoServer() as mqtt:              # doctest: +SKIP
...     mqtt.uri
'tcp://127.0.0.1:41234'
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from tests.support.postgres import free_port
from tests.support.process_server import LoggedServer

__all__ = ["MosquittoServer", "NatsServer", "RabbitMQServer", "RedisServer"]


def _binary(name: str, package: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if not path:
        raise RuntimeError(f"No {name}: apt-get install {package} (tests/support/setup_machine.sh installs it)")
    return path


class MosquittoServer(LoggedServer):
    """Mosquitto 2 with anonymous access. Its in-flight window is raised from Mosquitto's 20 (a source that
    acknowledges after Spark's commit holds a micro-batch's messages in flight) and its persistent sessions' queues
    are unbounded, as docs/tasks/brokers.md advises for the MQTT source. It keeps no state across a restart."""

    name = "mosquitto"
    prefix = "kconnect-mqtt-"
    log_name = "mosquitto.log"

    @property
    def uri(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> MosquittoServer:
        conf = os.path.join(self.root, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 10000\n"
                    f"max_queued_messages 0\npersistence false\nlog_dest file {self.log}\n")
        self.process = subprocess.Popen([_binary("mosquitto", "mosquitto"), "-c", conf], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, cwd=self.root)
        self._wait_for_port(timeout)
        return self


class RabbitMQServer(LoggedServer):
    """A RabbitMQ node (``rabbit-<port>@localhost``) with the ``guest`` user, which may log in from 127.0.0.1."""

    name = "rabbitmq"
    prefix = "kconnect-rabbitmq-"
    log_name = "rabbitmq.out"

    def __init__(self, port: int | None = None):
        super().__init__(port)
        self.node = f"rabbit-{self.port}@localhost"

    def _env(self) -> dict[str, str]:
        dist = str(free_port())
        local = "-kernel inet_dist_use_interface {127,0,0,1}"
        return {**os.environ, "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": dist,
                "RABBITMQ_MNESIA_BASE": os.path.join(self.root, "mnesia"),
                "RABBITMQ_LOG_BASE": os.path.join(self.root, "log"),
                "RABBITMQ_FEATURE_FLAGS_FILE": os.path.join(self.root, "feature_flags"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self.root, "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": os.path.join(self.root, "rabbitmq"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": local, "RABBITMQ_CTL_ERL_ARGS": local,
                "HOME": self.root}

    def start(self, timeout: float = 120) -> RabbitMQServer:
        for sub in ("mnesia", "log"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        with open(os.path.join(self.root, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        with open(os.path.join(self.root, "rabbitmq.conf"), "w") as f:
            f.write("loopback_users.guest = true\n")
        with open(self.log, "ab") as log:
            # Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user; the script it runs does not.
            server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
            if not os.path.exists(server):
                server = _binary("rabbitmq-server", "rabbitmq-server")
            self.process = subprocess.Popen([server], stdout=log,
                                            stderr=subprocess.STDOUT, env=self._env(), cwd=self.root,
                                            start_new_session=True)
        deadline = self._wait_for_port(timeout)
        # The AMQP port opens before the node has finished booting: wait for the broker to accept a login.
        while True:
            try:
                import pika

                pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port)).close()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self, kill: bool = False) -> None:
        if self.process and self.process.poll() is None:
            # rabbitmq-server is a shell script over the Erlang VM: signal the whole process group.
            import signal

            os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None


class RedisServer(LoggedServer):
    """A Redis server without persistence and without a password (protected mode off: it listens on 127.0.0.1
    only)."""

    name = "redis"
    prefix = "kconnect-redis-"
    log_name = "redis.log"

    @property
    def uri(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> RedisServer:
        self.process = subprocess.Popen(
            [_binary("redis-server", "redis-server"), "--bind", "127.0.0.1", "--port", str(self.port),
             "--save", "", "--appendonly", "no", "--dir", self.root, "--logfile", self.log,
             "--protected-mode", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root)
        self._wait_for_port(timeout)
        return self


class NatsServer(LoggedServer):
    """A NATS server with JetStream (``-js``), its store in the temp dir, anonymous access."""

    name = "nats-server"
    prefix = "kconnect-nats-"
    log_name = "nats.log"

    @property
    def uri(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> NatsServer:
        self.process = subprocess.Popen(
            [_binary("nats-server", "nats-server"), "-a", "127.0.0.1", "-p", str(self.port), "-js",
             "-sd", os.path.join(self.root, "jetstream"), "-l", self.log], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=self.root)
        self._wait_for_port(timeout)
        return self
