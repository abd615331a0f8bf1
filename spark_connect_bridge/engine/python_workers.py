"""Which Python Spark's workers run, and whether it can import this package.

Spark starts its Python workers (which run every Python data source, UDF and ``foreachBatch``) with
``PYSPARK_PYTHON`` as it was when the SparkContext started, else ``python3`` from ``PATH``: not necessarily the
Python of the program that made the session. A virtual environment that is used without being activated
(``.venv/bin/python job.py``) leaves ``python3`` pointing at the system's Python, which does not have the
package; Spark then fails deep inside a worker with ``PYTHON_DATA_SOURCE_ERROR ... ModuleNotFoundError``.
The Python data sources Spark discovers itself (``format("kconnect")`` with no register call) run the JVM's
``PYSPARK_DRIVER_PYTHON`` instead where it is set (Spark's ``PythonUtils.createPythonFunction``).
:func:`check_python_workers` checks both before any data moves and says what to do.

>>> from spark_connect_bridge.engine.python_workers import check_python_workers
>>> check_python_workers(spark)                                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from typing import Any

from ..errors import ConnectError

__all__ = ["WorkerPythonError", "check_python_workers"]

log = logging.getLogger(__name__)

# What a worker imports to run the "kconnect" source: the package, the discovery shim, and Arrow.
REQUIRED_MODULES = ("spark_connect_bridge", "pyspark_kconnect", "pyarrow")

_PROBE = ("import importlib.util, json, sys\n"
          "def origin(name):\n"
          "    try:\n"
          "        spec = importlib.util.find_spec(name)\n"
          "    except (ImportError, ValueError):\n"
          "        return None\n"
          "    return spec.origin if spec is not None else None\n"
          "print(json.dumps({'executable': sys.executable,\n"
          "                  'modules': {name: origin(name) for name in sys.argv[1:]}}))\n")

# (application id, worker Python) -> checked; a session is checked once.
_checked: set[tuple[str, str]] = set()


class WorkerPythonError(ConnectError):
    """Spark's Python workers run an interpreter that cannot import spark_connect_bridge."""


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _hint(worker_python: str, variable: str = "PYSPARK_PYTHON") -> str:
    driver = sys.executable
    if variable != "PYSPARK_PYTHON":
        where = f"{variable}, which Spark runs for the Python data sources it finds itself"
    elif os.environ.get("PYSPARK_PYTHON"):
        where = "PYSPARK_PYTHON"
    else:
        where = "'python3' from PATH, because PYSPARK_PYTHON is not set"
    activate = (f"Activate the virtual environment before starting Python (source {os.path.dirname(driver)}/activate), "
                "or set" if sys.prefix != sys.base_prefix else "Set")
    return (f"Spark's Python workers run {worker_python!r} ({where}), while this program runs {driver!r}; "
            f"there format(\"kconnect\") fails with DATA_SOURCE_NOT_FOUND. {activate} {variable}={driver} "
            f"before the SparkSession is created (spark-submit: PYSPARK_PYTHON={driver} spark-submit ..., which "
            f"also finds SPARK_HOME from a venv that is not activated, or --conf spark.pyspark.python={driver}), or "
            f"install spark_connect_bridge into {worker_python!r}.")


def check_python_workers(spark: Any) -> None:
    """Raise :class:`WorkerPythonError` when Spark's local Python workers cannot import this package.

    Checked once per Spark application, on a local master only (``local``, ``local[N]``, ``local-cluster``):
    there the workers run on this machine with this environment. On a cluster the executors' Python must have
    the package too (a cluster library, ``--py-files`` with the wheel, or the same venv on every node); that
    cannot be seen from the driver without running a job. A Spark Connect session is not checked: its workers
    belong to the server.
    """
    try:
        context = spark.sparkContext
    except AttributeError:  # a Spark Connect session has no SparkContext (PySparkAttributeError)
        return
    if not _is_local(context.master):
        return
    for worker_python, variable in _worker_pythons(context):
        _check(context.applicationId, worker_python, variable)


def _worker_pythons(context: Any) -> list[tuple[str, str]]:
    """The Pythons Spark's local workers run, each with the variable it comes from: the SparkContext's
    ``pythonExec`` (``PYSPARK_PYTHON``: UDFs and registered data sources), and for the data sources Spark discovers
    itself (``format("kconnect")`` without a register call: ``PythonUtils.createPythonFunction``) the JVM's
    ``PYSPARK_DRIVER_PYTHON`` where it is set, which Spark runs instead."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]  # py4j ships no type information

    pythons = [(context.pythonExec, "PYSPARK_PYTHON")]
    try:
        driver_python = context._jvm.System.getenv("PYSPARK_DRIVER_PYTHON")
    except (AttributeError, Py4JError):  # no JVM view (a stopped context)
        driver_python = None
    if driver_python and driver_python != context.pythonExec:
        pythons.append((driver_python, "PYSPARK_DRIVER_PYTHON"))
    return pythons


def _check(application_id: str, worker_python: str, variable: str) -> None:
    key = (application_id, worker_python)
    if key in _checked:
        return
    resolved = shutil.which(worker_python)
    if resolved is None:
        raise WorkerPythonError(f"Spark's Python workers cannot start: {worker_python!r} is not an executable on "
                                f"PATH. {_hint(worker_python, variable)}")
    try:
        # Same interpreter, environment and working directory as the workers (the JVM inherited them from this
        # process; with PYTHONSAFEPATH, set by our session builders, neither imports from its working directory).
        # A launcher of jvm.python_launcher passes `-c` through to the Python it launches.
        run = subprocess.run([resolved, "-c", _PROBE, *REQUIRED_MODULES], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ), check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WorkerPythonError(f"Spark's Python workers cannot start: running {worker_python!r} failed ({e}). "
                                f"{_hint(worker_python, variable)}") from e
    if run.returncode != 0:
        raise WorkerPythonError(f"Spark's Python workers cannot start: {worker_python!r} exited with "
                                f"{run.returncode}: {run.stderr.strip()[-500:]} {_hint(worker_python, variable)}")
    found = json.loads(run.stdout.strip().splitlines()[-1])
    missing = [name for name, origin in found["modules"].items() if origin is None]
    if missing:
        raise WorkerPythonError(f"Spark's Python workers cannot import {', '.join(missing)}: they would fail with "
                                f"ModuleNotFoundError inside PYTHON_DATA_SOURCE_ERROR. "
                                f"{_hint(found['executable'], variable)}")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, above engine/
    there = os.path.dirname(found["modules"]["spark_connect_bridge"])
    if os.path.realpath(there) != os.path.realpath(here):
        log.warning("Spark's Python workers (%s) import spark_connect_bridge from %s, this program from %s: "
                    "two copies, possibly of different versions", found["executable"], there, here)
    _checked.add(key)
