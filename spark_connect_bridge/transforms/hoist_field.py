"""HoistField: wrap the key or value in a struct (or a Map) with one field."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from ..config import Config, ConfigDef, Importance, Type
from ..converters.connect_schema import is_optional, with_optional
from .base import KeyOrValue, Step, key_value_variants, kind, variant_capable

__all__ = ["HoistField"]


@variant_capable
@key_value_variants
class HoistField(KeyOrValue):
    """Wrap data in a struct with the single field ``field`` (a schemaless Map value is wrapped in a Map
    ``{field: value}``). A tombstone is wrapped too: the result is a struct whose field is null.
    Primitives are treated as schema'd (Spark types are always known), so they are wrapped in a struct.
    """

    config_def = ConfigDef().define("field", Type.STRING, importance=Importance.MEDIUM,
                                    doc="Field name for the single field that will be created in the resulting "
                                        "Struct or Map.")

    def configure(self, config: Config) -> None:
        self.field = config.field

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema[self.target]
        op = F.col(self.target)
        if isinstance(sf.dataType, VariantType):  # schemaless: Kafka wraps any value (null too) in a Map
            return Step({self.target: F.to_variant_object(F.create_map(F.lit(self.field), op))},
                        metadata={self.target: {}})
        if kind(sf.dataType) == "map":
            return Step({self.target: F.create_map(F.lit(self.field), op)}, metadata={self.target: {}})
        # Kafka: SchemaBuilder.struct().field(field, schema): a required struct holding the schema as it was
        return Step({self.target: F.struct(op.alias(self.field, metadata=with_optional(
            sf.metadata, is_optional(sf.nullable, sf.metadata))))}, metadata={self.target: {}},
            optional={self.target: False})
