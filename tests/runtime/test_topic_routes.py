"""A record that no sink takes is never lost in silence: a sink whose topics cannot match anything the source
writes is a config error before data moves; records of other topics are counted and warned about per batch."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys

import pytest

from spark_connect_bridge.engine.pipeline import check_routes, read_stream, unmatched_records, write_stream
from spark_connect_bridge.errors import ConfigError
from tests.runtime.worker_helpers import wait_for

ROUTER = {"transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
          "transforms.route.regex": "(.*)", "transforms.route.replacement": "archive-$1"}


def _file_source(path, **extra: str) -> dict[str, str]:
    return {"name": "local-file-source", "connector.class": "FileStreamSource", "file": str(path),
            "topic": "connect-test", **extra}


def _file_sink(path, **extra: str) -> dict[str, str]:
    return {"name": "local-file-sink", "connector.class": "FileStreamSink", "file": str(path), **extra}


def test_a_sink_whose_topics_the_routed_source_never_writes_is_a_config_error(spark, tmp_path):
    with pytest.raises(ConfigError) as err:
        check_routes(spark, {**_file_source(tmp_path / "in.txt"), **ROUTER},
                     [_file_sink(tmp_path / "out.txt", topics="connect-test")])
    message = str(err.value)
    assert "topics" in message and "local-file-sink would take no record" in message
    assert "writes only to archive-connect-test (after its transforms)" in message


@pytest.mark.parametrize("sink_topics", [{"topics": "archive-connect-test"}, {"topics.regex": "archive-.*"},
                                         {"topics": "other,archive-connect-test"}, {}])
def test_sinks_that_take_the_routed_topic_are_accepted(spark, tmp_path, sink_topics):
    check_routes(spark, {**_file_source(tmp_path / "in.txt"), **ROUTER},
                 [_file_sink(tmp_path / "out.txt", **sink_topics)])


def test_a_regex_that_matches_nothing_is_a_config_error(spark, tmp_path):
    with pytest.raises(ConfigError, match=r"topics.regex"):
        check_routes(spark, _file_source(tmp_path / "in.txt"),
                     [_file_sink(tmp_path / "out.txt", **{"topics.regex": "connect-(prod|dev)"})])


def _shop(tmp_path) -> dict[str, str]:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as c:
        c.executescript("create table orders (id integer primary key, item text);"
                        "create table refunds (id integer primary key, item text);"
                        "insert into orders values (1, 'tea'), (2, 'jam');"
                        "insert into refunds values (1, 'tea'), (2, 'jam'), (3, 'cake');")
    source = {"name": "shop", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": f"jdbc:sqlite:{db}", "mode": "bulk", "topic.prefix": "sqlite-",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}
    return source


# The sink's own transforms run after its subscription, as in Kafka Connect: a RegexRouter there renames the
# records the sink takes (by the topic they were read from) and does not make it drop them. A config that carries
# the pipeline's own option saying "only subscribed topics here" does not turn the selection off.
@pytest.mark.parametrize("sink_extra", [{}, ROUTER, {**ROUTER, "errors.tolerance": "all"},
                                        {"kconnect.topics.subscribed": "true"}],
                         ids=["plain", "sink-router", "sink-router-tolerant", "config-claims-subscribed"])
def test_records_of_other_topics_are_counted_not_dropped_in_silence(spark, tmp_path, sink_extra):
    source = _shop(tmp_path)
    out = tmp_path / "orders.txt"
    sink = _file_sink(out, topics="sqlite-orders", **sink_extra)
    check_routes(spark, source, [sink])  # table topics: known per batch only
    q = write_stream(read_stream(spark, source), sink, checkpoint=str(tmp_path / "ckpt"),
                     trigger={"availableNow": True})
    q.awaitTermination(300)
    assert q.exception() is None
    assert out.read_text().splitlines() == ['{"id":1,"item":"tea"}', '{"id":2,"item":"jam"}']
    assert unmatched_records(q) == 3  # the three refunds: counted, reported by `kconnect run`, warned in the log


def test_kconnect_run_refuses_a_sink_that_takes_nothing(tmp_path):
    (tmp_path / "in.txt").write_text("one\n")
    src, sink = tmp_path / "source.properties", tmp_path / "sink.properties"
    src.write_text("".join(f"{k}={v}\n" for k, v in {**_file_source(tmp_path / "in.txt"), **ROUTER}.items()))
    sink.write_text("".join(f"{k}={v}\n" for k, v in _file_sink(tmp_path / "out.txt",
                                                               topics="connect-test").items()))
    r = subprocess.run([sys.executable, "-m", "spark_connect_bridge.cli", "run", str(src), str(sink), "--once",
                        "--checkpoint-dir", str(tmp_path / "ckpt")], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path)
    assert r.returncode != 0
    assert "local-file-sink would take no record" in r.stdout + r.stderr
    assert not (tmp_path / "out.txt").exists()


def test_a_worker_sink_waiting_for_a_topic_nobody_writes_says_so(start_worker, tmp_path, caplog):
    worker, api = start_worker()
    (tmp_path / "in.txt").write_text("one\n")
    with caplog.at_level(logging.WARNING, logger="spark_connect_bridge.runtime.worker"):
        assert api.call("PUT", "/connectors/local-file-source/config",
                        {**_file_source(tmp_path / "in.txt"), **ROUTER}).status_code == 201
        assert api.call("PUT", "/connectors/local-file-sink/config",
                        _file_sink(tmp_path / "out.txt", topics="connect-test")).status_code == 201
        status = wait_for(lambda: (s := api.get("/connectors/local-file-sink/status"))["metrics"]
                          .get("waiting_for_topics") and s, what="the sink waiting for its topic")
        wait_for(lambda: "archive-connect-test" in worker.service.worker.store.topics(), what="the routed topic")
    assert status["connector"]["state"] == "RUNNING"
    assert any("local-file-sink waits: no topic of the topic store matches its topics (connect-test)"
               in r.getMessage() for r in caplog.records)
    assert api.get("/connectors/local-file-sink/status")["metrics"]["waiting_for_topics"] is True
    assert not (tmp_path / "out.txt").exists()
