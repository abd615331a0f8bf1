"""The README's examples run, and its generated reference matches the config declarations."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.fixture
def in_repo_root():
    # Relative paths in the examples resolve against the Spark JVM's working directory: the repo root.
    before = os.getcwd()
    os.chdir(ROOT)
    made = [ROOT / "test.txt", ROOT / "test.sink.txt", ROOT / "test.sink.txt.kconnect", ROOT / "checkpoints"]
    existing = {p for p in made if p.exists()}
    yield
    for p in made:
        if p not in existing and p.exists():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    os.chdir(before)


def test_readme_examples_run(spark, in_repo_root):
    if Path(os.getcwd()) != ROOT:
        pytest.fail("the examples must run from the repo root")
    blocks = _python_blocks()
    assert len(blocks) >= 3
    namespace = {"spark": spark}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)


def test_generated_reference_is_current():
    from spark_connect_bridge.docs import BEGIN, END, reference

    text = README.read_text()
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == reference().strip(), "run: python -m spark_connect_bridge.docs"
