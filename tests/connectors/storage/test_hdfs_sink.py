"""Confluent's HDFS 3 sink against a real HDFS (Hadoop's MiniDFSCluster, started by the test run on 127.0.0.1): file
names and contents as Confluent's connector writes them, per format; replays, restarts, a stopped NameNode, config
errors, the worker's allowed URIs, and a Spark checkpoint on hdfs://."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from rest.security_helpers import rest_only  # noqa: F401 - a fixture

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.storage.hdfs import WebHdfs, WebHdfsError, namenode_http_addresses
from spark_connect_bridge.errors import ConfigError
from tests.contract.contract import SinkContract
from tests.support import servers
from tests.support.hdfs import hdfs_files
from tests.support.tcp_proxy import TcpProxy

HDFS3_SINK = "io.confluent.connect.hdfs3.Hdfs3SinkConnector"
FORMATS = "io.confluent.connect.hdfs3."
JSON, AVRO = FORMATS + "json.JsonFormat", FORMATS + "avro.AvroFormat"
PARQUET, STRING = FORMATS + "parquet.ParquetFormat", FORMATS + "string.StringFormat"


def _conf_dir(path: Path, webhdfs: str) -> str:
    """A Hadoop client configuration directory whose hdfs-site.xml names the NameNode's HTTP address."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.namenode.http-address</name>"
        f"<value>{webhdfs.removeprefix('http://')}</value></property></configuration>")
    return str(path)


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory):
    """The run's HDFS: (hdfs.url, a hadoop.conf.dir naming its WebHDFS address, a client of it)."""
    url, webhdfs = servers.hdfs()
    return url, _conf_dir(tmp_path_factory.mktemp("hadoop-conf"), webhdfs), WebHdfs((webhdfs,), "kconnect-test")


def _sink(hdfs, **extra: str) -> dict:
    """A config as a Confluent user writes it, in a fresh topics.dir."""
    return {"connector.class": HDFS3_SINK, "hdfs.url": hdfs[0], "hadoop.conf.dir": hdfs[1], "flush.size": "3",
            "format.class": JSON, "topics.dir": "/kc-" + uuid.uuid4().hex[:10], **extra}


def _records(spark, rows: list[tuple], value_ddl: str = "struct<id:int,name:string>"):
    """A batch record DataFrame of (topic, partition, offset, value) rows, in one Spark partition."""
    df = spark.createDataFrame(rows, f"topic string, partition int, offset long, value {value_ddl}").coalesce(1)
    return (df.withColumn("timestamp", F.timestamp_millis(F.lit(1_700_000_000_000)))
            .withColumn("key", F.lit(None).cast("binary"))
            .withColumn("headers", F.lit(None).cast("array<struct<key:string,value:binary>>")))


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


def _files(hdfs, config: dict, *, temporary_left: bool = False) -> dict[str, bytes]:
    """The committed files under the config's topics.dir (relative names); the +tmp directory must hold none unless
    ``temporary_left`` (an outage: the failed attempt's uncommitted copies, which nothing deletes while HDFS is
    unreachable)."""
    root = config["topics.dir"]
    files = hdfs_files(hdfs[2], root)
    assert temporary_left or not [p for p in files if "/+tmp/" in p], sorted(files)
    return {p[len(root) + 1:]: data for p, data in files.items() if "/+tmp/" not in p}


def _read(kind: str, data: bytes) -> list:
    if kind == "json":
        return [json.loads(line) for line in data.decode().splitlines()]
    if kind == "avro":
        return list(fastavro.reader(io.BytesIO(data)))
    if kind == "parquet":
        return pq.read_table(io.BytesIO(data)).to_pylist()
    return data.decode().splitlines()


# ------------------------------------------------------------------------------------------ names and contents
@pytest.mark.parametrize(("format_class", "kind", "extension"), [
    (JSON, "json", ".json"), (AVRO, "avro", ".avro"), (PARQUET, "parquet", ".parquet"), (STRING, "txt", ".txt")])
def test_each_format_names_files_by_start_and_end_offset_and_cuts_at_flush_size(spark, hdfs, format_class, kind,
                                                                               extension):
    rows = [("orders", p, o, (o, f"n{o}")) for p in (0, 1) for o in range(5)]
    df = _records(spark, rows)
    if kind == "txt":
        df = df.withColumn("value", F.col("value.name"))
    config = _sink(hdfs, **{"format.class": format_class})
    _write(df, config)
    files = _files(hdfs, config)
    assert sorted(files) == [f"orders/partition={p}/orders+{p}+{s:010d}+{e:010d}{extension}"
                             for p in (0, 1) for s, e in ((0, 2), (3, 4))]
    expected = [{"id": o, "name": f"n{o}"} for o in (3, 4)] if kind != "txt" else ["n3", "n4"]
    assert _read(kind, files[f"orders/partition=1/orders+1+0000000003+0000000004{extension}"]) == expected


def test_field_partitioner_files_end_at_the_last_offset_of_their_directory(spark, hdfs):
    rows = [("t", 0, 0, (1, "eu")), ("t", 0, 1, (2, "us")), ("t", 0, 2, (3, "eu")), ("t", 0, 3, (4, "us"))]
    config = _sink(hdfs, **{"partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
                            "partition.field.name": "name", "flush.size": "3"})
    _write(_records(spark, rows), config)
    files = _files(hdfs, config)
    assert sorted(files) == ["t/name=eu/t+0+0000000000+0000000002.json", "t/name=us/t+0+0000000001+0000000001.json",
                             "t/name=us/t+0+0000000003+0000000003.json"]
    assert [r["id"] for r in _read("json", files["t/name=eu/t+0+0000000000+0000000002.json"])] == [1, 3]


def test_webhdfs_url_and_a_path_after_the_namenode_place_the_files(spark, hdfs):
    """hdfs.url=webhdfs://host:port/base: no hadoop.conf.dir needed, and the path prefixes topics.dir."""
    base = "/base-" + uuid.uuid4().hex[:8]
    webhdfs = hdfs[2].endpoints[0].replace("http://", "webhdfs://")
    config = {"connector.class": HDFS3_SINK, "hdfs.url": webhdfs + base, "flush.size": "5", "format.class": JSON}
    _write(_records(spark, [("t", 0, 7, (7, "x"))]), config)
    assert list(hdfs_files(hdfs[2], base)) == [f"{base}/topics/t/partition=0/t+0+0000000007+0000000007.json"]


# ------------------------------------------------------------------------------------------ delivery
class TestHdfsSinkContract(SinkContract):
    """The sink contract (a replayed batch written once, a failed write then a restart from the checkpoint delivers
    every record once) with JsonFormat: the lines are JSON strings."""

    @pytest.fixture(autouse=True)
    def _server(self, hdfs):
        self.hdfs = hdfs

    def sink_config(self, tmp_path: Path) -> dict:
        if not hasattr(self, "_config"):
            self._config = _sink(self.hdfs, **{"flush.size": "2"})
        return self._config

    def read_back(self, config: dict) -> list[str]:
        return [line for data in _files(self.hdfs, config).values() for line in _read("json", data)]


def test_an_unreachable_namenode_fails_the_batch_naming_hdfs_url_and_loses_nothing(spark, hdfs, tmp_path):
    """The NameNode goes away (a cut TCP proxy in front of its HTTP port plays the outage of the run's HDFS): the
    batch fails with an error naming hdfs.url; restarted with the NameNode back, the query writes the failed batch,
    each record in exactly one committed file."""
    namenode = TcpProxy(int(hdfs[2].endpoints[0].rsplit(":", 1)[1])).restore()
    try:
        source = tmp_path / "in.txt"
        source.write_text("".join(f"r{i}\n" for i in range(4)))
        address = f"http://127.0.0.1:{namenode.port}"
        config = _sink(hdfs, **{"flush.size": "10", "hadoop.conf.dir": _conf_dir(tmp_path / "conf", address)})
        ckpt = str(tmp_path / "ckpt")

        def run() -> None:
            df = spark.readStream.format("kconnect").options(**{
                "connector.class": "FileStreamSource", "file": str(source), "topic": "t"}).load()
            df.writeStream.format("kconnect").options(**config).option("checkpointLocation", ckpt) \
                .trigger(availableNow=True).start().awaitTermination()

        run()
        # FileStreamSource's offsets are the lines' byte positions: r0..r3 start at 0, 3, 6, 9
        assert sorted(_files(hdfs, config)) == ["t/partition=0/t+0+0000000000+0000000009.json"]
        with open(source, "a") as f:
            f.writelines(f"r{i}\n" for i in range(4, 6))
        namenode.cut()
        with pytest.raises(Exception, match=rf"HDFS {hdfs[0]} \(hdfs\.url; WebHDFS at {address}\)"):
            run()
        namenode.restore()
        run()
        files = _files(hdfs, config, temporary_left=True)
        assert sorted(files) == ["t/partition=0/t+0+0000000000+0000000009.json",
                                 "t/partition=0/t+0+0000000012+0000000015.json"]
        assert [line for data in files.values() for line in _read("json", data)] == [f"r{i}" for i in range(6)]
    finally:
        namenode.cut()


def test_a_file_renamed_after_the_namenode_redirect_is_reported_as_not_found(hdfs, monkeypatch):
    """The NameNode names a DataNode for a read; the sink renames the file before the DataNode opens it: the error
    names the DataNode's FileNotFoundException (its first line, not its Java stack), so a lister can skip the file."""
    client = hdfs[2]
    client.create("/renamed-while-read/a.json", b"{}")
    redirect = client._call("GET", "/renamed-while-read/a.json", "OPEN")
    assert client.rename("/renamed-while-read/a.json", "/renamed-while-read/b.json")
    monkeypatch.setattr(client, "_call", lambda *args, **kwargs: redirect)  # the NameNode's answer before the rename
    with pytest.raises(WebHdfsError, match=r"DataNode answered HTTP 404 FileNotFoundException: File does not exist: "
                                           r"/renamed-while-read/a.json$"):
        client.read("/renamed-while-read/a.json")


def test_a_spark_checkpoint_on_hdfs_resumes_the_query(spark, hdfs, tmp_path):
    """checkpointLocation hdfs://...: Spark's own Hadoop client keeps the offsets in HDFS; a restart goes on from
    them (each record once)."""
    source = tmp_path / "in.txt"
    source.write_text("a\nb\n")
    config = _sink(hdfs, **{"flush.size": "10"})
    ckpt = f"{hdfs[0]}/checkpoints/{uuid.uuid4().hex[:10]}"

    def run() -> None:
        df = spark.readStream.format("kconnect").options(**{
            "connector.class": "FileStreamSource", "file": str(source), "topic": "t"}).load()
        df.writeStream.format("kconnect").options(**config).option("checkpointLocation", ckpt) \
            .trigger(availableNow=True).start().awaitTermination()

    run()
    with open(source, "a") as f:
        f.write("c\n")
    run()
    assert hdfs[2].status(ckpt.removeprefix(hdfs[0]) + "/commits") is not None
    files = _files(hdfs, config)
    assert sorted(files) == ["t/partition=0/t+0+0000000000+0000000002.json",  # the lines' byte positions
                             "t/partition=0/t+0+0000000004+0000000004.json"]
    assert [line for data in files.values() for line in _read("json", data)] == ["a", "b", "c"]


# ------------------------------------------------------------------------------------------ config
def test_hadoop_conf_dir_gives_the_webhdfs_address_of_a_namenode_or_an_ha_name_service(tmp_path):
    (tmp_path / "hdfs-site.xml").write_text("""<configuration>
      <property><name>dfs.nameservices</name><value>lake</value></property>
      <property><name>dfs.ha.namenodes.lake</name><value>nn1,nn2</value></property>
      <property><name>dfs.namenode.http-address.lake.nn1</name><value>a.example:9870</value></property>
      <property><name>dfs.namenode.http-address.lake.nn2</name><value>b.example:9870</value></property>
      <property><name>dfs.namenode.http-address</name><value>0.0.0.0:50070</value></property>
    </configuration>""")
    assert namenode_http_addresses("hdfs://lake/data", str(tmp_path)) == ("http://a.example:9870",
                                                                          "http://b.example:9870")
    assert namenode_http_addresses("hdfs://nn.example:8020", str(tmp_path)) == ("http://nn.example:50070",)
    assert namenode_http_addresses("hdfs://nn.example:8020", str(tmp_path / "absent")) == ("http://nn.example:9870",)


def test_an_hdfs_site_naming_another_webhdfs_host_is_refused(tmp_path):
    """The attack: a file another connector wrote into an allowed directory, given as hadoop.conf.dir, would send
    the worker's WebHDFS requests to a host of the attacker's choosing instead of hdfs.url's NameNode."""
    (tmp_path / "hdfs-site.xml").write_text("""<configuration>
      <property><name>dfs.namenode.http-address</name><value>169.254.169.254:80</value></property>
    </configuration>""")
    with pytest.raises(ConfigError) as e:
        namenode_http_addresses("hdfs://nn.example:8020", str(tmp_path))
    assert e.value.problems[0].key == "hadoop.conf.dir" and "another host than nn.example" in str(e.value)


@pytest.mark.parametrize(("extra", "key"), [
    ({"hdfs.url": None}, "hdfs.url"),
    ({"hdfs.url": "s3://bucket"}, "hdfs.url"),
    ({"store.url": "hdfs://user@nn:8020"}, "store.url"),
    ({"flush.size": "0"}, "flush.size"),
    ({"format.class": FORMATS + "orc.OrcFormat"}, "format.class"),
    ({"format.class": "io.confluent.connect.s3.format.json.JsonFormat"}, "format.class"),
    ({"hive.integration": "true"}, "hive.integration"),
    ({"hdfs.authentication.kerberos": "true"}, "hdfs.authentication.kerberos"),
    ({"topic.capture.groups.regex": "(.*)"}, "topic.capture.groups.regex"),
    ({"storage.class": "io.confluent.connect.s3.storage.S3Storage"}, "storage.class"),
    ({"avro.codec": "lzo"}, "avro.codec"),
    ({"partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner"}, "timezone"),
    ({"hdfs.ulr": "hdfs://nn:8020"}, "hdfs.ulr"),
])
def test_config_errors_name_the_key(extra, key):
    config = {k: v for k, v in {**_sink(("hdfs://127.0.0.1:9", "", None)), **extra}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert key in e.value.keys


def test_a_string_format_needs_string_values(spark, hdfs):
    with pytest.raises(Exception, match=r"format\.class.*StringFormat writes string values"):
        _write(_records(spark, [("t", 0, 0, (1, "a"))]), _sink(hdfs, **{"format.class": STRING}))


# ------------------------------------------------------------------------------------------ security
def test_a_rest_user_writes_only_under_the_hdfs_uris_the_worker_allows(rest_only, tmp_path):  # noqa: F811
    """HDFS's simple authentication writes as the worker's user: over REST, hdfs.url + topics.dir must lie under a
    URI entry of connector.allowed.paths; another NameNode, another directory, '..' segments and a local
    hadoop.conf.dir outside the allowed directories are refused, by key."""
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},hdfs://nn.example:8020/exports"})
    base = {"connector.class": HDFS3_SINK, "topics": "orders", "hdfs.url": "hdfs://nn.example:8020",
            "flush.size": "10", "format.class": JSON, "topics.dir": "exports/orders"}
    r = api.call("POST", "/connectors", {"name": "ok", "config": base, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    for change, key in (({"hdfs.url": "hdfs://other.example:8020"}, "hdfs.url"),
                        ({"topics.dir": "/user/hive/warehouse"}, "hdfs.url"),
                        ({"topics.dir": "exports/../etc"}, "hdfs.url"),
                        ({"store.url": "webhdfs://nn.example:9870"}, "store.url"),
                        ({"hadoop.conf.dir": "/etc"}, "hadoop.conf.dir")):
        r = api.call("POST", "/connectors", {"name": "no", "config": {**base, **change}, "initial_state": "STOPPED"})
        assert r.status_code == 400 and key in r.json()["message"], (change, r.text)


# ------------------------------------------------------------------------------------------------ kill -9
def test_every_record_is_in_exactly_one_file_across_a_killed_driver(spark, hdfs, tmp_path):
    """A datagen -> HDFS 3 query runs in a child driver killed with SIGKILL mid-stream (maybe mid-write, maybe
    between a task's write under +tmp and the driver's renames); restarted on the same checkpoint it replays the
    interrupted batch: every record is in exactly one committed file. A killed attempt's files under +tmp stay there
    (as Confluent's connector leaves a dead task's temporary files); nothing reads them."""
    import time

    from tests.support.killed_driver import kill, start_driver

    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "iterations": "600", "max.interval": "0", "tasks.max": "2", "max.records.per.trigger": "100"}
    sink = _sink(hdfs, **{"flush.size": "40"})
    ckpt = tmp_path / "ckpt"
    driver = start_driver(cfg, None, ckpt, tmp_path, sink=sink)
    try:
        deadline = time.monotonic() + 400
        while len(_files(hdfs, sink, temporary_left=True)) < 4:
            assert driver.poll() is None, "the child driver stopped before it was killed"
            assert time.monotonic() < deadline, "the child driver wrote nothing"
            time.sleep(0.2)
    finally:
        kill(driver)  # the driver, its JVM and its Python workers
    before = sum(len(_read("json", data)) for data in _files(hdfs, sink, temporary_left=True).values())
    assert 0 < before < 1200
    source = {k: v for k, v in cfg.items() if k != "max.records.per.trigger"}
    (spark.readStream.format("kconnect").options(**source).load().writeStream.format("kconnect").options(**sink)
     .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start().awaitTermination())
    written = sorted(json.dumps(r, sort_keys=True) for data in _files(hdfs, sink, temporary_left=True).values()
                     for r in _read("json", data))
    expected = sorted(json.dumps(json.loads(row.v), sort_keys=True) for row in spark.read.format("kconnect")
                      .options(**source).load().select(F.to_json("value").alias("v")).collect())
    assert len(written) == 1200 and written == expected
