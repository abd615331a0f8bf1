"""SetSchemaMetadata: set the Connect schema name and/or version of the key or value."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from ..config import Config, ConfigDef, Importance, Type
from ..errors import ConfigProblem
from .base import KeyOrValue, Step, key_value_variants, kind, variant_capable
from .replace_field import REPLACE_NULL_DOC

__all__ = ["SetSchemaMetadata"]


@variant_capable
@key_value_variants
class SetSchemaMetadata(KeyOrValue):
    """Set the schema name (``connect.name``) and/or version (``connect.version``) in the key/value column's
    metadata, which converters write out. A schemaless Map (or VARIANT) has no schema: a non-null one fails the
    record, as in Kafka.
    Schema metadata is one per column, so this SMT cannot take a predicate."""

    predicate_problem = ("SetSchemaMetadata changes the schema metadata of a column, which is one per column, not per "
                         "record: it cannot depend on a predicate")
    config_def = (
        ConfigDef()
        .define("schema.name", Type.STRING, None, importance=Importance.HIGH, doc="Schema name to set.")
        .define("schema.version", Type.INT, None, importance=Importance.HIGH, doc="Schema version to set.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        if config.schema_name is None and config.schema_version is None:
            return [ConfigProblem("", "Neither schema name nor version configured: set schema.name and/or "
                                      "schema.version")]
        return []

    def configure(self, config: Config) -> None:
        self.name, self.version = config.schema_name, config.schema_version

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema[self.target]
        if kind(sf.dataType) == "map" or isinstance(sf.dataType, VariantType):  # a Map in Kafka: no schema
            return Step().fail(F.col(self.target).isNotNull(), "Schema required for [updating schema metadata]")
        md = dict(sf.metadata)
        if self.name is not None:
            md["connect.name"] = self.name
        if self.version is not None:
            md["connect.version"] = self.version
        return Step(metadata={self.target: md})
