"""The record schema of the MySQL and MariaDB connectors: Debezium's envelope over the captured tables.

The captured tables are a :class:`~..cdc.layout.Layout` (a table's ``schema`` is its MySQL database; the union
row struct and the ``kconnect.cdc.tables`` metadata as for every CDC connector, so
:func:`~..cdc.layout.table_events`, the converters and the sinks narrow the stream to one table alike). The
``source`` struct is Debezium's ``io.debezium.connector.mysql.Source`` (``...mariadb.Source`` for MariaDB).

With ``include.schema.changes`` the DataFrame also holds Debezium's schema change events, on the topic
``<topic.prefix>``: key ``SchemaChangeKey`` (``databaseName``), value ``SchemaChangeValue`` (``source``,
``ts_ms``, ``databaseName``, ``schemaName``, ``ddl``, ``tableChanges``). ``key`` and ``value`` are then the
unions of both kinds, and the metadata tells each topic's own fields (converters and sinks narrow to them).

>>> record_type(layout, "mariadb")                                              # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ..cdc.envelope import SideTopic, source_fields
from ..cdc.envelope import record_type as envelope_type
from ..cdc.layout import Layout

__all__ = ["record_type", "schema_change_topic", "source_name", "source_type"]


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


def schema_change_topic(prefix: str, flavor: str) -> SideTopic:
    """Debezium's schema change topic of a MySQL/MariaDB connector (``<topic.prefix>``)."""
    from pyspark.sql import types as T

    column = T.StructType([
        T.StructField("name", T.StringType()), T.StructField("jdbcType", T.IntegerType()),
        T.StructField("nativeType", T.IntegerType()), T.StructField("typeName", T.StringType()),
        T.StructField("typeExpression", T.StringType()), T.StructField("charsetName", T.StringType()),
        T.StructField("length", T.IntegerType()), T.StructField("scale", T.IntegerType()),
        T.StructField("position", T.IntegerType()), T.StructField("optional", T.BooleanType()),
        T.StructField("autoIncremented", T.BooleanType()), T.StructField("generated", T.BooleanType()),
        T.StructField("comment", T.StringType()), T.StructField("defaultValueExpression", T.StringType()),
        T.StructField("enumValues", T.ArrayType(T.StringType())),
    ])
    table = T.StructType([
        T.StructField("defaultCharsetName", T.StringType()),
        T.StructField("primaryKeyColumnNames", T.ArrayType(T.StringType())),
        T.StructField("columns", T.ArrayType(column)), T.StructField("comment", T.StringType()),
    ])
    change = T.StructType([T.StructField("type", T.StringType()), T.StructField("id", T.StringType()),
                           T.StructField("table", table)])
    value = (T.StructField("source", source_type(), True, {"connect.name": source_name(flavor)}),
             T.StructField("ts_ms", T.LongType()), T.StructField("databaseName", T.StringType()),
             T.StructField("schemaName", T.StringType()), T.StructField("ddl", T.StringType()),
             T.StructField("tableChanges", T.ArrayType(change)))
    return SideTopic(prefix, (T.StructField("databaseName", T.StringType()),), value,
                     f"io.debezium.connector.{flavor}.SchemaChangeKey",
                     f"io.debezium.connector.{flavor}.SchemaChangeValue")


def record_type(layout: Layout, flavor: str, schema_changes: bool = False) -> Any:
    """The Spark record schema of ``layout``: Debezium envelope values over the union row structs (and the
    schema change topic's records with ``schema_changes``)."""
    side = schema_change_topic(layout.prefix, flavor) if schema_changes else None
    return envelope_type(layout, source_type(), source_name(flavor), side)
