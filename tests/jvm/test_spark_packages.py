"""The test session's JVM packages, fetched from Maven Central through spark_connect_bridge/jvm/pom.xml: Delta's
SQL extension, spark-avro's from_avro/to_avro, Spark's Kafka source and sink against a real broker, and the
JDBC drivers Spark's own JDBC reader uses."""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from spark_connect_bridge.converters.avro import native_avro_available
from spark_connect_bridge.engine import delta_spark as delta_spark_engine
from spark_connect_bridge.jvm import POM, artifacts, classpath, with_session_defaults
from tests.support import servers


def test_the_declaration_names_spark_s_own_packages_for_the_installed_spark():
    names = {a.artifact: a.version for a in artifacts("spark")}
    from pyspark import __version__

    assert names["spark-sql-kafka-0-10_2.13"].split(".")[:2] == __version__.split(".")[:2]
    assert {a.artifact: a.version for a in artifacts("spark", "4.2.1")}["spark-sql-kafka-0-10_2.13"] == "4.2.0"
    assert {"delta-spark_2.13", "spark-avro_2.13", "postgresql", "mariadb-java-client"} <= set(names)
    assert all(j.startswith(__import__("os").path.expanduser("~")) or "/.m2/" in j for j in classpath("spark"))
    assert POM.endswith("pom.xml")


def test_delta_is_loaded_and_writes_a_table_spark_reads_back(spark, tmp_path):
    assert delta_spark_engine.spark_has_delta(spark)
    spark.range(5).write.format("delta").save(str(tmp_path / "t"))
    assert sorted(r.id for r in spark.read.format("delta").load(str(tmp_path / "t")).collect()) == [0, 1, 2, 3, 4]


def test_native_avro_round_trips_logical_types(spark):
    assert native_avro_available(spark)
    schema = ('{"type":"record","name":"r","fields":[{"name":"a","type":"int"},'
              '{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}')
    df = spark.range(3).select(F.struct(F.col("id").cast("int").alias("a"),
                                        (F.col("id") / 4).cast("decimal(9,2)").alias("d")).alias("v"))
    back = df.select(from_avro(to_avro("v", schema), schema).alias("v")).select("v.*")
    expected = [tuple(r) for r in df.select("v.*").orderBy("a").collect()]
    assert [tuple(r) for r in back.orderBy("a").collect()] == expected


def test_spark_kafka_sink_and_source_round_trip_through_a_real_broker(spark):
    bootstrap = servers.kafka()
    rows = [(f"k{i}", f"v{i}") for i in range(20)]
    (spark.createDataFrame(rows, "key string, value string")
     .withColumn("headers", F.array(F.struct(F.lit("h").alias("key"), F.lit(b"1").cast("binary").alias("value"))))
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", "roundtrip")
     .option("includeHeaders", "true").save())
    back = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "roundtrip")
            .option("includeHeaders", "true").load()
            .select(F.col("key").cast("string"), F.col("value").cast("string"), "headers", "offset"))
    got = back.collect()
    assert sorted((r.key, r.value) for r in got) == sorted(rows)
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("h", b"1")] for r in got)


def test_spark_jdbc_reader_uses_the_fetched_postgresql_driver(spark):
    host, port = servers.postgres()
    # Jars added to a running JVM (spark.jars) are not seen by java.sql.DriverManager's own lookup: name the driver.
    df = (spark.read.format("jdbc").option("url", f"jdbc:postgresql://{host}:{port}/test?user=postgres")
          .option("driver", "org.postgresql.Driver")
          .option("query", "select 42 as answer").load())
    assert df.collect()[0].answer == 42


def test_readme_configure_spark_example_gives_a_session_with_the_packages(spark):
    """The docs' configure_spark block, as written (getOrCreate returns this run's session, made the same way)."""
    from tests.test_readme import _located_blocks

    [(page, block)] = _located_blocks("python", "jvm")
    namespace: dict = {}
    exec(compile(block, page, "exec"), namespace)
    assert delta_spark_engine.spark_has_delta(namespace["spark"]) and native_avro_available(namespace["spark"])


def test_sessions_start_with_the_huge_method_limit_hotspot_compiles_and_a_user_setting_wins(spark):
    from pyspark.sql import SparkSession

    # The suite's session is made by configure_spark, as a user's is.
    assert spark.conf.get("spark.sql.codegen.hugeMethodLimit") == "8000"
    own = SparkSession.builder.config("spark.sql.codegen.hugeMethodLimit", "65535")
    assert with_session_defaults(own)._options["spark.sql.codegen.hugeMethodLimit"] == "65535"


def test_hadoop_aws_matches_spark_s_own_hadoop_and_is_on_the_class_path_not_copied(spark):
    """hadoop-aws must be the release of the Hadoop client Spark ships (its jars dir's hadoop-client-api); the
    object-stores profile's jars go to extraClassPath (Spark would copy spark.jars, the ~690 MB SDK bundle with
    them, into every application's work directory) and S3A's file system class loads."""
    import os

    from pyspark.find_spark_home import _find_spark_home

    from spark_connect_bridge.jvm import configure_spark

    jars = os.listdir(os.path.join(_find_spark_home(), "jars"))
    shipped = [j[len("hadoop-client-api-"):-len(".jar")] for j in jars if j.startswith("hadoop-client-api-")]
    declared = {a.artifact: a.version for a in artifacts("object-stores")}
    assert shipped == [declared["hadoop-aws"]]

    class Builder:
        _options: dict = {}

        def config(self, key, value):
            self._options = {**self._options, key: value}
            return self

    options = configure_spark(Builder().config("spark.hadoop.fs.s3a.endpoint", "http://x"))._options
    extra = options["spark.driver.extraClassPath"].split(os.pathsep)
    assert any("hadoop-aws" in j for j in extra)
    assert not any("hadoop-aws" in j for j in options["spark.jars"].split(","))
    assert "hadoop-aws" not in (configure_spark(Builder())._options.get("spark.driver.extraClassPath") or "")
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", False,
                                       jvm.Thread.currentThread().getContextClassLoader()) is not None
