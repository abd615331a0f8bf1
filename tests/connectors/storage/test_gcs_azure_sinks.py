"""Confluent's GCS and Azure Blob Storage sinks against real APIs (gcp-storage-emulator and Azurite, started by the
test run on 127.0.0.1): object names and contents as Confluent's storage sinks write them, replays and restarts, a
store that refuses writes, and config errors by key. (The sink contract's streaming replay runs on the S3 sink,
which writes through the same layer; here a stream is failed and restarted on each store.)"""

from __future__ import annotations

import gzip
import io
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.support import servers
from tests.support.azurite import ACCOUNT, ACCOUNT_KEY, AzuriteServer
from tests.support.gcs import GcsEmulator

GCS_SINK = "io.confluent.connect.gcs.GcsSinkConnector"
AZ_SINK = "io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector"


@dataclass
class Store:
    """One store under test: how a sink config names a bucket there, and a client to read it back."""

    kind: str
    endpoint: str
    client: Any

    def bucket(self) -> str:
        name = "kc-" + uuid.uuid4().hex[:12]
        if self.kind == "gcs":
            self.client.create_bucket(name)
        else:
            self.client.create_container(name)
        return name

    def sink(self, bucket: str, **extra: str) -> dict:
        if self.kind == "gcs":
            return {"connector.class": GCS_SINK, "gcs.bucket.name": bucket, "store.url": self.endpoint,
                    "flush.size": "3", "format.class": "io.confluent.connect.gcs.format.json.JsonFormat", **extra}
        return {"connector.class": AZ_SINK, "azblob.account.name": ACCOUNT, "azblob.account.key": ACCOUNT_KEY,
                "azblob.container.name": bucket, "store.url": f"{self.endpoint}/{ACCOUNT}", "flush.size": "3",
                "format.class": "io.confluent.connect.azure.blob.format.json.JsonFormat", **extra}

    def fmt(self, name: str) -> str:
        package = {"gcs": "io.confluent.connect.gcs.format.", "azure": "io.confluent.connect.azure.blob.format."}
        return f"{package[self.kind]}{name.lower().removesuffix('format')}.{name}"

    def objects(self, bucket: str) -> dict[str, bytes]:
        return self.client.objects(bucket)


def _shared(kind: str) -> Store:
    if kind == "gcs":
        endpoint = servers.gcs()
        return Store(kind, endpoint, GcsEmulator(port=int(endpoint.rsplit(":", 1)[1])))  # a client, never started
    endpoint = servers.azurite()
    return Store(kind, endpoint, AzuriteServer(port=int(endpoint.rsplit(":", 1)[1])))


@pytest.fixture(scope="module", params=["gcs", "azure"])
def store(request) -> Store:
    return _shared(request.param)


def _records(spark, rows: list[tuple], value_ddl: str = "struct<id:int,name:string>"):
    """A batch record DataFrame of (topic, partition, offset, timestamp ms, value) rows in one Spark partition."""
    df = spark.createDataFrame(rows, f"topic string, partition int, offset long, ts long, value {value_ddl}") \
        .coalesce(1)
    return (df.withColumn("timestamp", F.timestamp_millis("ts")).drop("ts")
            .withColumn("key", F.lit(None).cast("binary")).withColumn("headers", F.lit(None).cast(
                "array<struct<key:string,value:binary>>")))


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


def _lines(data: bytes) -> list:
    return [json.loads(line) for line in data.decode().splitlines()]


# ------------------------------------------------------------------------------------------ names and contents
def test_default_partitioner_names_objects_by_start_offset_and_cuts_at_flush_size(spark, store):
    bucket = store.bucket()
    rows = [("orders", p, o, 1_700_000_000_000 + o, (o, f"n{o}")) for p in (0, 1) for o in range(7)]
    _write(_records(spark, rows), store.sink(bucket))
    objects = store.objects(bucket)
    assert sorted(objects) == [f"topics/orders/partition={p}/orders+{p}+{o:010d}.json"
                               for p in (0, 1) for o in (0, 3, 6)]
    for p in (0, 1):
        assert _lines(objects[f"topics/orders/partition={p}/orders+{p}+0000000003.json"]) == [
            {"id": 3, "name": "n3"}, {"id": 4, "name": "n4"}, {"id": 5, "name": "n5"}]
    assert _lines(objects["topics/orders/partition=0/orders+0+0000000006.json"]) == [{"id": 6, "name": "n6"}]
    _write(_records(spark, rows), store.sink(bucket))  # a replay: the same objects, the same bytes
    assert store.objects(bucket) == objects


def test_parquet_by_field_and_gzip_json_by_day_as_confluent_names_them(spark, store):
    bucket = store.bucket()
    rows = [("t", 0, o, 1_700_000_000_000 + o * 3_600_000 * 12, (o, "a" if o % 2 else "b")) for o in range(4)]
    _write(_records(spark, rows), store.sink(bucket, **{
        "format.class": store.fmt("ParquetFormat"), "flush.size": "10", "topics.dir": "lake/raw",
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "name"}))
    objects = store.objects(bucket)
    assert sorted(objects) == ["lake/raw/t/name=a/t+0+0000000001.snappy.parquet",
                               "lake/raw/t/name=b/t+0+0000000000.snappy.parquet"]
    table = pq.read_table(io.BytesIO(objects["lake/raw/t/name=a/t+0+0000000001.snappy.parquet"]))
    assert table.to_pylist() == [{"id": 1, "name": "a"}, {"id": 3, "name": "a"}]

    bucket = store.bucket()
    prefix = store.kind if store.kind == "gcs" else "az"
    _write(_records(spark, rows), store.sink(bucket, **{
        f"{prefix}.compression.type": "gzip", "flush.size": "10", "timestamp.extractor": "Record",
        "partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner", "locale": "en",
        "timezone": "UTC"}))
    objects = store.objects(bucket)
    assert sorted(objects) == ["topics/t/year=2023/month=11/day=14/t+0+0000000000.json.gz",
                               "topics/t/year=2023/month=11/day=15/t+0+0000000001.json.gz",
                               "topics/t/year=2023/month=11/day=16/t+0+0000000003.json.gz"]
    assert _lines(gzip.decompress(objects["topics/t/year=2023/month=11/day=15/t+0+0000000001.json.gz"])) == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_keys_and_headers_objects_beside_each_value_object_on_the_shared_layer(spark, store):
    """store.kafka.keys/headers, written by the layer the S3 sink shares: .keys/.headers objects named and filled
    as Confluent's storage sinks write them."""
    bucket = store.bucket()
    rows = [("t", 0, o, 0, (o, f"n{o}")) for o in range(3)]
    header = F.struct(F.lit("source").alias("key"), F.encode(F.lit("web"), "UTF-8").alias("value"))
    df = _records(spark, rows).withColumn("key", F.encode(F.concat(F.lit("k"), "offset"), "UTF-8")) \
        .withColumn("headers", F.array(header))
    _write(df, store.sink(bucket, **{"flush.size": "2", "store.kafka.keys": "true", "store.kafka.headers": "true",
                                     "keys.format.class": store.fmt("ByteArrayFormat"),
                                     "headers.format.class": store.fmt("JsonFormat")}))
    objects = store.objects(bucket)
    assert sorted(objects) == [f"topics/t/partition=0/t+0+{o:010d}.{ext}" for o in (0, 2)
                               for ext in ("headers.json", "json", "keys.bin")]
    assert objects["topics/t/partition=0/t+0+0000000000.keys.bin"] == b"k0\nk1\n"
    assert _lines(objects["topics/t/partition=0/t+0+0000000002.headers.json"]) == [[{"key": "source",
                                                                                      "value": "web"}]]


# ------------------------------------------------------------------------------------------ refused writes
def _stream_once(spark, source: Path, sink: dict, ckpt: str) -> None:
    df = spark.readStream.format("kconnect").options(**{
        "connector.class": "FileStreamSource", "file": str(source), "topic": "t"}).load()
    df.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt) \
        .trigger(availableNow=True).start().awaitTermination()


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_a_stopped_store_fails_the_batch_naming_the_bucket_and_loses_nothing(spark, tmp_path, kind):
    """The server stops: the batch fails naming the bucket (container) and endpoint, never the secret; the
    restarted query, the server back, writes the failed batch."""
    own = GcsEmulator().start() if kind == "gcs" else AzuriteServer().start()
    try:
        target = Store(kind, own.endpoint, own)
        bucket = target.bucket()
        source = tmp_path / "in.txt"
        source.write_text("".join(f"r{i}\n" for i in range(4)))
        sink = target.sink(bucket, **{"flush.size": "10", "gcs.part.retries": "0"} if kind == "gcs" else
                           {"flush.size": "10"})
        ckpt = str(tmp_path / "ckpt")
        _stream_once(spark, source, sink, ckpt)
        assert sorted(target.objects(bucket)) == ["topics/t/partition=0/t+0+0000000000.json"]
        with open(source, "a") as f:
            f.writelines(f"r{i}\n" for i in range(4, 6))
        own.stop()
        where = "bucket" if kind == "gcs" else "container"
        with pytest.raises(Exception, match=rf"to {where} '{bucket}'") as failure:
            _stream_once(spark, source, sink, ckpt)
        assert ACCOUNT_KEY not in str(failure.value)
        own.start()
        if kind == "gcs":  # the emulator keeps objects in memory: it comes back empty
            own.create_bucket(bucket)
        _stream_once(spark, source, sink, ckpt)
        assert _lines(target.objects(bucket)["topics/t/partition=0/t+0+0000000012.json"]) == ["r4", "r5"]
    finally:
        own.destroy()


@pytest.mark.parametrize(("key", "wrong", "shown"), [
    ("azblob.account.key", "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk=", "V3JvbmdLZXlX"),
    ("azblob.sas.token", "?sv=2023-11-03&ss=b&srt=sco&sp=rwlc&se=2099-01-01T00:00:00Z&sig=c2FzLXMzY3JldA%3D%3D",
     "c2FzLXMzY3JldA"),
])
def test_wrong_azure_credentials_fail_naming_the_container_never_the_secret(spark, key, wrong, shown):
    target = _shared("azure")
    container = target.bucket()
    df = _records(spark, [("t", 0, 0, 0, (0, "a"))])
    config = {k: v for k, v in target.sink(container, **{key: wrong}).items()
              if key == "azblob.account.key" or k != "azblob.account.key"}
    with pytest.raises(Exception, match=rf"to container '{container}' of account '{ACCOUNT}'") as failure:
        _write(df, config)
    assert shown not in str(failure.value)
    assert target.objects(container) == {}


# ------------------------------------------------------------------------------------------ config
GCS_BASE = {"connector.class": GCS_SINK, "gcs.bucket.name": "b", "flush.size": "3",
            "format.class": "io.confluent.connect.gcs.format.json.JsonFormat"}
AZ_BASE = {"connector.class": AZ_SINK, "azblob.account.name": "acct1", "azblob.account.key": "a3VyZS1zM2NyZXQ=",
           "azblob.container.name": "lake", "flush.size": "3",
           "format.class": "io.confluent.connect.azure.blob.format.json.JsonFormat"}


@pytest.mark.parametrize(("base", "extra", "key"), [
    (GCS_BASE, {"gcs.bucket.name": None}, "gcs.bucket.name"),
    (GCS_BASE, {"format.class": "io.confluent.connect.s3.format.json.JsonFormat"}, "format.class"),
    (GCS_BASE, {"format.class": "io.confluent.connect.gcs.format.csv.CsvFormat"}, "format.class"),
    (GCS_BASE, {"gcs.compression.type": "zip"}, "gcs.compression.type"),
    (GCS_BASE, {"store.url": "http://u:p@127.0.0.1:9"}, "store.url"),
    (GCS_BASE, {"gcs.credentials.path": "/k.json", "gcs.credentials.json": "{}"}, "gcs.credentials.json"),
    (GCS_BASE, {"partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner"}, "timezone"),
    (GCS_BASE, {"store.kafka.keys": "true", "keys.format.class": "io.confluent.connect.s3.format.json.JsonFormat"},
     "keys.format.class"),
    (AZ_BASE, {"store.kafka.headers": "true",
               "headers.format.class": "io.confluent.connect.azure.blob.format.bytearray.ByteArrayFormat"},
     "headers.format.class"),
    (AZ_BASE, {"azblob.account.name": "Bad_Name"}, "azblob.account.name"),
    (AZ_BASE, {"azblob.container.name": "UPPER"}, "azblob.container.name"),
    (AZ_BASE, {"azblob.sas.token": "sv=1&sig=abc"}, "azblob.sas.token"),
    (AZ_BASE, {"store.url": "http://127.0.0.1:9/otheraccount"}, "store.url"),
    (AZ_BASE, {"az.compression.type": "zip"}, "az.compression.type"),
    (AZ_BASE, {"flush.size": "0"}, "flush.size"),
])
def test_config_errors_name_the_key(base, extra, key):
    config = {k: v for k, v in {**base, **extra}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert key in e.value.keys
    assert "a3VyZS1zM2NyZXQ=" not in str(e.value) and "sig=abc" not in str(e.value)


def test_gcs_credentials_that_are_not_a_service_account_key_fail_by_key_never_echoed():
    from spark_connect_bridge.errors import ConnectError

    connector = build_connector({**GCS_BASE, "gcs.credentials.json": '{"private_key": "pk-s3cret"}'})
    with pytest.raises(ConnectError, match=r"gcs\.credentials\.json is not a service account key") as e:
        connector.store().filesystem()
    assert "pk-s3cret" not in str(e.value) and "pk-s3cret" not in repr(connector)


def test_a_gcs_service_account_key_is_exchanged_for_a_token_and_the_objects_written(spark, tmp_path):
    """gcs.credentials.path: google-auth signs a JWT with the key and trades it at the key's token_uri (here a
    token server on 127.0.0.1) for the access token the uploads carry; a refused exchange names the account, never
    the key."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    grants: list[str] = []

    class TokenServer(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            grants.append(body)
            ok = self.path == "/token"
            payload = json.dumps({"access_token": "tok-1", "expires_in": 3600, "token_type": "Bearer"} if ok
                                 else {"error": "invalid_grant"}).encode()
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), TokenServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
        key = {"type": "service_account", "client_email": "writer@kconnect-test.iam.gserviceaccount.com",
               "private_key": pem, "private_key_id": "k1", "token_uri": f"http://127.0.0.1:{server.server_port}/token"}
        path = tmp_path / "writer.json"
        path.write_text(json.dumps(key))
        target = _shared("gcs")
        bucket = target.bucket()
        _write(_records(spark, [("t", 0, 0, 0, (0, "a"))]), target.sink(bucket, **{"gcs.credentials.path": str(path)}))
        assert _lines(target.objects(bucket)["topics/t/partition=0/t+0+0000000000.json"]) == [{"id": 0, "name": "a"}]
        assert grants and "grant_type=urn" in grants[0]
        refused = json.dumps(dict(key, token_uri=f"http://127.0.0.1:{server.server_port}/refuse"))
        with pytest.raises(Exception, match="writer@kconnect-test") as failure:
            _write(_records(spark, [("t", 0, 1, 0, (1, "b"))]),
                   target.sink(bucket, **{"gcs.credentials.json": refused}))
        assert "PRIVATE KEY" not in str(failure.value)
        assert sorted(target.objects(bucket)) == ["topics/t/partition=0/t+0+0000000000.json"]
    finally:
        server.shutdown()


def test_avro_objects_hold_the_values_with_avrodatas_schema(spark, store):
    import fastavro

    bucket = store.bucket()
    rows = [("t", 0, o, 0, (o, f"n{o}")) for o in range(3)]
    _write(_records(spark, rows), store.sink(bucket, **{"format.class": store.fmt("AvroFormat"), "flush.size": "2"}))
    objects = store.objects(bucket)
    assert sorted(objects) == ["topics/t/partition=0/t+0+0000000000.avro", "topics/t/partition=0/t+0+0000000002.avro"]
    assert list(fastavro.reader(io.BytesIO(objects["topics/t/partition=0/t+0+0000000000.avro"]))) == [
        {"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}]
    assert list(fastavro.reader(io.BytesIO(objects["topics/t/partition=0/t+0+0000000002.avro"]))) == [
        {"id": 2, "name": "n2"}]
