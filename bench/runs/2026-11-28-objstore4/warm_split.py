"""Warm runs of the S3 sink's 'ours' line alone, each run's CPU split by process: the Spark JVM, this driver and
Spark's Python workers (the writer tasks and the data source's planner processes), the S3 server left out.

    PYTHONPATH=. .venv/bin/python bench/runs/2026-11-28-objstore4/warm_split.py 1000000 json 3 [flag-file]

Two runs warm the session first; with a flag file, its pid is written there once warm (to attach
``py-spy record --subprocesses -p <pid>`` to the warm runs only).
"""

from __future__ import annotations

import os
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "bench")]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from _proctree import descendants, proc_table  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from spark_connect_bridge import write_batch  # noqa: E402
from spark_connect_bridge.jvm import configure_spark  # noqa: E402
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server  # noqa: E402

FORMATS = {"json": "io.confluent.connect.s3.format.json.JsonFormat",
           "parquet": "io.confluent.connect.s3.format.parquet.ParquetFormat"}


def main() -> None:
    records_n, kind, reps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    flag = sys.argv[4] if len(sys.argv) > 4 else ""
    server = MotoS3Server().start()
    server.create_bucket("bench")
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1"))
    spark = configure_spark(builder, delta=False).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    src = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": str(records_n // 2), "max.interval": "0", "tasks.max": "2"}
    records = spark.read.format("kconnect").options(**src).load().cache()
    assert records.count() == records_n
    sink = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "s3.bucket.name": "bench",
            "s3.region": REGION, "store.url": server.endpoint, "aws.access.key.id": ACCESS_KEY,
            "aws.secret.access.key": SECRET_KEY, "flush.size": str(records_n), "format.class": FORMATS[kind]}
    exclude = {server.process.pid} if server.process else set()
    runs = [0]

    def snapshot() -> dict[int, tuple[int, str, float]]:
        procs = proc_table(reaped=True)
        return {p: procs[p] for p in descendants({os.getpid()}, procs) - descendants(exclude, procs)}

    def run() -> None:
        runs[0] += 1
        write_batch(records, {**sink, "topics.dir": f"o-{runs[0]}"})

    run()
    run()
    if flag:
        with open(flag, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(2)
    for _ in range(reps):
        before, t = snapshot(), time.perf_counter()
        run()
        wall, after = time.perf_counter() - t, snapshot()
        split: dict[str, float] = {}
        for pid, (_, name, cpu) in after.items():
            what = "driver" if pid == os.getpid() else "java" if "java" in name else \
                "pyworkers" if "python" in name else name
            split[what] = split.get(what, 0.0) + cpu - before.get(pid, (0, "", 0.0))[2]
        print(kind, records_n, f"wall {wall:.2f}", {k: round(v, 2) for k, v in split.items()},
              f"total {sum(split.values()) / records_n * 1e6:.2f} us/rec", f"load {os.getloadavg()[0]:.1f}",
              flush=True)
    spark.stop()
    server.destroy()


if __name__ == "__main__":
    main()
