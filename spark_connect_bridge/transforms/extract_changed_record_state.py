"""Debezium's ExtractChangedRecordState: headers naming the fields an update changed and left unchanged."""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, MapType, StringType, StructType

from ..config import Config, ConfigDef, Importance, Type
from ..core.topic_schemas import TABLES_META
from .base import Step, Transformation, variant_capable
from .extract_new_record_state import is_envelope
from .insert_header import append_headers
from .values import header_bytes

__all__ = ["ExtractChangedRecordState"]


@variant_capable
class ExtractChangedRecordState(Transformation):
    """Append to each change event a header ``header.changed.name`` listing the row's fields whose values differ
    between ``before`` and ``after``, and a header ``header.unchanged.name`` listing the others, in the row's field
    order (a list of strings, written by the header converter as ``["name","email"]``). As Debezium 3.6 does, every
    change event gets the headers, and their lists are empty unless the event has both rows (an update whose old
    row is known: PostgreSQL's REPLICA IDENTITY FULL, MySQL's full row image); either header is left out when its
    key is not set. Values that are not envelopes pass through unchanged, and so do tombstones, but for a CDC
    connector's own tombstone after a delete: in Debezium it shares the delete's header object, so it carries the
    delete's headers (both lists empty), and here it gets them too. ExtractNewRecordState's
    ``drop.fields.header.name`` reads the header back.

    Values are compared as Debezium's ``Objects.equals`` compares them: maps by their entries, structs and arrays
    by their values, and a bytes field as Java compares two byte arrays, by identity: it counts as changed unless
    both are null or both empty (Kafka's JsonConverter reads every empty array as one shared array; the
    differential fuzzer runs Debezium 3.6.1 beside this on records read by it).

    >>> df.transform(ExtractChangedRecordState.of({"header.changed.name": "changed"}))   # doctest: +SKIP
    """

    kafka_class = "io.debezium.transforms.ExtractChangedRecordState"
    config_def = (
        ConfigDef()
        .define("header.changed.name", Type.STRING, None, importance=Importance.LOW,
                doc="Name of the header listing the fields an update changed; not set: no such header.")
        .define("header.unchanged.name", Type.STRING, None, importance=Importance.LOW,
                doc="Name of the header listing the fields an update left unchanged; not set: no such header.")
    )

    def reads_columns(self) -> tuple[str, ...]:
        return ("value",)

    def configure(self, config: Config) -> None:
        def name(value: str | None) -> str | None:
            return value if value and value.strip() else None

        self.changed = name(config.header_changed_name)
        self.unchanged = name(config.header_unchanged_name)

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema["value"]
        env = sf.dataType
        if not (self.changed or self.unchanged) or not isinstance(env, StructType) or \
                not is_envelope(env, dict(sf.metadata)) or not isinstance(env["before"].dataType, StructType):
            return Step()
        value = F.col("value")
        before, after = value.getField("before"), value.getField("after")
        row_t = env["after"].dataType
        assert isinstance(row_t, StructType)  # is_envelope
        before_fields = set(env["before"].dataType.fieldNames())

        def equal(f: str) -> Column:
            old, new = before.getField(f), after.getField(f)
            dtype = row_t[f].dataType
            if isinstance(dtype, BinaryType):
                # Java's equals of two byte arrays: the same array; JsonConverter (Jackson) reads every empty one
                # as one shared array
                empty = F.coalesce((F.length(old) == 0) & (F.length(new) == 0), F.lit(False))
                return (old.isNull() & new.isNull()) | empty
            return _comparable(old, dtype).eqNullSafe(_comparable(new, dtype))

        def lists(fields: list[tuple[str, str]]) -> tuple[Column, Column]:
            """(changed, unchanged) names among ``fields`` ((column name, row field) in the row's order)."""
            same = {name: (equal(f) if f in before_fields else after.getField(f).isNull()) for name, f in fields}
            names = [(F.lit(n), s) for n, s in same.items()]
            changed = F.filter(F.array(*[F.when(~s, n) for n, s in names]), lambda x: x.isNotNull())
            unchanged = F.filter(F.array(*[F.when(s, n) for n, s in names]), lambda x: x.isNotNull())
            return changed, unchanged

        tables = _tables(sf, env)
        if tables:  # a CDC connector's union row: each topic's own columns
            changed: Column | None = None
            unchanged: Column | None = None
            for topic, fields in tables:
                c, u = lists(fields)
                is_topic = F.col("topic") == F.lit(topic)
                changed = F.when(is_topic, c) if changed is None else changed.when(is_topic, c)
                unchanged = F.when(is_topic, u) if unchanged is None else unchanged.when(is_topic, u)
            assert changed is not None and unchanged is not None
        else:
            changed, unchanged = lists([(f, f) for f in row_t.fieldNames()])
        names_t = ArrayType(StringType())
        # Debezium 3.6 adds both headers to every change event, the lists empty unless both rows are there
        both = before.isNotNull() & after.isNotNull()
        pairs = [(header, header_bytes(F.when(both, names).otherwise(F.array().cast(names_t)), names_t))
                 for header, names in ((self.changed, changed), (self.unchanged, unchanged)) if header]
        event = value.isNotNull()
        if tables:
            # A connector's tombstone shares its delete's header object in Debezium (EventDispatcher builds it with
            # the delete's record.headers()), and Kafka Connect transforms the delete first: the tombstone carries
            # the delete's headers, whose lists are empty (a delete has no after row)
            event = F.col("topic").isin([t for t, _ in tables])
        return Step({"headers": F.when(event, append_headers(pairs)).otherwise(F.col("headers"))})


def _has_map(dtype: DataType) -> bool:
    if isinstance(dtype, MapType):
        return True
    if isinstance(dtype, ArrayType):
        return _has_map(dtype.elementType)
    return isinstance(dtype, StructType) and any(_has_map(f.dataType) for f in dtype.fields)


def _comparable(value: Column, dtype: DataType) -> Column:
    """``value`` in a form Spark can compare (``<=>``): a map as its entries sorted by key (Java's
    ``Map.equals`` ignores their order), in structs and arrays too."""
    if not _has_map(dtype):
        return value
    if isinstance(dtype, MapType):
        kt, vt = dtype.keyType, dtype.valueType
        entries = F.transform(F.map_entries(value), lambda e: F.struct(
            _comparable(e.getField("key"), kt).alias("key"), _comparable(e.getField("value"), vt).alias("value")))
        return F.array_sort(entries)
    if isinstance(dtype, ArrayType):
        et = dtype.elementType
        return F.transform(value, lambda x: _comparable(x, et))
    assert isinstance(dtype, StructType)
    return F.when(value.isNotNull(), F.struct(*[_comparable(value.getField(f.name), f.dataType).alias(f.name)
                                                for f in dtype.fields]))


def _tables(field: object, env: StructType) -> list[tuple[str, list[tuple[str, str]]]]:
    """(topic, [(column, row field)]) of each table of a CDC connector's union row (``kconnect.cdc.tables``
    metadata of the value or its row), or none."""
    for meta in (getattr(field, "metadata", None) or {}, env["after"].metadata or {}):
        text = meta.get(TABLES_META)
        if text:
            return [(info["topic"], list(zip(info["columns"], info["fields"])))
                    for info in json.loads(text).values() if info.get("envelope", True) is not False]
    return []
