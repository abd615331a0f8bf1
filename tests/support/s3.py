"""A throwaway S3 server for tests and benchmarks: moto's server mode (``moto_server`` from PyPI's ``moto[server]``)
on 127.0.0.1 and a free port. It keeps buckets and objects in memory: a restart starts empty.

>>> with MotoS3Server() as s3:                      # doctest: +SKIP
...     s3.create_bucket("lake")
...     s3.objects("lake")
{}
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from tests.support.process_server import ObjectStoreServer

__all__ = ["MotoS3Server", "ACCESS_KEY", "SECRET_KEY", "REGION"]

#: moto accepts any credentials; the tests' configs pass these (an S3 client needs some).
ACCESS_KEY, SECRET_KEY, REGION = "kconnect-test-key", "kconnect-test-secret", "us-east-1"


def moto_server() -> str:
    path = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    if not path:
        raise RuntimeError("No moto_server: pip install 'moto[server]' (the dev extra has it)")
    return path


class MotoS3Server(ObjectStoreServer):
    """A private S3 API on 127.0.0.1; :meth:`destroy` stops it and removes its directory."""

    name = "moto_server"
    prefix = "kconnect-s3-"

    def start(self, timeout: float = 60) -> MotoS3Server:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_DEFAULT_REGION": REGION}
        self._popen([moto_server(), "-H", "127.0.0.1", "-p", str(self.port)], env=env)
        self._wait_for_port(timeout)
        return self

    # -- a client for the tests ---------------------------------------------------------------------
    def filesystem(self) -> Any:
        from pyarrow import fs

        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                               endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                               allow_bucket_creation=True, allow_bucket_deletion=True)

