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
import sys
from datetime import timedelta
from typing import Any

from tests.support.process_server import ObjectStoreServer

__all__ = ["GcsEmulator"]


def emulator() -> str:
    path = (shutil.which("gcp-storage-emulator", path=os.path.dirname(sys.executable))
            or shutil.which("gcp-storage-emulator"))
    if not path:
        raise RuntimeError("No gcp-storage-emulator: pip install gcp-storage-emulator (the dev extra has it)")
    return path


class GcsEmulator(ObjectStoreServer):
    """A private GCS JSON API on 127.0.0.1; :meth:`destroy` stops it and removes its directory."""

    name = "gcp-storage-emulator"
    prefix = "kconnect-gcs-"

    def start(self, timeout: float = 60) -> GcsEmulator:
        self._popen([emulator(), "start", "--host", "127.0.0.1", "--port", str(self.port), "--in-memory"])
        self._wait_for_port(timeout)
        return self

    # -- a client for the tests ---------------------------------------------------------------------
    def filesystem(self) -> Any:
        from pyarrow import fs

        return fs.GcsFileSystem(anonymous=True, endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                                project_id="kconnect-test", retry_time_limit=timedelta(seconds=5))

