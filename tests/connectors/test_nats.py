"""Apache Camel's Kafka connector configs for NATS (the nats-source and nats-sink kamelets' keys) against a NATS server
with JetStream (Debian's nats-server, started by the run on 127.0.0.1): nats-py publishes and reads as a user's
service would; the source reads the stream by sequence and replays exactly from the checkpoint, so a restart and a
killed driver neither lose nor repeat a message; the sink waits for JetStream's publish acknowledgements."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from tests.support import servers
from tests.support.killed_driver import kill, start_driver

nats = pytest.importorskip("nats")

SOURCE = "org.apache.camel.kafkaconnector.natssource.CamelNatssourceSourceConnector"
SINK = "org.apache.camel.kafkaconnector.natssink.CamelNatssinkSinkConnector"


@pytest.fixture(scope="module")
def nats_url():
    return servers.nats()


def _run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


async def _stream(url, name, subjects):
    nc = await nats.connect(url)
    await nc.jetstream().add_stream(name=name, subjects=subjects)
    await nc.close()


async def _publish(url, subject, values, headers=None):
    nc = await nats.connect(url)
    js = nc.jetstream()
    acks = [await js.publish(subject, str(v).encode(), headers=headers) for v in values]
    await nc.close()
    return [a.seq for a in acks]


def _source(url, stream, subject, **extra):
    return {"connector.class": SOURCE, "name": f"nats-{stream}", "camel.kamelet.nats-source.servers": url,
            "camel.kamelet.nats-source.topic": subject, "camel.kamelet.nats-source.jetstreamEnabled": "true",
            "camel.kamelet.nats-source.jetstreamName": stream, "topics": "orders", **extra}


def _rows(spark, path):
    try:
        return spark.read.parquet(str(path)).collect()
    except Exception:  # noqa: BLE001 - no file committed yet
        return []


def _available_now(spark, config, out, ckpt):
    q = (spark.readStream.format("kconnect").options(**config).load().writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()


def test_source_reads_every_message_once_across_a_restart_and_acks_the_durable(spark, nats_url, tmp_path):
    stream = f"ORDERS_{uuid.uuid4().hex[:6]}"
    _run(_stream(nats_url, stream, ["orders.>", "audit.>"]))
    first = _run(_publish(nats_url, "orders.new", range(120), headers={"origin": "shop"}))
    _run(_publish(nats_url, "audit.log", range(5)))  # in the stream, not the subject read
    config = _source(nats_url, stream, "orders.>", **{"camel.source.maxBatchPollSize": "50",
                                                      "camel.source.camelMessageHeaderKey": "CamelNatsSubject"})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _available_now(spark, config, out, ckpt)
    second = _run(_publish(nats_url, "orders.paid", range(120, 200)))
    _available_now(spark, config, out, ckpt)  # the restart, from the checkpoint
    rows = _rows(spark, out)
    assert sorted(int(r.value) for r in rows) == list(range(200))  # each once: replayed by sequence
    assert sorted(r.offset for r in rows) == first + second
    sample = next(r for r in rows if r.value == b"7")
    headers = {h.key: h.value for h in sample.headers}
    assert headers == {"origin": b"shop", "CamelHeader.CamelNatsSubject": b"orders.new"}
    assert sample.key == "orders.new" and sample.topic == "orders" and sample.partition == 0
    assert all(r.timestamp is not None for r in rows)

    async def floor():
        nc = await nats.connect(nats_url)
        info = await nc.jetstream().consumer_info(stream, f"kconnect-nats-{stream}")
        await nc.close()
        return info.ack_floor.stream_seq, info.config.filter_subject

    # the durable consumer is acknowledged after Spark's commit: at least past every message the first query read
    # (the restarted query acknowledges its starting point), each later batch as it commits
    acked, subject = _run(floor())
    assert subject == "orders.>" and acked >= max(first), acked


def test_source_reads_each_message_once_through_the_durable_consumer(spark, nats_url, tmp_path):
    # a running query reads each batch through its durable consumer on the driver and hands it to the read task:
    # no read task opens a consumer of its own (an ephemeral consumer would outlive it by its 60 s inactivity
    # threshold), and the durable delivered every message once
    stream = f"ONCE_{uuid.uuid4().hex[:6]}"
    _run(_stream(nats_url, stream, ["once"]))
    seqs = _run(_publish(nats_url, "once", range(250)))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _available_now(spark, _source(nats_url, stream, "once", **{"max.records.per.trigger": "100"}), out, ckpt)
    rows = _rows(spark, out)
    assert sorted((r.offset, int(r.value)) for r in rows) == list(zip(seqs, range(250)))

    async def state():
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        info, durable = await js.stream_info(stream), await js.consumer_info(stream, f"kconnect-nats-{stream}")
        await nc.close()
        return info.state.consumer_count, durable.delivered.stream_seq, durable.num_redelivered

    assert _run(state()) == (1, seqs[-1], 0)


def _poll(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_source_neither_loses_nor_repeats_a_message_when_the_driver_is_killed(spark, nats_url, tmp_path):
    stream = f"KILLED_{uuid.uuid4().hex[:6]}"
    _run(_stream(nats_url, stream, ["killed"]))
    _run(_publish(nats_url, "killed", range(600)))
    config = _source(nats_url, stream, "killed", **{"max.records.per.trigger": "40"})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    driver = start_driver(config, out, ckpt, tmp_path)
    try:
        _poll(lambda: len(_rows(spark, out)) >= 120 or driver.poll() is not None, 300, "120 records before the kill")
        assert driver.poll() is None, "the driver exited"
    finally:
        kill(driver)  # the driver, its JVM and its Python workers, mid-stream
    before = len(_rows(spark, out))
    _run(_publish(nats_url, "killed", range(600, 700)))  # while it is down
    _available_now(spark, config, out, ckpt)  # the restart, on the same checkpoint
    values = [int(r.value) for r in _rows(spark, out)]
    assert before < 600 and sorted(values) == list(range(700))  # killed mid-stream; nothing lost, nothing twice


async def _collect(url, stream, n):
    nc = await nats.connect(url)
    sub = await nc.jetstream().pull_subscribe("alerts.>", stream=stream)
    got = []
    while len(got) < n:
        got += await sub.fetch(n - len(got), timeout=10)
    await nc.close()
    return [(m.subject, m.data.decode(), dict(m.headers or {})) for m in got]


def test_sink_publishes_every_value_with_jetstream_acks_and_headers(spark, nats_url):
    stream = f"ALERTS_{uuid.uuid4().hex[:6]}"
    _run(_stream(nats_url, stream, ["alerts.>"]))
    df = spark.sql("SELECT CAST(id AS STRING) AS value, "
                   "array(named_struct('key', 'level', 'value', CAST('high' AS BINARY))) AS headers "
                   "FROM range(300)")
    (df.write.format("kconnect").mode("append")
     .options(**{"connector.class": SINK, "camel.kamelet.nats-sink.servers": nats_url,
                 "camel.kamelet.nats-sink.topic": "alerts.fire", "camel.kamelet.nats-sink.jetstreamEnabled": "true",
                 "camel.kamelet.nats-sink.jetstreamName": stream}).save())
    got = _run(_collect(nats_url, stream, 300))
    assert sorted(int(v) for _, v, _ in got) == list(range(300))
    assert {s for s, _, _ in got} == {"alerts.fire"} and all(h.get("level") == "high" for *_, h in got)


def test_sink_fails_naming_the_subject_no_stream_stores(spark, nats_url):
    from spark_connect_bridge.connectors.factory import build_connector

    sink = build_connector({"connector.class": SINK, "camel.kamelet.nats-sink.servers": nats_url,
                            "camel.kamelet.nats-sink.topic": "nowhere.at.all",
                            "camel.kamelet.nats-sink.jetstreamEnabled": "true"})
    import pyarrow as pa

    batch = pa.RecordBatch.from_pydict({"value": [b"x"]})
    with pytest.raises(Exception, match=r"subject 'nowhere\.at\.all' \(camel\.kamelet\.nats-sink\.topic\)"):
        sink.write(iter([batch]), None)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("camel.kamelet.nats-source.jetstreamEnabled", "false", "core NATS keeps no message"),
    ("camel.kamelet.nats-source.jetstreamName", "", "must name the JetStream stream"),
    ("camel.kamelet.nats-source.topic", "", "Invalid value  for configuration camel.kamelet.nats-source.topic"),
    ("camel.kamelet.nats-source.jetstreamNam", "X", 'did you mean "camel.kamelet.nats-source.jetstreamName"?'),
])
def test_source_config_errors_name_the_key(key, value, message):
    from spark_connect_bridge.connectors.factory import build_connector
    from spark_connect_bridge.errors import ConfigError

    config = {**_source("nats://svc:s3cret-pw@127.0.0.1:4222", "S", "a"), key: value}
    with pytest.raises(ConfigError) as e:
        build_connector(config)
    assert message in str(e.value) and "s3cret-pw" not in str(e.value)


def test_an_unreachable_server_fails_naming_the_key_not_the_password():
    from spark_connect_bridge.connectors.factory import build_connector

    config = _source("nats://svc:s3cret-pw@127.0.0.1:1", "S", "a")
    with pytest.raises(Exception, match=r"camel\.kamelet\.nats-source\.servers") as e:
        build_connector(config).latest_offsets({}, None, None)
    assert "s3cret-pw" not in str(e.value) and "127.0.0.1:1" in str(e.value)


def test_a_rest_user_cannot_read_a_credentials_file_outside_the_allowed_paths(tmp_path):
    """The attack: a config over REST naming a file of the worker's machine as nats.credentials.file (to have the
    worker send it to a server of one's own) is refused by the worker's policy, naming the key; the servers URL with
    its password is masked in what the API shows."""
    from spark_connect_bridge.runtime.policy import ConnectorPolicy
    from spark_connect_bridge.runtime.secrets import mask_config

    allowed = tmp_path / "data"
    allowed.mkdir()
    policy = ConnectorPolicy(allowed_paths=(str(allowed),))
    evil = {**_source("nats://attacker.example:4222", "S", "a"), "nats.credentials.file": "/etc/shadow"}
    assert [p.key for p in policy.check(evil)] == ["nats.credentials.file"]
    (allowed / "svc.creds").write_text("-----BEGIN NATS USER JWT-----\n")
    assert policy.check({**evil, "nats.credentials.file": str(allowed / "svc.creds")}) == []
    shown = mask_config(_source("nats://svc:s3cret-pw@10.0.0.9:4222", "S", "a"))
    assert "s3cret-pw" not in json.dumps(shown)


def test_the_docs_nats_example_runs(spark, nats_url):
    """docs/tasks/brokers/nats.md's NATS block, as written, with ``nats_url`` the test's server."""
    from tests.test_readme import _located_blocks

    _run(_stream(nats_url, "SENSORS", ["sensors.>"]))
    _run(_publish(nats_url, "sensors.boiler", [71.5, 72.0]))
    blocks = _located_blocks("python", needs="nats")
    assert len(blocks) == 1
    page, block = blocks[0]
    namespace = {"spark": spark, "nats_url": nats_url}
    exec(compile(block, page, "exec"), namespace)
    assert sorted(tuple(r) for r in spark.table("sensor_readings").collect()) == [
        ("sensors.boiler", "71.5"), ("sensors.boiler", "72.0")]
