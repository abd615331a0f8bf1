"""``org.apache.kafka.connect.storage.SimpleHeaderConverter``: header values as text.

**Serialize** writes ``Values.convertToString`` of the value in UTF-8: primitives as their text, dates as
``yyyy-MM-dd``, timestamps as Kafka's ``Values.dateFormatFor`` picks (``HH:mm:ss.SSS'Z'`` before 1970-01-02,
``yyyy-MM-dd`` at midnight, else ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``, UTC), and struct/array/map in Kafka's own
notation, which is JSON-like but not JSON: ``[1,2]``, ``{"a":1}``, ``{1:"x"}`` (map keys as values), nested
strings quoted with only ``\\`` and ``"`` escaped, bytes as quoted Base64, dates and timestamps unquoted.
Binary header values are already serialized and are left unchanged on the source side.

**Parse** reads UTF-8 text. Parsed header values are ``string`` by default. With
``header.converter.spark.schema=variant`` each value gets the type Kafka's ``Values.parseString`` infers for
it, held in a ``variant`` (one Spark column cannot hold a different type per row otherwise), see
:func:`parse_header_text`. Any other ``spark.schema`` casts every value to that type (a value that does not
cast is a record error).

>>> from pyspark.sql import functions as F
>>> from pyspark.sql.types import IntegerType
>>> spark.range(1).select(SimpleHeaderConverter().serialize(F.lit(42), IntegerType()).alias("b")).first().b
b'42'
>>> spark.range(1).select(F.schema_of_variant(parse_header_text(F.lit("1000"))).alias("t")).first().t
'BIGINT'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DateType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from ..config import ConfigDef
from .base import Conversion, HeaderConverter, java_text, utf8_bytes, with_spark_schema_key

__all__ = ["SimpleHeaderConverter", "header_text", "parse_header_text"]

_MILLIS_PER_DAY = 86_400_000
# java.math.BigDecimal's syntax, with Values.parse's rule that a number starts with a digit or a sign.
_NUMBER = r"^([+-](\d+(\.\d*)?|\.\d+)|\d+(\.\d*)?)([eE][+-]?\d+)?$"
_INTEGRAL = r"^[+-]?\d+(\.0*)?$"  # exactly integral without an exponent (BigDecimal.longValueExact succeeds)


# -- serialize: Values.convertToString ----------------------------------------------------------------------

def _escaped(name: str) -> str:
    """Values.escape of a plan-time string, quoted."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quoted(s: Column) -> Column:
    """Values.escape (only backslash and double quote) between double quotes."""
    escaped = F.replace(F.replace(s, F.lit("\\"), F.lit("\\\\")), F.lit('"'), F.lit('\\"'))
    return F.concat(F.lit('"'), escaped, F.lit('"'))


def _timestamp_text(col: Column, ntz: bool) -> Column:
    """Values.dateFormatFor in UTC, whatever the session time zone: the format depends on the instant (a Connect
    Time or Date is also a java Date). A timestamp_ntz is read as UTC wall-clock time."""
    if ntz:
        wall, millis = col, F.timestamp_diff("MILLISECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), col)
    else:
        wall, millis = F.to_utc_timestamp(col, F.current_timezone()), F.unix_millis(col)
    return (F.when(millis < _MILLIS_PER_DAY, F.date_format(wall, "HH:mm:ss.SSS'Z'"))
            .when(millis % _MILLIS_PER_DAY == 0, F.date_format(wall, "yyyy-MM-dd"))
            .otherwise(F.date_format(wall, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")))


def _joined(parts: Column, begin: str, end: str) -> Column:
    return F.concat(F.lit(begin), F.array_join(parts, ","), F.lit(end))


def header_text(col: Column, data_type: DataType, embedded: bool = False) -> Column:
    """``Values.convertToString`` of a typed Column (null stays null at the top level, ``null`` inside).

    ``embedded`` is Kafka's flag for a value inside a struct/array/map: strings and bytes are then quoted.
    Timestamps are formatted in UTC whatever the session time zone (Kafka's SimpleDateFormat uses the worker
    JVM's default zone, UTC on a typical worker).
    """
    if isinstance(data_type, StringType):
        text = _quoted(col) if embedded else col
    elif isinstance(data_type, BinaryType):
        text = _quoted(F.base64(col)) if embedded else F.base64(col)
    elif isinstance(data_type, DateType):
        text = F.date_format(col, "yyyy-MM-dd")
    elif isinstance(data_type, (TimestampType, TimestampNTZType)):
        text = _timestamp_text(col, isinstance(data_type, TimestampNTZType))
    elif isinstance(data_type, ArrayType):
        et = data_type.elementType
        text = _joined(F.transform(col, lambda x: header_text(x, et, True)), "[", "]")
    elif isinstance(data_type, MapType):
        kt, vt = data_type.keyType, data_type.valueType
        text = _joined(F.transform(F.map_entries(col), lambda e: F.concat(
            header_text(e["key"], kt, True), F.lit(":"), header_text(e["value"], vt, True))), "{", "}")
    elif isinstance(data_type, StructType):
        parts = [F.concat(F.lit(_escaped(f.name) + ":"), header_text(col[f.name], f.dataType, True))
                 for f in data_type.fields]
        text = F.concat(F.lit("{"), F.concat_ws(",", *parts), F.lit("}")) if parts else F.lit("{}")
        text = F.when(col.isNotNull(), text)
    else:  # boolean, integral, floating point, decimal: Java's toString matches Spark's cast
        text = col.cast("string")
    return F.coalesce(text, F.lit("null")) if embedded else text


# -- parse: Values.parseString ------------------------------------------------------------------------------

def _variant(c: Column) -> Column:
    return c.cast(VariantType())


def _number(t: Column) -> Column:
    """Values.parse for a trimmed token that has BigDecimal's syntax (null where no variant can hold it).

    A bigint needs no narrowing: the variant encoding stores an integer in the smallest type that holds it,
    which is Kafka's byteValueExact -> shortValueExact -> intValueExact -> longValueExact order."""
    digits = F.regexp_extract(t, r"^[+-]?\d+", 0)
    exact, big = digits.try_cast("bigint"), digits.try_cast("decimal(38,0)")
    d, f = t.try_cast("double"), t.try_cast("float")
    inf = F.lit(float("inf"))
    integral_exp = d.isNotNull() & (F.abs(d) < F.lit(float(1 << 63))) & (d == F.floor(d))
    return (F.when(t.rlike(_INTEGRAL), F.coalesce(_variant(exact), _variant(big)))  # Decimal scale 0 beyond long
            .when(t.rlike("[eE]") & integral_exp, _variant(d.cast("bigint")))
            .when(F.abs(f) < inf, _variant(f))     # any other finite float32 (scale != 0 here)
            .when(F.abs(d) < inf, _variant(d)))


def _temporal(t: Column) -> Column:
    """Values.parseAsTemporal: ISO time (a Connect Time is a java Date on 1970-01-01), timestamp or date, UTC."""
    iso = "yyyy-MM-dd'T'HH:mm:ss.SSSX"  # X reads the literal Z as UTC, whatever the session time zone
    return (F.when((F.length(t) == 13) & t.rlike(r"^\d\d:\d\d:\d\d\.\d{3}Z$"),
                   _variant(F.try_to_timestamp(F.concat(F.lit("1970-01-01T"), t), F.lit(iso))))
            .when((F.length(t) == 24) & t.rlike(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"),
                  _variant(F.try_to_timestamp(t, F.lit(iso))))
            .when((F.length(t) == 10) & t.rlike(r"^\d{4}-\d\d-\d\d$"),
                  _variant(F.try_to_timestamp(t, F.lit("yyyy-MM-dd")).cast("date"))))


def _composite(text: Column, t: Column) -> Column:
    """``[..]`` / ``{..}``: the JSON reading of it when it is an array / object, else null."""
    parsed = F.try_parse_json(text)
    kind = F.schema_of_variant(parsed)
    return (F.when(t.startswith("[") & kind.startswith("ARRAY"), parsed)
            .when(t.startswith("{") & kind.startswith("OBJECT"), parsed))


def parse_header_text(text: Column) -> Column:
    """Kafka's ``Values.parseString`` (what ``SimpleHeaderConverter.toConnectHeader`` does) as a ``variant``
    Column, per row: null and ``null`` -> null; ``""`` -> string; ``true``/``false`` -> boolean; an integer ->
    the smallest of int8/16/32/64 that holds it (``1.0`` and ``1e2`` are integers too), beyond that a
    decimal(38,0); another number -> float32 when finite as float32, else float64;
    ``HH:mm:ss.SSSZ`` -> a timestamp on 1970-01-01, ``yyyy-MM-ddTHH:mm:ss.SSSZ`` -> timestamp,
    ``yyyy-MM-dd`` -> date (all UTC); ``[..]`` / ``{..}`` -> array / object; anything else -> the string.

    Differences from Kafka, where one variant cannot follow it: array and map contents are read as JSON
    (elements keep their own JSON types instead of a common Connect schema, a quoted date stays a string,
    a map must have string keys; ``{1:2}`` stays a string); dates and times must be valid (Kafka's
    SimpleDateFormat is lenient: ``2024-02-30`` is Mar 1 there, a string here); a token followed by more text
    (``12:30``) is a string, where Kafka reads the first token (``12``); a number with more than 38 digits is a
    string. Whitespace around a value is ignored for every type but strings, as in Kafka.
    """
    t = F.trim(text)
    first_digit = F.substring(t, 1, 1).rlike(r"^\d$")
    typed = (F.when(text == F.lit(""), _variant(text))
             .when(t == F.lit("null"), F.lit(None).cast(VariantType()))
             .when(t == F.lit("true"), _variant(F.lit(True)))
             .when(t == F.lit("false"), _variant(F.lit(False)))
             .when(t.startswith("[") | t.startswith("{"), F.coalesce(_composite(text, t), _variant(text)))
             .otherwise(F.coalesce(F.when(first_digit, _temporal(t)),  # temporal first, as Kafka does
                                   F.when(t.rlike(_NUMBER), _number(t)), _variant(text))))
    return F.when(text.isNotNull(), typed)


class SimpleHeaderConverter(HeaderConverter):
    """Kafka's default ``header.converter``."""

    class_name = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    config_def = with_spark_schema_key(ConfigDef())

    def default_parse_type(self, df: Any, column: str | None) -> tuple[DataType, dict[str, Any]]:
        return StringType(), {}

    def parse_checked(self, col: Column, data_type: DataType = StringType(), *,
                      topic: Column | None = None) -> Conversion:
        text = java_text(col)
        if isinstance(data_type, StringType):
            return Conversion(text)
        if isinstance(data_type, BinaryType):
            return Conversion(col)
        if isinstance(data_type, VariantType):
            return Conversion(parse_header_text(text))
        value = F.trim(text).try_cast(data_type)
        failed = col.isNotNull() & value.isNull()
        msg = F.concat(F.lit(f"Failed to convert header value to {data_type.simpleString()}: "),
                       F.substring(text, 1, 200))
        return Conversion(value, failed, msg)

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        if isinstance(data_type, BinaryType):
            return Conversion(col)
        if isinstance(data_type, VariantType):  # a parsed header going back out: scalars as text, else JSON
            kind = F.schema_of_variant(col)
            text = F.when(kind.startswith("ARRAY") | kind.startswith("OBJECT"), F.to_json(col)) \
                .otherwise(F.try_variant_get(col, "$", "string"))
            return Conversion(utf8_bytes(text))
        return Conversion(utf8_bytes(header_text(col, data_type)))
