"""Ours' side of ``bench_vs_kafka_connect.py jdbc-sink`` alone, for profiling and before/after pairs: N Debezium
change events (JSON with schemas) from one topic into PostgreSQL, upserted by key, ROUNDS connectors one after
the other in one Spark session (round 1 its first), each printing its CPU per record (Spark JVM, Python workers,
this driver). ``--jfr FILE`` records the Spark JVM's last round with Java Flight Recorder (``bench/jfr_top.py``
reads it). A before/after pair: run it from each tree in turn (``PYTHONPATH=<tree>``), alternating.

    PYTHONPATH=. .venv/bin/python bench/jdbc_sink_rounds.py 50000 3 [--jfr /tmp/ours.jfr] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench_vs_debezium import _cpu, _cpu_split, _ours_roots, _spark
from bench_vs_kafka_connect import _table_rows, jdbc_sink_config, orders_to_kafka

from tests.support.kafka import KafkaBroker
from tests.support.postgres import PostgresCluster


def main() -> None:
    from spark_connect_bridge.bus.kafka import sink_stream

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("--jfr", help="record the last round's Spark JVM into this file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a sink config key, e.g. max.records.per.trigger=5000 (micro-batch size)")
    args = parser.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.set)
    n = args.records
    with PostgresCluster() as pg, KafkaBroker() as kafka:
        spark = _spark()
        orders_to_kafka(pg, kafka, spark, n)
        url = f"jdbc:postgresql://127.0.0.1:{pg.port}/"
        roots, jvm = _ours_roots(spark), spark.sparkContext._gateway.proc.pid
        for round_ in range(1, args.rounds + 1):
            db = pg.new_database(f"ours{round_}")
            record = args.jfr and round_ == args.rounds
            if record:
                subprocess.run(["jcmd", str(jvm), "JFR.start", "name=rounds", "settings=profile",
                                f"filename={args.jfr}"], check=True, capture_output=True)
            split0, cpu0, t0 = _cpu_split(roots), _cpu(roots), time.monotonic()
            query = sink_stream(spark, {**jdbc_sink_config(f"ours{round_}", url + db), **extra},
                                bus=kafka.bootstrap, checkpoint=f"/tmp/bench-jdbc-{uuid.uuid4().hex[:8]}",
                                trigger={"availableNow": True})
            query.awaitTermination()
            wall, cpu, split1 = time.monotonic() - t0, _cpu(roots) - cpu0, _cpu_split(roots)
            if record:
                subprocess.run(["jcmd", str(jvm), "JFR.stop", "name=rounds"], check=True, capture_output=True)
            batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
            assert _table_rows(pg, db, "orders") == n
            print(f"round {round_}: {len(query.recentProgress)} batches, wall {wall:.1f} s, batches {batches:.1f} s, "
                  f"CPU {cpu / n:.3g} s/record (JVM "
                  f"{(split1['jvm'] - split0['jvm']) / n:.3g}, Python {(split1['python'] - split0['python']) / n:.3g})"
                  f", load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        spark.stop()


if __name__ == "__main__":
    main()
