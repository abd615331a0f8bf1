"""Debezium's JDBC sink (``io.debezium.connector.jdbc.JdbcSinkConnector``) end to end on PostgreSQL: Debezium's own
example configs (tests/corpus/debezium-examples), only their location changed, over Debezium change events (upsert
from ``after``, deletes from ``op=d``, tombstones and truncates skipped) and flattened records (a null value
deletes); rows checked one by one."""

from __future__ import annotations

import json
import os

import pytest
from jdbc_support import pg_conn, pg_db, pg_url, query  # noqa: F401

import spark_connect_bridge as scb
from spark_connect_bridge.engine.pipeline import prepare
from spark_connect_bridge.errors import ConfigError

CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus", "debezium-examples")
ROW = "struct<id:int,first_name:string,email:string>"
ENVELOPE = (f"struct<before:{ROW},after:{ROW},source:struct<db:string,schema:string,table:string>,op:string,"
            "ts_ms:bigint>")


def corpus(name: str, db: str) -> dict:
    """A Debezium example config pointed at this test's database (location keys only)."""
    with open(os.path.join(CORPUS, name)) as f:
        config = json.load(f)["config"]
    return {**config, "connection.url": pg_url(db), "connection.username": "postgres"}


def events(spark, rows: list, topic: str):
    """Change events (key struct<id>, Debezium envelope value) of ``topic`` in this order."""
    data = [((i,), v, topic, 0, n) for n, (i, v) in enumerate(rows)]
    return spark.createDataFrame(data, f"key struct<id:int>, value {ENVELOPE}, topic string, partition int, "
                                       "offset bigint")


def ev(op: str, before: tuple | None, after: tuple | None, table: str = "customers") -> tuple:
    return (before, after, ("inventory", "public", table), op, 0)


def test_unwrap_smt_example_applies_change_events_upsert_and_delete(spark, pg_db):  # noqa: F811 - fixture
    config = corpus("unwrap-smt__jdbc-sink.json", pg_db)
    a, b, c = (1, "Sally", "sally@example.com"), (2, "George", "gbailey@example.com"), (3, "Edward", "ed@w.org")
    b2 = (2, "George", "george@example.org")
    scb.write_batch(events(spark, [(1, ev("r", None, a)), (2, ev("c", None, b)), (3, ev("c", None, c))],
                           "customers"), config)
    conn = pg_conn(pg_db)
    assert query(conn, "SELECT id, first_name, email FROM customers ORDER BY id") == [a, b, c]
    # an update, a delete and its tombstone, a truncate (skipped: truncate.enabled is false)
    second = events(spark, [(2, ev("u", b, b2)), (3, ev("d", c, None)), (3, None), (1, ev("t", None, None))],
                    "customers")
    scb.write_batch(second, config)
    assert query(conn, "SELECT id, first_name, email FROM customers ORDER BY id") == [a, b2]
    # the same events without delete.enabled: the delete is skipped, the update applied
    scb.write_batch(events(spark, [(1, ev("d", a, None)), (2, ev("u", b2, b))], "customers"),
                    {**config, "delete.enabled": "false"})
    assert query(conn, "SELECT id, first_name, email FROM customers ORDER BY id") == [a, b]
    conn.close()


def test_cqrs_example_names_tables_by_source_table_and_flattened_records_delete(spark, pg_db):  # noqa: F811
    config = corpus("cqrs__mysql-sink.json", pg_db)  # collection.name.format=${source.table}
    scb.write_batch(events(spark, [(7, ev("c", None, (7, "vote", "v@x"), table="vote_entity"))], "voteentity"),
                    config)
    conn = pg_conn(pg_db)
    assert query(conn, "SELECT id, first_name, email FROM vote_entity") == [(7, "vote", "v@x")]
    # Flattened records (ExtractNewRecordState): the default ${topic} with dots as underscores; null deletes
    flat = {**config, "topics": "dbserver1.inventory.people", "collection.name.format": "${topic}"}
    rows = [((1,), (1, "Ann", "a@x"), "dbserver1.inventory.people", 0, 0),
            ((2,), (2, "Bob", "b@x"), "dbserver1.inventory.people", 0, 1)]
    df = spark.createDataFrame(rows, f"key struct<id:int>, value {ROW}, topic string, partition int, offset bigint")
    scb.write_batch(df, flat)
    assert query(conn, "SELECT id, first_name FROM dbserver1_inventory_people ORDER BY id") == [(1, "Ann"), (2, "Bob")]
    gone = spark.createDataFrame([((2,), None, "dbserver1.inventory.people", 0, 2)],
                                 f"key struct<id:int>, value {ROW}, topic string, partition int, offset bigint")
    scb.write_batch(gone, {**flat, "field.exclude.list": "email"})
    assert query(conn, "SELECT id, first_name FROM dbserver1_inventory_people ORDER BY id") == [(1, "Ann")]
    conn.close()


@pytest.mark.parametrize(("change", "key", "reason"), [
    ({"truncate.enabled": "true"}, "truncate.enabled", "truncating the table is not implemented"),
    ({"table.naming.strategy": "com.example.Mine"}, "table.naming.strategy", "Java naming strategies"),
    ({"primary.key.mode": "record_value", "primary.key.fields": ""}, "primary.key.fields", "name the key fields"),
    ({"primary.key.mode": "kafka"}, "delete.enabled", "primary.key.mode=record_key"),
])
def test_refusals_name_the_key(change, key, reason):
    config = {**corpus("unwrap-smt__jdbc-sink.json", "db"), **change}
    with pytest.raises(ConfigError) as e:
        prepare(config, kind="sink")
    assert any(p.key == key and reason in p.message for p in e.value.problems), e.value.problems


def test_attack_a_table_name_from_the_data_reaches_no_other_table(spark, pg_db):  # noqa: F811 - fixture
    """collection.name.format=${source.table} takes the table from each event, i.e. from whoever writes the topic:
    quotes are doubled and dots become underscores, so a crafted name is one odd table, never SQL or another
    schema's table."""
    conn = pg_conn(pg_db)
    conn.execute("CREATE TABLE victims (id int PRIMARY KEY)")
    conn.execute("INSERT INTO victims VALUES (1)")
    config = corpus("cqrs__mysql-sink.json", pg_db)
    evil = 'x"; DROP TABLE victims; --'
    scb.write_batch(events(spark, [(5, ev("c", None, (5, "e", "e@x"), table=evil)),
                                   (6, ev("c", None, (6, "f", "f@x"), table="pg_catalog.pg_class"))],
                           "voteentity"), config)
    assert query(conn, "SELECT id FROM victims") == [(1,)]
    assert query(conn, f'SELECT id FROM "{evil.replace(chr(34), chr(34) * 2)}"') == [(5,)]
    assert query(conn, 'SELECT id FROM public."pg_catalog_pg_class"') == [(6,)]
    conn.close()
