"""Kafka Connect 4.3 against ours on the same config in one run, each figure for both with the ratio (ours / Kafka
Connect: > 1 means ours is faster; for CPU, Kafka Connect's / ours) and CPU seconds per record.

* ``filestream N``: FileStreamSource over an N-line file, then the eight-SMT chain of the differential tests
  (Cast, HoistField, InsertField, MaskField, ReplaceField, ValueToKey, InsertHeader, RegexRouter), JsonConverter
  with schemas, into Kafka (a broker per side). Time from the config submitted to the last record in the topic
  (Kafka Connect) or the end of the ``availableNow`` query (ours); Kafka Connect's figure without its start-up is
  its first record's CreateTime to its last. Two rounds per side: the first connector of a fresh worker / Spark
  session (whose JVM compiles the path: the JIT's CPU is counted), then a second connector over a new file (the
  steady state a long-running pipeline sees).
* ``jdbc-sink N``: a topic of N Debezium change events (JSON with schemas, made once by ours) into PostgreSQL
  by Debezium's JDBC sink 3.5 (upsert by key) and by ours (ExtractNewRecordState, Confluent's JDBC sink, upsert
  by key), from the same topic, until every row is in its table; two rounds per side as above (a second
  connector into another database). Debezium's figure without start-up: from its first rows in the table
  (polled every 0.2 s) to the last; ours: the sum of the batches' ``triggerExecution``.

CPU: the Kafka Connect JVM; for ours the Spark JVM, its Python workers and this driver (brokers and PostgreSQL
not counted on either side). The machine is shared: the load average is printed with each figure.

    .venv/bin/python bench/bench_vs_kafka_connect.py filestream 1000000
    .venv/bin/python bench/bench_vs_kafka_connect.py jdbc-sink 200000
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from bench_vs_debezium import (
    _cpu,
    _cpu_split,
    _ours_roots,
    _row,
    _spark,
    _split_line,
    _wait_records,
)

from tests.differential.test_filestream_smts import CASES
from tests.support.kafka import KafkaBroker
from tests.support.kafka_connect import KafkaConnectWorker, _records_in, first_and_last_times
from tests.support.postgres import PostgresCluster

JSON = "org.apache.kafka.connect.json.JsonConverter"


def filestream(n: int) -> None:
    from spark_connect_bridge.bus.kafka import write_kafka
    from spark_connect_bridge.engine.pipeline import read_stream

    folder = tempfile.mkdtemp(prefix="bench-filestream-")
    _, topic, settings = CASES["eight-smt-chain"]
    routed = "eight-smt-routed"

    def config(round_: int) -> dict[str, str]:
        path = os.path.join(folder, f"numbers-{round_}.txt")
        with open(path, "w") as f:
            f.writelines(f"{i}\n" for i in range(n))
        return {"name": f"chain{round_}", "connector.class": "FileStreamSource", "file": path, "topic": topic,
                **settings}

    print(f"FileStreamSource, {n} lines, eight SMTs, JsonConverter with schemas -> Kafka; round 1 is each side's "
          f"first connector (its JVM's first run of this path: JIT compilation included), round 2 a second "
          f"connector over a new file of {n} lines in the same JVM")
    with KafkaBroker() as theirs_kafka, KafkaBroker() as ours_kafka:
        spark = _spark()
        spark.range(1).collect()  # the session is up, as a worker's is
        theirs = []
        with KafkaConnectWorker(theirs_kafka.bootstrap, trace_tasks=False,
                                worker={"offset.flush.interval.ms": 10000}) as connect:
            for round_ in (1, 2):
                cpu0, t0 = _cpu({connect.process.pid}), time.monotonic()
                connect.create({**config(round_), "batch.size": 10000})
                t1 = _wait_records(theirs_kafka.bootstrap, routed, n * round_)
                first, last = first_and_last_times(theirs_kafka.bootstrap, routed, n * (round_ - 1))
                theirs.append((t1 - t0, last - first, _cpu({connect.process.pid}) - cpu0))
        roots = _ours_roots(spark)
        for round_ in (1, 2):
            split0, cpu0, t2 = _cpu_split(roots), _cpu(roots), time.monotonic()
            query = write_kafka(read_stream(spark, config(round_)), ours_kafka.bootstrap,
                                checkpoint=f"/tmp/bench-filestream-{uuid.uuid4().hex[:8]}",
                                trigger={"availableNow": True})
            query.awaitTermination()
            t3 = time.monotonic()
            ours_cpu, split1 = _cpu(roots) - cpu0, _cpu_split(roots)
            batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
            assert _records_in(ours_kafka.bootstrap, [routed]) == n * round_
            wall, steady, cpu = theirs[round_ - 1]
            _row(f"round {round_}: records/s, start-up included", n / wall, n / (t3 - t2), "rec/s",
                 them="Kafka Connect")
            _row(f"round {round_}: records/s, start-up excluded", n / max(steady, 1e-3), n / batches, "rec/s",
                 them="Kafka Connect")
            _row(f"round {round_}: CPU s/record", cpu / n, ours_cpu / n, "s", higher_is_better=False,
                 them="Kafka Connect")
            _split_line(split0, split1, n)
        spark.stop()


def _table_rows(pg: PostgresCluster, db: str, table: str) -> int:
    import psycopg

    try:
        return pg.execute(f'select count(*) from "{table}"', database=db)[0][0]
    except psycopg.errors.UndefinedTable:  # the sink has not created it yet
        return 0


def orders_to_kafka(pg, kafka, spark, n: int) -> str:
    """An ``orders`` table of ``n`` rows in a new database, snapshotted by ours' Debezium PostgreSQL source into the
    topic ``src.public.orders`` (JSON with schemas); returns the database."""
    from spark_connect_bridge.bus.kafka import write_kafka
    from spark_connect_bridge.engine.pipeline import read_stream

    source_db = pg.new_database("source")
    pg.execute("create table orders (id bigint primary key, customer int, note text, amount numeric(12,2), "
               "at timestamptz)", database=source_db)
    pg.execute(f"insert into orders select g, g % 100, 'note ' || g, g * 0.01, timestamptz '2024-01-01 "
               f"00:00:00+00' + g * interval '1 second' from generate_series(1, {n}) g", database=source_db)
    source = {"name": "src", "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
              **pg.connector_config(source_db), "topic.prefix": "src", "slot.name": "bench_src",
              "key.converter": JSON, "value.converter": JSON}
    write_kafka(read_stream(spark, source), kafka.bootstrap, checkpoint=f"/tmp/bench-jdbc-src-{uuid.uuid4().hex[:8]}",
                trigger={"availableNow": True}).awaitTermination()
    return source_db


def jdbc_sink_config(name: str, url: str) -> dict[str, str]:
    """Ours' JDBC sink of ``src.public.orders`` into ``url``: upsert by key, Debezium's envelope unwrapped."""
    return {"name": name, "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "topics": "src.public.orders", "connection.url": url, "connection.user": "postgres",
            "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true", "auto.create": "true",
            "table.name.format": "orders", "key.converter": JSON, "value.converter": JSON, "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}


def jdbc_sink(n: int) -> None:
    from spark_connect_bridge.bus.kafka import sink_stream

    with PostgresCluster() as pg, KafkaBroker() as kafka:
        spark = _spark()
        orders_to_kafka(pg, kafka, spark, n)
        topic = "src.public.orders"
        url = f"jdbc:postgresql://127.0.0.1:{pg.port}/"
        print(f"JDBC sink: {n} Debezium change events (JSON with schemas) -> PostgreSQL, upsert by key; round 1 is "
              f"each side's first connector (its JVM's first run of this path), round 2 a second connector into "
              f"another database in the same JVM")
        theirs = []
        with KafkaConnectWorker(kafka.bootstrap, plugins=("debezium-jdbc",), trace_tasks=False,
                                worker={"offset.flush.interval.ms": 10000}) as connect:
            for round_ in (1, 2):
                db = pg.new_database(f"theirs{round_}")
                cpu0, t0 = _cpu({connect.process.pid}), time.monotonic()
                connect.create({"name": f"theirs{round_}", "connector.class":
                                "io.debezium.connector.jdbc.JdbcSinkConnector", "topics": topic,
                                "connection.url": url + db, "connection.username": "postgres",
                                "connection.password": "", "insert.mode": "upsert",
                                "primary.key.mode": "record_key", "delete.enabled": "true",
                                "schema.evolution": "basic", "key.converter": JSON, "value.converter": JSON,
                                "collection.name.format": "orders"})
                first = None
                while (rows := _table_rows(pg, db, "orders")) < n:
                    if rows and first is None:
                        first = time.monotonic()  # its first rows are in (polled every 0.2 s)
                    time.sleep(0.2)
                t1 = time.monotonic()
                theirs.append((t1 - t0, t1 - (first or t0), _cpu({connect.process.pid}) - cpu0))
                connect.delete(f"theirs{round_}")
        roots = _ours_roots(spark)
        for round_ in (1, 2):
            db = pg.new_database(f"ours{round_}")
            split0, cpu0, t2 = _cpu_split(roots), _cpu(roots), time.monotonic()
            query = sink_stream(spark, jdbc_sink_config(f"ours{round_}", url + db),
                                bus=kafka.bootstrap, checkpoint=f"/tmp/bench-jdbc-{uuid.uuid4().hex[:8]}",
                                trigger={"availableNow": True})
            query.awaitTermination()
            t3 = time.monotonic()
            ours_cpu, split1 = _cpu(roots) - cpu0, _cpu_split(roots)
            batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
            assert _table_rows(pg, db, "orders") == n
            wall, steady, cpu = theirs[round_ - 1]
            _row(f"round {round_}: records/s, start-up included", n / wall, n / (t3 - t2), "rec/s")
            _row(f"round {round_}: records/s, start-up excluded", n / max(steady, 1e-3), n / batches, "rec/s")
            _row(f"round {round_}: CPU s/record", cpu / n, ours_cpu / n, "s", higher_is_better=False)
            _split_line(split0, split1, n)
        spark.stop()


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "filestream"
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    if command == "filestream":
        filestream(size)
    elif command == "jdbc-sink":
        jdbc_sink(size)
    else:
        raise SystemExit(f"unknown command {command!r}: filestream N | jdbc-sink N")
