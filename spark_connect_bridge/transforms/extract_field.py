"""ExtractField: replace the key or value with one of its fields (nested paths with V2 syntax)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from ..config import CaseInsensitiveValidString, Config, ConfigDef, Importance, Type
from ..errors import ConfigProblem
from .base import (
    KeyOrValue,
    Step,
    java_class_of_variant,
    key_value_variants,
    kind,
    struct_or_map_required,
    type_name,
    variant_capable,
    variant_or_null,
)
from .fieldpath import SYNTAX_VERSIONS, parse_path, resolve
from .replace_field import REPLACE_NULL_DOC

__all__ = ["ExtractField", "FIELD_SYNTAX_DOC"]

FIELD_SYNTAX_DOC = ("Field syntax version: V1 (default) takes the field name as it is; V2 reads nested paths "
                    "separated by dots, with backticks around a step that contains dots (`a.b`.c).")


@variant_capable
@key_value_variants
class ExtractField(KeyOrValue):
    """Replace the key or value with the field ``field`` (a nested path with ``field.syntax.version=V2``).
    A tombstone stays null. Schemaless Maps: a missing field gives null; an intermediate value that is not a
    Map fails the record. Structs: a field the schema lacks fails every record but a tombstone (``Unknown field``)."""

    config_def = (
        ConfigDef()
        .define("field", Type.STRING, importance=Importance.MEDIUM, doc="Field name to extract.")
        .define("field.syntax.version", Type.STRING, "V1", CaseInsensitiveValidString(*SYNTAX_VERSIONS),
                Importance.HIGH, FIELD_SYNTAX_DOC)
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        try:
            parse_path(config.field, config.field_syntax_version)
        except ValueError as e:
            return [ConfigProblem("field", f"Invalid value {config['field']} for configuration field: {e}")]
        return []

    def configure(self, config: Config) -> None:
        self.path = config.field
        self.steps = parse_path(config.field, config.field_syntax_version)

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        if isinstance(dtype, VariantType):
            return self._plan_variant(op)
        k = kind(dtype)
        if k not in ("struct", "map"):
            return Step().fail(op.isNotNull(), struct_or_map_required("field extraction", type_name(dtype)))
        r = resolve(op, dtype, self.steps)
        if r.dtype is None and r.not_a_map is None:
            if k == "struct":
                # Kafka: IllegalArgumentException for every record with the schema; a tombstone has no schema
                # there (JsonConverter reads null bytes as a null schema) and passes as null (found by
                # tests/differential/test_fuzz_transforms.py)
                return Step().fail(F.col(self.target).isNotNull(), f"Unknown field: {self.path}")
            # A struct inside a schemaless Map lacks the field: always null.
            return Step({self.target: F.lit(None).cast("string")}, metadata={self.target: {}})
        step = Step()
        if r.not_a_map is not None:
            step.fail(r.not_a_map, f"Only Map objects supported in absence of schema for [field extraction], "
                                   f"found a non-Map on the path {self.path}")
            if r.dtype is None:
                return step
        step.updates[self.target] = r.column
        step.metadata[self.target] = r.metadata
        return step

    def _plan_variant(self, op: Column) -> Step:
        """A schemaless JSON value as Kafka's Map: the entry at the path (null where missing); a value that is not an
        object fails the record, as an object on the path that is not one does."""
        def at(steps: list[str]) -> Column:
            return op if not steps else F.try_variant_get(op, "$" + "".join(f"['{s}']" for s in steps), "variant")

        def not_object(value: Column) -> Column:
            return value.isNotNull() & ~F.is_variant_null(value) & ~F.schema_of_variant(value).startswith("OBJECT")

        step = Step({self.target: variant_or_null(at(list(self.steps)))})
        step.fail(not_object(op), F.concat(F.lit(struct_or_map_required("field extraction", "")),
                                           java_class_of_variant(op)))
        for i in range(1, len(self.steps)):
            step.fail(not_object(at(list(self.steps[:i]))),
                      f"Only Map objects supported in absence of schema for [field extraction], found a non-Map on "
                      f"the path {self.path}")
        return step
