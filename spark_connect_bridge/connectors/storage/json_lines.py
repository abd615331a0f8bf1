"""JSON text of Arrow values as Kafka's ``JsonConverter`` writes them with ``schemas.enable=false`` (what Confluent's
``JsonFormat`` puts on each line of an object), computed a whole array at a time with Arrow kernels.

* a struct read with a schema is an object with every field in schema order, a null field ``null``; a struct read
  from schemaless messages is the map Kafka's converter made of it: its null fields are left out (our struct holds
  the union of the keys seen, so a key absent from a message is a null field here);
* a map with string keys is an object, any other map an array of ``[key, value]`` pairs (Connect's rule);
* a list is an array; a string is quoted and escaped (``\\"``, ``\\\\``, ``\\n``, ``\\u0001``, non-ASCII as is,
  as Jackson writes it); a boolean ``true``/``false``; integers as they are;
* a float or a double is Java's ``Double.toString`` (``1.0``, ``1.0E10``); NaN and the infinities are quoted
  (Jackson's default);
* a timestamp is its epoch milliseconds, a date its epoch days (Connect's Timestamp and Date logical types);
* bytes are base64 (Jackson's ``byte[]``); a decimal is the base64 of its unscaled two's-complement bytes
  (``decimal.format=BASE64``, the converter's default) or its plain text (``NUMERIC``).

Bytes and BASE64 decimals take one Python call per value (rare in JSON objects); everything else is kernels.

>>> import pyarrow as pa
>>> json_text(pa.array([{"n": 1, "s": 'a"b'}, None])).to_pylist()
['{"n":1,"s":"a\\\\"b"}', 'null']
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...core.connect_text import java_floating_text

__all__ = ["json_text"]

_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"),
            ("\f", "\\f"))
_OTHER_CONTROL = "[\\x00-\\x07\\x0b\\x0e-\\x1f]"
_NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\]'
#: Jackson's escapes (``JsonGenerator``'s defaults): the short ones, every other control character as ``\\u00XX``.
_JACKSON_ESCAPES = {**{code: f"\\u{code:04X}" for code in range(0x20)}, **{ord(c): e for c, e in _ESCAPES}}


def json_text(values: Any, *, schemaless: bool = False, decimal_numeric: bool = False) -> Any:
    """The JSON text of each value of ``values`` (an Arrow array); ``null`` for a null value (never a null)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pc.fill_null(_json(values, schemaless, decimal_numeric), "null")


def _json(arr: Any, schemaless: bool, numeric: bool) -> Any:
    """The JSON text of each value; null where the value is null (the caller decides what a null prints)."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _quoted(arr.cast(pa.string()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _quoted(pa.array([None if v is None else base64.b64encode(v).decode("ascii")
                                 for v in arr.cast(pa.binary()).to_pylist()], pa.string()))
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_integer(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_floating(t):
        text = java_floating_text(arr)
        special = pc.fill_null(pc.is_in(text, pa.array(["NaN", "Infinity", "-Infinity"])), False)
        return pc.if_else(special, pc.binary_join_element_wise('"', text, '"', ""), text)
    if pa.types.is_decimal(t):
        if numeric:
            return pc.cast(arr, pa.string())
        return _quoted(pa.array([None if v is None else base64.b64encode(_unscaled_bytes(v, t.scale)).decode()
                                 for v in arr.to_pylist()], pa.string()))
    if pa.types.is_timestamp(t):
        return pc.cast(_epoch_millis(arr), pa.string())
    if pa.types.is_date(t):
        return pc.cast(pc.cast(arr.cast(pa.date32()), pa.int32()), pa.string())
    if pa.types.is_struct(t):
        return _struct(arr, schemaless, numeric)
    if pa.types.is_map(t):
        if pa.types.is_string(arr.keys.type) or pa.types.is_large_string(arr.keys.type):
            entries = pc.binary_join_element_wise(_json(arr.keys, schemaless, numeric),
                                                  _or_null(_json(arr.items, schemaless, numeric)), ":")
            return _enclosed(arr, pa.ListArray.from_arrays(arr.offsets, entries), "{", "}")
        pairs = pc.binary_join_element_wise("[", _or_null(_json(arr.keys, schemaless, numeric)), ",",
                                            _or_null(_json(arr.items, schemaless, numeric)), "]", "")
        return _enclosed(arr, pa.ListArray.from_arrays(arr.offsets, pairs), "[", "]")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        elements = _or_null(_json(arr.values, schemaless, numeric))
        return _enclosed(arr, type(arr).from_arrays(arr.offsets, elements), "[", "]")
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    raise TypeError(f"No JSON text for Arrow type {t}")


def _epoch_millis(arr: Any) -> Any:
    """The epoch milliseconds of timestamps, floored (a ``java.util.Date``'s, Spark's ``unix_millis``): a time
    before 1970 with a fraction of a millisecond is in the millisecond before it, not after."""
    divisor = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}[arr.type.unit]
    raw = pc.cast(arr, pa.int64())
    if divisor == 0:
        return pc.multiply(raw, 1000)
    if divisor == 1:
        return raw
    quotient = pc.divide(raw, divisor)  # integer division truncates toward zero
    below = pc.greater(pc.multiply(quotient, divisor), raw)  # a negative time with a fraction
    return pc.subtract(quotient, pc.cast(below, pa.int64()))


def _unscaled_bytes(value: Any, scale: int) -> bytes:
    unscaled = int(value.scaleb(scale))
    return unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)


def _quoted(text: Any) -> Any:
    if not pc.any(pc.fill_null(pc.match_substring_regex(text, _NEEDS_ESCAPE), False)).as_py():
        return pc.binary_join_element_wise('"', text, '"', "")  # the common case: one scan
    if pc.any(pc.fill_null(pc.match_substring_regex(text, _OTHER_CONTROL), False)).as_py():
        # The rest of the control characters are \\u00XX (upper-case hex, as Jackson writes them): rare enough for
        # one Python call per value.
        return pa.array([None if v is None else '"' + v.translate(_JACKSON_ESCAPES) + '"' for v in text.to_pylist()],
                        pa.string())
    for plain, escaped in _ESCAPES:
        if pc.any(pc.fill_null(pc.match_substring(text, plain), False)).as_py():
            text = pc.replace_substring(text, plain, escaped)
    return pc.binary_join_element_wise('"', text, '"', "")


def _or_null(text: Any) -> Any:
    return pc.fill_null(text, "null")


def _enclosed(arr: Any, parts: Any, open_: str, close: str) -> Any:
    joined = pc.binary_join(parts, ",")
    text = pc.binary_join_element_wise(open_, pc.fill_null(joined, ""), close, "")
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))


def _struct(arr: Any, schemaless: bool, numeric: bool) -> Any:
    n = len(arr)
    entries = []
    for field, child in zip(arr.type, arr.flatten(), strict=True):
        name = json.dumps(field.name, ensure_ascii=False) + ":"
        value = _json(child, schemaless, numeric)
        entries.append(pc.binary_join_element_wise(name, value if schemaless else _or_null(value), ""))
    if not entries:
        body = pa.array([""] * n, pa.string())
    elif not schemaless:  # every entry is there ("name":null for a null field): one join
        body = pc.binary_join_element_wise(*entries, ",") if len(entries) > 1 else entries[0]
    else:
        # Each present entry led by ",", the first comma cut (Arrow's join skipping nulls drops all-null rows).
        led = [pc.fill_null(pc.binary_join_element_wise(",", entry, ""), "") for entry in entries]
        joined = pc.binary_join_element_wise(*led, "") if len(led) > 1 else led[0]
        body = pc.utf8_slice_codeunits(joined, 1)
    text = pc.binary_join_element_wise("{", body, "}", "")
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))
