"""Config of the Kafka bus, checked before any data moves: consumer/producer overrides, KIP-158 topic creation,
Kafka Connect's sink offsets shape, and the worker's bootstrap.servers."""

from __future__ import annotations

import pytest

from spark_connect_bridge.bus.admin import TopicCreation
from spark_connect_bridge.bus.groups import merge_rest, to_rest
from spark_connect_bridge.bus.kafka import ConsumerSettings, KafkaBus, producer_overrides
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.runtime.worker_config import parse_worker_config


def test_consumer_overrides_that_spark_applies_reach_its_kafka_source():
    settings = ConsumerSettings.from_config({"consumer.override.max.poll.records": "100",
                                             "consumer.override.isolation.level": "read_committed",
                                             "consumer.override.auto.offset.reset": "latest",
                                             "consumer.override.group.id": "billing",
                                             "consumer.override.sasl.mechanism": "PLAIN"})
    assert dict(settings.kafka) == {"max.poll.records": "100", "isolation.level": "read_committed",
                                    "sasl.mechanism": "PLAIN"}
    assert settings.starting_offsets == "latest"
    assert settings.group == "billing"
    bus = KafkaBus("127.0.0.1:9092")
    assert bus.spark_options(dict(settings.kafka))["kafka.isolation.level"] == "read_committed"


def test_consumer_overrides_spark_does_not_apply_are_rejected_by_name_all_at_once():
    with pytest.raises(ConfigError) as e:
        ConsumerSettings.from_config({"consumer.override.enable.auto.commit": "true",
                                      "consumer.override.value.deserializer": "x.Y",
                                      "consumer.override.partition.assignment.strategy": "x.Z",
                                      "consumer.override.auto.offset.reset": "none",
                                      "consumer.override.no.such.setting": "1"})
    keys = {p.key for p in e.value.problems}
    assert keys == {"consumer.override.enable.auto.commit", "consumer.override.value.deserializer",
                    "consumer.override.partition.assignment.strategy", "consumer.override.auto.offset.reset",
                    "consumer.override.no.such.setting"}
    assert "committed to the consumer group after Spark commits" in str(e.value)


def test_producer_overrides_pass_to_spark_s_sink_but_serializers_and_transactions_are_rejected():
    assert producer_overrides({"producer.override.linger.ms": "20", "producer.override.acks": "all"}) == \
        {"linger.ms": "20", "acks": "all"}
    with pytest.raises(ConfigError) as e:
        producer_overrides({"producer.override.transactional.id": "t", "producer.override.value.serializer": "x"})
    assert {p.key for p in e.value.problems} == {"producer.override.transactional.id",
                                                 "producer.override.value.serializer"}
    assert "at-least-once" in str(e.value)


def test_topic_creation_groups_match_in_order_and_fall_back_to_the_default_group():
    creation = TopicCreation.from_config({
        "topic.creation.groups": "compacted,hot",
        "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "2",
        "topic.creation.default.retention.ms": "3600000",
        "topic.creation.compacted.include": "users.*,accounts", "topic.creation.compacted.exclude": "users-tmp",
        "topic.creation.compacted.cleanup.policy": "compact",
        "topic.creation.hot.include": ".*", "topic.creation.hot.partitions": "6"})
    assert creation is not None
    assert creation.settings_for("users-1") == (2, 1, {"cleanup.policy": "compact"})
    assert creation.settings_for("accounts") == (2, 1, {"cleanup.policy": "compact"})
    assert creation.settings_for("users-tmp") == (6, 1, {})
    no_groups = TopicCreation.from_config({"topic.creation.default.replication.factor": "-1",
                                           "topic.creation.default.partitions": "3",
                                           "topic.creation.default.cleanup.policy": "compact"})
    assert no_groups.settings_for("orders") == (3, -1, {"cleanup.policy": "compact"})
    assert TopicCreation.from_config({"name": "x"}) is None


@pytest.mark.parametrize("props, key", [
    ({"topic.creation.default.partitions": "1"}, "topic.creation.default.replication.factor"),
    ({"topic.creation.default.partitions": "0", "topic.creation.default.replication.factor": "1"},
     "topic.creation.default.partitions"),
    ({"topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "one"},
     "topic.creation.default.replication.factor"),
    ({"topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "1",
      "topic.creation.other.partitions": "2"}, "topic.creation.other.partitions"),
])
def test_topic_creation_errors_name_the_key(props, key):
    with pytest.raises(ConfigError) as e:
        TopicCreation.from_config(props)
    assert key in {p.key for p in e.value.problems}


def test_sink_offsets_use_kafka_connect_s_shape_both_ways():
    spark_offsets = {"orders": {"1": 7, "0": 5}, "refunds": {"0": 2}}
    rest = to_rest(spark_offsets)
    assert rest == [
        {"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
        {"partition": {"kafka_topic": "orders", "kafka_partition": 1}, "offset": {"kafka_offset": 7}},
        {"partition": {"kafka_topic": "refunds", "kafka_partition": 0}, "offset": {"kafka_offset": 2}}]
    merged = merge_rest(spark_offsets, [
        {"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": {"kafka_offset": 0}},
        {"partition": {"kafka_topic": "refunds", "kafka_partition": 0}, "offset": None},
        {"partition": {"kafka_topic": "new", "kafka_partition": 2}, "offset": {"kafka_offset": 9}}])
    assert merged == {"orders": {"0": 0, "1": 7}, "new": {"2": 9}}
    assert spark_offsets == {"orders": {"1": 7, "0": 5}, "refunds": {"0": 2}}  # the caller's map is untouched


def test_bad_sink_offsets_are_reported_together():
    with pytest.raises(ConfigError) as e:
        merge_rest({}, [{"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}},
                        {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": -1}}])
    assert [p.key for p in e.value.problems] == ["partition", "kafka_offset"]


def test_worker_bootstrap_servers_makes_kafka_the_bus_and_its_security_keys_configure_the_clients(tmp_path):
    cfg = parse_worker_config({"bootstrap.servers": "127.0.0.1:9092,127.0.0.1:9093",
                               "offset.storage.file.filename": str(tmp_path / "connect.offsets"),
                               "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                               "key.converter": "org.apache.kafka.connect.json.JsonConverter"})
    assert cfg.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093"
    assert cfg.kafka_client == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    assert parse_worker_config({"offset.storage.dir": str(tmp_path)}).bootstrap_servers is None


def test_a_kafka_sink_reads_at_most_50000_records_per_micro_batch_unless_its_config_says():
    """A backlog is never one micro-batch that the sink path would cache whole (see max.records.per.trigger)."""
    from spark_connect_bridge.bus.kafka import plan_sink

    config = {"name": "s", "connector.class": "FileStreamSink", "file": "/tmp/s.txt", "topics": "t"}
    assert plan_sink(config, "127.0.0.1:9092").max_records_per_trigger == 50_000
    assert plan_sink({**config, "max.records.per.trigger": "7"}, "127.0.0.1:9092").max_records_per_trigger == 7
