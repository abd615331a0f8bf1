"""The machinery every SMT and predicate shares: config parsing, Key/Value variants, running one stage.

A transformation declares ``config_def`` and implements :meth:`Transformation.plan`, which looks at the input
DataFrame's schema (never its data) and returns a :class:`Step`: the new column expressions, a per-row
failure condition with its message, a per-row drop condition and column-metadata changes. :func:`run_step`
applies a Step, honouring a predicate: non-matching records keep their columns (both branches are unified to
one Spark type; where no struct merge does, to a VARIANT, a schemaless value).
Record failures go through :func:`~spark_connect_bridge.core.record_errors.checked` and drops through
:func:`~spark_connect_bridge.core.record_errors.drop_where`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    CalendarIntervalType,
    DataType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    VariantType,
)

from ..config import Config, ConfigDef
from ..converters.connect_schema import with_optional
from ..core.record_errors import LIFT_FLAG_PREFIX, checked, drop_where, ok, with_metadata
from ..core.topic_schemas import relaid
from ..errors import ConfigError, ConfigProblem

__all__ = ["Transformation", "KeyOrValue", "Predicate", "Step", "run_step", "key_value_variants",
           "kind", "type_name", "tombstone", "null_flag", "TRANSFORMATION"]

TRANSFORMATION = "TRANSFORMATION"
KAFKA_PKG = "org.apache.kafka.connect.transforms"


def kind(dtype: DataType | None) -> str:
    """``struct`` (schema'd), ``map`` (schemaless Map), ``array`` or ``primitive``."""
    if isinstance(dtype, StructType):
        return "struct"
    if isinstance(dtype, MapType):
        return "map"
    if dtype is not None and dtype.typeName() == "array":
        return "array"
    return "primitive"


def type_name(dtype: DataType | None) -> str:
    return "missing" if dtype is None else dtype.simpleString()


def map_required(purpose: str, found: str) -> str:
    """Kafka's message (``Requirements.requireMap``) for a schemaless key or value that is not a Map."""
    return f"Only Map objects supported in absence of schema for [{purpose}], found: {found}"


def struct_or_map_required(purpose: str, found: str) -> str:
    """Kafka's message (``Requirements``) for a key or value that is neither a Struct nor a Map: ``found`` is the
    type it has (:func:`type_name`) or ``"null"``."""
    return f"Only Struct or Map objects supported for [{purpose}], found: {found}"


#: SMTs that take a schemaless VARIANT key/value (JsonConverter ``schemas.enable=false`` without ``spark.schema``)
#: as Kafka's SMTs take its Map; a chain with another SMT on such a column is refused at validation (it needs the
#: fields' types: ``spark.schema``). Transforms of the whole record (routers, headers, filters) take any value.
VARIANT_CAPABLE: set[str] = set()


def variant_problems(chain: Any, schemaless: Mapping[str, str]) -> list[ConfigProblem]:
    """Config validation: the stages of ``chain`` that read the fields of a schemaless VARIANT column
    (``schemaless``: column -> the converter key that makes it so) and cannot (see :data:`VARIANT_CAPABLE`)."""
    problems = []
    for stage in chain.stages:
        transform = stage.transform
        read = [c for c in transform.reads_columns() if c in schemaless]
        if read and not any(cls.__name__ in VARIANT_CAPABLE for cls in type(transform).__mro__):
            column = read[0]
            prefix = schemaless[column][: -len("schemas.enable")]
            problems.append(ConfigProblem(
                f"transforms.{stage.alias}.type",
                f"{transform.class_name} needs the fields of the {column} here: {schemaless[column]}=false "
                f"without {prefix}spark.schema reads each {column} as a VARIANT, which only "
                f"{', '.join(sorted(VARIANT_CAPABLE))} and the record-level transforms take. Set {prefix}spark.schema "
                f"(a Spark DDL of the JSON) to run it on Kafka's schemaless rules"))
    return problems


def variant_capable(cls: type) -> type:
    """Class decorator: the SMT's ``plan`` handles a VARIANT key/value (see :data:`VARIANT_CAPABLE`)."""
    VARIANT_CAPABLE.add(cls.__name__)
    return cls


def java_class_of_variant(value: Column) -> Column:
    """The class Kafka's JsonConverter reads a schemaless JSON value as (its SMTs' messages name it)."""
    t = F.schema_of_variant(value)
    return (F.when(t.startswith("OBJECT"), F.lit("java.util.HashMap"))
            .when(t.startswith("ARRAY"), F.lit("java.util.ArrayList"))
            .when(t == F.lit("STRING"), F.lit("java.lang.String"))
            .when(t == F.lit("BOOLEAN"), F.lit("java.lang.Boolean"))
            .when(t.isin("TINYINT", "SMALLINT", "INT", "BIGINT"), F.lit("java.lang.Long"))
            .otherwise(F.lit("java.lang.Double")))


#: the type of a schemaless JSON object's entries (:func:`object_entries`)
OBJECT_ENTRIES = MapType(StringType(), VariantType())


def object_entries(value: Column) -> Column:
    """A schemaless JSON object (a VARIANT) as Kafka's Map: its entries as ``map<string,variant>``; null for a null
    value and for any value that is not an object."""
    return F.try_variant_get(value, "$", "map<string,variant>")


def plan_object(target: str, value: Column, purpose: str, plan_map: Any, entries: Column | None = None) -> Step:
    """A schemaless VARIANT key/value through an SMT's Map plan (``plan_map(entries) -> Step``), as Kafka's SMTs take
    the Map its JsonConverter reads: the plan's new ``target`` built back into an object, a null value staying null,
    a value that is not an object failing the record as Kafka's ``requireMap`` does (naming its Java class).
    ``entries``: a column that a stage computed from :func:`object_entries` of ``value`` and that is null exactly
    where they are (:meth:`Transformation.staged`), read instead of extracting the entries again."""
    entries = object_entries(value) if entries is None else entries
    step: Step = plan_map(entries)
    new = step.updates.get(target)
    if new is not None:
        step.updates[target] = F.when(entries.isNull(), F.lit(None).cast("variant")).otherwise(F.to_variant_object(new))
    return step.fail(value.isNotNull() & entries.isNull(),
                     F.concat(F.lit(map_required(purpose, "")), java_class_of_variant(value)))


def variant_or_null(value: Column) -> Column:
    """A VARIANT with its JSON null as SQL null: Kafka's value is then null (a tombstone to a sink)."""
    return F.when(F.is_variant_null(value), F.lit(None).cast("variant")).otherwise(value)


def null_flag(column: str) -> str:
    """The hidden boolean column that says ``column`` is null while a chain runs with it lifted (chain.py)."""
    return f"{LIFT_FLAG_PREFIX}{column}"


def tombstone(df: DataFrame, column: str) -> Column:
    """Whether ``column`` (``key`` or ``value``) of each record is null. Stages must test a record's nullness
    through this, never with ``F.col(column).isNull()``: inside a chain the column may be lifted (a null struct
    replaced by a struct of nulls, its nullness kept in :func:`null_flag`), see ``Chain.apply``."""
    flag = null_flag(column)
    return F.col(flag) if flag in df.columns else F.col(column).isNull()


def _kw_to_key(name: str) -> str:
    return name.replace("_", ".")


class _Configurable:
    """Parse a config mapping or keyword arguments once through ``config_def``."""

    config_def: ClassVar[ConfigDef] = ConfigDef()
    plugin_type: ClassVar[str]
    kafka_class: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None, /, *, alias: str | None = None,
                 predicate: Predicate | None = None, negate: bool = False, **kwargs: Any):
        props: dict[str, Any] = dict(config or {})
        for k, v in kwargs.items():
            props[_kw_to_key(k)] = v
        self.alias = alias
        self.predicate = predicate
        self.negate = negate
        self.originals = dict(props)
        problems: list[ConfigProblem] = []
        try:
            self.config: Config = self.config_def.parse(props)
        except ConfigError as e:
            problems.extend(e.problems)
        else:
            problems.extend(self.validate(self.config))
        if negate and predicate is None:
            problems.append(ConfigProblem("negate", "Invalid value true for configuration negate: negate is "
                                                    "only allowed together with a predicate"))
        if problems:
            raise ConfigError(problems, context=self.class_name)
        self.configure(self.config)

    #: The default of :meth:`lift_safe` for every column.
    liftable: ClassVar[bool] = False
    #: Keys whose values are Spark SQL that this plugin runs (off for configs sent over REST unless the worker
    #: enables them, then checked by :mod:`~spark_connect_bridge.transforms.sql_allowlist`).
    expression_keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def expressions(cls, key: str, value: str) -> list[str]:
        """The Spark SQL expressions that ``value`` of the expression key ``key`` runs, each as it is parsed."""
        return [value] if value.strip() else []

    # -- hooks -------------------------------------------------------------------------------------
    def lift_safe(self, column: str) -> bool:
        """Whether this stage can run while ``column`` is lifted (see ``Chain.apply``): it either does not read
        ``column``, or reads its nullness only through :func:`tombstone`, leaves a null record null, and never
        fails a record for being a non-null struct that it would pass as a null one."""
        return self.liftable

    def validate(self, config: Config) -> list[ConfigProblem]:
        """Cross-key checks (keys unprefixed); every problem is reported at once."""
        return []

    def configure(self, config: Config) -> None:
        """Derive the attributes the transform needs (runs only on a valid config)."""

    @property
    def class_name(self) -> str:
        return self.kafka_class or f"{type(self).__module__}.{type(self).__qualname__}"

    @classmethod
    def doc(cls) -> str:
        return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.originals.items()}
        return f"{type(self).__qualname__}({shown!r})"


@dataclass
class Step:
    """What one stage does, as Column expressions over the stage's *input* columns."""

    updates: dict[str, Column] = field(default_factory=dict)
    failed: Column | None = None
    message: Column | None = None
    drop: Column | None = None
    metadata: dict[str, dict] = field(default_factory=dict)
    #: column -> the Connect ``optional`` flag of the schema the step makes (Kafka's SMT rules: HoistField,
    #: InsertField, ReplaceField, ... build a required struct), set after ``metadata``
    optional: dict[str, bool] = field(default_factory=dict)

    def fail(self, condition: Column, message: str | Column) -> Step:
        msg = F.lit(message) if isinstance(message, str) else message
        if self.failed is None:
            self.failed, self.message = condition, msg
        else:
            self.message = F.when(F.coalesce(self.failed, F.lit(False)), self.message).otherwise(msg)
            self.failed = F.coalesce(self.failed, F.lit(False)) | condition
        return self


class Transformation(_Configurable):
    """Base class of every SMT: ``df.transform(smt)`` applies it."""

    plugin_type: ClassVar[str] = "transformation"
    #: Why this transform can never take a predicate (checked when the chain is built), or None.
    predicate_problem: ClassVar[str | None] = None

    def plan(self, df: DataFrame) -> Step:
        raise NotImplementedError

    def reads_columns(self) -> tuple[str, ...]:
        """The record columns whose fields this transform reads (``key``/``value``); none for one that takes the
        record as a whole (a router, a header transform)."""
        return ()

    def staged(self, df: DataFrame) -> dict[str, Column]:
        """Hidden columns (name -> expression over ``df``) computed in a projection of their own before the step,
        which :meth:`plan` reads by name and :meth:`apply` drops after it: an expression that both the step's new
        value and its failure check read would otherwise run once for each."""
        return {}

    def apply(self, df: DataFrame, *, alias: str | None = None, condition: Column | None = None,
              unchanged_nulls: frozenset[str] = frozenset()) -> DataFrame:
        """Apply to ``df``; ``condition`` (the predicate's verdict, negation included) limits the records;
        ``unchanged_nulls`` names columns that are null in every record the condition leaves unchanged."""
        alias = alias or self.alias
        if condition is None and self.predicate is not None:
            condition = self.predicate.test(df)
            if self.negate:
                condition = ~condition
            unchanged_nulls = self.predicate.null_columns(self.negate)
        staged = self.staged(df)
        if staged:
            df = df.withColumns(staged)
        out = run_step(df, self.plan(df), condition=condition, class_name=self.class_name, alias=alias,
                       predicate_key=f"transforms.{alias}.predicate" if alias else "predicate",
                       unchanged_nulls=unchanged_nulls)
        return out.drop(*staged) if staged else out

    def __call__(self, df: DataFrame) -> DataFrame:
        return self.apply(df)


class KeyOrValue(Transformation):
    """An SMT with ``$Key`` and ``$Value`` variants: ``target`` names the column it reads and writes."""

    target: ClassVar[str] = ""

    def reads_columns(self) -> tuple[str, ...]:
        return (self.target,)

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any):
        if not self.target:
            raise TypeError(f"{type(self).__name__} has Key and Value variants: use {type(self).__name__}.Key "
                            f"or {type(self).__name__}.Value")
        super().__init__(config, **kwargs)


def key_value_variants(cls: type[KeyOrValue]) -> type[KeyOrValue]:
    """Class decorator: add ``cls.Key`` and ``cls.Value`` (Kafka's ``X$Key``/``X$Value``)."""
    simple = cls.__name__
    base = getattr(cls, "kafka_base", f"{KAFKA_PKG}.{simple}")
    for target in ("key", "value"):
        name = target.capitalize()
        sub = type(name, (cls,), {"target": target, "kafka_class": f"{base}${name}",
                                  "__doc__": cls.__doc__, "__module__": cls.__module__,
                                  "__qualname__": f"{simple}.{name}"})
        setattr(cls, name, sub)
    return cls


class Predicate(_Configurable):
    """Base class of every predicate: :meth:`test` returns a boolean Column (null counts as false)."""

    plugin_type: ClassVar[str] = "predicate"

    def test(self, df: DataFrame) -> Column:
        raise NotImplementedError

    def null_columns(self, outcome: bool) -> frozenset[str]:
        """The record columns that are null in every record for which :meth:`test` is ``outcome``: a stage
        leaves such records unchanged, so its new type need not be unified with the old one there."""
        return frozenset()


# -- running a step ---------------------------------------------------------------------------------
def _strip(dt: DataType) -> DataType:
    """The type without nullability and metadata, for comparisons."""
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _strip(f.dataType)) for f in dt.fields])
    if isinstance(dt, MapType):
        return MapType(_strip(dt.keyType), _strip(dt.valueType))
    if isinstance(dt, ArrayType):
        return ArrayType(_strip(dt.elementType))
    return dt


def unify_types(old: DataType, new: DataType) -> DataType | None:
    """A type both branches of a predicated stage can take, or None."""
    if _strip(old) == _strip(new):
        return new
    if isinstance(old, StructType) and isinstance(new, StructType):
        fields: list[StructField] = []
        names = new.fieldNames() + [n for n in old.fieldNames() if n not in new.fieldNames()]
        for n in names:
            a = old[n] if n in old.fieldNames() else None
            b = new[n] if n in new.fieldNames() else None
            if a is not None and b is not None:
                t = unify_types(a.dataType, b.dataType)
                if t is None:
                    return None
                fields.append(StructField(n, t, True, b.metadata))
            else:
                f = b or a
                assert f is not None
                fields.append(StructField(n, f.dataType, True, f.metadata))
        return StructType(fields)
    return None


def as_variant(col: Column, have: DataType) -> Column | None:
    """``col`` of type ``have`` as a VARIANT (a null stays a SQL null), or None where Spark cannot make one."""
    if isinstance(have, VariantType):
        return col
    if isinstance(have, (StructType, MapType, ArrayType)):
        if isinstance(have, MapType) and not isinstance(have.keyType, StringType):
            return None
        return F.when(col.isNotNull(), F.to_variant_object(col))
    if isinstance(have, (CalendarIntervalType, NullType)):
        return None
    return F.when(col.isNotNull(), col.cast(VariantType()))


def coerce_to_type(col: Column, have: DataType, want: DataType) -> Column:
    """Reshape ``col`` of type ``have`` to the unified type ``want`` (missing struct fields become null)."""
    if _strip(have) == _strip(want):
        return col
    assert isinstance(have, StructType) and isinstance(want, StructType)
    parts = []
    for f in want.fields:
        if f.name in have.fieldNames():
            parts.append(coerce_to_type(col.getField(f.name), have[f.name].dataType, f.dataType)
                         .alias(f.name, metadata=f.metadata))
        else:
            parts.append(F.lit(None).cast(f.dataType).alias(f.name, metadata=f.metadata))
    return F.when(col.isNull(), F.lit(None).cast(want)).otherwise(F.struct(*parts))


def run_step(df: DataFrame, step: Step, *, condition: Column | None, class_name: str, alias: str | None,
             predicate_key: str = "predicate", unchanged_nulls: frozenset[str] = frozenset()) -> DataFrame:
    """Apply ``step`` to ``df``: drops first (stopping the chain for those records), then updates. A column of
    ``unchanged_nulls`` is null in every record the condition leaves unchanged: it takes the step's new type
    as it is (Kafka's ``RecordIsTombstone`` predicate, negated, on a ``$Value`` SMT)."""
    updates, failed, drop = dict(step.updates), step.failed, step.drop
    before = df.schema
    if condition is not None:
        cond = F.coalesce(condition, F.lit(False))
        for n, md in step.metadata.items():
            if n not in updates and md != dict(df.schema[n].metadata):
                raise ConfigError([ConfigProblem(predicate_key, (
                    f"Invalid value for configuration {predicate_key}: {class_name} changes the schema metadata "
                    f"of column '{n}', which is one per column, not per record: it cannot depend on a "
                    f"predicate"))])
        if updates:
            schema = df.schema
            new_types = df.select(*[e.alias(n) for n, e in updates.items()]).schema
            problems = []
            for n, e in list(updates.items()):
                old_t, new_t = schema[n].dataType, new_types[n].dataType
                if n in unchanged_nulls:
                    updates[n] = F.when(cond, e)
                    continue
                t = unify_types(old_t, new_t)
                if t is None:
                    # Kafka's records then differ in schema (its own documented predicate example: a struct key
                    # on one topic, a string on the others): one VARIANT column holds both, as a schemaless
                    # value (later stages follow Kafka's schemaless rules; JsonConverter writes no schema).
                    old_v, new_v = as_variant(F.col(n), old_t), as_variant(e, new_t)
                    if old_v is None or new_v is None:
                        problems.append(ConfigProblem(predicate_key, (
                            f"Invalid value for configuration {predicate_key}: {class_name} changes column '{n}' "
                            f"from {old_t.simpleString()} to {new_t.simpleString()}, but a predicated stage leaves "
                            f"non-matching records unchanged and one DataFrame column holds one type; these "
                            f"types cannot be unified (not even as a VARIANT)")))
                        continue
                    updates[n] = F.when(cond, new_v).otherwise(old_v)
                    continue
                updates[n] = F.when(cond, coerce_to_type(e, new_t, t)).otherwise(coerce_to_type(F.col(n), old_t, t))
            if problems:
                raise ConfigError(problems)
        failed = None if failed is None else (F.coalesce(failed, F.lit(False)) & cond)
        drop = None if drop is None else (F.coalesce(drop, F.lit(False)) & cond)
    if drop is not None:
        df = drop_where(df, drop & ok(df))
    if updates or failed is not None:
        df = checked(df, updates, failed=failed, message=step.message, stage=TRANSFORMATION,
                     class_name=class_name, alias=alias)
    metadata: dict[str, Mapping[str, Any]] = dict(step.metadata)
    for n in ("key", "value"):
        # A struct rebuilt by an expression loses its column metadata; Kafka's SMTs keep the schema's basics
        # (name, version, parameters) and the topics' layouts must follow, or a sink of several topics writes the
        # union of their columns into each table. A step that knows better says so in step.metadata.
        if n in updates and n not in step.metadata and n in before.names and before[n].metadata \
                and isinstance(before[n].dataType, StructType):
            new_type = df.schema[n].dataType
            if isinstance(new_type, StructType):
                metadata[n] = relaid(dict(before[n].metadata), n, new_type)
    for n, flag in step.optional.items():
        metadata[n] = with_optional(metadata[n] if n in metadata else df.schema[n].metadata, flag)
    return with_metadata(df, metadata)  # one DataFrame step: each is analysed again over the whole plan


def prefix_problems(problems: list[ConfigProblem], prefix: str, known: list[str]) -> list[ConfigProblem]:
    """Re-key a plugin's problems (``fields``) under its full config key (``transforms.mask.fields``)."""
    out = []
    names = set(known)
    for p in problems:
        key = p.key
        names_here = names | {key}

        def quoted(m: re.Match[str], names_here: set[str] = names_here) -> str:
            inner = m.group(1)
            return f'"{prefix}{inner}"' if inner in names_here and inner else m.group(0)

        msg = re.sub(r'"([^"]*)"', quoted, p.message)
        if key:
            msg = msg.replace(f"for configuration {key}:", f"for configuration {prefix}{key}:")
        out.append(ConfigProblem(f"{prefix}{key}" if key else prefix.rstrip("."), msg))
    return out
