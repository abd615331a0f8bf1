"""Confluent's S3 source reading back what the S3 sink wrote (moto's S3 server, started once by the test run): the
sink -> source round trip record by record, a restarted stream that reads on from its checkpoint (objects written
since, nothing twice), and config errors by key."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

S3_SINK = "io.confluent.connect.s3.S3SinkConnector"
S3_SOURCE = "io.confluent.connect.s3.source.S3SourceConnector"
BYTES = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"
JSON = "io.confluent.connect.s3.format.json.JsonFormat"


@pytest.fixture(scope="module")
def s3():
    endpoint = servers.s3()
    return endpoint, MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the shared server


def _bucket(s3) -> str:
    name = "kc-" + uuid.uuid4().hex[:12]
    s3[1].create_bucket(name)
    return name


def _store(s3, bucket: str) -> dict:
    return {"s3.bucket.name": bucket, "s3.region": REGION, "store.url": s3[0], "aws.access.key.id": ACCESS_KEY,
            "aws.secret.access.key": SECRET_KEY}


def _sink_write(spark, s3, bucket: str, rows: list[tuple], fmt: str, value_ddl: str = "binary") -> None:
    df = spark.createDataFrame(rows, f"topic string, partition int, offset long, value {value_ddl}").coalesce(1) \
        .withColumn("timestamp", F.lit(None).cast("timestamp")).withColumn("key", F.lit(None).cast("binary")) \
        .withColumn("headers", F.lit(None).cast("array<struct<key:string,value:binary>>"))
    df.write.format("kconnect").options(**{"connector.class": S3_SINK, "flush.size": "2", "format.class": fmt,
                                           **_store(s3, bucket)}).mode("append").save()


def _restore(spark, s3, bucket: str, ckpt: str) -> list[tuple]:
    """One availableNow run of the source from ``ckpt``: the records it read, as (topic, partition, offset,
    value)."""
    got: list[tuple] = []
    stream = spark.readStream.format("kconnect").options(**{
        "connector.class": S3_SOURCE, "format.class": BYTES, **_store(s3, bucket)}).load()
    query = stream.writeStream.foreachBatch(
        lambda df, _: got.extend((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())) \
        .option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    query.awaitTermination()
    return sorted(got)


def test_what_the_sink_wrote_streams_back_and_a_restart_reads_on_from_the_checkpoint(spark, s3, tmp_path):
    bucket = _bucket(s3)
    first = [("orders", p, o, f"v{p}-{o}".encode()) for p in (0, 1) for o in range(5 - 2 * p)]
    _sink_write(spark, s3, bucket, first, BYTES)
    assert sorted(s3[1].objects(bucket, "topics/orders/partition=0")) == [
        f"topics/orders/partition=0/orders+0+{o:010d}.bin" for o in (0, 2, 4)]
    ckpt = str(tmp_path / "ckpt")
    assert _restore(spark, s3, bucket, ckpt) == sorted(first)
    later = [("orders", 0, o, f"v0-{o}".encode()) for o in (5, 6, 7)]
    _sink_write(spark, s3, bucket, later, BYTES)  # objects +5 (5, 6) and +7 (7)
    assert _restore(spark, s3, bucket, ckpt) == later  # only what was written since
    assert _restore(spark, s3, bucket, ckpt) == []


def test_json_objects_come_back_as_their_lines(spark, s3):
    bucket = _bucket(s3)
    _sink_write(spark, s3, bucket, [("t", 0, o, (o, f"n{o}")) for o in range(3)], JSON,
                "struct<id:int,name:string>")
    rows = spark.read.format("kconnect").options(**{"connector.class": S3_SOURCE, "format.class": JSON,
                                                    **_store(s3, bucket)}).load().collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == [
        (o, f'{{"id":{o},"name":"n{o}"}}'.encode()) for o in range(3)]


@pytest.mark.parametrize(("extra", "key"), [
    ({"format.class": "io.confluent.connect.s3.format.avro.AvroFormat"}, "format.class"),
    ({"partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner"}, "partitioner.class"),
    ({"topic.regex.list": "orders:.*\\.json"}, "topic.regex.list"),
    ({"store.url": "http://u:p@127.0.0.1:9"}, "store.url"),
    ({"s3.bucket.name": None}, "s3.bucket.name"),
])
def test_config_errors_name_the_key(extra, key):
    config = {k: v for k, v in {"connector.class": S3_SOURCE, "format.class": JSON, "s3.bucket.name": "b",
                                **extra}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert key in [p.key for p in e.value.problems], e.value
