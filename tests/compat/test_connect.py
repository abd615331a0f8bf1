"""Through Spark Connect only (collected with ``KCONNECT_TEST_SPARK=connect``): the tests' session really is a
Connect session, and ``format("kconnect")`` works in a fresh session once the client registers it, as on Databricks
serverless, where the server does not discover the package."""

from __future__ import annotations

import pytest
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

import spark_connect_bridge as scb
from tests.compat.connect_server import running_server


def test_the_session_is_a_spark_connect_session_without_a_jvm(spark):
    assert isinstance(spark, RemoteSparkSession)
    with pytest.raises(AttributeError, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        spark.sparkContext


def test_kconnect_reads_in_a_fresh_session_once_the_client_registers_it(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("one\ntwo\n")
    options = {"connector.class": "FileStreamSource", "file": str(path), "topic": "lines"}
    session = running_server().side_session()
    try:
        # The test server's Python workers run this checkout's editable install, so Spark's discovery may find
        # pyspark_kconnect there too; on serverless it does not, and the client's registration is what counts.
        scb.register(session)
        rows = session.read.format("kconnect").options(**options).load().collect()
        assert [(r.value, r.offset, r.topic) for r in rows] == [("one", 0, "lines"), ("two", 4, "lines")]
    finally:
        session.stop()
