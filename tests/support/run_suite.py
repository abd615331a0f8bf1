"""The whole test suite after set-up: pytest over ``tests/`` and, beside it, the compatibility jobs.

``make test`` runs this after ``tests/support/setup_machine.sh``. First the checks (ruff and mypy, both configured in
pyproject.toml); a finding fails the suite, after the tests have run. The main run (pytest in two processes,
``MAIN_RUN``, each with one Spark session) streams its output here. The compatibility jobs
(``tests/compat/run_compat.py``: the contract tests and README examples on the other supported pyspark and through
Spark Connect) run at the same time, in a temporary copy of the checkout so that the README examples of both runs
do not write the same files; their output is kept in a log and printed when both are done. On 2 cores this saves
most of the compatibility jobs' time: much of the main run waits on subprocesses, servers and micro-batch triggers
rather than on the CPU.

Usage: ``.venv/bin/python tests/support/run_suite.py [pytest arguments for the main run]``
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


LINTED = ["spark_connect_bridge", "tests", "bench"]
# The main run in two processes (pytest-xdist), each with its one Spark session and its own servers: most of the run
# waits on servers, subprocesses and micro-batch triggers, not on the CPU. A file runs whole in one process (its
# module fixtures start once); tests/conftest.py keeps the files that share the checkout in one process.
MAIN_RUN = ["-n", "2", "--dist", "loadfile", "--durations", "25"]


def cpu_times() -> tuple[float, float]:
    """(busy, all) jiffies of every CPU since boot, from /proc/stat (zeros where it is missing)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def lint() -> int:
    """ruff over the package, the tests and the benchmarks, then mypy over the package (pyproject.toml)."""
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", *LINTED], cwd=REPO).returncode
    mypy = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO).returncode
    return ruff or mypy


def main(pytest_args: list[str]) -> int:
    started = time.monotonic()
    lint_code = lint()
    print(f"[suite] lint {'ok' if lint_code == 0 else f'exit {lint_code}'}", flush=True)
    with tempfile.TemporaryFile(mode="w+") as compat_log:
        compat = subprocess.Popen([sys.executable, str(REPO / "tests" / "compat" / "run_compat.py"), "--in-copy"],
                                  cwd=REPO, stdout=compat_log, stderr=subprocess.STDOUT)
        busy0, all0 = cpu_times()
        main_code = subprocess.run([sys.executable, "-m", "pytest", *MAIN_RUN, *pytest_args], cwd=REPO).returncode
        main_s = time.monotonic() - started
        busy1, all1 = cpu_times()
        compat_code = compat.wait()
        compat_log.seek(0)
        print("\n========== compatibility jobs (ran beside the main run) ==========", flush=True)
        sys.stdout.write(compat_log.read())
    total_s = time.monotonic() - started
    print(f"[suite] lint {'ok' if lint_code == 0 else f'exit {lint_code}'}; "
          f"main run {main_s:.0f} s ({'ok' if main_code == 0 else f'pytest exit {main_code}'}); "
          f"compatibility jobs {'ok' if compat_code == 0 else f'exit {compat_code}'}; "
          f"both done after {total_s:.0f} s; the machine's CPUs were busy "
          f"{100 * (busy1 - busy0) / max(all1 - all0, 1):.0f}% of the main run", flush=True)
    return lint_code or main_code or compat_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
