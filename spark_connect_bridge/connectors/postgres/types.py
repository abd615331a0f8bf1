"""Debezium's PostgreSQL type mapping, and PostgreSQL text values converted in bulk to Arrow arrays.

:func:`type_spec` maps a column's catalog type to a :class:`~..cdc.types.TypeSpec` (Spark type, Connect schema
name and parameters, and how to convert text); :func:`to_arrow` converts a column of text values to its Arrow
array with vectorised Arrow kernels wherever Arrow has one.

Type mapping (Debezium's, ``decimal.handling.mode`` and ``time.precision.mode`` honoured): int2/int4/int8 →
int16/int32/int64; float4/float8; boolean; text types → string; numeric(p,s) → Decimal (``precise``), or
VariableScaleDecimal without a declared precision, or float64/string; date → ``io.debezium.time.Date``
(int32 days; Connect Date in ``connect`` mode); time → MicroTime/Time; timestamp → MicroTimestamp/Timestamp
(Connect Timestamp in ``connect`` mode); timestamptz → ZonedTimestamp ISO-8601 string in UTC with as many
fraction digits as the column's precision (``2024-01-02T03:04:05.500000Z`` for timestamptz(6), no fraction for
timestamptz(0)); interval → MicroDuration (int64 microseconds, a month counted as 365.25/12 days, as
Debezium's ``interval.handling.mode=numeric``) or, in ``string`` mode, an Interval string (PostgreSQL's
ISO-8601 text, not compared with Debezium's); uuid, json, jsonb, xml → named strings; bytea → bytes;
one-dimensional arrays → arrays; any other type → its text form.

Value text is produced by PostgreSQL's output functions in the decoding session, which the connector sets
to ``TimeZone=UTC``, ``DateStyle=ISO``, ``IntervalStyle=iso_8601`` and ``bytea_output=hex``
(:data:`SESSION_OPTIONS`); snapshot reads use ``COPY ... (FORMAT csv)`` in a session with the same settings,
so both paths see the same text.

>>> type_spec("numeric", (12 << 16 | 3) + 4).connect_name
'org.apache.kafka.connect.data.Decimal'
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from ...errors import DataError
from ..cdc.types import TypeSpec

__all__ = ["type_spec", "to_arrow", "text_array", "parse_array_literal", "SESSION_OPTIONS"]

log = logging.getLogger(__name__)

#: libpq ``options`` that make value text independent of the server's and the user's settings.
SESSION_OPTIONS = ("-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 -c bytea_output=hex "
                   "-c extra_float_digits=1")

_INTS = {"int2": "int16", "int4": "int32", "int8": "int64", "oid": "int64", "smallserial": "int16",
         "serial": "int32", "bigserial": "int64"}
_STRINGS = {"text", "varchar", "bpchar", "name", "char", "citext", "inet", "cidr", "macaddr", "macaddr8",
            "money", "tsvector", "tsquery", "point", "line", "lseg", "box", "path", "polygon", "circle",
            "ltree", "hstore", "bit", "varbit", "int4range", "int8range", "numrange", "tsrange", "tstzrange",
            "daterange", "regclass", "pg_lsn", "txid_snapshot"}
_NAMED_STRINGS = {"uuid": "io.debezium.data.Uuid", "json": "io.debezium.data.Json",
                  "jsonb": "io.debezium.data.Json", "xml": "io.debezium.data.Xml"}
#: Debezium's PostgreSQL MicroDuration counts a month as the average month of a Julian year.
DAYS_PER_MONTH_AVG = 365.25 / 12


def _numeric_typmod(typmod: int) -> tuple[int, int] | None:
    if typmod < 4:
        return None
    v = typmod - 4
    return (v >> 16) & 0xFFFF, v & 0xFFFF


def _time_precision(typmod: int) -> int:
    return 6 if typmod < 0 else typmod


def type_spec(typname: str, typmod: int, *, category: str = "", element: tuple[str, int] | None = None,
              is_enum: bool = False, decimal_mode: str = "precise", time_mode: str = "adaptive",
              interval_mode: str = "numeric", binary_mode: str = "bytes") -> TypeSpec:
    """Debezium's PostgreSQL type mapping for a column of type ``typname`` (``pg_type.typname``);
    ``binary_mode`` is ``binary.handling.mode`` (bytea as bytes, or as a base64, base64-url-safe or hex string)."""
    if category == "A" and element is not None:
        el = type_spec(element[0], typmod, decimal_mode=decimal_mode, time_mode=time_mode,
                       interval_mode=interval_mode)
        return TypeSpec("array", element=el, db_type=f"{element[0]}[]")
    t = typname
    if t in _INTS:
        return TypeSpec(_INTS[t], db_type=t)
    if t == "float4":
        return TypeSpec("float32", db_type=t)
    if t == "float8":
        return TypeSpec("float64", db_type=t)
    if t == "bool":
        return TypeSpec("boolean", db_type=t)
    if t == "bytea":
        return TypeSpec("bytes" if binary_mode == "bytes" else f"bytes_{binary_mode}", db_type=t)
    if t == "numeric":
        if decimal_mode == "double":
            return TypeSpec("float64", db_type=t)
        if decimal_mode == "string":
            return TypeSpec("string", db_type=t)
        ps = _numeric_typmod(typmod)
        if ps is None or ps[0] > 38:
            return TypeSpec("varscale", "io.debezium.data.VariableScaleDecimal", db_type=t)
        p, s = ps
        return TypeSpec("decimal", "org.apache.kafka.connect.data.Decimal",
                        (("scale", str(s)), ("connect.decimal.precision", str(p))), p, s, db_type=t)
    if t == "date":
        if time_mode == "connect":
            return TypeSpec("date", "org.apache.kafka.connect.data.Date", db_type=t)
        if time_mode == "isostring":
            return TypeSpec("string", "io.debezium.time.IsoDate", db_type=t)
        return TypeSpec("date_days", "io.debezium.time.Date", db_type=t)
    if t == "time":
        if time_mode == "connect":
            return TypeSpec("time_ms", "org.apache.kafka.connect.data.Time", db_type=t)
        if time_mode == "isostring":
            return TypeSpec("string", "io.debezium.time.IsoTime", db_type=t)
        if time_mode == "adaptive" and _time_precision(typmod) <= 3:
            return TypeSpec("time_ms", "io.debezium.time.Time", db_type=t)
        return TypeSpec("time_us", "io.debezium.time.MicroTime", db_type=t)
    if t == "timetz":
        return TypeSpec("zoned_time", "io.debezium.time.ZonedTime", db_type=t)
    if t == "timestamp":
        if time_mode == "connect":
            return TypeSpec("timestamp_ms", "org.apache.kafka.connect.data.Timestamp", db_type=t)
        if time_mode == "isostring":
            return TypeSpec("iso_ts", "io.debezium.time.IsoTimestamp", db_type=t)
        if time_mode == "adaptive" and _time_precision(typmod) <= 3:
            return TypeSpec("ts_ms", "io.debezium.time.Timestamp", db_type=t)
        return TypeSpec("ts_us", "io.debezium.time.MicroTimestamp", db_type=t)
    if t == "timestamptz":
        return TypeSpec("zoned", "io.debezium.time.ZonedTimestamp", precision=_time_precision(typmod), db_type=t)
    if t == "interval":
        if interval_mode == "string":
            return TypeSpec("string", "io.debezium.time.Interval", db_type=t)
        return TypeSpec("interval_us", "io.debezium.time.MicroDuration", db_type=t)
    if t in _NAMED_STRINGS:
        return TypeSpec("string", _NAMED_STRINGS[t], db_type=t)
    if is_enum:
        return TypeSpec("string", "io.debezium.data.Enum", db_type=t)
    if t not in _STRINGS:
        log.debug("PostgreSQL type %s has no dedicated mapping: captured as its text form", t)
    return TypeSpec("string", db_type=t)


# ------------------------------------------------------------------------------------------ text -> arrow
def _fail(spec: TypeSpec, text: Any, e: Exception) -> DataError:
    return DataError(f"Cannot convert PostgreSQL {spec.db_type or spec.kind} text to {spec.kind}: {e}")


def to_arrow(spec: TypeSpec, text: Any) -> Any:
    """Convert a ``pyarrow`` string array of PostgreSQL text values to the Arrow array of ``spec``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    k = spec.kind
    try:
        if k == "string":
            return text
        if k in ("int16", "int32", "int64", "float32", "float64"):
            return pc.cast(text, {"int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
                                  "float32": pa.float32(), "float64": pa.float64()}[k])
        if k == "boolean":
            return pc.equal(text, "t")
        if k == "decimal":
            return pc.cast(text, pa.decimal128(spec.precision, spec.scale))
        if k == "bytes":
            return _hex_to_binary(text)
        if k in BINARY_TEXT_KINDS:
            return _binary_text(k, text)
        if k in ("date", "date_days"):
            d = pc.cast(text, pa.date32())
            return d if k == "date" else d.cast(pa.int32())
        if k in ("ts_us", "ts_ms", "timestamp_ms"):
            ts = pc.cast(text, pa.timestamp("us"))
            us = ts.cast(pa.int64())
            if k == "ts_us":
                return us
            ms = _floor_div(us, 1000)
            if k == "ts_ms":
                return ms
            return pc.multiply(ms, 1000).cast(pa.timestamp("us", tz="UTC"))
        if k in ("time_us", "time_ms"):
            ts = pc.cast(pc.binary_join_element_wise("1970-01-01 ", text, ""), pa.timestamp("us"))
            us = ts.cast(pa.int64())
            return us if k == "time_us" else _floor_div(us, 1000).cast(pa.int32())
        if k == "zoned":
            return _zoned(text, spec.precision)
        if k == "interval_us":
            return _micro_duration(text)
        if k == "zoned_time":
            return pc.replace_substring_regex(text, pattern=r"\+00$", replacement="Z")
        if k == "iso_ts":
            s = pc.replace_substring_regex(text, pattern=r"^(\d{4,}-\d\d-\d\d) ", replacement=r"\1T")
            return pc.binary_join_element_wise(s, "Z", "")
        if k == "varscale":
            return _varscale(text)
        if k == "array":
            return _array(spec, text)
    except (pa.ArrowInvalid, ValueError) as e:
        raise _fail(spec, text, e) from e
    raise DataError(f"no conversion for {spec}")


def _zoned(text: Any, digits: int) -> Any:
    """'2024-01-02 03:04:05.5+00' -> '2024-01-02T03:04:05.500000Z' for ``digits`` = 6: Debezium writes the
    column's precision in fraction digits, zeros included (the session runs in UTC)."""
    import pyarrow.compute as pc

    s = pc.replace_substring_regex(text, pattern=r"^(\d{4,}-\d\d-\d\d) ", replacement=r"\1T")
    s = pc.replace_substring_regex(s, pattern=r"\+00$", replacement="")
    if digits > 0:
        # a value without a fraction gets one; then every fraction is padded to the column's digits
        s = pc.replace_substring_regex(s, pattern=r"(T\d\d:\d\d:\d\d)$", replacement=r"\1.")
        parts = pc.split_pattern(s, ".", max_splits=1)
        whole, frac = pc.list_element(parts, 0), pc.list_element(parts, 1)
        frac = pc.utf8_slice_codeunits(pc.utf8_rpad(frac, width=digits, padding="0"), 0, digits)
        s = pc.if_else(pc.match_substring_regex(s, r"T\d\d:\d\d:\d\d\."), pc.binary_join_element_wise(
            whole, frac, "."), s)
    return pc.binary_join_element_wise(s, "Z", "")


_INTERVAL = (r"^P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<d>-?\d+)D)?"
             r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?[\d.]+)S)?)?$")


def _micro_duration(text: Any) -> Any:
    """PostgreSQL's ISO-8601 interval text (``IntervalStyle=iso_8601``: 'P1Y2M3DT4H5M6.5S') as Debezium's
    MicroDuration: MicroDuration.durationMicros's arithmetic, in doubles, truncated to a long."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = pc.extract_regex(text, _INTERVAL)
    nums = {name: pc.fill_null(pc.cast(pc.if_else(pc.equal(parts.field(name), ""), None, parts.field(name)),
                                       pa.float64()), 0.0)
            for name in ("y", "mo", "d", "h", "mi", "s")}
    days = pc.add(pc.multiply(pc.add(pc.multiply(nums["y"], 12.0), nums["mo"]), DAYS_PER_MONTH_AVG), nums["d"])
    secs = pc.add(pc.multiply(pc.add(pc.multiply(pc.add(pc.multiply(days, 24.0), nums["h"]), 60.0), nums["mi"]),
                              60.0), nums["s"])
    micros = pc.cast(pc.trunc(pc.multiply(secs, 1e6)), pa.int64())
    return pc.if_else(pc.is_null(text), pa.scalar(None, pa.int64()), micros)


def _floor_div(arr: Any, d: int) -> Any:
    import pyarrow.compute as pc

    q = pc.divide(arr, d)  # integer division truncates toward zero
    neg = pc.and_(pc.less(arr, 0), pc.not_equal(pc.multiply(q, d), arr))
    return pc.if_else(neg, pc.subtract(q, 1), q)


def _hex_to_binary(text: Any) -> Any:
    import pyarrow as pa

    vals = text.to_pylist()
    out: list[bytes | None] = []
    for v in vals:
        if v is None:
            out.append(None)
        elif v.startswith("\\x"):
            out.append(bytes.fromhex(v[2:]))
        else:  # a placeholder for an unchanged TOAST value, as Debezium sends it for bytea
            out.append(v.encode())
    return pa.array(out, pa.binary())


#: bytea as text (binary.handling.mode): kind -> how the bytes are written
BINARY_TEXT_KINDS = {"bytes_base64": "base64", "bytes_base64-url-safe": "base64-url-safe", "bytes_hex": "hex"}


def _binary_text(kind: str, text: Any) -> Any:
    """bytea's hex text (``\\x01ff``) as Debezium's binary.handling.mode writes it: hex (lower case, as
    PostgreSQL's), base64 or base64-url-safe (Java's encoders, padded)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "bytes_hex":
        return pc.replace_substring_regex(text, pattern=r"^\\x", replacement="")
    encode = base64.b64encode if kind == "bytes_base64" else base64.urlsafe_b64encode
    # one encode per value, as bytea's own hex decoding above (pyarrow has no base64 kernel)
    return pa.array([None if v is None else encode(bytes.fromhex(v[2:])).decode() if v.startswith("\\x")
                     else v for v in text.to_pylist()], pa.string())


def jdbc_size(typname: str, typmod: int, element: str | None = None) -> tuple[int, int]:
    """The JDBC column size and decimal digits PostgreSQL's driver (pgjdbc's TypeInfoCache) gives a column of
    type ``typname`` (an array: of its ``element`` type): Debezium's column length and scale, which
    ``column.propagate.source.type`` puts in the schema."""
    t = element or typname
    unknown = 2147483647
    if t in ("time", "timetz", "timestamp", "timestamptz"):
        seconds = {-1: 7, 0: 0, 1: 3}.get(typmod, typmod + 1)
        size = {"time": 8, "timetz": 14, "timestamp": 22, "timestamptz": 28}[t] + seconds
        return size, 6 if typmod == -1 else typmod
    if t == "numeric":
        if typmod == -1:
            return 131089, 0  # no precision: pgjdbc's display size of numeric
        return ((typmod - 4) & 0xFFFF0000) >> 16, (typmod - 4) & 0xFFFF
    if t in ("bpchar", "varchar"):
        return (unknown if typmod == -1 else typmod - 4), 0
    sizes = {"int2": (5, 0), "int4": (10, 0), "oid": (10, 0), "int8": (19, 0), "float4": (8, 8),
             "float8": (17, 17), "char": (1, 0), "bool": (1, 0), "date": (13, 0), "interval": (49, 6 if typmod == -1
                                                                                              else typmod & 0xFFFF),
             "bit": (typmod, 0), "varbit": (unknown if typmod == -1 else typmod, 0)}
    return sizes.get(t, (unknown, 0))


def _varscale(text: Any) -> Any:
    """Debezium's VariableScaleDecimal: ``{scale: int32, value: two's-complement unscaled bytes}``."""
    import pyarrow as pa

    scales, values, valid = [], [], []
    for v in text.to_pylist():
        if v is None or v == "NaN":
            scales.append(0)
            values.append(b"")
            valid.append(False)
            continue
        digits = v.lstrip("-")
        scale = len(digits.split(".", 1)[1]) if "." in digits else 0
        unscaled = int(v.replace(".", ""))
        n = max(1, (unscaled.bit_length() + 8) // 8)
        scales.append(scale)
        values.append(unscaled.to_bytes(n, "big", signed=True))
        valid.append(True)
    return pa.StructArray.from_arrays([pa.array(scales, pa.int32()), pa.array(values, pa.binary())],
                                      fields=[pa.field("scale", pa.int32(), False),
                                              pa.field("value", pa.binary(), False)],
                                      mask=pa.array([not x for x in valid]))


def parse_array_literal(s: str) -> list[str | None]:
    """Parse a one-dimensional PostgreSQL array literal (``{1,NULL,"a,b"}``) into element texts."""
    if not s.startswith("{"):
        # '[1:2]={...}' carries explicit bounds
        eq = s.find("=")
        if eq < 0:
            raise ValueError(f"not an array literal: {s[:40]!r}")
        s = s[eq + 1:]
    if s == "{}":
        return []
    out: list[str | None] = []
    i, n = 1, len(s) - 1
    while i < n:
        c = s[i]
        if c == "{":
            raise ValueError("multi-dimensional arrays are not supported")
        if c == '"':
            i += 1
            buf = []
            while s[i] != '"':
                if s[i] == "\\":
                    i += 1
                buf.append(s[i])
                i += 1
            out.append("".join(buf))
            i += 1
        else:
            j = s.find(",", i)
            j = n if j < 0 else j
            tok = s[i:j].strip()
            out.append(None if tok == "NULL" else tok)
            i = j
        if i < n and s[i] == ",":
            i += 1
    return out


def _array(spec: TypeSpec, text: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    assert spec.element is not None
    offsets = [0]
    flat: list[str | None] = []
    valid = []
    for v in text.to_pylist():
        if v is None:
            valid.append(False)
        else:
            flat.extend(parse_array_literal(v))
            valid.append(True)
        offsets.append(len(flat))
    values = to_arrow(spec.element, pa.array(flat, pa.string()))
    mask = pa.array(np.logical_not(np.array(valid, dtype=bool)))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=mask)


def text_array(values: Sequence[Any]) -> Any:
    """A pyarrow string array from raw text values (``bytes``/``None``), validated as UTF-8 in one kernel."""
    import pyarrow as pa

    return pa.array(values, pa.binary()).cast(pa.string())
