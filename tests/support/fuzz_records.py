"""Hypothesis strategies for the differential fuzzer: Kafka records as JsonConverter writes them.

A case is one batch of a topic: one Connect value schema (a struct whose fields come from :data:`FIELDS`: every
Connect type and logical type, each field present or not, optional or required, nested structs, arrays and maps)
and records of it (values that fit the schema, nulls where a field is optional, tombstones, keys, headers).
``schemaless`` cases are the same values as JsonConverter ``schemas.enable=false`` writes them (maps, no schema;
a null field may be absent or present as null). Chains name fields of :data:`FIELDS`; a field a case leaves out
is a missing field to the chain.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

T0 = 1_700_000_000_000
DECIMAL = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
           "parameters": {"scale": "2"}}
DATE = {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}
TIME = {"type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1}
TIMESTAMP = {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}
SUB = {"type": "struct", "name": "Sub", "fields": [{"field": "a", "type": "int32", "optional": True},
                                                    {"field": "b", "type": "string", "optional": True}]}

_I64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
#: field name -> (its Connect schema, without "optional"; a strategy of payload values as JsonConverter writes them)
FIELDS: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {
    "i8": ({"type": "int8"}, st.integers(-128, 127)),
    "i16": ({"type": "int16"}, st.integers(-(2 ** 15), 2 ** 15 - 1)),
    "i32": ({"type": "int32"}, st.integers(-(2 ** 31), 2 ** 31 - 1)),
    "i64": ({"type": "int64"}, _I64),
    "f32": ({"type": "float"}, st.floats(width=32, allow_nan=False, allow_infinity=False)),
    "f64": ({"type": "double"}, st.floats(allow_nan=False, allow_infinity=False)),
    "bool": ({"type": "boolean"}, st.booleans()),
    "s": ({"type": "string"}, st.text(max_size=8)),
    "by": ({"type": "bytes"}, st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode())),
    "dec": (DECIMAL, st.decimals(min_value=-10 ** 9, max_value=10 ** 9, places=2)
            .map(lambda d: base64.b64encode(int(d * 100).to_bytes(8, "big", signed=True).lstrip(b"\x00") or b"\x00")
                 .decode())),
    "date": (DATE, st.integers(-20000, 40000)),
    "time": (TIME, st.integers(0, 86_399_999)),
    "ts": (TIMESTAMP, st.integers(-10 ** 12, 4 * 10 ** 12)),
    "arr": ({"type": "array", "items": {"type": "int32", "optional": True}},
            st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=3)),
    "m": ({"type": "map", "keys": {"type": "string", "optional": False},
           "values": {"type": "string", "optional": True}},
          st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=3)), max_size=2)),
    "sub": (SUB, st.fixed_dictionaries({"a": st.one_of(st.none(), st.integers(-5, 5)),
                                        "b": st.one_of(st.none(), st.text(max_size=3))})),
}


def _decimal_bytes_fix(payload: str) -> str:
    """Kafka writes a Decimal's unscaled value as minimal two's complement bytes."""
    raw = base64.b64decode(payload)
    value = int.from_bytes(raw, "big", signed=True)
    length = max(1, (value.bit_length() + 8) // 8)
    return base64.b64encode(value.to_bytes(length, "big", signed=True)).decode()


@st.composite
def value_schemas(draw: st.DrawFn, names: tuple[str, ...] | None = None, name: str = "fuzz.Value") -> dict[str, Any]:
    """A struct schema of some :data:`FIELDS` (in their order), each optional or required; the struct itself
    optional (tombstones allowed) and named."""
    pool = list(names or FIELDS)
    chosen = [n for n in pool if draw(st.booleans())] or [pool[0]]
    fields = [{**_nested_flags(draw, FIELDS[n][0]), "field": n, "optional": draw(st.booleans())} for n in chosen]
    return {"type": "struct", "fields": fields, "optional": True, "name": name}


def _nested_flags(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """An array's items, a map's keys and values: each optional or required."""
    out = dict(schema)
    for part in ("items", "keys", "values"):
        if part in out:
            out[part] = {**out[part], "optional": draw(st.booleans())}
    return out


def _fit(schema: dict[str, Any], value: Any) -> Any:
    """A drawn array or map without nulls where its items or values are required."""
    if schema["type"] == "array" and not schema["items"]["optional"]:
        return [0 if v is None else v for v in value]
    if schema["type"] == "map" and not schema["values"]["optional"]:
        return {k: "" if v is None else v for k, v in value.items()}
    return value


@st.composite
def payloads(draw: st.DrawFn, schema: dict[str, Any],
             values: dict[str, st.SearchStrategy[Any]] | None = None) -> dict[str, Any]:
    """A payload of ``schema``: each field's value from :data:`FIELDS` (or ``values``, by field name)."""
    out = {}
    for f in schema["fields"]:
        value = _fit(f, draw(values[f["field"]] if values and f["field"] in values else FIELDS[f["field"]][1]))
        if f["field"] == "dec":
            value = _decimal_bytes_fix(value)
        out[f["field"]] = None if f["optional"] and draw(st.integers(0, 3)) == 0 else value
    return out


KEY_SCHEMA = {"type": "string", "optional": True}


def _headers(draw: st.DrawFn) -> list[tuple[str, bytes | None]]:
    values = st.one_of(st.none(), st.sampled_from([b"a", b"x1", b"42", b"-7", b"true", b"hi there"]))
    return draw(st.lists(st.tuples(st.sampled_from(["h1", "h2"]), values), max_size=2))


#: schemaless JSON of any shape (objects in objects and in lists, to a depth of a few levels): a ``deep`` entry
#: that only schemaless records have (Flatten joins its nested names; its keys hold no delimiter of the chains)
NESTED = st.recursive(st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=2), st.floats(-10, 10)),
                      lambda inner: st.one_of(st.lists(inner, max_size=2),
                                              st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)),
                      max_leaves=8)


def _schemaless(draw: st.DrawFn, payload: dict[str, Any]) -> dict[str, Any]:
    """A struct payload as schemaless JSON: a null field is absent from the map or present as null; some have a
    ``deep`` entry (:data:`NESTED`)."""
    out = {k: v for k, v in payload.items() if v is not None or draw(st.booleans())}
    if draw(st.booleans()):
        out["deep"] = draw(NESTED)
    return out


@st.composite
def cases(draw: st.DrawFn, *, schemaless: bool = False, names: tuple[str, ...] | None = None,
          struct_keys: bool = False, max_records: int = 6, min_records: int = 1) -> list[dict[str, Any]]:
    """Records of one topic: the value schema drawn once; keys strings or null (``struct_keys``: structs of
    :data:`FIELDS` too, their schema drawn once, for the key-side SMTs); headers; some tombstones."""
    schema = draw(value_schemas(names))
    key_schema = draw(value_schemas(names, name="fuzz.Key")) if struct_keys else KEY_SCHEMA
    n = draw(st.integers(min_records, max_records))
    records = []
    for i in range(n):
        # the first record carries a value and a key: ours reads the batch's types from its envelopes at plan time
        # (a batch of tombstones only has no type to read; listed in docs/comparison.md)
        tombstone = i > 0 and draw(st.integers(0, 5)) == 0
        payload = None if tombstone else draw(payloads(schema))
        if schemaless and payload is not None:
            payload = _schemaless(draw, payload)
        value = None if payload is None else json.dumps(
            payload if schemaless else {"schema": schema, "payload": payload}).encode()
        if struct_keys:
            key_payload = draw(payloads(key_schema))
            key_payload = _schemaless(draw, key_payload) if schemaless else key_payload
        else:
            key_payload = draw(st.one_of(st.none(), st.sampled_from(["k1", "k2"])))
        key = None if i > 0 and not struct_keys and key_payload is None and draw(st.booleans()) else json.dumps(
            key_payload if schemaless else {"schema": key_schema, "payload": key_payload}).encode()
        records.append({"key": key, "value": value, "topic": draw(st.sampled_from(["orders", "users"])),
                        "partition": draw(st.integers(0, 2)), "offset": 100 + i,
                        "timestamp": T0 + draw(st.integers(0, 10 ** 6)), "headers": _headers(draw)})
    return records


def schemaless_cases(max_records: int = 6, min_records: int = 1) -> st.SearchStrategy[list[dict[str, Any]]]:
    return cases(schemaless=True, max_records=max_records, min_records=min_records)


def struct_key_cases(max_records: int = 6, min_records: int = 1) -> st.SearchStrategy[list[dict[str, Any]]]:
    return cases(struct_keys=True, max_records=max_records, min_records=min_records)


#: Debezium's PostgreSQL connector's source block and transaction block, as its JsonConverter writes them
SOURCE = {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False, "fields": [
    {"field": "version", "type": "string", "optional": False},
    {"field": "connector", "type": "string", "optional": False},
    {"field": "name", "type": "string", "optional": False},
    {"field": "ts_ms", "type": "int64", "optional": False},
    {"field": "db", "type": "string", "optional": False},
    {"field": "schema", "type": "string", "optional": False},
    {"field": "table", "type": "string", "optional": False},
    {"field": "lsn", "type": "int64", "optional": True}]}
TRANSACTION = {"type": "struct", "name": "event.block", "version": 1, "optional": True, "fields": [
    {"field": "id", "type": "string", "optional": False},
    {"field": "total_order", "type": "int64", "optional": False},
    {"field": "data_collection_order", "type": "int64", "optional": False}]}
CDC_TOPIC = "srv.public.t"
CDC_KEY = {"type": "struct", "name": f"{CDC_TOPIC}.Key", "optional": False,
           "fields": [{"field": "id", "type": "int32", "optional": False}]}


#: extra columns of a change event's row: a strategy of (their field schemas, a value strategy per name)
Columns = st.SearchStrategy[tuple[list[dict[str, Any]], dict[str, st.SearchStrategy[Any]]]]


@st.composite
def change_events(draw: st.DrawFn, max_records: int = 6, min_records: int = 1, *, columns: Columns | None = None,
                  topics: tuple[str, ...] = (CDC_TOPIC,)) -> list[dict[str, Any]]:
    """Debezium change events of one table (its row schema drawn once from :data:`FIELDS`, plus ``columns``):
    creates, reads, updates and deletes as envelopes (``before``/``after``/``source``/``op``/``ts_ms``/
    ``transaction``), an update's old row (when there is one) keeping some of the new row's values, a delete
    followed by its tombstone or not, a struct key, headers, each record on one of ``topics`` (tables of one
    schema: shards); the first record an envelope."""
    row = draw(value_schemas(name=f"{CDC_TOPIC}.Value"))
    values: dict[str, st.SearchStrategy[Any]] = {}
    if columns is not None:
        extra, values = draw(columns)
        row = {**row, "fields": row["fields"] + extra}
    envelope = {"type": "struct", "name": f"{CDC_TOPIC}.Envelope", "version": 2, "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {**SOURCE, "field": "source"},
        {**TRANSACTION, "field": "transaction"}, {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True}]}
    records: list[dict[str, Any]] = []
    n = draw(st.integers(min_records, max_records))
    while len(records) < n:
        i = len(records)
        op = draw(st.sampled_from(["c", "r", "u", "d"] if i else ["c", "r", "u"]))
        key = json.dumps({"schema": CDC_KEY, "payload": {"id": draw(st.integers(1, 3))}}).encode()
        after = draw(payloads(row, values)) if op != "d" else None
        before = draw(payloads(row, values)) if op in ("u", "d") and draw(st.booleans()) else None
        if op == "u" and before is not None:  # an update changes some columns (ExtractChangedRecordState)
            before = {k: after[k] if draw(st.booleans()) else v for k, v in before.items()}
        payload = {
            "before": before,
            "after": after,
            "source": {"version": "3.6.1.Final", "connector": "postgresql", "name": "srv", "ts_ms": T0 + i,
                       "db": "db", "schema": "public", "table": "t",
                       "lsn": draw(st.one_of(st.none(), st.integers(0, 10 ** 9)))},
            "transaction": draw(st.one_of(st.none(), st.fixed_dictionaries({
                "id": st.sampled_from(["tx1", "tx2"]), "total_order": st.integers(1, 9),
                "data_collection_order": st.integers(1, 9)}))),
            "op": op, "ts_ms": draw(st.one_of(st.none(), st.just(T0 + 10 + i)))}
        common = {"topic": draw(st.sampled_from(topics)), "partition": 0,
                  "timestamp": T0 + draw(st.integers(0, 10 ** 6))}
        records.append({**common, "key": key, "offset": 100 + i, "headers": _headers(draw),
                        "value": json.dumps({"schema": envelope, "payload": payload}).encode()})
        if op == "d" and draw(st.booleans()):  # the tombstone Debezium writes after a delete (tombstones.on.delete)
            records.append({**common, "key": key, "offset": 101 + i, "headers": _headers(draw), "value": None})
    return records


def decimal_of(payload: str, scale: int = 2) -> Decimal:
    return Decimal(int.from_bytes(base64.b64decode(payload), "big", signed=True)).scaleb(-scale)
