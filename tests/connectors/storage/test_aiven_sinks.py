"""Aiven's S3 and GCS sinks against moto's S3 server and the GCS emulator (started once by the test run on
127.0.0.1), configured as Aiven's README writes them: object names from ``file.name.template``, contents byte for
byte as Aiven's output writers write them (the expected texts are those of Aiven's own writer tests), replays, and
config errors by key."""

from __future__ import annotations

import base64
import gzip
import uuid

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.support import servers
from tests.support.gcs import GcsEmulator
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

AIVEN_S3 = "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector"
AIVEN_GCS = "io.aiven.kafka.connect.gcs.GcsSinkConnector"


@pytest.fixture(scope="module")
def s3():
    endpoint = servers.s3()
    return endpoint, MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the shared server


@pytest.fixture(scope="module")
def gcs():
    endpoint = servers.gcs()
    return endpoint, GcsEmulator(port=int(endpoint.rsplit(":", 1)[1]))  # a client, never started


def _bucket(store) -> str:
    name = "kc-" + uuid.uuid4().hex[:12]
    store[1].create_bucket(name)
    return name


def _s3_sink(s3, bucket: str, **extra: str) -> dict:
    """Aiven's README configuration (its keys), at the test's endpoint."""
    return {"connector.class": AIVEN_S3, "aws.access.key.id": ACCESS_KEY, "aws.secret.access.key": SECRET_KEY,
            "aws.s3.region": REGION, "aws.s3.bucket.name": bucket, "aws.s3.endpoint": s3[0], **extra}


def _records(spark, rows: list[tuple], value_ddl: str = "binary"):
    """(topic, partition, offset, timestamp ms, key, value) rows in one Spark partition, headers source=web."""
    df = spark.createDataFrame(rows, f"topic string, partition int, offset long, ts long, key string, "
                                     f"value {value_ddl}").coalesce(1)
    header = F.struct(F.lit("source").alias("key"), F.encode(F.lit("web"), "UTF-8").alias("value"))
    return df.withColumn("timestamp", F.timestamp_millis("ts")).drop("ts").withColumn("headers", F.array(header))


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


def _b64(text: str) -> bytes:
    return base64.b64encode(text.encode())


def test_default_csv_of_base64_values_gzip_named_topic_partition_start_offset_and_replayed_identically(spark, s3):
    bucket = _bucket(s3)
    rows = [("orders", p, o, 1_700_000_000_000 + o, f"k{o}", f"v{p}-{o}".encode()) for p in (0, 1) for o in range(5)]
    sink = _s3_sink(s3, bucket, **{"file.max.records": "2"})
    _write(_records(spark, rows), sink)
    objects = s3[1].objects(bucket)
    assert sorted(objects) == [f"orders-{p}-{o}.gz" for p in (0, 1) for o in (0, 2, 4)]
    assert gzip.decompress(objects["orders-1-2.gz"]) == _b64("v1-2") + b"\n" + _b64("v1-3")  # no final newline
    assert gzip.decompress(objects["orders-0-4.gz"]) == _b64("v0-4")
    _write(_records(spark, rows), sink)  # a replayed batch: the same names, the same bytes
    assert s3[1].objects(bucket) == objects


def test_csv_fields_in_their_order_with_nulls_empty_and_headers_as_aiven_writes_them(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, 7, 1_554_210_895_000, "key", b"Lorem ipsum dolor sit amet"), ("t", 0, 8, 1_000, None, None)]
    _write(_records(spark, rows), _s3_sink(s3, bucket, **{
        "file.compression.type": "none", "format.output.fields": "key,value,offset,timestamp,headers",
        "file.name.template": "csv/{{topic}}/{{partition:padding=true}}-{{start_offset:padding=true}}.csv"}))
    objects = s3[1].objects(bucket)
    assert list(objects) == ["csv/t/0000000000-00000000000000000007.csv"]
    header = _b64("source") + b":" + _b64("web") + b";"
    assert objects["csv/t/0000000000-00000000000000000007.csv"].split(b"\n") == [
        b"a2V5,TG9yZW0gaXBzdW0gZG9sb3Igc2l0IGFtZXQ=,7,1554210895000," + header, b",,8,1000," + header]


def test_jsonl_and_json_as_aiven_orders_the_fields_and_the_readme_names_the_objects(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 3, o, 1_000 + o * 1_500, f"key{o}", (f"n{o}", o)) for o in range(2)]
    df = _records(spark, rows, "struct<name:string,n:int>")
    _write(df, _s3_sink(s3, bucket, **{
        "format.output.type": "jsonl", "format.output.fields": "key,value,offset,timestamp,headers",
        "file.name.template": "dir1/dir2/{{topic}}-{{partition:padding=true}}-{{start_offset:padding=true}}.gz",
        "file.compression.type": "gzip"}))
    _write(df, _s3_sink(s3, bucket, **{"format.output.type": "json", "file.compression.type": "none",
                                       "format.output.fields": "value,key", "file.name.template": "j/{{topic}}-"
                                       "{{partition}}-{{start_offset}}.json"}))
    _write(df, _s3_sink(s3, bucket, **{"format.output.type": "json", "format.output.envelope": "false",
                                       "file.compression.type": "none", "file.name.template": "e/{{topic}}-"
                                       "{{partition}}-{{start_offset}}.json"}))
    objects = s3[1].objects(bucket)
    assert sorted(objects) == ["dir1/dir2/t-0000000003-00000000000000000000.gz", "e/t-3-0.json", "j/t-3-0.json"]
    assert gzip.decompress(objects["dir1/dir2/t-0000000003-00000000000000000000.gz"]).decode().split("\n") == [
        '{"headers":[{"key":"source","value":"web"}],"offset":0,"value":{"name":"n0","n":0},"key":"key0",'
        '"timestamp":"1970-01-01T00:00:01Z"}',
        '{"headers":[{"key":"source","value":"web"}],"offset":1,"value":{"name":"n1","n":1},"key":"key1",'
        '"timestamp":"1970-01-01T00:00:02.500Z"}']
    assert objects["j/t-3-0.json"].decode() == ('[\n{"value":{"name":"n0","n":0},"key":"key0"},\n'
                                               '{"value":{"name":"n1","n":1},"key":"key1"}\n]')
    assert objects["e/t-3-0.json"].decode() == '[\n{"name":"n0","n":0},\n{"name":"n1","n":1}\n]'


def test_parquet_as_aiven_s_parquet_writer_lays_it_out_and_a_replay_writes_the_same_objects(spark, s3):
    """Aiven's allOutputFields/schemaChanged parquet tests' layout: the fields in format.output.fields order (key,
    value a record, offset, timestamp epoch ms, headers a map or, when the object's first record has none, null),
    the codec of file.compression.type inside the file and its extension in the default name."""
    import io

    import pyarrow.parquet as pq

    bucket = _bucket(s3)
    rows = [("t", p, o, 1_700_000_000_000 + o, f"key-{o}", (o, f"Hello {o}")) for p in (0, 1) for o in range(3)]
    df = _records(spark, rows, "struct<id:int,message:string>")
    sink = _s3_sink(s3, bucket, **{"format.output.type": "parquet", "file.compression.type": "gzip",
                                   "format.output.fields": "key,value,offset,timestamp,headers",
                                   "format.output.fields.value.encoding": "none"})
    _write(df, sink)
    objects = s3[1].objects(bucket)
    assert sorted(objects) == ["t-0-0.gz", "t-1-0.gz"]
    parquet = pq.ParquetFile(io.BytesIO(objects["t-1-0.gz"]))
    assert parquet.schema_arrow.names == ["key", "value", "offset", "timestamp", "headers"]
    assert parquet.metadata.row_group(0).column(1).compression == "GZIP"
    assert parquet.read().to_pylist() == [
        {"key": f"key-{o}", "value": {"id": o, "message": f"Hello {o}"}, "offset": o,
         "timestamp": 1_700_000_000_000 + o, "headers": [("source", b"web")]} for o in range(3)]
    _write(df, sink)  # a replayed batch: the same names, the same bytes
    assert s3[1].objects(bucket) == objects
    # without the envelope: the value record's own fields; no headers: a null column; snappy inside the file
    _write(df.drop("headers").withColumn("headers", F.lit(None).cast("array<struct<key:string,value:binary>>")),
           _s3_sink(s3, bucket, **{"format.output.type": "parquet", "file.compression.type": "snappy",
                                   "format.output.fields": "value", "format.output.envelope": "false",
                                   "file.name.template": "raw/{{topic}}-{{partition}}-{{start_offset}}.parquet"}))
    _write(df.drop("headers").withColumn("headers", F.lit(None).cast("array<struct<key:string,value:binary>>")),
           _s3_sink(s3, bucket, **{"format.output.type": "parquet", "file.compression.type": "none",
                                   "format.output.fields": "offset,headers",
                                   "file.name.template": "h/{{topic}}-{{partition}}-{{start_offset}}.parquet"}))
    objects = s3[1].objects(bucket)
    raw = pq.ParquetFile(io.BytesIO(objects["raw/t-0-0.parquet"]))
    assert raw.metadata.row_group(0).column(0).compression == "SNAPPY"
    assert raw.read().to_pylist() == [{"id": o, "message": f"Hello {o}"} for o in range(3)]
    assert pq.read_table(io.BytesIO(objects["h/t-0-0.parquet"])).to_pylist() == [
        {"offset": o, "headers": None} for o in range(3)]


def test_parquet_refuses_a_schemaless_value_before_writing(spark, s3):
    from spark_connect_bridge.core.records import VARIANT_JSON_META

    bucket = _bucket(s3)
    df = _records(spark, [("t", 0, 0, 1, "k", '{"a": 1}')], "string")
    df = df.withColumn("value", F.col("value").alias("value", metadata={VARIANT_JSON_META: "json"}))
    with pytest.raises(Exception, match=r"format\.output\.type=parquet writes the value's schema"):
        _write(df, _s3_sink(s3, bucket, **{"format.output.type": "parquet"}))
    assert s3[1].objects(bucket) == {}


def test_a_key_template_keeps_the_last_record_of_each_key_and_event_time_directories(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 1_700_000_000_000 + o * 3_600_000 * 12, f"k{o % 2}", f"v{o}".encode()) for o in range(5)]
    _write(_records(spark, rows), _s3_sink(s3, bucket, **{
        "file.name.template": "latest/{{key}}", "format.output.fields.value.encoding": "none",
        "file.compression.type": "none"}))
    _write(_records(spark, rows), _s3_sink(s3, bucket, **{
        "file.name.template": "{{topic}}/{{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/"
                              "{{partition}}-{{start_offset}}", "file.name.timestamp.source": "event",
        "format.output.fields": "offset", "file.compression.type": "none"}))
    objects = s3[1].objects(bucket)
    assert objects["latest/k0"] == b"v4" and objects["latest/k1"] == b"v3"
    # Aiven's grouper: a file per day, named with the start offset of the partition's current head record
    assert {k: v for k, v in objects.items() if k.startswith("t/")} == {
        "t/2023-11-14/0-0": b"0", "t/2023-11-15/0-0": b"1\n2", "t/2023-11-16/0-0": b"3\n4"}


def test_the_aiven_gcs_sink_writes_under_file_name_prefix(spark, gcs):
    bucket = _bucket(gcs)
    rows = [("t", 0, o, 1_000, "k", f"v{o}".encode()) for o in range(3)]
    _write(_records(spark, rows), {"connector.class": AIVEN_GCS, "gcs.bucket.name": bucket, "gcs.endpoint": gcs[0],
                                   "file.name.prefix": "exports/", "format.output.type": "jsonl",
                                   "file.max.records": "2"})
    objects = gcs[1].objects(bucket)
    assert sorted(objects) == ["exports/t-0-0", "exports/t-0-2"]
    assert objects["exports/t-0-0"] == b'{"value":"djA="}\n{"value":"djE="}'  # bytes are base64 in JSON


@pytest.mark.parametrize(("extra", "key"), [
    ({"file.name.template": "{{topic}}-{{offset}}"}, "file.name.template"),
    ({"file.name.template": "{{topic}}-{{start_offset}}"}, "file.name.template"),
    ({"file.name.template": "{{topic}}-{{partition}}-{{start_offset:padding=yes}}"}, "file.name.template"),
    ({"file.name.template": "{{timestamp}}/{{topic}}-{{partition}}-{{start_offset}}"}, "file.name.template"),
    ({"format.output.type": "avro"}, "format.output.type"),
    ({"format.output.type": "xml"}, "format.output.type"),
    ({"format.output.fields": "value,partition"}, "format.output.fields"),
    ({"format.output.type": "jsonl", "format.output.envelope": "false", "format.output.fields": "key,value"},
     "format.output.envelope"),
    ({"file.compression.type": "snappy"}, "file.compression.type"),
    ({"file.compression.type": "zstd", "format.output.type": "jsonl"}, "file.compression.type"),
    ({"file.max.records": "-1"}, "file.max.records"),
    ({"aws.secret.access.key": None}, "aws.secret.access.key"),
    ({"aws.s3.endpoint": "http://u:p@127.0.0.1:9"}, "aws.s3.endpoint"),
    ({"aws_secret_access_key": "old-s3cret"}, "aws_secret_access_key"),
    ({"aws.sts.role.arn": "arn:aws:iam::1:role/r"}, "aws.sts.role.arn"),
    ({"file.name.timestamp.timezone": "Mars/Olympus"}, "file.name.timestamp.timezone"),
])
def test_config_errors_name_the_key(extra, key):
    config = {k: v for k, v in dict(_s3_sink(("http://127.0.0.1:9", None), "b"), **extra).items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert key in [p.key for p in e.value.problems], e.value
    assert "old-s3cret" not in str(e.value) and SECRET_KEY not in str(e.value)


def test_gcs_credentials_are_alternatives():
    with pytest.raises(ConfigError) as e:
        build_connector({"connector.class": AIVEN_GCS, "gcs.bucket.name": "b", "gcs.credentials.path": "/k.json",
                         "gcs.credentials.default": "true"})
    assert "gcs.credentials.default" in [p.key for p in e.value.problems]


def test_the_deprecated_aws_s3_prefix_names_objects_as_aiven_s_old_keys():
    """aws.s3.prefix set: <prefix><topic>-<partition>-<start offset, 20 digits><compression>, the template only
    grouping (Aiven's S3SinkTask.oldFullKey); planned without a server."""
    import pyarrow as pa

    from spark_connect_bridge.connectors.storage.aiven import write_aiven_objects

    sink = build_connector(_s3_sink(("http://127.0.0.1:9", None), "b", **{
        "aws.s3.prefix": "backups/{{topic}}/", "file.max.records": "2"}))
    table = pa.table({"topic": ["t"] * 3, "partition": pa.array([4] * 3, pa.int32()), "offset": [7, 8, 9],
                      "value": [b"a", b"b", b"c"]})
    put: dict[str, bytes] = {}
    write_aiven_objects(iter(table.to_batches()), sink.layout(), put.__setitem__, 0)
    assert {k: gzip.decompress(v) for k, v in put.items()} == {
        "backups/t/t-4-00000000000000000007.gz": b"YQ==\nYg==", "backups/t/t-4-00000000000000000009.gz": b"Yw=="}


def test_parquet_headers_of_a_slice_are_that_slice_s_records_headers():
    import pyarrow as pa

    from spark_connect_bridge.connectors.storage.aiven import _headers_map

    header = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    headers = pa.array([[{"key": "a", "value": b"1"}], [{"key": "b", "value": b"2"}, {"key": "c", "value": b"3"}],
                        None], header)
    assert _headers_map(headers.slice(1)).to_pylist() == [[("b", b"2"), ("c", b"3")], None]
    assert _headers_map(pa.array([[], None], header)).null_count == 2  # the first record has none: a null column
