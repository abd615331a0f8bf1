"""Flatten: flatten nested structs (or nested Maps) into one level, joining names with a delimiter."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StringType, StructField, StructType

from ..config import Config, ConfigDef, Importance, Type
from ..converters.connect_schema import is_optional, with_optional
from ..core.topic_schemas import TABLES_META, is_envelope_type, relaid
from .base import KeyOrValue, Step, key_value_variants, struct_or_map_required, type_name
from .columns import rebuild_struct

__all__ = ["Flatten"]


@key_value_variants
class Flatten(KeyOrValue):
    """Flatten nested structs into top-level fields named ``parent<delimiter>child``; arrays are kept as they
    are. Schemaless nested Maps (``map<string,map<string,...>>``) are flattened the same way; a null nested Map
    is kept as a null entry under the parent's name and an empty one contributes nothing. A struct whose schema has
    a Map field fails every record, whether the map is null or not (Kafka: DataException while building the
    flattened schema). A tombstone passes through."""

    liftable = True
    config_def = ConfigDef().define("delimiter", Type.STRING, ".", importance=Importance.MEDIUM,
                                    doc="Delimiter to insert between field names from the input record when "
                                        "generating field names for the output record")

    def configure(self, config: Config) -> None:
        self.delimiter = config.delimiter

    def _leaves(self, col: Column, dtype: StructType, prefix: str, out: list[Column], maps: list[str],
                fields: list[StructField], optional: bool) -> None:
        """``optional``: an ancestor's schema is optional (Kafka: then every leaf under it is)."""
        for f in dtype.fields:
            name = f"{prefix}{self.delimiter}{f.name}" if prefix else f.name
            c = col.getField(f.name)
            leaf_optional = optional or is_optional(f.nullable, f.metadata)
            if isinstance(f.dataType, StructType):
                self._leaves(c, f.dataType, name, out, maps, fields, leaf_optional)
            else:
                if isinstance(f.dataType, MapType):
                    maps.append(f.name)
                md = with_optional(f.metadata, leaf_optional)
                out.append(c.alias(name, metadata=md))
                fields.append(StructField(name, f.dataType, True, md))

    def _flatten_map(self, m: Column, dtype: MapType) -> Column:
        vt = dtype.valueType
        if not (isinstance(vt, MapType) and isinstance(vt.keyType, StringType)):
            return m
        leaf_t: DataType = vt
        while isinstance(leaf_t, MapType) and isinstance(leaf_t.keyType, StringType):
            leaf_t = leaf_t.valueType
        d = self.delimiter

        def entries(e: Column) -> Column:
            child = self._flatten_map(e["value"], vt)
            nested = F.transform(F.map_entries(child),
                                 lambda c: F.struct(F.concat(e["key"], F.lit(d), c["key"]).alias("key"),
                                                    c["value"].alias("value")))
            null_entry = F.array(F.struct(e["key"].alias("key"), F.lit(None).cast(leaf_t).alias("value")))
            return F.when(e["value"].isNull(), null_entry).otherwise(nested)

        return F.map_from_entries(F.flatten(F.transform(F.map_entries(m), entries)))

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        if isinstance(dtype, StructType):
            leaves: list[Column] = []
            maps: list[str] = []
            new_fields: list[StructField] = []
            leaves_of: dict[str, list[str]] = {}
            sf = df.schema[self.target]
            for f in dtype.fields:
                first = len(new_fields)
                self._leaves(op, StructType([f]), "", leaves, maps, new_fields, is_optional(True, sf.metadata))
                leaves_of[f.name] = [n.name for n in new_fields[first:]]

            def moved(column: str, field: str) -> list[tuple[str, str]]:
                # a topic's struct column (held by a union field kept apart or not) becomes its leaves
                return [(column + leaf[len(field):], leaf) for leaf in leaves_of.get(field, [])]
            md = dict(df.schema[self.target].metadata)
            if is_envelope_type(dtype):  # its layouts describe before/after, which are flattened away
                md.pop(TABLES_META, None)
            md = relaid(md, self.target, StructType(new_fields), moved)
            # Kafka: SchemaUtil.copySchemaBasics(schema, SchemaBuilder.struct()): a required struct
            step = Step({self.target: rebuild_struct(op, leaves)}, metadata={self.target: md},
                        optional={self.target: False})
            if maps:  # Kafka fails while building the flattened schema, so for every record with a value
                step.fail(op.isNotNull(), "Flatten transformation does not support MAP for record with schemas "
                                          f"(for field {maps[0]}).")
            return step
        if isinstance(dtype, MapType):
            return Step({self.target: self._flatten_map(op, dtype)})
        return Step().fail(op.isNotNull(), struct_or_map_required("flattening", type_name(dtype)))
