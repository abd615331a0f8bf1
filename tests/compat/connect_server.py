"""A throwaway Spark Connect server for the tests: pyspark's own ``spark-connect`` jar, on 127.0.0.1.

Databricks serverless and shared clusters run Python through Spark Connect, so the contract tests and the
README examples also run through a Connect session (``KCONNECT_TEST_SPARK=connect``; see
``tests/compat/run_compat.py``). The server is started like pyspark's own ``start-connect-server.sh``
(``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``), bound to 127.0.0.1 on a
free port, and stopped (with its Python workers) afterwards.

Its Python workers import the project's code, as a serverless environment installs a library on its
workers, but do **not** auto-discover the ``kconnect`` data source (the ``pyspark_kconnect`` shim is left off
their path): ``format("kconnect")`` resolves only after the client's ``spark_connect_bridge.register(spark)``,
which is what a serverless notebook has to do.

>>> with ConnectServer({"spark.sql.session.timeZone": "UTC"}) as server:      # doctest: +SKIP
...     spark = server.session()
...     spark.range(3).count()
3
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

import spark_connect_bridge

__all__ = ["ConnectServer", "MODE_VARIABLE", "connect_session", "running_server", "session_mode"]

MODE_VARIABLE = "KCONNECT_TEST_SPARK"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
REPO = Path(__file__).resolve().parents[2]
# What the server's Python workers may import: the library and the tests (cloudpickle pickles test helpers by
# reference), never the auto-discovery shim.
WORKER_PACKAGES = (Path(spark_connect_bridge.__file__).resolve().parent, REPO / "tests")


_running: list[ConnectServer] = []


def running_server() -> ConnectServer:
    """The server behind the tests' Connect session (to open more sessions on it)."""
    if not _running:
        raise RuntimeError("no Spark Connect server is running: set KCONNECT_TEST_SPARK=connect")
    return _running[-1]


def session_mode() -> str:
    """``classic`` (the default) or ``connect``, from ``KCONNECT_TEST_SPARK``."""
    mode = os.environ.get(MODE_VARIABLE, "classic").strip().lower() or "classic"
    if mode not in ("classic", "connect"):
        raise ValueError(f"Invalid value {mode!r} for {MODE_VARIABLE}: use 'classic' or 'connect'")
    return mode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ConnectServer:
    """A Spark Connect server in its own process group; ``conf`` are Spark confs (``spark.master`` included,
    ``local[2]`` unless given). :meth:`stop` ends the JVM and its Python workers and removes the temp dir."""

    def __init__(self, conf: Mapping[str, str] | None = None, start_timeout: float = 180.0):
        self.conf = {"spark.master": "local[2]", **(conf or {})}
        self.start_timeout = start_timeout
        self.root = Path(tempfile.mkdtemp(prefix="kconnect-connect-"))
        self.log = self.root / "server.log"
        self.port = 0
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def _worker_path(self) -> str:
        path = self.root / "pythonpath"
        path.mkdir(exist_ok=True)
        for package in WORKER_PACKAGES:
            link = path / package.name
            if not link.exists():
                link.symlink_to(package, target_is_directory=True)
        return str(path)

    def _command(self) -> list[str]:
        spark_home = Path(pyspark.__file__).resolve().parent
        conf = {**self.conf, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(self.port), "spark.connect.grpc.port.maxRetries": "0"}
        master = conf.pop("spark.master")
        args = [str(spark_home / "bin" / "spark-submit"), "--master", master, "--class", SERVER_CLASS,
                "--name", "spark_connect_bridge-tests-connect"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args + ["spark-internal"]

    def start(self) -> ConnectServer:
        spark_home = Path(pyspark.__file__).resolve().parent
        env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYTHONPATH": self._worker_path()}
        for attempt in range(3):  # a free port can be taken between the probe and the bind
            self.port = _free_port()
            with open(self.log, "ab") as log:
                self._process = subprocess.Popen(self._command(), env=env, cwd=os.getcwd(), stdout=log,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 start_new_session=True)
            if self._wait_until_listening():
                _running.append(self)
                return self
            self.stop(remove=False)
            if attempt == 2 or "BindException" not in self.log.read_text(errors="replace"):
                break
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"Spark Connect server did not start on 127.0.0.1 (log {self.log}):\n{tail}")

    def _wait_until_listening(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.5)
        return False

    def session(self) -> SparkSession:
        """A new Connect session on this server, made the process's default and active session."""
        return SparkSession.builder.remote(self.url).create()

    def side_session(self) -> RemoteSparkSession:
        """Another session on this server (its own session id, so its own registered data sources) that leaves
        the default and active session alone; stop it when done."""
        return RemoteSparkSession(connection=self.url)

    def stop(self, remove: bool = True) -> None:
        if self in _running:
            _running.remove(self)
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if process is not None:
            try:  # Python workers that outlived the JVM
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if remove:
            subprocess.run(["rm", "-rf", str(self.root)], check=False)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def connect_session(conf: Mapping[str, str]) -> Iterator[SparkSession]:
    """The tests' one Spark Connect session: a local server started with ``conf`` (the classic session's
    confs, so both modes run the same Spark), and the ``kconnect`` data source registered from the client."""
    with ConnectServer(conf) as server:
        session = server.session()
        spark_connect_bridge.register(session)
        try:
            yield session
        finally:
            session.stop()
