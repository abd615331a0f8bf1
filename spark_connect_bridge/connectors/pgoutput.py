"""PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1), and PostgreSQL text values
converted in bulk to Arrow arrays with Debezium's type mapping.

Two halves, both used by :mod:`spark_connect_bridge.connectors.postgres_cdc`:

* :class:`Decoder` turns the ``data`` column of ``pg_logical_slot_peek_binary_changes(..., 'proto_version',
  '1', ...)`` into change tuples. It keeps only per-call state (relations arrive again in every call, see
  SYSTEMS.md §1), selects whole transactions by the LSN of their commit record, and leaves column values as
  the raw text bytes PostgreSQL sent: per-message work is a few ``struct`` unpacks and slices (pure-Python
  decoding costs ~6.7 µs per message; everything else is done per column, in bulk).
* :func:`type_spec` maps a column's catalog type to a :class:`TypeSpec` (Spark type, Connect schema name and
  parameters, and how to convert text); :func:`to_arrow` converts a column of text values to its Arrow array
  with vectorised Arrow kernels wherever Arrow has one.

Value text is produced by PostgreSQL's output functions in the decoding session, which the connector sets
to ``TimeZone=UTC``, ``DateStyle=ISO``, ``IntervalStyle=iso_8601`` and ``bytea_output=hex``; snapshot reads
use ``COPY ... (FORMAT csv)`` in a session with the same settings, so both paths see the same text.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataError

__all__ = ["Relation", "Decoder", "decode_tuple", "UNCHANGED", "TypeSpec", "type_spec", "to_arrow",
           "parse_array_literal", "PG_EPOCH_US", "SESSION_OPTIONS"]

log = logging.getLogger(__name__)

#: Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
PG_EPOCH_US = 946_684_800_000_000
#: libpq ``options`` that make value text independent of the server's and the user's settings.
SESSION_OPTIONS = ("-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 -c bytea_output=hex "
                   "-c extra_float_digits=1")


class _Unchanged:
    """Kind ``'u'``: an unchanged TOASTed value that PostgreSQL did not send."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()

_U16 = struct.Struct(">H").unpack_from
_U32 = struct.Struct(">I").unpack_from
_I32 = struct.Struct(">i").unpack_from
_BEGIN = struct.Struct(">QqI").unpack_from  # final lsn, commit ts, xid
_INT = int.from_bytes


@dataclass
class Relation:
    """An ``R`` message: a table's identity and its columns as the decoding session sees them."""

    relid: int
    schema: str
    table: str
    replident: str
    columns: list[tuple[int, str, int, int]]  # (flags, name, type oid, typmod)

    @property
    def names(self) -> list[str]:
        return [c[1] for c in self.columns]


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end].decode(), end + 1


def _relation(data: bytes) -> Relation:
    relid = _U32(data, 1)[0]
    schema, pos = _cstring(data, 5)
    table, pos = _cstring(data, pos)
    replident = chr(data[pos])
    ncols = _U16(data, pos + 1)[0]
    pos += 3
    cols = []
    for _ in range(ncols):
        flags = data[pos]
        name, pos = _cstring(data, pos + 1)
        typoid, typmod = _U32(data, pos)[0], _I32(data, pos + 4)[0]
        pos += 8
        cols.append((flags, name, typoid, typmod))
    return Relation(relid, schema, table, replident, cols)


def _tuple(data: bytes, pos: int) -> tuple[tuple, int]:
    """TupleData at ``pos``: ('t' text -> bytes, 'n' -> None, 'u' -> UNCHANGED, 'b' binary -> bytes)."""
    n = (data[pos] << 8) | data[pos + 1]
    pos += 2
    vals: list[Any] = []
    append = vals.append
    for _ in range(n):
        kind = data[pos]
        if kind == 116 or kind == 98:  # 't' / 'b'
            ln = _INT(data[pos + 1:pos + 5], "big")
            pos += 5
            append(data[pos:pos + ln])
            pos += ln
        elif kind == 110:  # 'n'
            append(None)
            pos += 1
        elif kind == 117:  # 'u'
            append(UNCHANGED)
            pos += 1
        else:
            raise DataError(f"pgoutput: unknown tuple column kind {kind!r}")
    return tuple(vals), pos


def decode_tuple(data: bytes, pos: int) -> tuple[tuple, int]:
    """Public name of the TupleData parser (the CDC driver reads signal-table inserts with it)."""
    return _tuple(data, pos)


@dataclass
class Change:
    """One decoded change. ``op`` is ``c``/``u``/``d``/``t``; tuples hold raw text bytes per column of
    ``relation`` (``old`` is the ``K``/``O`` tuple when PostgreSQL sent one)."""

    __slots__ = ("lsn", "new", "old", "old_kind", "op", "relation", "ts_us", "xid")
    relation: Relation
    op: str
    lsn: int
    xid: int
    ts_us: int
    old: tuple | None
    new: tuple | None
    old_kind: str


@dataclass
class Decoder:
    """Decode peeked rows ``(lsn, data)`` into changes of the transactions whose commit record starts in
    ``[lo, hi)``, i.e. whose commit end LSN is in ``(lo, hi]`` when ``lo``/``hi`` are commit end LSNs.

    ``relations`` maps relid to the latest :class:`Relation` seen in this call (every call re-sends them).
    The open transaction's state (``keep``, ``xid``, ``ts``) and ``done`` (a Begin at or past ``hi`` was
    seen) carry over between calls of :meth:`changes`, so the rows may come in chunks, and chunks may
    alternate with :func:`~.pgoutput_bulk.decode_chunk`, which shares this state.
    """

    lo: int
    hi: int | None
    relations: dict[int, Relation] = field(default_factory=dict)
    commits: int = 0
    last_commit_end: int | None = None
    keep: bool = False
    xid: int = 0
    ts: int = 0
    done: bool = False

    def changes(self, rows: Iterable[tuple[int, bytes]]) -> Iterator[Change]:
        if self.done:
            return
        relations = self.relations
        lo, hi = self.lo, self.hi
        keep, xid, ts = self.keep, self.xid, self.ts
        for lsn, data in rows:
            tag = data[0]
            if tag == 66:  # 'B'
                final_lsn, ts, xid = _BEGIN(data, 1)
                if hi is not None and final_lsn >= hi:
                    self.done = True
                    return
                keep = final_lsn >= lo
                ts += PG_EPOCH_US
                self.keep, self.xid, self.ts = keep, xid, ts
            elif tag == 73:  # 'I'
                if keep:
                    new, _ = _tuple(data, 6)
                    yield Change(relations[_U32(data, 1)[0]], "c", lsn, xid, ts, None, new, "")
            elif tag == 85:  # 'U'
                if keep:
                    rel = relations[_U32(data, 1)[0]]
                    kind = data[5]
                    old = None
                    okind = ""
                    pos = 5
                    if kind == 75 or kind == 79:  # 'K' / 'O'
                        old, pos = _tuple(data, 6)
                        okind = chr(kind)
                    new, _ = _tuple(data, pos + 1)
                    yield Change(rel, "u", lsn, xid, ts, old, new, okind)
            elif tag == 68:  # 'D'
                if keep:
                    old, _ = _tuple(data, 6)
                    yield Change(relations[_U32(data, 1)[0]], "d", lsn, xid, ts, old, None, chr(data[5]))
            elif tag == 67:  # 'C'
                if keep:
                    self.commits += 1
                    self.last_commit_end = _INT(data[10:18], "big")
                keep = self.keep = False
            elif tag == 82:  # 'R'
                rel = _relation(data)
                relations[rel.relid] = rel
            elif tag == 84:  # 'T'
                if keep:
                    n = _U32(data, 1)[0]
                    for i in range(n):
                        relid = _U32(data, 6 + 4 * i)[0]
                        yield Change(relations[relid], "t", lsn, xid, ts, None, None, "")
            # 'Y' (type), 'O' (origin), 'M' (message) carry nothing a change event needs.


# --------------------------------------------------------------------------------------------- types
@dataclass(frozen=True)
class TypeSpec:
    """How one PostgreSQL column becomes a Connect/Spark field.

    ``kind`` selects the text conversion; ``connect_name``/``parameters`` go to the Spark field metadata
    (``connect.name``, ``connect.parameters``); ``element`` is the element spec of an array.
    """

    kind: str
    connect_name: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()
    precision: int = 0
    scale: int = 0
    element: TypeSpec | None = None
    pg_type: str = ""

    def spark_type(self) -> Any:
        from pyspark.sql import types as T

        k = self.kind
        simple = {"int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
                  "float32": T.FloatType(), "float64": T.DoubleType(), "boolean": T.BooleanType(),
                  "string": T.StringType(), "bytes": T.BinaryType(), "date": T.DateType(),
                  "timestamp_ms": T.TimestampType(), "date_days": T.IntegerType(), "time_ms": T.IntegerType(),
                  "time_us": T.LongType(), "ts_ms": T.LongType(), "ts_us": T.LongType(),
                  "zoned": T.StringType(), "zoned_time": T.StringType(), "iso_ts": T.StringType()}
        if k in simple:
            return simple[k]
        if k == "decimal":
            return T.DecimalType(self.precision, self.scale)
        if k == "varscale":
            return T.StructType([T.StructField("scale", T.IntegerType(), False),
                                 T.StructField("value", T.BinaryType(), False)])
        if k == "array":
            assert self.element is not None
            return T.ArrayType(self.element.spark_type(), True)
        raise DataError(f"no Spark type for {self}")

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.connect_name:
            meta["connect.name"] = self.connect_name
            meta["connect.version"] = 1
        if self.parameters:
            meta["connect.parameters"] = dict(self.parameters)
        return meta


_INTS = {"int2": "int16", "int4": "int32", "int8": "int64", "oid": "int64", "smallserial": "int16",
         "serial": "int32", "bigserial": "int64"}
_STRINGS = {"text", "varchar", "bpchar", "name", "char", "citext", "inet", "cidr", "macaddr", "macaddr8",
            "money", "tsvector", "tsquery", "point", "line", "lseg", "box", "path", "polygon", "circle",
            "ltree", "hstore", "bit", "varbit", "int4range", "int8range", "numrange", "tsrange", "tstzrange",
            "daterange", "regclass", "pg_lsn", "txid_snapshot"}
_NAMED_STRINGS = {"uuid": "io.debezium.data.Uuid", "json": "io.debezium.data.Json",
                  "jsonb": "io.debezium.data.Json", "xml": "io.debezium.data.Xml",
                  "interval": "io.debezium.time.Interval"}


def _numeric_typmod(typmod: int) -> tuple[int, int] | None:
    if typmod < 4:
        return None
    v = typmod - 4
    return (v >> 16) & 0xFFFF, v & 0xFFFF


def _time_precision(typmod: int) -> int:
    return 6 if typmod < 0 else typmod


def type_spec(typname: str, typmod: int, *, category: str = "", element: tuple[str, int] | None = None,
              is_enum: bool = False, decimal_mode: str = "precise", time_mode: str = "adaptive") -> TypeSpec:
    """Debezium's PostgreSQL type mapping for a column of type ``typname`` (``pg_type.typname``)."""
    if category == "A" and element is not None:
        el = type_spec(element[0], typmod, decimal_mode=decimal_mode, time_mode=time_mode)
        return TypeSpec("array", element=el, pg_type=f"{element[0]}[]")
    t = typname
    if t in _INTS:
        return TypeSpec(_INTS[t], pg_type=t)
    if t == "float4":
        return TypeSpec("float32", pg_type=t)
    if t == "float8":
        return TypeSpec("float64", pg_type=t)
    if t == "bool":
        return TypeSpec("boolean", pg_type=t)
    if t == "bytea":
        return TypeSpec("bytes", pg_type=t)
    if t == "numeric":
        if decimal_mode == "double":
            return TypeSpec("float64", pg_type=t)
        if decimal_mode == "string":
            return TypeSpec("string", pg_type=t)
        ps = _numeric_typmod(typmod)
        if ps is None or ps[0] > 38:
            return TypeSpec("varscale", "io.debezium.data.VariableScaleDecimal", pg_type=t)
        p, s = ps
        return TypeSpec("decimal", "org.apache.kafka.connect.data.Decimal",
                        (("scale", str(s)), ("connect.decimal.precision", str(p))), p, s, pg_type=t)
    if t == "date":
        if time_mode == "connect":
            return TypeSpec("date", "org.apache.kafka.connect.data.Date", pg_type=t)
        if time_mode == "isostring":
            return TypeSpec("string", "io.debezium.time.IsoDate", pg_type=t)
        return TypeSpec("date_days", "io.debezium.time.Date", pg_type=t)
    if t == "time":
        if time_mode == "connect":
            return TypeSpec("time_ms", "org.apache.kafka.connect.data.Time", pg_type=t)
        if time_mode == "isostring":
            return TypeSpec("string", "io.debezium.time.IsoTime", pg_type=t)
        if time_mode == "adaptive" and _time_precision(typmod) <= 3:
            return TypeSpec("time_ms", "io.debezium.time.Time", pg_type=t)
        return TypeSpec("time_us", "io.debezium.time.MicroTime", pg_type=t)
    if t == "timetz":
        return TypeSpec("zoned_time", "io.debezium.time.ZonedTime", pg_type=t)
    if t == "timestamp":
        if time_mode == "connect":
            return TypeSpec("timestamp_ms", "org.apache.kafka.connect.data.Timestamp", pg_type=t)
        if time_mode == "isostring":
            return TypeSpec("iso_ts", "io.debezium.time.IsoTimestamp", pg_type=t)
        if time_mode == "adaptive" and _time_precision(typmod) <= 3:
            return TypeSpec("ts_ms", "io.debezium.time.Timestamp", pg_type=t)
        return TypeSpec("ts_us", "io.debezium.time.MicroTimestamp", pg_type=t)
    if t == "timestamptz":
        return TypeSpec("zoned", "io.debezium.time.ZonedTimestamp", pg_type=t)
    if t in _NAMED_STRINGS:
        return TypeSpec("string", _NAMED_STRINGS[t], pg_type=t)
    if is_enum:
        return TypeSpec("string", "io.debezium.data.Enum", pg_type=t)
    if t not in _STRINGS:
        log.debug("PostgreSQL type %s has no dedicated mapping: captured as its text form", t)
    return TypeSpec("string", pg_type=t)


# ------------------------------------------------------------------------------------------ text -> arrow
def _fail(spec: TypeSpec, text: Any, e: Exception) -> DataError:
    return DataError(f"Cannot convert PostgreSQL {spec.pg_type or spec.kind} text to {spec.kind}: {e}")


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
            # '2024-01-02 03:04:05.123+00' -> '2024-01-02T03:04:05.123Z' (the session runs in UTC)
            s = pc.replace_substring_regex(text, pattern=r"^(\d{4,}-\d\d-\d\d) ", replacement=r"\1T")
            return pc.replace_substring_regex(s, pattern=r"\+00$", replacement="Z")
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


def _floor_div(arr: Any, d: int) -> Any:
    import pyarrow.compute as pc

    q = pc.divide(arr, d)  # integer division truncates toward zero
    neg = pc.and_(pc.less(arr, 0), pc.not_equal(pc.multiply(q, d), arr))
    return pc.if_else(neg, pc.subtract(q, 1), q)


def _hex_to_binary(text: Any) -> Any:
    import pyarrow as pa

    vals = text.to_pylist()
    out = []
    for v in vals:
        if v is None:
            out.append(None)
        elif v.startswith("\\x"):
            out.append(bytes.fromhex(v[2:]))
        else:  # a placeholder for an unchanged TOAST value, as Debezium sends it for bytea
            out.append(v.encode())
    return pa.array(out, pa.binary())


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


Converter = Callable[[Any], Any]
