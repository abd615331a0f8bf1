"""Flatten: flatten nested structs (or nested Maps) into one level, joining names with a delimiter."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StringType, StructField, StructType, VariantType

from ..config import Config, ConfigDef, Importance, Type
from ..converters.connect_schema import is_optional, with_optional
from ..core.topic_schemas import TABLES_META, is_envelope_type, relaid
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
from .columns import rebuild_struct

__all__ = ["Flatten", "VARIANT_DEPTH"]

#: How deep a schemaless object's nesting Flatten unrolls: a loop of this many passes over the record's entries,
#: each expanding the objects found one level (a pass over a record already flat is one test). Kafka recurses to any
#: depth; a record nested deeper fails, naming this limit.
VARIANT_DEPTH = 64
#: the hidden column that holds a schemaless record's flattened entries while Flatten's step reads them
_FLATTENED = "__kc_flattened"


@variant_capable
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

    def _flattened(self, entries: Column) -> Column:
        """A schemaless object's entries (``map<string,variant>``) flattened: ``struct<entries:
        array<struct<key,value,object>>, done:boolean>``, ``done`` false where objects nest deeper than
        :data:`VARIANT_DEPTH`. One ``aggregate`` loop: its accumulator is a lambda variable, so each pass reads the
        entries of the one before without Catalyst copying that expression (an unrolled loop doubles per level)."""
        d = self.delimiter

        def entry(key: Column, value: Column) -> Column:  # ``object``: the entry's own entries, null for a leaf
            return F.struct(key.alias("key"), value.alias("value"), object_entries(value).alias("object"))

        def expand(e: Column) -> Column:
            return F.when(e["object"].isNull(), F.array(e)).otherwise(F.transform(
                F.map_entries(e["object"]), lambda c: entry(F.concat(e["key"], F.lit(d), c["key"]), c["value"])))

        def settled(flat: Column) -> Column:
            return F.struct(flat.alias("entries"), (~F.exists(flat, lambda e: e["object"].isNotNull())).alias("done"))

        def one_level(acc: Column, _: Column) -> Column:
            # the new entries bound to a lambda variable (a one-element transform), so ``done`` reads them without
            # evaluating them twice
            new = F.flatten(F.transform(acc["entries"], expand))
            return F.when(acc["done"], acc).otherwise(F.element_at(F.transform(F.array(new), settled), 1))

        start = F.struct(F.transform(F.map_entries(entries), lambda c: entry(c["key"], c["value"])).alias("entries"),
                         F.lit(False).alias("done"))
        return F.aggregate(F.array_repeat(F.lit(0), VARIANT_DEPTH), start, one_level)

    def _plan_object(self, entries: Column) -> Step:
        """Kafka's ``applySchemaless`` on the entries of a schemaless object, read from the loop's result that
        :meth:`staged` puts in a hidden column. A flattened name that two entries produce (``{"a.b": 1, "a": {"b":
        2}}``) fails the record: Kafka keeps whichever its HashMap iterates last, an order a VARIANT does not keep."""
        flat = F.col(_FLATTENED)
        keys = F.transform(flat["entries"], lambda e: e["key"])
        deep = entries.isNotNull() & ~flat["done"]
        repeated = entries.isNotNull() & (F.size(F.array_distinct(keys)) < F.size(keys))
        twice = F.filter(keys, lambda k, i: F.array_position(keys, k) != i + 1)  # read only for a failed record
        result = F.map_from_entries(F.transform(flat["entries"], lambda e: F.struct(e["key"], e["value"])))
        step = Step({self.target: F.when(deep | repeated, F.lit(None)).otherwise(result)})
        step.fail(deep, f"Flatten of a schemaless value nests objects deeper than {VARIANT_DEPTH} levels, the most "
                        f"this Flatten unrolls")
        return step.fail(repeated, F.concat(F.lit("Flatten of a schemaless value produced the field name "),
                                            F.element_at(twice, 1), F.lit(" twice (one of them would be lost)")))

    def staged(self, df: DataFrame) -> dict[str, Column]:
        if not isinstance(df.schema[self.target].dataType, VariantType):
            return {}
        return {_FLATTENED: self._flattened(object_entries(F.col(self.target)))}

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        if isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map
            return plan_object(self.target, op, "flattening", self._plan_object, F.col(_FLATTENED)["entries"])
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
