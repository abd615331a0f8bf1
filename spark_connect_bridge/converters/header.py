"""``org.apache.kafka.connect.storage.SimpleHeaderConverter``: header values as text.

Serialize writes the value's text (``Values.convertToString``: primitives as text, struct/array/map as JSON)
in UTF-8. Parse reads UTF-8 text; Kafka's ``Values.parseString`` infers a type per header, which one Spark
column cannot hold, so parsed header values are ``string`` unless ``header.converter.spark.schema`` names
another type (every value is then cast to it; a value that does not cast is a record error).

Binary header values are already serialized and are left unchanged on the source side.

>>> SimpleHeaderConverter().serialize(F.lit(42), IntegerType())    # doctest: +SKIP  -> X'3432' ("42")
"""

from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DataType, StringType

from ..config import ConfigDef
from .base import Conversion, HeaderConverter, with_spark_schema_key
from .simple import to_text

__all__ = ["SimpleHeaderConverter"]


class SimpleHeaderConverter(HeaderConverter):
    """Kafka's default ``header.converter``."""

    class_name = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    config_def = with_spark_schema_key(ConfigDef())

    def default_parse_type(self, df: Any, column: str | None) -> tuple[DataType, dict[str, Any]]:
        return StringType(), {}

    def parse_checked(self, col: Column, data_type: DataType = StringType(), *,
                      topic: Column | None = None) -> Conversion:
        text = F.make_valid_utf8(col.cast("string"))
        if isinstance(data_type, StringType):
            return Conversion(text)
        if isinstance(data_type, BinaryType):
            return Conversion(col)
        value = F.trim(text).try_cast(data_type)
        failed = col.isNotNull() & value.isNull()
        msg = F.concat(F.lit(f"Failed to convert header value to {data_type.simpleString()}: "),
                       F.substring(text, 1, 200))
        return Conversion(value, failed, msg)

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        if isinstance(data_type, BinaryType):
            return Conversion(col)
        return Conversion(F.encode(to_text(col, data_type), "UTF-8"))
