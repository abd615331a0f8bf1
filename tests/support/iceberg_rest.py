"""Iceberg's REST catalog server for tests: ``org.apache.iceberg.rest.RESTCatalogServer``, the server Iceberg's own
docker image ``apache/iceberg-rest-fixture`` runs, from the ``iceberg-rest-catalog`` profile of
``spark_connect_bridge/jvm/pom.xml`` (Maven Central), on a free port. It serves a JDBC catalog on a SQLite file in
its temporary directory, whose tables' files go under ``warehouse`` (a local directory by default; an ``s3://``
URI with ``s3`` settings, as ``CATALOG_*`` variables of the image name them).

Its Jetty listens on every interface at that port (the server takes no bind address); the catalog holds only the
tests' throwaway tables.

>>> with IcebergRestCatalog() as catalog:                    # doctest: +SKIP
...     {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": catalog.endpoint}
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping

import requests

from spark_connect_bridge.jvm import classpath
from tests.support.process_server import LoggedServer

__all__ = ["IcebergRestCatalog"]


class IcebergRestCatalog(LoggedServer):
    """The REST catalog on 127.0.0.1:``port``; ``properties`` are more catalog properties of its backing catalog
    (``io-impl``, ``s3.endpoint``, ...)."""

    name = "Iceberg REST catalog"
    prefix = "kconnect-iceberg-rest-"

    def __init__(self, warehouse: str | None = None, properties: Mapping[str, str] | None = None):
        super().__init__()
        self.warehouse = warehouse or os.path.join(self.root, "warehouse")
        self.properties = dict(properties or {})

    def start(self, timeout: float = 120) -> IcebergRestCatalog:
        # RCKUtils.environmentCatalogConfig: CATALOG_<KEY> -> key, "__" -> "-", "_" -> "."
        props = {"catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
                 "uri": f"jdbc:sqlite:{os.path.join(self.root, 'catalog.db')}", "jdbc.schema-version": "V1",
                 "warehouse": self.warehouse, "rest.port": str(self.port), **self.properties}
        env = {**os.environ, **{"CATALOG_" + k.replace("-", "__").replace(".", "_").upper(): v
                                for k, v in props.items()}}
        java = shutil.which("java") or "java"
        self._popen([java, "-Xmx256m", "-cp", os.pathsep.join(classpath("iceberg-rest-catalog")),
                     "org.apache.iceberg.rest.RESTCatalogServer"], env=env)
        deadline = self._wait_for_port(timeout)
        while True:  # Jetty accepts before the servlet answers
            try:
                if requests.get(f"{self.endpoint}/v1/config", timeout=5).ok:
                    return self
            except requests.RequestException:
                pass
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not answer /v1/config:\n{self.server_log()}")
            time.sleep(0.2)
