"""Run the contract tests and the README examples on the other supported pyspark versions, and through Spark Connect.

The project develops on the pyspark pinned in ``constraints.txt``; ``setup.cfg`` promises the range this script
tests. For each extra version it keeps a venv ``.venv-pyspark-X.Y`` in the repository root with the project
installed editable (so the tests, and Spark's Python workers, import this checkout's code, and a code change
needs no reinstall), ``constraints.txt`` with the pyspark pin replaced, and runs the compatibility selection
there. The venv is rebuilt only when the pyspark version, ``setup.cfg``, ``constraints.txt``, ``pyproject.toml``
or this recipe change (a stamp file holds their hash); pip's cache keeps a rebuild from downloading again.

The ``connect`` job runs the same selection in the calling interpreter's venv with ``KCONNECT_TEST_SPARK=connect``:
the ``spark`` fixture is then a Spark Connect session to a throwaway local server (``tests/compat/connect_server``).

Usage (from anywhere; ``make test-compat`` runs it with the project's venv)::

    .venv/bin/python tests/compat/run_compat.py                 # 4.3 and connect
    .venv/bin/python tests/compat/run_compat.py connect         # some jobs only
    .venv/bin/python tests/compat/run_compat.py 4.3 -- -x       # extra pytest arguments after --
    .venv/bin/python tests/compat/run_compat.py --in-copy       # in a temp copy of the checkout (beside pytest)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The newest release of every supported pyspark minor version other than the constraints.txt pin. pyspark 4.1 is
# not supported: its Python streaming sources have no admission control (ReadLimit) nor Trigger.AvailableNow, so
# trigger(availableNow=True) with max.records.per.trigger runs one bounded batch and stops; the contract's
# multi-batch tests fail there (run `run_compat.py 4.1` after adding it here to see).
PYSPARK_VERSIONS = {"4.3": "4.3.0"}

# What runs on every version and through Spark Connect: the data source, the README examples and the contract
# every connector passes (the Test*Contract classes applied in tests/connectors), plus tests/compat itself.
# tests/compat first: its test of registration needs a server where nothing registered "kconnect" yet.
SELECTION = ["tests/compat", "tests/test_datasource.py", "tests/test_readme.py", "tests/connectors"]
# The worker block and the demo run kconnect subprocesses on the main venv's Spark: the main run covers them.
KEYWORDS = "(contract or test_datasource or test_readme or compat) and not worker_block and not demo_command \
and not classic_session_block"
# The connect job runs in the calling interpreter's venv, the main run's: the README's kconnect commands there are
# classic Spark apps (tests/test_readme.py's _kconnect_env drops the Spark Connect settings) on the same pyspark, so
# they would run exactly what the main run runs; the 4.3 job keeps them (its kconnect runs on pyspark 4.3).
# Of the connectors' contracts, the connect job runs a source and a sink of each kind of offset: file (byte
# positions), datagen (per-task counters), Delta (table versions). What Spark Connect changes is connector-independent:
# the client's DataFrame calls, the plan the server runs, foreachBatch in the server's worker, errors sent back to the
# client. Every connector reaches Spark through the one KConnectDataSource, whose reader and writer run in the
# server's Python workers as in a classic session, so through Connect the other contracts (JDBC, CDC, object stores,
# Iceberg) ran what the main run runs; the 4.3 job keeps them all (there the workers' pyspark differs). Nor does the
# connect job run the contract tests without a session (offsets, replayed ranges): connector objects alone, in the
# main run's venv, as the main run runs them.
CONNECT_CONTRACTS = ("TestFileSourceContract", "TestFileSinkContract", "TestDatagenContract", "TestDeltaSourceContract",
                     "TestDeltaSinkContract")
CONNECT_KEYWORDS = (f"({KEYWORDS}) and not plugin_commands and not file_copy_command and (not contract or "
                    f"({' or '.join(CONNECT_CONTRACTS)})) and not offsets_round_trip and not replayed_range_yields")

# Packages whose pins in constraints.txt belong to the development pyspark (delta-spark's wheel caps pyspark).
REPINNED = {"pyspark", "delta-spark", "delta_spark"}
RECIPE = "1"  # bump when the install steps below change, to rebuild the venvs
# The parent's Spark settings must not leak into a job (each job's conftest sets its own).
DROPPED_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED",
               "SPARK_LOCAL_REMOTE", "KCONNECT_TEST_SPARK", "VIRTUAL_ENV")


def _say(text: str) -> None:
    print(f"[compat] {text}", flush=True)


def _constraints(version: str) -> str:
    kept = []
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name = re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0].lower()
        if name not in REPINNED:
            kept.append(line)
    return "\n".join(kept + [f"pyspark=={version}"]) + "\n"


def _install_key(version: str) -> str:
    digest = hashlib.sha256(f"{RECIPE}\n{version}\n".encode())
    for name in ("setup.cfg", "constraints.txt", "pyproject.toml"):
        digest.update((REPO / name).read_bytes())
    return digest.hexdigest()


def ensure_venv(minor: str, version: str) -> tuple[Path, float]:
    """The venv for ``version`` (created or updated when its inputs changed) and the seconds spent on it."""
    started = time.monotonic()
    venv = REPO / f".venv-pyspark-{minor}"
    python, stamp = venv / "bin" / "python", venv / ".installed"
    key = _install_key(version)
    if stamp.exists() and stamp.read_text() == key and python.exists():
        return python, time.monotonic() - started
    _say(f"installing pyspark {version} and the project into {venv.name}")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    constraints = venv / "constraints.txt"
    constraints.write_text(_constraints(version))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), "-e", ".[dev]",
                    f"pyspark=={version}"], check=True, cwd=REPO)
    installed = subprocess.run([str(python), "-c", "import pyspark; print(pyspark.__version__)"], check=True,
                               capture_output=True, text=True).stdout.strip()
    if installed != version:
        raise SystemExit(f"{venv.name}: pyspark {installed} installed, {version} wanted")
    stamp.write_text(key)
    return python, time.monotonic() - started


# What a copy of the checkout leaves out: VCS data, venvs, build outputs, caches, local state.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", "work",
                                    "checkpoints", "spark-warehouse", "metastore_db", ".pytest_cache", "ckpt")


def run_tests(python: Path, extra_env: dict[str, str], pytest_args: list[str], root: Path,
              keywords: str = KEYWORDS) -> tuple[int, float]:
    """Run the selection (``keywords``) in ``root`` (the checkout or a copy of it) with a temp dir of its own; the
    slowest tests are listed, so that the report shows where a job's time goes."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(extra_env)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kconnect-compat-") as basetemp:
        cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}", *SELECTION,
               "-k", keywords, "--durations", "10", *pytest_args]
        code = subprocess.run(cmd, cwd=root, env=env).returncode
    return code, time.monotonic() - started


def checkout_copy() -> Path:
    """A copy of the checkout's files, so the README examples (which write relative paths from the repo root) can
    run here while the main suite runs the same examples in the checkout itself."""
    root = Path(tempfile.mkdtemp(prefix="kconnect-compat-checkout-"))
    shutil.copytree(REPO, root / REPO.name, ignore=NOT_COPIED)
    return root / REPO.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jobs", nargs="*", metavar="JOB",
                        help=f"pyspark minor versions ({', '.join(PYSPARK_VERSIONS)}) and/or 'connect'; default: all")
    parser.add_argument("--install-only", action="store_true", help="create or update the venvs, run nothing")
    parser.add_argument("--in-copy", action="store_true",
                        help="run the tests in a temporary copy of the checkout (to run beside the main suite)")
    argv = sys.argv[1:] if argv is None else argv
    # After "--" every argument is pytest's (argparse would take them as jobs: `4.3 -- -x` failed as job '-x').
    after = argv.index("--") if "--" in argv else len(argv)
    args, pytest_args = parser.parse_known_args(argv[:after])
    pytest_args += argv[after + 1:]
    jobs = args.jobs or [*PYSPARK_VERSIONS, "connect"]
    unknown = [j for j in jobs if j not in PYSPARK_VERSIONS and j != "connect"]
    if unknown:
        parser.error(f"unknown job(s) {unknown}: use {', '.join(PYSPARK_VERSIONS)} or connect")

    root = checkout_copy() if args.in_copy and not args.install_only else REPO
    results: list[tuple[str, float, float, int]] = []
    for job in jobs:
        if job == "connect":
            python, install_s = Path(sys.executable), 0.0
            label, env = f"Spark Connect (pyspark of {Path(sys.prefix).name})", {"KCONNECT_TEST_SPARK": "connect"}
            keywords = CONNECT_KEYWORDS
        else:
            python, install_s = ensure_venv(job, PYSPARK_VERSIONS[job])
            label, env = f"pyspark {PYSPARK_VERSIONS[job]}", {}
            keywords = KEYWORDS
        if args.install_only:
            results.append((label, install_s, 0.0, 0))
            continue
        _say(f"{label}: contract tests and README examples")
        code, test_s = run_tests(python, env, pytest_args, root, keywords)
        results.append((label, install_s, test_s, code))

    if root != REPO:
        shutil.rmtree(root.parent, ignore_errors=True)
    for label, install_s, test_s, code in results:
        status = "ok" if code == 0 else f"FAILED (pytest exit {code})"
        _say(f"{label:<40} install {install_s:6.1f} s   tests {test_s:6.1f} s   {status}")
    return 0 if all(code == 0 for *_, code in results) else 1


if __name__ == "__main__":
    sys.exit(main())
