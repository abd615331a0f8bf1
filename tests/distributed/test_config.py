"""A Kafka Connect distributed worker config: accepted as Kafka writes it (a group on Kafka), or with a PostgreSQL
group store; every problem of the group keys reported at once, naming the key, never the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_connect_bridge.cli import main
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.runtime.worker_config import load_worker_config, parse_worker_config

ROOT = Path(__file__).resolve().parents[2]
STORE = "postgresql://kconnect@127.0.0.1:5432/connect"


def test_kafka_s_connect_distributed_properties_load_unchanged_as_a_group_on_kafka(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_worker_config(str(ROOT / "conf" / "connect-distributed.properties"))
    assert (config["group.id"], config.bootstrap_servers, config["group.store.url"]) == \
        ("connect-cluster", "localhost:9092", None)
    assert (config["config.storage.topic"], config["status.storage.topic"]) == ("connect-configs", "connect-status")
    assert (config["config.storage.replication.factor"], config["status.storage.replication.factor"]) == (1, 1)
    assert config["status.storage.partitions"] == 5
    assert (config["heartbeat.interval.ms"], config["session.timeout.ms"]) == (3000, 10000)
    assert config.state_dir == str(tmp_path / "work" / "connect-cluster")  # no offset.storage.dir in Kafka's file


def test_the_postgresql_variant_loads_with_the_group_store():
    config = load_worker_config(str(ROOT / "conf" / "connect-distributed-postgres.properties"))
    assert (config["group.id"], config["group.store.url"]) == ("connect-cluster", STORE)
    assert config["scheduled.rebalance.max.delay.ms"] == 300000


@pytest.mark.parametrize("props, key", [
    ({"group.id": "g"}, "bootstrap.servers"),
    ({"group.id": "g", "bootstrap.servers": "kafka:9092", "status.storage.topic": "s"}, "config.storage.topic"),
    ({"group.id": "g", "bootstrap.servers": "kafka:9092", "config.storage.topic": "c"}, "status.storage.topic"),
    ({"group.store.url": STORE}, "group.id"),
    ({"group.id": "g", "group.store.url": "mysql://db/connect"}, "group.store.url"),
    ({"group.id": "g", "group.store.url": STORE, "heartbeat.interval.ms": "10000"}, "heartbeat.interval.ms"),
])
def test_group_key_problems_name_the_key(props, key, tmp_path):
    with pytest.raises(ConfigError) as e:
        parse_worker_config({"offset.storage.dir": str(tmp_path), **props})
    assert key in e.value.keys


def test_the_group_store_password_is_never_shown(tmp_path):
    config = parse_worker_config({"offset.storage.dir": str(tmp_path), "group.id": "g", "group.store.url": STORE,
                                  "group.store.password": "pg-s3cret"})
    assert config["group.store.password"].value() == "pg-s3cret"
    assert "pg-s3cret" not in repr(config)


def test_kconnect_distributed_needs_a_group(tmp_path, capsys):
    props = tmp_path / "worker.properties"
    props.write_text(f"offset.storage.dir={tmp_path}\nlisteners=http://127.0.0.1:0\n")
    assert main(["distributed", str(props), "--no-live"]) == 2
    assert "group.id" in capsys.readouterr().err
