"""Redis's own Kafka connector's configs (redis-kafka-connect) against a real Redis (Debian's redis-server, started by
the run on 127.0.0.1): the stream source read by entry id and replayed exactly, the sink's data structures."""

from __future__ import annotations

import time
import uuid

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.support import servers
from tests.support.killed_driver import kill, start_driver

SOURCE = "com.redis.kafka.connect.RedisStreamSourceConnector"
SINK = "com.redis.kafka.connect.RedisSinkConnector"


@pytest.fixture(scope="module")
def redis_uri():
    return servers.redis()


@pytest.fixture
def client(redis_uri):
    import redis

    c = redis.Redis.from_url(redis_uri)
    yield c
    c.close()


def _read(spark, config: dict, out, ckpt) -> None:
    df = spark.readStream.format("kconnect").options(**config).load()
    q = (df.selectExpr("key", "value.id AS id", "value.body AS body", "value.stream AS stream", "topic")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)


def test_the_source_reads_every_entry_once_across_a_restart_and_moves_the_group(spark, redis_uri, client, tmp_path):
    stream = f"orders-{uuid.uuid4().hex[:6]}"
    first = [client.xadd(stream, {"id": str(i), "item": f"thing {i}"}).decode() for i in range(250)]
    # Redis's README example: redis.uri, redis.stream.name, topic with ${stream}
    config = {"connector.class": SOURCE, "name": "redis-orders", "redis.uri": redis_uri,
              "redis.stream.name": stream, "topic": "redis_${stream}", "batch.size": "100"}
    _read(spark, config, tmp_path / "out", tmp_path / "ckpt")
    second = [client.xadd(stream, {"id": str(i), "item": f"thing {i}"}).decode() for i in range(250, 400)]
    _read(spark, config, tmp_path / "out", tmp_path / "ckpt")  # the restart from the checkpoint
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r["key"] for r in rows), key=lambda i: tuple(map(int, i.split("-")))) == first + second
    assert all(r["key"] == r["id"] and r["stream"] == stream and r["topic"] == f"redis_{stream}" for r in rows)
    assert {r["id"]: r["body"] for r in rows}[first[7]] == {"id": "7", "item": "thing 7"}
    # the consumer group stands at a committed batch's last entry: past the first run's (a batch's commit reaches the
    # group when Spark commits it or at the next trigger; Trigger.AvailableNow has none after its last batch)
    [group] = client.xinfo_groups(stream)
    position = group["last-delivered-id"].decode()
    assert group["name"] == b"kafka-consumer-group" and position in first + second
    assert (first + second).index(position) >= len(first) - 1


def test_a_new_query_starts_where_the_consumer_group_stands_or_at_the_offset(spark, redis_uri, client, tmp_path):
    stream = f"events-{uuid.uuid4().hex[:6]}"
    ids = [client.xadd(stream, {"n": str(i)}).decode() for i in range(10)]
    client.xgroup_create(stream, "billing", id=ids[5])
    config = {"connector.class": SOURCE, "redis.uri": redis_uri, "redis.stream.name": stream,
              "redis.stream.consumer.group": "billing"}
    _read(spark, config, tmp_path / "a", tmp_path / "ca")
    assert sorted(r["key"] for r in spark.read.parquet(str(tmp_path / "a")).collect()) == sorted(ids[6:])
    config = {**config, "redis.stream.consumer.group": "new-group", "redis.stream.offset": ids[7]}
    _read(spark, config, tmp_path / "b", tmp_path / "cb")
    assert sorted(r["key"] for r in spark.read.parquet(str(tmp_path / "b")).collect()) == sorted(ids[8:])


def test_the_source_neither_loses_nor_repeats_an_entry_when_the_driver_is_killed(spark, redis_uri, client,
                                                                                tmp_path):
    stream = f"killed-{uuid.uuid4().hex[:6]}"
    ids = [client.xadd(stream, {"n": str(i)}).decode() for i in range(600)]
    config = {"connector.class": SOURCE, "name": "redis-killed", "redis.uri": redis_uri, "redis.stream.name": stream,
              "max.records.per.trigger": "40"}
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def rows():
        try:
            return spark.read.parquet(str(out)).collect()
        except Exception:  # noqa: BLE001 - no file committed yet
            return []

    driver = start_driver(config, out, ckpt, tmp_path)
    try:
        deadline = time.monotonic() + 300
        while len(rows()) < 120 and driver.poll() is None:
            assert time.monotonic() < deadline, "timed out waiting for 120 records before the kill"
            time.sleep(0.2)
        assert driver.poll() is None, "the driver exited"
    finally:
        kill(driver)  # the driver, its JVM and its Python workers, mid-stream
    before = len(rows())
    ids += [client.xadd(stream, {"n": str(i)}).decode() for i in range(600, 700)]  # while it is down
    df = spark.readStream.format("kconnect").options(**config).load()  # the restart, on the same checkpoint
    q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    got = rows()
    # killed mid-stream; every entry once: read by id from the checkpoint, the parquet sink's log keeps a batch once
    assert before < 600 and sorted(int(r["value"]["body"]["n"]) for r in got) == list(range(700))
    assert sorted(r["key"] for r in got) == sorted(ids)


def _sink_frame(spark, rows, value_ddl: str):
    return spark.createDataFrame(rows, f"topic string, partition int, offset long, key string, value {value_ddl}")\
        .coalesce(1)


def _write(df, **config) -> None:
    df.write.format("kconnect").mode("append").options(**{"connector.class": SINK, **config}).save()


def test_the_sink_appends_struct_values_to_the_topic_s_stream(spark, redis_uri, client):
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    df = _sink_frame(spark, [(topic, 0, i, f"k{i}", (i, f"n{i}", i % 2 == 0)) for i in range(20)],
                     "struct<id:int,name:string,paid:boolean>")
    _write(df, **{"redis.uri": redis_uri})  # redis.command=XADD, redis.key=${topic}: the defaults
    entries = client.xrange(topic)
    assert [{k.decode(): v.decode() for k, v in e[1].items()} for e in entries] == [
        {"id": str(i), "name": f"n{i}", "paid": "true" if i % 2 == 0 else "false"} for i in range(20)]


def test_the_sink_sets_hashes_by_key_and_a_tombstone_deletes(spark, redis_uri, client):
    space = f"customers-{uuid.uuid4().hex[:6]}"
    df = _sink_frame(spark, [("c", 0, 0, "1", {"name": "Ann", "city": "Oslo"}), ("c", 0, 1, "2", {"name": "Bo"}),
                             ("c", 0, 2, "1", None)], "map<string,string>")
    _write(df, **{"redis.uri": redis_uri, "redis.command": "HSET", "redis.key": space})
    assert client.exists(f"{space}:1") == 0
    assert client.hgetall(f"{space}:2") == {b"name": b"Bo"}


def test_the_sink_sets_strings_and_set_members(spark, redis_uri, client):
    space = f"s-{uuid.uuid4().hex[:6]}"
    _write(_sink_frame(spark, [("t", 0, 0, "a", "x"), ("t", 0, 1, "b", "y")], "string"),
           **{"redis.uri": redis_uri, "redis.command": "SET", "redis.key": space, "redis.separator": "/"})
    assert (client.get(f"{space}/a"), client.get(f"{space}/b")) == (b"x", b"y")
    _write(_sink_frame(spark, [("t", 0, 0, "a", "1"), ("t", 0, 1, "b", "1"), ("t", 0, 2, "a", None)], "string"),
           **{"redis.uri": redis_uri, "redis.command": "SADD", "redis.key": f"{space}-set"})
    assert client.smembers(f"{space}-set") == {b"b"}
    _write(_sink_frame(spark, [("t", 0, 0, "a", 2.5), ("t", 0, 1, "b", 1.0)], "double"),
           **{"redis.uri": redis_uri, "redis.command": "ZADD", "redis.key": f"{space}-z", "redis.multiexec": "true"})
    assert client.zrange(f"{space}-z", 0, -1, withscores=True) == [(b"b", 1.0), (b"a", 2.5)]


def test_a_value_the_command_cannot_take_fails_naming_the_record(spark, redis_uri):
    with pytest.raises(Exception, match=r"topic 't' partition 0 offset 0.*must be a string or bytes"):
        _write(_sink_frame(spark, [("t", 0, 0, "a", 3)], "int"),
               **{"redis.uri": redis_uri, "redis.command": "SET"})


@pytest.mark.parametrize(("config", "key", "message"), [
    ({"redis.command": "JSONSET"}, "redis.command", "RedisJSON module"),
    ({"redis.command": "HSET", "redis.multiexec": "true"}, "redis.multiexec", "multi/exec is only supported"),
    ({"redis.cluster": "true"}, "redis.cluster", "not supported here"),
    ({"redis.insecure": "true"}, "redis.insecure", "refused"),
    ({"redis.uri": "http://h:6379"}, "redis.uri", "redis://"),
    ({"redis.charset": "klingon"}, "redis.charset", "Unknown character set"),
])
def test_sink_config_errors_name_the_key(config, key, message):
    with pytest.raises(ConfigError) as e:
        build_connector({"connector.class": SINK, "redis.password": "pw-s3cret", **config})
    assert key in str(e.value) and message in str(e.value) and "pw-s3cret" not in str(e.value)


def test_an_unreachable_server_fails_naming_the_key(spark):
    connector = build_connector({"connector.class": SOURCE, "redis.uri": "redis://127.0.0.1:1",
                                 "redis.stream.name": "s", "redis.timeout": "2"})
    with pytest.raises(Exception, match=r"redis\.uri"):
        connector.initial_offsets()


def test_a_rest_user_cannot_send_the_stored_password_to_another_server_or_read_files():
    from spark_connect_bridge.runtime.policy import ConnectorPolicy
    from spark_connect_bridge.runtime.secrets import mask_config, restore_masked

    stored = {"connector.class": SINK, "redis.uri": "redis://cache.internal:6379", "redis.password": "pw-s3cret"}
    shown = mask_config(stored)
    assert "pw-s3cret" not in str(shown)
    assert restore_masked(shown, stored)["redis.password"] == "pw-s3cret"
    for key, value in (("redis.uri", "redis://attacker.example:6379"), ("redis.host", "attacker.example")):
        with pytest.raises(ConfigError) as e:
            restore_masked({**shown, key: value}, stored)
        assert key in str(e.value) and "pw-s3cret" not in str(e.value)
    policy = ConnectorPolicy(allowed_paths=("/data",), forbidden_paths=())
    problems = policy.check({"connector.class": SINK, "redis.tls": "true", "redis.cacert": "/etc/shadow",
                             "redis.key.cert": "/root/.ssh/id_rsa", "redis.key.file": "/data/key.pem"})
    assert sorted(p.key for p in problems) == ["redis.cacert", "redis.key.cert"]


def test_the_docs_redis_example_runs(spark, redis_uri, client):
    """docs/tasks/brokers/redis.md's Redis block, as written, with ``redis_uri`` the test's Redis."""
    from tests.test_readme import _located_blocks

    client.delete("orders")
    client.xadd("orders", {"item": "pen"})
    client.xadd("orders", {"item": "ink"})
    [(page, block)] = _located_blocks("python", needs="redis")
    namespace = {"spark": spark, "redis_uri": redis_uri}
    exec(compile(block, page, "exec"), namespace)
    namespace["query"].awaitTermination(120)
    rows = spark.table("redis_orders").collect()
    assert sorted((r["item"], r["topic"]) for r in rows) == [("ink", "redis_orders"), ("pen", "redis_orders")]
