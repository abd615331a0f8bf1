"""errors.tolerance and the dead-letter sink over a whole source -> sink pipeline, with real data.

10,000 records, 1% malformed for the JsonConverter and 1% failing a Cast transform.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spark_connect_bridge as scb
from spark_connect_bridge.engine.pipeline import BATCH_METRICS
from spark_connect_bridge.engine.topic_store import TopicStore

N = 10_000


def _line(i: int) -> str:
    if i % 100 == 7:
        return f'{{"id": {i}, "amount": '  # malformed JSON
    if i % 100 == 42:
        return json.dumps({"id": i, "amount": "abc"})  # fails Cast amount:float64
    return json.dumps({"id": i, "amount": f"{i}.5"})


@pytest.fixture
def source(tmp_path: Path) -> dict:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(_line(i) + "\n" for i in range(N)))
    return {"name": "json-lines", "connector.class": "FileStreamSource", "file": str(path), "topic": "payments",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "max.records.per.trigger": "4000"}


def _sink(tmp_path: Path, **extra: str) -> dict:
    return {"name": "payments-sink", "connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"),
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false", "value.converter.spark.schema": "id BIGINT, amount STRING",
            "transforms": "cast", "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.cast.spec": "amount:float64", **extra}


def _run(spark, source: dict, sink: dict, ckpt: Path):
    q = scb.write_stream(scb.read_stream(spark, source), sink, checkpoint=str(ckpt),
                         trigger={"availableNow": True})
    q.awaitTermination()
    return q


def test_tolerance_all_routes_exactly_the_bad_records_to_the_dead_letter_topic(spark, source, tmp_path):
    topics = tmp_path / "topics"
    sink = _sink(tmp_path, **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-payments",
                              "errors.deadletterqueue.topics.dir": str(topics),
                              "errors.deadletterqueue.context.headers.enable": "true"})
    q = _run(spark, source, sink, tmp_path / "ckpt")
    # FileStreamSink writes the java.util.Map Kafka's JsonConverter makes of a schemaless object: {k=v, k2=v2}
    lines = (tmp_path / "out.txt").read_text().splitlines()
    good_ids = sorted(int(dict(kv.split("=") for kv in ln[1:-1].split(", "))["id"]) for ln in lines)
    assert good_ids == [i for i in range(N) if i % 100 not in (7, 42)]
    assert lines[0] == "{amount=0.5, id=0}"

    dlq = TopicStore(str(topics)).read_batch(spark, ["dlq-payments"]).collect()
    assert len(dlq) == 2 * N // 100
    by_offset = {}
    for r in dlq:
        h = {x.key: x.value.decode() for x in r.headers}
        by_offset[int(h["__connect.errors.offset"])] = (r, h)
    assert len(by_offset) == len(dlq)  # nothing doubled
    offsets = {}
    pos = 0
    for i in range(N):
        offsets[i] = pos
        pos += len(_line(i).encode()) + 1
    for i in range(N):
        if i % 100 not in (7, 42):
            continue
        r, h = by_offset[offsets[i]]
        assert r.value.decode() == _line(i)  # the original bytes, as they entered the pipeline
        assert r.topic == "dlq-payments"
        assert h["__connect.errors.topic"] == "payments" and h["__connect.errors.partition"] == "0"
        assert h["__connect.errors.connector.name"] == "payments-sink"
        if i % 100 == 7:
            assert h["__connect.errors.stage"] == "VALUE_CONVERTER"
            assert "JsonConverter" in h["__connect.errors.class.name"]
        else:
            assert h["__connect.errors.stage"] == "TRANSFORMATION"
            assert h["__connect.errors.class.name"] == "org.apache.kafka.connect.transforms.Cast$Value"
            assert "cast" in h["__connect.errors.exception.message"]
        assert h["__connect.errors.exception.class.name"] and h["__connect.errors.exception.stacktrace"]

    batches = list(BATCH_METRICS["payments-sink"])
    assert sum(b["records"] for b in batches) == N
    assert sum(b["dead_lettered"] for b in batches) == 200 and sum(b["written"] for b in batches) == N - 200
    observed = [p["observedMetrics"]["kconnect"] for p in q.recentProgress if p.get("observedMetrics")]
    assert sum(m["records"] for m in observed) == N and sum(m["failed"] for m in observed) == 200


def test_replayed_batch_dead_letters_nothing_twice(spark, source, tmp_path):
    topics = tmp_path / "topics"
    sink = _sink(tmp_path, **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
                              "errors.deadletterqueue.topics.dir": str(topics)})
    ckpt = tmp_path / "ckpt"
    _run(spark, source, sink, ckpt)
    last = max((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    _run(spark, source, sink, ckpt)
    assert TopicStore(str(topics)).read_batch(spark, ["dlq"]).count() == 200
    assert len((tmp_path / "out.txt").read_text().splitlines()) == N - 200


def test_tolerance_none_fails_naming_the_stage_and_the_record(spark, source, tmp_path):
    with pytest.raises(Exception) as info:
        _run(spark, source, _sink(tmp_path), tmp_path / "ckpt")
    msg = str(info.value)
    assert "VALUE_CONVERTER" in msg and "topic=payments" in msg and "partition=0" in msg and "offset=" in msg


def test_source_side_failures_go_to_the_source_dead_letter_topic(spark, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"{v}\n" for v in ["1", "2", "x", "4", "y"]))
    topics = tmp_path / "topics"
    src = {"name": "numbers", "connector.class": "FileStreamSource", "file": str(path), "topic": "numbers",
           "transforms": "cast", "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "int32",
           "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "numbers-dlq",
           "errors.deadletterqueue.topics.dir": str(topics)}
    q = scb.engine.pipeline.write_topic_store(scb.read_stream(spark, src), str(topics), checkpoint=str(tmp_path / "ck"),
                                       trigger={"availableNow": True})
    q.awaitTermination()
    store = TopicStore(str(topics))
    assert sorted(r.value for r in store.read_batch(spark, ["numbers"]).collect()) == [1, 2, 4]
    assert sorted(r.value.decode() for r in store.read_batch(spark, ["numbers-dlq"]).collect()) == ["x", "y"]


def test_bad_errors_config_fails_before_data_moves(spark, source, tmp_path):
    with pytest.raises(scb.ConfigError) as info:
        scb.write_stream(scb.read_stream(spark, source),
                         _sink(tmp_path, **{"errors.tolerance": "some", "errors.deadletterqueue.topic.name": "d"}),
                         checkpoint=str(tmp_path / "ck"))
    assert set(info.value.keys) >= {"errors.tolerance"}


def test_dead_letter_credentials_stay_out_of_the_dataframe_schema(spark, tmp_path):
    """The error policy rides on the error column's metadata, which anyone holding the DataFrame can print: the
    dead-letter producer's SASL settings and a dead-letter sink's password are referenced, not embedded."""
    path = tmp_path / "in.txt"
    path.write_text("1\nx\n")
    src = {"name": "numbers", "connector.class": "FileStreamSource", "file": str(path), "topic": "numbers",
           "transforms": "cast", "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "int32",
           "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "numbers-dlq"}
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret-kafka";'
    df = scb.read_stream(spark, src, dead_letter_kafka={"kafka.bootstrap.servers": "127.0.0.1:9",
                                                         "kafka.sasl.jaas.config": jaas})
    assert "s3cret" not in df.schema.json()
    policy = scb.engine.dead_letter.attached_policy(df)
    assert dict(policy.dlq_kafka)["kafka.sasl.jaas.config"] == jaas
    sink_dlq = {**src, "errors.deadletterqueue.sink.connector.class": "JdbcSinkConnector",
                "errors.deadletterqueue.sink.connection.url": "jdbc:postgresql://127.0.0.1:9/db",
                "errors.deadletterqueue.sink.connection.password": "s3cret-db"}
    df = scb.read_stream(spark, sink_dlq)
    assert "s3cret" not in df.schema.json()
    assert dict(scb.engine.dead_letter.attached_policy(df).dlq_sink)["connection.password"] == "s3cret-db"
