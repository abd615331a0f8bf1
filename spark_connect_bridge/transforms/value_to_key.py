"""ValueToKey: replace the key with fields of the value."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StructType, VariantType

from ..config import Config, ConfigDef, Importance, Type, ValidList
from .base import (
    Step,
    Transformation,
    java_class_of_variant,
    map_required,
    object_entries,
    struct_or_map_required,
    tombstone,
    type_name,
    variant_capable,
)
from .replace_field import REPLACE_NULL_DOC

__all__ = ["ValueToKey"]


@variant_capable
class ValueToKey(Transformation):
    """Replace the record key with a new key formed from the listed value fields: a struct of those fields
    (schema'd value; a field the schema lacks fails every record) or a Map (schemaless value; a missing field
    gives a null entry). A null value fails the record, as in Kafka."""

    kafka_class = "org.apache.kafka.connect.transforms.ValueToKey"
    def reads_columns(self) -> tuple[str, ...]:
        return ("value",)

    config_def = (
        ConfigDef()
        .define("fields", Type.LIST, validator=ValidList.non_empty_list(), importance=Importance.HIGH,
                doc="Field names on the record value to extract as the record key.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def configure(self, config: Config) -> None:
        self.fields = config.fields

    def lift_safe(self, column: str) -> bool:
        return column == "value"  # it replaces the key

    def plan(self, df: DataFrame) -> Step:
        value = F.col("value")
        dtype = df.schema["value"].dataType
        step = Step()
        if isinstance(dtype, StructType):
            missing = [f for f in self.fields if f not in dtype.fieldNames()]
            if missing:
                return step.fail(F.lit(True), f"Field does not exist: {missing[0]}")
            step.updates["key"] = F.struct(*[value.getField(f).alias(f, metadata=dtype[f].metadata)
                                             for f in self.fields])
        elif isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map: the key a Map too
            entries = object_entries(value)
            step.updates["key"] = F.to_variant_object(F.map_from_arrays(
                F.array(*[F.lit(f) for f in self.fields]),
                F.array(*[F.try_element_at(entries, F.lit(f)) for f in self.fields])))
            step.metadata["key"] = {}
            step.optional["key"] = False
            return step.fail(F.coalesce(entries.isNull(), F.lit(True)), F.concat(
                F.lit(map_required("copying fields from value to key", "")),
                F.when(tombstone(df, "value"), F.lit("null")).otherwise(java_class_of_variant(value))))
        elif isinstance(dtype, MapType):
            step.updates["key"] = F.map_from_arrays(F.array(*[F.lit(f) for f in self.fields]),
                                                    F.array(*[F.try_element_at(value, F.lit(f))
                                                              for f in self.fields]))
        else:
            return step.fail(F.lit(True), struct_or_map_required("copying fields from value to key", type_name(dtype)))
        step.metadata["key"] = {}
        step.optional["key"] = False  # Kafka: SchemaBuilder.struct() of the value's field schemas
        return step.fail(tombstone(df, "value"), struct_or_map_required("copying fields from value to key", "null"))
