"""A throwaway Azure Blob server for tests: Azurite (npm's ``azurite``, installed on first use into
``~/.cache/kconnect-test/azurite`` with ``npm install``) on 127.0.0.1 and a free port, with its well-known development
account ``devstoreaccount1`` and key (public, in Azurite's documentation).

>>> with AzuriteServer() as az:                      # doctest: +SKIP
...     az.create_container("lake")
...     az.objects("lake")
{}
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from tests.support.process_server import ObjectStoreServer

__all__ = ["AzuriteServer", "ACCOUNT", "ACCOUNT_KEY", "azurite_blob"]

#: Azurite's development account and key (documented by Azurite; not a secret anywhere).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_VERSION = "3.35.0"
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kconnect-test", "azurite")


def azurite_blob() -> str:
    """The ``azurite-blob`` launcher, installed from npm into :data:`CACHE` when missing."""
    path = os.path.join(CACHE, "node_modules", ".bin", "azurite-blob")
    if os.path.exists(path):
        return path
    if not shutil.which("npm"):
        raise RuntimeError("No npm to install Azurite (apt-get install npm, or set KCONNECT_TEST_AZURITE=host:port)")
    os.makedirs(CACHE, exist_ok=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", CACHE, f"azurite@{AZURITE_VERSION}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    return path


class AzuriteServer(ObjectStoreServer):
    """A private Blob API on 127.0.0.1 keeping blobs in its temp dir; :meth:`destroy` stops it and removes it."""

    name = "azurite-blob"
    prefix = "kconnect-azurite-"

    def start(self, timeout: float = 120) -> AzuriteServer:
        launcher = azurite_blob()
        self._popen([launcher, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location",
                     os.path.join(self.root, "data"), "--skipApiVersionCheck", "--loose", "--disableTelemetry"])
        self._wait_for_port(timeout)
        return self

    # -- a client for the tests ---------------------------------------------------------------------
    def filesystem(self) -> Any:
        from pyarrow import fs

        where = f"127.0.0.1:{self.port}"
        return fs.AzureFileSystem(account_name=ACCOUNT, account_key=ACCOUNT_KEY, blob_storage_authority=where,
                                  blob_storage_scheme="http", dfs_storage_authority=where, dfs_storage_scheme="http")

    def create_container(self, container: str) -> None:
        self.create_bucket(container)

