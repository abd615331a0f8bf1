"""Fixtures of the converter tests: record DataFrames and an embedded Schema Registry on a free port."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """An embedded Confluent-compatible Schema Registry on 127.0.0.1 (a thread), for the whole session."""
    from spark_connect_bridge.converters.registry_server import serve

    server = serve(port=0, db_path=str(tmp_path_factory.mktemp("registry") / "registry.db"))
    yield server
    server.shutdown()


@pytest.fixture
def records(spark):
    """``records(rows, value_type, key_type, headers, topic)``: a record DataFrame from ``(key, value[,
    headers])`` tuples (topic ``t`` by default, partition 0, offset = index)."""
    from pyspark.sql.types import _parse_datatype_string

    from spark_connect_bridge.core.records import record_schema

    def build(rows, value_type="binary", key_type="binary", headers=None, topic="t"):
        kt = _parse_datatype_string(key_type) if isinstance(key_type, str) else key_type
        vt = _parse_datatype_string(value_type) if isinstance(value_type, str) else value_type
        schema = record_schema(kt, vt)
        if headers is not None:
            from pyspark.sql.types import ArrayType, StringType, StructField, StructType
            ht = _parse_datatype_string(headers) if isinstance(headers, str) else headers
            schema = StructType([f if f.name != "headers" else StructField("headers", ArrayType(StructType([
                StructField("key", StringType()), StructField("value", ht)]))) for f in schema.fields])
        data = [(r[0], r[1], topic, 0, i, None, r[2] if len(r) > 2 else []) for i, r in enumerate(rows)]
        return spark.createDataFrame(data, schema)

    return build
