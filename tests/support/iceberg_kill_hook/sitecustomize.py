"""A test hook for the kill -9 test of the Iceberg sink (tests/connectors/test_iceberg.py): on PYTHONPATH of a child
driver (whose Spark Python workers inherit it), it stops the commit of one micro-batch at a chosen point, so the
test kills the driver there. ``KCONNECT_TEST_ICEBERG_STOP=<point>:<batch id>``, ``<point>`` one of

* ``metadata``: the batch's data files, manifests and new metadata file are written, the catalog does not name
  that metadata yet (pyiceberg's SqlCatalog.commit_table between _write_metadata and its UPDATE);
* ``committed``: the catalog names the batch's snapshot, Spark has not recorded the batch as committed.

At that point it creates the file ``KCONNECT_TEST_ICEBERG_MARKER`` and sleeps until killed. Without the variable
nothing is patched."""

import os

_STOP = os.environ.get("KCONNECT_TEST_ICEBERG_STOP")


def _batch(metadata) -> str | None:
    snapshot = metadata.current_snapshot() if metadata is not None else None
    return snapshot.summary.get("kconnect.batch-id") if snapshot is not None and snapshot.summary else None


def _stop() -> None:
    import time

    with open(os.environ["KCONNECT_TEST_ICEBERG_MARKER"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(3600)


if _STOP:
    _point, _at = _STOP.split(":")
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:  # a Python without pyiceberg: nothing to stop
        SqlCatalog = None
    if SqlCatalog is not None and _point == "metadata":
        _write = SqlCatalog._write_metadata

        def _write_metadata(metadata, io, metadata_path):
            _write(metadata, io, metadata_path)
            if _batch(metadata) == _at:
                _stop()

        SqlCatalog._write_metadata = staticmethod(_write_metadata)
    elif SqlCatalog is not None and _point == "committed":
        _commit = SqlCatalog.commit_table

        def commit_table(self, table, requirements, updates):
            response = _commit(self, table, requirements, updates)
            if _batch(response.metadata) == _at:
                _stop()
            return response

        SqlCatalog.commit_table = commit_table
