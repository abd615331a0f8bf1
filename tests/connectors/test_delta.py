"""Delta sink and source connectors on both engines: ``delta-spark`` (Delta's own JVM writer and streaming
source, loaded into the test session from Maven Central) and ``deltalake`` (delta-rs). The tests of what a user
does (exactly-once appends, also across a killed driver; CDC MERGE; partitioning; per-topic tables; schema
evolution; table properties and the change data feed; streaming a table) run on both engines with the same
assertions, and every table is read back by both (deltalake and Delta's own reader), so a table written by one
engine is read by the other. Where the engines differ, the test says so and checks each side. Tests of the
deltalake engine's own machinery (its commit checks, staging, the connector objects) say so in their
docstring."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import functions as F

from spark_connect_bridge.connectors import delta_files
from spark_connect_bridge.connectors.base import CommitContext, WriteContext, checkpoint_app_id
from spark_connect_bridge.connectors.delta import last_per_key, rows_arrow
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.engine import delta_spark as delta_spark_engine
from spark_connect_bridge.errors import ConfigError, ConnectError, DataError
from tests.contract.contract import SinkContract, SourceContract

REPO = Path(__file__).resolve().parents[2]
ENGINES = ("delta-spark", "deltalake")


@pytest.fixture(scope="module")
def delta_spark(spark):
    """The test session, with Delta's log replay on 2 partitions instead of 50 (a 2-core machine)."""
    key = "spark.databricks.delta.snapshotPartitions"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "2")
    yield spark
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


@pytest.fixture(params=ENGINES)
def engine(request, delta_spark) -> str:
    """The Delta engine a test runs on (the session has Delta loaded, so both are available)."""
    return request.param


def _sink(path: Path, **extra: str) -> dict:
    return {"connector.class": "delta-sink", "delta.table.path": str(path), **extra}


def _rows(path: Path, *cols: str) -> list:
    t = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def _spark_rows(spark, path: Path):
    """The table read by Spark as plain Parquet from the files the Delta log lists."""
    return spark.read.parquet(*DeltaTable(str(path)).file_uris())


def _read_both(spark, path: Path, *cols: str) -> list:
    """The table's rows (sorted tuples of ``cols``) as deltalake reads them, checked equal to what Delta's own
    reader (``spark.read.format("delta")``) gives."""
    by_deltalake = _rows(path, *cols)
    by_delta_spark = sorted(tuple(r[c] for c in cols) for r in spark.read.format("delta").load(str(path)).collect())
    assert by_deltalake == by_delta_spark
    return by_deltalake


def _writers(path: Path) -> set[str]:
    """Which engines committed the table's versions, from their commitInfo (Delta's writer records
    engineInfo "Apache-Spark/... Delta-Lake/...", delta-rs its clientVersion "delta-rs.<version>")."""
    out = set()
    for v in range(delta_files.latest_version(path) + 1):
        info = next((a["commitInfo"] for a in delta_files.read_commit(path, v) if "commitInfo" in a), {})
        if "Delta-Lake" in str(info.get("engineInfo", "")):
            out.add("delta-spark")
        elif str(info.get("clientVersion", "")).startswith("delta-rs"):
            out.add("deltalake")
        else:
            out.add(f"unknown: {info}")
    return out


def _collect(stream_df, ckpt: Path) -> list:
    """Every row of a streaming DataFrame, read with an availableNow trigger (one list per micro-batch)."""
    batches = []
    (stream_df.writeStream.foreachBatch(lambda d, i: batches.append(d.collect()))
     .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start().awaitTermination())
    return [b for b in batches if b]


# ------------------------------------------------------------------------------------------ contracts
class TestDeltaSourceContract(SourceContract):
    """The kconnect data source's contract (deltalake engine: its offsets are table versions; Delta's own source
    keeps its offsets in Spark's checkpoint and has no connector object to hold to the contract)."""

    bad_configs = [({"delta.table.path": None}, "delta.table.path"),
                   ({"delta.source.starting.version": "-2"}, "delta.source.starting.version"),
                   ({"topics": "a"}, "topics"), ({"delta.table.pth": "x"}, "delta.table.pth")]
    batch_bound = 4

    def source_config(self, tmp_path: Path) -> dict:
        path = tmp_path / "src"
        if not path.exists():
            for v in range(3):  # three versions of four rows
                write_deltalake(str(path), pa.table({"id": pa.array(range(v * 4, v * 4 + 4), pa.int64()),
                                                     "name": [f"n{i}" for i in range(v * 4, v * 4 + 4)]}),
                                mode="append")
        return {"connector.class": "delta-source", "delta.table.path": str(path)}

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        write_deltalake(config["delta.table.path"], pa.table({"id": pa.array([100, 101], pa.int64()),
                                                              "name": ["late", "later"]}), mode="append")
        return config


class TestDeltaSinkContract(SinkContract):
    """The kconnect data source's sink contract (deltalake engine; the delta-spark engine's replays and restarts
    are tested below on both engines)."""

    def sink_config(self, tmp_path: Path) -> dict:
        return _sink(tmp_path / "table")

    def read_back(self, config: dict) -> list[str]:
        path = config["delta.table.path"]
        if delta_files.latest_version(path) is None:
            return []
        return DeltaTable(path).to_pyarrow_table().column("value").to_pylist()


# ------------------------------------------------------------------------------------------ append
#: The kill scenario's datagen config: two tasks of 2,000 records, 100 records a trigger in the killed driver (its
#: two queries are killed once both committed: neither is near its end by then).
KILLED_SOURCE = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
                 "iterations": "2000", "max.interval": "0", "tasks.max": "2", "max.records.per.trigger": "100"}


@pytest.fixture(scope="module")
def killed_driver(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """One child driver runs a datagen → Delta query per engine, each with its own table and checkpoint, and is
    killed with SIGKILL mid-stream, once both committed (one driver start for both engines):
    {engine: (table, checkpoint)}."""
    where = tmp_path_factory.mktemp("killed-driver")
    runs = {engine: (where / engine / "orders", where / engine / "ckpt") for engine in ENGINES}
    script = textwrap.dedent("""
        import json, sys
        from pyspark.sql import SparkSession
        from spark_connect_bridge.engine import delta_spark as delta_spark_engine
        from spark_connect_bridge.jvm import configure_spark
        spark = (configure_spark(SparkSession.builder).master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.databricks.delta.snapshotPartitions", "2").getOrCreate())
        for sink, checkpoint, engine in json.loads(sys.argv[2]):
            df = spark.readStream.format("kconnect").options(**json.loads(sys.argv[1])).load()
            delta_spark_engine.write_stream(df, sink, checkpoint=checkpoint, engine=engine,
                                            trigger={"processingTime": "1 second"})
        spark.streams.awaitAnyTermination()
    """)
    queries = [(_sink(table), str(ckpt), engine) for engine, (table, ckpt) in runs.items()]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(KILLED_SOURCE), json.dumps(queries)], env=env,
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 400
        while any((delta_files.latest_version(table) or -1) < 1 for table, _ in runs.values()):
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the child driver did not commit on both engines"
            time.sleep(0.2)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        child.wait()
    return runs


def test_append_is_exactly_once_across_a_killed_driver(spark, engine, killed_driver):
    """A datagen → Delta query runs in a child driver that is killed with SIGKILL mid-stream (the
    ``killed_driver`` fixture: one driver, a query per engine); restarted on the same checkpoint, every record is
    in the table once, and the table's app transaction is the checkpoint's last batch."""
    table, ckpt = killed_driver[engine]
    killed_at = DeltaTable(str(table)).to_pyarrow_table().num_rows
    assert 0 < killed_at < 4000
    # The restarted driver replays the batch the kill interrupted, then reads the rest without a bound.
    cfg = {k: v for k, v in KILLED_SOURCE.items() if k != "max.records.per.trigger"}
    df = spark.readStream.format("kconnect").options(**cfg).load()
    delta_spark_engine.write_stream(df, _sink(table), checkpoint=str(ckpt), engine=engine,
                              trigger={"availableNow": True}).awaitTermination()
    assert _writers(table) == {engine}
    got = _spark_rows(spark, table)
    expected = spark.read.format("kconnect").options(**cfg).load().select("value.*")
    assert got.count() == 4000
    assert got.select("orderid").distinct().count() == 4000
    assert got.exceptAll(expected.select(*got.columns)).count() == 0
    assert spark.read.format("delta").load(str(table)).select("orderid").distinct().count() == 4000
    dt = DeltaTable(str(table))
    assert dt.to_pyarrow_table().num_rows == 4000
    # One app transaction, the checkpoint's on both engines: the last batch id the checkpoint committed.
    last_batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    apps = {a["txn"]["appId"] for v in range(dt.version() + 1) for a in delta_files.read_commit(table, v)
            if "txn" in a}
    assert apps == {checkpoint_app_id(str(ckpt))}
    assert dt.transaction_version(apps.pop()) == last_batch


def test_partitioned_table_reads_back_with_spark_and_deltalake(delta_spark, engine, tmp_path):
    spark = delta_spark
    table = tmp_path / "t"
    df = spark.range(0, 40, 1, 2).select(
        F.col("id").cast("int").alias("key"),
        F.struct(F.col("id"), (F.col("id") % 3).cast("string").alias("bucket"),
                 F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 2).cast("int")).alias("day"),
                 F.array(F.col("id")).alias("ids")).alias("value"),
        F.lit("t").alias("topic"))
    delta_spark_engine.write_batch(df, _sink(table, **{"delta.partition.by": "bucket,day"}), engine=engine)
    assert _writers(table) == {engine}
    dt = DeltaTable(str(table))
    assert dt.metadata().partition_columns == ["bucket", "day"]
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(40))
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        back = spark.read.option("basePath", str(table)).parquet(*dt.file_uris())
        rows = sorted((r.id, r.bucket, r.day, r.ids) for r in back.collect())
    finally:
        spark.conf.unset("spark.sql.sources.partitionColumnTypeInference.enabled")
    assert rows == sorted((i, str(i % 3), f"2024-01-0{1 + i % 2}", [i]) for i in range(40))
    assert _read_both(spark, table, "id", "bucket", "day") == \
        sorted((i, str(i % 3), datetime.date(2024, 1, 1 + i % 2)) for i in range(40))
    # The file statistics deltalake uses for skipping are right.
    assert dt.to_pyarrow_dataset().to_table(filter=pa.compute.field("id") >= 35).num_rows == 5


def test_replayed_batch_is_skipped_and_its_files_removed(tmp_path):
    """deltalake engine internals: the connector's executor files of a replayed batch are deleted (Delta's own
    writer skips a replayed txnVersion before writing any file)."""
    table = tmp_path / "t"
    sink = build_connector(_sink(table), kind="sink")
    data = pa.table({"a": pa.array([1, 2, 3], pa.int64())})
    m0 = sink.write(iter(data.to_batches()), WriteContext("app", 0, 0, 0))
    sink.commit([m0], CommitContext("app", 0))
    again = sink.write(iter(data.to_batches()), WriteContext("app", 0, 0, 1))
    sink.commit([again], CommitContext("app", 0))
    assert DeltaTable(str(table)).version() == 0
    assert _rows(table, "a") == [(1,), (2,), (3,)]
    files = {p.name for p in table.glob("*.parquet")}
    assert files == {os.path.basename(DeltaTable(str(table)).file_uris()[0])}


def test_commit_checks_what_deltalake_does_not(tmp_path):
    """deltalake engine internals: commit_files checks what delta-rs does not (Delta's own writer does)."""
    table = tmp_path / "t"
    data = pa.table({"a": pa.array([1, 2], pa.int64())})
    files = delta_files.write_files(str(table), data)
    delta_files.commit_files(str(table), files, app_id="app", batch_id=5)
    # 1. a file that does not exist is never committed
    ghost = delta_files.write_files(str(table), data)
    os.remove(table / ghost[0].path)
    with pytest.raises(ConnectError, match="is missing"):
        delta_files.commit_files(str(table), ghost, app_id="app", batch_id=6)
    # 2. a file whose schema does not fit the table
    bad = delta_files.write_files(str(table), pa.table({"a": ["x"]}))
    with pytest.raises(DataError, match="column a is int64 in the table and string in the data"):
        delta_files.commit_files(str(table), bad, app_id="app", batch_id=6)
    # 3. the app transaction never moves back (an older batch is a replay: skipped, files removed)
    old = delta_files.write_files(str(table), data)
    assert delta_files.commit_files(str(table), old, app_id="app", batch_id=3) is False
    assert not (table / old[0].path).exists()
    dt = DeltaTable(str(table))
    assert dt.transaction_version("app") == 5 and dt.version() == 0


def test_schema_evolution_adds_columns_and_casts_narrower_types_up(tmp_path):
    """deltalake engine internals: reconcile_schema through the connector objects (both engines through the
    public API: test_schema_evolution_on_both_engines)."""
    table = tmp_path / "t"
    sink = build_connector(_sink(table, **{"delta.schema.evolution": "true"}), kind="sink")
    strict = build_connector(_sink(table), kind="sink")

    def put(s, data, batch):
        s.commit([s.write(iter(data.to_batches()), WriteContext("app", batch, 0, 0))], CommitContext("app", batch))

    put(sink, pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}), 0)
    with pytest.raises(DataError, match=r"columns the table lacks \(extra\)"):
        put(strict, pa.table({"id": pa.array([2], pa.int64()), "extra": [1.5]}), 1)
    put(sink, pa.table({"id": pa.array([2], pa.int32()), "extra": [1.5]}), 1)  # new column, int32 → bigint
    put(sink, pa.table({"id": pa.array([3], pa.int64()), "extra": pa.array([2], pa.int8())}), 2)  # int8 → double
    with pytest.raises(DataError, match="column name is string in the table and binary in the data, which is not"):
        put(sink, pa.table({"id": pa.array([4], pa.int64()), "name": pa.array([b"x"])}), 3)
    narrow = tmp_path / "narrow"
    narrow_files = delta_files.write_files(str(narrow), pa.table({"n": pa.array([1], pa.int32())}))
    delta_files.commit_files(str(narrow), narrow_files,
                              app_id="app", batch_id=0)
    with pytest.raises(DataError, match="column n is int32 in the table and int64 in the data: widening the table"):
        delta_files.reconcile_schema(delta_files.table_schema(str(narrow)), pa.schema([("n", pa.int64())]),
                                      evolve=True, where="narrow")
    dt = DeltaTable(str(table))
    assert [(f.name, str(f.type)) for f in pa.schema(dt.schema().to_arrow())] == \
        [("id", "int64"), ("name", "string"), ("extra", "double")]
    assert _rows(table, "id", "name", "extra") == [(1, "a", None), (2, None, 1.5), (3, None, 2.0)]
    assert dt.transaction_version("app") == 2


def test_tombstones_have_no_row_in_append_mode(caplog):
    """deltalake engine internals (rows_arrow); both engines: test_per_topic_tables."""
    sink = build_connector(_sink(Path("/tmp/unused")), kind="sink")
    value = pa.array([{"a": 1}, None], pa.struct([("a", pa.int64())]))
    rows, _ = rows_arrow(pa.table({"key": [1, 2], "value": value, "topic": ["t", "t"]}), sink.config)
    assert rows.to_pylist() == [{"a": 1}]
    assert "1 records with a null value" in caplog.text


def test_per_topic_tables(delta_spark, engine, tmp_path):
    """${topic} names one table per topic; a tombstone (null value) has no row in append mode."""
    df = delta_spark.createDataFrame([("a", 1), ("b", 2), ("a", 3), ("b", None)], "topic string, n int") \
        .select(F.lit(None).cast("binary").alias("key"),
                F.when(F.col("n").isNotNull(), F.struct("n")).alias("value"), "topic")
    delta_spark_engine.write_batch(df, _sink(tmp_path / "${topic}"), engine=engine)
    assert _read_both(delta_spark, tmp_path / "a", "n") == [(1,), (3,)]
    assert _read_both(delta_spark, tmp_path / "b", "n") == [(2,)]
    assert _writers(tmp_path / "a") == _writers(tmp_path / "b") == {engine}


@pytest.mark.parametrize("config, key", [
    ({}, "delta.table.path"),
    ({"delta.table.path": "/x", "topics.dir": "/y"}, "topics.dir"),
    ({"delta.table.path": "/x", "delta.write.mode": "upsert"}, "delta.write.mode"),
    ({"delta.table.path": "/x", "delta.write.mode": "merge", "delta.table.columns": "record"},
     "delta.table.columns"),
    ({"delta.table.path": "/x", "delta.table.properties": "nokey"}, "delta.table.properties"),
    ({"delta.table.path": "/x", "delta.merge.key": "id"}, "delta.merge.keys"),  # did you mean
])
def test_sink_config_errors_name_the_key(config, key):
    with pytest.raises(ConfigError) as info:
        build_connector({"connector.class": "delta-sink", **config}, kind="sink")
    assert key in str(info.value)


def test_merge_without_keys_fails_before_data_moves(delta_spark, engine, tmp_path):
    df = delta_spark.createDataFrame([(1, "a")], "id long, name string") \
        .select(F.lit(1).alias("key"), F.struct("id", "name").alias("value"), F.lit("t").alias("topic"))
    with pytest.raises(ConfigError, match=r"delta.merge.keys"):
        delta_spark_engine.write_batch(df, _sink(tmp_path / "t", **{"delta.write.mode": "merge"}), engine=engine)
    assert not (tmp_path / "t" / "_delta_log").exists()


def test_kconnect_data_source_runs_the_deltalake_engine(delta_spark, tmp_path):
    """format("kconnect") is a Python data source: its writer gets Arrow batches in Python workers, where Delta's
    JVM writer cannot be called. delta.engine=auto writes with deltalake there, and delta.engine=delta-spark is a
    config error that names the call that applies it, before any data moves."""
    df = delta_spark.createDataFrame([(1,)], "n int").select(F.lit(None).cast("binary").alias("key"),
                                                             F.struct("n").alias("value"), F.lit("t").alias("topic"))
    with pytest.raises(Exception, match=r"delta.engine.*delta_spark.write_stream"):
        df.write.format("kconnect").options(**_sink(tmp_path / "t", **{"delta.engine": "delta-spark"})) \
            .mode("append").save()
    assert not (tmp_path / "t").exists()
    df.write.format("kconnect").options(**_sink(tmp_path / "t")).mode("append").save()
    assert _writers(tmp_path / "t") == {"deltalake"}
    with pytest.raises(Exception, match=r"delta.engine.*delta_spark.read_stream"):
        delta_spark.read.format("kconnect").options(**{"connector.class": "delta-source", "delta.engine": "delta-spark",
                                                       "delta.table.path": str(tmp_path / "t")}).load()


# ------------------------------------------------------------------------------------------ CDC merge
_ROW = "struct<id:bigint,name:string,qty:int>"
_ENVELOPE = f"struct<op:string,before:{_ROW},after:{_ROW},source:struct<lsn:bigint>,ts_ms:bigint>"


def _debezium_events() -> tuple[list[dict], dict[int, dict]]:
    """Debezium change events for table rows keyed by id, and the source table they lead to."""
    events, table, lsn = [], {}, 0

    def emit(op, before, after):
        nonlocal lsn
        lsn += 10
        key = (after or before)["id"]
        events.append({"key": {"id": key}, "value": {"op": op, "before": before, "after": after,
                                                     "source": {"lsn": lsn}, "ts_ms": 1700000000000 + lsn}})
        if op == "d":
            events.append({"key": {"id": key}, "value": None})  # Debezium's tombstone after a delete
            table.pop(key, None)
        else:
            table[key] = after

    for i in range(12):
        emit("r" if i < 4 else "c", None, {"id": i, "name": f"n{i}", "qty": i})
    for i in range(0, 12, 3):
        emit("u", None, {"id": i, "name": f"n{i}-v2", "qty": i * 10})
    for i in (1, 4, 9):
        emit("d", {"id": i, "name": None, "qty": None}, None)  # default replica identity: key only
    emit("c", None, {"id": 4, "name": "n4-again", "qty": 44})  # re-insert after delete
    for i in range(0, 12, 3):
        emit("u", None, {"id": i, "name": f"n{i}-v3", "qty": i * 100})
    emit("d", {"id": 6, "name": "n6-v3", "qty": 600}, None)
    return events, table


def test_debezium_events_applied_with_merge_equal_the_source_table(delta_spark, engine, tmp_path):
    """Debezium envelopes go through a FileStreamSource of JSON lines, small micro-batches with several changes
    per key, a MERGE sink, a lost commit and a restart (the PostgreSQL connector's own events:
    test_delta_postgres.py)."""
    spark = delta_spark
    events, expected = _debezium_events()
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    table, ckpt = tmp_path / "mirror", tmp_path / "ckpt"
    sink = _sink(table, **{"delta.write.mode": "merge", "delta.merge.order.by": "source.lsn"})

    def run():
        df = (spark.readStream.format("kconnect")
              .options(**{"connector.class": "FileStreamSource", "file": str(src), "topic": "pg.public.items",
                          "max.records.per.trigger": "9"}).load()
              .withColumn("parsed", F.from_json("value", f"struct<key:struct<id:bigint>,value:{_ENVELOPE}>"))
              .select(F.col("parsed.key").alias("key"), F.col("parsed.value").alias("value"), "topic",
                      "partition", "offset", "timestamp", "headers"))
        delta_spark_engine.write_stream(df, sink, checkpoint=str(ckpt), engine=engine,
                                  trigger={"availableNow": True}).awaitTermination()

    run()
    want = sorted((k, r["name"], r["qty"]) for k, r in expected.items())
    assert _read_both(spark, table, "id", "name", "qty") == want
    assert _writers(table) == {engine}
    # Spark lost its last commit: the batch is replayed and recognised, the table does not change.
    version = DeltaTable(str(table)).version()
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    assert DeltaTable(str(table)).version() == version
    assert _read_both(spark, table, "id", "name", "qty") == want
    assert sorted((r.id, r.name, r.qty) for r in _spark_rows(spark, table).collect()) == want
    last_batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    assert DeltaTable(str(table)).transaction_version(checkpoint_app_id(str(ckpt))) == last_batch
    assert not list((table / "_kconnect_staging").rglob("*.parquet"))


def test_row_changes_merge_with_tombstones_and_deleted_flags(delta_spark, engine, tmp_path):
    """Rows after ExtractNewRecordState: a tombstone or __deleted=true deletes the key, the last change of a key
    in a batch wins (by record position), __deleted is not a column; a later batch adds a column (schema
    evolution in MERGE); a replayed batch id changes nothing."""
    table = tmp_path / "t"
    sink = _sink(table, **{"delta.write.mode": "merge", "delta.schema.evolution": "true"})
    rows = [(0, 1, '{"id": 1, "v": "a", "__deleted": "false"}'), (1, 2, '{"id": 2, "v": "b", "__deleted": "false"}'),
            (2, 3, '{"id": 3, "v": "c", "__deleted": "false"}'), (3, 2, None),
            (4, 3, '{"id": 3, "v": "c", "__deleted": "true"}'), (5, 4, '{"id": 4, "v": "d", "__deleted": "false"}')]
    df = delta_spark.createDataFrame(rows, "offset long, id long, v string").select(
        F.struct("id").alias("key"), F.from_json("v", "struct<id:bigint,v:string,__deleted:string>").alias("value"),
        F.lit("t").alias("topic"), F.lit(0).alias("partition"), "offset")
    delta_spark_engine.write_batch(df, sink, engine=engine, app_id="app", batch_id=0)
    assert _read_both(delta_spark, table, "id", "v") == [(1, "a"), (4, "d")]
    assert "__deleted" not in DeltaTable(str(table)).schema().to_arrow().names
    later = delta_spark.createDataFrame([(1, "a2", 7)], "id long, v string, w int").select(
        F.struct("id").alias("key"), F.struct("id", "v", "w").alias("value"), F.lit("t").alias("topic"))
    delta_spark_engine.write_batch(later, sink, engine=engine, app_id="app", batch_id=1)
    version = DeltaTable(str(table)).version()
    replay = delta_spark.createDataFrame([(4, "never", 0)], "id long, v string, w int").select(
        F.struct("id").alias("key"), F.struct("id", "v", "w").alias("value"), F.lit("t").alias("topic"))
    delta_spark_engine.write_batch(replay, sink, engine=engine, app_id="app", batch_id=1)
    assert DeltaTable(str(table)).version() == version
    assert _read_both(delta_spark, table, "id", "v", "w") == [(1, "a2", 7), (4, "d", None)]
    dt = DeltaTable(str(table))
    assert dt.transaction_version("app") == 1
    assert _writers(table) == {engine}


def test_unwrapped_rows_merge_with_tombstones_and_rewrite_deletes(tmp_path):
    """deltalake engine internals: changes staged by two tasks of one batch are ordered across tasks on the
    driver (both engines through the public API: test_row_changes_merge_with_tombstones_and_deleted_flags)."""
    table = tmp_path / "t"
    sink = build_connector(_sink(table, **{"delta.write.mode": "merge", "delta.schema.evolution": "true"}),
                           kind="sink")
    row_t = pa.struct([("id", pa.int64()), ("v", pa.string()), ("__deleted", pa.string())])
    batch = pa.table({
        "key": pa.array([{"id": 1}, {"id": 2}, {"id": 3}, {"id": 2}, {"id": 3}], pa.struct([("id", pa.int64())])),
        "value": pa.array([{"id": 1, "v": "a", "__deleted": "false"}, {"id": 2, "v": "b", "__deleted": "false"},
                           {"id": 3, "v": "c", "__deleted": "false"}, None,
                           {"id": 3, "v": "c", "__deleted": "true"}], row_t),
        "topic": ["t"] * 5, "partition": pa.array([0] * 5, pa.int32()), "offset": pa.array(range(5), pa.int64())})
    # Two tasks of one batch: the later change of a key wins across tasks too (by record position).
    m1 = sink.write(iter(batch.slice(0, 3).to_batches()), WriteContext("app", 0, 0, 0))
    m2 = sink.write(iter(batch.slice(3).to_batches()), WriteContext("app", 0, 1, 0))
    sink.commit([m2, m1], CommitContext("app", 0))
    assert _rows(table, "id", "v") == [(1, "a")]
    assert "__deleted" not in DeltaTable(str(table)).schema().to_arrow().names
    # A new column arrives in a later batch (schema evolution in MERGE).
    row2 = pa.struct([("id", pa.int64()), ("v", pa.string()), ("w", pa.int32())])
    b2 = pa.table({"key": pa.array([{"id": 1}], pa.struct([("id", pa.int64())])),
                   "value": pa.array([{"id": 1, "v": "a2", "w": 7}], row2), "topic": ["t"]})
    sink.commit([sink.write(iter(b2.to_batches()), WriteContext("app", 1, 0, 0))], CommitContext("app", 1))
    assert _rows(table, "id", "v", "w") == [(1, "a2", 7)]
    assert DeltaTable(str(table)).transaction_version("app") == 1


def test_last_change_per_key_orders_by_the_ordering_column_then_position():
    """deltalake engine internals (last_per_key; the delta-spark engine's window: the next test)."""
    changes = pa.table({"id": [1, 1, 2, 1, 2], "v": ["a", "b", "c", "d", "e"], "_kc_op": ["u"] * 5,
                        "_kc_order": [3, 5, 1, 4, 1], "_kc_part": [0] * 5, "_kc_off": [0, 1, 2, 3, 4],
                        "_kc_idx": list(range(5))})
    got = last_per_key(changes, ["id"])
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == [(1, "b"), (2, "e")]


# ------------------------------------------------------------------------------------------ source
_CHANGES_REFUSED = {"deltalake": "updates or deletes rows", "delta-spark": "DELTA_SOURCE_TABLE_IGNORE_CHANGES"}


def test_source_streams_versions_and_change_data(delta_spark, engine, tmp_path):
    """Streams a table written by the other engine: appends (a version that deletes rows fails the query unless
    skipped), and the change data feed. Differences: Delta's own source gives no per-row offset or timestamp
    for appends (offset = commit version × 10^9 with the change feed), and bounds batches by files, so
    max.records.per.trigger is a config error there."""
    spark = delta_spark
    writer = "deltalake" if engine == "delta-spark" else "delta-spark"
    table = tmp_path / "items"
    sink = _sink(table, **{"delta.table.properties": "delta.enableChangeDataFeed=true"})
    for v in range(3):
        batch = spark.createDataFrame([(v * 2, f"a{v}"), (v * 2 + 1, f"b{v}")], "id long, name string").coalesce(1)
        delta_spark_engine.write_batch(batch, sink, engine=writer)
    if writer == "deltalake":
        DeltaTable(str(table)).delete("id = 1")
    else:
        from delta.tables import DeltaTable as SparkDeltaTable
        SparkDeltaTable.forPath(spark, str(table)).delete("id = 1")
    assert _writers(table) == {writer} and delta_files.latest_version(table) == 3
    src = {"connector.class": "delta-source", "delta.table.path": str(table), "topic": "items"}
    with pytest.raises(Exception, match=_CHANGES_REFUSED[engine]):
        _collect(delta_spark_engine.read_stream(spark, src, engine=engine), tmp_path / "ck0")
    skip = {**src, "delta.source.skip.change.commits": "true"}
    skipping = delta_spark_engine.read_stream(spark, skip, engine=engine)
    records = [r for b in _collect(skipping, tmp_path / "ck1") for r in b]
    assert sorted((r.value.id, r.value.name) for r in records) == \
        [(i, f"{'ab'[i % 2]}{i // 2}") for i in range(6)]
    assert {(r.topic, r.partition, r.key) for r in records} == {("items", 0, None)}
    if engine == "deltalake":
        assert sorted(r.offset for r in records) == [v * 1_000_000_000 + i for v in range(3) for i in range(2)]
        assert all(r.timestamp is not None for r in records)
        bounded = delta_spark_engine.read_stream(spark, {**skip, "max.records.per.trigger": "1"}, engine=engine)
        batches = _collect(bounded, tmp_path / "ck2")
        assert [sorted(r.value.id for r in b) for b in batches] == [[0, 1], [2, 3], [4, 5]]  # whole versions
    else:
        assert {(r.offset, r.timestamp) for r in records} == {(None, None)}
        with pytest.raises(ConfigError, match=r"max.records.per.trigger"):
            delta_spark_engine.read_stream(spark, {**skip, "max.records.per.trigger": "1"}, engine=engine)
    cdf = {**src, "delta.source.read.change.feed": "true"}
    feed = delta_spark_engine.read_stream(spark, cdf, engine=engine)
    changes = [r for b in _collect(feed, tmp_path / "ck3") for r in b]
    assert sorted((r.value.id, r.value._change_type, r.value._commit_version) for r in changes) == \
        [(0, "insert", 0), (1, "delete", 3), (1, "insert", 0), (2, "insert", 1), (3, "insert", 1),
         (4, "insert", 2), (5, "insert", 2)]
    assert all(r.offset // 1_000_000_000 == r.value._commit_version for r in changes)


def test_auto_engine_is_delta_spark_where_delta_is_loaded(spark):
    assert delta_spark_engine.spark_has_delta(spark) is True
    assert delta_spark_engine.choose_engine(spark) == "delta-spark"
    assert delta_spark_engine.choose_engine(spark, "deltalake") == "deltalake"


def test_engine_is_deltalake_without_the_delta_jvm(spark):
    class NoDelta:  # a session without Delta's extension configured (the session's conf is what is checked)
        conf = {"spark.sql.extensions": "", "spark.sql.catalog.spark_catalog": ""}
        _jsc = None
    assert delta_spark_engine.spark_has_delta(NoDelta()) is False
    assert delta_spark_engine.choose_engine(NoDelta()) == "deltalake"
    with pytest.raises(ConnectError, match="needs a Spark session with Delta loaded"):
        delta_spark_engine.choose_engine(NoDelta(), "delta-spark")


def test_write_stream_runs_the_chosen_engine(delta_spark, engine, tmp_path):
    df = delta_spark.readStream.format("kconnect").options(**{
        "connector.class": "DatagenConnector", "kafka.topic": "users", "quickstart": "users", "iterations": "50",
        "max.interval": "0"}).load()
    delta_spark_engine.write_stream(df, _sink(tmp_path / "users", **{"delta.engine": engine}),
                              checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True}).awaitTermination()
    assert DeltaTable(str(tmp_path / "users")).to_pyarrow_table().num_rows == 50
    assert delta_spark.read.format("delta").load(str(tmp_path / "users")).count() == 50
    assert _writers(tmp_path / "users") == {engine}


def test_auto_engine_writes_with_delta_spark_where_delta_is_loaded(delta_spark, tmp_path):
    df = delta_spark.createDataFrame([(1,)], "n int").select(F.struct("n").alias("value"), F.lit("t").alias("topic"))
    delta_spark_engine.write_batch(df, _sink(tmp_path / "t"))
    assert _writers(tmp_path / "t") == {"delta-spark"}


@pytest.mark.parametrize("first, second", [("delta-spark", "deltalake"), ("deltalake", "delta-spark")])
def test_a_table_written_by_one_engine_is_continued_by_the_other(delta_spark, first, second, tmp_path):
    """One app transaction across engines: the second engine appends after the first, skips the first's batch
    id, and both readers see every row once."""
    table = tmp_path / "t"

    def batch(ids):
        return delta_spark.createDataFrame([(i, f"n{i}") for i in ids], "id long, name string").select(
            F.struct("id").alias("key"), F.struct("id", "name").alias("value"), F.lit("t").alias("topic"))

    delta_spark_engine.write_batch(batch([1, 2]), _sink(table), engine=first, app_id="app", batch_id=0)
    delta_spark_engine.write_batch(batch([1, 2]), _sink(table), engine=second, app_id="app", batch_id=0)  # a replay
    delta_spark_engine.write_batch(batch([3]), _sink(table), engine=second, app_id="app", batch_id=1)
    assert _read_both(delta_spark, table, "id", "name") == [(1, "n1"), (2, "n2"), (3, "n3")]
    assert DeltaTable(str(table)).transaction_version("app") == 1
    assert _writers(table) == {first, second}
    merge = _sink(table, **{"delta.write.mode": "merge"})
    delta_spark_engine.write_batch(batch([2]).withColumn("value", F.lit(None).cast("struct<id:bigint,name:string>")),
                             merge, engine=first, app_id="cdc", batch_id=0)
    delta_spark_engine.write_batch(batch([3, 4]), merge, engine=second, app_id="cdc", batch_id=1)
    assert _read_both(delta_spark, table, "id", "name") == [(1, "n1"), (3, "n3"), (4, "n4")]


def test_schema_evolution_on_both_engines(delta_spark, engine, tmp_path):
    """Both engines: a new column fails without delta.schema.evolution and is added with it; a narrower type is
    cast up to the table's (int into bigint, tinyint into double); a type the column cannot take fails."""
    table = tmp_path / "t"
    strict, evolving = _sink(table), _sink(table, **{"delta.schema.evolution": "true"})

    def put(cfg, ddl, row, batch_id):
        df = delta_spark.createDataFrame([row], ddl)
        delta_spark_engine.write_batch(df, cfg, engine=engine, app_id="app", batch_id=batch_id)

    put(evolving, "id long, name string", (1, "a"), 0)
    with pytest.raises(Exception, match="extra"):
        put(strict, "id long, extra double", (2, 1.5), 1)
    put(evolving, "id int, extra double", (2, 1.5), 1)
    put(evolving, "id long, extra tinyint", (3, 2), 2)
    with pytest.raises(Exception, match="name"):
        put(evolving, "id long, name binary", (4, b"x"), 3)
    dt = DeltaTable(str(table))
    assert [(f.name, str(f.type)) for f in pa.schema(dt.schema().to_arrow())] == \
        [("id", "int64"), ("name", "string"), ("extra", "double")]
    assert _read_both(delta_spark, table, "id", "name", "extra") == [(1, "a", None), (2, None, 1.5), (3, None, 2.0)]
    assert dt.transaction_version("app") == 2
    assert _writers(table) == {engine}


def test_type_widening_is_written_only_by_delta_spark(delta_spark, engine, tmp_path):
    """An engine difference: a bigint batch into an int column. Without Delta's typeWidening table feature both
    engines refuse it, naming the column. With it (delta.enableTypeWidening=true) and schema evolution on,
    delta-spark widens the column; deltalake (delta-rs 1.x) neither reads nor writes a table with that reader
    feature, and says so."""
    table, plain = tmp_path / "widening", tmp_path / "plain"
    evolving = {"delta.schema.evolution": "true"}

    def put(path, ddl, row, on=engine, **extra):
        batch = delta_spark.createDataFrame([row], ddl)
        delta_spark_engine.write_batch(batch, _sink(path, **evolving, **extra), engine=on)

    put(plain, "n int", (1,))
    with pytest.raises(Exception, match=r"\bn\b"):
        put(plain, "n long", (2 ** 40,))
    assert _read_both(delta_spark, plain, "n") == [(1,)]
    put(table, "n int", (1,), on="delta-spark", **{"delta.table.properties": "delta.enableTypeWidening=true"})
    if engine == "delta-spark":
        put(table, "n long", (2 ** 40,))
        assert delta_spark.read.format("delta").load(str(table)).schema.simpleString() == "struct<n:bigint>"
        assert sorted(r.n for r in delta_spark.read.format("delta").load(str(table)).collect()) == [1, 2 ** 40]
    else:
        with pytest.raises(Exception, match="typeWidening"):
            put(table, "n long", (2 ** 40,))
        assert [r.n for r in delta_spark.read.format("delta").load(str(table)).collect()] == [1]
    with pytest.raises(Exception, match="typeWidening"):
        DeltaTable(str(table)).to_pyarrow_table()


def test_column_mapped_tables_are_written_only_by_delta_spark(delta_spark, engine, tmp_path):
    """An engine difference: a table with column mapping (delta.columnMapping.mode=name, e.g. for renames) stores
    columns under physical names. delta-spark appends to it; the deltalake engine refuses to (its Parquet files
    carry the logical names, which such a table would read as nulls) and leaves no file behind."""
    table = tmp_path / "mapped"
    first = delta_spark.createDataFrame([(1, "a")], "id long, name string")
    delta_spark_engine.write_batch(first, _sink(table, **{"delta.table.properties": "delta.columnMapping.mode=name"}),
                             engine="delta-spark")
    files_before = sorted(p.name for p in table.glob("*.parquet"))
    more = delta_spark.createDataFrame([(2, "b")], "id long, name string")
    if engine == "delta-spark":
        delta_spark_engine.write_batch(more, _sink(table), engine=engine)
        assert sorted(tuple(r) for r in delta_spark.read.format("delta").load(str(table)).collect()) == \
            [(1, "a"), (2, "b")]
    else:
        with pytest.raises(Exception, match="column mapping"):
            delta_spark_engine.write_batch(more, _sink(table), engine=engine)
        assert sorted(p.name for p in table.glob("*.parquet")) == files_before
        assert [tuple(r) for r in delta_spark.read.format("delta").load(str(table)).collect()] == [(1, "a")]


def test_change_data_feed_of_a_merged_table(delta_spark, engine, tmp_path):
    """delta.table.properties make a CDF table on both engines; MERGE records its updates and deletes in the
    change feed, which both readers read."""
    table = tmp_path / "t"
    sink = _sink(table, **{"delta.write.mode": "merge",
                           "delta.table.properties": "delta.enableChangeDataFeed=true"})

    def batch(rows, batch_id):
        df = delta_spark.createDataFrame(rows, "id long, name string").select(
            F.struct("id").alias("key"), F.when(F.col("name").isNotNull(), F.struct("id", "name")).alias("value"),
            F.lit("t").alias("topic"))
        delta_spark_engine.write_batch(df, sink, engine=engine, app_id="app", batch_id=batch_id)

    batch([(1, "a"), (2, "b")], 0)
    batch([(1, "a2"), (2, None)], 1)
    assert DeltaTable(str(table)).metadata().configuration.get("delta.enableChangeDataFeed") == "true"
    assert _read_both(delta_spark, table, "id", "name") == [(1, "a2")]
    first = delta_files.latest_version(table) - 1  # the two MERGE versions (delta-spark: after its create)
    want = [(1, "a", "insert", first), (1, "a", "update_preimage", first + 1), (1, "a2", "update_postimage", first + 1),
            (2, "b", "delete", first + 1), (2, "b", "insert", first)]
    by_spark = delta_spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", first) \
        .load(str(table)).collect()
    assert sorted((r.id, r.name, r._change_type, r._commit_version) for r in by_spark) == want
    src = {"connector.class": "delta-source", "delta.table.path": str(table), "delta.source.read.change.feed": "true",
           "delta.source.starting.version": str(first)}
    by_deltalake = delta_spark.read.format("kconnect").options(**src).load().collect()
    assert sorted((r.value.id, r.value.name, r.value._change_type, r.value._commit_version)
                  for r in by_deltalake) == want


def test_batch_overwrite_replaces_the_table(tmp_path):
    table = str(tmp_path / "t")
    delta_files.commit_files(table, delta_files.write_files(table, pa.table({"a": [1, 2]})), app_id="x",
                              batch_id=None)
    delta_files.commit_files(table, delta_files.write_files(table, pa.table({"a": [3]})), app_id="x",
                              batch_id=None, overwrite=True)
    assert _rows(tmp_path / "t", "a") == [(3,)]


def test_source_offsets_number_the_rows_of_a_version_across_its_files(tmp_path):
    table = str(tmp_path / "t")
    files = delta_files.write_files(table, pa.table({"n": pa.array([1, 2], pa.int64())})) + \
        delta_files.write_files(table, pa.table({"n": pa.array([3], pa.int64())}))
    delta_files.commit_files(table, files, app_id="app", batch_id=0)  # version 0: two files
    src = build_connector({"connector.class": "delta-source", "delta.table.path": table}, kind="source")
    start = src.initial_offsets()
    end = src.latest_offsets(start, None, None)
    batches = [b for t in src.plan(start, end) for r in t.ranges for b in src.read_range(r)]
    got = sorted((b["offset"], b["value"]["n"]) for x in batches for b in x.to_pylist())
    assert got == [(0, 1), (1, 2), (2, 3)]
    assert list(end.values()) == [{"version": 0}]


def test_delta_spark_row_logic_agrees_with_the_deltalake_engine(spark):
    """rows_frame (Column expressions, the delta-spark engine) and rows_arrow + last_per_key (Arrow, the
    deltalake engine) turn the same Debezium records into the same last change per key."""
    from spark_connect_bridge.connectors.delta import rows_frame

    events, _ = _debezium_events()
    df = spark.createDataFrame(
        [(json.dumps(e["key"]), json.dumps(e["value"]) if e["value"] else None, i) for i, e in enumerate(events)],
        "k string, v string, offset long") \
        .select(F.from_json("k", "struct<id:bigint>").alias("key"), F.from_json("v", _ENVELOPE).alias("value"),
                F.lit("items").alias("topic"), F.lit(0).alias("partition"), "offset")
    for order_by in ("source.lsn", ""):
        cfg = build_connector(_sink(Path("/tmp/unused"), **{"delta.write.mode": "merge",
                                                            "delta.merge.order.by": order_by}), kind="sink").config
        frame, keys = rows_frame(df, cfg)
        by_spark = sorted(tuple(r) for r in frame.collect())
        changes, arrow_keys = rows_arrow(df.toArrow(), cfg)
        last = last_per_key(changes, arrow_keys).select(["id", "name", "qty", "_kc_op"])
        assert keys == arrow_keys == ["id"]
        assert by_spark == sorted(tuple(r.values()) for r in last.to_pylist())
        assert ("d", 6) in {(r[3], r[0]) for r in by_spark}


def test_schemaless_json_value_is_written_as_its_json_text(spark, tmp_path):
    """JsonConverter schemas.enable=false without spark.schema: the VARIANT value reaches the deltalake engine as its
    JSON text (Arrow has no VARIANT for a Python sink), a record per row, the tombstone a null value."""
    from spark_connect_bridge.core.records import record_schema
    from spark_connect_bridge.engine.pipeline import write_batch

    rows = [(b"k", text, "t", 0, i, None, []) for i, text in enumerate((b'{"name":"ada","id":1}', None, b"[1,2]"))]
    write_batch(spark.createDataFrame(rows, record_schema()), {
        "name": "d", "connector.class": "DeltaSink", "topics": "t", "delta.table.path": str(tmp_path / "tbl"),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"})
    table = DeltaTable(str(tmp_path / "tbl")).to_pyarrow_table()
    assert table.schema.field("value").type == pa.string()
    assert sorted(zip(table["offset"].to_pylist(), table["value"].to_pylist(), strict=True)) == [
        (0, '{"id":1,"name":"ada"}'), (1, None), (2, "[1,2]")]
