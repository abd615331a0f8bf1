"""Shared fixtures: one Spark session per test run (with the project's JVM packages: Delta, spark-avro,
spark-sql-kafka, JDBC drivers, fetched from Maven Central), the run's shared servers, small data builders."""

from __future__ import annotations

import os
import sys

import pytest

from spark_connect_bridge.jvm import configure_spark
from tests.support import servers

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local[2], UTC, small shuffles)."""
    from pyspark.sql import SparkSession

    session = (configure_spark(SparkSession.builder).master("local[2]").appName("spark_connect_bridge-tests")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .config("spark.python.worker.reuse", "true")
               # Delta reads a table's log in 50 tasks by default: the tests' tables are small
               .config("spark.databricks.delta.snapshotPartitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_sessionfinish(session, exitstatus):
    servers.stop_all()


def pytest_terminal_summary(terminalreporter):
    if servers.start_times:
        terminalreporter.write_line("servers started: " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in servers.start_times.items()))
