"""Spark's per-query Python processes run on the installed pyspark, not pyspark.zip, where that is the same version;
everything else Spark starts, and every Python a user chose, is left as Spark makes it."""

from __future__ import annotations

import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import psutil
import pyspark
import pytest

from spark_connect_bridge.jvm import python_launcher as launcher
from tests.support.processes import interrupt
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parents[2]
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


@pytest.fixture
def fake_python(tmp_path) -> str:
    """A "python" that prints its PYTHONPATH, its arguments one a line, then its stdin."""
    path = tmp_path / "python"
    path.write_text('#!/bin/sh\nprintf "%s\\n" "PYTHONPATH=$PYTHONPATH" "$@"\ncat\n')
    path.chmod(0o755)
    return str(path)


def _launch(script: str, args: list[str], pythonpath: str, stdin: str = "") -> list[str]:
    run = subprocess.run([script, *args], input=stdin, capture_output=True, text=True, timeout=30, check=True,
                         env={**os.environ, "PYTHONPATH": pythonpath})
    return run.stdout.splitlines()


@pytest.mark.parametrize(("args", "stripped"), [
    (["-m", RUNNER], True),
    (["-m", "pyspark.daemon", "pyspark.sql.worker.plan_data_source_read"], True),
    (["-m", "pyspark.sql.worker.commit_data_source_write"], True),  # spark.python.use.daemon=false
    (["-m", "pyspark.daemon"], False),  # the task workers' daemon keeps Spark's path
    (["-m", "pyspark.daemon", "pyspark.worker"], False),
    (["-c", "import sys; print('%d.%d' % sys.version_info[:2])"], False),  # Spark's version probe
    (["/spark/bin/find_spark_home.py"], False),
])
def test_launcher_drops_the_zips_only_for_the_per_query_modules(tmp_path, fake_python, args, stripped):
    lib = tmp_path / "spark home" / "python" / "lib"  # a space: quoted in the script
    pyspark_zip, py4j_zip = f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip"
    script = tmp_path / "launcher"
    script.write_text(launcher.launcher_script(fake_python, [pyspark_zip, py4j_zip]))
    script.chmod(0o700)
    # Spark's path: the zips, the jar, the data source's PYTHONPATH (the zips again), the user's entries
    pythonpath = ":".join([pyspark_zip, py4j_zip, "/spark/jars/core.jar", pyspark_zip, py4j_zip, "/user one", "/u2"])
    out = _launch(str(script), args, pythonpath, stdin="from the JVM\n")
    kept = "/spark/jars/core.jar:/user one:/u2" if stripped else pythonpath
    assert out == [f"PYTHONPATH={kept}", *args, "from the JVM"]


def _spark_home(tmp_path: Path, version: str) -> Path:
    """A SPARK_HOME whose pyspark.zip holds pyspark ``version`` and py4j's zip of the installed py4j."""
    import py4j.version

    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as archive:
        archive.writestr("pyspark/version.py", f'__version__: str = "{version}"\n')
    with zipfile.ZipFile(lib / f"py4j-{py4j.version.__version__}-src.zip", "w") as archive:
        archive.writestr("py4j/version.py", f"__version__ = '{py4j.version.__version__}'\n")
    return tmp_path / "spark"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # no spark-defaults.conf


def _builder(**options: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(_options=options)


def test_same_pyspark_version_sets_the_launcher(clean_env, monkeypatch, tmp_path):
    home = _spark_home(tmp_path, pyspark.__version__)
    monkeypatch.setenv("SPARK_HOME", str(home))
    launcher.with_python_launcher(_builder(**{"spark.master": "local[2]"}))
    script = os.environ["PYSPARK_PYTHON"]
    assert script.startswith(str(tmp_path / "cache" / "spark_connect_bridge" / "python" / "launcher-"))
    assert oct(os.stat(script).st_mode & 0o777) == "0o700"
    assert f"{home}/python/lib/pyspark.zip" in Path(script).read_text()
    assert Path(script).read_text().endswith(f'exec {sys.executable} "$@"\n')


def test_a_different_pyspark_in_spark_home_keeps_sparks_zip(clean_env, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_HOME", str(_spark_home(tmp_path, "3.5.7")))
    launcher.with_python_launcher(_builder(**{"spark.master": "local[2]"}))
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert not (tmp_path / "cache").exists()


def test_a_launcher_directory_others_can_write_to_is_not_used(clean_env, monkeypatch, tmp_path):
    # Spark executes the launcher: one that another user could replace would run their code as this user
    monkeypatch.setenv("SPARK_HOME", str(_spark_home(tmp_path, pyspark.__version__)))
    shared = tmp_path / "cache" / "spark_connect_bridge" / "python"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    launcher.with_python_launcher(_builder(**{"spark.master": "local[2]"}))
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize(("env", "options"), [
    ({"PYSPARK_PYTHON": "/opt/python"}, {}),
    ({"PYSPARK_DRIVER_PYTHON": "/opt/python"}, {}),
    ({}, {"spark.pyspark.python": "/opt/python"}),
    ({}, {"spark.pyspark.driver.python": "/opt/python"}),
    ({}, {"spark.master": "spark://10.0.0.1:7077"}),  # executors elsewhere: the launcher is a file of this machine
    ({"PYSPARK_SUBMIT_ARGS": "--master yarn pyspark-shell"}, {}),
])
def test_a_python_the_user_chose_or_a_cluster_gets_no_launcher(clean_env, monkeypatch, tmp_path, env, options):
    monkeypatch.setenv("SPARK_HOME", str(_spark_home(tmp_path, pyspark.__version__)))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    launcher.with_python_launcher(_builder(**options))
    assert os.environ["PYSPARK_PYTHON"] == env.get("PYSPARK_PYTHON", sys.executable)
    assert not (tmp_path / "cache").exists()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _source_runner(pid: int) -> dict[str, str] | None:
    """The environment of the streaming source runner that process ``pid`` (the CLI) started, once it runs."""
    for child in _descendants(pid):
        try:
            if child.cmdline()[1:3] == ["-m", RUNNER]:
                return child.environ()
        except psutil.Error:
            continue  # gone, or not readable yet
    return None


def _daemon_env(process: psutil.Process) -> dict[str, str] | None:
    """The environment of a task workers' daemon (a process that ended or became a zombie meanwhile: None)."""
    try:
        if process.cmdline()[1:] == ["-m", "pyspark.daemon", "pyspark.worker"]:
            return process.environ()
    except psutil.Error:
        pass
    return None


def test_a_kconnect_run_streams_from_the_installed_pyspark(tmp_path):
    """`kconnect run` with Kafka's FileStream configs (config/connect-file-source.properties and
    connect-file-sink.properties, https://github.com/apache/kafka/tree/trunk/config), as a user runs it (no
    PYSPARK_PYTHON): its source runner's path has no pyspark.zip, and every line arrives, in order."""
    lines = ["hello", "kafka connect", "ünïcode ✓"]
    (tmp_path / "test.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    (tmp_path / "connect-file-source.properties").write_text(
        "name=local-file-source\nconnector.class=FileStreamSource\ntasks.max=1\nfile=test.txt\ntopic=connect-test\n")
    (tmp_path / "connect-file-sink.properties").write_text(
        "name=local-file-sink\nconnector.class=FileStreamSink\ntasks.max=1\nfile=test.sink.txt\ntopics=connect-test\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    cli = subprocess.Popen([sys.executable, "-m", "spark_connect_bridge.cli", "run", "connect-file-source.properties",
                            "connect-file-sink.properties", "--master", "local[1]", "--conf", "spark.ui.enabled=false"],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                           stderr=open(tmp_path / "cli.log", "w"))
    try:
        runner_env = until(lambda: _source_runner(cli.pid), what="the streaming source runner", timeout=300,
                           explain=lambda: (tmp_path / "cli.log").read_text()[-3000:])
        entries = runner_env["PYTHONPATH"].split(":")
        assert [e for e in entries if e.endswith(("/pyspark.zip", "-src.zip"))] == []
        assert str(ROOT) in entries  # the user's own entries stay
        until(lambda: (tmp_path / "test.sink.txt").read_text(encoding="utf-8").splitlines() == lines,
              what="the three lines in the sink", timeout=300)
        # the task workers' daemon keeps Spark's path
        daemons = [env for env in map(_daemon_env, _descendants(cli.pid)) if env is not None]
        assert daemons and all("/pyspark.zip" in env["PYTHONPATH"] for env in daemons)
    finally:
        interrupt(cli)
    assert cli.returncode == 0, (tmp_path / "cli.log").read_text()[-3000:]
