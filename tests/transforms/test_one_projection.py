"""checked/with_metadata put updates, drops and metadata in one projection; a name that matches no column exactly
keeps Spark's own resolution (withColumns, withMetadata)."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from spark_connect_bridge.core.record_errors import checked, with_metadata


def test_one_projection_matches_withcolumns_drop_and_withmetadata(spark):
    df = spark.createDataFrame([(1, "a", 9)], "key int, value string, tmp int")
    got = checked(df, {"value": F.upper("value"), "extra": F.lit(2)}, failed=F.col("key") < 0, message="neg",
                  stage="TRANSFORMATION", class_name="X", drop=["tmp"], metadata={"value": {"m": 1}})
    assert got.columns == ["key", "value", "extra"]
    assert got.schema["value"].metadata == {"m": 1}
    assert got.collect()[0].asDict() == {"key": 1, "value": "A", "extra": 2}
    assert len(got.select("key").limit(1).collect()) == 1


def test_a_name_in_another_case_or_missing_keeps_sparks_resolution(spark):
    df = spark.createDataFrame([(1, "a")], "key int, value string")
    got = checked(df, {"VALUE": F.lit("b")}, failed=None, message=None, stage="TRANSFORMATION", class_name="X")
    assert got.columns == df.withColumns({"VALUE": F.lit("b")}).columns
    assert [tuple(r) for r in got.collect()] == [(1, "b")]
    with pytest.raises(AnalysisException):
        with_metadata(df, {"missing": {"m": 1}}).schema
