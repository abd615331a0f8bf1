"""Kafka Connect's ``Values.convertToString`` and ``Values.parseString`` as used for header values.

Header values are bytes here (``array<struct<key:string,value:binary>>``), written the way Kafka's default
``SimpleHeaderConverter`` writes them: the UTF-8 bytes of ``Values.convertToString(schema, value)``:

* strings as they are; integers and booleans as their text; floats/doubles as Java prints them
  (``1.0E10``, ``0.5``); bytes as standard Base64;
* Connect ``Date`` as ``yyyy-MM-dd``, ``Time`` as ``HH:mm:ss.SSS'Z'``, ``Timestamp`` as
  ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` (UTC);
* structs, maps and arrays in Connect's string form, which is JSON-like (``{"a":1,"b":"x"}``, ``[1,2]``);
  we produce it with ``to_json`` (null fields kept). Difference: ``to_json`` also escapes control
  characters inside strings, where Connect escapes only ``\\`` and ``"``;
* a null value gives a null header value.
"""

from __future__ import annotations

import json
import math
import re
import struct as _struct

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DateType,
    IntegerType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..converters.header import header_text
from .base import java_class_of_variant

__all__ = [
    "TIME_NAME",
    "connect_to_string",
    "header_bytes",
    "is_time",
    "java_double_str",
    "java_float_str",
    "parse_literal_to_string",
]

TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
DATE_NAME = "org.apache.kafka.connect.data.Date"


def is_time(dtype: DataType, metadata: dict | None) -> bool:
    return isinstance(dtype, IntegerType) and (metadata or {}).get("connect.name") == TIME_NAME


def connect_to_string(col: Column, dtype: DataType, metadata: dict | None = None) -> Column:
    """``Values.convertToString`` for a Column of Spark type ``dtype`` (null stays null)."""
    if isinstance(dtype, StringType):
        return col
    if is_time(dtype, metadata):
        return F.date_format(F.timestamp_millis(col.cast("long")), "HH:mm:ss.SSS'Z'")
    if isinstance(dtype, BinaryType):
        return F.base64(col)
    if isinstance(dtype, DateType):
        return F.date_format(col, "yyyy-MM-dd")
    if isinstance(dtype, (TimestampType, TimestampNTZType, StructType, MapType, ArrayType)):
        # Values.convertToString: dateFormatFor's time/date/timestamp choice, composites as [..] and {..}.

        return header_text(col, dtype)
    return col.cast("string")  # boolean, numbers, decimal: Java's toString matches Spark's cast


def header_bytes(col: Column, dtype: DataType, metadata: dict | None = None) -> Column:
    """The header value bytes SimpleHeaderConverter writes for ``col``."""
    return connect_to_string(col, dtype, metadata).cast("binary")


def variant_header_bytes(value: Column) -> Column:
    """The header value bytes SimpleHeaderConverter writes for an entry of a schemaless object (a VARIANT), by the
    Java class Kafka's JsonConverter reads it as: a String as it is, a Long or Boolean as Java prints it, a Double by
    ``Double.toString`` (Spark's double to string cast), a list or map as its JSON text (Spark's: keys sorted; Kafka
    prints a HashMap's order); a missing or null entry null."""
    cls = java_class_of_variant(value)
    text = (F.when(F.is_variant_null(value), F.lit(None).cast("string"))
            .when(cls.isin("java.lang.String", "java.lang.Long", "java.lang.Boolean"),
                  F.variant_get(value, "$", "string"))
            .when(cls == "java.lang.Double", F.variant_get(value, "$", "double").cast("string"))
            .otherwise(_values_text_of_json(F.to_json(value))))
    return text.cast("binary")


def _values_text_of_json(json: Column) -> Column:
    """Spark's JSON text of a list or map as ``Values.convertToString`` writes it: a string inside is quoted with only
    its backslashes and quotes escaped, so the control characters Spark escapes (``\\t``, ``\\u0012``) are put back
    as they are. An escaped backslash is held as U+0001 meanwhile (JSON text holds no raw control character)."""
    text = F.regexp_replace(json, r"\\\\", "\u0001")
    for escaped, char in (("b", "\b"), ("f", "\f"), ("n", "\n"), ("r", "\r"), ("t", "\t")):
        text = F.regexp_replace(text, r"\\" + escaped, char)
    parts = F.split(text, r"\\u00(?=[01][0-9a-fA-F])")  # \u0000-\u001f: the other control characters

    def backslashes(c: Column) -> Column:  # the held escaped backslashes back (before a decoded U+0001 joins)
        return F.regexp_replace(c, "\u0001", r"\\\\")
    rest = F.transform(F.slice(parts, 2, 1 << 30), lambda p: F.concat(
        F.decode(F.unhex(F.substring(p, 1, 2)), "UTF-8"), backslashes(F.substring(p, 3, 1 << 30))))
    return F.concat(backslashes(F.element_at(parts, 1)), F.array_join(rest, ""))


def java_double_str(x: float) -> str:
    """``Double.toString(x)``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    return _java_fmt(repr(x), x)


def java_float_str(x: float) -> str:
    """``Float.toString((float) x)``: the shortest decimal that round-trips a float32."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return java_double_str(x)
    f32 = _struct.unpack("f", _struct.pack("f", x))[0]
    for digits in range(1, 18):
        s = f"{f32:.{digits}g}"
        if _struct.unpack("f", _struct.pack("f", float(s)))[0] == f32:
            return _java_fmt(s, f32)
    return _java_fmt(repr(f32), f32)


def _java_fmt(shortest: str, x: float) -> str:
    mant, _, exp = shortest.lower().partition("e")
    e = int(exp) if exp else 0
    neg = mant.startswith("-")
    mant = mant.lstrip("-")
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    # decimal exponent such that value = 0.d1d2... * 10^point
    point = len(ip) + e if ip.strip("0") else e - (len(fp) - len(fp.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    sign = "-" if neg else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{point - 1}"


_FLOAT32_MAX = 3.4028234663852886e38
_INT_RE = re.compile(r"^[+-]?\d+$")
_DEC_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_literal_to_string(text: str) -> str:
    """``Values.convertToString(Values.parseString(text))``: what InsertHeader writes for a literal.

    Integers are normalised (``+007`` → ``7``), decimals go through float32 when they fit (``1.50`` →
    ``1.5``), ``true``/``false`` are booleans, JSON-like arrays and maps are re-rendered compactly; any other
    text (dates included, which Connect prints back as they were written) is kept as it is.
    """
    t = text.strip()
    if _INT_RE.match(t):
        return str(int(t))
    if _DEC_RE.match(t):
        v = float(t)
        if abs(v) <= _FLOAT32_MAX:
            return java_float_str(v)
        return java_double_str(v)
    if t.lower() in ("true", "false"):
        return t.lower()
    if (t.startswith("[") and t.endswith("]")) or (t.startswith("{") and t.endswith("}")):
        try:
            return _render(json.loads(t))
        except ValueError:
            return text
    return text


def _render(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_float_str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ",".join(_render(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_render(k) + ":" + _render(x) for k, x in v.items()) + "}"
    return str(v)
