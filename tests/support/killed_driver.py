"""A streaming query in a child driver process, to be killed with SIGKILL mid-stream (the kill -9 tests):
``format("kconnect")`` with a connector config into a parquet sink at ``out`` (a source's test) or, given ``sink``,
into that ``kconnect`` sink config (a sink's test), at a 200 ms trigger, until killed.

>>> driver = start_driver(config, out, ckpt, tmp_path)   # doctest: +SKIP
>>> kill(driver)                                          # the driver, its JVM and its Python workers
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["start_driver", "kill"]

_DRIVER = textwrap.dedent('''
    import json, sys
    from pyspark.sql import SparkSession
    config, out, ckpt, sink = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    df = spark.readStream.format("kconnect").options(**config).load()
    writer = (df.writeStream.format("kconnect").options(**sink) if sink else
              df.writeStream.format("parquet").option("path", out))
    q = writer.option("checkpointLocation", ckpt).trigger(processingTime="200 milliseconds").start()
    q.awaitTermination()
''')


def start_driver(config: dict[str, Any], out: Path | None, ckpt: Path, workdir: Path,
                 sink: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the child driver (its own process group, so :func:`kill` takes its JVM and workers too); ``env``
    adds to its environment (its JVM's and Python workers' too)."""
    script = workdir / "killed_driver.py"
    script.write_text(_DRIVER)
    return subprocess.Popen([sys.executable, str(script), json.dumps(config), str(out or ""), str(ckpt),
                             json.dumps(sink or {})],
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill(driver: subprocess.Popen) -> None:
    """SIGKILL to the driver's whole process group (a no-op when it has exited), then reap it."""
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
