"""Decimal <-> Connect's Decimal bytes (big-endian two's complement of the unscaled value), as Column
expressions: no UDF. Used by the JsonConverter (``decimal.format=BASE64``) and by the Avro engines.

>>> from decimal import Decimal
>>> from pyspark.sql import functions as F
>>> from pyspark.sql.types import DecimalType
>>> spark.range(1).select(decimal_to_bytes(F.lit(Decimal("10.25")), DecimalType(4, 2)).alias("b")).first().b
b'\\x04\\x01'
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

__all__ = ["decimal_to_bytes", "bytes_to_decimal"]

_TWO64 = 1 << 64
_D0 = "decimal(38,0)"


def _unscaled(col: Column, dt: DecimalType) -> Column:
    """The unscaled integer of a decimal, exactly, as decimal(38,0)."""
    if dt.scale == 0:
        return col.cast(_D0)
    if dt.precision + dt.scale + 2 <= 38:
        # The product's type, decimal(p + s + 2, s), holds every value: Spark narrows none of its scale.
        return (col * F.lit(str(10 ** dt.scale)).cast(f"decimal({dt.scale + 1},0)")).cast(_D0)
    # Wider, Spark would narrow the product to decimal(38, 6) and fail (ANSI) or give null for unscaled values
    # of more than 32 digits. A decimal's text is plain with exactly `scale` fraction digits ("-0.0000000001"
    # for 1E-10 at scale 10): without its point it is the unscaled value.
    return F.replace(col.cast("string"), F.lit("."), F.lit("")).cast(_D0)


def _long_to_bytes(u: Column) -> Column:
    """The minimal two's-complement big-endian bytes of a bigint: its 8 bytes (``hex`` of a negative bigint is its
    two's complement), cut to the n bytes that hold it: n = bits of ``u ^ (u >> 63)`` (``~u`` for a negative ``u``:
    the same byte count, and >= 0) // 8 + 1, the bits counted by ``bin``. No decimal(38,0) arithmetic and no regular
    expression per value (measured: the general form below is most of a Debezium row's serialization), and ``u``
    written 5 times: Spark cannot share it between the references inside a CASE branch (a struct's fields when it is
    not null), so each is generated again; the 7 comparisons this replaced wrote it 43 times, which with a few
    Decimal columns in a Debezium envelope grew the projection's generated method beyond the JVM's 64 KB."""
    v = u.bitwiseXOR(F.shiftright(u, 63))
    n = F.shiftright(F.length(F.bin(v)), 3) + 1
    return F.substr(F.unhex(F.lpad(F.hex(u), 16, "0")), F.lit(9) - n, n)


def decimal_to_bytes(col: Column, dt: DecimalType) -> Column:
    """The minimal two's-complement big-endian bytes of the unscaled value of ``col`` (null stays null)."""
    if dt.precision <= 18:  # the unscaled value fits a bigint (|u| < 10^18 < 2^63)
        return _long_to_bytes((col * F.lit(10 ** dt.scale)).cast("bigint") if dt.scale else col.cast("bigint"))
    u = _unscaled(col, dt)
    two64 = F.lit(str(_TWO64)).cast("decimal(20,0)")
    r = u % two64                                           # truncated: same sign as u, |r| <= |u|
    q = ((u - r) / two64).cast("bigint")                    # exact, and u - r cannot overflow
    hi = F.when(r < 0, q - 1).otherwise(q)
    lo = F.when(r < 0, r + two64).otherwise(r)              # [0, 2^64)
    lo_signed = F.when(lo >= F.lit(str(1 << 63)).cast("decimal(20,0)"), lo - two64).otherwise(lo).cast("bigint")
    hex32 = F.concat(F.lpad(F.hex(hi), 16, "0"), F.lpad(F.hex(lo_signed), 16, "0"))
    minimal = F.regexp_replace(F.regexp_replace(hex32, "^(00)+(?=[0-7])", ""), "^(FF)+(?=[89A-F])", "")
    return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(F.unhex(minimal))


def bytes_to_decimal(col: Column, dt: DecimalType) -> Column:
    """Two's-complement big-endian unscaled bytes -> decimal(p, s); null when empty, longer than 16 bytes or out of
    range. No lambda: the bytes are read as at most two 8-byte halves by ``conv`` (a higher-order function's body
    is evaluated per element without subexpression elimination, so one that reads ``col`` evaluated the whole
    expression behind it, e.g. a message's ``from_json``, once per byte: measured, most of a sink's CPU)."""
    raw = F.hex(col)
    n = F.octet_length(col)
    neg = F.substr(raw, F.lit(1), F.lit(1)) >= F.lit("8")  # the sign bit (hex digits are upper case)
    h = F.when(neg, F.translate(raw, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(raw)  # ~u for u < 0
    lo_len = F.least(n, F.lit(8))
    hi_len = n - lo_len
    lo = F.conv(F.substr(h, hi_len * 2 + 1, lo_len * 2), 16, 10).cast(_D0)  # conv reads 64 bits unsigned
    hi = F.when(hi_len > 0, F.conv(F.substr(h, F.lit(1), hi_len * 2), 16, 10).cast(_D0)) \
        .otherwise(F.lit(0).cast(_D0))
    mag = F.when(n <= 16, F.try_add(F.try_multiply(hi, F.lit(str(_TWO64)).cast("decimal(20,0)")), lo))
    # Negation is done on the text: Spark's decimal negate rounds through a 34-digit context. -u = ~u + 1.
    unscaled = F.when(neg, F.concat(F.lit("-"), F.try_add(mag, F.lit(1).cast(_D0)).cast("string"))) \
        .otherwise(mag.cast("string"))
    text = F.concat(unscaled, F.lit(f"E-{dt.scale}"))
    return F.when(col.isNull() | (n == 0), F.lit(None).cast(dt)).otherwise(text.try_cast(dt))
