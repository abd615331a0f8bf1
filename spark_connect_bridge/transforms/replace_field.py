"""ReplaceField: filter or rename top-level fields of the key or value."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from ..config import Config, ConfigDef, Importance, Type
from ..errors import ConfigProblem
from .base import KeyOrValue, Step, key_value_variants, kind, type_name
from .columns import rebuild_struct

__all__ = ["ReplaceField"]

REPLACE_NULL_DOC = ("Kafka: when a struct field is null but its schema has a default, emit the default. Spark "
                    "types carry no defaults, so a null stays null; accepted for compatibility.")


@key_value_variants
class ReplaceField(KeyOrValue):
    """Filter or rename fields: ``exclude`` drops fields, ``include`` keeps only the listed ones, ``renames``
    renames (``old:new``). Filtering uses the original names; renames apply afterwards. A tombstone passes
    through; a value that is neither a struct nor a Map fails the record.
    """

    config_def = (
        ConfigDef()
        .define("exclude", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Fields to exclude. This takes precedence over the fields to include.")
        .define("include", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Fields to include. If specified, only these fields will be used.")
        .define("renames", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Field rename mappings, as a comma-separated list of old:new pairs.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        bad = [r for r in config["renames"] if r.count(":") != 1]
        if bad:
            return [ConfigProblem("renames", f"Invalid value {','.join(config['renames'])} for configuration "
                                             f"renames: Invalid rename mapping: {bad[0]} (expected old:new)")]
        return []

    def configure(self, config: Config) -> None:
        self.exclude = set(config["exclude"])
        self.include = set(config["include"])
        self.renames = dict(r.split(":", 1) for r in config["renames"])

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

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        k = kind(dtype)
        if k == "struct":
            dropped = [f.name for f in dtype.fields if not self._keep(f.name)]
            if len(dropped) < len(dtype.fields):
                # drop_fields keeps the order and is null-safe; a struct-to-struct cast renames by position
                # (also null-safe): no per-field rebuild for Catalyst to duplicate.
                new = op.dropFields(*dropped) if dropped else op
                if self.renames:
                    kept = [f for f in dtype.fields if self._keep(f.name)]
                    new = new.cast(StructType([StructField(self.renames.get(f.name, f.name), f.dataType, f.nullable,
                                                           f.metadata) for f in kept]))
                return Step({self.target: new})
            parts = [op.getField(f.name).alias(self.renames.get(f.name, f.name), metadata=f.metadata)
                     for f in dtype.fields if self._keep(f.name)]
            return Step({self.target: rebuild_struct(op, parts)})
        if k == "map":
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
        return Step().fail(op.isNotNull(), f"Only Struct or Map objects supported for [field replacement], "
                                           f"found: {type_name(dtype)}")

