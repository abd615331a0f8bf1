"""The CLI's own messages, as a user meets them: rates of small batches, an empty worker, the JVM module's help."""

from __future__ import annotations

import subprocess
import sys

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


def test_connectors_list_of_a_worker_without_connectors_says_so(start_worker, capsys):  # noqa: F811
    worker, _api = start_worker()
    assert main(["connectors", "list", "--url", worker.url]) == 0
    assert capsys.readouterr().out == f"no connectors on the worker at {worker.url}\n"
