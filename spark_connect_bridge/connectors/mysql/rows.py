"""Row images of many binlog row events decoded at once, with numpy, into Arrow arrays.

A rows event holds one or more row images (two per row for an update: before, after). Each image is a null
bitmap followed by the values of the non-null columns, fixed-size or length-prefixed by column type. Images of
one event follow each other, so where one starts depends on the previous one's length; images of *different*
events do not. :func:`split_images` therefore walks all events of one table map together, one image per event
per round ("lanes"): a chunk of single-row events (the usual OLTP binlog) is one round of a few numpy
operations per column, a chunk of 80-row events (a multi-row INSERT cut at ``binlog_row_event_max_size``) 80
rounds over many lanes. Then :func:`column_values` turns each column's spans into a natural Arrow array
(:func:`~.types.natural_type`): integers, floats, DECIMAL, temporal types by bit arithmetic on whole columns;
strings and blobs by one gather; only MySQL's binary JSON goes value by value (through python-mysql-replication's
parser).

>>> images = split_images(buf, table_map, row_starts, ends, per_row)              # doctest: +SKIP
>>> column_values(buf, table_map, 0, spec, images.columns[0])                    # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...errors import DataError
from ..cdc.types import TypeSpec
from .binlog import TableMap
from .types import mysql_type, natural_type

__all__ = ["Images", "split_images", "column_values", "decimal_size"]

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_FIXED = {1: 1, 2: 2, 9: 3, 3: 4, 8: 8, 4: 4, 5: 8, 13: 1, 10: 3, 14: 3, 7: 4, 12: 8, 11: 3}


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return intg // 9 * 4 + _DIG2BYTES[intg % 9] + scale // 9 * 4 + _DIG2BYTES[scale % 9]


def _string_shape(meta: int) -> tuple[int, int, int]:
    """(real type, fixed width, length prefix) of a STRING column's metadata (CHAR, BINARY, ENUM, SET)."""
    b0, b1 = meta >> 8, meta & 0xFF
    if b0 in (247, 248):
        return b0, b1, 0
    max_length = ((((b0 >> 4) & 0x3) ^ 0x3) << 8) | b1
    return 254, 0, 1 if max_length < 256 else 2


def shape(column_type: int, meta: int) -> tuple[int, int]:
    """(fixed width, length prefix bytes) of a column's values in a row image."""
    t = column_type
    if t in _FIXED:
        return _FIXED[t], 0
    if t == 19:
        return 3 + (meta + 1) // 2, 0
    if t == 18:
        return 5 + (meta + 1) // 2, 0
    if t == 17:
        return 4 + (meta + 1) // 2, 0
    if t == 246:
        return decimal_size(meta & 0xFF, meta >> 8), 0
    if t == 16:
        return ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8, 0
    if t in (15, 253):
        return 0, 1 if meta < 256 else 2
    if t in (254, 247, 248):
        _, width, prefix = _string_shape(meta)
        return width, prefix
    if t in (252, 245, 255):
        return 0, meta
    raise DataError(f"binlog column type {t} is not supported")


@dataclass
class Images:
    """Row images in stream order: ``event``/``row``/``image`` say where each came from (index of its event in
    the group, row within the event, 0 = first image, 1 = after image of an update); ``columns[j]`` holds the
    (starts, lengths, nulls) of column ``j`` of every image."""

    event: Any
    row: Any
    image: Any
    columns: list[tuple[Any, Any, Any]]


def split_images(buf: Any, tmap: TableMap, row_starts: Any, ends: Any, per_row: Any) -> Images:
    """Every image of the events whose rows span ``[row_starts[i], ends[i])`` of ``buf`` (uint8 numpy),
    ``per_row[i]`` images per row (2 for updates)."""
    import numpy as np

    ncols = len(tmap.types)
    shapes = [shape(t, m) for t, m in zip(tmap.types, tmap.meta)]
    nb = (ncols + 7) // 8
    lanes = len(row_starts)
    cur = np.asarray(row_starts, dtype=np.int64).copy()
    ends = np.asarray(ends, dtype=np.int64)
    per_row = np.asarray(per_row, dtype=np.int64)
    image_no = np.zeros(lanes, dtype=np.int64)
    row_no = np.zeros(lanes, dtype=np.int64)
    ev_parts, row_parts, img_parts = [], [], []
    cols: list[list[list[Any]]] = [[[], [], []] for _ in range(ncols)]
    active = np.flatnonzero(cur < ends)
    limit = len(buf)
    while active.size:
        base = cur[active]
        c = base + nb
        for j in range(ncols):
            isnull = ((buf[base + (j >> 3)] >> (j & 7)) & 1).astype(bool)
            fixed, prefix = shapes[j]
            if fixed:
                length = np.where(isnull, 0, fixed)
                start = c
            else:
                safe = np.where(isnull, 0, c)
                length = buf[safe].astype(np.int64)
                for k in range(1, prefix):
                    length |= buf[safe + k].astype(np.int64) << (8 * k)
                length = np.where(isnull, 0, length)
                c = c + np.where(isnull, 0, prefix)
                start = c
            cols[j][0].append(start)
            cols[j][1].append(length)
            cols[j][2].append(isnull)
            c = c + length
        if (c > ends[active]).any() or (c > limit).any():
            raise DataError(f"A row image of {tmap.database}.{tmap.table} runs past its event: the table map does "
                            f"not describe these rows (binlog_row_image must be FULL)")
        ev_parts.append(active)
        row_parts.append(row_no[active])
        img_parts.append(image_no[active])
        cur[active] = c
        image_no[active] += 1
        done_row = active[image_no[active] == per_row[active]]
        row_no[done_row] += 1
        image_no[done_row] = 0
        active = active[cur[active] < ends[active]]
    if not ev_parts:
        empty = np.zeros(0, dtype=np.int64)
        return Images(empty, empty, empty, [(empty, empty, np.zeros(0, dtype=bool)) for _ in range(ncols)])
    ev, rw, im = np.concatenate(ev_parts), np.concatenate(row_parts), np.concatenate(img_parts)
    order = np.lexsort((im, rw, ev))
    columns = [(np.concatenate(s)[order], np.concatenate(ln)[order], np.concatenate(nl)[order]) for s, ln, nl in cols]
    return Images(ev[order], rw[order], im[order], columns)


# ------------------------------------------------------------------------------------------------ values
def _gather(buf: Any, starts: Any, width: int, nulls: Any) -> Any:
    """(n, width) bytes at ``starts`` (rows of nulls read from 0)."""
    import numpy as np

    safe = np.where(nulls, 0, starts)
    return buf[safe[:, None] + np.arange(width)]


def _uint_le(m: Any) -> Any:
    import numpy as np

    out = np.zeros(len(m), dtype=np.uint64)
    for k in range(m.shape[1]):
        out |= m[:, k].astype(np.uint64) << np.uint64(8 * k)
    return out


def _uint_be(m: Any) -> Any:
    import numpy as np

    out = np.zeros(len(m), dtype=np.int64)
    for k in range(m.shape[1]):
        out = (out << 8) | m[:, k].astype(np.int64)
    return out


def binary_array(buf: Any, starts: Any, lengths: Any, nulls: Any) -> Any:
    """An Arrow binary array of the spans (null where ``nulls``): ``binary_view`` values pointing into ``buf``
    itself (12 bytes per value gathered here; Arrow copies the rest when the array is cast to ``binary`` or
    ``string``), or a gathered ``binary`` array when ``buf`` is beyond a view's 2 GiB reach."""
    import numpy as np
    import pyarrow as pa

    n = len(starts)
    lengths = np.where(nulls, 0, lengths).astype(np.int64)
    validity = pa.array(~nulls).buffers()[1] if nulls.any() else None
    if len(buf) >= 2**31 or n == 0:
        return _gathered(buf, starts, lengths, nulls, validity)
    # Arrow's view layout, 16 bytes a value: int32 length, then the value inline when it has at most 12 bytes,
    # else its first 4 bytes, the data buffer's index (0) and the int32 offset of the value in it
    views = np.zeros((n, 4), dtype="<i4")
    views[:, 0] = lengths
    head = buf[np.minimum(np.asarray(starts)[:, None] + np.arange(12), len(buf) - 1)]
    short = lengths <= 12
    head[short] = np.where(np.arange(12)[None, :] < lengths[short][:, None], head[short], 0)
    views.view(np.uint8)[:, 4:16] = head
    far = ~short
    views[far, 2] = 0
    views[far, 3] = np.asarray(starts)[far]
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(buf)],
                                 null_count=int(nulls.sum()))


def _gathered(buf: Any, starts: Any, lengths: Any, nulls: Any, validity: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    n = len(starts)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(total)
        data = buf[idx]
    else:
        data = np.zeros(0, dtype=np.uint8)
    kind = pa.large_binary() if total >= 2**31 else pa.binary()
    off = offsets if kind == pa.large_binary() else offsets.astype(np.int32)
    return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(off), pa.py_buffer(data)],
                                 null_count=int(nulls.sum()))


def _decimals(buf: Any, starts: Any, nulls: Any, precision: int, scale: int) -> Any:
    """DECIMAL's binary form as decimal128 (as strings beyond 38 digits)."""
    import numpy as np
    import pyarrow as pa

    size = decimal_size(precision, scale)
    m = _gather(buf, starts, size, nulls).astype(np.uint8)
    negative = (m[:, 0] & 0x80) == 0
    m[:, 0] ^= 0x80
    m[negative] ^= 0xFF
    intg = precision - scale
    parts = [(_DIG2BYTES[intg % 9], intg % 9)] + [(4, 9)] * (intg // 9) + [(4, 9)] * (scale // 9)
    if scale % 9:
        parts.append((_DIG2BYTES[scale % 9], scale % 9))
    if precision <= 18:
        unscaled = np.zeros(len(m), dtype=np.int64)
        p = 0
        for nbytes, digits in parts:
            if nbytes:
                unscaled = unscaled * (10 ** digits) + _uint_be(m[:, p:p + nbytes])
                p += nbytes
        unscaled = np.where(negative, -unscaled, unscaled)
        words = np.empty((len(m), 2), dtype=np.int64)
        words[:, 0] = unscaled
        words[:, 1] = np.where(unscaled < 0, -1, 0)
        validity = pa.array(~nulls).buffers()[1] if nulls.any() else None
        return pa.Array.from_buffers(pa.decimal128(precision, scale), len(m), [validity, pa.py_buffer(words)],
                                     null_count=int(nulls.sum()))
    values: list[Any] = []
    import decimal

    for row, neg, null in zip(m.tolist(), negative.tolist(), nulls.tolist()):
        if null:
            values.append(None)
            continue
        number, p = 0, 0
        for nbytes, digits in parts:
            if nbytes:
                number = number * 10 ** digits + int.from_bytes(bytes(row[p:p + nbytes]), "big")
                p += nbytes
        values.append(decimal.Decimal((1 if neg else 0, tuple(int(d) for d in str(number)), -scale)))
    typ = pa.decimal128(precision, scale) if precision <= 38 else pa.string()
    return pa.array(values if precision <= 38 else [None if v is None else str(v) for v in values], typ)


def _fraction(m: Any, fsp: int) -> Any:
    """Microseconds of a temporal value's fractional part (big-endian, (fsp + 1) // 2 bytes)."""
    import numpy as np

    nbytes = (fsp + 1) // 2
    if not nbytes:
        return np.zeros(len(m), dtype=np.int64)
    raw = _uint_be(m)
    return raw * {1: 10_000, 2: 100, 3: 1}[nbytes]


def _days(year: Any, month: Any, day: Any) -> Any:
    import numpy as np

    months = (year - 1970) * 12 + (np.maximum(month, 1) - 1)
    return months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64) + np.maximum(day, 1) - 1


def _temporal(buf: Any, starts: Any, nulls: Any, column_type: int, meta: int) -> tuple[Any, Any]:
    """Microseconds (DATETIME/TIMESTAMP since the epoch, TIME of the day) or days (DATE), and the rows that
    are null or zero dates."""
    import numpy as np

    width = shape(column_type, meta)[0]
    m = _gather(buf, starts, width, nulls)
    zero = nulls.copy()
    if column_type == 10:  # DATE: day 5 bits, month 4, year 15, little-endian
        v = _uint_le(m).astype(np.int64)
        day, month, year = v & 31, (v >> 5) & 15, v >> 9
        zero |= (month == 0) | (day == 0)
        return _days(year, month, day), zero
    if column_type == 18:  # DATETIME2
        intpart = _uint_be(m[:, :5]) - 0x8000000000
        ymd, hms = intpart >> 17, intpart % (1 << 17)
        ym, day = ymd >> 5, ymd % 32
        year, month = ym // 13, ym % 13
        zero |= (month == 0) | (day == 0)
        seconds = ((hms >> 12) * 60 + ((hms >> 6) % 64)) * 60 + hms % 64
        return (_days(year, month, day) * 86_400 + seconds) * 1_000_000 + _fraction(m[:, 5:], meta), zero
    if column_type == 17:  # TIMESTAMP2: seconds since the epoch, big-endian
        return _uint_be(m[:, :4]) * 1_000_000 + _fraction(m[:, 4:], meta), zero
    if column_type == 19:  # TIME2: packed hour 10 bits, minute 6, second 6 (offset), fraction
        nbytes = (meta + 1) // 2
        raw = _uint_be(m)
        packed = raw - (0x800000 << (8 * nbytes))
        if nbytes:  # the fraction as microseconds, sign-aware (MySQL's my_time_packed_from_binary)
            intpart = packed >> (8 * nbytes)
            frac = packed - (intpart << (8 * nbytes))
            neg = packed < 0
            intpart = np.where(neg & (frac != 0), intpart + 1, intpart)
            frac = np.where(neg & (frac != 0), frac - (1 << (8 * nbytes)), frac)
            frac = frac * {1: 10_000, 2: 100, 3: 1}[nbytes]
        else:
            intpart, frac = packed, np.zeros(len(m), dtype=np.int64)
        sign = np.where((intpart < 0) | ((intpart == 0) & (frac < 0)), -1, 1)
        a = np.abs(intpart)
        seconds = ((a >> 12) % 1024 * 60 + (a >> 6) % 64) * 60 + a % 64
        return sign * (seconds * 1_000_000 + np.abs(frac)), zero
    if column_type == 7:  # TIMESTAMP (old): seconds, little-endian
        return _uint_le(m).astype(np.int64) * 1_000_000, zero
    if column_type == 12:  # DATETIME (old): YYYYMMDDhhmmss as a little-endian integer
        v = _uint_le(m).astype(np.int64)
        d, t = v // 1_000_000, v % 1_000_000
        year, month, day = d // 10_000, d // 100 % 100, d % 100
        zero |= (month == 0) | (day == 0)
        seconds = (t // 10_000 * 60 + t // 100 % 100) * 60 + t % 100
        return (_days(year, month, day) * 86_400 + seconds) * 1_000_000, zero
    if column_type == 11:  # TIME (old): [-]HHMMSS as a signed little-endian 3-byte integer
        v = _uint_le(m).astype(np.int64)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        a = np.abs(v)
        return np.sign(v) * ((a // 10_000 * 60 + a // 100 % 100) * 60 + a % 100) * 1_000_000, zero
    raise DataError(f"binlog column type {column_type} is not a temporal type")


def column_values(buf: Any, tmap: TableMap, j: int, spec: TypeSpec, spans: tuple[Any, Any, Any]) -> Any:
    """Column ``j`` of the images as an Arrow array of ``spec``'s natural type (:func:`~.types.natural_type`)."""
    import numpy as np
    import pyarrow as pa

    spec = mysql_type(spec)
    starts, lengths, nulls = spans
    t, meta = tmap.types[j], tmap.meta[j]
    name = f"{tmap.database}.{tmap.table}.{tmap.names[j]}"
    want = natural_type(spec)
    mask = nulls if nulls.any() else None
    if t in (1, 2, 9, 3, 8):
        width = _FIXED[t]
        v = _uint_le(_gather(buf, starts, width, nulls))
        if spec.unsigned:
            arr = pa.array(v, pa.uint64(), mask=mask)
        else:
            shift = np.uint64(64 - 8 * width)
            arr = pa.array(((v << shift).view(np.int64) >> np.int64(64 - 8 * width)), pa.int64(), mask=mask)
    elif t in (4, 5):
        m = _gather(buf, starts, 4 if t == 4 else 8, nulls)
        arr = pa.array(np.ascontiguousarray(m).view("<f4" if t == 4 else "<f8").ravel(), mask=mask)
    elif t == 13:
        v = buf[np.where(nulls, 0, starts)].astype(np.int32)
        arr = pa.array(np.where(v == 0, 0, v + 1900), pa.int32(), mask=mask)
    elif t == 246:
        arr = _decimals(buf, starts, nulls, meta & 0xFF, meta >> 8)
    elif t in (10, 18, 17, 19, 7, 12, 11):
        values, zero = _temporal(buf, starts, nulls, t, meta)
        arr = pa.array(values, pa.int32() if t == 10 else pa.int64(), mask=zero if zero.any() else None)
    elif t == 16:
        arr = binary_array(buf, starts, np.full(len(starts), shape(t, meta)[0]), nulls)
    elif t in (254, 247, 248) and _string_shape(meta)[0] in (247, 248):
        real, width, _ = _string_shape(meta)
        index = _uint_le(_gather(buf, starts, width, nulls)).astype(np.int64)
        members = spec.values
        if real == 247:
            lookup = np.array(("",) + members, dtype=object)
            arr = pa.array(lookup[np.clip(index, 0, len(members))], pa.string(), mask=mask)
        else:
            uniq, inverse = np.unique(index, return_inverse=True)
            names = np.array([",".join(m for b, m in enumerate(members) if int(u) >> b & 1) for u in uniq],
                             dtype=object)
            arr = pa.array(names[inverse] if len(uniq) else names, pa.string(), mask=mask)
    elif t == 245:  # MySQL's binary JSON
        from pymysqlreplication.json_binary import parse_json

        raw = binary_array(buf, starts, lengths, nulls).to_pylist()
        arr = pa.array([None if v is None else json.dumps(_jsonable(parse_json(v[0], v[1:])), separators=(",", ":"))
                        for v in raw], pa.string())
    else:  # strings and blobs
        arr = binary_array(buf, starts, lengths, nulls)
    if arr.type == want:
        return arr
    try:
        return arr.cast(want)  # text as utf8mb4/utf8mb3: invalid UTF-8 raises below
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise DataError(f"Column {name} (binlog type {t}) cannot be read as {spec.db_type}: {e}. Its type changed "
                        f"after the query started: restart the query to pick up the new schema") from e


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_jsonable(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
