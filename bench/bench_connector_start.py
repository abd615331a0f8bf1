"""Connector start with and without the Python launcher (jvm/python_launcher.py), in the same run.

    PYTHONPATH=. .venv/bin/python bench/bench_connector_start.py [rounds] [queries]

Each round starts one Spark session per variant (the order alternates between rounds), in a process of its own
with neither PYSPARK_PYTHON nor PYSPARK_DRIVER_PYTHON set, as a user runs ``kconnect``:

- ``spark``: the session as Spark makes it (``PYSPARK_PYTHON`` = this Python: the streaming source runner and the
  planner daemons import pyspark from ``$SPARK_HOME/python/lib/pyspark.zip``, compiling it from source);
- ``launcher``: the session as ``kconnect`` makes it (``with_python_launcher``: those processes import the installed
  pyspark with its bytecode cache);
- ``all``: a launcher that also takes the zips off the task workers' daemon (``-m pyspark.daemon``, its forked
  workers): the alternative not taken (see ``LAUNCHED_MODULES``), measured for its steady state.

Then ``queries`` connectors one after the other, each FileStreamSource (2 lines) -> JsonConverter -> ``noop`` with
``trigger(availableNow=True)``: config submitted -> first record written -> done (issue #38's start-up row; the first
pays the session's first Python data source planning, the later ones what every further connector pays). Figures:
wall seconds and CPU seconds of the whole process tree (driver, JVM, every Python process Spark started, reaped
ones included), with the load average beside each line: on a shared machine the CPU seconds are the figure.
Then the steady state of the task workers: ``reads`` batch reads of 50 datagen records into ``noop`` after 3
unmeasured ones, CPU per read (the task daemon's forked workers are reused, so what they import is paid once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _proctree import descendants, proc_table

VARIANTS = ("spark", "launcher", "all")
READS = 20


def _cpu(roots: set[int]) -> float:
    procs = proc_table(reaped=True)
    return sum(procs[p][2] for p in descendants(roots, procs) if p in procs)


def _child(variant: str, queries: int) -> None:
    """One session of ``variant`` and ``queries`` connectors; a JSON line per step."""
    t0, roots = time.monotonic(), {os.getpid()}
    c0 = _cpu(roots)
    from pyspark.sql import SparkSession

    import spark_connect_bridge as scb
    from spark_connect_bridge.jvm import with_python_launcher, with_session_defaults

    if variant == "spark":
        os.environ["PYSPARK_PYTHON"] = sys.executable
    elif variant == "all":
        from spark_connect_bridge.jvm import python_launcher as pl

        script = os.path.join(tempfile.mkdtemp(prefix="bench-launcher-"), "python")
        task_daemon = ("-m:pyspark.daemon:", "-m:pyspark.daemon:pyspark.worker")
        with open(script, "w") as f:
            f.write(pl.launcher_script(sys.executable, pl._zips_to_drop(pl._spark_home()),
                                       (*pl.LAUNCHED_MODULES, *task_daemon)))
        os.chmod(script, 0o700)
        os.environ["PYSPARK_PYTHON"] = script
    builder = with_session_defaults(SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                                    .config("spark.ui.showConsoleProgress", "false"))
    spark = with_python_launcher(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    roots.add(spark.sparkContext._gateway.proc.pid)
    print(json.dumps({"step": "session", "wall": time.monotonic() - t0, "cpu": _cpu(roots) - c0,
                      "python": os.environ["PYSPARK_PYTHON"]}), flush=True)
    work = tempfile.mkdtemp(prefix="bench-connector-start-")
    with open(f"{work}/in.txt", "w") as f:
        f.write("a\nb\n")
    for i in range(1, queries + 1):
        c0, t0 = _cpu(roots), time.monotonic()
        df = scb.read_stream(spark, {"connector.class": "FileStreamSource", "file": f"{work}/in.txt", "topic": "t",
                                     "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                     "value.converter.schemas.enable": "false"})
        query = (df.writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", f"{work}/cp{i}").start())
        query.awaitTermination()
        rows = query.lastProgress["numInputRows"] if query.lastProgress else None
        print(json.dumps({"step": f"connector {i}", "wall": time.monotonic() - t0, "cpu": _cpu(roots) - c0,
                          "rows": rows}), flush=True)
    datagen = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
               "iterations": "50", "max.interval": "0"}
    for i in range(3 + READS):
        if i == 3:
            c0, t0 = _cpu(roots), time.monotonic()
        scb.read_batch(spark, datagen).write.format("noop").mode("overwrite").save()
    print(json.dumps({"step": "batch read", "wall": (time.monotonic() - t0) / READS,
                      "cpu": (_cpu(roots) - c0) / READS, "rows": 50}), flush=True)
    spark.stop()


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]))
        return
    rounds = int(argv[0]) if argv else 2
    queries = int(argv[1]) if len(argv) > 1 else 3
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} cores; "
          "CPU = process tree (driver, JVM, Python workers)", flush=True)
    for r in range(rounds):
        for variant in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
            run = subprocess.run([sys.executable, __file__, "--child", variant, str(queries)], env=env,
                                 capture_output=True, text=True, check=False)
            if run.returncode != 0:
                raise SystemExit(f"{variant} failed:\n{run.stderr[-3000:]}")
            for line in run.stdout.splitlines():
                if line.startswith("{"):
                    step = json.loads(line)
                    extra = f", {step['rows']} rows" if "rows" in step else f" ({step['python']})"
                    if step["step"] == "batch read":
                        extra += f", mean of {READS} reads"
                    print(f"round {r + 1} {variant:<8} {step['step']:<12} wall {step['wall']:6.2f} s, "
                          f"CPU {step['cpu']:6.2f} s{extra}, load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
