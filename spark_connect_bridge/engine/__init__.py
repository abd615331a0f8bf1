"""The engine: what adapts connectors, converters and transforms to Spark.

``datasource`` is the ``kconnect`` Python data source (readers and writers over a connector); ``pipeline`` builds a
whole Kafka Connect config into a streaming query (connector, transforms, converters, errors.*);
``dead_letter`` routes failed records; ``topic_store`` keeps topics as Delta tables when there is no Kafka;
``delta_spark`` runs Delta sinks and sources on Delta's own JVM engine; ``python_workers`` checks that Spark's
Python workers can import this package.
"""
