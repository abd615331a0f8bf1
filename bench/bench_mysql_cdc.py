"""Change events/s: MariaDB binlog -> Spark (kconnect MariaDB CDC) -> noop, -> a JDBC mirror and -> Kafka, against
reading the same binlog without Spark and against Debezium's own MariaDB connector, in one run on a throwaway
MariaDB (the machine is shared: load averages are printed with each figure).

Without Spark (one Python process):

* ``python-mysql-replication``: the library's ``BinLogStreamReader`` over the first events, every row decoded by
  it (what a reader built on the library alone would do);
* ``connector in-process``: the connector's own ``latest_offsets``/``read_range`` loop, Debezium events built as
  Arrow (what a Spark task runs, without Spark).

Spark (``snapshot.mode=never``: the whole binlog; ``Trigger.AvailableNow``, fresh checkpoints, one session):

* ``-> noop`` twice: the first query pays the JVM's warm-up and the Python workers' start (imports), the second
  is the steady state a long-running query sees;
* ``-> ExtractNewRecordState -> JDBC sink``: the mirror of the issue's test (upsert by the record key, deletes
  on) into a second throwaway MariaDB, checked equal to the source (row count and a checksum of every column);
* ``-> Kafka`` beside Debezium's ``MariaDbConnector`` in a Kafka Connect standalone worker, on the same binlog,
  one broker per side, JsonConverter without schemas on both: events/s from the config submitted to the last
  record in the topic and without start-up (Debezium: its first record's to its last record's CreateTime; ours:
  the batches), CPU per event (the Connect JVM against ours), and the ratios.

Each Spark query is reported with the query start and without it (the sum of the batches'
``triggerExecution``), and with the CPU seconds of the processes involved, read from ``/proc``: the Spark JVM,
its Python workers (``pyspark.daemon`` and the workers it forks), the driver's Python streaming source runner (a
child of the JVM living as long as its query: ~1 CPU-s of imports per query, counted once the JVM has reaped it)
and this driver. The database servers and the brokers are not counted. On a shared machine the wall-clock rate
says more about the load than about the code, the CPU time per event does not.

    .venv/bin/python bench/bench_mysql_cdc.py 200000           # include.schema.changes=true (Debezium's default)
    .venv/bin/python bench/bench_mysql_cdc.py 200000 false     # the change events' own, narrower shape
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from _proctree import descendants, proc_stats, proc_table

from spark_connect_bridge.connectors.base import SourceConnector
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical
from tests.support.kafka import KafkaBroker
from tests.support.kafka_connect import KafkaConnectWorker, _records_in, first_and_last_times
from tests.support.mariadb import MariaDBServer


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def _generate(my: MariaDBServer, rows: int) -> None:
    my.execute("create database bench")
    my.execute("create table bench.orders (id int primary key, name varchar(50), amount decimal(12,2), "
               "ts datetime(6), payload varchar(200))")
    my.execute(f"""create procedure bench.gen() begin declare i int default 0; while i < {rows} do
        insert into bench.orders values (i, concat('n', i), i * 1.25, now(6), repeat('x', 100));
        set i = i + 1; if i % 1000 = 0 then commit; end if; end while; commit; end""")
    import pymysql

    with pymysql.connect(host="127.0.0.1", port=my.port, user="root", autocommit=False) as conn:
        conn.cursor().execute("call bench.gen()")
        conn.commit()


class _TreeCpu:
    """CPU seconds (user + system) of the Spark JVM ``jvm`` and its process tree, by process kind, sampled from
    ``/proc`` every 0.1 s by a thread: a process that exits keeps its last sample. (Reaped-children times do not
    do: pyspark's daemon ignores SIGCHLD, so the CPU of the workers it forked and that exited is in no process's
    counters; the streaming source runner exits with its query.) At most a tenth of a second of CPU before a
    process's exit is missed. Kinds:

    * ``jvm``: the JVM itself;
    * ``python workers``: the ``pyspark.daemon`` processes (reads, writes, data source planning) and the workers
      they fork;
    * ``python source runner``: the driver's Python streaming source runner
      (``pyspark.sql.streaming.python_streaming_source_runner``: offsets and plans), a child of the JVM started
      with each query and ending with it (~1 CPU-s of imports each);
    * ``python driver``: this process (the query's start and ``awaitTermination``), the sampler's own time
      taken out.
    """

    def __init__(self, jvm: int):
        self.jvm = jvm
        self.seen: dict[tuple[int, str], tuple[str, float]] = {}  # (pid, start time): (kind, CPU seconds)
        self.sampler_cpu = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self._sample()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self._sample()
            self.sampler_cpu = time.thread_time()

    def _sample(self) -> None:
        procs = proc_stats()
        tree = descendants({self.jvm}, {pid: (p.ppid, p.name, p.cpu) for pid, p in procs.items()})
        with self.lock:
            for pid in tree & procs.keys():
                ppid, _, start, cpu, _ = procs[pid]
                known = self.seen.get((pid, start))
                kind = self._kind(pid, ppid)
                self.seen[(pid, start)] = (known[0] if known and kind is None else kind or "other", cpu)

    def _kind(self, pid: int, ppid: int) -> str | None:
        """The kind of a process by its command line (read each time: a child of the JVM is ``jspawnhelper``
        until it execs Python); None for a zombie's (empty) one."""
        if pid == self.jvm:
            return "jvm"
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            cmd = b""
        if not cmd:
            return None
        if b"python_streaming_source_runner" in cmd:
            return "python source runner"
        return "python workers" if b"pyspark.daemon" in cmd else "other"

    def totals(self) -> dict[str, float]:
        """CPU seconds so far by kind (every process seen since the start)."""
        self._sample()
        out = {"jvm": 0.0, "python workers": 0.0, "python source runner": 0.0,
               "python driver": time.process_time() - self.sampler_cpu}
        with self.lock:
            for kind, cpu in self.seen.values():
                out[kind] = out.get(kind, 0.0) + cpu
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _runners_gone(jvm: int, timeout: float = 10.0) -> None:
    """Wait until no streaming source runner of ``jvm`` is alive: a stopped query's runner exits shortly after
    ``awaitTermination`` returns."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = proc_table()
        alive = False
        for pid in descendants({jvm}, procs) - {jvm}:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    alive = alive or b"python_streaming_source_runner" in f.read()
            except OSError:
                continue
        if not alive:
            time.sleep(0.2)  # its last sample
            return
        time.sleep(0.1)


def _library(my: MariaDBServer, limit: int) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    first = my.execute("show binary logs")[0][0]
    began = time.perf_counter()
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": my.port, "user": "root",
                                                     "passwd": ""}, server_id=77, log_file=first, log_pos=4,
                                resume_stream=True, blocking=False, only_events=[WriteRowsEvent],
                                enable_logging=False)
    rows = 0
    for event in stream:
        rows += len(event.rows)
        if rows >= limit:
            break
    stream.close()
    return rows, time.perf_counter() - began


def _spark():
    from pyspark.sql import SparkSession

    from spark_connect_bridge.jvm import configure_spark

    builder = configure_spark(SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                              .config("spark.sql.shuffle.partitions", "2")
                              .config("spark.sql.session.timeZone", "UTC"), delta=False)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _measured(tree: _TreeCpu, start) -> tuple[int, float, float, dict[str, float]]:
    """Run the query ``start()`` returns (``availableNow``) to its end: (events, wall seconds with the query's
    start, seconds in batches (the sum of their ``triggerExecution``), CPU seconds by process kind)."""
    before = tree.totals()
    began = time.perf_counter()
    query = start()
    query.awaitTermination()
    wall = time.perf_counter() - began
    _runners_gone(tree.jvm)
    after = tree.totals()
    progress = query.recentProgress
    events = sum(p["numInputRows"] for p in progress)
    batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000.0
    return events, wall, batches, {k: after[k] - before.get(k, 0.0) for k in after}


def _report(what: str, events: int, wall: float, batches: float, used: dict[str, float]) -> None:
    cpu = sum(used.values())
    print(f"{what}, {events} events: {wall:.1f} s with the query start ({events / wall:,.0f} events/s), "
          f"{batches:.1f} s in batches ({events / batches:,.0f} events/s); CPU-s "
          + ", ".join(f"{k} {v:.2f}" for k, v in sorted(used.items()))
          + f": {events / max(cpu, 1e-9):,.0f} events per CPU-s, {cpu / max(events, 1) * 1e6:.1f} CPU-us per event ("
          + ", ".join(f"{k} {v / max(events, 1) * 1e6:.1f}" for k, v in sorted(used.items()))
          + f") ({_load()})", flush=True)


def _table_sum(my: MariaDBServer, table: str, ts: str = "ts") -> tuple[int, int]:
    """(rows, a checksum of every column of every row) of ``table``; ``ts``: the expression of its ``ts``."""
    count, total = my.execute(f"select count(*), sum(crc32(concat_ws('|', id, name, amount, {ts}, payload))) "
                              f"from {table}")[0]
    return int(count), int(total or 0)


def _mirror(spark, tree: _TreeCpu, my: MariaDBServer, config: dict[str, str], rows: int) -> None:
    """binlog -> Spark -> ExtractNewRecordState -> our JDBC sink (upsert, deletes, as the mirror test) into a
    second throwaway MariaDB; the mirror checked equal to the source (count and checksum) after the run.

    The mirror's ``ts`` is a BIGINT: Debezium's DATETIME(6) is an ``io.debezium.time.MicroTimestamp`` (int64
    microseconds), which Confluent's JDBC sink, as ours, writes as the integer it is (a DATETIME column refuses
    it); the checksum reads the source's ``ts`` as those microseconds."""
    from spark_connect_bridge.connectors.cdc.layout import table_events
    from spark_connect_bridge.transforms import apply_transforms

    with MariaDBServer() as target:
        target.execute("create database mirror")
        target.execute("create table mirror.orders (id int primary key, name varchar(50), amount decimal(12,2), "
                       "ts bigint, payload varchar(200))")
        sink = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "connection.url": f"jdbc:mariadb://127.0.0.1:{target.port}/mirror?user=root",
                "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
                "table.name.format": "orders"}
        unwrap = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
        with tempfile.TemporaryDirectory() as ckpt:
            def start():
                events = table_events(spark.readStream.format("kconnect").options(**config).load(), "bench.orders")
                return (apply_transforms(events, unwrap).writeStream.format("kconnect").options(**sink)
                        .option("checkpointLocation", ckpt).trigger(availableNow=True).start())

            figures = _measured(tree, start)
        _report("Spark -> ExtractNewRecordState -> JDBC sink (MariaDB, upsert)", *figures)
        want = _table_sum(my, "bench.orders", "timestampdiff(microsecond, '1970-01-01', ts)")
        got = _table_sum(target, "mirror.orders")
        print(f"  mirror {'equal to' if got == want else 'DIFFERENT from'} the source: rows, checksum "
              f"{got} (source {want})", flush=True)
        if got != want or got[0] != rows:
            raise SystemExit("the mirror differs from the source")


class _ConnectWorker(KafkaConnectWorker):
    """The reference worker with the JVM's default JIT (the tests' worker compiles with C1 only, for short runs):
    what a Kafka Connect installation runs."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "-XX:TieredStopAtLevel=1"]


def _tree_cpu(root: int) -> float:
    procs = proc_table(reaped=True)
    return sum(procs[p][2] for p in descendants({root}, procs) if p in procs)


def _wait_records(bootstrap: str, topic: str, n: int, connect: KafkaConnectWorker, name: str,
                  timeout: float = 1800) -> float:
    deadline = time.monotonic() + timeout
    while _records_in(bootstrap, [topic]) < n:
        failed = connect.failure(name)
        if failed:
            raise SystemExit(f"Debezium's connector failed:\n{failed}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: fewer than {n} records after {timeout}s")
        time.sleep(0.05)
    return time.monotonic()


def _vs_debezium(spark, tree: _TreeCpu, my: MariaDBServer, config: dict[str, str], rows: int) -> None:
    """Debezium's MariaDbConnector in Kafka Connect and ours -> Kafka, the same binlog, one broker per side, both
    with JsonConverter (schemas off): events/s with and without start-up, CPU per event (the Connect JVM; ours:
    the Spark JVM, its Python workers and source runner, this driver; the brokers and MariaDB not counted)."""
    from spark_connect_bridge.bus.kafka import write_kafka
    from spark_connect_bridge.engine.pipeline import read_stream

    json = "org.apache.kafka.connect.json.JsonConverter"
    converters = {"key.converter": json, "value.converter": json, "key.converter.schemas.enable": "false",
                  "value.converter.schemas.enable": "false"}
    with KafkaBroker() as theirs_kafka, KafkaBroker() as ours_kafka:
        with _ConnectWorker(theirs_kafka.bootstrap, plugins=("debezium-mariadb",), trace_tasks=False,
                            worker={"offset.flush.interval.ms": 10000}) as connect:
            name = "theirs"
            cpu0, t0 = _tree_cpu(connect.process.pid), time.monotonic()
            connect.create({**{k: v for k, v in config.items() if k != "max.records.per.trigger"}, **converters,
                            "name": name, "topic.prefix": "theirs", "database.server.id": "5401",
                            "tasks.max": "1", "schema.history.internal.kafka.bootstrap.servers":
                            theirs_kafka.bootstrap, "schema.history.internal.kafka.topic": "theirs-history"})
            t1 = _wait_records(theirs_kafka.bootstrap, "theirs.bench.orders", rows, connect, name)
            theirs_cpu = _tree_cpu(connect.process.pid) - cpu0
            first, last = first_and_last_times(theirs_kafka.bootstrap, "theirs.bench.orders")
            connect.delete(name)
        ours_config = {**config, **converters, "name": "ours", "topic.prefix": "ours"}
        with tempfile.TemporaryDirectory() as ckpt:
            events, wall, batches, used = _measured(tree, lambda: write_kafka(
                read_stream(spark, ours_config), ours_kafka.bootstrap, checkpoint=ckpt,
                trigger={"availableNow": True}, query_name="ours"))
        got = _records_in(ours_kafka.bootstrap, ["ours.bench.orders"])
        if got != rows:
            raise SystemExit(f"ours -> Kafka: {got} records in ours.bench.orders, not {rows}")
        _report("Spark -> Kafka (JsonConverter)", events, wall, batches, used)
        ours_cpu = sum(used.values())
        print(f"binlog of {rows} single-row inserts -> Kafka (JsonConverter, schemas off), "
              f"{rows} records in <prefix>.bench.orders on each side; Debezium MariaDbConnector 3.5.0.Final, "
              f"Kafka Connect 4.3 standalone (default JIT)")
        _row("events/s, config submitted -> last record", rows / (t1 - t0), rows / wall, "ev/s")
        _row("events/s, start-up excluded", rows / max(last - first, 1e-3), rows / batches, "ev/s")
        _row("CPU-us per event", theirs_cpu / rows * 1e6, ours_cpu / rows * 1e6, "us", higher_is_better=False)


def _row(what: str, theirs: float, ours: float, unit: str, higher_is_better: bool = True) -> None:
    ratio = (ours / theirs if higher_is_better else theirs / ours) if theirs and ours else float("nan")
    print(f"  {what:<44} Debezium {theirs:10.4g} {unit:<5} ours {ours:10.4g} {unit:<5} ratio ours/Debezium "
          f"{ratio:5.2f}x{'' if higher_is_better else ' (of the CPU: > 1 ours uses less)'}  ({_load()})", flush=True)


def main(rows: int, schema_changes: str = "true") -> None:
    with MariaDBServer(settings={"max-binlog-size": "1G"}) as my:
        began = time.perf_counter()
        _generate(my, rows)
        print(f"generated {rows} single-row inserts (1000 per commit) in {time.perf_counter() - began:.1f} s")
        config = {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "database.hostname": "127.0.0.1",
                  "database.port": str(my.port), "database.user": "root", "database.server.id": "99",
                  "topic.prefix": "bench", "database.include.list": "bench", "snapshot.mode": "never",
                  "max.records.per.trigger": "100000", "include.schema.changes": schema_changes}

        n, secs = _library(my, min(rows, 20_000))
        lib = n / secs
        print(f"python-mysql-replication, {n} rows: {secs:.1f} s, {lib:,.0f} rows/s ({_load()})")

        source = build_connector(config, kind="source")
        assert isinstance(source, SourceConnector)
        pos = canonical(source.initial_offsets())
        got, began, cpu = 0, time.perf_counter(), time.process_time()
        while True:
            end = canonical(source.latest_offsets(pos, 100_000, None))
            if end == pos:
                break
            for task in source.plan(pos, end):
                for rng in task.ranges:
                    got += sum(b.num_rows for b in source.read_range(rng))
            pos = end
        secs, cpu = time.perf_counter() - began, time.process_time() - cpu
        raw = got / secs
        print(f"connector in-process, {got} events: {secs:.1f} s, {raw:,.0f} events/s; {cpu:.2f} CPU-s, "
              f"{got / cpu:,.0f} events per CPU-s, {cpu / got * 1e6:.1f} CPU-us per event ({_load()})", flush=True)

        spark = _spark()
        tree = _TreeCpu(spark.sparkContext._gateway.proc.pid)  # spark-class execs the JVM: the same process
        steady = 0.0
        for run in ("first query", "steady state"):
            with tempfile.TemporaryDirectory() as ckpt:
                figures = _measured(tree, lambda: spark.readStream.format("kconnect").options(**config).load()
                                    .writeStream.format("noop").option("checkpointLocation", ckpt)
                                    .trigger(availableNow=True).start())
            _report(f"Spark -> noop, {run}", *figures)
            steady = figures[0] / figures[2]
        print(f"ratio Spark -> noop steady state (batches) / connector in-process: {steady / raw:.2f}; "
              f"connector in-process / python-mysql-replication: {raw / lib:.1f}x", flush=True)
        _mirror(spark, tree, my, config, rows)
        _vs_debezium(spark, tree, my, config, rows)
        tree.close()
        spark.stop()


if __name__ == "__main__":
    threading.stack_size(16 << 20)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000, sys.argv[2] if len(sys.argv) > 2 else "true")
