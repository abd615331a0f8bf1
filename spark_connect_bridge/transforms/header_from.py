"""HeaderFrom: copy or move fields of the key or value into headers."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StructType, VariantType

from ..config import Config, ConfigDef, Importance, Type, ValidList, ValidString
from ..errors import ConfigProblem
from .base import (
    KeyOrValue,
    Step,
    key_value_variants,
    object_entries,
    plan_object,
    struct_or_map_required,
    type_name,
    variant_capable,
)
from .columns import map_remove, q, rebuild_struct
from .insert_header import append_headers
from .replace_field import REPLACE_NULL_DOC
from .values import header_bytes, variant_header_bytes

__all__ = ["HeaderFrom"]


@variant_capable
@key_value_variants
class HeaderFrom(KeyOrValue):
    """Append one header per listed field (``fields[i]`` → ``headers[i]``), its value encoded as Kafka's
    SimpleHeaderConverter writes it (see :mod:`.values`); ``move`` also removes the fields. A null key/value
    fails the record (as in Kafka); with schemas, a listed field the struct lacks fails every record."""

    config_def = (
        ConfigDef()
        .define("fields", Type.LIST, validator=ValidList.non_empty_list(), importance=Importance.HIGH,
                doc="Field names in the record whose values are to be copied or moved to headers.")
        .define("headers", Type.LIST, validator=ValidList.non_empty_list(), importance=Importance.HIGH,
                doc="Header names, in the same order as the field names listed in the fields configuration "
                    "property.")
        .define("operation", Type.STRING, validator=ValidString("move", "copy"), importance=Importance.HIGH,
                doc="Either move if the fields are to be moved to the headers (removed from the key/value), or "
                    "copy if the fields are to be copied to the headers (retained in the key/value).")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        if len(config.fields) != len(config.headers):
            return [ConfigProblem("headers", f"Invalid value {','.join(config['headers'])} for configuration "
                                             f"headers: 'fields' config must have the same number of elements as "
                                             f"'headers' config.")]
        return []

    def configure(self, config: Config) -> None:
        self.fields, self.headers = config.fields, config.headers
        self.move = config.operation == "move"

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        step = Step()
        if isinstance(dtype, StructType):
            missing = [f for f in self.fields if f not in dtype.fieldNames()]
            if missing:
                return step.fail(F.lit(True), f"Field does not exist in the {self.target} schema: {missing[0]}")
            pairs = [(h, header_bytes(op.getField(f), dtype[f].dataType, dict(dtype[f].metadata)))
                     for f, h in zip(self.fields, self.headers, strict=True)]
            if self.move:
                keep = [op.getField(f.name).alias(f.name, metadata=f.metadata) for f in dtype.fields
                        if f.name not in self.fields]
                step.updates[self.target] = op.dropFields(*[q(f) for f in dict.fromkeys(self.fields)]) if keep else \
                    rebuild_struct(op, keep)
                step.optional[self.target] = False  # Kafka: copySchemaBasics(schema, SchemaBuilder.struct())
        elif isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map
            pairs = [(h, variant_header_bytes(F.try_element_at(object_entries(op), F.lit(f))))
                     for f, h in zip(self.fields, self.headers, strict=True)]
            step = plan_object(self.target, op, f"header {'move' if self.move else 'copy'}",
                               lambda m: Step({self.target: map_remove(m, self.fields)} if self.move else {}))
        elif isinstance(dtype, MapType):
            pairs = [(h, header_bytes(F.try_element_at(op, F.lit(f)), dtype.valueType))
                     for f, h in zip(self.fields, self.headers, strict=True)]
            if self.move:
                step.updates[self.target] = map_remove(op, self.fields)
        else:
            return step.fail(F.lit(True), struct_or_map_required("header from", type_name(dtype)))
        step.updates["headers"] = append_headers(pairs)
        return step.fail(op.isNull(), struct_or_map_required("header from", "null"))
