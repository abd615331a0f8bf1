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

__all__ = ["MosquittoServer", "NatsServer", "RabbitMQServer", "RedisServer", "make_test_ca"]


def _binary(name: str, package: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if not path:
        raise RuntimeError(f"No {name}: apt-get install {package} (tests/support/setup_machine.sh installs it)")
    return path


class MosquittoServer(LoggedServer):
    """Mosquitto 2 with anonymous access. Its in-flight window is raised from Mosquitto's 20 (a source that
    acknowledges after Spark's commit holds a micro-batch's messages in flight) and its persistent sessions' queues
    are unbounded, as docs/tasks/brokers/mqtt.md advises for the MQTT source. It keeps no state across a restart."""

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


def make_test_ca(directory: str) -> dict[str, str]:
    """A throwaway CA and, signed by it, a server certificate for 127.0.0.1/localhost and a client certificate, as
    PEM files in ``directory`` (openssl, EC P-256 keys): ``{"ca", "server_cert", "server_key", "client"}``, the
    client's file holding its key and certificate."""
    os.makedirs(directory, exist_ok=True)
    path = {name: os.path.join(directory, f"{name}.pem") for name in
            ("ca", "ca_key", "server_cert", "server_key", "client_cert", "client_key", "client")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl = _binary("openssl", "openssl")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

    run("req", "-x509", *ec, "-keyout", path["ca_key"], "-out", path["ca"], "-days", "3", "-subj",
        "/CN=kconnect test CA")
    ext = os.path.join(directory, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who, cn in (("server", "localhost"), ("client", "kconnect-client")):
        csr = os.path.join(directory, f"{who}.csr")
        run("req", *ec, "-keyout", path[f"{who}_key"], "-out", csr, "-subj", f"/CN={cn}")
        run("x509", "-req", "-in", csr, "-CA", path["ca"], "-CAkey", path["ca_key"], "-CAcreateserial", "-days", "3",
            "-out", path[f"{who}_cert"], *(["-extfile", ext] if who == "server" else []))
    with open(path["client"], "w") as f:
        for part in ("client_key", "client_cert"):
            with open(path[part]) as g:
                f.write(g.read())
    return path


class RabbitMQServer(LoggedServer):
    """A RabbitMQ node (``rabbit-<port>@localhost``) with the ``guest`` user, which may log in from 127.0.0.1, and a
    TLS listener on ``tls_port`` whose certificate a throwaway CA signed (``tls["ca"]``; ``tls["client"]`` a client
    certificate and key it accepts; a client without one is accepted too)."""

    name = "rabbitmq"
    prefix = "kconnect-rabbitmq-"
    log_name = "rabbitmq.out"

    def __init__(self, port: int | None = None):
        super().__init__(port)
        self.node = f"rabbit-{self.port}@localhost"
        self.tls_port = free_port()
        self.tls: dict[str, str] = {}

    def _env(self) -> dict[str, str]:
        dist = self._dist = getattr(self, "_dist", None) or str(free_port())
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
        self.tls = make_test_ca(os.path.join(self.root, "tls"))
        with open(os.path.join(self.root, "rabbitmq.conf"), "w") as f:
            f.write(f"loopback_users.guest = true\nlisteners.ssl.local = 127.0.0.1:{self.tls_port}\n"
                    f"ssl_options.cacertfile = {self.tls['ca']}\nssl_options.certfile = {self.tls['server_cert']}\n"
                    f"ssl_options.keyfile = {self.tls['server_key']}\nssl_options.verify = verify_peer\n"
                    f"ssl_options.fail_if_no_peer_cert = false\n")
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

    def close_connections(self) -> None:
        """Close every client connection from the server's side (``rabbitmqctl close_all_connections``), as a
        broker restart or a network failure would end them."""
        ctl = "/usr/lib/rabbitmq/bin/rabbitmqctl"
        if not os.path.exists(ctl):
            ctl = _binary("rabbitmqctl", "rabbitmq-server")
        subprocess.run([ctl, "-n", self.node, "close_all_connections", "kconnect test: connection closed"],
                       check=True, capture_output=True, env=self._env(), cwd=self.root, timeout=120)

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
