"""Built-in connectors: every name each one answers to. Kept import-free so resolution stays cheap."""

from ..plugins import PluginSpec, connector_names

CATALOG = [
    PluginSpec("source", "spark_connect_bridge.connectors.file:FileStreamSourceConnector",
               connector_names("org.apache.kafka.connect.file.FileStreamSourceConnector", "file-source"),
               "Reads lines of a text file (Kafka's FileStreamSource)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.file:FileStreamSinkConnector",
               connector_names("org.apache.kafka.connect.file.FileStreamSinkConnector", "file-sink"),
               "Appends one line per record to a text file (Kafka's FileStreamSink), exactly once."),
    PluginSpec("source", "spark_connect_bridge.connectors.datagen:DatagenConnector",
               connector_names("io.confluent.kafka.connect.datagen.DatagenConnector", "datagen"),
               "Generates mock records from quickstart schemas (Confluent's kafka-connect-datagen)."),
]
