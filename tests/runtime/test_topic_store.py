"""The topic store: a source and several sinks through Delta tables (one per topic), each sink with its own
progress; the same records read back; the Parquet fallback."""

from __future__ import annotations

import datetime as dt

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from spark_connect_bridge.engine.topic_store import TopicStore
from spark_connect_bridge.errors import ConfigError, ConnectError

_ORDERS = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
           "max.interval": "0", "tasks.max": "2"}
_VALUE = "struct<ordertime:bigint,orderid:int,itemid:string,orderunits:double,address:struct<city:string," \
         "state:string,zipcode:bigint>>"


def _source(spark, iterations: int):
    """Datagen records as the source-side JSON converters leave them: binary key and value."""
    df = spark.readStream.format("kconnect").options(**_ORDERS, iterations=str(iterations)).load()
    return df.select(F.col("key").cast("string").cast("binary").alias("key"),
                     F.to_json("value").cast("binary").alias("value"), "topic", "partition", "offset", "timestamp",
                     "headers")


def _run_pipeline(spark, store, tmp_path, iterations):
    """The source and two sinks run together: a FileStreamSink and a Delta sink (value parsed back from JSON)."""
    sink_file = (store.read_stream(spark, topics=["orders"]).writeStream.format("kconnect")
                 .options(**{"connector.class": "FileStreamSink", "file": str(tmp_path / "orders.txt")})
                 .option("checkpointLocation", str(tmp_path / "ck-file")).trigger(processingTime="1 second").start())
    parsed = store.read_stream(spark, topics_regex="ord.*") \
        .withColumn("value", F.from_json(F.col("value").cast("string"), _VALUE))
    sink_delta = (parsed.writeStream.format("kconnect")
                  .options(**{"connector.class": "delta-sink", "delta.table.path": str(tmp_path / "mirror")})
                  .option("checkpointLocation", str(tmp_path / "ck-delta")).trigger(processingTime="1 second")
                  .start())
    try:
        store.write_stream(_source(spark, iterations), checkpoint=str(tmp_path / "ck-source"),
                           trigger={"availableNow": True}).awaitTermination()
        sink_file.processAllAvailable()
        sink_delta.processAllAvailable()
    finally:
        sink_file.stop()
        sink_delta.stop()


def test_one_source_feeds_two_sinks_each_with_its_own_progress(spark, tmp_path):
    store = TopicStore(str(tmp_path / "topics"))
    _run_pipeline(spark, store, tmp_path, 30)
    _run_pipeline(spark, store, tmp_path, 50)  # restarted on their checkpoints, with 40 new records
    expected = spark.read.format("kconnect").options(**_ORDERS, iterations="50").load()
    want_json = sorted(r[0] for r in expected.select(F.to_json("value")).collect())
    assert store.topics() == ["orders"]
    assert sorted((tmp_path / "orders.txt").read_text().splitlines()) == want_json
    mirror = spark.read.parquet(*DeltaTable(str(tmp_path / "mirror")).file_uris())
    assert mirror.count() == 100
    assert mirror.exceptAll(expected.select("value.*")).count() == 0
    # A new sink (a new checkpoint) replays the topic from the start.
    again = []
    (store.read_stream(spark, topics=["orders"]).writeStream
     .foreachBatch(lambda d, i: again.extend(r.offset for r in d.select("offset").collect()))
     .option("checkpointLocation", str(tmp_path / "ck-new")).trigger(availableNow=True).start()
     .awaitTermination())
    assert len(again) == 100


def test_records_read_back_as_they_were_written(spark, tmp_path):
    store = TopicStore(str(tmp_path / "topics"))
    ts = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    rows = [(b"k1", b"v1", "a.x", 0, 10, ts, [("h", b"1")]), (None, None, "a.y", 1, 11, ts, None),
            (b"k3", b"\x00\xff", "b", 2, 12, None, [])]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                     "timestamp timestamp, headers array<struct<key:string,value:binary>>")
    store.write_batch(df)
    assert store.topics() == ["a.x", "a.y", "b"]
    back = store.read_batch(spark)
    assert back.schema == df.schema
    assert sorted(map(tuple, back.collect()), key=str) == sorted(map(tuple, df.collect()), key=str)
    only_a = store.read_batch(spark, topics_regex=r"a\..*")
    assert sorted(r.topic for r in only_a.collect()) == ["a.x", "a.y"]
    # The dead-letter topic is a table of the store like any other.
    dlq = store.dead_letter_table("dlq-orders")
    assert dlq == str(tmp_path / "topics" / "dlq-orders")
    store.write_batch(df.limit(1).withColumn("topic", F.lit("dlq-orders")))
    assert store.read_batch(spark, topics=["dlq-orders"]).count() == 1
    assert DeltaTable(dlq).to_pyarrow_table().num_rows == 1


def test_a_topic_created_later_is_picked_up_by_a_running_reader(spark, tmp_path):
    store = TopicStore(str(tmp_path / "topics"))
    schema = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, " \
             "headers array<struct<key:string,value:binary>>"
    store.write_batch(spark.createDataFrame([(None, b"1", "t.one", 0, 0, None, None)], schema))
    seen = []
    q = (store.read_stream(spark, topics_regex=r"t\..*").writeStream
         .foreachBatch(lambda d, i: seen.extend((r.topic, r.value) for r in d.collect()))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="1 second").start())
    try:
        q.processAllAvailable()
        store.write_batch(spark.createDataFrame([(None, b"2", "t.two", 0, 0, None, None),
                                                 (None, b"x", "other", 0, 0, None, None)], schema))
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(seen) == [("t.one", b"1"), ("t.two", b"2")]


def test_parquet_fallback_without_deltalake(spark, tmp_path):
    store = TopicStore(str(tmp_path / "topics"), format="parquet")
    store.write_stream(_source(spark, 10), checkpoint=str(tmp_path / "ck"),
                       trigger={"availableNow": True}).awaitTermination()
    assert store.topics() == ["orders"]
    assert store.read_batch(spark, topics=["orders"]).count() == 20
    got = []
    (store.read_stream(spark, topics=["orders"]).writeStream
     .foreachBatch(lambda d, i: got.extend(r.offset for r in d.collect()))
     .option("checkpointLocation", str(tmp_path / "ck-read")).trigger(availableNow=True).start()
     .awaitTermination())
    assert sorted(got) == sorted(list(range(10)) * 2)


@pytest.mark.parametrize("topic", ["", "a/b", "..", "_hidden", "sp ace"])
def test_invalid_topic_names_are_refused(tmp_path, topic):
    with pytest.raises(ConfigError, match="Invalid topic"):
        TopicStore(str(tmp_path)).table_path(topic)


def test_the_store_needs_record_dataframes(spark, tmp_path):
    with pytest.raises(ConnectError, match="needs 'topic' and 'value' columns"):
        TopicStore(str(tmp_path)).write_batch(spark.range(1))
