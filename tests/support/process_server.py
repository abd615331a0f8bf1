"""What every throwaway server of the tests started as a child process shares: waiting for its port, stopping,
restarting and removing it. A subclass sets ``name``, ``port``, ``root`` and ``process`` and implements
``start()`` (which calls :meth:`_wait_for_port`) and ``server_log()``; :class:`LoggedServer` does all but
``start()`` for a server on a free port whose output goes to one log file in its temporary directory."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

__all__ = ["ProcessServer", "LoggedServer", "ObjectStoreServer"]


class ProcessServer:
    name = "server"
    port: int
    root: str
    process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Any:
        raise NotImplementedError

    def server_log(self) -> str:
        raise NotImplementedError

    def _wait_for_port(self, timeout: float) -> float:
        """Wait until the child listens on 127.0.0.1:``port``; return the deadline for any further readiness check."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.server_log()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return deadline
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not listen on 127.0.0.1:{self.port} within {timeout}s:\n"
                           f"{self.server_log()}")

    def stop(self, kill: bool = False) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill() if kill else self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        self.stop(kill=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


class LoggedServer(ProcessServer):
    """A server on ``port`` (a free one by default) with its own temporary directory ``root``, whose output goes to
    ``<root>/<log_name>``; a subclass names its directory's ``prefix`` and implements ``start()``."""

    prefix = "kconnect-server-"
    log_name = "server.log"

    def __init__(self, port: int | None = None):
        from tests.support.postgres import free_port

        self.port = port or free_port()
        self.root = tempfile.mkdtemp(prefix=self.prefix)
        self.log = os.path.join(self.root, self.log_name)
        self.process = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _popen(self, argv: list[str], **kwargs: Any) -> None:
        """Start ``argv`` in ``root`` with its output appended to the log."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, **kwargs)

    def server_log(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""


class ObjectStoreServer(LoggedServer):
    """An object store's emulator whose test client is a ``pyarrow.fs`` file system (:meth:`filesystem`)."""

    def filesystem(self) -> Any:
        raise NotImplementedError

    def create_bucket(self, bucket: str) -> None:
        self.filesystem().create_dir(bucket)

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix`` of ``bucket`` (a container for Azure): key -> bytes."""
        from pyarrow import fs

        store = self.filesystem()
        base = f"{bucket}/{prefix}".rstrip("/")
        out = {}
        for info in store.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True)):
            if info.type == fs.FileType.File:
                with store.open_input_stream(info.path) as f:
                    out[info.path[len(bucket) + 1:]] = f.read()
        return out
