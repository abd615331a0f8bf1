"""Sink-side failures: rows a database rejects are dead-lettered one by one; a restarted server is retried.

Both tests use a throwaway PostgreSQL cluster (tests/support/postgres.py), which the second one restarts
in the middle of the stream.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import spark_connect_bridge as scb
from spark_connect_bridge.engine.datasource import read_batch_reports
from spark_connect_bridge.engine.pipeline import BATCH_METRICS
from spark_connect_bridge.engine.topic_store import TopicStore
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _source(tmp_path: Path, lines: list[str], per_trigger: int) -> dict:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(ln + "\n" for ln in lines))
    return {"name": "lines", "connector.class": "FileStreamSource", "file": str(path), "topic": "payments",
            "value.converter": "StringConverter", "max.records.per.trigger": str(per_trigger)}


def _sink(pg: PostgresCluster, table: str, **extra: str) -> dict:
    return {"name": f"jdbc-{table}", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/test", "connection.user": "postgres",
            "table.name.format": table, "insert.mode": "insert", "pk.mode": "record_value", "pk.fields": "id",
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false",
            "value.converter.spark.schema": "id BIGINT, amount DOUBLE", **extra}


def test_rows_the_database_rejects_are_dead_lettered_exactly(spark, pg, tmp_path):
    pg.execute("CREATE TABLE checked (id bigint PRIMARY KEY, amount double precision CHECK (amount >= 0))")
    n = 2000
    lines = [json.dumps({"id": i, "amount": -1.0 if i % 100 == 3 else i / 2}) for i in range(n)]
    topics = tmp_path / "topics"
    sink = _sink(pg, "checked", **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
                                   "errors.deadletterqueue.topics.dir": str(topics),
                                   "errors.deadletterqueue.context.headers.enable": "true"})
    q = scb.write_stream(scb.read_stream(spark, _source(tmp_path, lines, 700)), sink,
                         checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    q.awaitTermination()
    rows = pg.execute("SELECT id, amount FROM checked ORDER BY id")
    assert [r[0] for r in rows] == [i for i in range(n) if i % 100 != 3]
    dlq = TopicStore(str(topics)).read_batch(spark, ["dlq"]).collect()
    assert sorted(json.loads(r.value)["id"] for r in dlq) == [i for i in range(n) if i % 100 == 3]
    batches = list(BATCH_METRICS["jdbc-checked"])
    assert sum(b["rejected_by_sink"] for b in batches) == 20 and sum(b["written"] for b in batches) == n - 20
    for r in dlq:
        h = {x.key: x.value.decode() for x in r.headers}
        assert h["__connect.errors.stage"] == "TASK_PUT"
        assert "check" in h["__connect.errors.exception.message"].lower()
        assert r.value.decode() == lines[json.loads(r.value)["id"]]  # the bytes as they were consumed


def test_rejected_rows_survive_a_crash_between_the_database_commit_and_spark(spark, pg, tmp_path):
    pg.execute("CREATE TABLE crashy (id bigint PRIMARY KEY, amount double precision CHECK (amount >= 0))")
    lines = [json.dumps({"id": i, "amount": -1.0 if i in (5, 77) else 1.0}) for i in range(100)]
    topics, ckpt = tmp_path / "topics", str(tmp_path / "ckpt")
    src = _source(tmp_path, lines, 1000)
    sink = _sink(pg, "crashy", **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
                                  "errors.deadletterqueue.topics.dir": str(topics)})
    crash = {**sink, "fault.injection.point": "after-apply"}  # the DB transaction commits, then the driver dies
    with pytest.raises(Exception, match="fault injected"):
        scb.write_stream(scb.read_stream(spark, src), crash, checkpoint=ckpt,
                         trigger={"availableNow": True}).awaitTermination()
    assert TopicStore(str(topics)).topics() == []  # the crash came before the dead letters were written
    scb.write_stream(scb.read_stream(spark, src), sink, checkpoint=ckpt,
                     trigger={"availableNow": True}).awaitTermination()
    assert pg.execute("SELECT count(*) FROM crashy")[0][0] == 98
    dlq = TopicStore(str(topics)).read_batch(spark, ["dlq"]).collect()
    assert sorted(json.loads(r.value)["id"] for r in dlq) == [5, 77]


def test_a_restarted_server_is_retried_and_nothing_is_lost(spark, pg, tmp_path):
    n = 3000
    lines = [json.dumps({"id": i, "amount": float(i)}) for i in range(n)]
    sink = _sink(pg, "restarted", **{"auto.create": "true", "errors.retry.timeout": "120000",
                                     "errors.retry.delay.max.ms": "2000"})
    q = scb.write_stream(scb.read_stream(spark, _source(tmp_path, lines, 300)), sink,
                         checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})

    def restart_mid_stream() -> None:
        while q.isActive and sum(p["numInputRows"] for p in q.recentProgress) < 600:
            time.sleep(0.05)
        pg.stop(mode="immediate")  # connections are cut, as in a crash
        time.sleep(4)  # the stream meets a server that is down
        pg.start()

    t = threading.Thread(target=restart_mid_stream)
    t.start()
    q.awaitTermination()
    t.join()
    assert sum(p["numInputRows"] for p in q.recentProgress) == n
    reports = read_batch_reports(str(tmp_path / "ckpt"))
    assert sum(r["retries"] for r in reports) >= 1, reports  # the retries show per micro-batch
    ids = [r[0] for r in pg.execute("SELECT id FROM restarted ORDER BY id")]
    assert ids == list(range(n))
