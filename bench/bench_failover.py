"""Failover time of a worker group: ``kill -9`` of the worker running a sink → the first record the new owner
writes, with what it is made of (the lease running out, the rebalance, the query start).

    .venv/bin/python bench/bench_failover.py [workers] [kills] [session_timeout_ms] [postgres|kafka]

The group store is PostgreSQL (``group.store.url``) or, with ``kafka``, Kafka (Kafka's
connect-distributed.properties: membership from a consumer group, state in compacted topics; the bus is then Kafka
too). A FileStreamSource writes numbered lines (a writer thread appends 20 lines every 100 ms) into the bus; a
FileStreamSink writes them out. Each round kills the worker that runs the sink and measures, from the kill:

* ``reassigned``: until another worker's status report names it the owner (session timeout + heartbeat);
* ``first record``: until the sink's file grows again (the new owner's query started and committed a batch).

Also printed: the ratio of the failover time to the session timeout, whether every line arrived exactly once, and
the load average (the machine is shared).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_connect_bridge.jvm import classpath
from tests.distributed.group_helpers import GroupWorker, until
from tests.support.kafka import KafkaBroker
from tests.support.postgres import PostgresCluster

#: Spark's Kafka source and its client jars: the bus of a worker with bootstrap.servers
KAFKA_JARS = ("spark-sql-kafka", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")


def main() -> None:
    n_workers = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    session_ms = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
    if kills >= n_workers:
        raise SystemExit("kills must be fewer than workers")
    kind = sys.argv[4] if len(sys.argv) > 4 else "postgres"
    if kind not in ("postgres", "kafka"):
        raise SystemExit("the store is postgres or kafka")
    shared = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    group = "bench-" + uuid.uuid4().hex[:6]
    spark = {"spark.master": "local[1]", "spark.driver.memory": "512m"}
    server: PostgresCluster | KafkaBroker
    if kind == "postgres":
        server = PostgresCluster().start()
        store = {"group.store.url": f"postgresql://postgres@127.0.0.1:{server.port}/test"}
    else:
        server = KafkaBroker().start()
        store = {"bootstrap.servers": f"127.0.0.1:{server.port}", "config.storage.topic": group + "-configs",
                 "status.storage.topic": group + "-status"}
        spark["spark.jars"] = ",".join(j for j in classpath("spark") if Path(j).name.startswith(KAFKA_JARS))
    print(f"group store: {kind}", flush=True)
    (shared / "in.txt").write_text("")
    workers = [GroupWorker(shared, store, group, f"w{i}", session_timeout_ms=session_ms, spark=spark).start()
               for i in range(n_workers)]
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        while not stop.is_set():
            with open(shared / "in.txt", "a") as f:
                f.write("".join(f"line-{i:07d}\n" for i in range(written[0], written[0] + 20)))
            written[0] += 20
            time.sleep(0.1)

    try:
        started = time.monotonic()
        for w in workers:
            w.wait_healthy()
        print(f"{n_workers} workers healthy in {time.monotonic() - started:.1f} s", flush=True)
        w0 = workers[0]
        strings = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
                   "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
        for name, cfg in {"src": {"connector.class": "FileStreamSource", "file": str(shared / "in.txt"),
                                  "topic": "lines", **strings},
                          "sink": {"connector.class": "FileStreamSink", "file": str(shared / "out.txt"),
                                   "topics": "lines", **strings}}.items():
            assert w0.call("POST", "/connectors", {"name": name, "config": cfg}).status_code == 201
        threading.Thread(target=writer, daemon=True).start()
        out = shared / "out.txt"
        until(lambda: out.exists() and out.stat().st_size > 0, what="the sink's first records")
        live = list(workers)
        for round_no in range(1, kills + 1):
            owner_id = live[0].status("sink")["connector"]["worker_id"]
            victim = next(w for w in live if w.worker_id == owner_id)
            live.remove(victim)
            time.sleep(1.0)  # mid-stream
            size = out.stat().st_size
            killed = time.monotonic()
            victim.kill_all()  # the worker and its Spark JVM, as a machine that died
            until(lambda old=owner_id: (s := live[0].status("sink")["connector"])["worker_id"] != old
                  and s["state"] == "RUNNING", what="the sink RUNNING on another worker", timeout=600)
            reassigned = time.monotonic() - killed
            until(lambda before=size: out.stat().st_size > before, what="the new owner's first record", timeout=600)
            first = time.monotonic() - killed
            print(f"round {round_no}: kill -9 of {owner_id}: reassigned and RUNNING after {reassigned:.1f} s, first "
                  f"record from the new owner after {first:.1f} s = {first * 1000 / session_ms:.1f} x "
                  f"session.timeout.ms ({session_ms} ms); load average {os.getloadavg()[0]:.1f}", flush=True)
        stop.set()
        want = [f"line-{i:07d}" for i in range(written[0])]
        until(lambda: sorted(out.read_text().splitlines()) == want, what="every line in the sink", timeout=600)
        dup = sum(n - 1 for n in Counter(out.read_text().splitlines()).values() if n > 1)
        print(f"{written[0]:,} lines written, {len(want):,} in the sink exactly once, {dup} duplicates", flush=True)
    finally:
        stop.set()
        for w in workers:
            w.stop()
        server.destroy()
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    main()
