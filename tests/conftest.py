"""Shared fixtures: one Spark session per test run (with the project's JVM packages: Delta, spark-avro,
spark-sql-kafka, JDBC drivers, fetched from Maven Central), the run's shared servers, small data builders."""

from __future__ import annotations

import os
import sys

import pytest

from spark_connect_bridge.jvm import configure_spark
from tests.compat.connect_server import connect_session, session_mode
from tests.support import servers

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.app.name": "spark_connect_bridge-tests",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.reuse": "true",
    # Delta reads a table's log in 50 tasks by default: the tests' tables are small
    "spark.databricks.delta.snapshotPartitions": "2",
}
# The JVM of the tests' session compiles with C1 only: a test run is hundreds of short queries on tiny data, where
# C2's compilations cost more CPU than they save (measured on tests/transforms: 66 -> 38 CPU-seconds, the same
# tests passing). Serial GC: one heap of a few hundred MB on 2 cores. Tests only; users' sessions are untouched.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run: classic local[2] with the project's JVM packages, UTC, small
    shuffles; with KCONNECT_TEST_SPARK=connect, a Spark Connect session to a local server with the same confs."""
    if session_mode() == "connect":
        with connect_session({**SPARK_CONF, "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}) as session:
            yield session
        return
    from pyspark.sql import SparkSession

    builder = configure_spark(SparkSession.builder.config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS))
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# Test files that must not run at the same time as each other in a run split over processes (pytest-xdist, as
# tests/support/run_suite.py runs the suite): the README's examples write in the checkout's root and serve on port
# 8083, and the installed-wheel test copies the checkout as a fresh clone.
SERIAL_FILES = {"tests/test_readme.py": "checkout root", "tests/acceptance/test_installed_wheel.py": "checkout root"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``: each file runs whole in one process (module fixtures such as a Kafka Connect JVM start
    once), and the files of :data:`SERIAL_FILES` that share a resource run in the same process, one after another."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedResourceScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SERIAL_FILES.get(path, path)

    return SharedResourceScheduling(config, log)


def pytest_sessionfinish(session, exitstatus):
    servers.stop_all()


def pytest_terminal_summary(terminalreporter):
    if servers.start_times:
        terminalreporter.write_line("servers started: " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in servers.start_times.items()))
