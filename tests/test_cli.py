"""The CLI's own messages, as a user meets them: rates of small batches, an empty worker, the JVM module's help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spark_connect_bridge.cli import _rate, main
from tests.runtime.worker_helpers import start_worker  # noqa: F401 - a fixture of the worker test below


def test_rate_of_a_small_batch_keeps_a_decimal():
    assert _rate(3, 10.0) == "0.3 records/s"
    assert _rate(0, 2.0) == "0 records/s"
    assert _rate(12_345, 1.0) == "12,345 records/s"


def test_jvm_module_help_is_its_usage_not_a_traceback():
    run = subprocess.run([sys.executable, "-m", "spark_connect_bridge.jvm", "--help"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout.startswith("usage: python -m spark_connect_bridge.jvm") and "kafka-broker" in run.stdout


def test_docs_module_help_is_its_usage_not_a_traceback(tmp_path):
    run = subprocess.run([sys.executable, "-m", "spark_connect_bridge.docs", "--help"], capture_output=True,
                         text=True, timeout=120, check=False, cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout.startswith("usage: python -m spark_connect_bridge.docs") and "docs/reference" in run.stdout
    assert list(tmp_path.iterdir()) == []  # no directory called --help


def test_make_demo_installs_what_the_demo_needs_and_make_test_the_dev_extra(tmp_path):
    """make demo (on a machine where nothing is installed yet): the package with its delta extra, not the 1.4 GB
    dev extra; make test still installs dev. (The demo itself runs in tests/test_readme.py.)"""
    root = Path(__file__).resolve().parent.parent

    def plan(target: str) -> str:
        run = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=root, capture_output=True,
                             text=True, timeout=60, check=True)
        return run.stdout

    demo = plan("demo")
    assert "pip install -q -c constraints.txt -e '.[delta]'" in demo and "[dev]" not in demo
    assert "kconnect run conf/demo/datagen-orders.properties" in demo
    assert "-e '.[dev]'" in plan("test")


def test_connectors_list_of_a_worker_without_connectors_says_so(start_worker, capsys):  # noqa: F811
    worker, _api = start_worker()
    assert main(["connectors", "list", "--url", worker.url]) == 0
    assert capsys.readouterr().out == f"no connectors on the worker at {worker.url}\n"
