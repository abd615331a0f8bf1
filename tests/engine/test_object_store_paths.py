"""Our own paths on an object store (moto's S3 server, the run's shared one): Spark checkpoints
(offset.storage.dir's kind of directory) and Delta tables written and read by the delta-spark engine, all under
s3a:// URIs, with the credentials and endpoint given as a worker config gives them (spark.hadoop.fs.s3a.*); a bucket
that goes away fails the query naming the URI (never the secret) and loses nothing once it is back."""

from __future__ import annotations

import uuid

import pytest

from spark_connect_bridge.engine import delta_spark
from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server
from tests.support.tcp_proxy import TcpProxy


def s3a_settings(endpoint: str, bucket: str | None = None) -> dict[str, str]:
    """The Hadoop S3A settings a worker config gives as spark.hadoop.<key> (per bucket when ``bucket`` is given)."""
    scope = f"fs.s3a.bucket.{bucket}." if bucket else "fs.s3a."
    return {f"{scope}endpoint": endpoint, f"{scope}path.style.access": "true",
            f"{scope}endpoint.region": REGION, f"{scope}connection.ssl.enabled": "false",
            f"{scope}access.key": ACCESS_KEY, f"{scope}secret.key": SECRET_KEY,
            f"{scope}aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}


@pytest.fixture(scope="module")
def s3a(spark):
    """A fresh bucket on the run's S3 server, and its client; the session's Hadoop configuration reaches it as a
    worker config's spark.hadoop.fs.s3a.* keys would make it."""
    endpoint = servers.s3()
    client = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the shared server
    bucket = "paths-" + uuid.uuid4().hex[:10]
    client.create_bucket(bucket)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for k, v in s3a_settings(endpoint, bucket).items():
        hadoop.set(k, v)
    return bucket, client


def _lines_source(spark, path):
    return spark.readStream.format("kconnect").options(**{
        "connector.class": "FileStreamSource", "file": str(path), "topic": "lines"}).load()


def test_delta_spark_sink_and_source_with_their_checkpoints_in_the_bucket(spark, s3a, tmp_path):
    """FileStreamSource -> Delta sink (delta-spark) -> Delta source (delta-spark), every table and checkpoint an
    s3a:// URI: the second run resumes from the bucket's checkpoint (each line once in the table and downstream)."""
    bucket, client = s3a
    base = f"s3a://{bucket}/run"
    source = tmp_path / "in.txt"
    sink = {"connector.class": "delta-sink", "delta.table.path": f"{base}/table", "delta.engine": "delta-spark"}

    def run() -> None:
        delta_spark.write_stream(_lines_source(spark, source), sink, checkpoint=f"{base}/ckpt/sink",
                                 trigger={"availableNow": True}).awaitTermination()

    source.write_text("a\nb\n")
    run()
    source.write_text("a\nb\nc\n")
    run()
    table = spark.read.format("delta").load(f"{base}/table")
    assert sorted(r.value for r in table.collect()) == ["a", "b", "c"]
    names = client.objects(bucket, "run").keys()
    assert any(n.startswith("run/ckpt/sink/offsets/") for n in names), sorted(names)
    assert any(n.startswith("run/table/_delta_log/") for n in names), sorted(names)

    read = delta_spark.read_stream(spark, {"delta.table.path": f"{base}/table", "delta.engine": "delta-spark"})
    seen: list = []
    read.writeStream.foreachBatch(lambda df, _: seen.extend(df.collect())) \
        .option("checkpointLocation", f"{base}/ckpt/reader").trigger(availableNow=True).start().awaitTermination()
    assert sorted(r.value for r in seen) == ["a", "b", "c"]


def test_a_bucket_that_goes_away_fails_naming_the_uri_and_loses_nothing(spark, s3a, tmp_path):
    """The store becomes unreachable (a cut TCP proxy in front of the same moto server, which keeps its objects):
    the run fails with an error naming the s3a:// URI and not the secret; once the store is back, the next run
    writes what the failed one did not, and nothing twice."""
    _, client = s3a
    outage = "outage-" + uuid.uuid4().hex[:8]
    client.create_bucket(outage)
    with TcpProxy(client.port) as proxy:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        settings = s3a_settings(f"http://127.0.0.1:{proxy.port}", outage)
        settings.update({f"fs.s3a.bucket.{outage}.attempts.maximum": "1", f"fs.s3a.bucket.{outage}.retry.limit": "1",
                         f"fs.s3a.bucket.{outage}.retry.interval": "10ms",
                         f"fs.s3a.bucket.{outage}.connection.establish.timeout": "2s"})
        for k, v in settings.items():
            hadoop.set(k, v)
        base = f"s3a://{outage}/run"
        source = tmp_path / "in.txt"
        sink = {"connector.class": "delta-sink", "delta.table.path": f"{base}/table", "delta.engine": "delta-spark"}

        def run() -> None:
            delta_spark.write_stream(_lines_source(spark, source), sink, checkpoint=f"{base}/ckpt",
                                     trigger={"availableNow": True}).awaitTermination()

        source.write_text("a\nb\n")
        run()
        source.write_text("a\nb\nc\n")
        proxy.cut()
        with pytest.raises(Exception) as failure:
            run()
        assert f"s3a://{outage}/run" in str(failure.value), str(failure.value)[:2000]
        assert SECRET_KEY not in str(failure.value)
        proxy.restore()
        run()
        table = spark.read.format("delta").load(f"{base}/table")
        assert sorted(r.value for r in table.collect()) == ["a", "b", "c"]


def test_dead_letters_in_a_topic_store_in_the_bucket_are_written_once_across_a_replay(spark, s3a, tmp_path):
    """errors.tolerance=all with the dead-letter topic in a topic store in the bucket (a Parquet store): each
    micro-batch's failed records are one object named for the query and the batch; the last batch, replayed after
    its commit record is removed, writes the same object again, so every bad record is dead-lettered once."""
    import spark_connect_bridge as scb
    from spark_connect_bridge.engine.topic_store import TopicStore, session_locations

    bucket, client = s3a
    topics = f"s3a://{bucket}/dlq-run/topics"
    lines = [f'{{"id": {i}}}' if i % 10 != 3 else f'{{"id": {i}, ' for i in range(40)]  # ids 3, 13, 23, 33 bad
    source_file = tmp_path / "in.jsonl"
    source_file.write_text("".join(line + "\n" for line in lines))
    source = {"name": "lines", "connector.class": "FileStreamSource", "file": str(source_file), "topic": "orders",
              "value.converter": "org.apache.kafka.connect.storage.StringConverter", "max.records.per.trigger": "20"}
    sink = {"name": "orders-sink", "connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"),
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false", "value.converter.spark.schema": "id BIGINT",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-orders",
            "errors.deadletterqueue.topics.dir": topics, "errors.deadletterqueue.context.headers.enable": "true"}
    ckpt = tmp_path / "ckpt"

    def run() -> None:
        scb.write_stream(scb.read_stream(spark, source), sink, checkpoint=str(ckpt),
                         trigger={"availableNow": True}).awaitTermination()

    run()
    objects = sorted(client.objects(bucket, "dlq-run/topics/_dead_letters/topic=dlq-orders"))
    assert len(objects) == 2 and all(o.endswith((f"-{0:020d}.parquet", f"-{1:020d}.parquet")) for o in objects)
    last = max((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    run()  # the last batch again
    assert sorted(client.objects(bucket, "dlq-run/topics/_dead_letters/topic=dlq-orders")) == objects
    store = TopicStore(topics, files=session_locations(spark))
    dead = store.read_batch(spark, ["dlq-orders"]).collect()
    assert sorted(r.value.decode() for r in dead) == sorted(lines[i] for i in (3, 13, 23, 33))
    for r in dead:
        headers = {h.key: h.value.decode() for h in r.headers}
        assert r.topic == "dlq-orders" and headers["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert headers["__connect.errors.topic"] == "orders"
    written = (tmp_path / "out.txt").read_text().splitlines()
    assert len(written) == 36
