"""spark_connect_bridge: Kafka Connect's pipelines, native on Apache Spark."""

__version__ = "0.1.0"
