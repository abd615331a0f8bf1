"""A Debezium PostgreSQL config of the kind Debezium's tutorials and blog posts carry (issue #34) validates with
``kconnect plugins validate`` and runs end to end: every key the issue's first user was refused for is accepted
(implemented, without effect, or with a warning), a key that would change the records is refused at any value but
its default, and Debezium 1.x spellings are read as their 2.x+ names with a deprecation warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import spark_connect_bridge
from spark_connect_bridge.connectors.factory import parse_connector_config
from spark_connect_bridge.errors import ConfigError
from tests.support.postgres import PostgresCluster

KCONNECT = str(Path(sys.executable).with_name("kconnect"))

#: The issue's keys, at values this project supports (its tutorial values where they are supported).
TUTORIAL_KEYS = {
    "provide.transaction.metadata": "false",
    "include.unknown.datatypes": "false",
    "message.key.columns": "",
    "hstore.handling.mode": "json",
    "binary.handling.mode": "bytes",
    "schema.name.adjustment.mode": "none",
    "signal.enabled.channels": "source",
    "notification.enabled.channels": "sink",
    "converters": "",
    "datatype.propagate.source.type": "",
    "column.propagate.source.type": "",
    "event.processing.failure.handling.mode": "fail",
    "topic.heartbeat.prefix": "__debezium-heartbeat",
    "status.update.interval.ms": "10000",
    "lsn.flush.mode": "connector",
}


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _tutorial_config(pg: PostgresCluster, db: str) -> dict[str, str]:
    return {
        "name": "inventory-connector",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        **pg.connector_config(db),
        "topic.prefix": "dbserver1",
        "plugin.name": "pgoutput",
        "slot.name": f"slot_{db}",
        "table.include.list": "public.customers",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.drop.tombstones": "false",
        **TUTORIAL_KEYS,
    }


def _write(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KCONNECT, "plugins", "validate", str(path)], capture_output=True, text=True, timeout=120,
                          check=False)


def test_tutorial_config_validates_and_runs(spark, pg, tmp_path):
    db = pg.new_database("tutorial")
    pg.execute("create table customers (id int primary key, first_name text, email text, photo bytea);"
               "insert into customers values (1001, 'Sally', 'sally@example.com', '\\x01ff'),"
               "                             (1002, 'George', 'gbailey@foobar.com', null)", database=db)
    path = _write(tmp_path / "inventory-connector.properties", _tutorial_config(pg, db))

    done = _validate(path)
    assert done.returncode == 0, done.stderr
    assert "valid source connector config (PostgresConnector)" in done.stdout
    # the keys that do nothing here say so, once each; none is an error
    assert done.stderr.count("notification.enabled.channels=sink is not supported here") == 1, done.stderr
    assert done.stderr.count('Unknown configuration "topic.heartbeat.prefix" is ignored') == 1, done.stderr

    rows: list = []
    query = (spark_connect_bridge.read_stream(spark, str(path)).writeStream
             .foreachBatch(lambda df, _: rows.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    got = sorted(((r["topic"], json.loads(r["key"]), json.loads(r["value"])) for r in rows), key=lambda t: t[1]["id"])
    assert got == [
        ("dbserver1.public.customers", {"id": 1001},
         {"id": 1001, "first_name": "Sally", "email": "sally@example.com", "photo": "Af8="}),
        ("dbserver1.public.customers", {"id": 1002},
         {"id": 1002, "first_name": "George", "email": "gbailey@foobar.com", "photo": None}),
    ]


_BASE = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "db",
         "database.user": "u", "database.password": "p", "database.dbname": "d", "topic.prefix": "shop"}


@pytest.mark.parametrize("key, value, reason", [
    ("converters", "isbn", "custom converters"),
    ("hstore.handling.mode", "map", "map mode is not implemented"),
    ("schema.name.adjustment.mode", "avro", "avro adjustment is not implemented"),
    ("include.unknown.datatypes", "true", "not implemented"),
    ("provide.transaction.metadata", "true", "transaction boundary events"),
    ("event.processing.failure.handling.mode", "warn", "would drop it silently"),
])
def test_key_that_changes_records_is_refused_with_the_reason(key, value, reason):
    with pytest.raises(ConfigError) as e:
        parse_connector_config({**_BASE, key: value})
    assert e.value.keys == [key]
    assert reason in str(e.value) and f"configuration {key}" in str(e.value).replace("Configuration", "configuration")


@pytest.mark.parametrize("key, value", [
    ("message.key.columns", "public.customers:email"),
    ("column.propagate.source.type", ".*"),
    ("datatype.propagate.source.type", ".+\\.NUMERIC"),
    ("binary.handling.mode", "base64"),
    ("column.mask.with.10.chars", "public.customers.email"),
    ("column.truncate.to.20.chars", "public.customers.email"),
])
def test_keys_that_change_records_now_run_on_postgresql(key, value):
    """Refused until the PostgreSQL connector implemented them (tests/connectors/test_postgres_cdc_columns.py runs
    each against the server)."""
    config = parse_connector_config({**_BASE, key: value})
    assert config is not None


def test_misspelled_debezium_key_fails_with_did_you_mean():
    with pytest.raises(ConfigError) as e:
        parse_connector_config({**_BASE, "provide.transaction.metdata": "false"})
    assert e.value.keys == ["provide.transaction.metdata"]
    assert 'did you mean "provide.transaction.metadata"' in str(e.value)


def test_debezium_1x_spellings_read_as_their_new_names(caplog):
    old = {k: v for k, v in _BASE.items() if k != "topic.prefix"}
    _, config = parse_connector_config({**old, "database.server.name": "shop", "table.whitelist": "public.a",
                                        "schema.blacklist": "audit"})
    assert (config.topic_prefix, config.table_include_list, config.schema_exclude_list) == \
        ("shop", ("public.a",), ("audit",))
    for old_key, new in [("database.server.name", "topic.prefix"), ("table.whitelist", "table.include.list"),
                         ("schema.blacklist", "schema.exclude.list")]:
        assert f"Configuration {old_key} is deprecated (an old spelling Debezium 1.x accepts): read as {new}" \
            in caplog.text


def test_kafka_client_and_schema_history_keys_pass_through():
    parse_connector_config({**_BASE, "producer.override.compression.type": "lz4", "consumer.max.poll.records": "5",
                            "schema.history.internal.kafka.topic": "h", "signal.kafka.topic": "s"})
