"""register() and the pipeline functions say which Python Spark's workers run when it cannot import the package."""

from __future__ import annotations

import os
import sys

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


def test_read_stream_explains_it_before_spark_fails_in_a_worker(spark, system_python, tmp_path):
    with pytest.raises(scb.WorkerPythonError, match="cannot import spark_connect_bridge"):
        scb.read_stream(spark, {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"),
                                "topic": "lines"})


def test_a_worker_python_that_is_not_on_path_is_named(spark, monkeypatch):
    monkeypatch.setattr(spark.sparkContext, "pythonExec", "python3-that-does-not-exist")
    with pytest.raises(scb.WorkerPythonError, match="'python3-that-does-not-exist' is not an executable on PATH"):
        check_python_workers(spark)


def test_workers_running_this_python_pass(spark):
    assert spark.sparkContext.pythonExec == sys.executable  # tests/conftest.py sets PYSPARK_PYTHON
    check_python_workers(spark)
    scb.register(spark)
