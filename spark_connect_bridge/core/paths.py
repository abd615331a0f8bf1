"""Local paths in connector options, resolved where Spark resolves its own.

Spark resolves a relative path (``checkpointLocation``, ``spark.read.parquet("x")``) against the working
directory of the driver JVM. Classic Python workers run there too, but a Spark Connect server runs each session's
Python workers (UDFs, data source readers, writers and commits) in a per-session artifact directory
(``SPARK_JOB_ARTIFACT_UUID`` is set there) that is deleted with the session: a relative ``file=test.sink.txt``
would land in different, throwaway places from one process to the next. There it is resolved against the
directory the server was started in (``PWD``, inherited from the JVM's environment) instead.

>>> local_path("/data/in.txt")
'/data/in.txt'

:func:`location_problem` says why a location lies outside a set of allowed roots (a worker's
``connector.allowed.paths``), for connectors that learn locations at run time (an Iceberg catalog's tables).

>>> location_problem("file:///etc/passwd", allowed=("/data",), forbidden=())
'not under the directories this worker allows connectors to use (/data)'
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

__all__ = ["is_remote_uri", "local_path", "location_problem", "normalise_uri", "under"]

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "wasb", "gcs": "gs", "https": "http"}
# Percent-encoded '.', '/' and '\\': Hadoop's Path decodes them, so they could make a '..' segment after a check.
ENCODED = re.compile(r"%(?:2e|2f|5c)", re.IGNORECASE)


def local_path(path: str | os.PathLike) -> str:
    """The absolute form of a local path option, relative to the Spark driver's working directory."""
    path = os.fspath(path)
    if os.path.isabs(path):
        return os.path.normpath(path)
    base = os.environ.get("PWD") if os.environ.get("SPARK_JOB_ARTIFACT_UUID") else None
    if base and os.path.isabs(base):
        return os.path.normpath(os.path.join(base, path))
    return os.path.abspath(path)


def is_remote_uri(value: str) -> bool:
    """Whether ``value`` is a URI other than ``file://``."""
    uri = _URI.match(value.strip())
    return uri is not None and uri.group(1).lower() != "file"


def normalise_uri(uri: str) -> str:
    """A remote URI as allowlists compare it: the scheme lower-cased and its Hadoop/TLS spellings folded
    (``s3a``/``s3n`` -> ``s3``), no trailing slash (``..`` segments are refused by the callers)."""
    scheme, rest = uri.split("://", 1)
    scheme = scheme.lower()
    return f"{_SAME_SCHEME.get(scheme, scheme)}://{rest.rstrip('/')}"


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies inside it (both already normalised)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _under_uri(uri: str, root: str) -> bool:
    return uri == root or uri.startswith(root + "/")


def location_problem(location: str, *, allowed: Sequence[str], forbidden: Sequence[str]) -> str | None:
    """Why ``location`` (a local path, a ``file:`` URI or a remote URI) may not be used by a connector that
    ``allowed`` roots bound and ``forbidden`` roots exclude (``None``: it may). Local paths are compared after
    following links; a remote URI must lie under a remote root and may not hold ``.``/``..`` segments or
    percent-encoded dots and slashes."""
    value = location.strip()
    if "\x00" in value:
        return "a path may not contain a NUL character"
    if is_remote_uri(value):
        target = normalise_uri(value)
        if "/../" in target + "/" or "/./" in target + "/" or ENCODED.search(target) or "\\" in target:
            return "a URI may not contain '.' or '..' segments, percent-encoded dots or slashes, or backslashes"
        if any(_under_uri(target, normalise_uri(r)) for r in forbidden if is_remote_uri(r)):
            return "the worker's state is not reachable from connectors"
        roots = [normalise_uri(r) for r in allowed if is_remote_uri(r)]
        if any(_under_uri(target, root) for root in roots):
            return None
        return f"not under a URI this worker allows connectors to use ({', '.join(roots) or 'no URI entries'})"
    local = re.sub(r"^file:(?://)?", "", value, flags=re.IGNORECASE)
    real = os.path.realpath(os.path.abspath(local))
    if any(under(real, os.path.realpath(r)) for r in forbidden if not is_remote_uri(r)):
        return "the worker's state directory is not reachable from connectors"
    roots = [r for r in allowed if not is_remote_uri(r)]
    if not any(under(real, os.path.realpath(r)) for r in roots):
        return f"not under the directories this worker allows connectors to use ({', '.join(roots) or 'none'})"
    return None
