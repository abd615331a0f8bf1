"""InsertField: add the record's topic, partition, offset, timestamp or a static value as fields."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from ..config import Config, ConfigDef, Importance, Type
from ..converters.connect_schema import with_optional
from ..core.records import is_schemaless
from ..errors import ConfigProblem
from .base import (
    OBJECT_ENTRIES,
    KeyOrValue,
    Step,
    key_value_variants,
    plan_object,
    struct_or_map_required,
    type_name,
    variant_capable,
)
from .columns import into_map_value, map_put, map_value_type_problem, q
from .replace_field import REPLACE_NULL_DOC

__all__ = ["InsertField"]

_OPTIONAL_DOC = " Suffix with ! to make this a required field, or ? to keep it optional (the default)."


@variant_capable
@key_value_variants
class InsertField(KeyOrValue):
    """Insert fields from record metadata: topic (string), partition (int32, skipped when null), offset
    (int64), timestamp (a Timestamp with schemas; epoch milliseconds as int64 in a schemaless Map or a struct
    read from schemaless JSON, as Kafka; skipped when null), or a static string. A tombstone passes through. An
    existing field of the same name is overwritten. With a schema, as Kafka's: the struct's schema becomes required
    (its name, version and parameters kept) and each inserted field is optional, or required with ``!``.
    """

    liftable = True
    config_def = (
        ConfigDef()
        .define("topic.field", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Field name for Kafka topic." + _OPTIONAL_DOC)
        .define("partition.field", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Field name for Kafka partition." + _OPTIONAL_DOC)
        .define("offset.field", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Field name for the record offset (here: the `offset` column)." + _OPTIONAL_DOC)
        .define("timestamp.field", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Field name for record timestamp." + _OPTIONAL_DOC)
        .define("static.field", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Field name for static data field." + _OPTIONAL_DOC)
        .define("static.value", Type.STRING, None, importance=Importance.MEDIUM,
                doc="Static field value, if field name configured.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    _FIELDS = ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")

    def validate(self, config: Config) -> list[ConfigProblem]:
        problems = []
        if config.static_field and config.static_value is None:
            problems.append(ConfigProblem("static.value", 'Missing required configuration "static.value": it is '
                                                          'required when "static.field" is set'))
        if not any(config[k] for k in self._FIELDS):
            problems.append(ConfigProblem("", "No field insertion configured: set at least one of "
                                              + ", ".join(self._FIELDS)))
        return problems

    def configure(self, config: Config) -> None:
        self.inserts: list[tuple[str, str]] = []  # (config key, field name)
        self.optional: dict[str, bool] = {}  # field name -> its schema's optional flag ("!": required)
        for k in self._FIELDS:
            if config[k]:
                name = config[k]
                if name.endswith(("!", "?")):
                    name = name[:-1]
                self.inserts.append((k, name))
                self.optional[name] = not config[k].endswith("!")
        self.static_value = config.static_value

    def _value(self, key: str, df: DataFrame, schemaless: bool) -> tuple[Column, DataType]:
        if key == "topic.field":
            return F.col("topic"), StringType()
        if key == "partition.field":
            return F.col("partition").cast("int"), IntegerType()
        if key == "offset.field":
            return F.col("offset").cast("long"), LongType()
        if key == "timestamp.field":
            if schemaless:
                return F.unix_millis(F.col("timestamp")), LongType()
            return F.col("timestamp"), TimestampType()
        return F.lit(self.static_value), StringType()

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        if isinstance(dtype, StructType):
            new = op
            schemaless = is_schemaless(dict(df.schema[self.target].metadata))  # Kafka sees a Map
            fields = {f.name: StructField(f.name, f.dataType, True, f.metadata) for f in dtype.fields}
            for key, name in self.inserts:
                v, t = self._value(key, df, schemaless)
                new = new.withField(q(name), v)
                fields[name] = StructField(name, t, True, with_optional({}, self.optional[name]))
            # update_fields of a null struct is null: a tombstone passes through. It drops the metadata of the
            # fields it sets: the cast gives each its schema's optional flag.
            new = new.cast(StructType(list(fields.values())))
            # Kafka: SchemaUtil.copySchemaBasics(schema, SchemaBuilder.struct()): name, version, doc and
            # parameters kept, the struct required
            return Step({self.target: new}, optional={self.target: False})
        if isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map
            return plan_object(self.target, op, "field insertion", lambda m: self._plan_map(m, OBJECT_ENTRIES, df))
        if isinstance(dtype, MapType):
            return self._plan_map(op, dtype, df)
        return Step().fail(op.isNotNull(), struct_or_map_required("field insertion", type_name(dtype)))

    def _plan_map(self, op: Column, map_type: MapType, df: DataFrame) -> Step:
        """Kafka's schemaless case: the fields put into (a copy of) the Map; partition and timestamp only when
        the record has them."""
        entries = []
        skip_when_null = []
        for key, name in self.inserts:
            v, t = self._value(key, df, True)
            stored = into_map_value(v, t, map_type.valueType)
            if stored is None:
                raise map_value_type_problem(key, name, map_type, t, f"inserting {name}")
            entries.append((name, stored))
            if key in ("partition.field", "timestamp.field"):
                skip_when_null.append((name, stored))
        new = map_put(op, [(n, v) for n, v in entries if all(n != s for s, _ in skip_when_null)])
        for name, v in skip_when_null:
            new = F.when(v.isNull(), new).otherwise(map_put(new, [(name, v)]))
        return Step({self.target: F.when(op.isNull(), op).otherwise(new)})
