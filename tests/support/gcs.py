"""A throwaway GCS server for tests: ``gcp-storage-emulator`` (PyPI) on 127.0.0.1 and a free port, keeping buckets
and objects in memory (a restart starts empty). It takes any (or no) credentials.

>>> with GcsEmulator() as gcs:                      # doctest: +SKIP
...     gcs.create_bucket("lake")
...     gcs.objects("lake")
{}
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta
from typing import Any

from tests.support.postgres import free_port
from tests.support.process_server import ProcessServer

__all__ = ["GcsEmulator"]


def emulator() -> str:
    path = (shutil.which("gcp-storage-emulator", path=os.path.dirname(sys.executable))
            or shutil.which("gcp-storage-emulator"))
    if not path:
        raise RuntimeError("No gcp-storage-emulator: pip install gcp-storage-emulator (the dev extra has it)")
    return path


class GcsEmulator(ProcessServer):
    """A private GCS JSON API on 127.0.0.1; :meth:`destroy` stops it and removes its directory."""

    name = "gcp-storage-emulator"

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.root = tempfile.mkdtemp(prefix="kconnect-gcs-")
        self.log = os.path.join(self.root, "server.log")
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> GcsEmulator:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([emulator(), "start", "--host", "127.0.0.1", "--port", str(self.port),
                                             "--in-memory"], stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        self._wait_for_port(timeout)
        return self

    def server_log(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""

    # -- a client for the tests ---------------------------------------------------------------------
    def filesystem(self) -> Any:
        from pyarrow import fs

        return fs.GcsFileSystem(anonymous=True, endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                                project_id="kconnect-test", retry_time_limit=timedelta(seconds=5))

    def create_bucket(self, bucket: str) -> None:
        self.filesystem().create_dir(bucket)

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix`` of ``bucket``: key -> bytes."""
        from pyarrow import fs

        gcs = self.filesystem()
        base = f"{bucket}/{prefix}".rstrip("/")
        out = {}
        for info in gcs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True)):
            if info.type == fs.FileType.File:
                with gcs.open_input_stream(info.path) as f:
                    out[info.path[len(bucket) + 1:]] = f.read()
        return out
