"""Loaded by every Python process of a child driver whose PYTHONPATH starts with this directory (the Iceberg kill -9
test): pyiceberg's SQL catalog pauses in the commit that makes the table's snapshot number
``KCONNECT_TEST_ICEBERG_PAUSE_AT`` - ``middle``: its new metadata file written, the catalog not yet pointing at it;
``after``: the catalog pointing at it, Spark's commit log not yet told - and touches ``KCONNECT_TEST_ICEBERG_MARKER``
so that the test kills the driver there."""

import os

if os.environ.get("KCONNECT_TEST_ICEBERG_PAUSE_AT"):
    import time
    from pathlib import Path

    from pyiceberg.catalog.sql import SqlCatalog

    _WHERE, _AT = os.environ["KCONNECT_TEST_ICEBERG_PAUSE_AT"].split(":")
    _MARKER = Path(os.environ["KCONNECT_TEST_ICEBERG_MARKER"])

    def _pause() -> None:
        _MARKER.write_text(str(os.getpid()))
        time.sleep(600)  # killed here

    _write_metadata, _commit_table = SqlCatalog._write_metadata, SqlCatalog.commit_table

    def _paused_write_metadata(metadata, io, metadata_path):  # a staticmethod of pyiceberg's Catalog
        _write_metadata(metadata=metadata, io=io, metadata_path=metadata_path)
        if _WHERE == "middle" and len(metadata.snapshots) >= int(_AT):
            _pause()

    def _paused_commit_table(self, table, requirements, updates):
        response = _commit_table(self, table, requirements, updates)
        if _WHERE == "after" and len(response.metadata.snapshots) >= int(_AT):
            _pause()
        return response

    SqlCatalog._write_metadata = staticmethod(_paused_write_metadata)
    SqlCatalog.commit_table = _paused_commit_table
