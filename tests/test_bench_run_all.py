"""bench/run_all.py, the one command of issue #38's side-by-side benchmarks, without running a benchmark: every
figure it picks is a line its script prints, and a run's output becomes the Markdown table with every run's ratio
and the spread."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402


def test_every_figure_is_a_line_its_script_prints():
    for row in run_all.ROWS:
        for command in (row.command, row.quick):
            assert (BENCH / command[0]).exists(), command
        source = (BENCH / row.command[0]).read_text()
        for fig in row.figures:
            # a number in the line may be a placeholder of the script's f-string ("round {round_}: ...")
            label = re.sub(r"\d+", lambda _: r"(?:\d+|\{[^}]*\})", re.escape(fig.line))
            assert re.search(label, source), (row.name, fig.line)


def test_a_runs_figures_become_the_table_with_the_spread():
    out = """
round 1: records/s, start-up excluded      Kafka Connect 1.2e+04 rec/s ours 7000 rec/s ratio   0.58x  (load 3)
round 2: records/s, start-up excluded      Kafka Connect 1.5e+04 rec/s ours 1.5e+04 rec/s ratio   1.00x  (load 3)
round 1: CPU s/record                      Kafka Connect 5e-05 s ours 0.0001 s ratio   0.50x  (load 3)
round 2: CPU s/record                      Kafka Connect 4e-05 s ours 8e-05 s ratio    nanx  (load 3)
"""
    row = run_all.ROWS[0]
    first = {f.label: run_all.pick(out, f) for f in row.figures}
    assert first == {"round 1 (cold) records/s, start-up excluded": 0.58,
                     "round 2 (warm) records/s, start-up excluded": 1.0,
                     "round 1 (cold) CPU efficiency": 0.5, "round 2 (warm) CPU efficiency": None}
    second = {**first, "round 1 (cold) CPU efficiency": 0.7}
    text = run_all.table([(row, [(first, "2.0 1.0 1.0", "3.0 1.0 1.0", 0), (second, "4.0", "5.0", 1)])], quick=True)
    line = next(t for t in text.splitlines() if "round 1 (cold) CPU efficiency" in t)
    assert "| 0.50x | 0.70x | 0.60x | 0.50x-0.70x |" in line
    assert "2.0 / 3.0; 4.0 / 5.0 (exit 1)" in text
    assert "smoke test" in text
