"""Sink connectors on Kafka topics: Spark's Kafka source, then converters, transforms, errors.* and the
connector; dead letters to a Kafka topic; positions in the consumer group connect-<name>; restarts."""

from __future__ import annotations

import json

import pytest

from spark_connect_bridge.bus.kafka import sink_stream
from spark_connect_bridge.engine.pipeline import unmatched_records
from spark_connect_bridge.errors import ConfigError
from tests.kafka.conftest import consume, describe_group, produce
from tests.runtime.worker_helpers import lines, wait_for


def file_sink(name: str, topic: str, out, **extra: str) -> dict[str, str]:
    """A FileStreamSink reading JSON values (schemaless, as Kafka Connect users write them) and keeping their
    ``name`` field."""
    return {"name": name, "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "topics": topic, "file": str(out),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false", "value.converter.spark.schema": "id BIGINT, name STRING",
            "transforms": "name", "transforms.name.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
            "transforms.name.field": "name", **extra}


def run_once(spark, config, bootstrap, checkpoint) -> None:
    query = sink_stream(spark, config, bus=bootstrap, checkpoint=str(checkpoint), trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def orders(ids) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), json.dumps({"id": i, "name": f"order-{i}"}).encode()) for i in ids]


def test_a_sink_reads_its_kafka_topic_and_restarts_from_its_checkpoint_with_nothing_lost(spark, bootstrap,
                                                                                           topic_name, tmp_path):
    topic, out = topic_name("orders"), tmp_path / "orders.txt"
    produce(bootstrap, topic, orders(range(6)))
    run_once(spark, file_sink("orders-file", topic, out), bootstrap, tmp_path / "ckpt")
    assert lines(out) == [f"order-{i}" for i in range(6)]
    produce(bootstrap, topic, orders(range(6, 10)))
    run_once(spark, file_sink("orders-file", topic, out), bootstrap, tmp_path / "ckpt")
    assert lines(out) == [f"order-{i}" for i in range(10)]


def test_consumed_positions_are_committed_to_consumer_group_connect_name(spark, bootstrap, topic_name, tmp_path):
    topic = topic_name("lagged")
    produce(bootstrap, topic, orders(range(8)))
    run_once(spark, file_sink("lag-file", topic, tmp_path / "out.txt"), bootstrap, tmp_path / "ckpt")
    # The listener commits once Spark's progress event (after the commit log) arrives.
    assert wait_for(lambda: describe_group(bootstrap, "connect-lag-file").get((topic, 0)) == (8, 8, 0),
                    what="group connect-lag-file at offset 8")
    produce(bootstrap, topic, orders(range(8, 13)))
    assert describe_group(bootstrap, "connect-lag-file")[(topic, 0)] == (8, 13, 5)


def test_dead_letters_reach_the_kafka_dlq_topic_with_the_consumed_bytes_and_context_headers(
        spark, bootstrap, topic_name, tmp_path):
    topic, dlq, out = topic_name("payments"), topic_name("dlq-payments"), tmp_path / "payments.txt"
    sent = [(b"k0", b'{"id": 0, "name": "p0"}', [("trace", b"t0")]),
            (b"k1", b"not json {", [("trace", b"t1")]),
            (b"k2", b'{"id": 2, "name": "p2"}', [("trace", b"t2")]),
            (None, b"\x00\x01binary", [("trace", b"t3")])]
    produce(bootstrap, topic, sent)
    config = file_sink("payments-file", topic, out, **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"})
    run_once(spark, config, bootstrap, tmp_path / "ckpt")
    assert lines(out) == ["p0", "p2"]
    dead = sorted(consume(bootstrap, dlq, 2), key=lambda m: int(dict(m.headers())["__connect.errors.offset"]))
    for msg, (offset, (key, value, headers)) in zip(dead, [(1, sent[1]), (3, sent[3])]):
        assert msg.key() == key and msg.value() == value
        got = msg.headers()
        assert got[0] == ("trace", headers[0][1])  # the consumed headers first, as Kafka Connect keeps them
        ctx = dict(got[1:])
        assert ctx["__connect.errors.topic"] == topic.encode()
        assert ctx["__connect.errors.partition"] == b"0"
        assert ctx["__connect.errors.offset"] == str(offset).encode()
        assert ctx["__connect.errors.connector.name"] == b"payments-file"
        assert ctx["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert ctx["__connect.errors.class.name"] == b"org.apache.kafka.connect.json.JsonConverter"
        assert ctx["__connect.errors.exception.class.name"] == b"org.apache.kafka.connect.errors.DataException"
        assert ctx["__connect.errors.exception.message"] and ctx["__connect.errors.exception.stacktrace"]
        assert ctx["__connect.errors.task.id"].isdigit()
    assert len(dead) == 2


def test_consumer_overrides_spark_cannot_apply_fail_before_any_data_moves(spark, bootstrap, tmp_path):
    config = file_sink("bad", "orders", tmp_path / "x.txt", **{"consumer.override.enable.auto.commit": "true",
                                                               "consumer.override.max.poll.records": "10"})
    with pytest.raises(ConfigError) as e:
        sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"))
    assert [p.key for p in e.value.problems] == ["consumer.override.enable.auto.commit"]
    assert not (tmp_path / "ckpt").exists()


def test_a_sink_without_topics_is_a_config_error(spark, bootstrap, tmp_path):
    config = file_sink("no-topics", "", tmp_path / "x.txt")
    with pytest.raises(ConfigError, match=r"Must configure one of topics or topics.regex"):
        sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"))


def test_records_without_headers_reach_the_sink_with_an_empty_header_list(spark, bootstrap, topic_name, tmp_path):
    """Spark's Kafka source gives them a null list; a Kafka Connect record always has one (maybe empty), and null
    lists would make the hand-off to a Python sink quadratic per Arrow batch."""
    topic, table = topic_name("bare"), tmp_path / "bare"
    produce(bootstrap, topic, [(b"k0", b"v0"), (b"k1", b"v1", [("h", b"x")])])
    run_once(spark, {"name": "bare-delta", "connector.class": "DeltaSinkConnector", "topics": topic,
                     "delta.table.path": str(table), "delta.table.columns": "record"}, bootstrap, tmp_path / "ckpt")
    rows = spark.read.format("delta").load(str(table)).orderBy("offset").collect()
    assert [[(h.key, bytes(h.value)) for h in r.headers] for r in rows] == [[], [("h", b"x")]]


def test_records_a_regex_subscription_read_are_all_written_after_a_router_renames_their_topics(
        spark, bootstrap, topic_name, tmp_path):
    """Spark's Kafka source reads only the topics matching ``topics.regex`` (Kafka's own matching), so the
    pipeline selects nothing by topic again: records whose topic a RegexRouter renamed to one the regex does not
    match are written, and none is counted as unmatched."""
    base = topic_name("sub")
    first, second, out = f"{base}-a", f"{base}-b", tmp_path / "routed.txt"
    produce(bootstrap, first, orders(range(3)))
    produce(bootstrap, second, orders(range(3, 5)))
    config = file_sink("routed-file", "", out, **{
        "topics.regex": f"{base}-.*", "transforms": "name,route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": ".*", "transforms.route.replacement": "renamed"})
    query = sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                        trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert sorted(lines(out)) == [f"order-{i}" for i in range(5)]
    assert unmatched_records(query) == 0
    counts = query.lastProgress["observedMetrics"]["kconnect"]
    assert "unmatched" not in (counts.asDict() if hasattr(counts, "asDict") else dict(counts))


def _enveloped(name: str, fields: list[tuple[str, str]], payload: dict) -> bytes:
    schema = {"type": "struct", "name": name, "optional": False,
              "fields": [{"field": f, "type": t, "optional": f != "id"} for f, t in fields]}
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_a_batch_whose_messages_change_schema_is_typed_again_and_each_task_commits_its_rows_once(
        spark, bootstrap, topic_name, tmp_path, caplog):
    """A JDBC sink typed from its messages writes a micro-batch typed by the previous batch's schemas; when one
    topic's messages change schema, that write fails in the task reading them while the other topic's task may
    already have committed its rows (commit.scope=task, PostgreSQL): the batch typed again from its messages
    writes the changed topic's rows and skips the committed task's. Every row lands once, with its new column."""
    import logging
    import time

    from spark_connect_bridge.engine.pipeline import BATCH_METRICS
    from tests.connectors.jdbc_support import ensure_postgres, pg_conn, pg_url

    ensure_postgres()
    db = "kc_retype_" + topic_name("db").split("-")[1]
    with pg_conn("test") as c:
        c.execute(f'CREATE DATABASE "{db}"')
    a, b = topic_name("orders"), topic_name("items")
    v1 = [("id", "int64"), ("note", "string")]
    v2 = v1 + [("qty", "int32")]
    produce(bootstrap, a, [(None, _enveloped("a.Value", v1, {"id": i, "note": f"a{i}"})) for i in range(3)])
    produce(bootstrap, b, [(None, _enveloped("b.Value", v1, {"id": i, "note": f"b{i}"})) for i in range(3)])
    name = "retype-" + a
    config = {"name": name, "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "connection.url": pg_url(db), "topics": f"{a},{b}", "auto.create": "true", "auto.evolve": "true",
              "insert.mode": "insert", "commit.scope": "task",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    for logger in ("spark_connect_bridge.engine.pipeline", "spark_connect_bridge.engine.schema_restarts"):
        caplog.set_level(logging.INFO, logger=logger)
    BATCH_METRICS.pop(name, None)
    query = sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                        trigger={"processingTime": "1 second"})
    try:
        wait_for(lambda: sum(m["written"] for m in BATCH_METRICS[name]) == 6, timeout=120)
        produce(bootstrap, a, [(None, _enveloped("a.Value", v1, {"id": i, "note": f"a{i}"})) for i in range(3, 6)])
        produce(bootstrap, b, [(None, _enveloped("b.Value", v2, {"id": i, "note": f"b{i}", "qty": i}))
                               for i in range(3, 6)])
        wait_for(lambda: sum(m["written"] for m in BATCH_METRICS[name]) == 12 or query.exception(), timeout=120)
        time.sleep(1)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    with pg_conn(db) as c:
        got_a = c.execute(f'SELECT id, note FROM "{a}" ORDER BY id').fetchall()
        got_b = c.execute(f'SELECT id, note, qty FROM "{b}" ORDER BY id').fetchall()
    assert got_a == [(i, f"a{i}") for i in range(6)]
    assert got_b == [(i, f"b{i}", None) for i in range(3)] + [(i, f"b{i}", i) for i in range(3, 6)]
    # the second records may come in one micro-batch or two (the trigger can fire between the two topics' writes)
    assert sum(m["written"] for m in BATCH_METRICS[name]) == 12 and all(not m["failed"] for m in BATCH_METRICS[name])
    # typed again in the router's query (the plain query it had handed over to failed at the changed schema)
    assert any("a message carries another schema" in r.getMessage() for r in caplog.records)
    with pg_conn("test") as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
