"""A Debezium PostgreSQL config POSTed to the worker delivers its initial snapshot.

The worker must never touch the replication slot before the connector's query does: a slot created by anything
else (the lag metric asking the connector for its initial offsets, say) makes the query find an existing slot
and stream "without a new snapshot", losing every row that was in the tables.
"""

from __future__ import annotations

import json

import pytest

from tests.runtime.worker_helpers import wait_for
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def snapshot_pg():
    with PostgresCluster() as cluster:
        yield cluster


def _debezium_config(pg: PostgresCluster, db: str) -> dict[str, str]:
    # As Debezium's PostgreSQL connector documentation writes it (snapshot.mode=initial is the default).
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.user": "postgres",
            "database.password": "", "database.dbname": db, "topic.prefix": "dbserver1",
            "table.include.list": "public.customers", "plugin.name": "pgoutput", "slot.name": f"slot_{db}",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}


def _topic_rows(worker, spark, topic: str) -> list[dict]:
    store = worker.service.worker.store
    if topic not in store.topics():
        return []
    rows = store.read_batch(spark, [topic]).orderBy("offset").collect()
    return [json.loads(bytes(r["value"]).decode()) for r in rows if r["value"] is not None]


def test_worker_delivers_the_initial_snapshot(spark, start_worker, snapshot_pg):
    db = snapshot_pg.new_database("snap")
    snapshot_pg.execute("create table customers (id int primary key, name text);"
                        "insert into customers values (1, 'ada'), (2, 'grace'), (3, 'linus')", database=db)
    worker, api = start_worker()
    r = api.call("POST", "/connectors", {"name": "inventory", "config": _debezium_config(snapshot_pg, db)})
    assert r.status_code == 201, r.text
    events = wait_for(lambda: len(ev := _topic_rows(worker, spark, "dbserver1.public.customers")) >= 3 and ev,
                      timeout=180, what="the snapshot's three rows in the topic store")
    assert [(e["op"], e["after"]) for e in events] == [
        ("r", {"id": 1, "name": "ada"}), ("r", {"id": 2, "name": "grace"}), ("r", {"id": 3, "name": "linus"})]
    assert all(e["source"]["snapshot"] in ("first", "true", "last") for e in events)
    # the stream goes on after the snapshot
    snapshot_pg.execute("insert into customers values (4, 'barbara')", database=db)
    events = wait_for(lambda: len(ev := _topic_rows(worker, spark, "dbserver1.public.customers")) >= 4 and ev,
                      timeout=120, what="the streamed insert")
    assert [(e["op"], e["after"]) for e in events[3:]] == [("c", {"id": 4, "name": "barbara"})]
    topics = api.get("/connectors/inventory/topics")
    assert topics == {"inventory": {"topics": ["dbserver1.public.customers"]}}

