"""ReplaceField: filter or rename top-level fields of the key or value."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StructField, StructType, VariantType

from ..config import Config, ConfigDef, Importance, Type
from ..core.topic_schemas import held_columns, is_envelope_type, relaid
from ..errors import ConfigProblem
from .base import (
    KeyOrValue,
    Step,
    key_value_variants,
    plan_object,
    struct_or_map_required,
    type_name,
    variant_capable,
)
from .columns import q, rebuild_struct

_PLACEHOLDER = "__kc_placeholder"

__all__ = ["ReplaceField"]

REPLACE_NULL_DOC = ("Kafka: when a struct field is null but its schema has a default, emit the default. Spark "
                    "types carry no defaults, so a null stays null; accepted for compatibility.")


@variant_capable
@key_value_variants
class ReplaceField(KeyOrValue):
    """Filter or rename fields: ``exclude`` drops fields, ``include`` keeps only the listed ones, ``renames``
    renames (``old:new``). Filtering uses the original names; renames apply afterwards. A tombstone passes
    through; a value that is neither a struct nor a Map fails the record.
    """

    liftable = True
    config_def = (
        ConfigDef()
        .define("exclude", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Fields to exclude. This takes precedence over the fields to include.")
        .define("include", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Fields to include. If specified, only these fields will be used.")
        .define("renames", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Field rename mappings, as a comma-separated list of old:new pairs.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
        # Kafka 2.x-3.x's names (KIP-629); Kafka 4.0 removed them, but configs written for 3.x still carry them
        .renamed("whitelist", "include", "Kafka 3.x's ReplaceField")
        .renamed("blacklist", "exclude", "Kafka 3.x's ReplaceField")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        bad = [r for r in config.renames if r.count(":") != 1]
        if bad:
            return [ConfigProblem("renames", f"Invalid value {','.join(config['renames'])} for configuration "
                                             f"renames: Invalid rename mapping: {bad[0]} (expected old:new)")]
        return []

    def configure(self, config: Config) -> None:
        self.exclude = set(config.exclude)
        self.include = set(config.include)
        self.renames = dict(r.split(":", 1) for r in config.renames)

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def _rename_map(self, m: Column) -> Column:
        # A rename onto a key that is also present would duplicate it: the renamed entry wins.
        def drop_clash(key: Column, v: Column) -> Column:
            cond = F.lit(False)
            for old, new in self.renames.items():
                if new not in self.renames:
                    cond = cond | ((key == F.lit(new)) & F.array_contains(F.map_keys(m), F.lit(old)))
            return ~cond
        m = F.map_filter(m, drop_clash)

        def rename(key: Column, v: Column) -> Column:
            expr = key
            for old, new in self.renames.items():
                expr = F.when(key == F.lit(old), F.lit(new)).otherwise(expr)
            return expr
        return F.transform_keys(m, lambda key, v: rename(key, v))

    def _struct_update(self, op: Column, dropped: list[str], kept: list[StructField],
                       renames: dict[str, str]) -> Column:
        """Drop and rename with update_fields only (null-safe, order kept), which Catalyst folds with the
        neighbouring struct updates into one struct: renamed fields and everything after the first one are
        dropped and re-added in order (a placeholder keeps the struct from ever being empty)."""
        new = op.dropFields(*[q(n) for n in dropped]) if dropped else op
        first = next((i for i, f in enumerate(kept) if f.name in renames), None)
        if first is None:
            return new
        tail = kept[first:]
        new = new.withField(_PLACEHOLDER, F.lit(None)).dropFields(*[q(f.name) for f in tail])
        for f in tail:
            new = new.withField(q(renames.get(f.name, f.name)), op.getField(f.name))
        new = new.dropFields(_PLACEHOLDER)
        if any(f.metadata for f in tail):
            # update_fields drops field metadata: a cast to the output type restores it.
            new = new.cast(StructType([StructField(renames.get(f.name, f.name), f.dataType, True, f.metadata)
                                       for f in kept]))
        return new

    def _renamed(self, field: str, column: str) -> str:
        """The new name of union ``field`` holding the topics' ``column``: a field kept apart for one topic
        (``id__orders``) keeps its qualifier (``key__orders``)."""
        new = self.renames.get(column)
        if new is None:
            return field
        return new + field[len(column):] if field.startswith(column) else new

    def _plan_struct(self, op: Column, dtype: StructType, metadata: dict) -> Step:
        # The value of several topics holds the union of their fields; the names configured are the topics'
        # column names, which a field kept apart for one topic qualifies (id__orders holds orders' id).
        held = {} if is_envelope_type(dtype) else held_columns(metadata)
        column_of = {f.name: held.get(f.name, f.name) for f in dtype.fields}
        dropped = [f.name for f in dtype.fields if not self._keep(column_of[f.name])]
        kept = [f for f in dtype.fields if self._keep(column_of[f.name])]
        renames = {f.name: self._renamed(f.name, column_of[f.name]) for f in kept}
        renames = {old: new for old, new in renames.items() if old != new}
        new = self._struct_update(op, dropped, kept, renames) if kept else rebuild_struct(op, [])
        new_type = StructType([StructField(renames.get(f.name, f.name), f.dataType, True, f.metadata)
                               for f in kept])

        def moved(column: str, field: str) -> list[tuple[str, str]]:
            if not self._keep(column):
                return []
            return [(self.renames.get(column, column), self._renamed(field, column))]
        # Kafka: SchemaUtil.copySchemaBasics(schema, SchemaBuilder.struct()): a required struct
        return Step({self.target: new}, metadata={self.target: relaid(metadata, self.target, new_type, moved)},
                    optional={self.target: False})

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        if isinstance(dtype, StructType):
            return self._plan_struct(op, dtype, dict(df.schema[self.target].metadata))
        if isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map
            return plan_object(self.target, op, "field replacement", self._plan_map)
        if isinstance(dtype, MapType):
            return self._plan_map(op)
        return Step().fail(op.isNotNull(), struct_or_map_required("field replacement", type_name(dtype)))

    def _plan_map(self, op: Column) -> Step:
        """The Map case: entries filtered by exclude/include, then renamed."""
        m = op
        if self.exclude:
            ex = F.array(*[F.lit(x) for x in sorted(self.exclude)])
            m = F.map_filter(m, lambda key, v: ~F.array_contains(ex, key))
        if self.include:
            inc = F.array(*[F.lit(x) for x in sorted(self.include)])
            m = F.map_filter(m, lambda key, v: F.array_contains(inc, key))
        if self.renames:
            m = self._rename_map(m)
        return Step({self.target: m})
