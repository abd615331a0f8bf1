"""Debezium's ExtractNewRecordState ("unwrap"): replace a change-event envelope with the row state."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from ..config import Config, ConfigDef, Importance, Type, ValidString
from ..converters.connect_schema import is_optional
from ..core.topic_schemas import TABLES_META
from ..errors import ConfigProblem
from .base import Step, Transformation, coerce_to_type, unify_types, variant_capable
from .columns import q
from .insert_header import append_headers
from .values import header_bytes

__all__ = ["ExtractNewRecordState", "is_envelope"]

log = logging.getLogger(__name__)

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
_ENVELOPE_FIELDS = ("op", "ts_ms", "ts_us", "ts_ns")
_TX_FIELDS = ("id", "total_order", "data_collection_order")


def is_envelope(dtype: object, metadata: dict) -> bool:
    """A Debezium envelope: a struct with ``before``/``after`` structs and ``op``, whose schema name (when
    known) ends in ``.Envelope``."""
    if not isinstance(dtype, StructType):
        return False
    names = dtype.fieldNames()
    if not {"before", "after", "op"} <= set(names):
        return False
    if not isinstance(dtype["after"].dataType, StructType):
        return False
    name = metadata.get("connect.name")
    return name is None or str(name).endswith(".Envelope")


@dataclass(frozen=True)
class _Ref:
    """One ``add.fields``/``add.headers`` item: where the value lives and the name it gets."""

    struct: str | None
    field: str
    name: str

    @classmethod
    def parse(cls, item: str, prefix: str) -> _Ref:
        ref, _, new = item.partition(":")
        struct: str | None
        struct, dot, fld = ref.partition(".")
        if not dot:
            fld = struct
            struct = (None if fld in _ENVELOPE_FIELDS else "transaction" if fld in _TX_FIELDS else "source")
            default = fld
        else:
            default = f"{struct}_{fld}"
        return cls(struct, fld, prefix + (new.strip() if new else default))

    def column(self, value: Column, dtype: StructType) -> tuple[Column, DataType, dict[str, Any]] | None:
        if self.struct is None:
            if self.field not in dtype.fieldNames():
                return None
            f = dtype[self.field]
            return value.getField(self.field), f.dataType, dict(f.metadata)
        if self.struct not in dtype.fieldNames():
            return None
        st = dtype[self.struct].dataType
        if not isinstance(st, StructType) or self.field not in st.fieldNames():
            return None
        f = st[self.field]
        return value.getField(self.struct).getField(self.field), f.dataType, dict(f.metadata)


@variant_capable
class ExtractNewRecordState(Transformation):
    """Unwrap Debezium change events: the value becomes the ``after`` row (``before`` for deletes in the
    rewrite modes). ``delete.tombstone.handling.mode`` decides deletes and tombstones (see the table in the
    docs); ``t`` (truncate) events are always dropped; records whose value is not an envelope (a different
    schema name, a Map, a primitive) pass through untouched. A CDC connector's DataFrame may also hold another
    topic's records whose values are no envelopes (Debezium's schema change events, see ``kconnect.cdc.tables``):
    Debezium passes them on unchanged, which the unwrapped ``value`` column (the row type) cannot hold, so they
    are dropped here; read them before this transform. ``delete-to-tombstone`` behaves like
    ``tombstone`` here: a Spark column keeps its type, so the schema cannot become null. Legacy keys
    ``delete.handling.mode``/``drop.tombstones`` (removed in Debezium 3.2, ignored by 3.6) are read as Debezium 3.1
    read them, with a deprecation warning, when the new key is not set.
    """

    kafka_class = "io.debezium.transforms.ExtractNewRecordState"
    def reads_columns(self) -> tuple[str, ...]:
        return ("value",)

    config_def = (
        ConfigDef()
        .define("delete.tombstone.handling.mode", Type.STRING, None, ValidString(*MODES), Importance.MEDIUM,
                "How to handle delete events and tombstones: drop, tombstone (default), rewrite, "
                "rewrite-with-tombstone, delete-to-tombstone.")
        .define("delete.handling.mode", Type.STRING, None, ValidString("drop", "rewrite", "none"), Importance.LOW,
                "Legacy (removed in Debezium 3.2): drop, rewrite or none; used only when "
                "delete.tombstone.handling.mode is not set.")
        .define("drop.tombstones", Type.BOOLEAN, None, importance=Importance.LOW,
                doc="Legacy (removed in Debezium 3.2, default true): drop tombstones; used only when "
                    "delete.tombstone.handling.mode is not set.")
        .define("add.fields", Type.LIST, [], importance=Importance.LOW,
                doc="Envelope, source or transaction fields to add to the row as <prefix><name>; "
                    "struct.field adds <prefix><struct>_<field>; name:newName renames.")
        .define("add.fields.prefix", Type.STRING, "__", importance=Importance.LOW,
                doc="Prefix of the fields added with add.fields.")
        .define("add.headers", Type.LIST, [], importance=Importance.LOW,
                doc="Envelope, source or transaction fields to append as headers (same syntax as add.fields).")
        .define("add.headers.prefix", Type.STRING, "__", importance=Importance.LOW,
                doc="Prefix of the headers added with add.headers.")
        .define("route.by.field", Type.STRING, "", importance=Importance.LOW,
                doc="Take the new topic from this field of the row (after; before for deletes).")
        .define("drop.fields.header.name", Type.STRING, None, importance=Importance.LOW,
                doc="Name of a header listing fields to drop from the row (a list of strings, as Debezium's "
                    "ExtractChangedRecordState writes it: [\"a\",\"b\"]). One DataFrame column has one schema, so a "
                    "dropped field is set to null for that record instead of leaving its schema.")
        .define("drop.fields.from.key", Type.BOOLEAN, False, importance=Importance.LOW,
                doc="Also drop the listed fields from a struct key.")
        .define("drop.fields.keep.schema.compatible", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="true: drop only listed fields that are optional (nullable); false: drop every listed field "
                    "(its column becomes nullable).")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Spark types carry no defaults: accepted for compatibility, no effect.")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        problems = []
        if config.delete_tombstone_handling_mode is not None:
            for legacy in ("delete.handling.mode", "drop.tombstones"):
                if config[legacy] is not None:
                    problems.append(ConfigProblem(legacy, (
                        f"Invalid value {config.originals.get(legacy)} for configuration {legacy}: it is the legacy "
                        f"form of delete.tombstone.handling.mode; set only one of them")))
        for key in ("add.fields", "add.headers"):
            bad = [i for i in config[key] if i.count(":") > 1 or not i.split(":")[0].strip()]
            if bad:
                problems.append(ConfigProblem(key, f"Invalid value {','.join(config[key])} for configuration {key}: "
                                                   f"invalid item {bad[0]!r} (expected [struct.]field[:newName])"))
        return problems

    def configure(self, config: Config) -> None:
        mode = config.delete_tombstone_handling_mode
        if mode is None:
            legacy = config.delete_handling_mode
            drop_tombstones = config.drop_tombstones
            if legacy is None and drop_tombstones is None:
                mode = "tombstone"
            else:
                # Debezium 3.2 removed these keys (3.6.1's ConfigDef has neither and ignores them, running the
                # default "tombstone"); read as Debezium 3.1 read them, like every old spelling here.
                for key in ("delete.handling.mode", "drop.tombstones"):
                    if config[key] is not None:
                        log.warning("Configuration %s is deprecated (removed in Debezium 3.2, which ignores it): "
                                    "read as Debezium 3.1 read it; set delete.tombstone.handling.mode instead", key)
                legacy = legacy or "drop"
                keep = drop_tombstones is False
                mode = {"drop": "drop", "none": "tombstone", "rewrite": "rewrite"}[legacy]
                self._legacy_keep_tombstones = keep
        self.mode = mode
        self.keep_tombstones = getattr(self, "_legacy_keep_tombstones", False) or mode == "rewrite-with-tombstone"
        self.rewrite = mode in ("rewrite", "rewrite-with-tombstone")
        self.fields = [_Ref.parse(i.strip(), config.add_fields_prefix) for i in config.add_fields]
        self.headers = [_Ref.parse(i.strip(), config.add_headers_prefix) for i in config.add_headers]
        self.route = config.route_by_field
        header = config.drop_fields_header_name
        self.drop_header = header if header and header.strip() else None
        self.drop_from_key = config.drop_fields_from_key
        self.drop_only_optional = config.drop_fields_keep_schema_compatible

    def _null_listed(self, struct: Column, dtype: StructType, listed: Column, cond: Column,
                     skip: set[str]) -> Column:
        """``struct`` with each listed field set to null where ``cond`` holds: a record cannot leave its
        column's schema, so null is how a per-record drop shows. With keep.schema.compatible only nullable
        (optional) fields are dropped, as Debezium drops only optional fields then."""
        out, changed = struct, []
        for f in dtype.fields:
            if f.name in skip or (self.drop_only_optional and not is_optional(f.nullable, f.metadata)):
                continue
            hit = cond & F.array_contains(listed, F.lit(f.name))
            out = out.withField(q(f.name), F.when(hit, F.lit(None).cast(f.dataType)).otherwise(struct.getField(f.name)))
            changed.append(f.name)
        if not changed:
            return struct
        # update_fields drops field metadata: a cast to the output type restores it.
        return out.cast(StructType([StructField(f.name, f.dataType, f.nullable or f.name in changed, f.metadata)
                                    for f in dtype.fields]))

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema["value"]
        env = sf.dataType
        if not isinstance(env, StructType) or not is_envelope(env, dict(sf.metadata)):
            return self._not_an_envelope()
        value = F.col("value")
        after_t, before_t = env["after"].dataType, env["before"].dataType
        row_t = unify_types(after_t, before_t) if isinstance(before_t, StructType) else after_t
        if row_t is None:
            row_t = after_t
        assert isinstance(row_t, StructType), row_t  # after is a struct (is_envelope), so is its union with before
        after = coerce_to_type(value.getField("after"), after_t, row_t)
        before = coerce_to_type(value.getField("before"), before_t, row_t) if isinstance(before_t, StructType) else \
            F.lit(None).cast(row_t)
        tomb = value.isNull()
        other = F.col("topic").isin(side) if (side := _side_topics(sf)) and "topic" in df.columns else F.lit(False)
        op = F.coalesce(value.getField("op"), F.lit(""))
        delete = ~tomb & (op == F.lit("d"))
        known = ~tomb & op.isin("c", "u", "r", "d", "t")

        step = Step()
        row = F.when(delete, before if self.rewrite else F.lit(None).cast(row_t)).otherwise(after)
        if self.rewrite:  # Debezium 3.6 adds __deleted first, before the add.fields fields (seen side by side)
            # an optional string in Debezium's schema: a CASE without ELSE (never null here) is nullable
            row = row.withField("__deleted", F.when(delete, F.lit("true")).when(~delete, F.lit("false")))
        for ref in self.fields:
            found = ref.column(value, env)
            if found is not None:
                row = row.withField(q(ref.name), found[0])
        if self.drop_header:
            # Debezium drops the listed fields after add.fields and before __deleted, never from a delete's row.
            listed = _listed_fields(self.drop_header)
            row_type = df.select(row.alias("row")).schema["row"].dataType
            assert isinstance(row_type, StructType), row_type  # the row struct, with fields added
            skip = {"__deleted"} if self.rewrite else set()
            row = self._null_listed(row, row_type, listed, ~delete, skip)
            key_t = df.schema["key"].dataType
            if self.drop_from_key and isinstance(key_t, StructType):
                # A rewritten delete is rebuilt from the original record: its key keeps every field.
                cond = ~tomb & ~delete if self.rewrite else ~tomb
                step.updates["key"] = self._null_listed(F.col("key"), key_t, listed, cond, set())
        step.updates["value"] = F.when(tomb, F.lit(None)).otherwise(row)
        step.optional["value"] = False  # Debezium builds the new value's schema: a required struct
        # The dropped side topics' layouts go too: a converter narrowing the row per topic finds only the tables'.
        step.metadata["value"] = _without_side(dict(env["after"].metadata))

        if self.headers:
            pairs, op_pairs = [], []
            for ref in self.headers:
                found = ref.column(value, env)
                if found is None:
                    continue
                pairs.append((ref.name, header_bytes(found[0], found[1], found[2])))
                if ref.struct is None and ref.field == "op":
                    op_pairs.append((ref.name, F.lit(b"d")))
            if pairs:
                step.updates["headers"] = F.when(tomb, append_headers(op_pairs) if op_pairs else F.col("headers")) \
                    .otherwise(append_headers(pairs))
        if self.route:
            if self.route not in row_t.fieldNames():
                step.fail(~tomb, f"route.by.field: the row has no field {self.route}")
            else:
                src = F.when(delete, before.getField(self.route)).otherwise(after.getField(self.route))
                step.updates["topic"] = F.coalesce(src.cast("string"), F.col("topic"))
        step.fail(~tomb & ~known & ~other, F.concat(F.lit("Unsupported change event operation: "),
                                           F.coalesce(value.getField("op"), F.lit("null"))))
        drops = ((op == F.lit("t")) | other) & ~tomb
        if not self.keep_tombstones:
            drops = drops | tomb
        if self.mode == "drop":
            drops = drops | delete
        # A delete event with neither a before nor an after row is dropped by Debezium 3.6 in every mode (its
        # ExtractNewRecordState run beside ours by tests/differential/test_fuzz_transforms.py's cdc family).
        no_before = value.getField("before").isNull() if isinstance(before_t, StructType) else F.lit(True)
        drops = drops | (delete & no_before & value.getField("after").isNull())
        step.drop = drops
        return step


    def _not_an_envelope(self) -> Step:
        """A value that is no change event (a schemaless VARIANT, a heartbeat's struct): Debezium 3.6.1 handles its
        tombstones as a change event's (it reads the tombstone before the value), and passes the rest unchanged."""
        tomb = F.col("value").isNull()
        if not self.keep_tombstones:
            return Step(drop=tomb)
        op_pairs = [(ref.name, F.lit(b"d")) for ref in self.headers if ref.struct is None and ref.field == "op"]
        if not op_pairs:
            return Step()
        return Step({"headers": F.when(tomb, append_headers(op_pairs)).otherwise(F.col("headers"))})


def _side_topics(field: StructField) -> list[str]:
    """Topics whose records share the envelope's column but are no envelopes (``"envelope": false`` in the
    ``kconnect.cdc.tables`` metadata)."""
    text = (field.metadata or {}).get(TABLES_META)
    if not text:
        return []
    return sorted(info["topic"] for info in json.loads(text).values() if info.get("envelope", True) is False)


def _without_side(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` without the layouts of the side topics (schema change events), which this transform drops."""
    text = metadata.get(TABLES_META)
    if not text:
        return metadata
    kept = {k: info for k, info in json.loads(text).items() if info.get("envelope", True) is not False}
    return {**metadata, TABLES_META: json.dumps(kept, sort_keys=True)}


def _listed_fields(header: str) -> Column:
    """The field names in the first header ``header`` (null when there is none): the header converter wrote
    the list as Connect's text form, a JSON array of strings; a bracketed list of bare names is read too."""
    value = F.get(F.filter(F.col("headers"), lambda h: h["key"] == F.lit(header)), 0)["value"]
    text = value.cast("string")
    bare = F.split(F.regexp_extract(text, r"^\s*\[(.*)\]\s*$", 1), r"\s*,\s*")
    return F.coalesce(F.from_json(text, "array<string>"), F.transform(bare, lambda n: F.trim(n)))
