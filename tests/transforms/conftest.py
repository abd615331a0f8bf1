"""Small record-DataFrame builders for the transform tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql.types import DataType, StructType

from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.core.records import record_schema

TS = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)


@pytest.fixture(scope="session")
def make_records(spark):
    """``make_records(rows, key_type, value_type)``: rows are dicts (or (key, value) tuples) with defaults
    topic='t', partition=0, offset=row index, timestamp=TS, headers=[]."""

    def build(rows: Iterable[Any], key_type: DataType | str = "string", value_type: DataType | str = "string",
              tolerant: bool = False) -> DataFrame:
        kt = _t(spark, key_type)
        vt = _t(spark, value_type)
        out = []
        for i, r in enumerate(rows):
            if isinstance(r, tuple):
                r = {"key": r[0], "value": r[1]}
            out.append((r.get("key"), r.get("value"), r.get("topic", "t"), r.get("partition", 0),
                        r.get("offset", i), r.get("timestamp", TS), r.get("headers", [])))
        df = spark.createDataFrame(out, record_schema(kt, vt))
        return enable_error_column(df) if tolerant else df

    return build


def _t(spark, t: DataType | str) -> DataType:
    if isinstance(t, DataType):
        return t
    return StructType.fromDDL(f"x {t}")["x"].dataType


def errors(rows) -> list[Any]:
    """The ``_kc_error`` messages of collected rows (None for good rows)."""
    return [r[ERROR_COL]["message"] if r[ERROR_COL] else None for r in rows]


def header_dict(row) -> list[tuple[str, bytes | None]]:
    return [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]]
