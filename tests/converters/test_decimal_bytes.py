"""Connect's Decimal bytes from Column expressions: the same bytes as Kafka's ``BigDecimal.unscaledValue()
.toByteArray()`` (minimal big-endian two's complement), on both code paths (precision <= 18 and above)."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StructField, StructType

from spark_connect_bridge.converters.decimal_bytes import bytes_to_decimal, decimal_to_bytes


def _kafka_bytes(unscaled: int) -> bytes:
    """Java's BigInteger.toByteArray(): the fewest bytes holding the value and its sign bit."""
    n = 1
    while not -(1 << (8 * n - 1)) <= unscaled < (1 << (8 * n - 1)):
        n += 1
    return unscaled.to_bytes(n, "big", signed=True)


def test_decimal_bytes_are_kafkas_at_every_byte_boundary(spark):
    # Above 18 digits: with p + s + 2 <= 38 the unscaled value is a product Spark does not narrow (20,2), wider
    # it is read from the decimal's text (38,10 and 38,37: their unscaled values of more than 32 digits overflowed
    # the product Spark narrowed to decimal(38,6)).
    types = [DecimalType(2, 0), DecimalType(12, 2), DecimalType(18, 0), DecimalType(18, 6), DecimalType(19, 0),
             DecimalType(20, 2), DecimalType(38, 10), DecimalType(38, 37), DecimalType(38, 0)]
    rows, cases = [], []
    for i, dt in enumerate(types):
        top = 10 ** dt.precision - 1
        values = {0, 1, -1, top, -top}
        for bits in range(7, 8 * 16, 8):  # each side of every byte-count boundary
            values |= {v for b in (1 << bits,) for v in (b - 1, b, -b, -b - 1) if -top <= v <= top}
        for u in sorted(values):
            rows.append((i, Decimal(f"{u}E-{dt.scale}")))  # exact (no 28-digit context)
            cases.append((i, u))
    # One column per type, set on that type's rows only: one small job for every case.
    schema = StructType([StructField(f"d{i}", dt) for i, dt in enumerate(types)])
    df = spark.createDataFrame([tuple(d if j == i else None for j in range(len(types))) for i, d in rows], schema)
    cols = [decimal_to_bytes(F.col(f"d{i}"), dt).alias(f"b{i}") for i, dt in enumerate(types)]
    got = df.select(*cols).collect()
    for (i, u), row in zip(cases, got):
        assert bytes(row[f"b{i}"]) == _kafka_bytes(u), (types[i], u)
    assert all(row[f"b{j}"] is None for (i, _), row in zip(cases, got) for j in range(len(types)) if j != i)


def test_decimal_bytes_read_back_at_every_byte_boundary_and_padded(spark):
    """bytes_to_decimal: Kafka's minimal bytes and the same values sign-padded to 16 bytes read back exactly;
    empty, longer than 16 bytes or out of the type's range is null."""
    types = [DecimalType(12, 2), DecimalType(18, 0), DecimalType(20, 2), DecimalType(38, 10), DecimalType(38, 0)]
    rows, want = [], []
    for i, dt in enumerate(types):
        top = 10 ** dt.precision - 1
        values = {0, 1, -1, top, -top}
        for bits in range(7, 8 * 16, 8):
            values |= {v for v in ((1 << bits) - 1, 1 << bits, -(1 << bits), -(1 << bits) - 1) if -top <= v <= top}
        for u in sorted(values):
            for b in (_kafka_bytes(u), u.to_bytes(16, "big", signed=True)):
                rows.append((i, bytearray(b)))
                want.append(Decimal(f"{u}E-{dt.scale}"))
        for bad in (b"", b"\x00" * 17, (10 ** dt.precision).to_bytes(17, "big", signed=True)[1:]):
            rows.append((i, bytearray(bad)))
            want.append(None)
    df = spark.createDataFrame(rows, "t int, b binary")
    got = df.select(*[F.when(F.col("t") == i, bytes_to_decimal(F.col("b"), dt).cast("string")).alias(f"d{i}")
                      for i, dt in enumerate(types)]).collect()
    for (i, b), w, row in zip(rows, want, got):
        value = row[f"d{i}"]
        assert (None if value is None else Decimal(value)) == w, (types[i], bytes(b).hex())
