"""A throwaway HDFS for tests: Hadoop's MiniDFSCluster (``hadoop-client-minicluster`` from Maven Central through the
``hdfs-minicluster`` profile of ``spark_connect_bridge/jvm/pom.xml``, at the version of Spark's own Hadoop client),
one NameNode and one DataNode on 127.0.0.1, started by ``tests/support/hdfs/MiniHdfs.java`` (java's source-file
mode). The NameNode's RPC port serves ``hdfs://`` (Spark's own Hadoop client), its HTTP port WebHDFS (the sink's).

>>> with MiniHdfs() as hdfs:                       # doctest: +SKIP
...     hdfs.url, hdfs.webhdfs
('hdfs://127.0.0.1:PORT', 'http://127.0.0.1:PORT')
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from spark_connect_bridge.connectors.storage.hdfs import WebHdfs, WebHdfsError
from spark_connect_bridge.jvm import classpath
from tests.support.postgres import free_port
from tests.support.process_server import LoggedServer

__all__ = ["MiniHdfs", "hdfs_files"]

_SOURCE = Path(__file__).parent / "hdfs" / "MiniHdfs.java"


class MiniHdfs(LoggedServer):
    """A private HDFS on 127.0.0.1 (``port``: the NameNode's RPC port; ``http_port``: WebHDFS); its data stays in
    ``root`` across :meth:`stop`/:meth:`start`; :meth:`destroy` removes it."""

    name = "MiniDFSCluster"
    prefix = "kconnect-hdfs-"

    def __init__(self, port: int | None = None, http_port: int | None = None):
        super().__init__(port)
        self.http_port = http_port or free_port()
        self._classpath = os.pathsep.join(classpath("hdfs-minicluster"))

    @property
    def url(self) -> str:
        return f"hdfs://127.0.0.1:{self.port}"

    @property
    def webhdfs(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 120) -> MiniHdfs:
        java = os.environ.get("JAVA", shutil.which("java") or "java")
        logged = os.path.getsize(self.log) if os.path.exists(self.log) else 0  # a restart appends to the log
        self._popen([java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", self._classpath,
                     str(_SOURCE), os.path.join(self.root, "dfs"), str(self.port), str(self.http_port)])
        deadline = self._wait_for_port(timeout)
        while not self._ready(logged):  # the DataNode registers after the NameNode listens
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.server_log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not get ready within {timeout}s:\n{self.server_log()}")
            time.sleep(0.2)
        return self

    def _ready(self, logged: int) -> bool:
        with open(self.log, "rb") as f:
            f.seek(logged)
            return b"READY hdfs://" in f.read()

    # -- a client for the tests ---------------------------------------------------------------------
    def client(self) -> WebHdfs:
        return WebHdfs((self.webhdfs,), "kconnect-test")

    def __enter__(self) -> Any:
        return self.start()


def hdfs_files(client: WebHdfs, directory: str = "/") -> dict[str, bytes]:
    """Every file under ``directory`` (recursively), through WebHDFS: absolute path -> bytes. A running sink renames
    its temporary files while this walks, so a file (or directory) gone between the listing and the read is left out:
    it is listed under its committed name by the next walk."""
    if client.status(directory) is None:
        return {}
    out: dict[str, bytes] = {}
    for entry in client.list(directory):
        path = f"{directory.rstrip('/')}/{entry['pathSuffix']}"
        try:
            if entry["type"] == "DIRECTORY":
                out.update(hdfs_files(client, path))
            else:
                out[path] = client.read(path)
        except WebHdfsError as e:
            if "FileNotFoundException" not in str(e):
                raise
    return out
