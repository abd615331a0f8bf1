"""Interop with other Kafka applications: confluent-kafka producers with Confluent's AvroSerializer and
JSONSerializer feed a sink connector; a source connector's Avro or JSON Schema topic is read back with
AvroDeserializer or JSONDeserializer. Keys, headers and tombstones survive."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
from confluent_kafka import DeserializingConsumer, SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import StringDeserializer, StringSerializer
from deltalake import write_deltalake
from pyspark.sql.types import StringType, _parse_datatype_string

from spark_connect_bridge.bus.kafka import sink_stream, source_stream
from spark_connect_bridge.core.records import arrow_schema, record_schema
from spark_connect_bridge.engine.pipeline import read_batch
from tests.kafka.conftest import consume, produce

PAYMENT = """{"type": "record", "name": "Payment", "namespace": "shop",
  "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
             {"name": "note", "type": ["null", "string"], "default": null}]}"""


def test_an_avro_topic_written_by_confluent_s_serializer_feeds_a_sink_with_keys_headers_and_tombstones(
        spark, bootstrap, registry, topic_name, tmp_path):
    topic, table = topic_name("payments"), tmp_path / "payments"
    client = SchemaRegistryClient({"url": registry.url})
    producer = SerializingProducer({"bootstrap.servers": bootstrap, "key.serializer": StringSerializer(),
                                    "value.serializer": AvroSerializer(client, PAYMENT)})
    sent = [("p1", {"id": 1, "amount": 9.5, "note": "first"}, [("source", b"web")]),
            ("p2", {"id": 2, "amount": 20.0, "note": None}, [("source", b"pos"), ("retry", b"1")]),
            ("p1", None, [("source", b"web")])]  # a tombstone for key p1
    produce(bootstrap, topic, sent, serializer=producer)
    config = {"name": "payments-delta", "connector.class": "DeltaSinkConnector", "topics": topic,
              "delta.table.path": str(table), "delta.table.columns": "record",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "io.confluent.connect.avro.AvroConverter",
              "value.converter.schema.registry.url": registry.url}
    query = sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                        trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    rows = spark.read.format("delta").load(str(table)).orderBy("offset").collect()
    got = [(r.key, r.value.asDict() if r.value is not None else None, [(h.key, bytes(h.value)) for h in r.headers])
           for r in rows]
    assert got == [(k, v, h) for k, v, h in sent]
    assert [(r.topic, r.partition, r.offset) for r in rows] == [(topic, 0, 0), (topic, 0, 1), (topic, 0, 2)]


def test_a_source_s_avro_topic_is_read_back_by_confluent_s_avro_deserializer(spark, bootstrap, registry,
                                                                               topic_name, tmp_path):
    topic = topic_name("users")
    config = {"name": f"users-{topic}", "connector.class": "DatagenConnector", "kafka.topic": topic,
              "quickstart": "users", "iterations": "12", "max.interval": "0",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "io.confluent.connect.avro.AvroConverter",
              "value.converter.schema.registry.url": registry.url,
              "transforms": "h", "transforms.h.type": "org.apache.kafka.connect.transforms.InsertHeader",
              "transforms.h.header": "app", "transforms.h.value.literal": "kconnect"}
    query = source_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                          trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()

    client = SchemaRegistryClient({"url": registry.url})

    def avro_consumer(conf):
        return DeserializingConsumer({**conf, "key.deserializer": StringDeserializer(),
                                      "value.deserializer": AvroDeserializer(client)})

    got = consume(bootstrap, topic, 12, deserializing=avro_consumer)
    typed = {k: v for k, v in config.items() if not k.startswith(("value.converter", "key.converter"))}
    expected = [(str(r.key), r.value.asDict()) for r in read_batch(spark, typed).collect()]

    def in_order(pairs):
        return sorted(pairs, key=lambda kv: json.dumps(kv, sort_keys=True, default=str))

    assert in_order((m.key(), m.value()) for m in got) == in_order(expected)
    assert all(m.headers() == [("app", b"kconnect")] for m in got)


# -- JSON Schema (io.confluent.connect.json.JsonSchemaConverter) --------------------------------------------------

JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
PAYMENT_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
    "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}, "note": {"type": ["string", "null"]}},
    "required": ["id", "amount"]})


def test_a_json_schema_topic_written_by_confluent_s_serializer_feeds_a_sink_with_keys_headers_and_tombstones(
        spark, bootstrap, registry, topic_name, tmp_path):
    topic, table = topic_name("payments-js"), tmp_path / "payments"
    client = SchemaRegistryClient({"url": registry.url})
    producer = SerializingProducer({"bootstrap.servers": bootstrap,
                                    "key.serializer": JSONSerializer('{"type": "string"}', client),
                                    "value.serializer": JSONSerializer(PAYMENT_JSON, client)})
    sent = [("p1", {"id": 1, "amount": 9.5, "note": "first"}, [("source", b"web")]),
            ("p2", {"id": 2, "amount": 20.0, "note": None}, [("source", b"pos"), ("retry", b"1")]),
            ("p1", None, [("source", b"web")])]  # a tombstone for key p1
    produce(bootstrap, topic, sent, serializer=producer)
    config = {"name": "payments-js-delta", "connector.class": "DeltaSinkConnector", "topics": topic,
              "delta.table.path": str(table), "delta.table.columns": "record",
              "key.converter": JSON_SCHEMA, "key.converter.schema.registry.url": registry.url,
              "value.converter": JSON_SCHEMA, "value.converter.schema.registry.url": registry.url}
    query = sink_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                        trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    rows = spark.read.format("delta").load(str(table)).orderBy("offset").collect()
    got = [(r.key, r.value.asDict() if r.value is not None else None, [(h.key, bytes(h.value)) for h in r.headers])
           for r in rows]
    assert got == [(k, v, h) for k, v, h in sent]
    assert [(r.topic, r.partition, r.offset) for r in rows] == [(topic, 0, 0), (topic, 0, 1), (topic, 0, 2)]


def test_a_source_s_json_schema_topic_is_read_back_by_confluent_s_json_deserializer(spark, bootstrap, registry,
                                                                                     topic_name, tmp_path):
    topic, store = topic_name("orders-js"), tmp_path / "store"
    value_type = "struct<id: bigint, item: string, placed: timestamp>"
    at = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)
    records = [("o1", {"id": 1, "item": "pen", "placed": at}, [("source", b"web")]),
               ("o2", {"id": 2, "item": None, "placed": at}, [("source", b"pos"), ("retry", b"1")]),
               ("o1", None, [("source", b"web")])]  # a tombstone for key o1
    schema = arrow_schema(record_schema(StringType(), _parse_datatype_string(value_type)))
    write_deltalake(str(store), pa.Table.from_pylist([
        {"key": k, "value": v, "topic": topic, "partition": 0, "offset": i, "timestamp": at,
         "headers": [{"key": hk, "value": hv} for hk, hv in h]} for i, (k, v, h) in enumerate(records)], schema))
    config = {"name": f"orders-{topic}", "connector.class": "delta-source", "delta.table.path": str(store),
              "key.converter": JSON_SCHEMA, "key.converter.schema.registry.url": registry.url,
              "value.converter": JSON_SCHEMA, "value.converter.schema.registry.url": registry.url}
    query = source_stream(spark, config, bus=bootstrap, checkpoint=str(tmp_path / "ckpt"),
                          trigger={"availableNow": True})
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()

    client = SchemaRegistryClient({"url": registry.url})

    def json_consumer(conf):
        return DeserializingConsumer({**conf, "key.deserializer": JSONDeserializer(None, schema_registry_client=client),
                                      "value.deserializer": JSONDeserializer(None, schema_registry_client=client)})

    got = consume(bootstrap, topic, 3, deserializing=json_consumer)
    millis = int(at.timestamp() * 1000)  # Connect's Timestamp: epoch milliseconds
    expected = [(k, None if v is None else {**v, "placed": millis}, h) for k, v, h in records]
    assert [(m.key(), m.value(), m.headers()) for m in got] == expected
    value_schema = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str)
    assert value_schema["properties"]["placed"]["oneOf"][1]["title"] == "org.apache.kafka.connect.data.Timestamp"
