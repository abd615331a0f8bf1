"""Iceberg sink (Apache Iceberg's Kafka Connect sink configs) on the pyiceberg engine, over a JDBC catalog on
SQLite that each test makes in its tmp_path: the sink contract (replays, failed writes), upsert and CDC deletes,
routed and dynamic tables, partitioned tables, schema evolution, config errors by key. Every table is read back
with pyiceberg, row by row."""

from __future__ import annotations

import json
from pathlib import Path

import jdbc_support
import pyarrow as pa
import pytest
from jdbc_support import pg_conn, pg_db  # noqa: F401 - pytest fixture
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.base import CommitContext, WriteContext, checkpoint_app_id
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.iceberg import (
    APP_ID_PROPERTY,
    BATCH_ID_PROPERTY,
    catalog_properties,
    committed_batch,
)
from spark_connect_bridge.errors import ConfigError
from tests.contract.contract import SinkContract

pytest.importorskip("pyiceberg")  # the iceberg extra (in dev)

ICEBERG = "org.apache.iceberg.connect.IcebergSinkConnector"


def _sink(tmp_path: Path, **extra: str) -> dict:
    """The original's config keys, on a JDBC catalog (SQLite) and a local warehouse under ``tmp_path``."""
    return {"connector.class": ICEBERG, "iceberg.catalog.type": "jdbc",
            "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"),
            "iceberg.tables.auto-create-enabled": "true", **extra}


def _catalog(config: dict):
    from pyiceberg.catalog import load_catalog

    # a JDBC catalog keeps its tables under the catalog's name: the sink's iceberg.catalog (default: iceberg)
    props = {k[len("iceberg.catalog."):]: v for k, v in config.items() if k.startswith("iceberg.catalog.")}
    return load_catalog(config.get("iceberg.catalog", "iceberg"), **catalog_properties(props))


def _rows(config: dict, table: str, *cols: str) -> list[tuple]:
    data = _catalog(config).load_table(table).scan().to_arrow()
    return sorted((tuple(r[c] for c in cols) for r in data.to_pylist()),
                  key=lambda row: tuple((v is None, 0 if v is None else v) for v in row))  # nulls last


def _records(spark, rows: list[tuple], value_ddl: str, key_ddl: str | None = None):
    """Records with a struct value parsed from JSON text (and a struct key), offsets in list order."""
    df = spark.createDataFrame([(i, json.dumps(v) if v is not None else None, json.dumps(k) if k is not None else None)
                                for i, (k, v) in enumerate(rows)], "offset long, v string, k string")
    key = F.from_json("k", key_ddl) if key_ddl else F.lit(None).cast("binary")
    return df.select(key.alias("key"), F.from_json("v", value_ddl).alias("value"), F.lit("t").alias("topic"),
                     F.lit(0).alias("partition"), "offset")


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


# ------------------------------------------------------------------------------------------ contract
class TestIcebergSinkContract(SinkContract):
    """format("kconnect") streams into an Iceberg table: a replayed batch is recognised by the snapshot summary,
    a failed write commits nothing."""

    def sink_config(self, tmp_path: Path) -> dict:
        return _sink(tmp_path, **{"iceberg.tables": "db.lines"})

    def shape_input(self, df):
        return df.withColumn("value", F.struct(F.col("value").alias("line")))

    def read_back(self, config: dict) -> list[str]:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return [r[0] for r in _rows(config, "db.lines", "line")]
        except NoSuchTableError:
            return []


def test_streamed_batches_record_the_checkpoint_and_batch_in_the_snapshot_summary(spark, tmp_path):
    """Each micro-batch is one commit whose snapshot summary holds the checkpoint's app id and the batch id (what
    a restarted query compares); the control-topic keys are accepted and change nothing."""
    src = tmp_path / "in.txt"
    src.write_text("".join(f"l{i}\n" for i in range(7)))
    ckpt = tmp_path / "ckpt"
    sink = _sink(tmp_path, **{"iceberg.tables": "db.lines", "iceberg.control.topic": "control-iceberg",
                              "iceberg.control.commit.interval-ms": "1000"})
    df = spark.readStream.format("kconnect").options(**{"connector.class": "FileStreamSource", "file": str(src),
                                                        "topic": "lines", "max.records.per.trigger": "3"}).load()
    (df.withColumn("value", F.struct(F.col("value").alias("line"))).writeStream.format("kconnect").options(**sink)
     .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start().awaitTermination())
    table = _catalog(sink).load_table("db.lines")
    assert sorted(r["line"] for r in table.scan().to_arrow().to_pylist()) == [f"l{i}" for i in range(7)]
    app = checkpoint_app_id(str(ckpt))
    summaries = [s.summary for s in table.metadata.snapshots]
    assert [(s[APP_ID_PROPERTY], s[BATCH_ID_PROPERTY]) for s in summaries] == [(app, "0"), (app, "1"), (app, "2")]
    assert committed_batch(table, app) == 2


# ------------------------------------------------------------------------------------------ upsert, CDC
_ROW = "struct<id:bigint,name:string,qty:int>"


def test_upsert_mode_keeps_the_last_row_per_id_column(spark, tmp_path):
    """iceberg.tables.upsert-mode-enabled with iceberg.tables.default-id-columns: a key's last record in a batch
    wins, a later batch replaces the row; a tombstone deletes the key of the record key."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.items", "iceberg.tables.upsert-mode-enabled": "true",
                              "iceberg.tables.default-id-columns": "id"})
    _write(_records(spark, [({"id": 1}, {"id": 1, "name": "a", "qty": 1}),
                            ({"id": 2}, {"id": 2, "name": "b", "qty": 2}),
                            ({"id": 1}, {"id": 1, "name": "a2", "qty": 10})], _ROW, "struct<id:bigint>"), sink)
    assert _rows(sink, "db.items", "id", "name", "qty") == [(1, "a2", 10), (2, "b", 2)]
    _write(_records(spark, [({"id": 2}, {"id": 2, "name": "b2", "qty": 20}), ({"id": 1}, None),
                            ({"id": 3}, {"id": 3, "name": "c", "qty": 3})], _ROW, "struct<id:bigint>"), sink)
    assert _rows(sink, "db.items", "id", "name", "qty") == [(2, "b2", 20), (3, "c", 3)]


def test_cdc_field_deletes_and_upserts_flattened_debezium_rows(spark, tmp_path):
    """Rows after ExtractNewRecordState (add.fields=op, so a __op field): iceberg.tables.cdc-field=__op with a
    per-table id column; d deletes, c/u/r upsert. The op field stays a column, as the original writes it."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.mirror", "iceberg.tables.cdc-field": "__op",
                              "iceberg.table.db.mirror.id-columns": "id"})
    ddl = "struct<id:bigint,name:string,__op:string>"
    _write(_records(spark, [(None, {"id": i, "name": f"n{i}", "__op": "r"}) for i in range(5)], ddl), sink)
    _write(_records(spark, [(None, {"id": 1, "name": None, "__op": "d"}),
                            (None, {"id": 2, "name": "n2-v2", "__op": "u"}),
                            (None, {"id": 5, "name": "n5", "__op": "c"}), (None, {"id": 5, "name": "n5", "__op": "d"}),
                            (None, {"id": 4, "name": "n4", "__op": "d"}), (None, {"id": 4, "name": "n4-again",
                                                                             "__op": "c"})], ddl), sink)
    assert _rows(sink, "db.mirror", "id", "name", "__op") == [(0, "n0", "r"), (2, "n2-v2", "u"), (3, "n3", "r"),
                                                              (4, "n4-again", "c")]


def test_debezium_envelopes_are_applied_in_upsert_mode(spark, tmp_path):
    """Debezium envelopes (op, before, after) as they come from the connector: the key comes from the record key
    struct, d deletes with the key-only before row, and Debezium's tombstone after a delete is skipped."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.env", "iceberg.tables.upsert-mode-enabled": "true"})
    env = f"struct<op:string,before:{_ROW},after:{_ROW}>"
    events = [({"id": 1}, {"op": "c", "before": None, "after": {"id": 1, "name": "a", "qty": 1}}),
              ({"id": 2}, {"op": "c", "before": None, "after": {"id": 2, "name": "b", "qty": 2}}),
              ({"id": 1}, {"op": "u", "before": None, "after": {"id": 1, "name": "a2", "qty": 11}}),
              ({"id": 2}, {"op": "d", "before": {"id": 2, "name": None, "qty": None}, "after": None}),
              ({"id": 2}, None)]
    _write(_records(spark, events, env, "struct<id:bigint>"), sink)
    assert _rows(sink, "db.env", "id", "name", "qty") == [(1, "a2", 11)]


def test_jdbc_catalog_on_postgresql_holds_the_tables(spark, pg_db):  # noqa: F811 - pytest fixture
    """iceberg.catalog.uri=jdbc:postgresql://... with jdbc.user, as the original takes it: the run's PostgreSQL holds
    the catalog (Iceberg's JdbcCatalog tables), an upsert lands, and a reader of that catalog sees it row by row."""
    import tempfile

    host, port = jdbc_support.PG
    with tempfile.TemporaryDirectory() as warehouse:
        sink = {"connector.class": ICEBERG, "iceberg.catalog.type": "jdbc",
                "iceberg.catalog.uri": f"jdbc:postgresql://{host}:{port}/{pg_db}",
                "iceberg.catalog.jdbc.user": "postgres", "iceberg.catalog.warehouse": warehouse,
                "iceberg.tables.auto-create-enabled": "true", "iceberg.tables": "db.pg_items",
                "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"}
        _write(_records(spark, [({"id": 1}, {"id": 1, "name": "a", "qty": 1}),
                                ({"id": 2}, {"id": 2, "name": "b", "qty": 2})], _ROW, "struct<id:bigint>"), sink)
        _write(_records(spark, [({"id": 2}, {"id": 2, "name": "b2", "qty": 20})], _ROW, "struct<id:bigint>"), sink)
        assert _rows(sink, "db.pg_items", "id", "name", "qty") == [(1, "a", 1), (2, "b2", 20)]
        with pg_conn(pg_db) as conn:
            held = conn.execute("select catalog_name, table_namespace, table_name, metadata_location "
                                "from iceberg_tables").fetchall()
        assert [row[:3] for row in held] == [("iceberg", "db", "pg_items")]
        assert held[0][3] == _catalog(sink).load_table("db.pg_items").metadata_location


# ------------------------------------------------------------------------------------------ routing
def test_route_regex_sends_each_record_to_its_tables(spark, tmp_path):
    """iceberg.tables with iceberg.tables.route-field: a record goes to every table whose route-regex matches
    the field's whole value, and to no table when none does."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.eu,db.all", "iceberg.tables.route-field": "region",
                              "iceberg.table.db.eu.route-regex": "eu-.*", "iceberg.table.db.all.route-regex": ".*"})
    ddl = "struct<id:bigint,region:string>"
    _write(_records(spark, [(None, {"id": 1, "region": "eu-west"}), (None, {"id": 2, "region": "us-east"}),
                            (None, {"id": 3, "region": "xeu-1"})], ddl), sink)
    assert _rows(sink, "db.eu", "id") == [(1,)]
    assert _rows(sink, "db.all", "id") == [(1,), (2,), (3,)]


def test_dynamic_tables_are_named_by_the_route_field(spark, tmp_path):
    """iceberg.tables.dynamic-enabled: the route field's value, lower-cased, names the table (auto-created)."""
    sink = _sink(tmp_path, **{"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "meta.table"})
    ddl = "struct<id:bigint,meta:struct<table:string>>"
    _write(_records(spark, [(None, {"id": 1, "meta": {"table": "db.Orders"}}),
                            (None, {"id": 2, "meta": {"table": "db.customers"}}),
                            (None, {"id": 3, "meta": {"table": "db.orders"}})], ddl), sink)
    assert _rows(sink, "db.orders", "id") == [(1,), (3,)]
    assert _rows(sink, "db.customers", "id") == [(2,)]


# ------------------------------------------------------------------------------------------ tables
def test_auto_created_table_has_the_partition_spec(spark, tmp_path):
    """iceberg.tables.default-partition-by and iceberg.table.<t>.partition-by, with Iceberg transforms."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.a,db.b", "iceberg.tables.default-partition-by": "region",
                              "iceberg.table.db.b.partition-by": "days(ts), bucket(id, 4)"})
    df = spark.createDataFrame([(1, "eu", "2024-01-02 03:04:05"), (2, "us", "2024-01-03 00:00:00")],
                               "id long, region string, ts string").select(
        F.lit(None).cast("binary").alias("key"),
        F.struct("id", "region", F.to_timestamp("ts").alias("ts")).alias("value"), F.lit("t").alias("topic"))
    _write(df, sink)
    catalog = _catalog(sink)
    assert [(f.name, str(f.transform)) for f in catalog.load_table("db.a").spec().fields] == [("region", "identity")]
    assert [(f.name, str(f.transform)) for f in catalog.load_table("db.b").spec().fields] == \
        [("ts_day", "day"), ("id_bucket_4", "bucket[4]")]
    assert _rows(sink, "db.b", "id", "region") == [(1, "eu"), (2, "us")]
    files = catalog.load_table("db.b").inspect.files().to_pylist()
    assert len(files) == 2  # one data file per partition


def test_schema_evolution_adds_columns_and_widens_types(spark, tmp_path):
    """iceberg.tables.evolve-schema-enabled: a new field becomes a column, int widens to long and float to
    double; without it a field the table lacks is not written (as the original does)."""
    plain = _sink(tmp_path, **{"iceberg.tables": "db.t"})
    first = spark.createDataFrame([(1, 1.5)], "id int, x float").select(
        F.struct("id", "x").alias("value"), F.lit("t").alias("topic"))
    _write(first, plain)
    later = spark.createDataFrame([(2, 2.5, "w")], "id long, x double, extra string").select(
        F.struct("id", "x", "extra").alias("value"), F.lit("t").alias("topic"))
    _write(later.limit(1), plain)
    assert _catalog(plain).load_table("db.t").schema().as_arrow().names == ["id", "x"]
    _write(later, {**plain, "iceberg.tables.evolve-schema-enabled": "true"})
    schema = _catalog(plain).load_table("db.t").schema()
    assert [(f.name, str(f.field_type)) for f in schema.fields] == [("id", "long"), ("x", "double"),
                                                                    ("extra", "string")]
    assert _rows(plain, "db.t", "id", "x", "extra") == [(1, 1.5, None), (2, 2.5, "w"), (2, 2.5, None)]


def test_missing_table_without_auto_create_names_the_key(spark, tmp_path):
    sink = _sink(tmp_path, **{"iceberg.tables": "db.none", "iceberg.tables.auto-create-enabled": "false"})
    df = spark.createDataFrame([(1,)], "id long").select(F.struct("id").alias("value"), F.lit("t").alias("topic"))
    with pytest.raises(Exception, match=r"iceberg\.tables\.auto-create-enabled"):
        _write(df, sink)


def test_replayed_batch_and_concurrent_commits(tmp_path):
    """The connector objects (what the data source calls): a batch id the table holds for the app id is
    skipped; another app's batch with the same id is not; a commit that loses the race to another writer is
    retried on the refreshed table."""
    sink = _sink(tmp_path, **{"iceberg.tables": "db.t"})
    one, two = build_connector(sink), build_connector(sink)
    value = pa.array([{"id": 1}, {"id": 2}], pa.struct([("id", pa.int64())]))
    batch = pa.record_batch([value, pa.array(["t", "t"])], names=["value", "topic"])
    message = one.write(iter([batch]), WriteContext("app-1", 0, 0, 0))
    one.commit([message], CommitContext("app-1", 0))
    one.commit([message], CommitContext("app-1", 0))
    assert _rows(sink, "db.t", "id") == [(1,), (2,)]
    # The second writer's table object is older than the first writer's commit: pyiceberg's commit fails with
    # CommitFailedException and the sink retries on the refreshed table.
    table_before = two.catalog().load_table("db.t")
    one.commit([one.write(iter([batch]), WriteContext("app-1", 1, 0, 0))], CommitContext("app-1", 1))
    two._load_or_create = lambda name, rows, _t=[table_before]: _t.pop() if _t else \
        two.catalog().load_table(name)  # first attempt on the stale table, then a fresh one
    two.commit([two.write(iter([batch]), WriteContext("app-2", 0, 0, 0))], CommitContext("app-2", 0))
    assert _rows(sink, "db.t", "id") == [(1,), (1,), (1,), (2,), (2,), (2,)]
    table = _catalog(sink).load_table("db.t")
    assert (committed_batch(table, "app-1"), committed_batch(table, "app-2")) == (1, 0)


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize(("extra", "key"), [
    ({}, "iceberg.tables"),
    ({"iceberg.tables": "db.t", "iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "x"},
     "iceberg.tables"),
    ({"iceberg.tables.dynamic-enabled": "true"}, "iceberg.tables.route-field"),
    ({"iceberg.tables": "db.t", "iceberg.table.db.t.route-regx": "x"}, "iceberg.table.db.t.route-regx"),
    ({"iceberg.tables": "db.t", "iceberg.tables.default-partition-by": "bucket(id)"},
     "iceberg.tables.default-partition-by"),
    ({"iceberg.tables": "db.t", "iceberg.catalog.type": "hadoop"}, "iceberg.catalog.type"),
    ({"iceberg.tables": "db.t", "iceberg.catalog.catalog-impl": "com.example.Nope"}, "iceberg.catalog.catalog-impl"),
    ({"iceberg.tables": "db.t", "iceberg.tables.upsert-mode-enable": "true"}, "iceberg.tables.upsert-mode-enable"),
])
def test_sink_config_errors_name_the_key(tmp_path, extra, key):
    config = {k: v for k, v in _sink(tmp_path).items() if k != "iceberg.tables"} | extra
    with pytest.raises(ConfigError) as err:
        build_connector(config)
    assert key in [p.key for p in err.value.problems]


def test_catalog_properties_map_the_java_catalog_configs():
    """iceberg.catalog.* as the original takes them, opened by pyiceberg: JDBC URLs become SQLAlchemy URLs with
    jdbc.user/jdbc.password, catalog-impl names the catalog type, a local warehouse becomes a file URI."""
    props = catalog_properties({"catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
                                "uri": "jdbc:postgresql://db:5432/cat?sslmode=require", "jdbc.user": "u",
                                "jdbc.password": "p w", "warehouse": "/wh", "io-impl": "org.apache.iceberg.io.x"})
    assert props == {"type": "sql", "uri": "postgresql+psycopg://u:p%20w@db:5432/cat?sslmode=require",
                     "warehouse": "file:///wh"}
    assert catalog_properties({"type": "rest", "uri": "http://cat:8181", "client.region": "eu-west-1"}) == \
        {"type": "rest", "uri": "http://cat:8181", "s3.region": "eu-west-1"}


# ------------------------------------------------------------------------------------------ security
def test_catalog_destinations_obey_the_workers_path_policy(tmp_path):
    """Attack: a REST user names a warehouse or a SQLite catalog outside connector.allowed.paths, or a bucket the
    worker's own credentials reach: refused by key before anything runs; the same config under the allowed
    directory passes."""
    from spark_connect_bridge.runtime.policy import ConnectorPolicy

    allowed = tmp_path / "data"
    policy = ConnectorPolicy(allowed_paths=(str(allowed),), forbidden_paths=(str(allowed / "state"),))
    base = {"connector.class": ICEBERG, "iceberg.tables": "db.t", "iceberg.catalog.type": "jdbc"}
    attacks = [
        ({"iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db", "iceberg.catalog.warehouse": "/etc/cron.d"},
         "iceberg.catalog.warehouse"),
        ({"iceberg.catalog.uri": "jdbc:sqlite:/root/catalog.db", "iceberg.catalog.warehouse": str(allowed)},
         "iceberg.catalog.uri"),
        ({"iceberg.catalog.uri": "sqlite:////root/catalog.db", "iceberg.catalog.warehouse": str(allowed)},
         "iceberg.catalog.uri"),
        ({"iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db", "iceberg.catalog.warehouse": "s3://other/wh"},
         "iceberg.catalog.warehouse"),
        ({"iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db",
          "iceberg.catalog.warehouse": f"{allowed}/state/wh"}, "iceberg.catalog.warehouse"),
    ]
    for extra, key in attacks:
        assert [p.key for p in policy.check({**base, **extra})] == [key], extra
    fine = {**base, "iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db", "iceberg.catalog.warehouse": str(allowed)}
    assert policy.check(fine) == []


def test_catalog_credentials_are_masked():
    """jdbc.password, a REST catalog's credential/token and S3 keys are hidden in every REST answer."""
    from spark_connect_bridge.runtime.secrets import mask_config

    shown = mask_config({"connector.class": ICEBERG, "iceberg.catalog.jdbc.password": "pw1",
                         "iceberg.catalog.credential": "id:secret2", "iceberg.catalog.token": "tok3",
                         "iceberg.catalog.s3.secret-access-key": "sk4",
                         "iceberg.catalog.uri": "jdbc:postgresql://db/cat?user=u&password=pw5"})
    assert not any(s in str(shown) for s in ("pw1", "secret2", "tok3", "sk4", "pw5"))


def test_upsert_key_filter_binds_as_pyicebergs_in():
    """The upsert's key filter (an In whose bind resolves the literal conversion once) binds to what pyiceberg's
    own In binds to: long, int (a key beyond int's range included) and string columns."""
    from pyiceberg.expressions import In
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    from spark_connect_bridge.connectors.iceberg import _keys_filter

    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "n", IntegerType()),
                    NestedField(3, "s", StringType()))
    for col, values in (("id", [1, 2, 3]), ("n", [1, 2, 2**40]), ("s", ["a", "b", "c"])):
        ours = _keys_filter(pa.table({col: values + [None]}), [col])
        assert bind(schema, ours, True) == bind(schema, In(col, values), True)


def test_a_commits_table_metadata_is_made_once_per_state_of_its_transaction(tmp_path):
    """The sink's transaction makes the table's metadata once per state (pyiceberg deep-copied it at each of an
    append's ~18 reads, a commit's CPU growing with the table's snapshots), and again after each change: the same
    view as pyiceberg's own, the schema change and the appended snapshot included."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.types import StringType

    from spark_connect_bridge.connectors.iceberg import _transaction_class

    catalog = load_catalog("iceberg", **catalog_properties({"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/c.db",
                                                            "warehouse": str(tmp_path / "wh")}))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    with _transaction_class()(table) as tx:
        first = tx.table_metadata
        assert tx.table_metadata is first and first == table.transaction().table_metadata
        with tx.update_schema() as update:
            update.add_column("s", StringType())
        assert tx.table_metadata is not first and tx.table_metadata.schema().find_field("s")
        tx.append(pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}),
                  snapshot_properties={"kconnect.batch-id": "7"})
        assert tx.table_metadata.current_snapshot().summary["kconnect.batch-id"] == "7"
    table = catalog.load_table("db.t")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [{"id": 1, "s": "a"}, {"id": 2, "s": "b"}]
    assert len(table.metadata.snapshots) == 1


# ------------------------------------------------------------------------------------------ kill -9
def test_append_is_exactly_once_across_drivers_killed_in_a_commit(spark, tmp_path):
    """A datagen -> Iceberg query (format("kconnect") both ways) in a child driver, killed with SIGKILL twice inside
    a commit (tests/support/iceberg_pause pauses pyiceberg's catalog there): first just after the catalog points at
    the second snapshot, before Spark's commit log records the batch (the replayed batch must be recognised), then
    in the middle of the third snapshot's commit, its metadata file written and the catalog not yet pointing at it
    (the batch must be written again). Restarted on the same checkpoint, every record is in the table once (0
    lost, 0 duplicated) and the table's last recorded batch is the checkpoint's last."""
    import os
    import time

    from tests.support.killed_driver import kill, start_driver

    ckpt, marker = tmp_path / "ckpt", tmp_path / "paused"
    sink = _sink(tmp_path, **{"iceberg.tables": "db.orders"})
    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": "2000", "max.interval": "0", "tasks.max": "2", "max.records.per.trigger": "250"}
    hook = str(Path(__file__).resolve().parent.parent / "support" / "iceberg_pause")

    def killed_in_commit(where: str, snapshot: int) -> None:
        marker.unlink(missing_ok=True)
        driver = start_driver(cfg, None, ckpt, tmp_path, sink=sink, env={
            "PYTHONPATH": os.pathsep.join(filter(None, [hook, os.environ.get("PYTHONPATH")])),
            "KCONNECT_TEST_ICEBERG_PAUSE_AT": f"{where}:{snapshot}", "KCONNECT_TEST_ICEBERG_MARKER": str(marker)})
        try:
            deadline = time.monotonic() + 400
            while not marker.exists():
                assert driver.poll() is None, "the child driver stopped before it was killed"
                assert time.monotonic() < deadline, f"the child driver never reached the {where} of a commit"
                time.sleep(0.1)
        finally:
            kill(driver)  # the driver, its JVM and its Python workers, paused inside the commit

    killed_in_commit("after", 2)
    table = _catalog(sink).load_table("db.orders")
    assert len(table.metadata.snapshots) == 2 and len(_rows(sink, "db.orders", "orderid")) == 500
    assert not (ckpt / "commits" / "1").exists()  # the table holds batch 1; Spark's commit log does not
    killed_in_commit("middle", 3)
    assert len(_catalog(sink).load_table("db.orders").metadata.snapshots) == 2  # the third never became current
    cfg = {k: v for k, v in cfg.items() if k != "max.records.per.trigger"}
    (spark.readStream.format("kconnect").options(**cfg).load().writeStream.format("kconnect").options(**sink)
     .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start().awaitTermination())
    got = _rows(sink, "db.orders", "orderid", "itemid", "orderunits")
    expected = sorted((r.orderid, r.itemid, r.orderunits) for r in
                      spark.read.format("kconnect").options(**cfg).load().select("value.*").collect())
    assert len(got) == 4000 and len({r[0] for r in got}) == 4000
    assert [tuple(r) for r in got] == expected
    last_batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    table = _catalog(sink).load_table("db.orders")
    assert committed_batch(table, checkpoint_app_id(str(ckpt))) == last_batch


# ------------------------------------------------------------------------------------------ object store
def test_a_warehouse_on_s3_holds_the_tables_data_and_metadata(spark, tmp_path):
    """The warehouse in a bucket of the run's S3 server, with the S3FileIO keys as Iceberg's AWS docs write them
    (https://iceberg.apache.org/docs/latest/aws/#s3-fileio: s3.endpoint, s3.path-style-access, s3.access-key-id,
    s3.secret-access-key; client.region), the catalog a JDBC one: the rows read back, every file in the bucket."""
    import uuid

    from tests.support import servers
    from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

    endpoint = servers.s3()
    bucket = "ice-" + uuid.uuid4().hex[:10]
    s3 = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the run's server
    s3.create_bucket(bucket)
    config = _sink(tmp_path, **{
        "iceberg.tables": "shop.orders", "iceberg.catalog.warehouse": f"s3://{bucket}/warehouse",
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "iceberg.catalog.s3.endpoint": endpoint,
        "iceberg.catalog.s3.path-style-access": "true", "iceberg.catalog.s3.access-key-id": ACCESS_KEY,
        "iceberg.catalog.s3.secret-access-key": SECRET_KEY, "iceberg.catalog.client.region": REGION})
    rows = [(None, {"id": i, "item": f"thing {i}"}) for i in range(20)]
    _write(_records(spark, rows, "id int, item string"), config)
    _write(_records(spark, rows[:5], "id int, item string"), config)
    assert _rows(config, "shop.orders", "id", "item") == sorted([(i, f"thing {i}") for i in range(20)]
                                                              + [(i, f"thing {i}") for i in range(5)])
    objects = s3.objects(bucket, "warehouse/")
    assert any(k.endswith(".parquet") for k in objects) and any(k.endswith(".metadata.json") for k in objects)
    assert not list(tmp_path.rglob("*.parquet"))  # nothing written to the local disk but the catalog's file
    catalog = {k: v for k, v in config.items() if k.startswith("iceberg.catalog.")}
    source = spark.read.format("kconnect").options(**{"connector.class": "iceberg-source",
                                                      "iceberg.source.table": "shop.orders", **catalog}).load()
    assert sorted(tuple(r) for r in source.select("value.id", "value.item").collect()) == \
        _rows(config, "shop.orders", "id", "item")  # the Iceberg source reads it back from the bucket


# ------------------------------------------------------------------------------------------ REST catalog
def test_a_rest_catalog_holds_the_tables(spark, tmp_path):
    """The original's REST catalog config (https://iceberg.apache.org/docs/latest/kafka-connect/: iceberg.catalog.type
    rest, iceberg.catalog.uri) against Iceberg's own REST catalog servlet (tests/support/iceberg_rest.py): an upsert by
    id read back row by row through the REST catalog by pyiceberg, an append read back by the Iceberg source."""
    from tests.support.iceberg_rest import IcebergRestCatalog

    with IcebergRestCatalog() as rest:
        catalog = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": rest.uri}
        config = {"connector.class": ICEBERG, "iceberg.tables": "shop.orders",
                  "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.default-id-columns": "id",
                  "iceberg.tables.upsert-mode-enabled": "true", **catalog}
        _write(_records(spark, [(None, {"id": i, "qty": i}) for i in range(10)], "id int, qty int"), config)
        _write(_records(spark, [(None, {"id": i, "qty": 100 + i}) for i in (3, 12)], "id int, qty int"), config)
        expected = sorted([(i, i) for i in range(10) if i != 3] + [(3, 103), (12, 112)])
        assert _rows(config, "shop.orders", "id", "qty") == expected
        events = {**config, "iceberg.tables": "shop.events", "iceberg.tables.upsert-mode-enabled": "false"}
        _write(_records(spark, [(None, {"id": i, "qty": i}) for i in range(10)], "id int, qty int"), events)
        source = spark.read.format("kconnect").options(**{"connector.class": "iceberg-source",
                                                          "iceberg.source.table": "shop.events", **catalog}).load()
        assert sorted(tuple(r) for r in source.select("value.id", "value.qty").collect()) == [(i, i) for i in range(10)]
        assert list(Path(rest.warehouse).rglob("*.parquet"))  # the data files where the catalog put the table
