"""Kafka Connect's text of a value: the ``toString()`` of the Java object a converter makes of it, computed over an
Arrow array (what Kafka's FileStreamSink writes, one line per record).

* a struct read with a schema is Connect's ``Struct{name=value,...}``: fields in schema order, null fields left out,
  no space after the comma;
* a struct read from schemaless messages (:data:`~spark_connect_bridge.core.records.SCHEMALESS_META`) is the
  ``java.util.HashMap`` Kafka's JsonConverter makes of a JSON object: ``{k=v, k2=v2}`` in the map's hash order (the
  order of its buckets, from each key's ``String.hashCode()`` and the table size the entries need); its null fields
  are left out (a missing field and a null one are one here, where Kafka's map prints ``k=null`` for a null one);
* a list is ``[a, b]``; a map ``{k=v, k2=v2}`` in the order of its entries (Kafka's HashMap would print hash
  order); a null element or map value ``null``;
* a float or a double is Java's ``Float.toString``/``Double.toString`` (``1.0``, ``1.0E10``, ``1.0E-5``,
  ``NaN``, ``Infinity``); a decimal ``BigDecimal.toString()`` (``1.50``, ``1E-7``); a boolean ``true``/``false``;
* a date or a timestamp is ``java.util.Date.toString()`` in a JVM whose time zone is UTC
  (``Thu Jan 01 00:00:00 UTC 1970``: seconds, no fraction);
* bytes are their UTF-8 text (Kafka prints a Java array's identity, ``[B@1b6d3586``, which no one can read back).

Arrow kernels compute it a whole batch at a time; only a float outside 10^-3 to 10^7 and a decimal below 10^-6
(Java's exponent forms) take a Python call each.

>>> import pyarrow as pa
>>> connect_text(pa.array([{"n": 1, "s": None}, None])).to_pylist()
['Struct{n=1}', None]
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["connect_text", "java_floating_text", "java_text_of_json"]

_DATE_FORMAT = "%a %b %d %H:%M:%S UTC %Y"  # java.util.Date.toString(), "EEE MMM dd HH:mm:ss zzz yyyy", in UTC


def connect_text(values: Any, *, schemaless: bool = False) -> Any:
    """The text Kafka Connect prints for each value of ``values`` (an Arrow array), null where the value is null.
    ``schemaless``: structs are the maps Kafka's JsonConverter reads from schemaless messages."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return _text(values, schemaless)


def java_text_of_json(values: Any) -> Any:
    """For JSON texts (an Arrow string array; a schemaless VARIANT's ``to_json``): the ``toString()`` of what Kafka's
    JsonConverter reads from them without a schema: a ``java.util.HashMap`` for an object (``{k=v, k2=null}`` in
    hash order, every entry of the message, null ones too), an ``ArrayList`` for an array (``[a, b]``), a Long for
    an integral number, a Double for any other (``2.5``, ``1.0E10``), a String, ``true``/``false``.

    One ``json.loads`` per value: a JSON value has no type to compute its text from as a whole array. Within one
    hash bucket Kafka's map keeps the message's order, this the VARIANT's (sorted by key)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pa.array([None if v is None else _java_of_json(json.loads(v)) for v in values.to_pylist()], pa.string())


def _java_of_json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_floating(value, False)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_java_of_json(v) for v in value) + "]"
    capacity = 16  # a java.util.HashMap's table after that many puts: doubled each time it is more than 3/4 full
    while len(value) > capacity * 3 // 4:
        capacity *= 2
    keys = sorted(value, key=lambda k: _bucket(k, capacity))  # stable: within a bucket, the order read
    return "{" + ", ".join(f"{k}={_java_of_json(value[k])}" for k in keys) + "}"


def _text(arr: Any, schemaless: bool) -> Any:
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.binary()).cast(pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_integer(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_floating(t):
        return _floating(arr)
    if pa.types.is_decimal(t):
        return _decimal(arr)
    if pa.types.is_date(t):
        return pc.strftime(arr.cast(pa.timestamp("s")), format=_DATE_FORMAT)
    if pa.types.is_timestamp(t):  # the instant (UTC), to the second below it
        seconds = pc.floor_temporal(arr.cast(pa.timestamp(t.unit)), unit="second").cast(pa.timestamp("s"))
        return pc.strftime(seconds, format=_DATE_FORMAT)
    if pa.types.is_struct(t):
        return _map_of_struct(arr) if schemaless else _struct(arr)
    if pa.types.is_map(t):
        entries = pc.binary_join_element_wise(_text(arr.keys, schemaless),
                                              _or_null(_text(arr.items, schemaless)), "=")
        return _enclosed(arr, pa.ListArray.from_arrays(arr.offsets, entries), "{", ", ", "}")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        elements = _or_null(_text(arr.values, schemaless))
        return _enclosed(arr, type(arr).from_arrays(arr.offsets, elements), "[", ", ", "]")
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    return pc.cast(arr, pa.string())


def _or_null(text: Any) -> Any:
    return pc.fill_null(text, "null")


def _enclosed(arr: Any, parts: Any, open_: str, sep: str, close: str) -> Any:
    """``open_ + sep.join(parts) + close`` per row of a list array of texts; null where ``arr`` is null."""
    joined = pc.binary_join(parts, sep)
    text = pc.binary_join_element_wise(open_, pc.fill_null(joined, ""), close, "")
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))


def _joined(parts: list[Any], sep: str, n: int) -> Any:
    """The non-null texts of each row joined by ``sep`` ("" when a row has none). (Arrow's own join skipping nulls
    drops the rows where every part is null: pyarrow 26.)"""
    if not parts:
        return pa.array([""] * n, pa.string())
    led = [pc.fill_null(pc.binary_join_element_wise(sep, part, ""), "") for part in parts]
    joined = pc.binary_join_element_wise(*led, "") if len(led) > 1 else led[0]
    return pc.utf8_slice_codeunits(joined, len(sep))


def _entries(arr: Any, schemaless: bool) -> list[Any]:
    """``name=value`` for each field of a struct array, null where the field (or the struct) is null."""
    return [pc.binary_join_element_wise(f.name, _text(child, schemaless), "=")
            for f, child in zip(arr.type, arr.flatten(), strict=True)]


def _struct(arr: Any) -> Any:
    body = _joined(_entries(arr, False), ",", len(arr))
    text = pc.binary_join_element_wise("Struct{", body, "}", "")
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))


def _map_of_struct(arr: Any) -> Any:
    """A schemaless struct as Kafka's ``java.util.HashMap`` of it prints: ``{k=v, k2=v2}`` in hash order."""
    names = [f.name for f in arr.type]
    entries = _entries(arr, True)
    present = np.zeros(len(arr), dtype=np.int64)
    for entry in entries:
        present += np.asarray(entry.is_valid(), dtype=np.int64)
    # A java.util.HashMap's table after that many puts: 16, doubled each time it is more than 3/4 full.
    capacities = np.full(len(arr), 16, dtype=np.int64)
    while (fuller := present > capacities * 3 // 4).any():
        capacities[fuller] *= 2
    text = pa.nulls(len(arr), pa.string())
    for capacity in np.unique(capacities):
        order = sorted(range(len(names)), key=lambda i: (_bucket(names[i], int(capacity)), i))
        body = _joined([entries[i] for i in order], ", ", len(arr))
        rendered = pc.binary_join_element_wise("{", body, "}", "")
        text = pc.if_else(pa.array(capacities == capacity), rendered, text)
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))


def _bucket(key: str, capacity: int) -> int:
    """The bucket of ``key`` in a ``java.util.HashMap`` of ``capacity``: ``String.hashCode()``, spread."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


#: Arrow's shortest digits of a float that Java prints plain: a decimal exponent from -3 to 6 (or zero)
_JAVA_PLAIN = r"^-?([1-9][0-9]{0,6}(\.[0-9]+)?|0\.0{0,2}[1-9][0-9]*|0)$"


def _floating(arr: Any) -> Any:
    """Java's ``Double.toString``/``Float.toString`` of each value. Arrow's cast prints the same shortest digits,
    plain in Java's plain range, where only the ``.0`` of a whole number is missing; the other values (10^7 and
    above, below 10^-3, NaN, infinities: ``d.dddEn`` in Java) take :func:`_java_floating`, one call each."""
    text = pc.cast(arr, pa.string())
    plain = pc.fill_null(pc.match_substring_regex(text, _JAVA_PLAIN), True)
    text = pc.if_else(pc.match_substring(text, "."), text, pc.binary_join_element_wise(text, ".0", ""))
    if pc.all(plain).as_py():
        return text
    single = pa.types.is_float32(arr.type) or pa.types.is_float16(arr.type)
    return pa.array([t if p else _java_floating(v, single)
                     for v, p, t in zip(arr.to_pylist(), plain.to_pylist(), text.to_pylist(), strict=True)],
                    pa.string())


def java_floating_text(arr: Any) -> Any:
    """Java's ``Double.toString``/``Float.toString`` of each float of ``arr`` (null where null)."""
    return _floating(arr)


def _java_floating(value: float, single: bool) -> str:
    """The shortest digits that read back as the same float (or double), plain from 10^-3 to 10^7, ``d.dddEn``
    outside, always a digit after the point."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    mantissa, exponent = np.format_float_scientific(np.float32(value) if single else value, unique=True).split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    e = int(exponent)
    if digits == "0":
        return sign + "0.0"
    if -3 <= e < 7:
        if e < 0:
            return f"{sign}0.{'0' * (-e - 1)}{digits}"
        return f"{sign}{digits[:e + 1].ljust(e + 1, '0')}.{digits[e + 1:] or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{e}"


def _decimal(arr: Any) -> Any:
    """``BigDecimal.toString()``: plain, but ``dE-n`` when the value is below 10^-6 and the scale above 6."""
    plain = pc.cast(arr, pa.string())
    if arr.type.scale <= 6 or len(arr) == 0:
        return plain
    small = pc.fill_null(pc.less(pc.abs(arr.cast(pa.float64())), 1e-6), False)
    if not pc.any(small).as_py():
        return plain
    texts = [None if v is None else (str(v) if s else p)
             for v, s, p in zip(arr.to_pylist(), small.to_pylist(), plain.to_pylist(), strict=True)]
    return pa.array(texts, pa.string())
