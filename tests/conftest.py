"""Shared fixtures: one Spark session per test run (with the project's JVM packages: Delta, spark-avro,
spark-sql-kafka, JDBC drivers, fetched from Maven Central), the run's shared servers, small data builders."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import traceback

import pytest

from spark_connect_bridge.jvm import configure_spark
from spark_connect_bridge.jvm.python_launcher import python_launcher
from tests.compat.connect_server import connect_session, session_mode
from tests.support import servers

# Spark's Python processes run this Python; its per-query ones (streaming source runners, planner daemons) through
# the launcher kconnect's sessions use, on the installed pyspark instead of pyspark.zip where that is the same version
# (jvm/python_launcher.py). Measured on tests/runtime/test_topic_routes.py with bench/cpu_of.py, alternating, load
# 4-6: 47.7 and 51.1 CPU-s without, 40.2 and 41.1 with. Subprocesses the tests start inherit both.
_WORKER_PYTHON = python_launcher() or sys.executable
os.environ.setdefault("PYSPARK_PYTHON", _WORKER_PYTHON)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", _WORKER_PYTHON)
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
# So do the Spark drivers the tests start in subprocesses (workers, kill -9 scenarios, spark-submit of the installed
# wheel, the README's commands): a spark-defaults.conf of the run sets spark.driver.defaultJavaOptions, which Spark
# prepends to whatever extraJavaOptions a driver sets itself. Tests only: a user's SPARK_CONF_DIR is left alone.
# Made by the first process of a run (pytest-xdist's workers inherit it) and removed when that process ends.
_conf_dir: str | None = None
if "SPARK_CONF_DIR" not in os.environ:
    _conf_dir = tempfile.mkdtemp(prefix="kconnect-test-spark-conf-")
    with open(os.path.join(_conf_dir, "spark-defaults.conf"), "w") as _defaults:
        _defaults.write(f"spark.driver.defaultJavaOptions {TEST_JVM_OPTIONS}\n")
    os.environ["SPARK_CONF_DIR"] = _conf_dir
# No Spark JVM of the run writes a class archive (jvm/class_archive.py): the JDK writes none for a class path with a
# non-empty directory, and the run's SPARK_CONF_DIR above holds its spark-defaults.conf. The directory is the run's
# own all the same (removed with it), so that no run ever writes into the user's cache.
_classes_dir: str | None = None
if "KCONNECT_CLASS_ARCHIVE" not in os.environ:
    _classes_dir = tempfile.mkdtemp(prefix="kconnect-test-classes-")
    os.environ["KCONNECT_CLASS_ARCHIVE"] = _classes_dir

# A test past its timeout ends its process (setup.cfg: timeout_method = thread), not just the test: an exception
# raised in the middle of a py4j call (the signal method) left the process's Spark gateway answering every later call
# with the previous reply, and every later test of that process failed. The process first writes the stacks of its
# threads where the run's first process finds them for the test's report (pytest-xdist reports only that the
# process "crashed"), then stops the servers and the processes it started (a CLI worker would keep its port, a
# PostgreSQL its data), and exits; pytest-xdist starts another process for the files it had left.
_timeout_dir: str | None = None
if "KCONNECT_TEST_TIMEOUT_DIR" not in os.environ:
    _timeout_dir = tempfile.mkdtemp(prefix="kconnect-test-timeouts-")
    os.environ["KCONNECT_TEST_TIMEOUT_DIR"] = _timeout_dir


def _timeout_file(nodeid: str) -> str:
    return os.path.join(os.environ["KCONNECT_TEST_TIMEOUT_DIR"], hashlib.sha1(nodeid.encode()).hexdigest() + ".txt")


def _descendants() -> list[int]:
    """The processes below this one, parents before children, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except (OSError, ValueError):
            continue
        if entry.isdigit():
            parents.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _timed_out(item: pytest.Item, settings) -> None:
    import pytest_timeout

    try:
        me = threading.get_ident()
        stacks = [f"Thread {ident}:\n" + "".join(traceback.format_stack(frame)[-12:])
                  for ident, frame in sys._current_frames().items() if ident != me]
        with open(_timeout_file(item.nodeid), "w") as out:
            out.write(f"Timeout after {settings.timeout:g} s; the process's threads then were:\n" + "\n".join(stacks))
        stopping = threading.Thread(target=servers.stop_all, daemon=True)
        stopping.start()
        stopping.join(60)
        for pid in _descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for own in (_conf_dir, _timeout_dir, _classes_dir):  # set when this is the run's only process
            if own is not None:
                shutil.rmtree(own, ignore_errors=True)
    finally:
        pytest_timeout.timeout_timer(item, settings)  # writes the captured output and the stacks, then os._exit(1)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    if settings.method != "thread":
        return None
    timer = threading.Timer(settings.timeout, _timed_out, (item, settings))
    timer.name = f"timeout of {item.nodeid}"
    timer.daemon = True

    def cancel() -> None:
        timer.cancel()
        timer.join()

    item.cancel_timeout = cancel  # pytest-timeout's own pytest_timeout_cancel_timer calls it
    timer.start()
    return True


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """In the run's first process: the report of a test whose process ended says why, where it timed out."""
    try:
        with open(_timeout_file(crashitem)) as f:
            report.longrepr = f"{report.longrepr}\n{f.read()}"
    except OSError:
        pass


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run: classic local[2] with the project's JVM packages, UTC, small
    shuffles; with KCONNECT_TEST_SPARK=connect, a Spark Connect session to a local server with the same confs."""
    if session_mode() == "connect":
        with connect_session({**SPARK_CONF, "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}) as session:
            yield session
        return
    from pyspark.sql import SparkSession

    # object_stores: Hadoop's S3A connector on the class path (not copied: see configure_spark), for the s3a:// tests
    builder = configure_spark(SparkSession.builder.config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS),
                              object_stores=True)
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
# The files (or SERIAL_FILES groups) that take longest, longest first, as the clean-clone run of 2026-11-27 (evening)
# measured them (the per-file totals this conftest prints at the end of a split run). The split run hands them out
# first and the many short files after them, so that it does not end on one long file in one process while the
# other waits (xdist alone orders files by their number of tests, which puts the one-test kill scenarios last).
# The order only moves the run's end; a file missing here just runs later.
LONGEST_FIRST = [
    "checkout root", "tests/connectors/test_delta.py", "tests/differential/test_debezium_postgres.py",
    "tests/connectors/test_postgres_cdc.py", "tests/distributed/test_group.py", "tests/test_corpus.py",
    "tests/test_cluster.py", "tests/runtime/test_standalone_restart.py", "tests/test_conf_examples.py",
    "tests/connectors/test_mysql_cdc.py", "tests/test_notebooks.py",
    "tests/connectors/test_postgres_cdc_incremental.py",
    "tests/differential/test_filestream_smts.py", "tests/differential/test_fuzz_transforms.py",
    "tests/distributed/test_group_kafka.py", "tests/connectors/storage/test_s3_sink.py",
    "tests/connectors/test_jdbc_killed_driver.py", "tests/acceptance/test_worker_http.py", "tests/test_pipelines.py",
    "tests/connectors/test_jdbc_spark.py", "tests/runtime/test_topic_routes.py", "tests/connectors/test_mqtt.py",
    "tests/converters/test_json_schema_converter.py", "tests/connectors/test_iceberg.py",
]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``: each file runs whole in one process (module fixtures such as a Kafka Connect JVM start
    once), the files of :data:`SERIAL_FILES` that share a resource run in the same process, one after another, and
    the :data:`LONGEST_FIRST` files are handed out first."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    rank = {scope: i for i, scope in enumerate(LONGEST_FIRST)}

    class SharedResourceScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SERIAL_FILES.get(path, path)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the work queue is complete when the first unit is handed out
                self.ordered = True
                queue = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(queue)
            super()._assign_work_unit(node)

        def remove_node(self, node) -> str | None:
            """A process that died (a test past its timeout ends its process, ``timeout_method = thread``) gives
            its file back to the queue without the test it died in, which xdist reports failed: xdist alone would
            run that test again in the process that replaces it, and a test that hangs would end process after
            process. Returns that test (None if the process had nothing left to run)."""
            workload = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            for unit in workload.values():
                if pending[0] in unit:
                    unit[pending[0]] = True
            self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return pending[0]

    return SharedResourceScheduling(config, log)


# Seconds of tests per process and per file in a split run (reports carry the process that ran them): how well the
# processes were balanced, and the figures LONGEST_FIRST is ordered by.
_busy: dict[str, float] = {}
_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)
    if node is None:
        return
    process = node.gateway.id
    _busy[process] = _busy.get(process, 0.0) + report.duration
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    servers.stop_all()
    if _conf_dir is not None:
        shutil.rmtree(_conf_dir, ignore_errors=True)
    if _timeout_dir is not None:
        shutil.rmtree(_timeout_dir, ignore_errors=True)
    if _classes_dir is not None:
        shutil.rmtree(_classes_dir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter):
    if servers.start_times:
        terminalreporter.write_line("servers started: " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in servers.start_times.items()))
    if _busy:
        terminalreporter.write_line("seconds of tests per process: " + ", ".join(
            f"{process} {seconds:.0f} s" for process, seconds in sorted(_busy.items())))
        longest = sorted(_file_seconds.items(), key=lambda item: -item[1])[:25]
        terminalreporter.write_line("longest files: " + ", ".join(f"{path} {s:.0f} s" for path, s in longest))
