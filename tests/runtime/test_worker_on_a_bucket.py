"""A worker whose state lives in a bucket (moto's S3 server, the run's shared one): ``kconnect worker`` as users
run it, with ``offset.storage.dir`` and ``topics.dir`` as ``s3a://`` URIs and the S3A settings in its worker
config (the secret through a config provider). It runs a source, a file sink and a Delta sink on s3a:// (created
over REST with no S3 key of its own: it runs with the worker's), is stopped, its local disk (its working directory)
is deleted, and it starts again on an empty one: the connectors come back from the bucket and resume from their
checkpoints there, every line once in the file and in the Delta table; the secret is in no log and no GET. Over its
REST API, a connector config cannot reach the worker's state in the bucket, nor its topic store unless
connector.allowed.paths lists it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid

import pytest

from spark_connect_bridge.core.locations import Locations
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.runtime.state import ConnectorState, StateStore
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.support import servers
from tests.support.processes import interrupt
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

from .worker_helpers import Api, ciphers_made_together, lines, wait_for

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def bucket():
    """A fresh bucket on the run's S3 server and a client of it."""
    endpoint = servers.s3()
    client = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))
    name = "state-" + uuid.uuid4().hex[:10]
    client.create_bucket(name)
    return name, client, endpoint


def _s3a(endpoint: str, secret: str = SECRET_KEY) -> dict[str, str]:
    """The worker config's Hadoop S3A keys, as an operator writes them."""
    return {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.endpoint.region": REGION, "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY, "spark.hadoop.fs.s3a.secret.key": secret,
            "spark.hadoop.fs.s3a.aws.credentials.provider":
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_workers_starting_together_on_a_bucket_take_one_key(bucket):
    """The key that encrypts stored configs, created in the bucket by workers starting at the same moment: one
    create wins (a conditional PUT) and every worker takes that key, so each decrypts what another stored (a key
    written over another's left a group's workers unable to read each other's configs)."""
    name, _, endpoint = bucket
    key_file, files = f"s3a://{name}/race-{uuid.uuid4().hex[:6]}/_keys/state.key", Locations(_s3a(endpoint))
    ciphers_made_together(key_file, 6, files)
    assert files.create_bytes(key_file, b"another key") is False  # the key is never written over


def test_state_files_round_trip_in_the_bucket(bucket):
    """The stored connector configs (encrypted under a key the worker creates in the bucket) written, listed, read
    back by a second store with nothing local, and deleted."""
    name, client, endpoint = bucket
    files = Locations(_s3a(endpoint))
    root = f"s3a://{name}/unit/state"
    store = StateStore(files.join(root, "_connectors"), key_file=files.join(root, "_keys", "state.key"),
                       locations=files)
    store.put(ConnectorState("orders", {"connector.class": "FileStreamSource", "file": "/x"}, "PAUSED"))
    assert not store.create(ConnectorState("orders", {}, "STARTED"))
    again = StateStore(files.join(root, "_connectors"), key_file=files.join(root, "_keys", "state.key"),
                       locations=Locations(_s3a(endpoint)))
    [state] = again.load_all()
    assert (state.name, state.config["file"], state.target_state) == ("orders", "/x", "PAUSED")
    stored = client.objects(name, "unit/state")
    assert sorted(stored) == ["unit/state/_connectors/orders.json", "unit/state/_keys/state.key"]
    assert b"FileStreamSource" not in stored["unit/state/_connectors/orders.json"]  # encrypted
    again.delete("orders")
    assert store.load_all() == [] and store.get("orders") is None
    assert SECRET_KEY not in repr(files) and SECRET_KEY not in repr(store)


def test_one_bucket_settings_reach_each_client_in_its_own_keywords():
    """The S3A settings of one bucket (its per-bucket form first) as pyarrow's, delta-rs's and boto3's keywords."""
    files = Locations({**_s3a("127.0.0.1:9000"), "spark.hadoop.fs.s3a.bucket.lake.endpoint.region": "eu-west-3"})
    found = files.s3_settings("s3a://lake/state")
    assert found.pyarrow_options() == {"access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "region": "eu-west-3",
                                       "endpoint_override": "127.0.0.1:9000", "scheme": "http",
                                       "force_virtual_addressing": False}
    assert files.storage_options("s3a://lake/t") == found.delta_rs_options() == {
        "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, "aws_region": "eu-west-3",
        "aws_endpoint": "http://127.0.0.1:9000", "aws_allow_http": "true", "aws_virtual_hosted_style_request": "false"}
    assert found.boto3_options() == ({"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY,
                                      "region_name": "eu-west-3", "endpoint_url": "http://127.0.0.1:9000"}, "path")
    assert Locations({}).s3_settings("s3a://lake/x").boto3_options() == ({}, "auto")


@pytest.mark.parametrize(("overrides", "key"), [
    ({"offset.storage.dir": "gs://b/state"}, "offset.storage.dir"),
    ({"topics.dir": "abfs://c@a.dfs.core.windows.net/topics"}, "topics.dir"),
    ({"topics.dir": "s3a://b/topics", "topic.store.format": "delta"}, "topic.store.format"),
])
def test_a_state_location_the_worker_cannot_keep_is_refused_naming_the_key(overrides, key, tmp_path):
    props = {"offset.storage.dir": "s3a://b/state", "topics.dir": "s3a://b/topics", **overrides}
    with pytest.raises(ConfigError) as e:
        parse_worker_config(props, base_dir=str(tmp_path))
    assert [p.key for p in e.value.problems] == [key], str(e.value)


def test_worker_on_an_empty_disk_resumes_from_the_bucket(bucket, tmp_path):
    name, client, endpoint = bucket
    port = _free_port()
    conf, data, disk = tmp_path / "conf", tmp_path / "data", tmp_path / "disk"
    for d in (conf, data, disk):
        d.mkdir()
    (conf / "s3.properties").write_text(f"secret={SECRET_KEY}\n")
    s3a = _s3a(endpoint, secret=f"${{file:{conf}/s3.properties:secret}}")
    state, topics = f"s3a://{name}/worker/state", f"s3a://{name}/worker/topics"
    (conf / "worker.properties").write_text("\n".join([
        f"listeners=http://127.0.0.1:{port}", f"offset.storage.dir={state}", f"topics.dir={topics}",
        f"connector.allowed.paths={data},s3a://{name}/exports",
        "config.providers=file",
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        "trigger.interval.ms=500", "spark.master=local[2]", "spark.ui.enabled=false", "warm.up.enable=false",
        "spark.sql.shuffle.partitions=2", *(f"{k}={v}" for k, v in s3a.items())]) + "\n")
    src, out = data / "in.txt", data / "out.txt"
    src.write_text("".join(f"line-{i}\n" for i in range(1, 11)))
    api = Api(f"http://127.0.0.1:{port}")

    def start(log_name: str) -> subprocess.Popen:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)
        log = open(tmp_path / log_name, "wb")  # the worker's output, closed with the process
        proc = subprocess.Popen([sys.executable, "-m", "spark_connect_bridge.cli", "worker",
                                 str(conf / "worker.properties")], cwd=disk, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        wait_for(lambda: proc.poll() is None and api.call("GET", "/connectors").status_code == 200,
                 timeout=240, what="the worker's REST API")
        return proc

    table = f"s3a://{name}/exports/lines-delta"

    def delta_lines() -> list[str]:
        """The Delta table's values as the test reads them from the bucket (deltalake, its own client)."""
        from deltalake import DeltaTable

        files = Locations(_s3a(endpoint))
        if not files.exists(f"{table}/_delta_log"):
            return []
        values = DeltaTable(table.replace("s3a://", "s3://"), storage_options=files.storage_options(table))
        return sorted(values.to_pyarrow_table().column("value").to_pylist(), key=lambda v: int(v.split("-")[1]))

    def log_tail() -> str:
        logs = sorted(tmp_path.glob("worker*.log"))
        return logs[-1].read_text(errors="replace")[-4000:] if logs else ""

    worker = start("worker1.log")
    try:
        api.call("PUT", "/connectors/lines/config", {"connector.class": "FileStreamSource", "file": str(src),
                                                     "topic": "lines"}).raise_for_status()
        api.call("PUT", "/connectors/lines-sink/config", {"connector.class": "FileStreamSink", "file": str(out),
                                                          "topics": "lines"}).raise_for_status()
        # A Delta sink on s3a:// made over REST with no S3 key of its own: it runs with the worker's fs.s3a.* keys
        api.call("PUT", "/connectors/lines-delta/config", {"connector.class": "DeltaSinkConnector",
                                                           "delta.table.path": table, "topics": "lines"}
                 ).raise_for_status()
        # The attacks: the worker's state in the bucket, and its topic store (not listed in connector.allowed.paths)
        for key, uri in (("file", f"{state}/_connectors/lines.json"), ("file", f"s3a://{name}/exports/../worker"),
                         ("delta.table.path", f"{topics}/lines")):
            cls = "FileStreamSink" if key == "file" else "delta-sink"
            refused = api.call("PUT", "/connectors/evil/config", {"connector.class": cls, key: uri, "topics": "lines"})
            assert refused.status_code == 400, (uri, refused.text)
            assert key in refused.json()["message"] and SECRET_KEY not in refused.text
        wait_for(lambda: lines(out) == [f"line-{i}" for i in range(1, 11)], timeout=420, what="the first 10 lines",
                 explain=log_tail)
        offsets = api.get("/connectors/lines/offsets")["offsets"]
        assert offsets and offsets[0]["offset"]["position"] == src.stat().st_size, offsets
        wait_for(lambda: delta_lines() == [f"line-{i}" for i in range(1, 11)], timeout=420,
                 what="the first 10 lines in the Delta table in the bucket", explain=log_tail)
        for path in ("/connectors/lines-delta/config", "/connectors/lines-delta", "/connectors/lines-delta/status",
                     "/connectors/lines-delta/tasks", "/connectors?expand=info&expand=status"):
            shown = api.call("GET", path)
            assert shown.status_code == 200 and SECRET_KEY not in shown.text, (path, shown.text)
        assert not any(k.startswith("fs.s3a.") for k in api.get("/connectors/lines-delta/config"))
    finally:
        interrupt(worker)
    stored = client.objects(name, "worker").keys()
    assert "worker/state/_keys/state.key" in stored and "worker/state/_connectors/lines.json" in stored
    assert any(k.startswith("worker/state/checkpoints/lines/") and "/offsets/" in k for k in stored), sorted(stored)
    assert any(k.startswith("worker/topics/_parquet/topic=lines/") for k in stored), sorted(stored)

    shutil.rmtree(disk)  # a new machine: nothing of the worker's is local
    disk.mkdir()
    with src.open("a") as f:
        f.write("".join(f"line-{i}\n" for i in range(11, 16)))
    worker = start("worker2.log")
    try:
        # the stored connectors come back from the bucket (the REST API may answer before they are loaded)
        wait_for(lambda: sorted(api.get("/connectors")) == ["lines", "lines-delta", "lines-sink"], timeout=240,
                 what="the connectors stored in the bucket", explain=log_tail)
        wait_for(lambda: len(lines(out)) >= 15, timeout=420, what="the 5 new lines after the restart",
                 explain=log_tail)
        wait_for(lambda: api.state("lines-sink") == "RUNNING", timeout=60, what="the sink running")
        assert lines(out) == [f"line-{i}" for i in range(1, 16)]  # each once, in order
        wait_for(lambda: delta_lines() == [f"line-{i}" for i in range(1, 16)], timeout=420,
                 what="the 5 new lines in the Delta table, each once", explain=log_tail)
    finally:
        interrupt(worker)
    for log_name in ("worker1.log", "worker2.log"):
        assert SECRET_KEY not in (tmp_path / log_name).read_text(errors="replace")


def test_the_docs_worker_state_block_parses_to_bucket_locations(tmp_path):
    """docs/tasks/object-stores.md's offset.storage.dir/topics.dir block: URIs kept as they are, the state refused to
    connector configs, the topic store Parquet."""
    from pathlib import Path

    from spark_connect_bridge.engine.topic_store import TopicStore

    page = (Path(__file__).resolve().parents[2] / "docs" / "tasks" / "object-stores.md").read_text()
    blocks = page.split("## Every path of ours on an object store")[1].split("```properties\n")[1:]
    block = next(b.split("```")[0] for b in blocks if "offset.storage.dir=" in b.split("```")[0])
    props = dict(line.split("=", 1) for line in block.splitlines() if line and not line.startswith("#"))
    cfg = parse_worker_config({**props, "connector.allowed.paths": "s3a://lake"}, base_dir=str(tmp_path))
    assert (cfg.state_dir, cfg.topics_dir) == ("s3a://lake/kconnect/state", "s3a://lake/kconnect/topics")
    assert cfg.key_file == "s3a://lake/kconnect/state/_keys/state.key" and cfg.state_in_object_store
    assert [p.key for p in cfg.policy.check({"connector.class": "FileStreamSink", "topics": "t",
                                             "file": "s3a://lake/kconnect/state/x"})] == ["file"]
    assert cfg.policy.check({"connector.class": "FileStreamSink", "topics": "t",
                             "file": "s3a://lake/kconnect/topics-old/x"}) == []
    assert TopicStore(cfg.topics_dir, files=cfg.locations).format == "parquet"


def test_offsets_are_read_and_altered_in_a_checkpoint_in_the_bucket(bucket):
    """PATCH /connectors/{c}/offsets's storage side on s3a://: a checkpoint seeded, altered twice (a planned batch
    that never committed dropped first), read back; the objects are Spark's offset and commit logs."""
    from spark_connect_bridge.runtime import offsets_store
    from spark_connect_bridge.runtime.service import _seed_checkpoint

    name, client, endpoint = bucket
    files = Locations(_s3a(endpoint))
    ckpt = f"s3a://{name}/unit/ckpt"
    assert offsets_store.committed_batch(ckpt, files=files) is None
    _seed_checkpoint(ckpt, files)
    key = '{"filename":"/data/in.txt"}'
    assert offsets_store.write_committed(ckpt, {key: {"position": 5}}, files=files) == 1
    files.write_text(f"{ckpt}/offsets/2", "v1\n{}\n{}")  # planned, never committed
    assert offsets_store.write_committed(ckpt, {key: {"position": 9}}, files=files) == 2
    assert offsets_store.read_committed(ckpt, files=files) == {key: {"position": 9}}
    assert sorted(client.objects(name, "unit/ckpt")) == sorted(
        [f"unit/ckpt/{d}/{b}" for d in ("commits", "offsets") for b in range(3)] + ["unit/ckpt/metadata"])
