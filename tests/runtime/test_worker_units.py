"""Worker pieces without Spark: worker config, durable state, offsets in a checkpoint, the status table."""

from __future__ import annotations

import json
import os

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.runtime import offsets_store
from spark_connect_bridge.runtime.state import ConnectorState, StateStore
from spark_connect_bridge.runtime.worker_config import parse_worker_config


def test_worker_binds_loopback_by_default(tmp_path):
    cfg = parse_worker_config({"offset.storage.dir": str(tmp_path)})
    assert (cfg.host, cfg.port) == ("127.0.0.1", 8083)
    assert parse_worker_config({"offset.storage.dir": str(tmp_path), "listeners": "http://:9000"}).host == "127.0.0.1"
    old = parse_worker_config({"offset.storage.dir": str(tmp_path), "rest.host.name": "0.0.0.0", "rest.port": "8084"})
    assert (old.host, old.port) == ("0.0.0.0", 8084)


def test_kafka_offsets_file_gives_the_state_directory(tmp_path):
    cfg = parse_worker_config({"offset.storage.file.filename": str(tmp_path / "connect.offsets")})
    assert cfg.state_dir == str(tmp_path)


@pytest.mark.parametrize("props, key", [
    ({}, "offset.storage.dir"),
    ({"offset.storage.dir": "x", "listeners": "ftp://127.0.0.1:8443"}, "listeners"),
    ({"offset.storage.dir": "x", "listeners": "https://127.0.0.1:8443"}, "listeners.https.ssl.keystore.location"),
    ({"offset.storage.dir": "x", "rest.prot": "1"}, "rest.prot"),
    ({"offset.storage.dir": "x", "rest.basic.auth.file": "/no/such/file"}, "rest.basic.auth.file"),
    # only s3a:// among object stores (Hadoop's S3A is the connector declared), not a local directory named "gs:"
    ({"offset.storage.dir": "gs://lake/state"}, "offset.storage.dir"),
    ({"offset.storage.dir": "x", "topics.dir": "gs://lake/topics"}, "topics.dir"),
    ({"offset.storage.dir": "hdfs://namenode:8020/kconnect"}, "offset.storage.dir"),
])
def test_bad_worker_configs_name_the_key(props, key):
    with pytest.raises(ConfigError) as e:
        parse_worker_config(props)
    assert key in e.value.keys


def test_spark_and_converter_keys_pass_through(tmp_path):
    cfg = parse_worker_config({"offset.storage.dir": str(tmp_path), "spark.master": "local[1]",
                               "spark.sql.shuffle.partitions": "3", "value.converter": "StringConverter",
                               "value.converter.encoding": "UTF-8", "bootstrap.servers": "k:9092"})
    assert cfg.spark_conf == {"spark.sql.shuffle.partitions": "3", "spark.master": "local[1]",
                              "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
    assert cfg.converter_defaults == {"value.converter": "StringConverter", "value.converter.encoding": "UTF-8"}


def test_state_survives_reload_and_odd_names(tmp_path):
    store = StateStore(str(tmp_path))
    store.put(ConnectorState("a/b c", {"connector.class": "x"}, "PAUSED", created=1.0, generation=7))
    store.put(ConnectorState("z", {"connector.class": "y"}, created=0.5))
    again = StateStore(str(tmp_path)).load_all()
    assert [(s.name, s.target_state, s.generation) for s in again] == [("z", "STARTED", 0), ("a/b c", "PAUSED", 7)]
    store.delete("z")
    assert [s.name for s in store.load_all()] == ["a/b c"]
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def _checkpoint(tmp_path, batches: int) -> str:
    ck = tmp_path / "ck"
    (ck / "offsets").mkdir(parents=True)
    (ck / "commits").mkdir()
    for b in range(batches):
        (ck / "offsets" / str(b)).write_text(f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{b},"conf":{{}}}}\n'
                                             f'{{"{{\\"filename\\":\\"/a\\"}}": {{"position": {b * 10}}}}}')
        (ck / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (ck / "offsets" / str(batches)).write_text("v1\n{}\n{\"planned\": 1}")  # planned, never committed
    return str(ck)


def test_offsets_are_read_from_the_latest_committed_batch(tmp_path):
    ck = _checkpoint(tmp_path, 3)
    assert offsets_store.committed_batch(ck) == 2
    assert offsets_store.read_committed(ck) == {'{"filename":"/a"}': {"position": 20}}


def test_altered_offsets_become_a_new_committed_batch(tmp_path):
    ck = _checkpoint(tmp_path, 2)
    new = offsets_store.write_committed(ck, {'{"filename":"/a"}': {"position": 3}})
    assert new == 2
    assert offsets_store.read_committed(ck) == {'{"filename":"/a"}': {"position": 3}}
    text = open(os.path.join(ck, "offsets", "2")).read().split("\n")
    assert text[0] == "v1" and json.loads(text[1])["batchTimestampMs"] == 1  # metadata of batch 1 copied
    assert sorted(os.listdir(os.path.join(ck, "commits"))) == ["0", "1", "2"]


def test_status_table_shows_every_connector(tmp_path):
    from rich.console import Console

    from spark_connect_bridge.runtime.service import ConnectService
    from spark_connect_bridge.runtime.standalone import status_table
    from spark_connect_bridge.runtime.worker import ConnectorRuntime

    svc = ConnectService(parse_worker_config({"offset.storage.dir": str(tmp_path)}))
    rt = ConnectorRuntime(ConnectorState("orders", {"connector.class": "DatagenConnector", "tasks.max": "2"}),
                          kind="source", phase="RUNNING")
    rt.metrics.records_in_per_sec, rt.metrics.lag, rt.metrics.batch_duration_ms = 1234.0, 5, 250
    svc.worker.runtimes["orders"] = rt
    console = Console(width=160, record=True)
    console.print(status_table(svc, "http://127.0.0.1:8083"))
    text = console.export_text()
    assert "orders" in text and "RUNNING" in text and "1,234" in text and "250" in text
    assert svc.status("orders")["metrics"]["lag"] == 5


def test_status_table_keeps_long_names_whole_on_an_80_column_terminal(tmp_path):
    from rich.console import Console

    from spark_connect_bridge.runtime.service import ConnectService
    from spark_connect_bridge.runtime.standalone import status_table
    from spark_connect_bridge.runtime.worker import ConnectorRuntime

    svc = ConnectService(parse_worker_config({"offset.storage.dir": str(tmp_path)}))
    name = "inventory-postgres-cdc-to-delta-merge"
    svc.worker.runtimes[name] = ConnectorRuntime(ConnectorState(name, {"connector.class": "DatagenConnector"}),
                                                 kind="source", phase="RUNNING")
    console = Console(width=80, record=True)
    console.print(status_table(svc, "http://127.0.0.1:8083", console.width))
    text = console.export_text()
    assert name in text and "RUNNING" in text and "…" not in text, text
    assert "columns left out to fit the terminal" in text
    table = text.split("┏", 1)[1].split("┘", 1)[0]
    assert table.splitlines()[0].endswith("┓") and "records\n" not in table  # its right border: not cropped
    assert max(len(line) for line in text.splitlines()) <= 80
    wide = Console(width=200, record=True)  # a wide terminal: every column
    wide.print(status_table(svc, "http://127.0.0.1:8083", wide.width))
    text = wide.export_text()
    assert name in text and "dead-lettered" in text and "…" not in text and "left out" not in text, text


def test_status_lines_say_what_changed_once(tmp_path):
    from spark_connect_bridge.runtime.service import ConnectService
    from spark_connect_bridge.runtime.standalone import status_lines
    from spark_connect_bridge.runtime.worker import ConnectorRuntime

    svc = ConnectService(parse_worker_config({"offset.storage.dir": str(tmp_path)}))
    rt = ConnectorRuntime(ConnectorState("orders", {"connector.class": "DatagenConnector"}), kind="source",
                          phase="RUNNING")
    svc.worker.runtimes["orders"] = rt
    seen: dict = {}
    first = status_lines(svc, seen)
    assert [line.split(" ", 2)[2] for line in first] == ["connector orders (source, 1 tasks): RUNNING"]
    assert status_lines(svc, seen) == []  # nothing changed, nothing printed
    rt.metrics.batches, rt.metrics.records_in_total, rt.metrics.records_out_total = 2, 1500, 1500
    assert [line.split(" ", 2)[2] for line in status_lines(svc, seen)] == [
        "connector orders: 2 batches, 1,500 records in (1,500 in, 1,500 out in all)"]
    rt.phase = "FAILED"
    rt.trace = ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"x\"\n"
                "spark_connect_bridge.errors.ConfigError: Invalid configuration: value field 'address' is struct\n"
                "\tat org.apache.spark.X\n")
    assert [line.split(" ", 2)[2] for line in status_lines(svc, seen)] == [
        "connector orders (source, 1 tasks): FAILED: Invalid configuration: value field 'address' is struct"]
    del svc.worker.runtimes["orders"]
    assert [line.split(" ", 2)[2] for line in status_lines(svc, seen)] == ["connector orders: deleted"]


def test_workers_starting_at_once_share_one_complete_key(tmp_path):
    """The key that encrypts stored configs, created by whichever worker comes first: one starting at the same
    moment reads the whole key, never a file still empty (it failed "Fernet key must be 32 url-safe base64-encoded
    bytes" in a group test)."""
    from .worker_helpers import ciphers_made_together

    path = str(tmp_path / "_keys" / "state.key")
    ciphers_made_together(path, 8)
    assert os.listdir(tmp_path / "_keys") == ["state.key"] and oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(tmp_path / "_keys").st_mode & 0o777) == "0o700"  # the key's folder is the worker's alone


def test_object_store_credentials_are_secret_keys_in_either_spelling():
    """The Hadoop keys that hold an object store's credentials are masked and scrubbed like connection.password,
    as a worker config's spark.hadoop.* keys and as bare Hadoop keys."""
    from spark_connect_bridge.runtime.secrets import is_secret_key, scrub_text

    for key in ("fs.s3a.secret.key", "fs.s3a.session.token", "fs.s3a.encryption.key",
                "fs.s3a.bucket.lake.secret.key", "fs.azure.account.key.acct.dfs.core.windows.net",
                "fs.azure.sas.token.provider.fixed.token", "fs.azure.account.oauth2.client.secret",
                "fs.gs.auth.service.account.private.key", "fs.azure.sas.box.acct.blob.core.windows.net"):
        assert is_secret_key(key) and is_secret_key("spark.hadoop." + key), key
    for key in ("fs.s3a.access.key", "fs.s3a.endpoint", "fs.azure.account.auth.type"):
        assert not is_secret_key("spark.hadoop." + key), key
    assert "sk-1" not in scrub_text("failed with sk-1", {"spark.hadoop.fs.s3a.secret.key": "sk-1"})


def test_the_object_store_worker_config_of_the_docs_parses_and_configures_s3a(tmp_path, monkeypatch):
    """docs/tasks/object-stores.md's worker config for paths on a bucket: the env provider resolves the keys, the
    session gets the S3A connector, the allowed paths keep their URIs."""
    from pathlib import Path

    from spark_connect_bridge.jvm import wants_object_stores

    page = (Path(__file__).resolve().parents[2] / "docs" / "tasks" / "object-stores.md").read_text()
    block = page.split("## Every path of ours on an object store")[1].split("```properties\n")[1].split("```")[0]
    props = dict(line.split("=", 1) for line in block.splitlines() if line and not line.startswith("#"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    cfg = parse_worker_config({**props, "offset.storage.dir": "state"}, base_dir=str(tmp_path))
    assert cfg.spark_conf["spark.hadoop.fs.s3a.secret.key"] == "s3cret" and wants_object_stores(cfg.spark_conf)
    assert cfg.policy.allowed_paths[1:] == ("s3a://lake/exports", "s3a://lake/tables")
