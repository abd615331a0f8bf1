"""A throwaway Apache Iceberg REST catalog for tests: Iceberg's own REST catalog servlet (iceberg-core's tests jar,
what the apache/iceberg-rest-fixture image serves) over a JDBC catalog on SQLite, in Jetty on 127.0.0.1, started by
``tests/support/iceberg_rest/RestCatalog.java`` (java's source-file mode) with the ``iceberg-rest-catalog`` profile
of ``spark_connect_bridge/jvm/pom.xml``. Its warehouse is a directory of ``root``.

>>> with IcebergRestCatalog() as rest:             # doctest: +SKIP
...     rest.uri, rest.warehouse
('http://127.0.0.1:PORT', '/tmp/kconnect-iceberg-rest-.../warehouse')
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from spark_connect_bridge.jvm import classpath
from tests.support.process_server import LoggedServer

__all__ = ["IcebergRestCatalog"]

_SOURCE = Path(__file__).parent / "iceberg_rest" / "RestCatalog.java"


class IcebergRestCatalog(LoggedServer):
    """Iceberg's REST catalog on 127.0.0.1:``port``; its catalog database and warehouse live in ``root``."""

    name = "Iceberg REST catalog"
    prefix = "kconnect-iceberg-rest-"

    def __init__(self, port: int | None = None):
        super().__init__(port)
        self._classpath = os.pathsep.join(classpath("iceberg-rest-catalog"))

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        return os.path.join(self.root, "warehouse")

    def start(self, timeout: float = 90) -> IcebergRestCatalog:
        java = os.environ.get("JAVA", shutil.which("java") or "java")
        self._popen([java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", self._classpath,
                     str(_SOURCE), str(self.port), os.path.join(self.root, "catalog.db"), self.warehouse])
        deadline = self._wait_for_port(timeout)
        while b"READY http://" not in Path(self.log).read_bytes():  # the servlet is up once this is printed
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.server_log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not get ready within {timeout}s:\n{self.server_log()}")
            time.sleep(0.1)
        return self
