"""The record model: the column names of Spark's own Kafka source.

A record DataFrame has ``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp`` and ``headers``
(``array<struct<key:string,value:binary>>``). ``key`` and ``value`` are typed (struct or primitive) until a
converter serializes them to binary, and binary until a converter parses them. After the source-side
converters a record DataFrame can be written with Spark's ``kafka`` sink as it is.

For a source record, ``partition`` is the index of the connector's source partition (its task's share of
the input, e.g. a file or a table) and ``offset`` a position in it that only grows (a byte position, a row
sequence number, an LSN): together they are the coordinates errors and dead-letter records carry.

>>> record_schema(StringType(), StringType()).fieldNames()
['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'headers']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["KEY", "VALUE", "TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "HEADERS", "HEADERS_TYPE",
           "RECORD_COLUMNS", "record_schema", "arrow_schema", "no_headers", "SCHEMALESS_META", "is_schemaless",
           "VARIANT_JSON_META", "is_variant_json"]

KEY, VALUE, TOPIC, PARTITION, OFFSET, TIMESTAMP, HEADERS = (
    "key", "value", "topic", "partition", "offset", "timestamp", "headers")
RECORD_COLUMNS = (KEY, VALUE, TOPIC, PARTITION, OFFSET, TIMESTAMP, HEADERS)

#: Column metadata of a ``key``/``value`` read from schemaless messages (JsonConverter ``schemas.enable=false``)
#: into a struct of the declared ``spark.schema``: where Kafka's SMTs see a ``java.util.Map`` and follow their
#: schemaless rules (InsertField's timestamp as epoch milliseconds, MaskField's empty Map), ours follow them too.
SCHEMALESS_META = "kconnect.schemaless"


def is_schemaless(metadata: dict | None) -> bool:
    """Whether a column's metadata says its struct was read from schemaless messages (:data:`SCHEMALESS_META`)."""
    return (metadata or {}).get(SCHEMALESS_META) == "true"


#: Column metadata of a ``key``/``value`` string that holds a VARIANT's JSON text (the pipeline hands a Python sink
#: its schemaless values so: a Python sink gets Arrow batches, where a VARIANT is its undecoded binary form).
VARIANT_JSON_META = "kconnect.variant"


def is_variant_json(metadata: dict | None) -> bool:
    """Whether a column's metadata says it holds a VARIANT's JSON text (:data:`VARIANT_JSON_META`)."""
    return (metadata or {}).get(VARIANT_JSON_META) == "json"


HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
HEADERS_TYPE = ArrayType(HEADER_TYPE)


def record_schema(key_type: DataType = BinaryType(), value_type: DataType = BinaryType()) -> StructType:
    """The record schema with the given key and value types (binary by default, like Spark's Kafka source)."""
    return StructType([
        StructField(KEY, key_type),
        StructField(VALUE, value_type),
        StructField(TOPIC, StringType()),
        StructField(PARTITION, IntegerType()),
        StructField(OFFSET, LongType()),
        StructField(TIMESTAMP, TimestampType()),
        StructField(HEADERS, HEADERS_TYPE),
    ])


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` from a Python data source (exact on pyspark ≥ 4.2:
    nullable fields, ``timestamp[us, tz=UTC]``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def no_headers(n: int) -> pa.Array:
    """``n`` empty header lists, the ``headers`` column of source records that carry none.

    Empty lists, not nulls: a Kafka Connect record always has headers (maybe none), and when Spark hands rows
    to a Python sink as Arrow, each row re-fills the offsets of the null lists since the last non-null one
    (Arrow Java's ``ListVector.setValueCount``, called per row for the batch size limit), so null header lists
    cost O(rows²) per Arrow batch (measured: 70% of the JVM's time of a CDC -> JDBC mirror).
    """
    import numpy as np
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], type=header))
