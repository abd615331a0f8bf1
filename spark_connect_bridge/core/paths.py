"""Local paths in connector options, resolved where Spark resolves its own.

Spark resolves a relative path (``checkpointLocation``, ``spark.read.parquet("x")``) against the working
directory of the driver JVM. Classic Python workers run there too, but a Spark Connect server runs each session's
Python workers (UDFs, data source readers, writers and commits) in a per-session artifact directory
(``SPARK_JOB_ARTIFACT_UUID`` is set there) that is deleted with the session: a relative ``file=test.sink.txt``
would land in different, throwaway places from one process to the next. There it is resolved against the
directory the server was started in (``PWD``, inherited from the JVM's environment) instead.

>>> local_path("/data/in.txt")
'/data/in.txt'
"""

from __future__ import annotations

import os

__all__ = ["local_path"]


def local_path(path: str | os.PathLike) -> str:
    """The absolute form of a local path option, relative to the Spark driver's working directory."""
    path = os.fspath(path)
    if os.path.isabs(path):
        return os.path.normpath(path)
    base = os.environ.get("PWD") if os.environ.get("SPARK_JOB_ARTIFACT_UUID") else None
    if base and os.path.isabs(base):
        return os.path.normpath(os.path.join(base, path))
    return os.path.abspath(path)
