"""A strict JDBC sink whose types come from each micro-batch's messages (JsonConverter, schemas.enable=true, no
spark.schema) writes each batch in one pass: the conversion runs inside the write, the batch's count is observed
on the write itself (no job of its own), and a schema that changes between micro-batches still evolves the
table. A batch is first written typed by the previous batch's schemas (no job to find them); one whose messages
carry another schema fails that write, which the sink aborts, and is typed from its messages. A strict sink runs as
a plain streaming query while its schemas hold (engine/schema_restarts.py): one query to its caller, and nothing lost
or doubled when its driver is killed as it changes query."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest
from pyspark.sql.types import BinaryType

from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.engine.pipeline import BATCH_METRICS, write_stream

JSON = "org.apache.kafka.connect.json.JsonConverter"


def _envelope(fields: list[tuple[str, str, bool]], payload: dict) -> bytes:
    schema = {"type": "struct", "name": "shop.orders.Value", "optional": False,
              "fields": [{"field": f, "type": t, "optional": opt} for f, t, opt in fields]}
    return json.dumps({"schema": schema, "payload": payload}).encode()


def _key(i: int) -> bytes:
    schema = {"type": "struct", "name": "shop.orders.Key", "optional": False,
              "fields": [{"field": "id", "type": "int64", "optional": False}]}
    return json.dumps({"schema": schema, "payload": {"id": i}}).encode()


def _one_file_per_batch(spark, tmp_path, batches: list[list[tuple]]):
    """A stream whose micro-batches are ``batches`` ((key, value) messages of topic ``orders``, or (key, value,
    topic)), one Parquet file each, offsets counted across them."""
    offset = 0
    for b, messages in enumerate(batches):
        rows = [(m[0], m[1], m[2] if len(m) > 2 else "orders", 0, offset + i, None, [])
                for i, m in enumerate(messages)]
        offset += len(messages)
        spark.createDataFrame(rows, record_schema(BinaryType(), BinaryType())).coalesce(1).write.parquet(
            str(tmp_path / "in" / f"b{b}"))
    return (spark.readStream.schema(record_schema(BinaryType(), BinaryType())).option("maxFilesPerTrigger", 1)
            .parquet(str(tmp_path / "in" / "*")))


def _run(spark, tmp_path, caplog, name: str, batches: list[list[tuple]], **keys: str):
    """Run the JDBC sink ``name`` (SQLite, upsert by the record key, auto-created tables, ``keys`` added) over
    ``batches`` to the end: the database, the batches' (id, records, failed, written) and the pipeline's log."""
    stream = _one_file_per_batch(spark, tmp_path, batches)
    db = tmp_path / "mirror.db"
    config = {"name": name, "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "connection.url": f"jdbc:sqlite:{db}", "topics": "orders", "auto.create": "true",
              "insert.mode": "upsert", "pk.mode": "record_key", "key.converter": JSON, "value.converter": JSON,
              **keys}
    BATCH_METRICS.pop(name, None)
    for logger in ("spark_connect_bridge.engine.pipeline", "spark_connect_bridge.engine.schema_restarts"):
        caplog.set_level(logging.INFO, logger=logger)
    q = write_stream(stream, config, checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    q.awaitTermination()
    assert q.exception() is None
    metrics = [(m["batch_id"], m["records"], m["failed"], m["written"]) for m in BATCH_METRICS[name]]
    return db, metrics, [r.getMessage() for r in caplog.records]


V1 = [("id", "int64", False), ("note", "string", True)]
V2 = V1 + [("qty", "int32", True)]


def test_a_schema_change_between_micro_batches_evolves_the_table_and_each_batch_is_counted(spark, tmp_path, caplog):
    batches = [
        [(_key(1), _envelope(V1, {"id": 1, "note": "a"})), (_key(2), _envelope(V1, {"id": 2, "note": "b"}))],
        # the second micro-batch's messages carry a wider schema; key 1 is updated, key 3 is new
        [(_key(1), _envelope(V2, {"id": 1, "note": "a2", "qty": 5})), (_key(3), _envelope(V2, {"id": 3,
                                                                                              "note": None,
                                                                                              "qty": 7}))],
        # typed by the previous batch's schemas, in one pass
        [(_key(4), _envelope(V2, {"id": 4, "note": "d", "qty": 1})), (_key(2), _envelope(V2, {"id": 2,
                                                                                              "note": "b3",
                                                                                              "qty": 2}))],
    ]
    db, metrics, messages = _run(spark, tmp_path, caplog, "one-pass-orders", batches, **{"auto.evolve": "true"})
    with sqlite3.connect(db) as c:
        cols = [r[1] for r in c.execute('pragma table_info("orders")')]
        got = sorted(c.execute('select id, note, qty from "orders"'))
    assert cols == ["id", "note", "qty"]
    assert got == [(1, "a2", 5), (2, "b3", 2), (3, None, 7), (4, "d", 1)]
    assert metrics == [(0, 2, 0, 2), (1, 2, 0, 2), (2, 2, 0, 2)]
    # the first micro-batch, with no previous one, was typed by the schemas of its first messages in the router's
    # query; the second ran in the plain query typed by the first one's schemas, which its messages failed; the
    # router's query typed it from its messages again, and the third ran in a plain query typed by those
    assert [m for m in messages if "typed by the schemas of its first" in m] == [
        "one-pass-orders batch 0: typed by the schemas of its first 1000 messages",
        "one-pass-orders batch 1: typed by the schemas of its first 1000 messages"]
    assert sum("a message carries another schema" in m for m in messages) == 1
    assert sum("the next ones run in a plain streaming query" in m for m in messages) == 2


def test_a_first_batch_whose_later_message_carries_another_schema_is_typed_from_all_its_messages(
        spark, tmp_path, caplog, monkeypatch):
    """The first micro-batch is typed by its first messages (here: one); a message of another topic after them
    fails that write under the guard, and the batch is typed from every message: both tables, every row once."""
    from spark_connect_bridge.engine import pipeline

    monkeypatch.setattr(pipeline, "FIRST_MESSAGES", 1)
    item = json.dumps({"schema": {"type": "struct", "name": "shop.items.Value", "optional": False,
                                  "fields": [{"field": "sku", "type": "string", "optional": False}]},
                       "payload": {"sku": "x-1"}}).encode()
    batches = [[(_key(1), _envelope(V1, {"id": 1, "note": "a"})), (_key(7), item, "items"),
                (_key(2), _envelope(V1, {"id": 2, "note": "b"}))]]
    db, metrics, messages = _run(spark, tmp_path, caplog, "one-pass-first", batches, topics="orders,items")
    with sqlite3.connect(db) as c:
        orders = sorted(c.execute('select id, note from "orders"'))
        items = sorted(c.execute('select id, sku from "items"'))
    assert orders == [(1, "a"), (2, "b")] and items == [(7, "x-1")]
    assert metrics == [(0, 3, 0, 3)]
    assert any("batch 0: typed by the schemas of its first 1 messages" in m for m in messages)
    assert any("batch 0:" in m and "typed from its messages" in m for m in messages)


def test_a_tolerant_sink_retypes_a_changed_batch_and_counts_its_failed_record_once(spark, tmp_path, caplog):
    """errors.tolerance=all: the batch typed by the previous batch's schemas stops at its first job (the counts),
    before anything is written or dead-lettered; typed again from its messages, its bad record is counted once."""
    bad = json.dumps({"schema": {"type": "struct", "name": "shop.orders.Value", "optional": False,
                                 "fields": [{"field": "id", "type": "int64", "optional": False},
                                            {"field": "note", "type": "string", "optional": True},
                                            {"field": "qty", "type": "int32", "optional": True}]},
                      "payload": {"id": "not a number", "note": "x", "qty": 1}}).encode()
    batches = [
        [(_key(1), _envelope(V1, {"id": 1, "note": "a"}))],
        [(_key(2), _envelope(V2, {"id": 2, "note": "b", "qty": 3})), (_key(9), bad),
         (_key(3), _envelope(V2, {"id": 3, "note": "c", "qty": 4}))],
    ]
    db, metrics, messages = _run(spark, tmp_path, caplog, "one-pass-tolerant", batches,
                                 **{"auto.evolve": "true", "errors.tolerance": "all"})
    with sqlite3.connect(db) as c:
        got = sorted(c.execute('select id, note, qty from "orders"'))
    assert got == [(1, "a", None), (2, "b", 3), (3, "c", 4)]
    assert metrics == [(0, 1, 0, 1), (1, 3, 1, 2)]
    assert any("batch 1:" in m and "typed from its messages" in m for m in messages)


def _orders(first: int, count: int, fields: list[tuple[str, str, bool]] = V1) -> list[tuple]:
    extra = {"qty": 1} if fields is V2 else {}
    return [(_key(i), _envelope(fields, {"id": i, "note": f"n{i}", **extra})) for i in range(first, first + count)]


def test_the_plain_query_is_one_query_to_its_caller_and_a_restart_goes_on_from_the_checkpoint(spark, tmp_path):
    """While its schemas hold the sink runs as a plain streaming query (engine/schema_restarts.py): the caller
    keeps one query (one id, every run's progress, processAllAvailable, stop), and a new start on the same
    checkpoint writes only what came after."""
    from spark_connect_bridge.engine.schema_restarts import SchemaFollowingQuery

    stream = _one_file_per_batch(spark, tmp_path, [_orders(0, 3), _orders(3, 3), _orders(6, 3)])
    db = tmp_path / "mirror.db"
    config = {"name": "one-pass-runs", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "connection.url": f"jdbc:sqlite:{db}", "topics": "orders", "auto.create": "true",
              "insert.mode": "insert", "pk.mode": "none", "key.converter": JSON, "value.converter": JSON}
    q = write_stream(stream, config, checkpoint=str(tmp_path / "ckpt"), trigger={"processingTime": "100 milliseconds"})
    assert isinstance(q, SchemaFollowingQuery)
    first_id = q.id
    q.processAllAvailable()
    assert q.isActive and q.exception() is None
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"]] == [0, 1, 2]
    q.stop()
    assert not q.isActive and q.exception() is None
    spark.createDataFrame([(*m, "orders", 0, 9 + i, None, []) for i, m in enumerate(_orders(9, 2))],
                          record_schema(BinaryType(), BinaryType())).coalesce(1).write.parquet(
        str(tmp_path / "in" / "b3"))
    q = write_stream(stream, config, checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    q.awaitTermination()
    assert q.id == first_id and q.exception() is None
    with sqlite3.connect(db) as c:
        assert sorted(r[0] for r in c.execute('select id from "orders"')) == list(range(11))  # each row once


KILLED = '''
import json, logging, sys
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType
from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.engine.pipeline import write_stream
logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(message)s")
logging.getLogger("spark_connect_bridge.engine.schema_restarts").setLevel(logging.INFO)
src, config, ckpt, trigger = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").getOrCreate())
stream = (spark.readStream.schema(record_schema(BinaryType(), BinaryType())).option("maxFilesPerTrigger", 1)
          .parquet(src))
q = write_stream(stream, config, checkpoint=ckpt, trigger=trigger)
q.awaitTermination()
print("DONE", flush=True)
'''


def test_a_driver_killed_while_the_sink_changes_query_loses_and_doubles_nothing(spark, tmp_path):
    """kill -9 as the router's query hands over to the plain one, and again as a changed schema sends a
    micro-batch back to the router's query: restarted on the checkpoint each time, every record is in the table
    once (inserts without a key, so a batch written twice would show)."""
    import os
    import signal
    import subprocess
    import sys

    batches = [_orders(i * 50, 50, V1 if i < 6 else V2) for i in range(12)]
    _one_file_per_batch(spark, tmp_path, batches)
    db = tmp_path / "mirror.db"
    config = {"name": "one-pass-killed", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "connection.url": f"jdbc:sqlite:{db}", "topics": "orders", "auto.create": "true",
              "auto.evolve": "true", "insert.mode": "insert", "pk.mode": "none", "key.converter": JSON,
              "value.converter": JSON}
    script = tmp_path / "driver.py"
    script.write_text(KILLED)

    def run(trigger: dict, kill_at: int | None) -> str:
        """Run the driver; with ``kill_at``, SIGKILL it at its kill_at-th hand-over to a plain query."""
        args = [sys.executable, str(script), str(tmp_path / "in" / "*"), json.dumps(config), str(tmp_path / "ckpt"),
                json.dumps(trigger)]
        driver = subprocess.Popen(args, env={**os.environ, "PYSPARK_PYTHON": sys.executable}, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        seen, out = 0, []
        assert driver.stdout is not None
        for line in driver.stdout:
            out.append(line)
            seen += "run in a plain streaming query" in line
            if kill_at is not None and seen == kill_at:
                os.killpg(driver.pid, signal.SIGKILL)
                break
        driver.wait(timeout=300)
        return "".join(out)

    first = run({"processingTime": "200 milliseconds"}, kill_at=1)  # during the first hand-over
    assert "DONE" not in first
    second = run({"processingTime": "200 milliseconds"}, kill_at=2)  # the hand-over after the schema change
    assert "DONE" not in second and "a message carries another schema" in second
    assert "DONE" in run({"availableNow": True}, kill_at=None)
    with sqlite3.connect(db) as c:
        rows = sorted(c.execute('select id, qty from "orders"'))
    assert [r[0] for r in rows] == list(range(600))
    assert all(q is None for _, q in rows[:300]) and all(q == 1 for _, q in rows[300:])


def test_a_record_whose_error_quotes_the_switch_texts_fails_the_sink_once_and_writes_nothing_of_it(spark, tmp_path):
    """The attack: a message crafted so that its conversion error quotes the texts of a hand-over and of a changed
    schema. The plain query's failure on it sends the micro-batch back to the router's query (as a changed schema
    would), whose own write fails on it again; that failure is no hand-over (the router's own signal, not a text),
    so the sink fails naming the record, once, instead of switching queries around it; nothing of the micro-batch
    is written."""
    from spark_connect_bridge.converters.json_envelopes import SCHEMAS_CHANGED
    from spark_connect_bridge.engine.schema_restarts import HAND_OVER

    crafted = _envelope(V1, {"id": f"{HAND_OVER} {SCHEMAS_CHANGED}", "note": "x"})
    stream = _one_file_per_batch(spark, tmp_path, [_orders(0, 2), [(_key(5), crafted)] + _orders(6, 2)])
    config = {"name": "one-pass-crafted", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "connection.url": f"jdbc:sqlite:{tmp_path / 'mirror.db'}", "topics": "orders", "auto.create": "true",
              "insert.mode": "insert", "pk.mode": "none", "key.converter": JSON, "value.converter": JSON}
    q = write_stream(stream, config, checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    with pytest.raises(Exception) as failed:
        q.awaitTermination(240)  # a query switching around the record forever would time out here
    assert "topic=orders, partition=0, offset=2" in str(failed.value)  # the crafted record, named
    assert not q.isActive
    with sqlite3.connect(tmp_path / "mirror.db") as c:
        assert sorted(r[0] for r in c.execute('select id from "orders"')) == [0, 1]
