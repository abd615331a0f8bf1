"""The record schema of the MySQL and MariaDB connectors: Debezium's envelope over the captured tables.

The captured tables are a :class:`~..cdc.layout.Layout` (a table's ``schema`` is its MySQL database; the union
row struct and the ``kconnect.cdc.tables`` metadata as for every CDC connector, so
:func:`~..cdc.layout.table_events`, the converters and the sinks narrow the stream to one table alike). The
``source`` struct is Debezium's ``io.debezium.connector.mysql.Source`` (``...mariadb.Source`` for MariaDB).

>>> record_type(layout, "mariadb")                                              # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ..cdc.envelope import record_type as envelope_type
from ..cdc.envelope import source_fields
from ..cdc.layout import Layout

__all__ = ["record_type", "source_name", "source_type"]


def source_type() -> Any:
    """MySQL's ``source`` block (Debezium's ``io.debezium.connector.mysql.Source``)."""
    from pyspark.sql import types as T

    return T.StructType([
        *source_fields(), T.StructField("table", T.StringType()), T.StructField("server_id", T.LongType()),
        T.StructField("gtid", T.StringType()), T.StructField("file", T.StringType()),
        T.StructField("pos", T.LongType()), T.StructField("row", T.IntegerType()),
        T.StructField("thread", T.LongType()), T.StructField("query", T.StringType()),
    ])


def source_name(flavor: str) -> str:
    """connect.name of the ``source`` struct: ``io.debezium.connector.<mysql|mariadb>.Source``."""
    return f"io.debezium.connector.{flavor}.Source"


def record_type(layout: Layout, flavor: str) -> Any:
    """The Spark record schema of ``layout``: Debezium envelope values over the union row structs."""
    return envelope_type(layout, source_type(), source_name(flavor))
