"""Confluent's S3 sink against a real S3 API (moto's server, started by the test run on 127.0.0.1): object names and
contents as Confluent writes them, per format and partitioner; replays, restarts and a store that refuses writes."""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import json
import time
import uuid
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.storage.object_sink import JSON_LINES_META
from spark_connect_bridge.engine.pipeline import prepare, write_batch
from spark_connect_bridge.errors import ConfigError
from tests.contract.contract import SinkContract
from tests.support import servers
from tests.support.killed_driver import kill, start_driver
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

S3_SINK = "io.confluent.connect.s3.S3SinkConnector"
JSON = "io.confluent.connect.s3.format.json.JsonFormat"
PARQUET = "io.confluent.connect.s3.format.parquet.ParquetFormat"
BYTES = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"
AVRO = "io.confluent.connect.s3.format.avro.AvroFormat"
CSV = "io.confluent.connect.s3.format.csv.CsvFormat"


@pytest.fixture(scope="module")
def s3():
    """The run's S3 server: its endpoint and a client of it (the shared server the suite starts once)."""
    endpoint = servers.s3()
    port = int(endpoint.rsplit(":", 1)[1])
    client = MotoS3Server(port=port)  # a client of the shared server (never started or stopped here)
    return endpoint, client


def _bucket(s3) -> str:
    name = "kc-" + uuid.uuid4().hex[:12]
    s3[1].create_bucket(name)
    return name


def _sink(endpoint: str, bucket: str, **extra: str) -> dict:
    return {"connector.class": S3_SINK, "s3.bucket.name": bucket, "s3.region": REGION, "store.url": endpoint,
            "aws.access.key.id": ACCESS_KEY, "aws.secret.access.key": SECRET_KEY, "flush.size": "3",
            "format.class": JSON, **extra}


def _records(spark, rows: list[tuple], value_ddl: str = "struct<id:int,name:string>"):
    """A batch record DataFrame: (topic, partition, offset, timestamp ms, value) rows, in one Spark partition (as
    Spark's Kafka source gives each Kafka partition's records to one task)."""
    df = spark.createDataFrame(rows, f"topic string, partition int, offset long, ts long, value {value_ddl}") \
        .coalesce(1)
    return (df.withColumn("timestamp", F.timestamp_millis("ts")).drop("ts")
            .withColumn("key", F.lit(None).cast("binary")).withColumn("headers", F.lit(None).cast(
                "array<struct<key:string,value:binary>>")))


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


def _lines(data: bytes) -> list:
    return [json.loads(line) for line in data.decode().splitlines()]


def _avro(data: bytes) -> tuple[dict, list]:
    """(writer schema, records) of an Avro container file."""
    reader = fastavro.reader(io.BytesIO(data))
    return reader.writer_schema, list(reader)


# ------------------------------------------------------------------------------------------ contract
class TestS3SinkContract(SinkContract):
    """The sink contract (replayed batch, failed write then restart) with JsonFormat: the lines are JSON strings."""

    @pytest.fixture(autouse=True)
    def _server(self, s3):
        self.s3 = s3

    def sink_config(self, tmp_path: Path) -> dict:
        if not hasattr(self, "_config"):
            self._config = _sink(self.s3[0], _bucket(self.s3), **{"flush.size": "2"})
        return self._config

    def read_back(self, config: dict) -> list[str]:
        out = []
        for data in self.s3[1].objects(config["s3.bucket.name"]).values():
            out.extend(_lines(data))
        return out


# ------------------------------------------------------------------------------------------ names and contents
def test_default_partitioner_names_objects_by_start_offset_and_cuts_at_flush_size(spark, s3):
    bucket = _bucket(s3)
    rows = [("orders", p, o, 1_700_000_000_000 + o, (o, f"n{o}")) for p in (0, 1) for o in range(7)]
    _write(_records(spark, rows), _sink(s3[0], bucket))
    objects = s3[1].objects(bucket)
    assert sorted(objects) == [f"topics/orders/partition={p}/orders+{p}+{o:010d}.json"
                               for p in (0, 1) for o in (0, 3, 6)]
    assert _lines(objects["topics/orders/partition=1/orders+1+0000000003.json"]) == [
        {"id": 3, "name": "n3"}, {"id": 4, "name": "n4"}, {"id": 5, "name": "n5"}]
    assert _lines(objects["topics/orders/partition=0/orders+0+0000000006.json"]) == [{"id": 6, "name": "n6"}]


def test_topics_dir_delimiters_and_padding_shape_the_names(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 0, (o, "x")) for o in range(2)]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{
        "topics.dir": "raw/kafka", "directory.delim": "/", "file.delim": "_", "filename.offset.zero.pad.width": "4",
        "flush.size": "5"}))
    assert sorted(s3[1].objects(bucket)) == ["raw/kafka/t/partition=0/t_0_0000.json"]


def test_field_partitioner_writes_one_object_per_value_starting_at_its_first_offset(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, 0, 0, (1, "eu")), ("t", 0, 1, 0, (2, "us")), ("t", 0, 2, 0, (3, "eu")), ("t", 0, 3, 0, (4, "us"))]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "name", "flush.size": "3"}))
    objects = s3[1].objects(bucket)
    assert sorted(objects) == ["topics/t/name=eu/t+0+0000000000.json", "topics/t/name=us/t+0+0000000001.json",
                               "topics/t/name=us/t+0+0000000003.json"]
    assert [r["id"] for r in _lines(objects["topics/t/name=eu/t+0+0000000000.json"])] == [1, 3]


def test_hourly_partitioner_on_record_time_rotates_on_record_time(spark, s3):
    bucket = _bucket(s3)
    hour = 3_600_000
    base = 1_700_000_000_000 // hour * hour  # 2023-11-14T22:00Z
    rows = [("t", 0, 0, base, (0, "a")), ("t", 0, 1, base + 60_000, (1, "b")), ("t", 0, 2, base + hour, (2, "c")),
            ("t", 0, 3, base + hour + 1, (3, "d"))]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner", "locale": "en-US",
        "timezone": "UTC", "timestamp.extractor": "Record", "rotate.interval.ms": "600000", "flush.size": "100"}))
    assert sorted(s3[1].objects(bucket)) == [
        "topics/t/year=2023/month=11/day=14/hour=22/t+0+0000000000.json",
        "topics/t/year=2023/month=11/day=14/hour=23/t+0+0000000002.json"]


def test_time_based_partitioner_formats_path_in_its_timezone_from_a_value_field(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, 0, 0, (1_700_000_000, "x"))]  # the field is epoch seconds * 1000 below
    df = _records(spark, rows).withColumn("value", F.struct(
        (F.col("value.id").cast("long") * 1000).alias("at"), F.col("value.name").alias("name")))
    _write(df, _sink(s3[0], bucket, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'dt'=YYYY-MM-dd/'hr'=HH", "partition.duration.ms": "3600000", "locale": "en-US",
        "timezone": "Asia/Tokyo", "timestamp.extractor": "RecordField", "timestamp.field": "at"}))
    # 1700000000 s = 2023-11-14T22:13:20Z = 2023-11-15 07:13 in Tokyo
    assert sorted(s3[1].objects(bucket)) == ["topics/t/dt=2023-11-15/hr=07/t+0+0000000000.json"]


_TRICKY_VALUE = ("struct<i:int,l:bigint,s:string,f:float,d:double,b:boolean,bin:binary,dt:date,ts:timestamp,"
                 "dec:decimal(10,3),arr:array<struct<x:int,y:string>>,m:map<string,double>,"
                 "n:struct<a:tinyint,b:array<double>>>")
_TRICKY_ROWS = [
    (1, 2**40, 'a"b\\c\n\t\r\b\f', 1.5, 1e10, True, b"\x00\xff", datetime.date(2020, 1, 2),
     datetime.datetime(2021, 3, 4, 5, 6, 7, 891234), decimal.Decimal("-12.345"), [(1, "x"), None, (None, None)],
     {"k": 1.0, "z": None}, (None, [1e-5, None, float("nan")])),
    (None, None, "\x01\x1f é ☃ \u2028", float("inf"), -0.0, False, b"", datetime.date(1960, 1, 1),
     datetime.datetime(1969, 12, 31, 23, 59, 59, 999500), decimal.Decimal("0"), [], {}, None),
    (7, -1, "", 3.4028235e38, 123456789.123, None, None, None, None, None, None, {"a": float("-inf")}, (-128, [])),
]


@pytest.mark.parametrize("extra", [{}, {"json.decimal.format": "NUMERIC", "behavior.on.null.values": "write"}])
def test_json_lines_made_in_the_jvm_by_a_pipeline_are_the_bytes_the_writer_makes(spark, s3, extra):
    """A config run through the pipeline (the worker's and kconnect run's path) has Spark make each JsonFormat line
    (the JsonConverter's expressions); a direct format("kconnect") write makes them in the Python writer: the same
    object names and bytes, Kafka's JSON (Jackson's upper-case \\u001F, a pre-1970 time floored to its ms)."""
    rows = [("t", 0, o, 0, (o, *v[1:])) for o, v in enumerate(_TRICKY_ROWS)] + [("t", 0, 3, 0, None)]
    df = _records(spark, rows if extra else rows[:-1], _TRICKY_VALUE)
    direct, pipeline = _bucket(s3), _bucket(s3)
    config = _sink(s3[0], direct, **{"flush.size": "2", **extra})
    _write(df, config)
    write_batch(df, {**config, "s3.bucket.name": pipeline})  # without Spark's per-row Arrow size check (holds_task)
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch", None) is None  # the session left as it was
    assert prepare(config, kind="sink").transforms(df).schema["value"].metadata == {JSON_LINES_META: "true"}
    made_by_python, made_by_spark = s3[1].objects(direct), s3[1].objects(pipeline)
    assert sorted(made_by_spark) == [f"topics/t/partition=0/t+0+{o:010d}.json" for o in (0, 2)]
    assert made_by_spark == made_by_python
    first, second = made_by_spark["topics/t/partition=0/t+0+0000000000.json"].decode().split("\n")[:2]
    assert '"s":"\\u0001\\u001F é ☃ \u2028"' in second and '"ts":-1,' in second and '"f":"Infinity"' in second
    assert ('"dec":-12.345' if extra else '"dec":"z8c="') in first
    if extra:
        assert made_by_spark["topics/t/partition=0/t+0+0000000002.json"].endswith(b"\nnull\n")


@pytest.mark.parametrize("extra, handed", [
    ({}, ["topic", "partition", "offset", "value"]),
    ({"store.kafka.keys": "true", "keys.format.class": "io.confluent.connect.s3.format.json.JsonFormat",
      "format.class": PARQUET}, ["topic", "partition", "offset", "value", "key"]),
    ({"store.kafka.headers": "true", "partitioner.class": "io.confluent.connect.storage.partitioner."
      "TimeBasedPartitioner", "path.format": "'h'=HH", "partition.duration.ms": "3600000", "locale": "en-US",
      "timezone": "UTC", "timestamp.extractor": "Record"}, ["topic", "partition", "offset", "value", "timestamp",
                                                            "headers"]),
])
def test_the_writer_is_handed_only_the_record_columns_it_reads(spark, s3, extra, handed):
    """Through the pipeline, Spark's Arrow hand-off to the Python writer carries the columns the writer reads: the
    key and headers only when written beside the values, the timestamp only for a time-based partitioner."""
    df = _records(spark, [("t", 0, 0, 0, (1, "a"))])
    assert prepare(_sink(s3[0], "b", **extra), kind="sink").transforms(df).columns == handed


def test_json_keys_objects_made_in_the_jvm_are_the_bytes_the_writer_makes(spark, s3):
    """keys.format.class=JsonFormat through the pipeline: the keys' lines are made by Spark as the values' are, the
    .keys objects the same bytes as a direct write's (lines made in Python); a null key still fails naming it."""
    rows = [("t", 0, o, 0, (o, "v")) for o in range(3)]
    df = _records(spark, rows).withColumn("key", F.from_json(F.lit(None).cast("string"), _TRICKY_VALUE))
    keyed = df.join(_records(spark, [("t", 0, o, 0, (o, *v[1:])) for o, v in enumerate(_TRICKY_ROWS)],
                             _TRICKY_VALUE).select("offset", F.col("value").alias("k")), "offset") \
        .withColumn("key", F.col("k")).drop("k").coalesce(1)
    direct, pipeline = _bucket(s3), _bucket(s3)
    config = _sink(s3[0], direct, **{"flush.size": "2", "store.kafka.keys": "true",
                                     "keys.format.class": JSON, "format.class": PARQUET})
    _write(keyed, config)
    write_batch(keyed, {**config, "s3.bucket.name": pipeline})
    assert prepare(config, kind="sink").transforms(keyed).schema["key"].metadata == {JSON_LINES_META: "true"}
    made_by_python, made_by_spark = s3[1].objects(direct), s3[1].objects(pipeline)
    assert sorted(k for k in made_by_spark if ".keys." in k) == [
        f"topics/t/partition=0/t+0+{o:010d}.keys.json" for o in (0, 2)]
    assert made_by_spark == made_by_python
    with pytest.raises(Exception, match="Key cannot be null for the record topic=t partition=0 offset=0"):
        write_batch(df, {**config, "s3.bucket.name": pipeline, "topics.dir": "nokey"})


def test_schemaless_json_values_are_written_as_the_lines_spark_makes(spark, s3):
    """A value read by JsonConverter without schemas (a VARIANT) through the pipeline: Spark makes each line, its
    newline included, and the writer sends them as they are; a null value (behavior.on.null.values=write) is
    the line null."""
    texts = ['{"id":1,"tags":["a","b"],"n":null}', '{"s":"x\\"y","d":1.5}', None, '[1,{"a":true}]']
    df = spark.createDataFrame([("t", 0, o, t.encode() if t else None) for o, t in enumerate(texts)],
                               "topic string, partition int, offset long, value binary").coalesce(1)
    bucket = _bucket(s3)
    config = _sink(s3[0], bucket, **{"flush.size": "10", "behavior.on.null.values": "write",
                                     "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                     "value.converter.schemas.enable": "false"})
    p = prepare(config, kind="sink")
    assert p.transforms(p.converters(df)).schema["value"].metadata == {JSON_LINES_META: "true"}
    write_batch(df, config)
    expected = [r[0] for r in spark.createDataFrame([(t,) for t in texts], "t string")
                .select(F.to_json(F.parse_json("t"))).collect()]
    assert s3[1].objects(bucket) == {"topics/t/partition=0/t+0+0000000000.json":
                                     "".join(f"{t or 'null'}\n" for t in expected).encode()}
    assert [json.loads(line) for line in s3[1].objects(bucket)["topics/t/partition=0/t+0+0000000000.json"]
            .decode().splitlines()] == [None if t is None else json.loads(t) for t in texts]


def test_a_partitioner_reading_value_fields_gets_the_struct_not_the_jvms_json(spark, s3):
    bucket = _bucket(s3)
    config = _sink(s3[0], bucket, **{"partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
                                     "partition.field.name": "name"})
    df = _records(spark, [("t", 0, 0, 0, (1, "eu"))])
    assert prepare(config, kind="sink").transforms(df).schema["value"] == df.schema["value"]
    write_batch(df, config)
    assert s3[1].objects(bucket) == {"topics/t/name=eu/t+0+0000000000.json": b'{"id":1,"name":"eu"}\n'}


def test_parquet_objects_hold_the_value_fields_with_the_codec_in_the_name(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 0, (o, f"n{o}")) for o in range(4)]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{"format.class": PARQUET, "flush.size": "2"}))
    objects = s3[1].objects(bucket)
    assert sorted(objects) == ["topics/t/partition=0/t+0+0000000000.snappy.parquet",
                               "topics/t/partition=0/t+0+0000000002.snappy.parquet"]
    table = pq.read_table(io.BytesIO(objects["topics/t/partition=0/t+0+0000000002.snappy.parquet"]))
    assert table.to_pylist() == [{"id": 2, "name": "n2"}, {"id": 3, "name": "n3"}]
    assert pq.ParquetFile(io.BytesIO(objects["topics/t/partition=0/t+0+0000000002.snappy.parquet"])) \
        .metadata.row_group(0).column(0).compression == "SNAPPY"


def test_gzip_json_and_bytearray_with_separator_and_extension(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 0, (o, f"n{o}")) for o in range(2)]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{"s3.compression.type": "gzip", "topics.dir": "j"}))
    raw = _records(spark, rows).withColumn("value", F.encode("value.name", "UTF-8"))
    _write(raw, _sink(s3[0], bucket, **{"format.class": BYTES, "format.bytearray.separator": "|",
                                        "format.bytearray.extension": ".txt", "topics.dir": "b"}))
    objects = s3[1].objects(bucket)
    assert _lines(gzip.decompress(objects["j/t/partition=0/t+0+0000000000.json.gz"])) == [
        {"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}]
    assert objects["b/t/partition=0/t+0+0000000000.txt"] == b"n0|n1|"


def test_avro_objects_are_containers_of_the_values_with_connects_schema_and_the_codec(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 0, (o, None if o == 1 else f"n{o}")) for o in range(3)]
    _write(_records(spark, rows), _sink(s3[0], bucket, **{"format.class": AVRO, "avro.codec": "deflate",
                                                          "flush.size": "2"}))
    objects = s3[1].objects(bucket)
    assert sorted(objects) == ["topics/t/partition=0/t+0+0000000000.avro", "topics/t/partition=0/t+0+0000000002.avro"]
    schema, records = _avro(objects["topics/t/partition=0/t+0+0000000000.avro"])
    assert records == [{"id": 0, "name": "n0"}, {"id": 1, "name": None}]
    assert _avro(objects["topics/t/partition=0/t+0+0000000002.avro"])[1] == [{"id": 2, "name": "n2"}]
    # AvroData's schema of an unnamed Connect struct with optional fields
    assert schema["name"] == "io.confluent.connect.avro.ConnectDefault"
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [("id", ["null", "int"]), ("name", ["null", "string"])]
    assert fastavro.reader(io.BytesIO(objects["topics/t/partition=0/t+0+0000000000.avro"])).codec == "deflate"


def test_csv_objects_have_a_snake_case_header_and_quoted_fields(spark, s3):
    """Confluent's CsvFormat (pull request #606): a header of the fields in snake case, nested ones flattened as
    parent_child, every present value quoted, a null empty; csv.fields.list picks and orders the columns."""
    bucket = _bucket(s3)
    rows = [("t", 0, 0, 0, (1, 'say "hi"', ("Paris", True), 1_700_000_000_123)),
            ("t", 0, 1, 0, (2, None, None, 1_700_000_000_000))]
    value = "struct<orderId:int,note:string,shipTo:struct<cityName:string,express:boolean>,at:long>"
    df = _records(spark, rows, value).withColumn("value", F.col("value").withField(
        "at", F.timestamp_millis("value.at")))
    _write(df, _sink(s3[0], bucket, **{"format.class": CSV, "topics.dir": "all"}))
    _write(df, _sink(s3[0], bucket, **{"format.class": CSV, "topics.dir": "some", "csv.field.sep": ";",
                                       "csv.fields.list": "shipTo.cityName,orderId", "s3.compression.type": "gzip"}))
    objects = s3[1].objects(bucket)
    assert objects["all/t/partition=0/t+0+0000000000.csv"].decode().splitlines() == [
        '"order_id","note","ship_to_city_name","ship_to_express","at"',
        '"1","say ""hi""","Paris","true","2023-11-14T22:13:20.123Z"',
        '"2",,,,"2023-11-14T22:13:20Z"']
    assert gzip.decompress(objects["some/t/partition=0/t+0+0000000000.csv.gz"]).decode().splitlines() == [
        '"ship_to_city_name";"order_id"', '"Paris";"1"', ';"2"']


def test_keys_and_headers_objects_beside_each_value_object_as_confluent_names_them(spark, s3):
    bucket = _bucket(s3)
    rows = [("t", 0, o, 0, (o, f"n{o}")) for o in range(3)]
    header = [F.struct(F.lit(k).alias("key"), F.encode(v, "UTF-8").alias("value"))
              for k, v in (("source", F.lit("web")), ("n", F.col("offset").cast("string")))]
    df = _records(spark, rows).withColumn("key", F.encode(F.concat(F.lit("k"), "offset"), "UTF-8")) \
        .withColumn("headers", F.array(*header))
    _write(df, _sink(s3[0], bucket, **{"format.class": AVRO, "flush.size": "2", "store.kafka.keys": "true",
                                       "store.kafka.headers": "true"}))
    _write(df, _sink(s3[0], bucket, **{"topics.dir": "j", "flush.size": "2", "store.kafka.keys": "true",
                                       "keys.format.class": BYTES, "store.kafka.headers": "true",
                                       "headers.format.class": JSON}))
    objects = s3[1].objects(bucket)
    assert sorted(k for k in objects if k.startswith("topics/")) == [
        f"topics/t/partition=0/t+0+{o:010d}.{kind}avro" for o in (0, 2) for kind in ("", "headers.", "keys.")]
    assert _avro(objects["topics/t/partition=0/t+0+0000000000.keys.avro"])[1] == [b"k0", b"k1"]
    schema, headers = _avro(objects["topics/t/partition=0/t+0+0000000002.headers.avro"])
    assert headers == [[{"key": "source", "value": "web"}, {"key": "n", "value": "2"}]]
    assert schema["type"] == "array" and [f["name"] for f in schema["items"]["fields"]] == ["key", "value"]
    assert _avro(objects["topics/t/partition=0/t+0+0000000002.avro"])[1] == [{"id": 2, "name": "n2"}]
    assert objects["j/t/partition=0/t+0+0000000000.keys.bin"] == b"k0\nk1\n"
    assert _lines(objects["j/t/partition=0/t+0+0000000002.headers.json"]) == [
        [{"key": "source", "value": "web"}, {"key": "n", "value": "2"}]]
    assert sorted(k for k in objects if k.startswith("j/")) == [
        f"j/t/partition=0/t+0+{o:010d}.{ext}" for o in (0, 2) for ext in ("headers.json", "json", "keys.bin")]
    with pytest.raises(Exception, match="Key cannot be null for the record topic=t partition=0 offset=0"):
        _write(_records(spark, rows), _sink(s3[0], bucket, **{"topics.dir": "nokey", "store.kafka.keys": "true"}))
    assert not s3[1].objects(bucket, "nokey")


def test_null_values_fail_by_default_and_are_skipped_with_ignore(spark, s3):
    bucket = _bucket(s3)
    df = _records(spark, [("t", 0, 0, 0, (0, "a")), ("t", 0, 1, 0, None), ("t", 0, 2, 0, (2, "c"))])
    with pytest.raises(Exception, match="offset=1 has a null value"):
        _write(df, _sink(s3[0], bucket))
    _write(df, _sink(s3[0], bucket, **{"behavior.on.null.values": "ignore"}))
    assert [_lines(v) for v in s3[1].objects(bucket).values()] == [[{"id": 0, "name": "a"}, {"id": 2, "name": "c"}]]


# ------------------------------------------------------------------------------------------ delivery
def test_a_store_that_refuses_writes_fails_the_batch_naming_bucket_and_endpoint_and_loses_nothing(spark, tmp_path):
    """The emulator stops: the batch fails with an error naming the bucket and endpoint (never the secret); the
    restarted query, the emulator back, writes the failed batch."""
    own = MotoS3Server().start()
    try:
        bucket = "refuses"
        own.create_bucket(bucket)
        source = tmp_path / "in.txt"
        source.write_text("".join(f"r{i}\n" for i in range(4)))
        sink = _sink(own.endpoint, bucket, **{"s3.part.retries": "0", "flush.size": "10"})
        ckpt = str(tmp_path / "ckpt")

        def run() -> None:
            df = spark.readStream.format("kconnect").options(**{
                "connector.class": "FileStreamSource", "file": str(source), "topic": "t"}).load()
            df.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt) \
                .trigger(availableNow=True).start().awaitTermination()

        run()
        assert sorted(own.objects(bucket)) == ["topics/t/partition=0/t+0+0000000000.json"]
        with open(source, "a") as f:
            f.writelines(f"r{i}\n" for i in range(4, 6))
        own.stop()
        with pytest.raises(Exception, match=r"to bucket 'refuses' at http://127\.0\.0\.1:\d+") as failure:
            run()
        assert SECRET_KEY not in str(failure.value)
        own.start()  # moto keeps objects in memory: it comes back empty
        own.create_bucket(bucket)
        run()
        assert _lines(own.objects(bucket)["topics/t/partition=0/t+0+0000000012.json"]) == ["r4", "r5"]
    finally:
        own.destroy()


def test_every_record_is_in_exactly_one_object_across_a_killed_driver(spark, s3, tmp_path):
    """A datagen -> S3 query runs in a child driver killed with SIGKILL mid-stream (maybe mid-write); restarted on
    the same checkpoint it replays the interrupted batch, whose objects get the same names and bytes: every record
    is in exactly one object. The objects are Avro container files (AvroFormat: the sync marker is fixed, so a
    rewritten object has the same bytes)."""
    bucket = _bucket(s3)
    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": "800", "max.interval": "0", "tasks.max": "2", "max.records.per.trigger": "120"}
    sink = _sink(s3[0], bucket, **{"flush.size": "50", "format.class": AVRO})
    ckpt = str(tmp_path / "ckpt")
    driver = start_driver(cfg, None, tmp_path / "ckpt", tmp_path, sink=sink)
    try:
        deadline = time.monotonic() + 400
        while len(s3[1].objects(bucket)) < 3:
            assert driver.poll() is None, "the child driver stopped before it was killed"
            assert time.monotonic() < deadline, "the child driver wrote nothing"
            time.sleep(0.2)
    finally:
        kill(driver)  # the driver, its JVM and its Python workers
    assert 0 < sum(len(_avro(v)[1]) for v in s3[1].objects(bucket).values()) < 1600
    cfg = {k: v for k, v in cfg.items() if k != "max.records.per.trigger"}
    df = spark.readStream.format("kconnect").options(**cfg).load()
    df.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt) \
        .trigger(availableNow=True).start().awaitTermination()
    orders = [order for data in s3[1].objects(bucket).values() for order in _avro(data)[1]]
    expected = [json.loads(r.v) for r in spark.read.format("kconnect").options(**cfg).load()
                .select(F.to_json("value").alias("v")).collect()]
    assert len(orders) == 1600
    assert sorted(json.dumps(o, sort_keys=True) for o in orders) == \
        sorted(json.dumps(o, sort_keys=True) for o in expected)


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize(("extra", "key"), [
    ({"s3.bucket.name": None}, "s3.bucket.name"),
    ({"flush.size": "0"}, "flush.size"),
    ({"format.class": "io.confluent.connect.s3.format.orc.OrcFormat"}, "format.class"),
    ({"format.class": AVRO, "avro.codec": "lzo"}, "avro.codec"),
    ({"format.class": CSV, "csv.compat": "true"}, "csv.compat"),
    ({"format.class": "com.example.Mine"}, "format.class"),
    ({"s3.compression.type": "zip"}, "s3.compression.type"),
    ({"parquet.codec": "lzo"}, "parquet.codec"),
    ({"partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner"}, "partition.field.name"),
    ({"partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner"}, "timezone"),
    ({"partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner", "locale": "en",
      "timezone": "UTC", "path.format": "YYYY/ww"}, "path.format"),
    ({"store.url": "ftp://x"}, "store.url"),
    ({"aws.secret.access.key": None}, "aws.secret.access.key"),
    ({"store.kafka.headers": "true", "headers.format.class": BYTES}, "headers.format.class"),
    ({"store.kafka.keys": "true", "keys.format.class": CSV}, "keys.format.class"),
    ({"s3.bucket.nam": "x"}, "s3.bucket.nam"),
])
def test_config_errors_name_the_key(extra, key):
    config = {k: v for k, v in {**_sink("http://127.0.0.1:9", "b"), **extra}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert key in e.value.keys
    assert SECRET_KEY not in str(e.value)


def test_the_secret_is_never_in_the_connectors_repr():
    connector = build_connector(_sink("http://127.0.0.1:9", "b"))
    assert SECRET_KEY not in repr(connector)
    assert SECRET_KEY not in repr(connector.config)
