"""The user's path: the built wheel, installed (not editable) into a fresh venv, used from outside the checkout.

A user installs the package from a wheel (PyPI, a Databricks cluster library, ``spark-submit --py-files``) and runs
``kconnect``, ``spark-submit`` and ``format("kconnect")`` from their own directory. Nothing here imports the checkout:
every command runs in the fresh venv, with a clean environment (no PYTHONPATH, no PYSPARK_PYTHON), from a temporary
directory. Dependencies come from PyPI through pip's cache; ``--no-compile`` keeps the install fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from spark_connect_bridge.core import plugins

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spark_connect_bridge", "pyspark_kconnect")
# What a fresh clone does not have: build outputs, caches, local state.
NOT_IN_A_CLONE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "work",
                                        "checkpoints", "spark-warehouse", "metastore_db", ".pytest_cache",
                                        ".ipynb_checkpoints", "test.txt", "test.sink.txt*", "derby.log")
# Variables of the test run that a user's shell does not have.
TEST_ONLY_VARS = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "SPARK_HOME",
                  "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE")
LINES = ["hello", "kafka connect", "ünïcode ✓"]


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return run


def _ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, f"{run.args} exited {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    return run.stdout


def _system_path() -> list[str]:
    """PATH without this test run's venv."""
    ours = os.path.join(sys.prefix, "bin")
    return [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != ours]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY_VARS}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.pathsep.join(_system_path())
    return env


def _activated(venv: Path) -> dict[str, str]:
    """The environment of a shell after `source venv/bin/activate`."""
    env = _clean_env()
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *_system_path()])
    return env


def _line_offsets(lines: list[str]) -> list[int]:
    """FileStreamSource's offsets: the byte position of each line."""
    out, pos = [], 0
    for line in lines:
        out.append(pos)
        pos += len(line.encode()) + 1
    return out


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The checkout as a fresh clone has it (no build/, no egg-info: nothing stale can reach the wheel)."""
    dst = tmp_path_factory.mktemp("clone") / "spark_connect_bridge"
    shutil.copytree(ROOT, dst, ignore=NOT_IN_A_CLONE)
    return dst


@pytest.fixture(scope="module")
def wheel(clone, tmp_path_factory) -> Path:
    """`pip wheel --no-deps` of the clone, as a user or a CI job builds it."""
    dist = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w",
              str(dist), str(clone)], cwd=dist, env=_clean_env()))
    [built] = dist.glob("spark_connect_bridge-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, clone, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed, not editable; its dependencies from PyPI (pip's cache)."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    _ok(_run([sys.executable, "-m", "venv", str(where)], cwd=where.parent, env=_clean_env()))
    _ok(_run([str(where / "bin" / "python"), "-m", "pip", "install", "--no-compile", "--disable-pip-version-check",
              "-q", "-c", str(clone / "constraints.txt"), str(wheel)], cwd=where.parent, env=_clean_env(),
             timeout=600))
    return where


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """The user's own directory, outside the checkout, with Kafka's example input file."""
    (tmp_path / "test.txt").write_text("".join(f"{line}\n" for line in LINES), encoding="utf-8")
    return tmp_path


def test_getting_started_names_the_wheel_that_is_built(wheel):
    assert f"dist/{wheel.name}" in (ROOT / "docs" / "getting-started.md").read_text()


def test_wheel_holds_every_file_of_the_packages(wheel, clone):
    # Every module and every data file (pom.xml, ...) of the checkout's packages, and nothing else of them.
    in_checkout = {p.relative_to(clone).as_posix() for pkg in PACKAGES for p in (clone / pkg).rglob("*")
                   if p.is_file()}
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {n for n in zf.namelist() if n.split("/", 1)[0] in PACKAGES}
    assert sorted(in_checkout - in_wheel) == []
    assert sorted(in_wheel - in_checkout) == []


def test_wheel_metadata_keeps_the_upper_bounds_of_constraints_txt(wheel, clone):
    # The README's wheel install (`pip install dist/...whl`) resolves without constraints.txt: every upper bound
    # it holds for a runtime dependency (pandas<3: pyspark 4.2 prints a FutureWarning under pandas 3) must be in
    # the wheel's own Requires-Dist, or that install gets what the tests never ran.
    with zipfile.ZipFile(wheel) as zf:
        [meta] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        requires = {m[1].lower(): m[2] for m in re.finditer(r"^Requires-Dist: ([A-Za-z0-9_.-]+)\s*\(?([^;\n)]*)",
                                                             zf.read(meta).decode(), re.M)}
    for line in (clone / "constraints.txt").read_text().splitlines():
        bound = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(<[=]?\s*[\w.]+)", line.strip())
        if bound and bound[1].lower() in requires:
            assert bound[2].replace(" ", "") in requires[bound[1].lower()].replace(" ", ""), (line, requires)


def test_installed_package_is_the_wheel_not_the_checkout(venv, user_dir):
    out = _ok(_run(["python", "-c", "import spark_connect_bridge.connectors.file as m, pyspark_kconnect as k; "
                    "print(m.__file__); print(k.__file__)"], cwd=user_dir, env=_activated(venv)))
    site = str(venv / "lib")
    assert [line.startswith(site) for line in out.splitlines()] == [True, True], out


def test_kconnect_plugins_list(venv, user_dir):
    out = _ok(_run(["kconnect", "plugins", "list"], cwd=user_dir, env=_activated(venv)))
    listed = [line.split() for line in out.splitlines()]
    assert listed == [[row["class"], row["type"]] for row in plugins.describe_all()]
    assert ["org.apache.kafka.connect.file.FileStreamSourceConnector", "source"] in listed
    assert ["io.debezium.connector.postgresql.PostgresConnector", "source"] in listed


def test_kconnect_run_of_kafkas_filestream_configs(venv, user_dir):
    # Kafka's config/connect-file-source.properties and connect-file-sink.properties, as shipped.
    (user_dir / "connect-file-source.properties").write_text(
        "name=local-file-source\nconnector.class=FileStreamSource\ntasks.max=1\nfile=test.txt\ntopic=connect-test\n")
    (user_dir / "connect-file-sink.properties").write_text(
        "name=local-file-sink\nconnector.class=FileStreamSink\ntasks.max=1\nfile=test.sink.txt\ntopics=connect-test\n")
    env = {**_activated(venv), "XDG_CACHE_HOME": str(user_dir / "cache")}
    out = _ok(_run(["kconnect", "run", "connect-file-source.properties", "connect-file-sink.properties", "--once",
                    "--master", "local[1]", "--conf", "spark.ui.enabled=false"], cwd=user_dir, env=env))
    assert "done: 3 records" in out, out
    assert (user_dir / "test.sink.txt").read_text(encoding="utf-8").splitlines() == LINES
    # Spark's per-query Python processes ran through the launcher (jvm/python_launcher.py): the wheel's pyspark is
    # the version of its own pyspark.zip
    [launcher] = (user_dir / "cache" / "spark_connect_bridge" / "python").glob("launcher-*")
    assert launcher.read_text().endswith(f'exec {venv}/bin/python "$@"\n')


def test_quick_start_configs_come_with_the_wheel(venv, user_dir):
    # The README's commands read conf/...: from an installed wheel, `kconnect examples --to conf` writes them.
    assert "kconnect examples --to conf" in (ROOT / "README.md").read_text()
    out = _ok(_run(["kconnect", "examples", "--to", "conf"], cwd=user_dir, env=_activated(venv)))
    shipped = sorted(p.relative_to(user_dir / "conf").as_posix() for p in (user_dir / "conf").rglob("*") if p.is_file())
    conf = (ROOT / "conf").resolve()  # a link to spark_connect_bridge/examples
    in_checkout = sorted(p.relative_to(conf).as_posix() for p in conf.rglob("*") if p.is_file())
    assert shipped == in_checkout and f"wrote {len(shipped)} example configs to conf" in out, out
    for name in shipped:
        assert (user_dir / "conf" / name).read_bytes() == (ROOT / "conf" / name).read_bytes(), name
    out = _ok(_run(["kconnect", "plugins", "validate", "conf/file-source.properties"], cwd=user_dir,
                   env=_activated(venv)))
    assert "conf/file-source.properties: valid source connector config" in out, out


SUBMITTED_JOB = """
    import json

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("acceptance").getOrCreate()
    source = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": "test.txt",
              "topic": "connect-test"}
    # No register(): Spark finds the "kconnect" format in the installed pyspark_kconnect module.
    rows = spark.read.format("kconnect").options(**source).load().orderBy("offset").collect()
    print("BATCH " + json.dumps([[r.key, r.value, r.topic, r.partition, r.offset] for r in rows]))
    query = (spark.readStream.format("kconnect").options(**source).load()
             .writeStream.format("kconnect").option("connector.class", "FileStreamSink")
             .option("file", "copy.txt").option("checkpointLocation", "checkpoints/copy")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    orders = (spark.read.format("kconnect")
              .option("connector.class", "io.confluent.kafka.connect.datagen.DatagenConnector")
              .option("kafka.topic", "orders").option("quickstart", "orders").option("iterations", "5")
              .option("max.interval", "0").load())
    print("ORDERS " + json.dumps(sorted(r.value.orderid for r in orders.collect())))
    spark.stop()
"""


def test_spark_submit_uses_format_kconnect_without_register(venv, user_dir):
    (user_dir / "job.py").write_text(textwrap.dedent(SUBMITTED_JOB))
    out = _ok(_run(["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false", "job.py"],
                   cwd=user_dir, env=_activated(venv)))
    lines = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
             if line.startswith(("BATCH ", "ORDERS "))}
    assert lines["BATCH"] == [[None, line, "connect-test", 0, offset]
                              for line, offset in zip(LINES, _line_offsets(LINES))]
    assert (user_dir / "copy.txt").read_text(encoding="utf-8").splitlines() == LINES
    assert lines["ORDERS"] == [0, 1, 2, 3, 4]


NOT_ACTIVATED_JOB = """
    import json

    from pyspark.sql import SparkSession

    import spark_connect_bridge as scb

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    source = {"connector.class": "FileStreamSource", "file": "test.txt", "topic": "connect-test"}
    calls = (("register", lambda: scb.register(spark)), ("read_batch", lambda: scb.read_batch(spark, source)))
    for name, call in calls:
        try:
            call()
            print("RESULT " + json.dumps([name, "no error"]))
        except scb.WorkerPythonError as e:
            print("RESULT " + json.dumps([name, str(e)]))
    spark.stop()
"""


def test_a_venv_used_without_activating_it_is_explained(venv, user_dir, tmp_path_factory):
    # `.venv/bin/python job.py` from a shell where the venv is not active: Spark's workers run `python3` from
    # PATH, the system's Python, which does not have the package.
    system_bin = tmp_path_factory.mktemp("system-bin")
    (system_bin / "python3").symlink_to(os.path.realpath(sys._base_executable))
    env = _clean_env()
    env["PATH"] = os.pathsep.join([str(system_bin), *_system_path()])
    precondition = _run(["python3", "-c", "import spark_connect_bridge"], cwd=user_dir, env=env)
    assert precondition.returncode != 0, "the system's python3 must not have the package for this scenario"
    (user_dir / "job.py").write_text(textwrap.dedent(NOT_ACTIVATED_JOB))
    venv_python = str(venv / "bin" / "python")
    out = _ok(_run([venv_python, "job.py"], cwd=user_dir, env=env))
    results = [json.loads(line[len("RESULT "):]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert [name for name, _ in results] == ["register", "read_batch"]
    for _, message in results:
        assert "cannot import spark_connect_bridge" in message, message
        assert "'python3' from PATH, because PYSPARK_PYTHON is not set" in message, message
        assert f"PYSPARK_PYTHON={venv_python}" in message, message
        assert f"source {venv / 'bin'}/activate" in message, message


EDITABLE_JOB = """
    import json

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    rows = (spark.read.format("kconnect").option("connector.class", "FileStreamSource")
            .option("file", "test.txt").option("topic", "connect-test").load().orderBy("offset").collect())
    print("ROWS " + json.dumps([r.value for r in rows]))
    spark.stop()
"""


def test_editable_install_is_discovered_from_any_directory(venv, clone, user_dir):
    # Last in this module: it turns the venv's install into the README's editable one (`pip install -e`).
    env = _activated(venv)
    _ok(_run(["python", "-m", "pip", "install", "--no-deps", "--no-compile", "--disable-pip-version-check", "-q",
              "-e", str(clone)], cwd=user_dir, env=env))
    where = _ok(_run(["python", "-c", "import pyspark_kconnect; print(pyspark_kconnect.__file__)"], cwd=user_dir,
                     env=env))
    assert where.strip() == str(clone / "pyspark_kconnect" / "__init__.py")
    (user_dir / "job.py").write_text(textwrap.dedent(EDITABLE_JOB))
    out = _ok(_run(["python", "job.py"], cwd=user_dir, env=env))
    [rows] = [json.loads(line[len("ROWS "):]) for line in out.splitlines() if line.startswith("ROWS ")]
    assert rows == LINES
