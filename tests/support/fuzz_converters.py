"""Hypothesis strategies of the differential fuzzer's ``converters`` family: Kafka's primitive converters
(StringConverter with its ``converter.encoding``, ByteArrayConverter, Short/Integer/Long/Float/Double/BooleanConverter)
and JsonConverter's own options, as key and value converters, over record bytes drawn to hit their edges.

An example is a :class:`Drawn`: the records as :mod:`tests.support.fuzz_records` writes them, with ``settings``, which
maps ``""`` to the converter keys of every chain of the example and a chain's name to the settings drawn for that
chain (Cast's ``spec``, TimestampConverter's ``target.type``, which predicate a Filter tests). One key and
one value converter per example (a DataFrame column holds one type), drawn with their settings:

* a number converter's bytes: the right width (any bits; the type's edges: its minimum, maximum, 0, -1; for float
  and double NaN of several payloads, the infinities, -0.0, the smallest subnormal), a wrong width now and then
  (Kafka: "Size of data received by ... is not N", a converter error), null (a tombstone);
* BooleanConverter's: 0 and 1, another byte, a length other than 1;
* StringConverter's: text in its encoding (UTF-8, UTF-16 with and without a byte order mark, UTF-16LE, ISO-8859-1,
  US-ASCII), numbers, booleans and dates as text (what Cast and TimestampConverter parse), and bytes that are no
  text of the encoding (invalid UTF-8, an odd UTF-16 length, an unpaired surrogate, non-ASCII bytes): Java's
  decoder replaces them with U+FFFD;
* ByteArrayConverter's: any bytes;
* JsonConverter (``schemas.enable=true``) with ``decimal.format`` BASE64 or NUMERIC and ``replace.null.with.default``:
  envelopes of one primitive schema drawn per example (int8 to int64, float, double, boolean, string, bytes, Decimal,
  Date, Time, Timestamp), optional or required (no ``default``: ours reads none, a listed difference), Decimals in
  either format; the output JsonConverter has the input's options.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz_records import DATE, DECIMAL, FIELDS, T0, TIME, TIMESTAMP, _headers

K = "org.apache.kafka.connect.converters."
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"

#: the number converters: class -> (width, struct format of the right width)
NUMBERS = {K + "ShortConverter": (2, ">h"), K + "IntegerConverter": (4, ">i"), K + "LongConverter": (8, ">q"),
           K + "FloatConverter": (4, ">f"), K + "DoubleConverter": (8, ">d")}
_NANS = {4: [b"\x7f\xc0\x00\x00", b"\x7f\xc0\x00\x01", b"\xff\xff\xff\xff", b"\x7f\x80\x00\x01"],
         8: [b"\x7f\xf8\x00\x00\x00\x00\x00\x00", b"\x7f\xf0\x00\x00\x00\x00\x00\x01", b"\xff" * 8]}
_LONG_MAX = 2 ** 63 - 1
ENCODINGS = ("UTF-8", "UTF-16", "UTF-16LE", "ISO-8859-1", "US-ASCII")


def _edges(fmt: str) -> list[bytes]:
    if fmt in (">f", ">d"):
        width = struct.calcsize(fmt)
        values = [0.0, -0.0, 1.5, math.inf, -math.inf, 5e-324 if width == 8 else 1.4e-45, 1e30]
        return [struct.pack(fmt, v) for v in values] + _NANS[width]
    bits = 8 * struct.calcsize(fmt)
    return [struct.pack(fmt, v) for v in (0, -1, 1, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)]


def _number_bytes(fmt: str) -> st.SearchStrategy[bytes]:
    width = struct.calcsize(fmt)
    wrong = st.binary(max_size=width + 2).filter(lambda b: len(b) != width)
    right = [st.binary(min_size=width, max_size=width), st.sampled_from(_edges(fmt))]
    if fmt == ">q":  # epoch milliseconds (TimestampConverter): 1336 to 11,000, and the Spark timestamp's bounds
        right.append(st.one_of(st.integers(-2 * 10 ** 13, 3 * 10 ** 14), st.sampled_from(
            [_LONG_MAX // 1000, -(_LONG_MAX // 1000), _LONG_MAX // 1000 + 1])).map(lambda v: struct.pack(fmt, v)))
    return st.one_of(*right, st.integers(0, 9).flatmap(lambda n: wrong if n == 0 else st.binary(min_size=width,
                                                                                              max_size=width)))


_BOOLEAN_BYTES = st.one_of(st.sampled_from([b"\x00", b"\x01"]),
                           st.sampled_from([b"\x02", b"\xff", b"", b"\x00\x01", b"\x01\x00", b"1"]))
#: text that Cast and TimestampConverter parse (StringConverter's values)
_PARSEABLE = st.sampled_from(["42", "-7", "0", "1.5", "-0.0", "1e3", "true", "false", "TRUE", " 12 ", "2024-01-02",
                              "1969-12-31", "2024-02-30", "9223372036854775807", "128", "NaN", "Infinity"])


def _text_bytes(encoding: str) -> st.SearchStrategy[bytes]:
    ascii_only = encoding == "US-ASCII"
    alphabet = st.characters(max_codepoint=127 if ascii_only else 255 if encoding == "ISO-8859-1" else 0x10FFFF,
                             exclude_categories=["Cs"])
    text = st.one_of(st.text(alphabet, max_size=8), _PARSEABLE)
    python = {"UTF-16": "utf-16-be", "UTF-16LE": "utf-16-le"}.get(encoding, encoding)
    encoded = text.map(lambda t: t.encode(python))
    if encoding == "UTF-16":  # Java's UTF-16 reads a byte order mark and is big-endian without one
        encoded = st.one_of(encoded, text.map(lambda t: t.encode("utf-16")))  # Python's: a mark, little-endian
    broken = {
        "UTF-8": st.sampled_from([b"\xff", b"a\xc3", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                  b"\xc0\xaf", b"\xf0\x9f\x98", b"x\x80y"]),
        "UTF-16": st.sampled_from([b"\x00", b"\x00a\x00", b"\xd8\x00", b"\xdc\x00\x00a", b"\xfe\xff\xd8\x00\x00a",
                                   b"\xff\xfe\x00\xd8"]),
        "UTF-16LE": st.sampled_from([b"a", b"\x00\xd8", b"\x00\xdca\x00", b"a\x00\x00"]),
        "US-ASCII": st.sampled_from([b"\x80", b"a\xffb", b"\xc3\xa9"]),
    }.get(encoding)
    if broken is None:
        return encoded
    return st.one_of(encoded, st.binary(max_size=6), broken)


#: JsonConverter's primitive schemas: name -> (the schema, a strategy of payloads as Kafka writes them)
JSON_PRIMITIVES: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {
    **{name: FIELDS[field] for name, field in (("int8", "i8"), ("int16", "i16"), ("int32", "i32"), ("int64", "i64"),
                                               ("float", "f32"), ("double", "f64"), ("boolean", "bool"),
                                               ("bytes", "by"))},
    "string": ({"type": "string"}, st.one_of(st.text(max_size=8), _PARSEABLE)),
    "decimal": (DECIMAL, st.integers(-(10 ** 12), 10 ** 12)),
    "date": (DATE, st.integers(-20000, 40000)),
    "time": (TIME, st.integers(0, 86_399_999)),
    "timestamp": (TIMESTAMP, st.integers(-10 ** 12, 4 * 10 ** 12)),
}


def _decimal_payload(unscaled: int, numeric: bool) -> Any:
    """A Decimal of scale 2 as JsonConverter writes it: Base64 of minimal two's complement bytes, or a number."""
    if numeric:
        return json.loads(f"{unscaled // 100 if unscaled >= 0 else -((-unscaled) // 100)}.{abs(unscaled) % 100:02d}")
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


@st.composite
def _json_side(draw: st.DrawFn, prefix: str) -> tuple[dict[str, str], st.SearchStrategy[bytes | None]]:
    kind = draw(st.sampled_from(sorted(JSON_PRIMITIVES)))
    schema_part, payloads = JSON_PRIMITIVES[kind]
    optional = draw(st.booleans())
    # no "default": ours reads none (test_json_schema_default_difference_is_pinned, docs/comparison.md)
    schema = {**schema_part, "optional": optional}
    numeric = draw(st.booleans())
    config = {prefix: JSON, f"{prefix}.schemas.enable": "true",
              f"{prefix}.decimal.format": "NUMERIC" if numeric else "BASE64",
              f"{prefix}.replace.null.with.default": draw(st.sampled_from(["true", "false"]))}

    def envelope(payload: Any) -> bytes:
        if kind == "decimal" and payload is not None:
            payload = _decimal_payload(payload, numeric)
        return json.dumps({"schema": schema, "payload": payload}).encode()

    nulls = st.just(None) if optional else st.nothing()
    return config, st.one_of(payloads, nulls).map(envelope)


@st.composite
def converter_side(draw: st.DrawFn, prefix: str) -> tuple[dict[str, str], st.SearchStrategy[bytes | None]]:
    """A converter for ``prefix`` (``key.converter`` or ``value.converter``) with its settings, and a strategy of
    the bytes of its records (not null: :func:`converter_cases` draws the tombstones)."""
    kind = draw(st.sampled_from([STRING, K + "ByteArrayConverter", *NUMBERS, K + "BooleanConverter", JSON]))
    if kind == JSON:
        config, data = draw(_json_side(prefix))
    elif kind == STRING:
        encoding = draw(st.sampled_from(ENCODINGS))
        config = {prefix: kind} if encoding == "UTF-8" and draw(st.booleans()) else \
            {prefix: kind, f"{prefix}.converter.encoding": encoding}
        data = _text_bytes(encoding)
    elif kind in NUMBERS:
        config, data = {prefix: kind}, _number_bytes(NUMBERS[kind][1])
    elif kind == K + "BooleanConverter":
        config, data = {prefix: kind}, _BOOLEAN_BYTES
    else:
        config, data = {prefix: kind}, st.binary(max_size=8)
    return config, data


def edge_cases(prefix: str) -> dict[str, tuple[dict[str, str], list[bytes | None]]]:
    """Every converter with the edges of its bytes, for ``prefix`` (``key.converter``/``value.converter``): name ->
    (its config, its records' bytes: the first not null, a tombstone last). CI's sweep over every converter."""
    out: dict[str, tuple[dict[str, str], list[bytes | None]]] = {}
    for kind, (width, fmt) in NUMBERS.items():
        out[kind.rsplit(".", 1)[-1]] = ({prefix: kind}, [*_edges(fmt), b"\x01" * (width + 1), b"", None])
    out["BooleanConverter"] = ({prefix: K + "BooleanConverter"}, [b"\x01", b"\x00", b"\x02", b"", b"\x00\x01", None])
    out["ByteArrayConverter"] = ({prefix: K + "ByteArrayConverter"}, [b"\x00\xff", b"", None])
    texts = ["h\u00e9 \u20ac", "42", "\U0001F600", ""]
    for encoding, broken in (("UTF-8", [b"a\xffb", b"\xed\xa0\x80", b"\xf0\x9f\x98"]),
                             ("UTF-16", [b"\x00", b"\x00a\xd8\x00\x00b", b"\xff\xfeh\x00"]),
                             ("US-ASCII", [b"a\x80\xff"]), ("ISO-8859-1", [b"\xe9\xff"])):
        python = {"UTF-16": "utf-16-be"}.get(encoding, encoding)
        valid = [t.encode(python, errors="replace") for t in texts]
        out[f"StringConverter-{encoding}"] = ({prefix: STRING, f"{prefix}.converter.encoding": encoding},
                                              [*valid, *broken, None])
    for numeric in (False, True):
        envelopes = [json.dumps({"schema": {**DECIMAL, "optional": True},
                                 "payload": None if v is None else _decimal_payload(v, numeric)}).encode()
                     for v in (1025, -1, 0, 10 ** 20, None)]
        out[f"JsonConverter-{'NUMERIC' if numeric else 'BASE64'}"] = (
            {prefix: JSON, f"{prefix}.decimal.format": "NUMERIC" if numeric else "BASE64"}, [*envelopes, None])
    return out


#: a chain's settings drawn per example: chain name -> the settings' strategy (merged over the chain's config)
CAST_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string")
TIMESTAMP_TARGETS = st.sampled_from([
    {"target.type": "string", "format": "yyyy-MM-dd"}, {"target.type": "unix"},
    {"target.type": "Timestamp", "format": "yyyy-MM-dd"}, {"target.type": "Date", "format": "yyyy-MM-dd"},
    {"target.type": "Time"}, {"target.type": "unix", "format": "yyyy-MM-dd", "unix.precision": "seconds"}])


class Drawn(list[dict[str, Any]]):
    """An example's records, with the settings drawn for it (``settings``: ``""`` -> the keys of every chain, a
    chain's name -> its own); the fuzz test merges them over each chain's config."""

    def __init__(self, records: list[dict[str, Any]], settings: dict[str, dict[str, str]]) -> None:
        super().__init__(records)
        self.settings = settings

    def __repr__(self) -> str:
        return f"Drawn({list(self)!r}, settings={self.settings!r})"


@st.composite
def converter_cases(draw: st.DrawFn, max_records: int = 6, min_records: int = 1) -> Drawn:
    """One example of the ``converters`` family (see the module's docstring)."""
    key_config, keys = draw(converter_side("key.converter"))
    value_config, values = draw(converter_side("value.converter"))
    n = draw(st.integers(min_records, max_records))
    # JsonConverter's type is read from the batch's envelopes at plan time: its first record has one (a batch of
    # tombstones only has no type to read, listed in docs/comparison.md); a primitive converter's type is fixed
    key_first = JSON in key_config.values()
    value_first = JSON in value_config.values()

    def maybe_null(data: st.SearchStrategy[bytes | None], i: int, first: bool) -> bytes | None:
        return None if (i > 0 or not first) and draw(st.integers(0, 5)) == 0 else draw(data)

    records = [{"key": maybe_null(keys, i, key_first), "value": maybe_null(values, i, value_first),
                "topic": draw(st.sampled_from(["orders", "users"])), "partition": draw(st.integers(0, 2)),
                "offset": 100 + i, "timestamp": T0 + draw(st.integers(0, 10 ** 6)), "headers": _headers(draw)}
               for i in range(n)]
    predicate = draw(st.sampled_from(["p-header", "p-tomb", "p-topic"]))
    drawn = {
        "": {**key_config, **value_config},
        "prim-cast": {"transforms.s0.spec": draw(st.sampled_from(CAST_TYPES))},
        "prim-key-cast": {"transforms.s0.spec": draw(st.sampled_from(CAST_TYPES))},
        "prim-timestamp": {f"transforms.s0.{k}": v for k, v in draw(TIMESTAMP_TARGETS).items()},
        "prim-filter": {"transforms.s0.predicate": predicate, "transforms.s0.negate": draw(
            st.sampled_from(["true", "false"]))},
    }
    return Drawn(records, drawn)
