"""A test past its timeout in the split run (tests/support/run_suite.py's ``-n 2 --dist loadfile``) fails alone: its
process stops what it started and ends, the report shows where it hung, and the rest of its file runs once in the
process that replaces it (tests/conftest.py, setup.cfg's ``timeout_method = thread``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HANGS = '''
import os, subprocess, time
import pytest

@pytest.mark.timeout(2)
def test_hangs():
    child = subprocess.Popen(["sleep", "300"])
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"hangs {os.getpid()} {child.pid}\\n")
    time.sleep(120)

def test_after():
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"after {os.getpid()}\\n")
'''


def test_a_timed_out_test_fails_alone_and_its_file_goes_on(tmp_path):
    (tmp_path / "test_hangs.py").write_text(HANGS)
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    record = tmp_path / "record.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-c", "setup.cfg",
                          "--rootdir", ".", "-p", "tests.conftest",
                          "-p", "no:cacheprovider", str(tmp_path / "test_hangs.py"), str(tmp_path / "test_other.py")],
                         cwd=REPO, env={**os.environ, "RECORD": str(record)}, capture_output=True, text=True,
                         timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "crashed while running" in out and "::test_hangs" in out, out
    assert "Timeout after 2 s" in out and "in test_hangs" in out, out  # the stack of the test where it hung
    lines = record.read_text().splitlines()
    hangs = [line.split() for line in lines if line.startswith("hangs ")]
    after = [line.split() for line in lines if line.startswith("after ")]
    assert len(hangs) == 1 and len(after) == 1, lines  # the hung test ran once; the rest of its file ran once
    assert after[0][1] != hangs[0][1]  # in the process that replaced the one that ended
    child = int(hangs[0][2])
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split(")")[1][:3]
