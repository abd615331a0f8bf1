"""Built-in connectors: every name each one answers to. Kept import-free so resolution stays cheap."""

from ..core.plugins import PluginSpec, connector_names

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
CATALOG += [
    PluginSpec("source", "spark_connect_bridge.connectors.jdbc:JdbcSourceConnector",
               connector_names("io.confluent.connect.jdbc.JdbcSourceConnector", "jdbc-source"),
               "Copies tables or query results from PostgreSQL, MariaDB/MySQL or SQLite (Confluent's JDBC source)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.jdbc:JdbcSinkConnector",
               connector_names("io.confluent.connect.jdbc.JdbcSinkConnector", "jdbc-sink"),
               "Writes records to PostgreSQL, MariaDB/MySQL or SQLite tables, exactly once (Confluent's JDBC sink)."),
    # Not its simple name: JdbcSinkConnector is Confluent's too (Kafka registers no ambiguous alias)
    PluginSpec("sink", "spark_connect_bridge.connectors.jdbc.debezium_sink:DebeziumJdbcSinkConnector",
               ("io.debezium.connector.jdbc.JdbcSinkConnector", "debezium-jdbc-sink"),
               "Applies Debezium change events (or flattened records) to PostgreSQL, MariaDB/MySQL or SQLite tables, "
               "exactly once (Debezium's JDBC sink)."),
    PluginSpec("source", "spark_connect_bridge.connectors.postgres:PostgresConnector",
               connector_names("io.debezium.connector.postgresql.PostgresConnector", "postgres-cdc"),
               "Change data capture from PostgreSQL logical decoding, with Debezium's configs and events."),
    PluginSpec("source", "spark_connect_bridge.connectors.mysql:MySqlConnector",
               connector_names("io.debezium.connector.mysql.MySqlConnector", "mysql-cdc"),
               "Change data capture from the MySQL binlog, with Debezium's configs and events."),
    PluginSpec("source", "spark_connect_bridge.connectors.mysql:MariaDbConnector",
               connector_names("io.debezium.connector.mariadb.MariaDbConnector", "mariadb-cdc"),
               "Change data capture from the MariaDB binlog, with Debezium's configs and events."),
    PluginSpec("sink", "spark_connect_bridge.connectors.delta:DeltaSinkConnector",
               connector_names("spark_connect_bridge.connectors.delta.DeltaSinkConnector", "delta-sink"),
               "Appends or MERGEs records into a Delta table, exactly once."),
    PluginSpec("source", "spark_connect_bridge.connectors.delta:DeltaSourceConnector",
               connector_names("spark_connect_bridge.connectors.delta.DeltaSourceConnector", "delta-source"),
               "Streams a Delta table's new versions (appends and change data)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.iceberg:IcebergSinkConnector",
               connector_names("org.apache.iceberg.connect.IcebergSinkConnector", "iceberg-sink"),
               "Appends, upserts or applies changes to Iceberg tables, exactly once (Apache Iceberg's sink)."),
    PluginSpec("source", "spark_connect_bridge.connectors.iceberg_source:IcebergSourceConnector",
               connector_names("spark_connect_bridge.connectors.iceberg_source.IcebergSourceConnector",
                               "iceberg-source"),
               "Streams the rows an Iceberg table's snapshots append, with snapshot ids as offsets."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.s3:S3SinkConnector",
               connector_names("io.confluent.connect.s3.S3SinkConnector", "s3-sink"),
               "Writes records to S3 objects named and filled as Confluent's S3 sink does (JSON, Parquet, bytes)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.gcs:GcsSinkConnector",
               connector_names("io.confluent.connect.gcs.GcsSinkConnector", "gcs-sink"),
               "Writes records to GCS objects named and filled as Confluent's GCS sink does (JSON, Avro, Parquet, "
               "bytes)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.azure_blob:AzureBlobStorageSinkConnector",
               connector_names("io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector", "azure-blob-sink"),
               "Writes records to Azure blobs named and filled as Confluent's Azure Blob sink does (JSON, Avro, "
               "Parquet, bytes)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.hdfs:Hdfs3SinkConnector",
               connector_names("io.confluent.connect.hdfs3.Hdfs3SinkConnector", "hdfs3-sink"),
               "Writes records to HDFS files named and filled as Confluent's HDFS 3 sink does (JSON, Avro, Parquet, "
               "strings), through WebHDFS."),
    PluginSpec("source", "spark_connect_bridge.connectors.storage.s3_source:S3SourceConnector",
               connector_names("io.confluent.connect.s3.source.S3SourceConnector", "s3-source"),
               "Reads back what Confluent's S3 sink wrote (JSON, bytes), a stream positioned by object and record."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.aiven:AivenS3SinkConnector",
               connector_names("io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "aiven-s3-sink"),
               "Writes records to S3 objects named by file.name.template and filled as Aiven's S3 sink does (CSV, "
               "JSON, JSON lines)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.storage.aiven:AivenGcsSinkConnector",
               connector_names("io.aiven.kafka.connect.gcs.GcsSinkConnector", "aiven-gcs-sink"),
               "Writes records to GCS objects named by file.name.template and filled as Aiven's GCS sink does (CSV, "
               "JSON, JSON lines)."),
]
CATALOG += [
    PluginSpec("source", "spark_connect_bridge.connectors.mqtt:MqttSourceConnector",
               connector_names("io.confluent.connect.mqtt.MqttSourceConnector", "mqtt-source"),
               "Subscribes to MQTT topics; messages acknowledged after Spark's commit (Confluent's MQTT source)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.mqtt:MqttSinkConnector",
               connector_names("io.confluent.connect.mqtt.MqttSinkConnector", "mqtt-sink"),
               "Publishes record values to MQTT topics, at least once (Confluent's MQTT sink)."),
]
CATALOG += [
    PluginSpec("source", "spark_connect_bridge.connectors.rabbitmq:RabbitMQSourceConnector",
               connector_names("io.confluent.connect.rabbitmq.RabbitMQSourceConnector", "rabbitmq-source"),
               "Consumes RabbitMQ queues; messages acknowledged after Spark's commit (Confluent's RabbitMQ source)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.rabbitmq:RabbitMQSinkConnector",
               connector_names("io.confluent.connect.rabbitmq.sink.RabbitMQSinkConnector",
                               "io.confluent.connect.rabbitmq.RabbitMQSinkConnector", "rabbitmq-sink"),
               "Publishes record values to a RabbitMQ exchange with publisher confirms (Confluent's RabbitMQ sink)."),
]
CATALOG += [
    PluginSpec("sink", "spark_connect_bridge.connectors.http:HttpSinkConnector",
               connector_names("io.confluent.connect.http.HttpSinkConnector", "http-sink"),
               "Sends record values to an HTTP API, batched, with retries and OAuth2 (Confluent's HTTP sink)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.http:AivenHttpSinkConnector",
               ("io.aiven.kafka.connect.http.HttpSinkConnector", "aiven-http-sink"),
               "Sends record values to an HTTP API, with retries and OAuth2 (Aiven's HTTP sink)."),
]
CATALOG += [
    PluginSpec("source", "spark_connect_bridge.connectors.redis:RedisStreamSourceConnector",
               connector_names("com.redis.kafka.connect.RedisStreamSourceConnector", "redis-stream-source"),
               "Reads a Redis stream by entry id, replayed exactly from the checkpoint (Redis's Kafka connector)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.redis:RedisSinkConnector",
               connector_names("com.redis.kafka.connect.RedisSinkConnector", "redis-sink"),
               "Writes records to Redis streams, hashes, strings, lists, sets or sorted sets (Redis's Kafka "
               "connector)."),
]
CATALOG += [
    PluginSpec("source", "spark_connect_bridge.connectors.nats:CamelNatssourceSourceConnector",
               connector_names("org.apache.camel.kafkaconnector.natssource.CamelNatssourceSourceConnector",
                               "nats-source"),
               "Reads a NATS JetStream stream by sequence, replayed exactly from the checkpoint; a durable consumer "
               "acknowledged after Spark's commit (Camel's NATS source)."),
    PluginSpec("sink", "spark_connect_bridge.connectors.nats:CamelNatssinkSinkConnector",
               connector_names("org.apache.camel.kafkaconnector.natssink.CamelNatssinkSinkConnector", "nats-sink"),
               "Publishes record values to a NATS subject with JetStream publish acknowledgements (Camel's NATS "
               "sink)."),
]
