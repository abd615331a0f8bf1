"""The bus between source and sink connectors when it is a Kafka cluster (:mod:`.kafka`): Spark's own Kafka
source and sink (``spark-sql-kafka-0-10``), an admin client for topic creation and consumer-group offsets."""

from .kafka import (
    KafkaBus,
    KafkaSinkPlan,
    KafkaSourcePlan,
    plan_sink,
    plan_source,
    read_topics,
    sink_stream,
    source_stream,
    write_kafka,
)

__all__ = ["KafkaBus", "KafkaSinkPlan", "KafkaSourcePlan", "plan_sink", "plan_source", "read_topics", "sink_stream",
           "source_stream", "write_kafka"]
