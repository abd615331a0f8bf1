"""StringConverter, ByteArrayConverter and Kafka's primitive converters as Column expressions.

| Kafka class | parse (bytes -> ) | serialize ( -> bytes) |
|---|---|---|
| ``org.apache.kafka.connect.storage.StringConverter`` | ``string`` decoded with ``converter.encoding`` (a malformed sequence becomes U+FFFD, by Java's decoder: :func:`.base.java_text`) | text of the value (primitives cast to string, struct/array/map as JSON) |
| ``org.apache.kafka.connect.converters.ByteArrayConverter`` | ``binary``, unchanged | binary only (another type is a plan-time error) |
| ``…converters.ShortConverter`` / ``IntegerConverter`` / ``LongConverter`` | ``smallint`` / ``int`` / ``bigint``, big-endian two's complement | same |
| ``…converters.FloatConverter`` / ``DoubleConverter`` | ``float`` / ``double``, IEEE 754 big-endian | same |
| ``…converters.BooleanConverter`` | ``boolean`` from one byte 0/1 | one byte |

A payload of the wrong size (``Size of data received by IntegerDeserializer is not 4``) or a value that
cannot be cast to the converter's type is a record error.

>>> from pyspark.sql import functions as F
>>> from pyspark.sql.types import IntegerType
>>> spark.range(1).select(IntegerConverter().serialize(F.lit(1), IntegerType()).alias("b")).first().b
b'\\x00\\x00\\x00\\x01'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from ..config import CaseInsensitiveValidString, ConfigDef, Importance, Type
from ..errors import ConfigError, ConfigProblem
from .base import Conversion, Converter, java_text, utf8_bytes
from .connect_schema import META_OPTIONAL

__all__ = ["StringConverter", "ByteArrayConverter", "ShortConverter", "IntegerConverter", "LongConverter",
           "FloatConverter", "DoubleConverter", "BooleanConverter", "to_text"]

_ENCODINGS = ("UTF-8", "UTF8", "US-ASCII", "ISO-8859-1", "UTF-16", "UTF-16BE", "UTF-16LE", "UTF-32")
#: the characters an encoding cannot write (a Java regex: a supplementary character is one match)
_UNMAPPABLE = {"US-ASCII": "[^\\x{0}-\\x{7F}]", "ISO-8859-1": "[^\\x{0}-\\x{FF}]"}


class _FixedTypeConverter(Converter):
    """A converter whose parsed type is fixed (no schema to find)."""

    parse_type: ClassVar[DataType] = BinaryType()

    def resolve_parse_type(self, df: Any = None, column: str | None = None,
                           explicit: DataType | None = None) -> tuple[DataType, dict[str, Any]]:
        if explicit is not None and explicit != self.parse_type:
            raise ConfigError([ConfigProblem(self.prefix.rstrip(".") or "data_type",
                                             f"{self.class_name} always parses to {self.parse_type.simpleString()}"
                                             f", not {explicit.simpleString()}")])
        # Kafka's converter gives every value its OPTIONAL_*_SCHEMA, whatever the nullability of the column read
        # (an SMT that wraps the value, HoistField, writes the flag; found by tests/differential/test_fuzz_transforms.py)
        return self.parse_type, {META_OPTIONAL: True}


def to_text(col: Column, data_type: DataType) -> Column:
    """A value's text the way Connect's string-based converters write it: primitives as text, struct/array/map
    as JSON, binary as its bytes."""
    if isinstance(data_type, StringType):
        return col
    if isinstance(data_type, (StructType, ArrayType, MapType)):
        return F.to_json(col, {"ignoreNullFields": "false"})
    return col.cast("string")


class StringConverter(_FixedTypeConverter):
    """``org.apache.kafka.connect.storage.StringConverter``: text in ``converter.encoding`` (UTF-8)."""

    class_name = "org.apache.kafka.connect.storage.StringConverter"
    parse_type = StringType()
    config_def = ConfigDef().define(
        "converter.encoding", Type.STRING, "UTF-8", CaseInsensitiveValidString(*_ENCODINGS), Importance.HIGH,
        "The name of the character encoding used to encode and decode strings.")

    @property
    def _encoding(self) -> str:
        enc = self.config.converter_encoding.upper()
        return "UTF-8" if enc == "UTF8" else enc

    def parse_checked(self, col: Column, data_type: DataType = StringType(), *,
                      topic: Column | None = None) -> Conversion:
        return Conversion(java_text(col, self._encoding))

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        if isinstance(data_type, BinaryType):
            return Conversion(col)
        text = to_text(col, data_type)
        if self._encoding == "UTF-8":
            return Conversion(utf8_bytes(text))
        unmappable = _UNMAPPABLE.get(self._encoding)
        if unmappable:
            # Java's String.getBytes writes "?" for a character the charset lacks (a surrogate pair: one "?");
            # Spark 4's encode fails the query
            text = F.regexp_replace(text, unmappable, "?")
        return Conversion(F.encode(text, self._encoding))


class ByteArrayConverter(_FixedTypeConverter):
    """``org.apache.kafka.connect.converters.ByteArrayConverter``: bytes pass through unchanged."""

    class_name = "org.apache.kafka.connect.converters.ByteArrayConverter"
    parse_type = BinaryType()
    config_def = ConfigDef()

    def parse_checked(self, col: Column, data_type: DataType = BinaryType(), *,
                      topic: Column | None = None) -> Conversion:
        return Conversion(col)

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        if not isinstance(data_type, BinaryType):
            raise ConfigError([ConfigProblem(self.prefix.rstrip(".") or "data_type",
                                             f"{self.class_name} only serializes binary values; the {self.side} "
                                             f"column is {data_type.simpleString()}")])
        return Conversion(col)


def _unsigned(col: Column) -> Column:
    return F.conv(F.hex(col), 16, 10)


def _int32_from_be(col: Column) -> Column:
    """The int of 4 big-endian two's complement bytes."""
    u = _unsigned(col).cast("bigint")
    return F.when(u >= 1 << 31, u - (1 << 32)).otherwise(u).cast("int")


def _int64_from_be(col: Column) -> Column:
    """The bigint of 8 big-endian two's complement bytes."""
    u = _unsigned(col).cast("decimal(20,0)")
    return F.when(u >= F.lit(str(1 << 63)).cast("decimal(20,0)"),
                  u - F.lit(str(1 << 64)).cast("decimal(20,0)")).otherwise(u).cast("bigint")


def _be_bytes(col_bigint: Column, width: int) -> Column:
    """Big-endian two's complement bytes of an integral Column, ``width`` bytes."""
    if width == 8:
        return F.unhex(F.lpad(F.hex(col_bigint.cast("bigint")), 16, "0"))
    mask = (1 << (8 * width)) - 1
    return F.unhex(F.lpad(F.hex(col_bigint.cast("bigint").bitwiseAND(F.lit(mask))), 2 * width, "0"))


class _NumberConverter(_FixedTypeConverter):
    """Kafka's ``NumberConverter``: the primitive serializers' big-endian encodings."""

    width: ClassVar[int] = 4
    deserializer: ClassVar[str] = ""
    config_def = ConfigDef()

    def _decode(self, col: Column) -> Column:
        raise NotImplementedError

    def _encode(self, col: Column) -> Column:
        raise NotImplementedError

    def parse_checked(self, col: Column, data_type: DataType | None = None, *,
                      topic: Column | None = None) -> Conversion:
        return Conversion(*self._parse_sized(col))

    def _parse_sized(self, col: Column) -> tuple[Column, Column, Column]:
        """(value, wrong size, message): the decoded value, null where the record is not ``width`` bytes."""
        bad = col.isNotNull() & (F.octet_length(col) != self.width)
        value = F.when(col.isNull() | bad, F.lit(None).cast(self.parse_type)).otherwise(self._decode(col))
        msg = F.concat(F.lit(f"Size of data received by {self.deserializer} is not {self.width} "),
                       F.lit("(got "), F.octet_length(col).cast("string"), F.lit(" bytes)"))
        return value, bad, msg

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        if data_type == self.parse_type:
            return Conversion(F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(self._encode(col)))
        typed = (F.trim(col) if isinstance(data_type, StringType) else col).try_cast(self.parse_type)
        bad = col.isNotNull() & typed.isNull()
        msg = F.concat(F.lit(f"{self.class_name.rsplit('.', 1)[-1]} cannot serialize the "
                             f"{data_type.simpleString()} value "), col.cast("string"),
                       F.lit(f" as {self.parse_type.simpleString()}"))
        return Conversion(F.when(typed.isNull(), F.lit(None).cast("binary")).otherwise(self._encode(typed)), bad, msg)


class ShortConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.ShortConverter``: 2 bytes big-endian."""

    class_name = "org.apache.kafka.connect.converters.ShortConverter"
    parse_type = ShortType()
    width = 2
    deserializer = "ShortDeserializer"

    def _decode(self, col: Column) -> Column:
        u = _unsigned(col).cast("int")
        return F.when(u >= 1 << 15, u - (1 << 16)).otherwise(u).cast("smallint")

    def _encode(self, col: Column) -> Column:
        return _be_bytes(col, 2)


class IntegerConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.IntegerConverter``: 4 bytes big-endian."""

    class_name = "org.apache.kafka.connect.converters.IntegerConverter"
    parse_type = IntegerType()
    width = 4
    deserializer = "IntegerDeserializer"

    def _decode(self, col: Column) -> Column:
        return _int32_from_be(col)

    def _encode(self, col: Column) -> Column:
        return _be_bytes(col, 4)


class LongConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.LongConverter``: 8 bytes big-endian."""

    class_name = "org.apache.kafka.connect.converters.LongConverter"
    parse_type = LongType()
    width = 8
    deserializer = "LongDeserializer"

    def _decode(self, col: Column) -> Column:
        return _int64_from_be(col)

    def _encode(self, col: Column) -> Column:
        return _be_bytes(col, 8)


class FloatConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.FloatConverter``: IEEE 754 single, big-endian."""

    class_name = "org.apache.kafka.connect.converters.FloatConverter"
    parse_type = FloatType()
    width = 4
    deserializer = "FloatDeserializer"

    def _decode(self, col: Column) -> Column:
        bits = _int32_from_be(col)
        return F.reflect(F.lit("java.lang.Float"), F.lit("intBitsToFloat"), bits).cast("float")

    def _encode(self, col: Column) -> Column:
        bits = F.reflect(F.lit("java.lang.Float"), F.lit("floatToRawIntBits"), col.cast("float")).cast("int")
        return _be_bytes(bits, 4)


class DoubleConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.DoubleConverter``: IEEE 754 double, big-endian."""

    class_name = "org.apache.kafka.connect.converters.DoubleConverter"
    parse_type = DoubleType()
    width = 8
    deserializer = "DoubleDeserializer"

    def _decode(self, col: Column) -> Column:
        bits = _int64_from_be(col)
        return F.reflect(F.lit("java.lang.Double"), F.lit("longBitsToDouble"), bits).cast("double")

    def _encode(self, col: Column) -> Column:
        bits = F.reflect(F.lit("java.lang.Double"), F.lit("doubleToRawLongBits"), col.cast("double")).cast("bigint")
        return _be_bytes(bits, 8)


class BooleanConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.BooleanConverter``: one byte, 1 = true, 0 = false."""

    class_name = "org.apache.kafka.connect.converters.BooleanConverter"
    parse_type = BooleanType()
    width = 1
    deserializer = "BooleanDeserializer"

    def parse_checked(self, col: Column, data_type: DataType | None = None, *,
                      topic: Column | None = None) -> Conversion:
        value, bad, size_msg = self._parse_sized(col)
        not_bool = col.isNotNull() & (F.octet_length(col) == 1) & ~col.isin(F.unhex(F.lit("00")),
                                                                               F.unhex(F.lit("01")))
        msg = F.when(not_bool, F.concat(F.lit("BooleanDeserializer: unexpected byte 0x"), F.hex(col))) \
            .otherwise(size_msg)
        return Conversion(F.when(not_bool, F.lit(None).cast("boolean")).otherwise(value), bad | not_bool, msg)

    def _decode(self, col: Column) -> Column:
        return col == F.unhex(F.lit("01"))

    def _encode(self, col: Column) -> Column:
        return F.when(col, F.unhex(F.lit("01"))).otherwise(F.unhex(F.lit("00")))

