"""Delta sink and source connectors on the deltalake engine: exactly-once appends (also across a killed
driver), CDC MERGE, schema checks and evolution, change data, read-back with Spark and with deltalake."""

from __future__ import annotations

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

from spark_connect_bridge import delta_engine
from spark_connect_bridge.connectors.base import CommitContext, WriteContext
from spark_connect_bridge.connectors.delta import last_per_key, rows_arrow
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError, ConnectError, DataError
from tests.contract.contract import SinkContract, SourceContract

REPO = Path(__file__).resolve().parents[2]


def _sink(path: Path, **extra: str) -> dict:
    return {"connector.class": "delta-sink", "delta.table.path": str(path), **extra}


def _rows(path: Path, *cols: str) -> list:
    t = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def _spark_rows(spark, path: Path):
    """The table read by Spark as plain Parquet from the files the Delta log lists."""
    return spark.read.parquet(*DeltaTable(str(path)).file_uris())


# ------------------------------------------------------------------------------------------ contracts
class TestDeltaSourceContract(SourceContract):
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
    def sink_config(self, tmp_path: Path) -> dict:
        return _sink(tmp_path / "table")

    def read_back(self, config: dict) -> list[str]:
        path = config["delta.table.path"]
        if delta_engine.latest_version(path) is None:
            return []
        return DeltaTable(path).to_pyarrow_table().column("value").to_pylist()


# ------------------------------------------------------------------------------------------ append
def test_append_is_exactly_once_across_a_killed_driver(spark, tmp_path):
    """A datagen → Delta query runs in a child driver that is killed with SIGKILL mid-stream; restarted on the
    same checkpoint, every record is in the table once."""
    table, ckpt = tmp_path / "orders", tmp_path / "ckpt"
    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": "2000", "max.interval": "0", "tasks.max": "2", "max.records.per.trigger": "250"}
    script = textwrap.dedent("""
        import json, sys
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        df = spark.readStream.format("kconnect").options(**json.loads(sys.argv[1])).load()
        (df.writeStream.format("kconnect").options(**json.loads(sys.argv[2]))
           .option("checkpointLocation", sys.argv[3]).trigger(processingTime="1 second").start()
           .awaitTermination())
    """)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(cfg), json.dumps(_sink(table)), str(ckpt)],
                             env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while (delta_engine.latest_version(table) or -1) < 1:
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the child driver committed nothing"
            time.sleep(0.2)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        child.wait()
    killed_at = DeltaTable(str(table)).to_pyarrow_table().num_rows
    assert 0 < killed_at < 4000
    # The restarted driver replays the batch the kill interrupted, then reads the rest without a bound.
    cfg = {k: v for k, v in cfg.items() if k != "max.records.per.trigger"}
    df = spark.readStream.format("kconnect").options(**cfg).load()
    (df.writeStream.format("kconnect").options(**_sink(table)).option("checkpointLocation", str(ckpt))
     .trigger(availableNow=True).start().awaitTermination())
    got = _spark_rows(spark, table)
    expected = spark.read.format("kconnect").options(**cfg).load().select("value.*")
    assert got.count() == 4000
    assert got.select("orderid").distinct().count() == 4000
    assert got.exceptAll(expected.select(*got.columns)).count() == 0
    dt = DeltaTable(str(table))
    assert dt.to_pyarrow_table().num_rows == 4000
    # One app transaction: the last batch id the checkpoint committed.
    last_batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    app = next(a["txn"]["appId"] for v in range(dt.version() + 1)
               for a in delta_engine.read_commit(table, v) if "txn" in a)
    assert dt.transaction_version(app) == last_batch


def test_partitioned_table_reads_back_with_spark_and_deltalake(spark, tmp_path):
    table = tmp_path / "t"
    df = spark.range(0, 40, 1, 2).select(
        F.col("id").cast("int").alias("key"),
        F.struct(F.col("id"), (F.col("id") % 3).cast("string").alias("bucket"),
                 F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 2).cast("int")).alias("day"),
                 F.array(F.col("id")).alias("ids")).alias("value"),
        F.lit("t").alias("topic"))
    df.write.format("kconnect").options(**_sink(table, **{"delta.partition.by": "bucket,day"})).mode("append").save()
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
    # The file statistics deltalake uses for skipping are right.
    assert dt.to_pyarrow_dataset().to_table(filter=pa.compute.field("id") >= 35).num_rows == 5


def test_replayed_batch_is_skipped_and_its_files_removed(tmp_path):
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
    table = tmp_path / "t"
    data = pa.table({"a": pa.array([1, 2], pa.int64())})
    files = delta_engine.write_files(str(table), data)
    delta_engine.commit_files(str(table), files, app_id="app", batch_id=5)
    # 1. a file that does not exist is never committed
    ghost = delta_engine.write_files(str(table), data)
    os.remove(table / ghost[0].path)
    with pytest.raises(ConnectError, match="is missing"):
        delta_engine.commit_files(str(table), ghost, app_id="app", batch_id=6)
    # 2. a file whose schema does not fit the table
    bad = delta_engine.write_files(str(table), pa.table({"a": ["x"]}))
    with pytest.raises(DataError, match="column a is int64 in the table and string in the data"):
        delta_engine.commit_files(str(table), bad, app_id="app", batch_id=6)
    # 3. the app transaction never moves back (an older batch is a replay: skipped, files removed)
    old = delta_engine.write_files(str(table), data)
    assert delta_engine.commit_files(str(table), old, app_id="app", batch_id=3) is False
    assert not (table / old[0].path).exists()
    dt = DeltaTable(str(table))
    assert dt.transaction_version("app") == 5 and dt.version() == 0


def test_schema_evolution_adds_columns_and_casts_narrower_types_up(tmp_path):
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
    delta_engine.commit_files(str(narrow), delta_engine.write_files(str(narrow), pa.table({"n": pa.array([1], pa.int32())})),
                              app_id="app", batch_id=0)
    with pytest.raises(DataError, match="column n is int32 in the table and int64 in the data: widening the table"):
        delta_engine.reconcile_schema(delta_engine.table_schema(str(narrow)), pa.schema([("n", pa.int64())]),
                                      evolve=True, where="narrow")
    dt = DeltaTable(str(table))
    assert [(f.name, str(f.type)) for f in pa.schema(dt.schema().to_arrow())] == \
        [("id", "int64"), ("name", "string"), ("extra", "double")]
    assert _rows(table, "id", "name", "extra") == [(1, "a", None), (2, None, 1.5), (3, None, 2.0)]
    assert dt.transaction_version("app") == 2


def test_tombstones_have_no_row_in_append_mode(caplog):
    sink = build_connector(_sink(Path("/tmp/unused")), kind="sink")
    value = pa.array([{"a": 1}, None], pa.struct([("a", pa.int64())]))
    rows, _ = rows_arrow(pa.table({"key": [1, 2], "value": value, "topic": ["t", "t"]}), sink.config)
    assert rows.to_pylist() == [{"a": 1}]
    assert "1 records with a null value" in caplog.text


def test_per_topic_tables(spark, tmp_path):
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "topic string, n int") \
        .select(F.lit(None).cast("binary").alias("key"), F.struct("n").alias("value"), "topic")
    df.write.format("kconnect").options(**_sink(tmp_path / "${topic}")).mode("append").save()
    assert _rows(tmp_path / "a", "n") == [(1,), (3,)]
    assert _rows(tmp_path / "b", "n") == [(2,)]


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


def test_merge_without_keys_fails_before_data_moves(spark, tmp_path):
    df = spark.createDataFrame([(1, "a")], "id long, name string") \
        .select(F.lit(1).alias("key"), F.struct("id", "name").alias("value"), F.lit("t").alias("topic"))
    with pytest.raises(Exception, match="delta.merge.keys"):
        df.write.format("kconnect").options(**_sink(tmp_path / "t", **{"delta.write.mode": "merge"})) \
            .mode("append").save()
    assert not (tmp_path / "t" / "_delta_log").exists()


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


def test_debezium_events_applied_with_merge_equal_the_source_table(spark, tmp_path):
    """Envelopes (built here: the PostgreSQL CDC connector is not in the tree yet) go through a FileStreamSource
    of JSON lines, small micro-batches with several changes per key, a MERGE sink, a lost commit and a restart."""
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
        (df.writeStream.format("kconnect").options(**sink).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start().awaitTermination())

    run()
    want = sorted((k, r["name"], r["qty"]) for k, r in expected.items())
    assert _rows(table, "id", "name", "qty") == want
    # Spark lost its last commit: the batch is replayed and recognised, the table does not change.
    version = DeltaTable(str(table)).version()
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    assert DeltaTable(str(table)).version() == version
    assert _rows(table, "id", "name", "qty") == want
    assert sorted((r.id, r.name, r.qty) for r in _spark_rows(spark, table).collect()) == want
    assert not list((table / "_kconnect_staging").rglob("*.parquet"))


def test_unwrapped_rows_merge_with_tombstones_and_rewrite_deletes(tmp_path):
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
    changes = pa.table({"id": [1, 1, 2, 1, 2], "v": ["a", "b", "c", "d", "e"], "_kc_op": ["u"] * 5,
                        "_kc_order": [3, 5, 1, 4, 1], "_kc_part": [0] * 5, "_kc_off": [0, 1, 2, 3, 4],
                        "_kc_idx": list(range(5))})
    got = last_per_key(changes, ["id"])
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == [(1, "b"), (2, "e")]


# ------------------------------------------------------------------------------------------ source
def test_source_streams_versions_with_admission_control_and_change_data(spark, tmp_path):
    table = tmp_path / "cdf"
    delta_engine.create_table(str(table), pa.schema([("id", pa.int64()), ("name", pa.string())]),
                              configuration={"delta.enableChangeDataFeed": "true"})
    for v in range(3):
        write_deltalake(str(table), pa.table({"id": pa.array([v * 2, v * 2 + 1], pa.int64()),
                                              "name": [f"a{v}", f"b{v}"]}), mode="append")
    DeltaTable(str(table)).delete("id = 1")
    src = {"connector.class": "delta-source", "delta.table.path": str(table), "topic": "items"}
    # Appends only: the delete version fails unless skipped.
    with pytest.raises(Exception, match="updates or deletes rows"):
        spark.read.format("kconnect").options(**src).load().collect()
    seen = []
    q = (spark.readStream.format("kconnect")
         .options(**src, **{"delta.source.skip.change.commits": "true", "max.records.per.trigger": "1"}).load()
         .writeStream.foreachBatch(lambda d, i: seen.append(sorted(r.value.id for r in d.collect())))
         .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck")).start())
    q.awaitTermination()
    assert [s for s in seen if s] == [[0, 1], [2, 3], [4, 5]]  # one whole version per batch
    rec = spark.read.format("kconnect").options(**src, **{"delta.source.skip.change.commits": "true"}).load()
    r = rec.orderBy("offset").first()
    assert (r.topic, r.partition, r.offset, r.key) == ("items", 0, 1_000_000_000, None)
    cdf = spark.read.format("kconnect").options(**src, **{"delta.source.read.change.feed": "true"}).load()
    changes = sorted((r.value.id, r.value._change_type, r.value._commit_version) for r in cdf.collect())
    assert changes == [(0, "insert", 1), (1, "delete", 4), (1, "insert", 1), (2, "insert", 2), (3, "insert", 2),
                       (4, "insert", 3), (5, "insert", 3)]


def test_auto_engine_is_delta_spark_where_delta_is_loaded(spark):
    assert delta_engine.spark_has_delta(spark) is True
    assert delta_engine.choose_engine(spark) == "delta-spark"
    assert delta_engine.choose_engine(spark, "deltalake") == "deltalake"


def test_engine_is_deltalake_without_the_delta_jvm(spark):
    class NoDelta:  # a session without Delta's extension configured (the session's conf is what is checked)
        conf = {"spark.sql.extensions": "", "spark.sql.catalog.spark_catalog": ""}
        _jsc = None
    assert delta_engine.spark_has_delta(NoDelta()) is False
    assert delta_engine.choose_engine(NoDelta()) == "deltalake"
    with pytest.raises(ConnectError, match="needs a Spark session with Delta loaded"):
        delta_engine.choose_engine(NoDelta(), "delta-spark")


def test_write_stream_runs_the_chosen_engine(spark, tmp_path):
    df = spark.readStream.format("kconnect").options(**{
        "connector.class": "DatagenConnector", "kafka.topic": "users", "quickstart": "users", "iterations": "50",
        "max.interval": "0"}).load()
    delta_engine.write_stream(df, _sink(tmp_path / "users"), checkpoint=str(tmp_path / "ck"),
                              trigger={"availableNow": True}).awaitTermination()
    assert DeltaTable(str(tmp_path / "users")).to_pyarrow_table().num_rows == 50


def test_delta_spark_engine_writes_the_stream(spark, tmp_path):
    df = spark.readStream.format("kconnect").options(**{
        "connector.class": "DatagenConnector", "kafka.topic": "users", "quickstart": "users", "iterations": "50",
        "max.interval": "0"}).load()
    delta_engine.write_stream(df, _sink(tmp_path / "users"), checkpoint=str(tmp_path / "ck"),
                              trigger={"availableNow": True}, engine="delta-spark").awaitTermination()
    assert DeltaTable(str(tmp_path / "users")).to_pyarrow_table().num_rows == 50


def test_batch_overwrite_replaces_the_table(tmp_path):
    table = str(tmp_path / "t")
    delta_engine.commit_files(table, delta_engine.write_files(table, pa.table({"a": [1, 2]})), app_id="x",
                              batch_id=None)
    delta_engine.commit_files(table, delta_engine.write_files(table, pa.table({"a": [3]})), app_id="x",
                              batch_id=None, overwrite=True)
    assert _rows(tmp_path / "t", "a") == [(3,)]


def test_source_offsets_number_the_rows_of_a_version_across_its_files(tmp_path):
    table = str(tmp_path / "t")
    files = delta_engine.write_files(table, pa.table({"n": pa.array([1, 2], pa.int64())})) + \
        delta_engine.write_files(table, pa.table({"n": pa.array([3], pa.int64())}))
    delta_engine.commit_files(table, files, app_id="app", batch_id=0)  # version 0: two files
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
