"""Several schemas in one record DataFrame: one connector, one query, a schema per topic.

A DataFrame has one type, but one Debezium connector over many tables emits one schema per table, and a sink
reading many topics of JSON envelopes meets one schema per topic. The representation, used by every part:

* ``key`` and ``value`` hold the **union** of the topics' structs: a field shared by several topics with the
  same type is one field; a field whose type differs is kept apart under a qualified name
  (``<column>__<schema>_<table>`` for CDC, ``<column>__<topic>`` for parsed messages);
* the column metadata ``kconnect.cdc.tables`` (on ``key``, ``value``, and the envelope's ``before``/``after``)
  maps each schema to its topic and exact field list: ``{"<id>": {"topic": ..., "columns": [names],
  "fields": [union fields holding them], "key": [key column names], "names": {"value": connect.name, ...}}}``;
  when an envelope shares the DataFrame with another kind of value (a CDC connector's schema change topic), an
  entry says which top-level ``value`` fields its topic has (``"value_fields"``), and the other kind's entry
  says ``"envelope": false`` (its ``columns`` are then its value's top-level fields);
* the ``topic`` column says which schema a row has.

Whoever needs one topic's exact shape narrows the union with that metadata: the source-side converters
serialize each topic's records with its own schema (Debezium's ``<prefix>.<schema>.<table>.Value``, only its
columns), the JDBC and Delta sinks write each topic's table with only its columns, :func:`narrow` gives a
Column. A topic the metadata does not list (renamed by a transform after the source) keeps the union.

>>> layouts = topic_layouts(df.schema, "value")                                                     # doctest: +SKIP
>>> value_type = df.schema["value"].dataType                                                       # doctest: +SKIP
>>> orders = narrow(F.col("value"), value_type, layouts["shop.public.orders"], "value")             # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

__all__ = ["TABLES_META", "topic_layouts", "narrow", "union_of", "envelope_union_of", "as_nullable", "narrow_arrow",
           "is_envelope_type", "held_columns", "relaid", "present_in", "Moved"]

TABLES_META = "kconnect.cdc.tables"


def _meta_of(field: StructField) -> Mapping[str, Any] | None:
    text = (field.metadata or {}).get(TABLES_META)
    if text is None and isinstance(field.dataType, StructType) and "after" in field.dataType.names:
        text = (field.dataType["after"].metadata or {}).get(TABLES_META)
    return json.loads(text) if text else None


def topic_layouts(schema: StructType, column: str) -> dict[str, dict[str, Any]] | None:
    """Per topic, the layout of ``column`` (``key`` or ``value``) when it holds several schemas, else None."""
    if column not in schema.names:
        return None
    meta = _meta_of(schema[column])
    if not meta:
        return None
    # Fields a transform added after the source (ExtractNewRecordState's add.fields: __op, __table, ...) belong
    # to every topic: each topic's narrowed struct keeps them, after its own columns.
    struct = schema[column].dataType
    held = {f for info in meta.values() for f in info["fields"]}
    added = [] if not isinstance(struct, StructType) or is_envelope_type(struct) else \
        [f.name for f in struct.fields if f.name not in held]
    return {info["topic"]: {**info, "added": added} for info in meta.values()}


def is_envelope_type(data_type: DataType) -> bool:
    return isinstance(data_type, StructType) and {"after", "before", "op"} <= set(data_type.names)


#: Where one topic's column, held by a union field, went when a transform rebuilt the struct: ``moved(column,
#: field)`` gives the ``(column, union field)`` pairs that hold it now (none: it was dropped).
Moved = Callable[[str, str], Sequence[tuple[str, str]]]


def held_columns(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """Union field -> the topics' column it holds (``id__orders`` -> ``id``), from a row struct's column
    metadata; empty when the column has no layouts. A field no layout holds (added by a transform) is absent."""
    text = (metadata or {}).get(TABLES_META)
    if not text:
        return {}
    return {f: c for info in json.loads(text).values() for c, f in zip(info["columns"], info["fields"])}


def present_in(new_type: StructType) -> Moved:
    """The :data:`Moved` of a transform that keeps field names (MaskField, Cast, InsertField...): a column
    stays where it was while its union field is still there."""
    names = set(new_type.names)
    return lambda column, field: [(column, field)] if field in names else []


def relaid(metadata: Mapping[str, Any], column: str, new_type: StructType,
           moved: Moved | None = None) -> dict[str, Any]:
    """The column metadata of ``key``/``value`` after a transform rebuilt its struct as ``new_type``: all of it
    kept, as Kafka's SMTs keep a schema's name, version, doc and parameters (``SchemaUtil.copySchemaBasics``),
    with each topic's layout following its columns (``moved``, by default :func:`present_in`). An envelope's
    layouts describe its ``before``/``after``, which a transform of its top level leaves as they are.

    >>> relaid(df.schema["value"].metadata, "value", new_type)                                    # doctest: +SKIP
    """
    out = dict(metadata)
    text = out.get(TABLES_META)
    if not text or is_envelope_type(new_type):
        return out
    moved = moved or present_in(new_type)
    meta = json.loads(text)
    for info in meta.values():
        pairs = {c: list(moved(c, f)) for c, f in zip(info["columns"], info["fields"])}
        now = [pair for c in info["columns"] for pair in pairs[c]]
        info["columns"], info["fields"] = [c for c, _ in now], [f for _, f in now]
        if column == "key" and info.get("key"):
            info["key"] = [c for k in info["key"] for c, _ in pairs.get(k, moved(k, k))]
    out[TABLES_META] = json.dumps(meta, sort_keys=True)
    return out


def _row(col: Column, struct_t: StructType, columns: list[str], fields: list[str]) -> tuple[Column, StructType]:
    by_name = {f.name: f for f in struct_t.fields}
    out_t = StructType([StructField(c, by_name[f].dataType, True, by_name[f].metadata)
                        for c, f in zip(columns, fields)])
    parts = [col[f].alias(c, metadata=by_name[f].metadata) for c, f in zip(columns, fields)]
    return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts)), out_t


def narrow(col: Column, data_type: DataType, info: Mapping[str, Any],
           column: str) -> tuple[Column, DataType, dict[str, Any]]:
    """One topic's ``key``/``value`` from the union: ``(Column, its type, its column metadata)``. A Debezium
    envelope keeps its other fields and narrows ``before``/``after``; a row struct narrows itself."""
    topic = info["topic"]
    names = info.get("names") or {}
    field_of = dict(zip(info["columns"], info["fields"]))
    if not isinstance(data_type, StructType):
        return col, data_type, {}
    if column == "key":
        cols = list(info.get("key") or []) + list(info.get("added") or [])
        cols = [c for c in cols if field_of.get(c, c) in data_type.names]
        new, new_t = _row(col, data_type, cols, [field_of.get(c, c) for c in cols])
        return new, new_t, {"connect.name": names.get("key", f"{topic}.Key")}
    if is_envelope_type(data_type) and info.get("envelope", True):
        row_t = data_type["after"].dataType
        own = info.get("value_fields")
        assert isinstance(row_t, StructType), f"{topic}: an envelope's after is not a struct: {row_t}"
        row_name = names.get("row", f"{topic}.Value")
        parts, out_fields = [], []
        part_t: DataType
        for f in data_type.fields:
            if own is not None and f.name not in own:
                continue  # another kind of value's field
            if f.name in ("before", "after"):
                part, part_t = _row(col[f.name], row_t, info["columns"], info["fields"])
                meta = {"connect.name": row_name}
            else:
                part, part_t, meta = col[f.name], f.dataType, dict(f.metadata or {})
            parts.append(part.alias(f.name, metadata=meta))
            out_fields.append(StructField(f.name, part_t, True, meta))
        out_t = StructType(out_fields)
        new = F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts))
        return new, out_t, {"connect.name": names.get("value", f"{topic}.Envelope")}
    added = list(info.get("added") or [])
    new, new_t = _row(col, data_type, info["columns"] + added, info["fields"] + added)
    name = names.get("value", f"{topic}.Value")
    return new, new_t, {"connect.name": name} if name else {}


def as_nullable(data_type: DataType) -> DataType:
    """``data_type`` with every field, element and map value nullable (what ``from_json`` gives), so that a
    topic's parsed struct can be cast into a union holding it."""
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(as_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, as_nullable(data_type.valueType), True)
    return data_type


def union_of(per_topic: Mapping[str, tuple[StructType, Mapping[str, Any]]], *,
             keys: bool = False) -> tuple[StructType, dict[str, Any]]:
    """The union struct of several topics' structs and the ``kconnect.cdc.tables`` metadata that narrows it
    back; a field whose type differs between topics is kept apart as ``<field>__<topic>``. ``keys``: the structs
    are record keys (each topic's fields are its key columns)."""
    fields: dict[str, StructField] = {}
    meta: dict[str, Any] = {}
    for topic in sorted(per_topic):
        st, topic_meta = per_topic[topic]
        names, holders = [], []
        for f in st.fields:
            name = f.name
            field_type = as_nullable(f.dataType)
            if name in fields and fields[name].dataType != field_type:
                name = f"{f.name}__{topic}"
            fields.setdefault(name, StructField(name, field_type, True, f.metadata))
            names.append(f.name)
            holders.append(name)
        entry: dict[str, Any] = {"topic": topic, "columns": names, "fields": holders, "key": names if keys else []}
        entry["names"] = {"key" if keys else "value": (topic_meta or {}).get("connect.name")}
        meta[topic] = entry
    return StructType(list(fields.values())), {TABLES_META: json.dumps(meta, sort_keys=True)}


def envelope_union_of(per_topic: Mapping[str, tuple[StructType, Mapping[str, Any]]]) -> tuple[StructType,
                                                                                              dict[str, Any]]:
    """The union of several topics' Debezium envelopes, shaped as a CDC connector's: one envelope whose
    ``before``/``after`` hold the union of the topics' rows (:func:`union_of`), its other fields shared, and the
    ``kconnect.cdc.tables`` metadata (on the column and on ``before``/``after``) that narrows each topic's back.
    Raise ``ValueError`` naming the field when a field besides ``before``/``after`` differs between topics."""
    rows: dict[str, tuple[StructType, Mapping[str, Any]]] = {}
    for topic, (env, _) in per_topic.items():
        row = env["after"].dataType
        assert isinstance(row, StructType), f"{topic}: an envelope's after is not a struct: {row}"
        rows[topic] = (row, env["after"].metadata)
    row_type, row_meta = union_of(rows)
    tables = json.loads(row_meta[TABLES_META])
    for topic, (env, env_meta) in per_topic.items():
        tables[topic]["names"] = {"value": (env_meta or {}).get("connect.name"),
                                  "row": (env["after"].metadata or {}).get("connect.name")}
    text = json.dumps(tables, sort_keys=True)
    fields: dict[str, StructField] = {}
    first: dict[str, str] = {}
    for topic in sorted(per_topic):
        for f in per_topic[topic][0].fields:
            if f.name in ("before", "after"):
                fields.setdefault(f.name, StructField(f.name, row_type, True, {TABLES_META: text}))
                continue
            field_type = as_nullable(f.dataType)
            seen = fields.setdefault(f.name, StructField(f.name, field_type, True, f.metadata))
            first.setdefault(f.name, topic)
            if seen.dataType != field_type:
                raise ValueError(f"the envelopes of topics {first[f.name]!r} and {topic!r} differ in their field "
                                 f"{f.name!r} ({seen.dataType.simpleString()} and {field_type.simpleString()})")
    column_meta: dict[str, Any] = {TABLES_META: text}
    versions = {(m or {}).get("connect.version") for _, m in per_topic.values()}
    if len(versions) == 1 and None not in versions:
        column_meta["connect.version"] = versions.pop()
    return StructType(list(fields.values())), column_meta


def narrow_arrow(data: Any, info: Mapping[str, Any], key_info: Mapping[str, Any] | None = None) -> Any:
    """One topic's records (a ``pa.Table`` of record columns) with ``value`` (a row struct, or an envelope's
    ``before``/``after``) and ``key`` narrowed to that topic's own fields, under their own names. The key is
    narrowed with ``info``'s key columns (a CDC connector's one layout) or else with ``key_info``, the key
    column's own layout (keys parsed from several topics' messages)."""
    import pyarrow as pa

    def row(arr: Any, columns: list[str], layout: Mapping[str, Any] = info) -> Any:
        field_of = dict(zip(layout["columns"], layout["fields"]))
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        if not pa.types.is_struct(arr.type):
            return arr
        present = [c for c in columns if arr.type.get_field_index(field_of.get(c, c)) >= 0]
        kids = [arr.field(field_of.get(c, c)) for c in present]
        types = [arr.type.field(field_of.get(c, c)) for c in present]
        return pa.StructArray.from_arrays(kids, fields=[t.with_name(c) for c, t in zip(present, types)],
                                          mask=arr.is_null())

    out = data
    if "value" in data.column_names:
        value = data.column("value").combine_chunks()
        envelope = {"before", "after", "op"} <= {f.name for f in value.type} if pa.types.is_struct(value.type) \
            else False
        if envelope and info.get("envelope", True):
            own = info.get("value_fields")
            kids, kfields = [], []
            for f in value.type:
                if own is not None and f.name not in own:
                    continue
                kid = value.field(f.name)
                if f.name in ("before", "after"):
                    kid = row(kid, info["columns"])
                kids.append(kid)
                kfields.append(pa.field(f.name, kid.type, f.nullable, f.metadata))
            new = pa.StructArray.from_arrays(kids, fields=kfields, mask=value.is_null())
        else:
            new = row(value, info["columns"] + list(info.get("added") or []))
        out = out.set_column(out.column_names.index("value"), "value", new)
    key_layout = info if info.get("key") else key_info
    if "key" in data.column_names and key_layout and key_layout.get("key"):
        key = row(data.column("key"), list(key_layout["key"]) + list(key_layout.get("added") or []), key_layout)
        out = out.set_column(out.column_names.index("key"), "key", key)
    return out


def renamed_topics(schema: StructType, rename: Any) -> dict[str, dict[str, Any]]:
    """New column metadata for ``key``/``value`` after a transform renamed the topics (``rename(topic)`` ->
    new topic, or None when it cannot say): the layouts follow their records. Two layouts renamed to one topic
    are dropped (their records keep the union)."""
    out: dict[str, dict[str, Any]] = {}
    for column in ("key", "value"):
        if column not in schema.names:
            continue
        meta = _meta_of(schema[column])
        if not meta:
            continue
        new: dict[str, Any] = {}
        seen: dict[str, int] = {}
        for ident, info in meta.items():
            topic = rename(info["topic"])
            if topic is None:
                return {}
            new[ident] = {**info, "topic": topic}
            seen[topic] = seen.get(topic, 0) + 1
        new = {i: info for i, info in new.items() if seen[info["topic"]] == 1}
        out[column] = {**dict(schema[column].metadata or {}), TABLES_META: json.dumps(new, sort_keys=True)}
    return out
