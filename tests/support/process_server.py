"""What every throwaway server of the tests started as a child process shares: waiting for its port, stopping,
restarting and removing it. A subclass sets ``name``, ``port``, ``root`` and ``process`` and implements
``start()`` (which calls :meth:`_wait_for_port`) and ``server_log()``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from typing import Any

__all__ = ["ProcessServer"]


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
