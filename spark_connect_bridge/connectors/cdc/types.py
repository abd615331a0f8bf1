"""The type of a captured column: its Spark type and Kafka Connect schema (name, parameters).

A change event's row fields carry Debezium's logical types: ``kind`` says how a value is represented (and how
a connector converts the database's value to it), ``connect_name``/``parameters`` become the Spark field's
``connect.name``/``connect.parameters`` metadata, ``element`` is an array's element type and ``db_type`` the
database's own type name (for messages and casts). Each connector maps its database's catalog types to these
(:func:`spark_connect_bridge.connectors.postgres.types.type_spec` for PostgreSQL).

>>> TypeSpec("int32", db_type="int4").spark_type()
IntegerType()
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...errors import DataError

__all__ = ["TypeSpec"]


@dataclass(frozen=True)
class TypeSpec:
    """How one database column becomes a Connect/Spark field.

    ``kind`` selects the value conversion; ``connect_name``/``parameters`` go to the Spark field metadata
    (``connect.name``, ``connect.parameters``); ``element`` is the element spec of an array.
    """

    kind: str
    connect_name: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()
    precision: int = 0
    scale: int = 0
    element: TypeSpec | None = None
    db_type: str = ""
    #: a column mapper of Debezium's (:mod:`.columns`) applied to the row's values: ("truncate", n) or
    #: ("mask", text); None: values as converted
    mapper: tuple[str, Any] | None = None
    #: the parameters of the key field when the column mappers added some to the row field (Debezium builds the
    #: key without its column mappers); None: the same as the row's
    key_parameters: tuple[tuple[str, str], ...] | None = None

    def key_spec(self) -> TypeSpec:
        """The spec of this column as a key field: without the column mappers' changes."""
        if self.mapper is None and self.key_parameters is None:
            return self
        return replace(self, mapper=None, key_parameters=None,
                       parameters=self.parameters if self.key_parameters is None else self.key_parameters)

    def map_values(self, arr: Any) -> Any:
        """``arr`` (this column's converted values) through the column mapper, in bulk."""
        if self.mapper is None:
            return arr
        import pyarrow as pa
        import pyarrow.compute as pc

        kind, arg = self.mapper
        if kind == "truncate":  # Java's substring(0, n)
            return pc.utf8_slice_codeunits(arr, 0, arg)
        return pa.repeat(pa.scalar(arg, arr.type), len(arr))  # Debezium's mask replaces nulls too

    def spark_type(self) -> Any:
        from pyspark.sql import types as T

        k = self.kind
        simple = {"int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
                  "float32": T.FloatType(), "float64": T.DoubleType(), "boolean": T.BooleanType(),
                  "string": T.StringType(), "bytes": T.BinaryType(), "date": T.DateType(),
                  "timestamp_ms": T.TimestampType(), "date_days": T.IntegerType(), "time_ms": T.IntegerType(),
                  "time_us": T.LongType(), "ts_ms": T.LongType(), "ts_us": T.LongType(),
                  "zoned": T.StringType(), "zoned_time": T.StringType(), "iso_ts": T.StringType(),
                  "interval_us": T.LongType(), "bytes_base64": T.StringType(),
                  "bytes_base64-url-safe": T.StringType(), "bytes_hex": T.StringType()}
        if k in simple:
            return simple[k]
        if k == "decimal":
            return T.DecimalType(self.precision, self.scale)
        if k == "varscale":
            return T.StructType([T.StructField("scale", T.IntegerType(), False),
                                 T.StructField("value", T.BinaryType(), False)])
        if k == "geometry":  # io.debezium.data.geometry.Geometry (and Geography)
            return T.StructType([T.StructField("wkb", T.BinaryType(), False),
                                 T.StructField("srid", T.IntegerType(), True)])
        if k == "point":  # io.debezium.data.geometry.Point
            return T.StructType([T.StructField("x", T.DoubleType(), False),
                                 T.StructField("y", T.DoubleType(), False),
                                 T.StructField("wkb", T.BinaryType(), True),
                                 T.StructField("srid", T.IntegerType(), True)])
        if k == "array":
            assert self.element is not None
            return T.ArrayType(self.element.spark_type(), True)
        raise DataError(f"no Spark type for {self}")

    def metadata(self) -> dict[str, Any]:
        """The Spark field metadata: ``connect.name``, ``connect.version`` and ``connect.parameters``."""
        meta: dict[str, Any] = {}
        if self.connect_name:
            meta["connect.name"] = self.connect_name
            meta["connect.version"] = 1
        if self.parameters:
            meta["connect.parameters"] = dict(self.parameters)
        if self.connect_name == "io.debezium.data.VariableScaleDecimal":
            meta["connect.doc"] = "Variable scaled decimal"  # Debezium's schema doc
        return meta

    def union_key(self) -> tuple:
        """What two tables' columns of one name must share to be one field of the union row (the database
        type name may differ: ``varchar`` and ``text`` are both Connect strings)."""
        return (self.kind, self.connect_name, self.parameters, self.precision, self.scale,
                self.element.union_key() if self.element else None, self.mapper, self.key_parameters)
