"""Debezium's type mapping for MySQL and MariaDB columns, and the Arrow conversions to it.

A column's :class:`MySqlType` is made from its catalog entry (``information_schema.COLUMNS``) and the settings
(``bigint.unsigned.handling.mode``, ``decimal.handling.mode``, ``time.precision.mode``,
``binary.handling.mode``). Values reach :func:`to_debezium` in a *natural* Arrow form, the same whether they came
from a snapshot query or from the binlog decoder: integers as int64 (uint64 for BIGINT UNSIGNED), DECIMAL as
decimal128 (or strings beyond 38 digits), DATE as int32 days, TIME as int64 microseconds, DATETIME and TIMESTAMP
as int64 microseconds since the epoch (DATETIME read as if in UTC, as Debezium does), YEAR as int32, ENUM and
SET as strings, BIT as big-endian bytes, JSON as text, spatial values as MySQL's internal form (SRID + WKB).

| MySQL | Debezium (Spark) |
|---|---|
| TINYINT, SMALLINT / TINYINT UNSIGNED | int16 |
| MEDIUMINT, INT / SMALLINT, MEDIUMINT UNSIGNED | int32 |
| BIGINT / INT UNSIGNED | int64 |
| BIGINT UNSIGNED | int64 (``long``) or Decimal(20, 0) (``precise``) |
| FLOAT / DOUBLE | float32 / float64 |
| DECIMAL(p, s) | Decimal (``precise``; p > 38: string), float64 (``double``), string (``string``) |
| BIT(1) / BIT(n) | boolean / ``io.debezium.data.Bits`` bytes, little-endian |
| CHAR, VARCHAR, TEXT | string |
| BINARY, VARBINARY, BLOB | bytes, or base64 / base64-url-safe / hex string |
| DATE | ``io.debezium.time.Date`` int32 days (``connect``: Date) |
| TIME(fsp) | ``io.debezium.time.MicroTime`` int64 µs (``adaptive`` with fsp ≤ 3: ``Time`` ms; ``connect``: Time) |
| DATETIME(fsp) | ``Timestamp`` ms (fsp ≤ 3) / ``MicroTimestamp`` µs (``connect``: Timestamp) |
| TIMESTAMP(fsp) | ``io.debezium.time.ZonedTimestamp`` ISO-8601 string in UTC |
| YEAR | ``io.debezium.time.Year`` int32 |
| ENUM / SET | ``io.debezium.data.Enum`` / ``io.debezium.data.EnumSet`` string, ``allowed`` values |
| JSON | ``io.debezium.data.Json`` string |
| POINT | ``io.debezium.data.geometry.Point`` struct ``x``, ``y``, ``wkb``, ``srid`` |
| GEOMETRY, LINESTRING, ... | ``io.debezium.data.geometry.Geometry`` struct ``wkb``, ``srid`` |

>>> type_spec("int", "int(10) unsigned", None, None, None, Settings(...))             # doctest: +SKIP
MySqlType(kind='int64', ..., family='int', unsigned=True, ...)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import DataError
from ..cdc.types import TypeSpec

__all__ = ["MySqlType", "from_python", "from_text", "mysql_type", "natural_type", "source_column_type", "sql_value",
           "to_debezium", "to_text", "type_spec"]

_INTS = {"tinyint": ("int16", "int16"), "smallint": ("int16", "int32"), "mediumint": ("int32", "int32"),
         "int": ("int32", "int64"), "integer": ("int32", "int64"), "bigint": ("int64", "int64")}
_STRINGS = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_BINARIES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
_SPATIAL = ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
            "geometrycollection", "geomcollection")


@dataclass(frozen=True)
class MySqlType(TypeSpec):
    """One column: the shared :class:`~..cdc.types.TypeSpec` (``kind``, ``connect_name``/``parameters``,
    precision, scale) plus what the binlog decoder and the conversion need: ``family`` (how the database stores
    it, and so its natural Arrow form), ``unsigned``, ``binary_mode``, ``values`` (ENUM/SET members)."""

    family: str = ""
    unsigned: bool = False
    binary_mode: str = "bytes"
    values: tuple[str, ...] = ()


def _spec(family: str, kind: str, connect_name: str | None = None, parameters: tuple[tuple[str, str], ...] = (),
          **more: Any) -> MySqlType:
    return MySqlType(kind, connect_name, parameters, family=family, **more)


def mysql_type(spec: TypeSpec) -> MySqlType:
    """A captured column's spec, made by :func:`type_spec` (the shared layout holds it as a TypeSpec)."""
    assert isinstance(spec, MySqlType), spec
    return spec


def _members(column_type: str) -> tuple[str, ...]:
    """``enum('a','b''c')`` -> ('a', "b'c")."""
    body = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", body))


def source_column_type(column_type: str) -> tuple[str, int, int | None]:
    """The type name, length and scale Debezium's DDL parser gives a column of ``COLUMN_TYPE`` ``column_type`` (as
    ``SHOW CREATE TABLE`` writes it): ``int(11) unsigned`` -> ('INT UNSIGNED', 11, None), ``decimal(10,2)`` ->
    ('DECIMAL', 10, 2), ``text`` -> ('TEXT', -1, None); an ENUM's length is 1, a SET's its members and commas
    (Debezium's ColumnDefinitionParserListener). What ``column.propagate.source.type`` puts in the schema.

    >>> source_column_type("int(11) unsigned zerofill")
    ('INT UNSIGNED ZEROFILL', 11, None)
    """
    ct = column_type.strip()
    args = ""
    if "(" in ct:
        args = ct[ct.index("(") + 1:ct.rindex(")")]
        ct = ct[:ct.index("(")] + ct[ct.rindex(")") + 1:]
    name = " ".join(ct.split()).upper()
    if name in ("ENUM", "SET"):
        members = len(_members(column_type))
        return name, (max(0, members * 2 - 1) if name == "SET" else 1), None
    numbers = [a.strip() for a in args.split(",")] if args else []
    if not numbers or not all(n.isdigit() for n in numbers):
        return name, -1, None
    return name, int(numbers[0]), int(numbers[1]) if len(numbers) > 1 else None


def type_spec(data_type: str, column_type: str, precision: int | None, scale: int | None, fsp: int | None,
              settings: Any) -> MySqlType:
    """The spec of a column from ``information_schema.COLUMNS`` (``DATA_TYPE``, ``COLUMN_TYPE``,
    ``NUMERIC_PRECISION``, ``NUMERIC_SCALE``, ``DATETIME_PRECISION``)."""
    dt, ct = data_type.lower(), column_type.lower()
    unsigned = "unsigned" in ct
    tmode = settings.time_mode
    if dt in _INTS:
        if dt == "bigint" and unsigned and settings.bigint_mode == "precise":
            return _spec("int", "decimal", "org.apache.kafka.connect.data.Decimal",
                         (("scale", "0"), ("connect.decimal.precision", "20")), precision=20, unsigned=True,
                         db_type=ct)
        return _spec("int", _INTS[dt][1 if unsigned else 0], unsigned=unsigned, db_type=ct)
    if dt == "float":
        return _spec("float", "float32", db_type=ct)
    if dt in ("double", "real", "double precision"):
        return _spec("float", "float64", db_type=ct)
    if dt in ("decimal", "numeric"):
        p, s = int(precision or 10), int(scale or 0)
        if settings.decimal_mode == "double":
            return _spec("decimal", "float64", precision=p, scale=s, db_type=ct)
        if settings.decimal_mode == "string" or p > 38:
            return _spec("decimal", "string", precision=p, scale=s, db_type=ct)
        return _spec("decimal", "decimal", "org.apache.kafka.connect.data.Decimal",
                     (("scale", str(s)), ("connect.decimal.precision", str(p))), precision=p, scale=s, db_type=ct)
    if dt == "bit":
        n = int(precision or 1)
        if n == 1:
            return _spec("bit", "boolean", precision=1, db_type=ct)
        return _spec("bit", "bytes", "io.debezium.data.Bits", (("length", str(n)),), precision=n, db_type=ct)
    if dt in _STRINGS:
        return _spec("string", "string", db_type=ct)
    if dt in _BINARIES:
        mode = settings.binary_mode
        return _spec("binary", "bytes" if mode == "bytes" else "string", db_type=ct, binary_mode=mode)
    if dt == "date":
        if tmode == "connect":
            return _spec("date", "date", "org.apache.kafka.connect.data.Date", db_type=ct)
        return _spec("date", "int32", "io.debezium.time.Date", db_type=ct)
    if dt == "time":
        f = int(fsp or 0)
        if tmode == "connect":
            return _spec("time", "int32", "org.apache.kafka.connect.data.Time", scale=f, db_type=ct)
        if tmode == "adaptive" and f <= 3:
            return _spec("time", "int32", "io.debezium.time.Time", scale=f, db_type=ct)
        return _spec("time", "int64", "io.debezium.time.MicroTime", scale=f, db_type=ct)
    if dt == "datetime":
        f = int(fsp or 0)
        if tmode == "connect":
            return _spec("datetime", "timestamp_ms", "org.apache.kafka.connect.data.Timestamp", scale=f,
                            db_type=ct)
        if f <= 3:
            return _spec("datetime", "int64", "io.debezium.time.Timestamp", scale=f, db_type=ct)
        return _spec("datetime", "int64", "io.debezium.time.MicroTimestamp", scale=f, db_type=ct)
    if dt == "timestamp":
        return _spec("timestamp", "string", "io.debezium.time.ZonedTimestamp", scale=int(fsp or 0), db_type=ct)
    if dt == "year":
        return _spec("year", "int32", "io.debezium.time.Year", db_type=ct)
    if dt == "enum":
        members = _members(column_type)
        return _spec("enum", "string", "io.debezium.data.Enum", (("allowed", ",".join(members)),),
                        db_type=ct, values=members)
    if dt == "set":
        members = _members(column_type)
        return _spec("set", "string", "io.debezium.data.EnumSet", (("allowed", ",".join(members)),),
                        db_type=ct, values=members)
    if dt == "json":
        return _spec("json", "string", "io.debezium.data.Json", db_type=ct)
    if dt == "point":
        return _spec("geometry", "point", "io.debezium.data.geometry.Point", db_type=ct)
    if dt in _SPATIAL:
        return _spec("geometry", "geometry", "io.debezium.data.geometry.Geometry", db_type=ct)
    # MariaDB's uuid, inet4, inet6 and anything else: its text form (the snapshot reads it as text; the binlog
    # decoder refuses what it cannot turn into that text, naming the column)
    return _spec("string", "string", db_type=ct)


def natural_type(spec: TypeSpec) -> Any:
    """The Arrow type values of ``spec`` have before :func:`to_debezium`."""
    spec = mysql_type(spec)
    import pyarrow as pa

    f = spec.family
    if f == "int":
        return pa.uint64() if spec.unsigned and spec.db_type.startswith("bigint") else pa.int64()
    if f == "float":
        return pa.float32() if spec.kind == "float32" else pa.float64()
    if f == "decimal":
        return pa.decimal128(spec.precision, spec.scale) if spec.precision <= 38 else pa.string()
    if f in ("string", "enum", "set", "json"):
        return pa.string()
    if f in ("binary", "bit", "geometry"):
        return pa.binary()
    if f == "date":
        return pa.int32()
    if f == "year":
        return pa.int32()
    return pa.int64()  # time, datetime, timestamp


def _zoned(us: Any, width: int = 0) -> Any:
    """ISO-8601 strings in UTC from microseconds since the epoch: ``2024-01-02T03:04:05.5Z``, the fraction's
    trailing zeros dropped (as Java's ISO_OFFSET_DATE_TIME prints it); with ``width``, always that many fraction
    digits (``2024-01-02T03:04:05.500000Z``, as Debezium prints a TIMESTAMP(width) read from the binlog)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seconds = pc.strftime(us.cast(pa.timestamp("us")), format="%Y-%m-%dT%H:%M:%S")
    # strftime of a microsecond timestamp appends the fraction to %S: cut it off and add the wanted one
    seconds = pc.utf8_slice_codeunits(seconds, 0, 19)
    frac = pc.subtract(us, pc.multiply(pc.floor(pc.divide(us.cast(pa.float64()), 1e6)).cast(pa.int64()), 1_000_000))
    six = pc.utf8_slice_codeunits(pc.cast(pc.add(frac, 1_000_000), pa.string()), 1, 7)
    if width:
        return pc.binary_join_element_wise(seconds, ".", pc.utf8_slice_codeunits(six, 0, width), "Z", "")
    with_frac = pc.if_else(pc.equal(frac, 0), pa.scalar("", pa.string()),
                           pc.binary_join_element_wise(".", pc.utf8_rtrim(six, characters="0"), ""))
    return pc.binary_join_element_wise(seconds, with_frac, "Z", "")


def _encode_binary(arr: Any, mode: str) -> Any:
    import base64

    import pyarrow as pa

    if mode == "bytes":
        return arr
    values = arr.to_pylist()
    if mode == "hex":
        out = [None if v is None else v.hex() for v in values]
    elif mode == "base64":
        out = [None if v is None else base64.b64encode(v).decode() for v in values]
    else:
        out = [None if v is None else base64.urlsafe_b64encode(v).decode() for v in values]
    return pa.array(out, pa.string())


def _geometry(arr: Any, point: bool) -> Any:
    """MySQL's internal geometry (4-byte little-endian SRID, then WKB) as Debezium's Geometry struct, or its
    Point struct (``x``, ``y`` read from the WKB too)."""
    import struct

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    srid = np.zeros(n, dtype=np.int32)
    xy = np.zeros((n, 2), dtype=np.float64)
    wkb: list[bytes | None] = []
    for i, v in enumerate(arr.to_pylist()):
        if v is None:
            wkb.append(b"")
            continue
        srid[i] = int.from_bytes(v[:4], "little", signed=True)
        wkb.append(v[4:])
        if point and len(v) >= 25:
            xy[i] = struct.unpack_from("<dd" if v[4] == 1 else ">dd", v, 9)
    fields = [pa.field("wkb", pa.binary(), not point), pa.field("srid", pa.int32())]
    arrays = [pa.array(wkb, pa.binary()), pa.array(srid)]
    if point:
        fields = [pa.field("x", pa.float64(), False), pa.field("y", pa.float64(), False), *fields]
        arrays = [pa.array(xy[:, 0]), pa.array(xy[:, 1]), *arrays]
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=pc.is_null(arr))


def to_debezium(spec: TypeSpec, arr: Any, binlog: bool = False) -> Any:
    """``arr`` (natural form, see :func:`natural_type`) as Debezium represents ``spec``'s column (``binlog``:
    decoded from the binlog, where Debezium prints TIMESTAMP(n) with n fraction digits)."""
    spec = mysql_type(spec)
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    f, k = spec.family, spec.kind
    if f == "int":
        if k == "decimal":
            return pa.array([None if v is None else v for v in arr.to_pylist()], pa.decimal128(20, 0))
        target = {"int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64()}[k]
        if arr.type == pa.uint64():  # BIGINT UNSIGNED as long: wraps above 2^63-1, as Debezium's
            return pa.Array.from_buffers(pa.int64(), len(arr), arr.buffers(), arr.null_count, arr.offset)
        return arr.cast(target)
    if f == "float":
        return arr.cast(pa.float32() if k == "float32" else pa.float64())
    if f == "decimal":
        if k == "decimal":
            return arr.cast(pa.decimal128(spec.precision, spec.scale))
        if k == "float64":
            return arr.cast(pa.float64())
        return arr.cast(pa.string())
    if f == "bit":
        if k == "boolean":
            return pa.array([None if v is None else any(v) for v in arr.to_pylist()], pa.bool_())
        # Debezium's Bits: the value's bytes little-endian
        return pa.array([None if v is None else v[::-1] for v in arr.to_pylist()], pa.binary())
    if f in ("string", "enum", "set", "json"):
        return arr.cast(pa.string())
    if f == "binary":
        return _encode_binary(arr.cast(pa.binary()), spec.binary_mode)
    if f == "date":
        return arr.cast(pa.int32()).cast(pa.date32()) if k == "date" else arr.cast(pa.int32())
    if f == "year":
        return arr.cast(pa.int32())
    if f == "time":
        if k == "int64":
            return arr.cast(pa.int64())
        return pc.divide(arr.cast(pa.int64()), 1000).cast(pa.int32())  # milliseconds
    if f == "datetime":
        us = arr.cast(pa.int64())
        if k == "timestamp_ms":
            ms = pc.multiply(pc.divide(us, 1000), 1000)
            return ms.cast(pa.timestamp("us", tz="UTC"))
        if spec.connect_name == "io.debezium.time.Timestamp":
            filled = pc.fill_null(us, 0).to_numpy(zero_copy_only=False)
            return pa.array(np.floor_divide(filled, 1000), pa.int64(),
                            mask=pc.is_null(us).to_numpy(zero_copy_only=False))
        return us
    if f == "timestamp":
        return _zoned(arr.cast(pa.int64()), spec.scale if binlog else 0)
    if f == "geometry":
        return _geometry(arr.cast(pa.binary()), spec.kind == "point")
    raise DataError(f"no conversion for column type {spec.db_type}")


def _days(value: Any) -> int | None:
    import datetime as dt

    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return None  # a zero date ('0000-00-00') pymysql leaves as text


def from_python(spec: TypeSpec, values: list[Any]) -> Any:
    """Python values of a snapshot query (pymysql's conversions, session time zone UTC) in their natural form."""
    spec = mysql_type(spec)
    import datetime as dt

    import pyarrow as pa

    f = spec.family
    typ = natural_type(spec)
    if f == "date":
        return pa.array([_days(v) for v in values], typ)
    if f == "time":
        return pa.array([None if v is None else (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
                         for v in values], typ)
    if f in ("datetime", "timestamp"):
        epoch = dt.datetime(1970, 1, 1)
        return pa.array([(v - epoch) // dt.timedelta(microseconds=1) if isinstance(v, dt.datetime) else None
                         for v in values], typ)
    if f in ("string", "enum", "set", "json"):
        return pa.array([v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v
                         for v in values], typ)
    if f == "decimal" and typ == pa.string():
        return pa.array([None if v is None else str(v) for v in values], typ)
    if f == "bit":
        return pa.array([None if v is None else (v if isinstance(v, bytes) else
                                                 int(v).to_bytes((spec.precision + 7) // 8, "big"))
                         for v in values], typ)
    return pa.array(values, typ)


def to_text(arr: Any) -> list[str | None]:
    """Values in natural form (:func:`natural_type`) as text that :func:`from_text` reads back: binary as hex,
    everything else Arrow's string cast. Incremental snapshot chunks travel in offsets in this form, and keys
    are compared in it."""
    import pyarrow as pa

    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        return [None if v is None else v.hex() for v in arr.to_pylist()]
    return arr.cast(pa.string()).to_pylist()


def from_text(spec: TypeSpec, values: list[str | None]) -> Any:
    """The natural Arrow array of :func:`to_text`'s values."""
    spec = mysql_type(spec)
    import pyarrow as pa

    typ = natural_type(spec)
    if pa.types.is_binary(typ):
        return pa.array([None if v is None else bytes.fromhex(v) for v in values], typ)
    return pa.array(values, pa.string()).cast(typ)


def sql_value(spec: TypeSpec, text: str) -> Any:
    """A query parameter comparable with ``spec``'s column, from :func:`to_text`'s form of its value."""
    spec = mysql_type(spec)
    import datetime as dt

    f = spec.family
    if f == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(text))
    if f in ("datetime", "timestamp"):
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(text))
    if f == "time":
        return dt.timedelta(microseconds=int(text))
    if f in ("binary", "bit", "geometry"):
        return bytes.fromhex(text)
    return text
