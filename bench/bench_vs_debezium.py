"""Debezium's PostgreSQL connector in Kafka Connect 4.3 against ours, side by side in one run: the same connector
config, the same PostgreSQL, one Kafka broker per side; each figure printed for both with the ratio (ours /
Debezium: > 1 means ours is faster, for CPU < 1 means ours uses less) and CPU seconds per record.

* ``snapshot N``: the initial snapshot of an N-row table into Kafka (both), and into Delta (ours). Time from the
  config submitted to the last record in the topic (Debezium) or the query's end (ours, ``availableNow``);
  start-up included, then again without it (ours: the sum of the batches' ``triggerExecution``; Debezium: from
  its first record to its last). Two rounds per side: the first connector of a fresh worker / Spark session (its
  JVM compiles the path: the JIT's CPU is counted), then a second connector on its own slot and topic (the steady
  state of a long-running worker); ours into Delta after them.
* ``stream RATE SECONDS [together]``: a sustained change stream at a fixed rate (single-row INSERT transactions,
  written by a PL/pgSQL procedure that commits each row and paces itself: one Python client writing row by row
  reached only ~1700-2000 tx/s here under load), each side alone with the same workload on a table of its own
  (two cores: both at once, ``together``, measures mostly how they share them); end-to-end latency = Kafka
  record's CreateTime - the change's commit time (``source.ts_ms``), p50/p99 over every event; ours with a 500 ms
  trigger, and where its micro-batches spent their time (the mean ``durationMs`` of the batches that read
  something).
* ``startup [cold]``: config submitted -> first record in the topic, one-row table, worker/Spark session already up;
  ours twice: the session's first connector and a second one. By default the session first runs the worker's
  warm-up query (``warm.up.enable``, the worker's default: engine/warmup.py), as a worker does once its REST API
  is up; ``cold`` leaves it out (the first connector then pays the Python workers' start and imports and the JVM's
  first run of the path).

CPU: the Kafka Connect JVM (``/proc``) for Debezium; for ours the Spark JVM, its Python workers and this driver.
PostgreSQL's own CPU (each side's walsender decoding the same WAL) and the brokers' are not counted on either side.
The machine is shared: the load average is printed with each figure.

    .venv/bin/python bench/bench_vs_debezium.py snapshot 200000
    .venv/bin/python bench/bench_vs_debezium.py stream 5000 20
    .venv/bin/python bench/bench_vs_debezium.py startup [cold]
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from spark_connect_bridge.jvm.python_launcher import python_launcher

# Spark's Python processes as a kconnect worker's session runs them: the per-query ones through the launcher, on the
# installed pyspark instead of pyspark.zip where that is the same version (jvm/python_launcher.py)
os.environ.setdefault("PYSPARK_PYTHON", python_launcher() or sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", os.environ["PYSPARK_PYTHON"])

from _proctree import TreeSampler

from tests.support.kafka import KafkaBroker
from tests.support.kafka_connect import KafkaConnectWorker, _records_in, first_and_last_times
from tests.support.postgres import PostgresCluster

JSON = "org.apache.kafka.connect.json.JsonConverter"


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


_SAMPLERS: dict[frozenset[int], TreeSampler] = {}


def _sampler(roots: set[int]) -> TreeSampler:
    """The one :class:`_proctree.TreeSampler` of ``roots``' process trees, started at its first use: Spark's Python
    workers that exit inside a measured window keep their CPU (pyspark's daemon ignores SIGCHLD, so their CPU
    lands in no process's children time)."""
    key = frozenset(roots)
    if key not in _SAMPLERS:
        _SAMPLERS[key] = TreeSampler(set(roots)).start()
    return _SAMPLERS[key]


def _cpu(roots: set[int]) -> float:
    """CPU seconds ``roots``' process trees have used (differences are the figure; two root sets over the same
    processes give comparable figures, e.g. this driver alone before its Spark JVM existed and both after)."""
    return sum(_sampler(roots).absolute_split().values())


def _cpu_split(roots: set[int]) -> dict[str, float]:
    """CPU seconds of ``roots``' process trees by kind: the JVM (``java``), Python (the driver, Spark's workers).
    The JVM's reaped children are Spark's Python processes (a query's streaming source runner, planner workers):
    their CPU is Python's, not the JVM's."""
    return _sampler(roots).absolute_split()


def _split_line(before: dict[str, float], after: dict[str, float], n: int) -> None:
    jvm, python = after["jvm"] - before["jvm"], after["python"] - before["python"]
    print(f"{'  ours CPU by process':<42} JVM {jvm / n:.3g} s/record, Python (driver + workers) {python / n:.3g} "
          f"s/record", flush=True)


def _spark():
    from pyspark.sql import SparkSession

    from spark_connect_bridge.jvm import configure_spark

    builder = configure_spark(SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                              .config("spark.sql.shuffle.partitions", "2")
                              .config("spark.sql.session.timeZone", "UTC")
                              # every micro-batch's progress kept (Spark keeps 100): the stream's first ones too
                              .config("spark.sql.streaming.numRecentProgressUpdates", "1000"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _ours_roots(spark) -> set[int]:
    """This driver and the Spark JVM (its launcher's process tree: the JVM and its Python workers)."""
    return {os.getpid(), spark.sparkContext._gateway.proc.pid}


def _config(pg: PostgresCluster, db: str, prefix: str, slot: str, table: str) -> dict[str, str]:
    return {"name": prefix, "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            **pg.connector_config(db), "topic.prefix": prefix, "plugin.name": "pgoutput", "slot.name": slot,
            "table.include.list": f"public.{table}", "key.converter": JSON, "value.converter": JSON,
            "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}


def _ours_query(spark, config: dict, bootstrap: str, *, trigger: dict, delta: str | None = None):
    from spark_connect_bridge.bus.kafka import write_kafka
    from spark_connect_bridge.engine.pipeline import read_stream, write_stream

    ckpt = f"/tmp/bench-vs-dbz-{uuid.uuid4().hex[:8]}"
    if delta:  # the events as Spark structs, no converter: the envelope's fields are the table's columns
        df = read_stream(spark, {k: v for k, v in config.items() if not k.endswith("converter") and
                                 ".converter." not in k})
        return write_stream(df, {"name": "delta-sink", "connector.class": "delta-sink", "delta.table.path": delta},
                            checkpoint=ckpt, trigger=trigger)
    df = read_stream(spark, config)
    return write_kafka(df, bootstrap, checkpoint=ckpt, trigger=trigger, query_name=config["name"])


def _wait_records(bootstrap: str, topic: str, n: int, timeout: float = 1800) -> float:
    """When ``topic`` holds ``n`` records. One client asks for the watermarks every 50 ms: this process's CPU is
    counted as ours, and a new client per look (``_records_in``) cost more than a tenth of a core."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}"})
    try:
        while True:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            except KafkaException:  # the topic does not exist yet
                low, high = 0, 0
            if high - low >= n:
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: fewer than {n} records after {timeout}s")
            time.sleep(0.05)
    finally:
        consumer.close()


def _row(what: str, theirs: float, ours: float, unit: str, higher_is_better: bool = True,
         them: str = "Debezium") -> None:
    ratio = (ours / theirs if higher_is_better else theirs / ours) if theirs and ours else float("nan")
    print(f"{what:<42} {them} {theirs:12.4g} {unit:<14} ours {ours:12.4g} {unit:<14} ratio {ratio:6.2f}x  "
          f"({_load()})", flush=True)


def snapshot(n: int) -> None:
    with PostgresCluster() as pg, KafkaBroker() as theirs_kafka, KafkaBroker() as ours_kafka:
        db = pg.new_database("bench")
        pg.execute("create table big (id bigint primary key, name text, amount numeric(12,2), at timestamptz, "
                   "flag boolean)", database=db)
        pg.execute(f"insert into big select g, 'name ' || g, g * 0.01, timestamptz '2024-01-01 00:00:00+00' + "
                   f"g * interval '1 second', g % 2 = 0 from generate_series(1, {n}) g", database=db)
        pg.execute("create publication dbz_publication for all tables", database=db)
        spark = _spark()
        spark.range(1).collect()  # the session is up, as a worker's is
        print(f"snapshot of {n} rows (5 columns), PostgreSQL -> Kafka (JsonConverter, schemas off); round 1 is "
              f"each side's first connector (its JVM's first run of this path: JIT compilation included), round 2 "
              f"a second connector (its own slot and topic) in the same JVM")
        theirs = []
        with KafkaConnectWorker(theirs_kafka.bootstrap, plugins=("debezium",), trace_tasks=False,
                                worker={"offset.flush.interval.ms": 10000}) as connect:
            for round_ in (1, 2):
                cpu0, t0 = _cpu({connect.process.pid}), time.monotonic()
                connect.create(_config(pg, db, f"theirs{round_}", f"theirs_slot{round_}", "big"))
                t1 = _wait_records(theirs_kafka.bootstrap, f"theirs{round_}.public.big", n)
                cpu = _cpu({connect.process.pid}) - cpu0
                first, last = first_and_last_times(theirs_kafka.bootstrap, f"theirs{round_}.public.big")
                connect.delete(f"theirs{round_}")
                theirs.append((t1 - t0, last - first, cpu))
        roots = _ours_roots(spark)
        for round_ in (1, 2):
            split0, cpu0, t2 = _cpu_split(roots), _cpu(roots), time.monotonic()
            query = _ours_query(spark, _config(pg, db, f"ours{round_}", f"ours_slot{round_}", "big"),
                                ours_kafka.bootstrap, trigger={"availableNow": True})
            query.awaitTermination()
            t3 = time.monotonic()
            ours_cpu, split1 = _cpu(roots) - cpu0, _cpu_split(roots)
            batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
            assert _records_in(ours_kafka.bootstrap, [f"ours{round_}.public.big"]) == n
            wall, steady, cpu = theirs[round_ - 1]
            _row(f"round {round_}: events/s, start-up included", n / wall, n / (t3 - t2), "ev/s")
            _row(f"round {round_}: events/s, start-up excluded", n / max(steady, 1e-3), n / batches, "ev/s")
            _row(f"round {round_}: CPU s/record", cpu / n, ours_cpu / n, "s", higher_is_better=False)
            _split_line(split0, split1, n)
        cpu1, t4 = _cpu(roots), time.monotonic()
        delta = _ours_query(spark, _config(pg, db, "ours", "ours_delta_slot", "big"), "",
                            trigger={"availableNow": True}, delta=f"/tmp/bench-vs-dbz-delta-{uuid.uuid4().hex[:8]}")
        delta.awaitTermination()
        t5 = time.monotonic()
        delta_cpu = _cpu(roots) - cpu1
        delta_batches = sum(p["durationMs"]["triggerExecution"] for p in delta.recentProgress) / 1000
        wall, steady, cpu = theirs[1]
        _row("ours -> Delta (vs round 2): events/s, start-up included", n / wall, n / (t5 - t4), "ev/s")
        _row("ours -> Delta (vs round 2): events/s, start-up excluded", n / max(steady, 1e-3), n / delta_batches,
             "ev/s")
        _row("ours -> Delta (vs round 2): CPU s/record", cpu / n, delta_cpu / n, "s", higher_is_better=False)
        spark.stop()


def _latencies(bootstrap: str, topic: str, skip_s: float = 0.0) -> list[float]:
    """Per event: Kafka CreateTime - source.ts_ms (ms); ``skip_s``: only the events committed that many seconds
    or more after the first (the steady state, without a side's first batches)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.partition.eof": True})
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msg = consumer.poll(10)
            if msg is None or msg.error():
                break
            if msg.value() is None:
                continue
            value = json.loads(msg.value())
            if value and value.get("op") == "c":
                out.append((value["source"]["ts_ms"], msg.timestamp()[1] - value["source"]["ts_ms"]))
    finally:
        consumer.close()
    first = min((t for t, _ in out), default=0)
    return sorted(lat for t, lat in out if t - first >= skip_s * 1000)


#: Writes ``n`` single-row INSERT transactions into ``tbl`` at ``rate`` per second from inside the server: a COMMIT
#: per row, a sleep every ten rows to keep to the rate.
_PACED_INSERTS = """
    create procedure paced_inserts(tbl text, n int, rate int) language plpgsql as $$
    declare
        started timestamptz := clock_timestamp();
        ahead float8;
        ins text := format('insert into %I (id, name, amount) values ($1, $2, $3)', tbl);
    begin
        for i in 0 .. n - 1 loop
            execute ins using i, 'event ' || i, i * 0.01;
            commit;
            if i % 10 = 9 then
                ahead := (i + 1)::float8 / rate - extract(epoch from clock_timestamp() - started);
                if ahead > 0 then
                    perform pg_sleep(ahead);
                end if;
            end if;
        end loop;
    end $$"""

_PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def _phases_line(progress: list[dict]) -> str:
    """The mean durationMs of each phase over the micro-batches that read something."""
    batches = [p for p in progress if p["numInputRows"]]
    if not batches:
        return "no micro-batch read anything"
    means = " ".join(f"{k} {sum(p['durationMs'].get(k, 0) for p in batches) / len(batches):.0f}" for k in _PHASES)
    rows = sum(p["numInputRows"] for p in batches) / len(batches)
    return f"{len(batches)} micro-batches, {rows:.0f} events each, mean ms: {means}"


def _batches_text(batches: list[dict]) -> str:
    """Each micro-batch's id, events, and the phases that took > 50 ms."""
    return "; ".join(f"batch {p['batchId']} {p['numInputRows']} events " + " ".join(
        f"{ph} {p['durationMs'][ph]}" for ph in _PHASES if p["durationMs"].get(ph, 0) > 50) for p in batches)


def _slowest_line(progress: list[dict], k: int = 3) -> str:
    """The ``k`` slowest micro-batches (the tail of the latency)."""
    return _batches_text(sorted(progress, key=lambda p: -p["durationMs"].get("triggerExecution", 0))[:k])


def _first_line(progress: list[dict], k: int = 5) -> str:
    """The first ``k`` micro-batches that read something (the stream's start: where its p99 comes from)."""
    return _batches_text([p for p in progress if p["numInputRows"]][:k])


def stream(rate: int, seconds: int, together: bool = False, warm: bool = True) -> None:
    """Each side alone by default (the other's JVM stopped or idle: two cores shared with PostgreSQL and one broker,
    the same workload on a table of its own); ``together``: both at once on one table, as before. Ours runs the
    worker's warm-up query first (``warm``; ``cold`` as the 4th argument: without it)."""
    import psycopg

    with PostgresCluster() as pg, KafkaBroker() as theirs_kafka, KafkaBroker() as ours_kafka:
        db = pg.new_database("bench")
        for table in ("events", "events_theirs", "events_ours"):
            pg.execute(f"create table {table} (id bigint primary key, name text, amount numeric(12,2), "
                       "at timestamptz default now())", database=db)
        pg.execute(_PACED_INSERTS, database=db)
        pg.execute("create publication dbz_publication for all tables", database=db)
        spark = _spark()
        n = rate * seconds
        tables = {"theirs": "events", "ours": "events"} if together else \
            {"theirs": "events_theirs", "ours": "events_ours"}

        def write(table: str) -> float:
            with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
                start = time.monotonic()
                conn.execute("call paced_inserts(%s, %s, %s)", (table, n, rate))
                return n / (time.monotonic() - start)

        with KafkaConnectWorker(theirs_kafka.bootstrap, plugins=("debezium",), trace_tasks=False,
                                worker={"offset.flush.interval.ms": 10000}) as connect:
            connect.create(_config(pg, db, "theirs", "theirs_slot", tables["theirs"]))
            if together:
                query = _ours_query(spark, _config(pg, db, "ours", "ours_slot", tables["ours"]),
                                    ours_kafka.bootstrap, trigger={"processingTime": "500 milliseconds"})
            time.sleep(15)  # streaming (empty snapshot done, first batches planned)
            roots = _ours_roots(spark)
            theirs0, ours0, split0 = _cpu({connect.process.pid}), _cpu(roots), _cpu_split(roots)
            achieved = {"theirs": write(tables["theirs"])}
            _wait_records(theirs_kafka.bootstrap, f"theirs.public.{tables['theirs']}", n, timeout=600)
            theirs_cpu = _cpu({connect.process.pid}) - theirs0
            connect.delete("theirs")
        if not together:
            if warm:  # what a worker does at start (warm.up.enable, its default), as the startup row does
                from spark_connect_bridge.engine.warmup import warm_up

                print(f"{'ours: the worker warm-up':<42} {warm_up(spark):.2f} s", flush=True)
            query = _ours_query(spark, _config(pg, db, "ours", "ours_slot", tables["ours"]), ours_kafka.bootstrap,
                                trigger={"processingTime": "500 milliseconds"})
            time.sleep(15)
            ours0, split0 = _cpu(roots), _cpu_split(roots)
            achieved["ours"] = write(tables["ours"])
        _wait_records(ours_kafka.bootstrap, f"ours.public.{tables['ours']}", n, timeout=600)
        ours_cpu, split1 = _cpu(roots) - ours0, _cpu_split(roots)
        progress = query.recentProgress
        query.stop()
        theirs_lat, ours_lat = (_latencies(k.bootstrap, f"{side}.public.{tables[side]}")
                                for k, side in ((theirs_kafka, "theirs"), (ours_kafka, "ours")))
        print(f"sustained stream: {n} single-row transactions at {rate}/s asked, "
              + ", ".join(f"{v:.0f}/s achieved ({k})" for k, v in achieved.items())
              + f"; ours with a 500 ms trigger; {'both at once' if together else 'each side alone'}")
        for q in (0.5, 0.99):
            _row(f"latency p{int(q * 100)} (commit -> Kafka)", theirs_lat[int(q * (len(theirs_lat) - 1))],
                 ours_lat[int(q * (len(ours_lat) - 1))], "ms", higher_is_better=False)
        if seconds > 20:  # the steady state: without each side's first batches (ours: its JIT, a backlog)
            theirs_lat, ours_lat = (_latencies(k.bootstrap, f"{side}.public.{tables[side]}", skip_s=10)
                                    for k, side in ((theirs_kafka, "theirs"), (ours_kafka, "ours")))
            for q in (0.5, 0.99):
                _row(f"latency p{int(q * 100)}, after the first 10 s", theirs_lat[int(q * (len(theirs_lat) - 1))],
                     ours_lat[int(q * (len(ours_lat) - 1))], "ms", higher_is_better=False)
        _row("CPU s/record", theirs_cpu / n, ours_cpu / n, "s", higher_is_better=False)
        _split_line(split0, split1, n)
        print(f"{'  ours per micro-batch':<42} {_phases_line(progress)}", flush=True)
        print(f"{'  ours slowest micro-batches (ms)':<42} {_slowest_line(progress)}", flush=True)
        print(f"{'  ours first micro-batches with data (ms)':<42} {_first_line(progress)}", flush=True)
        spark.stop()


def startup(cold: bool = False) -> None:
    from spark_connect_bridge.engine.warmup import warm_up

    with PostgresCluster() as pg, KafkaBroker() as theirs_kafka, KafkaBroker() as ours_kafka:
        db = pg.new_database("bench")
        pg.execute("create table one (id int primary key, name text); insert into one values (1, 'x')", database=db)
        pg.execute("create publication dbz_publication for all tables", database=db)
        roots = {os.getpid()}
        t0, cpu0 = time.monotonic(), _cpu(roots)
        spark = _spark()
        spark.range(1).collect()  # the session is up, as the worker is when its REST API answers
        roots = _ours_roots(spark)
        ready = time.monotonic() - t0
        warm = 0.0
        if not cold:  # what the worker does next (warm.up.enable, its default); a failure is the worker's warning
            try:
                warm = warm_up(spark)
            except Exception as e:  # noqa: BLE001 - reported, and the first connector then starts cold
                print(f"the warm-up failed (the first connector starts cold): {str(e).splitlines()[0]}", flush=True)
        print(f"{'ours: session up (REST ready), warm-up':<42} {ready:.2f} s, {warm:.2f} s; CPU "
              f"{_cpu(roots) - cpu0:.2f} s in all ({_load()})", flush=True)
        t0 = time.monotonic()
        with KafkaConnectWorker(theirs_kafka.bootstrap, plugins=("debezium",), trace_tasks=False) as connect:
            print(f"{'Kafka Connect: worker up (REST ready)':<42} {time.monotonic() - t0:.2f} s", flush=True)
            t0 = time.monotonic()
            connect.create(_config(pg, db, "theirs", "theirs_slot", "one"))
            theirs = _wait_records(theirs_kafka.bootstrap, "theirs.public.one", 1) - t0
            connect.delete("theirs")
        for i, which in enumerate(("the session's first connector", "a second connector")):
            t0 = time.monotonic()
            query = _ours_query(spark, _config(pg, db, f"ours{i}", f"ours_slot{i}", "one"), ours_kafka.bootstrap,
                                trigger={"processingTime": "500 milliseconds"})
            ours = _wait_records(ours_kafka.bootstrap, f"ours{i}.public.one", 1) - t0
            query.stop()
            _row(f"start-up, {which}{' (cold: no warm-up)' if cold and not i else ''}", theirs, ours, "s",
                 higher_is_better=False)
        spark.stop()


if __name__ == "__main__":
    threading.stack_size(16 << 20)
    command = sys.argv[1] if len(sys.argv) > 1 else "snapshot"
    if command == "snapshot":
        snapshot(int(sys.argv[2]) if len(sys.argv) > 2 else 200_000)
    elif command == "stream":
        stream(int(sys.argv[2]) if len(sys.argv) > 2 else 5000, int(sys.argv[3]) if len(sys.argv) > 3 else 20,
               together=len(sys.argv) > 4 and sys.argv[4] == "together",
               warm=not (len(sys.argv) > 4 and sys.argv[4] == "cold"))
    elif command == "startup":
        startup(cold=len(sys.argv) > 2 and sys.argv[2] == "cold")
    else:
        raise SystemExit(f"unknown command {command!r}: snapshot N | stream RATE SECONDS [together|cold] | "
                         "startup [cold]")
