"""The Spark Connect page's two blocks, as a user runs them: its server command in a directory of the user's
(the venv active, on a free port instead of 15002: the only change), then its client code as a script in the same
directory, which must see the sink file the server's query wrote."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.postgres import free_port
from tests.test_readme import _blocks

VENV_BIN = Path(sys.executable).parent


def _user_env() -> dict[str, str]:
    """A shell with the venv activated (`source .venv/bin/activate`), none of the test run's Spark settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_REMOTE",
                        "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "KCONNECT_TEST_SPARK")}
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(VENV_BIN.parent))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_page_client_runs_the_quick_start_through_the_page_server(tmp_path):
    [server_block] = _blocks("bash", "connect-server")
    [client_block] = _blocks("python", "connect")
    commands = [line.strip() for line in server_block.replace("\\\n", " ").splitlines() if line.strip()]
    assert commands[0] == "source .venv/bin/activate"  # what _user_env() does
    [start] = commands[1:]
    assert "15002" in start and "sc://127.0.0.1:15002" in client_block
    port = free_port()
    env = _user_env()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(shlex.split(start.replace("15002", str(port))), cwd=tmp_path, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _listening(port):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
            time.sleep(0.5)
        client = subprocess.run([sys.executable, "-c", client_block.replace("15002", str(port))], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=300, check=False)
        assert client.returncode == 0, client.stderr[-4000:]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        try:  # Python workers that outlived the JVM
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert (tmp_path / "test.sink.txt").read_text() == "hello\nkafka connect\n"
    assert re.search(r"Spark Connect server started", log.read_text(errors="replace"))
