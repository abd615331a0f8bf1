"""The Delta sink and source on a bucket (moto's S3 server, the run's shared one): ``format("kconnect")`` writes and
reads ``s3a://`` tables with the deltalake engine, its storage options derived from Hadoop's ``fs.s3a.*`` keys
(the settings the worker's own files use, :class:`~spark_connect_bridge.core.locations.Locations`), and Delta's
own JVM engine (the session's S3A connector) reads and continues the same table. Rows are checked one by one."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors import delta_files
from spark_connect_bridge.connectors.delta import VERSION_STRIDE
from spark_connect_bridge.core.locations import Locations
from spark_connect_bridge.engine import delta_spark as delta_spark_engine
from spark_connect_bridge.errors import ConnectError
from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server


@pytest.fixture(scope="module")
def lake():
    """A fresh bucket on the run's S3 server, the fs.s3a.* keys that reach it, and a client of it."""
    endpoint = servers.s3()
    client = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the shared server
    bucket = "delta-" + uuid.uuid4().hex[:10]
    client.create_bucket(bucket)
    keys = {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": REGION,
            "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY}
    return bucket, keys, client


def _records(spark, rows: list[tuple]):
    return spark.createDataFrame(rows, "id bigint, name string").select(
        F.lit(None).cast("binary").alias("key"), F.struct("id", "name").alias("value"), F.lit("orders").alias("topic"))


def _table_rows(files: Locations, uri: str) -> list[tuple]:
    from deltalake import DeltaTable

    table = DeltaTable(uri, storage_options=files.storage_options(uri)).to_pyarrow_table()
    return sorted((r["id"], r["name"]) for r in table.to_pylist())


def test_locations_give_delta_rs_the_s3a_settings_and_never_show_a_secret(lake):
    bucket, keys, _ = lake
    files = Locations(keys)
    options = files.storage_options(f"s3a://{bucket}/t")
    assert options == {"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, "aws_region": REGION,
                       "aws_endpoint": keys["fs.s3a.endpoint"], "aws_allow_http": "true",
                       "aws_virtual_hosted_style_request": "false"}
    assert files.storage_options("/local/t") == {}
    per_bucket = Locations({"spark.hadoop.fs.s3a.endpoint": "s3.example:443",
                            f"spark.hadoop.fs.s3a.bucket.{bucket}.endpoint": "127.0.0.1:9",
                            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false"})
    assert per_bucket.storage_options(f"s3://{bucket}/t")["aws_endpoint"] == "http://127.0.0.1:9"  # Hadoop's order
    assert per_bucket.storage_options("s3a://other/t")["aws_endpoint"] == "http://s3.example:443"
    assert SECRET_KEY not in repr(files)


def test_sink_appends_into_a_bucket_exactly_once_and_the_source_reads_the_versions_back(spark, lake, tmp_path):
    """A streaming query appends two micro-batches, is restarted from its checkpoint, and replays its last batch
    (its commit record removed): every row once. The source streams the table's versions back, row by row."""
    bucket, keys, client = lake
    uri = f"s3a://{bucket}/tables/orders"
    inbox, ckpt = tmp_path / "in", tmp_path / "ckpt"
    inbox.mkdir()
    sink = {"connector.class": "delta-sink", "delta.table.path": uri, **keys}

    def run() -> None:
        stream = spark.readStream.schema("id bigint, name string").json(str(inbox))
        (stream.select(F.lit(None).cast("binary").alias("key"), F.struct("id", "name").alias("value"),
                       F.lit("orders").alias("topic"))
         .writeStream.format("kconnect").options(**sink).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start().awaitTermination())

    (inbox / "a.json").write_text("".join(f'{{"id": {i}, "name": "n{i}"}}\n' for i in range(3)))
    run()
    (inbox / "b.json").write_text("".join(f'{{"id": {i}, "name": "n{i}"}}\n' for i in range(3, 5)))
    run()  # restarted from the checkpoint: only b.json is new
    files = Locations(keys)
    assert _table_rows(files, uri) == [(i, f"n{i}") for i in range(5)]
    version = delta_files.latest_version(uri, files=files)
    (ckpt / "commits" / "1").unlink()  # as after a crash between the sink's commit and Spark's
    (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)
    run()
    assert delta_files.latest_version(uri, files=files) == version  # the replayed batch was recognised
    assert _table_rows(files, uri) == [(i, f"n{i}") for i in range(5)]
    objects = client.objects(bucket, "tables/orders")
    assert any(k.startswith("tables/orders/_delta_log/") for k in objects)
    assert not any(k.endswith(".tmp") or "_kconnect_staging" in k for k in objects)

    source = {"connector.class": "delta-source", "delta.table.path": uri, **keys}
    batches = []
    (spark.readStream.format("kconnect").options(**source).load()
     .writeStream.foreachBatch(lambda d, i: batches.append(d.collect()))
     .option("checkpointLocation", str(tmp_path / "read")).trigger(availableNow=True).start().awaitTermination())
    rows = sorted((r.offset, r.value.id, r.value.name, r.topic) for b in batches for r in b)
    assert [r[1:] for r in rows] == [(i, f"n{i}", "orders") for i in range(5)]
    assert [divmod(r[0], VERSION_STRIDE) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]


def test_merge_upserts_and_deletes_in_a_bucket(spark, lake):
    """MERGE batches (keys from the record key; a tombstone deletes its key): staged in the bucket, merged, and
    the staging objects removed."""
    bucket, keys, client = lake
    uri = f"s3a://{bucket}/tables/customers"
    sink = {"connector.class": "delta-sink", "delta.table.path": uri, "delta.write.mode": "merge", **keys}

    def changes(rows: list[tuple]) -> None:
        (spark.createDataFrame(rows, "id bigint, name string, gone boolean")
         .select(F.struct("id").alias("key"),
                 F.when(~F.col("gone"), F.struct("id", "name")).alias("value"), F.lit("customers").alias("topic"))
         .write.format("kconnect").options(**sink).mode("append").save())

    changes([(1, "a", False), (2, "b", False), (3, "c", False)])
    changes([(2, "b2", False), (4, "d", False), (1, None, True)])
    files = Locations(keys)
    assert _table_rows(files, uri) == [(2, "b2"), (3, "c"), (4, "d")]
    staged = [k for k in client.objects(bucket, "tables/customers") if "_kconnect_staging" in k]
    assert not staged, staged


def test_delta_spark_reads_and_continues_a_table_the_deltalake_engine_wrote(spark, lake):
    """Delta's own engine reaches the bucket through the session's S3A connector (per-bucket Hadoop keys, as a
    user's spark.hadoop.fs.s3a.bucket.<bucket>.* settings give them); both engines then read the same rows."""
    bucket, keys, _ = lake
    uri = f"s3a://{bucket}/tables/shared"
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in keys.items():
        hadoop.set(key.replace("fs.s3a.", f"fs.s3a.bucket.{bucket}.", 1), value)
    hadoop.set(f"fs.s3a.bucket.{bucket}.connection.ssl.enabled", "false")
    sink = {"connector.class": "delta-sink", "delta.table.path": uri, **keys}
    _records(spark, [(1, "a"), (2, "b")]).write.format("kconnect").options(**sink).mode("append").save()
    by_spark = sorted((r.id, r.name) for r in spark.read.format("delta").load(uri).collect())
    assert by_spark == [(1, "a"), (2, "b")]
    by_the_session = {k: v for k, v in sink.items() if not k.startswith("fs.s3a.")}  # the session's S3A settings
    delta_spark_engine.write_batch(_records(spark, [(3, "c")]), by_the_session, engine="delta-spark")
    _records(spark, [(4, "d")]).write.format("kconnect").options(**sink).mode("append").save()
    expected = [(i, "abcd"[i - 1]) for i in range(1, 5)]
    assert _table_rows(Locations(keys), uri) == expected
    assert sorted((r.id, r.name) for r in spark.read.format("delta").load(uri).collect()) == expected


def test_a_table_on_another_object_store_names_the_engine_that_writes_it():
    with pytest.raises(ConnectError, match="delta-spark"):
        delta_files.table_root("gs://lake/t")
    assert delta_files.table_root("s3://lake/t/") == "s3://lake/t"
