"""Spark's Python daemon (``pyspark.daemon``) on the installed pyspark's compiled modules.

Spark starts every Python worker with ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on its
``PYTHONPATH``. Python's zip importer keeps no bytecode cache, so each worker that the daemon forks compiles from
source every pyspark module it imports after the fork (its worker module - a data source's planner, reader, writer
or commit - and what that imports), and re-reads the zip's directory when the worker sets up its files
(``importlib.invalidate_caches``; Spark's spark-core jar is on the path too, read likewise, with no Python in
it). Profiled on a streaming Iceberg sink (py-spy, every Python process of the run),
that was about a third of all Python samples. A pip-installed pyspark ships the same modules, with ``__pycache__``,
in site-packages: where it is the zip's version (and py4j's likewise), this daemon takes the zips off ``sys.path``
before anything is imported, so the forked workers load compiled modules. Where no installed copy matches (a
cluster whose Python has no pyspark of Spark's version) nothing changes.

Spark runs it for every Python worker when ``spark.python.daemon.module`` names it (a session default of ours:
:data:`spark_connect_bridge.jvm.SESSION_DEFAULTS`). It imports nothing of pyspark or of this project before the
path is settled, and starts no thread before the daemon forks (as ``pyspark.daemon`` requires).
"""

from __future__ import annotations

import os
import sys
import zipfile
from importlib.machinery import PathFinder


def _version_text(spec_origin: str | None, zip_path: str, name: str) -> tuple[str | None, str | None]:
    """The ``<name>/version.py`` texts of the installed package (at ``spec_origin``) and of the zip."""
    if spec_origin is None:
        return None, None
    try:
        with open(os.path.join(os.path.dirname(spec_origin), "version.py"), encoding="utf-8") as f:
            installed = f.read()
        with zipfile.ZipFile(zip_path) as z:
            zipped = z.read(f"{name}/version.py").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return None, None
    return installed, zipped


def _has_python(jar: str) -> bool:
    try:
        with zipfile.ZipFile(jar) as z:
            return any(n.endswith((".py", ".pyc", ".so")) for n in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return True  # not ours to judge: left as it is


def redundant_zips(path: list[str]) -> list[str]:
    """The entries of ``path`` that are Spark's ``pyspark.zip`` / ``py4j-*-src.zip`` whose package is installed,
    at the same version, in a directory of ``path`` (so importing from the zip only loses the bytecode cache), and
    jars without a Python file (Spark adds its spark-core jar, ~5,900 entries, that every worker's
    ``invalidate_caches`` reads again)."""
    directories = [p for p in path if p and not p.endswith(".zip") and os.path.isdir(p)]
    out = []
    for entry in path:
        base = os.path.basename(entry)
        if base.endswith(".jar") and os.path.isfile(entry) and not _has_python(entry):
            out.append(entry)
            continue
        name = "pyspark" if base == "pyspark.zip" else "py4j" if base.startswith("py4j-") and base.endswith(
            ".zip") else None
        if name is None or not os.path.isfile(entry):
            continue
        spec = PathFinder.find_spec(name, directories)
        installed, zipped = _version_text(spec.origin if spec else None, entry, name)
        if installed is not None and installed == zipped:
            out.append(entry)
    return out


def prefer_installed_pyspark() -> list[str]:
    """Take the redundant zips off ``sys.path`` (and their cached importers); returns what was taken off."""
    drop = redundant_zips(sys.path)
    for entry in drop:
        while entry in sys.path:
            sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)
    return drop


if __name__ == "__main__":
    prefer_installed_pyspark()
    from pyspark.daemon import manager

    manager()
