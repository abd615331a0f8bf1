"""register() and the pipeline functions say which Python Spark's workers run when it cannot import the package."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

import spark_connect_bridge as scb
from spark_connect_bridge.engine.python_workers import check_python_workers


@pytest.fixture
def system_python(spark, monkeypatch, tmp_path):
    """Spark's workers run the base interpreter of this venv (a venv used without activating it), from a directory
    that is not the checkout (without PYTHONSAFEPATH a worker's Python would also import from its working directory)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    python = os.path.realpath(sys._base_executable)
    monkeypatch.setattr(spark.sparkContext, "pythonExec", python)
    return python


def test_register_explains_workers_that_cannot_import_the_package(spark, system_python):
    with pytest.raises(scb.WorkerPythonError) as raised:
        scb.register(spark)
    message = str(raised.value)
    assert "cannot import spark_connect_bridge" in message
    assert f"Spark's Python workers run {system_python!r} ('python3' from PATH, because PYSPARK_PYTHON is not set)" \
        in message
    assert f"set PYSPARK_PYTHON={sys.executable}" in message
    assert f"source {os.path.dirname(sys.executable)}/activate" in message
    assert 'format("kconnect") fails with DATA_SOURCE_NOT_FOUND' in message
    assert f"PYSPARK_PYTHON={sys.executable} spark-submit" in message


def test_read_stream_explains_it_before_spark_fails_in_a_worker(spark, system_python, tmp_path):
    with pytest.raises(scb.WorkerPythonError, match="cannot import spark_connect_bridge"):
        scb.read_stream(spark, {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"),
                                "topic": "lines"})


def test_a_worker_python_that_is_not_on_path_is_named(spark, monkeypatch):
    monkeypatch.setattr(spark.sparkContext, "pythonExec", "python3-that-does-not-exist")
    with pytest.raises(scb.WorkerPythonError, match="'python3-that-does-not-exist' is not an executable on PATH"):
        check_python_workers(spark)


def test_the_jvms_driver_python_is_checked_too(spark, monkeypatch):
    """Spark runs the Python data sources it discovers itself (format("kconnect") without register) with the JVM's
    PYSPARK_DRIVER_PYTHON where set, not pythonExec: a driver Python without the package is named as such."""
    base = os.path.realpath(sys._base_executable)  # no spark_connect_bridge there
    jvm = types.SimpleNamespace(System=types.SimpleNamespace(
        getenv=lambda name: base if name == "PYSPARK_DRIVER_PYTHON" else None))
    monkeypatch.setattr(spark.sparkContext, "_jvm", jvm)
    with pytest.raises(scb.WorkerPythonError) as raised:
        check_python_workers(spark)
    assert f"Spark's Python workers run {base!r} (PYSPARK_DRIVER_PYTHON, which Spark runs for the Python data " \
        "sources it finds itself)" in str(raised.value)
    assert f"set PYSPARK_DRIVER_PYTHON={sys.executable}" in str(raised.value)


def test_workers_running_this_python_pass(spark):
    # tests/conftest.py sets PYSPARK_PYTHON: this Python, or the launcher of jvm/python_launcher.py that runs it
    assert spark.sparkContext.pythonExec == os.environ["PYSPARK_PYTHON"]
    check_python_workers(spark)
    scb.register(spark)


def test_spark_submit_of_a_venv_that_is_not_activated(tmp_path):
    """docs/getting-started.md: `.venv/bin/spark-submit job.py` from a shell whose python3 is not the venv's fails
    with Spark's `Could not find valid SPARK_HOME`; with PYSPARK_PYTHON set to the venv's Python, as our message
    and the page say, the same command runs a job that reads format("kconnect")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(os.path.realpath(sys._base_executable))  # the system's python3, no pyspark
    job = tmp_path / "job.py"
    job.write_text("from pyspark.sql import SparkSession\n"
                   "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
                   "df = spark.read.format('kconnect').options(**{'connector.class': 'DatagenConnector', "
                   "'kafka.topic': 'orders', 'quickstart': 'orders', 'iterations': '5', 'max.interval': '0'}).load()\n"
                   "print('orders:', df.count())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
                                                            "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", SPARK_LOCAL_IP="127.0.0.1")
    submit = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), str(job)]
    failed = subprocess.run(submit, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert failed.returncode != 0 and "Could not find valid SPARK_HOME" in failed.stdout + failed.stderr
    ran = subprocess.run(submit, env={**env, "PYSPARK_PYTHON": sys.executable}, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "orders: 5" in ran.stdout
