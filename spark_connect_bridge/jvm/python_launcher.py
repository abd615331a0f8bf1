"""Spark's per-query Python processes on the installed pyspark instead of ``pyspark.zip``.

Spark starts some Python processes itself, from the JVM, each time a streaming query starts or a Python data source
is planned: ``python -m pyspark.sql.streaming.python_streaming_source_runner`` (a Python streaming source's reader)
and ``python -m pyspark.daemon pyspark.sql.worker.<planner>`` (lookup, create, plan, commit of Python data sources).
Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on their ``PYTHONPATH``, and Python keeps no
bytecode for a zip of ``.py`` files: each of those processes compiles pyspark from source (0.77 CPU-s for the
streaming runner's imports, against 0.28 s from the installed pyspark and its ``__pycache__``). That is most of a
second connector's start (bench/bench_connector_start.py).

:func:`with_python_launcher` points Spark (``PYSPARK_PYTHON``, read when the JVM and the SparkContext start) at a
small ``/bin/sh`` launcher that takes those zips off ``PYTHONPATH`` for exactly those modules and then runs this
Python with the very same arguments (``exec``: stdin, stdout, descriptors and environment unchanged, Python's own
``-m``); every other process Spark starts (the task workers' daemon, ``-c`` probes, scripts) runs this Python
unchanged. It does so only where that is safe: the installed pyspark (and py4j) is the same version as the zip the
JVM would use, the master is local (the launcher is a file on this machine), the platform is POSIX, and neither
``PYSPARK_PYTHON`` nor ``PYSPARK_DRIVER_PYTHON`` nor ``spark.pyspark.python`` / ``spark.pyspark.driver.python``
was set by the user.

The ``kconnect`` CLI and workers use it for the sessions they make; a user's own session opts in:

>>> from pyspark.sql import SparkSession                                      # doctest: +SKIP
>>> from spark_connect_bridge.jvm import with_python_launcher                 # doctest: +SKIP
>>> spark = with_python_launcher(SparkSession.builder.master("local[2]")).getOrCreate()   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

__all__ = ["with_python_launcher", "python_launcher", "launcher_script", "LAUNCHED_MODULES"]

log = logging.getLogger(__name__)

#: ``case`` patterns over ``$1:$2:$3`` of the processes that run on the installed pyspark: Python data sources'
#: streaming reader (one process per query) and planner daemons (one per kind of planning step, per session), also
#: when Spark runs the planners without a daemon (``spark.python.use.daemon=false``). The task workers' daemon
#: (``-m pyspark.daemon`` / ``pyspark.worker``) keeps Spark's path: made a session default once, it cost 35-40 ms more
#: CPU per read in steady state (docs/benchmarks.md).
LAUNCHED_MODULES = ("-m:pyspark.sql.streaming.*", "-m:pyspark.daemon:pyspark.sql.worker.*", "-m:pyspark.sql.worker.*")

_ENV_KEYS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
_CONF_KEYS = ("spark.pyspark.python", "spark.pyspark.driver.python")


def launcher_script(python: str, drop: list[str], modules: tuple[str, ...] = LAUNCHED_MODULES) -> str:
    """The text of a launcher that runs ``python`` with the ``PYTHONPATH`` entries ``drop`` removed for
    ``modules`` (pure POSIX shell: no other process started, no Python of its own)."""
    dropped = "|".join(shlex.quote(entry) for entry in drop)
    return ("#!/bin/sh\n"
            "# Written by spark_connect_bridge.jvm.python_launcher: Spark's per-query Python processes import the\n"
            "# installed pyspark (its bytecode cache) instead of these zips of the same version.\n"
            f'case "$1:$2:$3" in\n'
            f"  {'|'.join(modules)})\n"
            "    set -f; kept=; IFS=:\n"
            "    for entry in $PYTHONPATH; do\n"
            f"      case $entry in {dropped}) ;; *) kept=${{kept:+$kept:}}$entry;; esac\n"
            "    done\n"
            "    unset IFS; set +f\n"
            "    PYTHONPATH=$kept; export PYTHONPATH;;\n"
            "esac\n"
            f'exec {shlex.quote(python)} "$@"\n')


def _spark_home() -> str:
    """The SPARK_HOME the JVM gets: the variable, else what pyspark's launcher and ``find-spark-home`` compute."""
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


def _zip_version(path: str, member: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            return _version_of(archive.read(member).decode())
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


def _version_of(source: str) -> str | None:
    """``__version__`` of a ``version.py`` (``__version__: str = "4.2.0"`` or ``__version__ = '0.10.9.9'``)."""
    for line in source.splitlines():
        if line.startswith("__version__"):
            return line.partition("=")[2].strip().strip("'\"")
    return None


def _installed(name: str) -> tuple[str, str] | None:
    """(version, file) of the package ``name`` as this Python imports it outside a zip, else None."""
    try:
        module = __import__(name)
        version = __import__(f"{name}.version", fromlist=["__version__"]).__version__
    except (ImportError, AttributeError):
        return None
    origin = getattr(module, "__file__", None) or ""
    return (version, origin) if os.path.isfile(origin) else None


def _zips_to_drop(spark_home: str) -> list[str]:
    """The entries Spark puts on its Python processes' path (``PythonUtils.sparkPythonPath``: the strings
    ``$SPARK_HOME/python/lib/pyspark.zip`` and ``.../py4j-<v>-src.zip``) that the installed packages replace at
    the very same version; empty when pyspark's do not match."""
    lib = f"{spark_home}/python/lib"
    installed = _installed("pyspark")
    zipped = _zip_version(f"{lib}/pyspark.zip", "pyspark/version.py")
    if installed is None or zipped != installed[0]:
        log.debug("Spark's Python processes keep %s/pyspark.zip: its pyspark is %s, this Python's %s", lib, zipped,
                  installed)
        return []
    drop = [f"{lib}/pyspark.zip"]
    py4j = _installed("py4j")
    try:
        py4j_zips = [name for name in os.listdir(lib) if name.startswith("py4j-") and name.endswith("-src.zip")]
    except OSError:
        py4j_zips = []
    drop += [f"{lib}/{name}" for name in py4j_zips
             if py4j is not None and name == f"py4j-{py4j[0]}-src.zip"]
    return drop


def _cache_dir() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spark_connect_bridge",
                        "python")


def _private_dir(path: str) -> bool:
    """Whether ``path`` is (made) a directory only this user can write to: Spark will execute what is in it."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def python_launcher(python: str | None = None) -> str | None:
    """The path of a launcher for ``python`` (default: this one) where the installed pyspark is the zip's version,
    written once under ``~/.cache/spark_connect_bridge/python`` (``$XDG_CACHE_HOME``), else None: not POSIX, a
    different pyspark, no private cache directory."""
    if os.name != "posix":
        return None
    python = python or sys.executable
    drop = _zips_to_drop(_spark_home())
    if not drop:
        return None
    text = launcher_script(python, drop)
    directory = _cache_dir()
    if not _private_dir(directory):
        log.debug("no private directory %s for the Python launcher", directory)
        return None
    path = os.path.join(directory, f"launcher-{hashlib.sha256(text.encode()).hexdigest()[:16]}")
    try:
        with open(path) as existing:
            if existing.read() == text:
                return path
    except OSError:
        pass  # not written yet
    try:
        with tempfile.NamedTemporaryFile("w", dir=directory, delete=False) as out:
            out.write(text)
        os.chmod(out.name, 0o700)
        os.replace(out.name, path)
    except OSError as e:
        log.debug("could not write the Python launcher %s: %s", path, e)
        return None
    return path


def _submit_master(arguments: str) -> str | None:
    words = shlex.split(arguments)
    for i, word in enumerate(words):
        if word == "--master" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--master="):
            return word.partition("=")[2]
    return None


def _defaults_master(spark_home: str) -> str | None:
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf")
    try:
        with open(os.path.join(conf_dir, "spark-defaults.conf")) as defaults:
            for line in defaults:
                key, _, value = line.strip().partition(" ")
                if key == "spark.master":
                    return value.strip()
    except OSError:
        pass  # no spark-defaults.conf
    return None


def _master(options: Mapping[str, Any]) -> str:
    """The master a session built with ``options`` gets: its own, spark-submit's arguments of pyspark's launcher
    (``PYSPARK_SUBMIT_ARGS``), ``spark-defaults.conf``, else Spark's default ``local[*]``."""
    return str(options.get("spark.master") or _submit_master(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
               or _defaults_master(_spark_home()) or "local[*]")


def with_python_launcher(builder: Any) -> Any:
    """``builder`` unchanged, with this process's ``PYSPARK_PYTHON`` set to :func:`python_launcher` for the Spark
    session it will start, where safe (see the module's doc); else to this Python, as before, where unset.

    Call it before ``getOrCreate()`` starts the JVM (a running JVM keeps the Python it has)."""
    options = getattr(builder, "_options", {})
    chosen = [key for key in _ENV_KEYS if os.environ.get(key)] + [key for key in _CONF_KEYS if options.get(key)]
    launcher = None
    if chosen:
        log.debug("Spark's Python left as set (%s)", ", ".join(chosen))
    elif _master(options).startswith("local"):
        launcher = python_launcher()
    os.environ.setdefault("PYSPARK_PYTHON", launcher or sys.executable)
    return builder
