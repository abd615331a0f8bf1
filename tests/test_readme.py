"""The examples of the README and of every page of the docs site (``docs/**/*.md``) run as written, and the site's
generated reference pages match the config declarations.

The pages are read in order (the README, then ``docs/`` by path); a block that appears verbatim on several pages (the
README's first example is the getting-started page's) runs once. Python blocks run in order in one namespace, with
the test run's ``spark``, from the repo root (relative paths in the examples resolve against the Spark JVM's working
directory). A block preceded by ``<!-- readme-test: postgres ... -->`` needs a PostgreSQL server: it runs in its own
test, with ``debezium_config`` being ``conf/postgres-cdc.properties`` pointed at a throwaway server (host and port are
the only change); ``jvm`` and ``classic`` blocks make sessions and run in their own tests. Shell blocks run
``kconnect`` in a temporary directory that holds the checkout's ``conf/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from spark_connect_bridge.config import load_config_file
from spark_connect_bridge.core import plugins
from spark_connect_bridge.docs import REFERENCE_DIR, reference_pages
from tests.support.postgres import PostgresCluster

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
KCONNECT = str(Path(sys.executable).with_name("kconnect"))
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<needs>[\w-]+)[^\n]*-->\n)?```(?P<lang>\w+)\n(?P<code>.*?)```", re.S)
# What the examples write in the repo root: removed before and after the test.
EXAMPLE_OUTPUTS = ["payments.jsonl", "payments.txt", "payments.txt.kconnect", "checkpoints/payments",
                   "checkpoints/orders-now", "work/topics/dlq-payments", "checkpoints/shop-delta",
                   "work/delta/shop.public.orders", "work/delta/shop.public.customers",
                   "work/iceberg"]
# What they write that a developer may also have made: removed after the test only if the test made it.
SHARED_OUTPUTS = ["test.txt", "test.sink.txt", "test.sink.txt.kconnect", "checkpoints", "work/topics", "work/delta",
                  "work"]


def _pages() -> list[Path]:
    """The README, then every Markdown page of the docs site, by path."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _located_blocks(lang: str, needs: str | None = None) -> list[tuple[str, str]]:
    """(page, code) of every ``lang`` block marked ``needs`` (None: unmarked), each distinct block once."""
    found: dict[str, str] = {}
    for page in _pages():
        for m in BLOCK.finditer(page.read_text()):
            if m["lang"] == lang and m["needs"] == needs:
                found.setdefault(m["code"], str(page.relative_to(ROOT)))
    return [(page, code) for code, page in found.items()]


def _blocks(lang: str, needs: str | None = None) -> list[str]:
    return [code for _, code in _located_blocks(lang, needs)]


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


@pytest.fixture
def in_repo_root():
    before = os.getcwd()
    os.chdir(ROOT)
    for name in EXAMPLE_OUTPUTS:
        _remove(ROOT / name)
    existing = {name for name in SHARED_OUTPUTS if (ROOT / name).exists()}
    yield
    for name in EXAMPLE_OUTPUTS:
        _remove(ROOT / name)
    for name in SHARED_OUTPUTS:
        if name not in existing:
            _remove(ROOT / name)
    os.chdir(before)


def test_readme_examples_run(spark, in_repo_root):
    blocks = _located_blocks("python")
    assert len(blocks) >= 6
    namespace = {"spark": spark}
    for page, block in blocks:
        exec(compile(block, page, "exec"), namespace)


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _debezium_config(pg) -> dict:
    """conf/postgres-cdc.properties, pointed at ``pg`` (host and port are the only change)."""
    config = load_config_file(str(ROOT / "conf" / "postgres-cdc.properties"))
    config.update({"database.hostname": "127.0.0.1", "database.port": str(pg.port)})
    return config


def test_readme_cdc_example_runs(spark, in_repo_root, pg):
    """The CDC blocks, in order in one namespace: the Delta mirror (snapshot, then changes applied), then the
    memory table of public.orders, which snapshots the table as the first block left it."""
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, product text NOT NULL, qty int)")
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, email text, vip boolean)")
        conn.execute("INSERT INTO orders VALUES (1, 'pen', 2), (2, 'ink', NULL), (3, 'pad', 7)")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com', true)")
    blocks = _located_blocks("python", needs="postgres")
    assert len(blocks) == 2
    namespace = {"spark": spark, "debezium_config": _debezium_config(pg)}
    try:
        for page, block in blocks:
            exec(compile(block, page, "exec"), namespace)
        now = [(1, "pen", 2), (2, "ink", 5), (4, "nib", 1)]
        assert namespace["sync_orders"]() == now  # nothing new: the mirror stays as it is
        mirror = spark.table("orders_now")
        assert mirror.columns == ["id", "product", "qty"]
        assert sorted(tuple(r) for r in mirror.collect()) == now
    finally:
        spark.catalog.dropTempView("orders_now")


def test_reference_headings_are_the_names_plugins_list_shows():
    headings = [heading for name in ("connectors.md", "transforms.md", "predicates.md", "converters.md")
                for heading in re.findall(r"^## (\S+) \((\w+)\)$", (ROOT / REFERENCE_DIR / name).read_text(),
                                          flags=re.M)]
    assert headings == [(row["class"], row["type"]) for row in plugins.describe_all()]


def test_generated_reference_is_current():
    for name, text in reference_pages().items():
        assert (ROOT / REFERENCE_DIR / name).read_text() == text, f"{name}: run python -m spark_connect_bridge.docs"


def test_docs_do_not_point_at_documents_a_user_cannot_read():
    for page in _pages():
        assert "issue notes" not in page.read_text().lower(), page


def test_readme_is_a_front_page_whose_example_is_the_getting_started_one():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    assert "(docs/index.md)" in text and "mkdocs serve" in text
    [example] = [m["code"] for m in BLOCK.finditer(text) if m["lang"] == "python"]
    assert f"```python\n{example}```" in (DOCS / "getting-started.md").read_text()


# -- shell examples ---------------------------------------------------------------------------------------------

def _command_lines(lang: str = "bash") -> list[str]:
    """Every command of the pages' shell blocks, without its trailing comment."""
    lines = []
    for block in _blocks(lang):
        for line in block.splitlines():
            command = re.split(r"\s#(?:\s|$)", line, maxsplit=1)[0].strip()
            if command:
                lines.append(command)
    return lines


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A directory like the checkout's root: conf/ and Kafka's example input file test.txt."""
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    (tmp_path / "test.txt").write_text("hello\nkafka connect\n")
    return tmp_path


def _kconnect_env() -> dict:
    env = dict(os.environ)
    env.pop("PYSPARK_PYTHON", None)  # kconnect sets it to its own Python
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)  # a test session over Spark Connect: the user's kconnect is a classic Spark app
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _kconnect(command: str, cwd: Path, timeout: float = 300) -> str:
    assert command.startswith("kconnect "), command
    run = subprocess.run([KCONNECT, *command.split()[1:]], cwd=cwd, env=_kconnect_env(), capture_output=True,
                         text=True, timeout=timeout, check=False)
    assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"
    return run.stdout


def test_readme_plugin_commands_run(user_dir):
    commands = [c for c in _command_lines() if c.startswith("kconnect plugins")]
    assert commands == ["kconnect plugins list", "kconnect plugins describe FileStreamSource",
                        "kconnect plugins validate conf/file-source.properties"]
    listed = _kconnect(commands[0], user_dir).splitlines()
    assert [line.split() for line in listed] == [[row["class"], row["type"]] for row in plugins.describe_all()]
    described = _kconnect(commands[1], user_dir)
    assert described.startswith("### org.apache.kafka.connect.file.FileStreamSourceConnector (source)\n")
    assert "| `file` | string | *required* |" in described and "| `topic` | string | *required* |" in described
    assert _kconnect(commands[2], user_dir).strip() == \
        "conf/file-source.properties: valid source connector config (FileStreamSourceConnector), as kconnect run " \
        "runs it"


@pytest.mark.slow
def test_readme_demo_command_fills_the_topic_store(user_dir):
    [command] = [c for c in _command_lines() if c.startswith("kconnect run conf/demo/")]
    out = _kconnect(command, user_dir, timeout=600)
    records = 2 * int(load_config_file(str(ROOT / "conf/demo/datagen-orders.properties"))["iterations"])
    assert f"done: {records:,} records" in out, out
    assert f"topic orders: {records:,} records in {user_dir / 'work' / 'topics' / 'orders'}" in out, out


def test_readme_file_copy_command_runs_until_stopped(user_dir):
    [command] = [c for c in _command_lines() if c.startswith("kconnect run conf/file-source.properties")]
    assert command == "kconnect run conf/file-source.properties conf/file-sink.properties"
    proc = subprocess.Popen([KCONNECT, *command.split()[1:]], cwd=user_dir, env=_kconnect_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sink = user_dir / "test.sink.txt"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (sink.exists() and sink.read_text() == "hello\nkafka connect\n"):
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        with open(user_dir / "test.txt", "a") as f:  # still running: a new line is copied too
            f.write("on spark\n")
        while time.monotonic() < deadline and sink.read_text() != "hello\nkafka connect\non spark\n":
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        assert sink.read_text() == "hello\nkafka connect\non spark\n"
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the queries stop, the command prints its summary
        out, _ = proc.communicate(timeout=120)
    assert "stopping ..." in out and "done: 3 records" in out, out
    # Run again: the checkpoints are at the end of the file, and the command says so and how to start afresh.
    out = _kconnect(command + " --once", user_dir)
    assert "done: 0 records" in out and "nothing new: the checkpoints under" in out and "--checkpoint-dir" in out, out


def test_readme_worker_block_runs_as_written(user_dir):
    """The worker section's commands, in order, as a user types them: `kconnect standalone` with conf/'s three
    files (REST on 127.0.0.1:8083, as conf/worker.properties says), then curl and the kconnect client."""
    block = next(b for b in _blocks("bash") if b.lstrip().startswith("kconnect standalone conf/worker.properties"))
    commands = [re.split(r"\s#(?:\s|$)", line, maxsplit=1)[0].strip() for line in
                block.replace("\\\n", " ").splitlines()]
    commands = [c for c in commands if c]
    start, *rest = commands
    worker = subprocess.Popen([KCONNECT, *start.split()[1:]], cwd=user_dir, env=_kconnect_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sink = user_dir / "test.sink.txt"
    outputs: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (sink.exists() and sink.read_text() == "hello\nkafka connect\n"):
            assert worker.poll() is None, worker.stdout.read()
            time.sleep(0.5)
        assert sink.read_text() == "hello\nkafka connect\n"
        for command in rest:
            if command.startswith("kconnect worker"):
                break  # the restart line: run after this worker stops, below
            shell_env = {**_kconnect_env(), "PATH": f"{Path(KCONNECT).parent}{os.pathsep}{os.environ['PATH']}"}
            run = subprocess.run(command, shell=True, cwd=user_dir, env=shell_env, capture_output=True,
                                 text=True, timeout=120)  # as in a shell with the venv activated
            assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"
            outputs[command] = run.stdout
        # The offsets were rewound to 0 while the source was stopped: after resume the file is copied again.
        while time.monotonic() < deadline and sink.read_text().count("hello") < 2:
            time.sleep(0.5)
        assert sink.read_text() == "hello\nkafka connect\n" * 2
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=120)
    status = json.loads(outputs["curl -s 'localhost:8083/connectors?expand=status'"])
    assert set(status) == {"local-file-source", "local-file-sink"}
    assert {s["status"]["connector"]["state"] for s in status.values()} == {"RUNNING"}
    assert "local-file-source" in outputs["kconnect connectors list"]
    assert '"position"' in outputs["kconnect offsets get local-file-source"]
    # Restarted later with only the worker config, the connectors come back.
    restart = next(c for c in commands if c.startswith("kconnect worker"))
    again = subprocess.Popen([KCONNECT, *restart.split()[1:]], cwd=user_dir, env=_kconnect_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        names: list = []
        while time.monotonic() < deadline and sorted(names) != ["local-file-sink", "local-file-source"]:
            assert again.poll() is None, again.stdout.read()
            probe = subprocess.run("curl -s localhost:8083/connectors", shell=True, capture_output=True, text=True)
            names = json.loads(probe.stdout) if probe.stdout.startswith("[") else []
            time.sleep(0.5)
        assert sorted(names) == ["local-file-sink", "local-file-source"]
    finally:
        again.send_signal(signal.SIGINT)
        again.communicate(timeout=120)


def test_readme_classic_session_block_runs(spark):
    """The blocks that make a classic SparkSession in a script: the plain one and the Python launcher's opt-in
    (getOrCreate returns this run's session)."""
    blocks = _located_blocks("python", "classic")
    assert len(blocks) == 2, blocks
    for page, block in blocks:
        namespace: dict = {}
        exec(compile(block, page, "exec"), namespace)
        assert namespace["spark"].range(3).count() == 3
