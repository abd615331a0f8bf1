"""Interop with other Kafka applications: confluent-kafka producers with Confluent's AvroSerializer feed a sink
connector; a source connector's Avro topic is read back with AvroDeserializer. Keys, headers and tombstones
survive."""

from __future__ import annotations

import json

from confluent_kafka import DeserializingConsumer, SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import StringDeserializer, StringSerializer

from spark_connect_bridge.bus.kafka import sink_stream, source_stream
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
