"""Every side-by-side benchmark of issue #38 in one command, each run ``--runs`` times (2 by default), and the table
of their ratios as Markdown: for each figure the ratio of every run, the spread (min-max) and the load average
around the runs.

    .venv/bin/python bench/run_all.py                        # every row, full sizes, 2 runs each
    .venv/bin/python bench/run_all.py --quick --runs 1       # small sizes: a smoke test of the whole chain
    .venv/bin/python bench/run_all.py --only jdbc --out docs/benchmarks/table.md
    .venv/bin/python bench/run_all.py --list                 # the rows and their commands

Each row is one existing script of ``bench/`` run as its own process (a fresh Spark session and Kafka Connect
worker: its round 1 is the cold figure, its round 2 the warm one) and the figures it prints, picked from its
output by the line's label. A ratio > 1 is ours ahead (for CPU: ours uses less per record). A row is added to
:data:`ROWS` as a :class:`Row`: a name, its goal, the command (full and ``--quick`` sizes) and the figures to pick.
Every process's output is kept in ``--logs`` (a new temporary folder by default) to read the whole figures:
absolute rates, CPU seconds per record split between the JVM and Python.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: The ratio of a ``_row`` line of bench_vs_*.py / bench_mysql_cdc.py ("ratio 0.61x", "ratio ours/Debezium 1.10x").
RATIO = r"ratio(?: ours/Debezium)?\s+(nan|[0-9.]+)x"
#: The CPU ratio of a bench_kafka.py ratio line ("0.95x wall, 0.84x CPU (rounds 0.80-0.89)").
CPU_RATIO = r"(nan|[0-9.]+)x CPU"
WALL_RATIO = r"(nan|[0-9.]+)x wall"
#: Ours' own figure of a ``_row`` line ("ours   1234 ms").
OURS = r"\bours\s+(nan|[0-9.e+-]+)\s"


@dataclass(frozen=True)
class Figure:
    """One number of a row: the first line of the output that contains ``line``, and in it ``value`` (a regex
    whose group 1 is the number)."""

    label: str
    line: str
    value: str = RATIO
    unit: str = "x"


@dataclass(frozen=True)
class Row:
    name: str
    goal: str
    command: list[str]  # a script of bench/ and its arguments
    quick: list[str]  # the same at small sizes
    figures: list[Figure] = field(default_factory=list)
    timeout: float = 3600


def _round_figures(what: str, unit_cpu: str = "CPU s/record") -> list[Figure]:
    return [Figure(f"round {r} ({'cold' if r == 1 else 'warm'}) {what}", f"round {r}: {what}") for r in (1, 2)] + \
        [Figure(f"round {r} ({'cold' if r == 1 else 'warm'}) CPU efficiency", f"round {r}: {unit_cpu}")
         for r in (1, 2)]


ROWS: list[Row] = [
    Row("Debezium envelopes -> JDBC upsert, vs Debezium's JDBC sink", ">= 1.0x throughput at <= its CPU per record",
        ["bench_vs_kafka_connect.py", "jdbc-sink", "200000"], ["bench_vs_kafka_connect.py", "jdbc-sink", "5000"],
        _round_figures("records/s, start-up excluded")),
    Row("PostgreSQL stream at 5,000 tx/s, vs Debezium", "p99 < 1 s from the first second; CPU per event <= Debezium's",
        ["bench_vs_debezium.py", "stream", "5000", "60"], ["bench_vs_debezium.py", "stream", "500", "5"],
        [Figure("p99 latency, ours (ms)", "latency p99 (commit", OURS, "ms"),
         Figure("p99 latency", "latency p99 (commit"),
         Figure("p99 latency after 10 s, ours (ms)", "latency p99, after the first 10 s", OURS, "ms"),
         Figure("CPU efficiency", "CPU s/record")]),
    Row("config submitted -> first record, vs Kafka Connect (Debezium PostgreSQL)",
        "first <= 2 s; second <= Kafka Connect's", ["bench_vs_debezium.py", "startup"],
        ["bench_vs_debezium.py", "startup"],
        [Figure("first connector, ours (s)", "the session's first connector", OURS, "s"),
         Figure("first connector", "the session's first connector"),
         Figure("second connector", "a second connector")]),
    Row("PostgreSQL snapshot -> Kafka, vs Debezium", "<= Debezium's CPU, cold and warm",
        ["bench_vs_debezium.py", "snapshot", "200000"], ["bench_vs_debezium.py", "snapshot", "2000"],
        _round_figures("events/s, start-up excluded")),
    Row("MariaDB binlog -> Kafka, include.schema.changes=true, vs Debezium", ">= 1.0x at <= its CPU",
        ["bench_mysql_cdc.py", "200000"], ["bench_mysql_cdc.py", "5000"],
        [Figure("throughput, start-up excluded", "events/s, start-up excluded"),
         Figure("CPU efficiency", "CPU-us per event")]),
    Row("Kafka topic -> sink (JsonConverter + ExtractField), vs the same full from_json by hand",
        ">= 0.9x of the by-hand parse, cold and warm",
        ["bench_kafka.py", "1000000", "2", "--only", "sink"],
        ["bench_kafka.py", "20000", "2", "--only", "sink", "--batches", "2", "--reps", "1"],
        [Figure("wall", "sink_stream (JsonConverter) / from_json (full parse) by hand", WALL_RATIO),
         Figure("CPU efficiency", "sink_stream (JsonConverter) / from_json (full parse) by hand", CPU_RATIO),
         Figure("vs the bare read, CPU efficiency", "ratio sink_stream / bare read", CPU_RATIO)]),
    Row("FileStream + eight SMTs -> Kafka, vs Kafka Connect", "(no goal: faster already)",
        ["bench_vs_kafka_connect.py", "filestream", "1000000"], ["bench_vs_kafka_connect.py", "filestream", "5000"],
        _round_figures("records/s, start-up excluded")),
]


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def pick(output: str, figure: Figure) -> float | None:
    """``figure``'s number in a run's output; None where its line is missing (the run failed before it)."""
    for text in output.splitlines():
        if figure.line in text:
            m = re.search(figure.value, text)
            if m:
                return None if m.group(1) == "nan" else float(m.group(1))
    return None


def run_row(row: Row, quick: bool, logs: str, index: int) -> tuple[dict[str, float | None], str, str, int]:
    """One run of ``row``: (figures, load before, load after, exit code); its output goes to ``logs``."""
    argv = [sys.executable, os.path.join(HERE, (row.quick if quick else row.command)[0]),
            *(row.quick if quick else row.command)[1:]]
    before = load()
    log = os.path.join(logs, f"{_slug(row)}-{index}.log")
    print(f"[{time.strftime('%H:%M:%S')}] {row.name}, run {index}: {' '.join(argv[1:])} (load {before}; "
          f"output in {log})", flush=True)
    with open(log, "w") as out:
        out.write(f"# load before: {before}\n")
        out.flush()
        try:
            # --quick: a smoke run, whose script may wait out its own long timeout after a failed query
            timeout = min(row.timeout, 900) if quick else row.timeout
            code = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = -1
    after = load()
    with open(log, "a") as out:
        out.write(f"\n# load after: {after}\n# exit code: {code}\n")
    with open(log) as f:
        text = f.read()
    figures = {fig.label: pick(text, fig) for fig in row.figures}
    if code:
        print(f"  exit code {code}; the last lines:\n" + "\n".join(text.splitlines()[-15:]), flush=True)
    return figures, before, after, code


def _slug(row: Row) -> str:
    return re.sub(r"[^a-z0-9]+", "-", row.name.lower())[:40]


def earlier_runs(row: Row, folder: str) -> list[tuple[dict[str, float | None], str, str, int]]:
    """The runs of ``row`` kept in an earlier run's ``--logs`` folder (``<row>-<i>.log``), read back as
    :func:`run_row` returns them; the loads from the log's ``# load before/after`` lines ("?" where missing)."""
    runs = []
    for name in sorted(os.listdir(folder)):
        if not re.fullmatch(re.escape(_slug(row)) + r"-[0-9]+\.log", name):
            continue
        with open(os.path.join(folder, name)) as f:
            text = f.read()
        before = re.search(r"^# load before: (.+)$", text, re.M)
        after = re.search(r"^# load after: (.+)$", text, re.M)
        code = re.search(r"^# exit code: (-?[0-9]+)$", text, re.M)
        runs.append(({fig.label: pick(text, fig) for fig in row.figures}, before.group(1) if before else "?",
                     after.group(1) if after else "?", int(code.group(1)) if code else 0))
    return runs


def _fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}x" if unit == "x" else f"{x:.4g} {unit}"


def table(results: list[tuple[Row, list[tuple[dict[str, float | None], str, str, int]]]], quick: bool) -> str:
    """The Markdown table: a line per figure, each run's value, the median and the spread, the loads."""
    runs = max((len(r) for _, r in results), default=0)
    head = "| path | goal | figure | " + " | ".join(f"run {i + 1}" for i in range(runs)) + \
        " | median | spread | load (1 min) before / after each run |"
    lines = [head, "|" + "---|" * (runs + 6)]
    for row, row_runs in results:
        loads = "; ".join(f"{b.split()[0]} / {a.split()[0]}" + (f" (exit {c})" if c else "")
                          for _, b, a, c in row_runs)
        for i, fig in enumerate(row.figures):
            values = [r[0].get(fig.label) for r in row_runs]
            got = [v for v in values if v is not None]
            median = statistics.median(got) if got else None
            spread = f"{_fmt(min(got), fig.unit)}-{_fmt(max(got), fig.unit)}" if len(got) > 1 else "-"
            cells = [_fmt(v, fig.unit) for v in values] + ["" for _ in range(runs - len(values))]
            lines.append(f"| {row.name if i == 0 else ''} | {row.goal if i == 0 else ''} | {fig.label} | "
                         + " | ".join(cells) + f" | {_fmt(median, fig.unit)} | {spread} | "
                         f"{loads if i == 0 else ''} |")
    sizes = "the --quick sizes (a smoke test, not figures to quote)" if quick else "the full sizes"
    lines.append("")
    lines.append(f"Ratios are ours / theirs (> 1: ours ahead; for CPU: theirs per record / ours). {runs} run(s) per "
                 f"row at {sizes}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                 f"`{os.cpu_count()}` CPUs, load average at the end {load()}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each row (default 2)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--only", action="append", default=[],
                        help="rows whose name contains this text (case-insensitive; repeatable)")
    parser.add_argument("--out", help="also write the Markdown table to this file")
    parser.add_argument("--logs", help="folder for each run's output (default: a new temporary folder)")
    parser.add_argument("--list", action="store_true", help="print the rows and their commands, run nothing")
    parser.add_argument("--with-logs", action="append", default=[], metavar="FOLDER",
                        help="also put the runs kept in an earlier run's --logs folder in the table, before this "
                             "run's (repeatable; --runs 0 makes the table of those alone)")
    args = parser.parse_args(argv)
    rows = [r for r in ROWS if not args.only or any(o.lower() in r.name.lower() for o in args.only)]
    if not rows:
        parser.error(f"no row matches {args.only}: " + "; ".join(r.name for r in ROWS))
    if args.list:
        for r in rows:
            print(f"{r.name}\n    {' '.join(r.command)}\n    --quick: {' '.join(r.quick)}")
        return 0
    logs = args.logs or tempfile.mkdtemp(prefix="bench-run-all-")
    os.makedirs(logs, exist_ok=True)
    results = []
    failed = 0
    for row in rows:
        row_runs = [run for folder in args.with_logs for run in earlier_runs(row, folder)]
        for i in range(1, args.runs + 1):
            row_runs.append(run_row(row, args.quick, logs, i))
            failed += bool(row_runs[-1][3])
        results.append((row, row_runs))
    text = table(results, args.quick)
    if args.with_logs:
        text += (f"\nRuns read back from the kept output of earlier runs, in this order: "
                 f"{', '.join(f'`{os.path.relpath(f, ROOT)}`' for f in args.with_logs)} (each folder one "
                 f"`run_all.py --logs` run, named by its start, UTC); the date above is when this table was made.\n")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
