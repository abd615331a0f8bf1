"""MaskField: replace field values with a type-appropriate empty value or a replacement."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from ..config import Config, ConfigDef, Importance, NonEmptyString, Type, ValidList
from ..core.records import is_schemaless
from .base import (
    KeyOrValue,
    Step,
    java_class_of_variant,
    key_value_variants,
    plan_object,
    struct_or_map_required,
    tombstone,
    type_name,
    variant_capable,
)
from .columns import map_put, null_of, q
from .replace_field import REPLACE_NULL_DOC

__all__ = ["MaskField"]

_INT_BOUNDS = {ByteType: 2**7, ShortType: 2**15, IntegerType: 2**31, LongType: 2**63}
_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^\s*[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)\s*$")


def _empty(dt: DataType) -> Column | None:
    if isinstance(dt, BooleanType):
        return F.lit(False)
    if isinstance(dt, (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)):
        return F.lit(0).cast(dt)
    if isinstance(dt, StringType):
        return F.lit("")
    if isinstance(dt, DateType):
        return F.lit("1970-01-01").cast("date")
    if isinstance(dt, (TimestampType, TimestampNTZType)):
        return F.lit(0).cast("long").cast(dt) if isinstance(dt, TimestampType) else F.lit("1970-01-01").cast(dt)
    if isinstance(dt, ArrayType):
        return F.array().cast(dt)
    if isinstance(dt, MapType):
        return F.create_map().cast(dt)
    return None


def _replacement(dt: DataType, text: str) -> Column | str:
    """The replacement as a value of ``dt`` (Kafka parses it per type), or why it cannot be one."""
    for t, bound in _INT_BOUNDS.items():
        if isinstance(dt, t):
            if _INT_RE.match(text) and -bound <= int(text) < bound:
                return F.lit(int(text)).cast(dt)
            return f"Unable to convert {text} ({dt.simpleString()})"
    if isinstance(dt, (FloatType, DoubleType)):
        if _FLOAT_RE.match(text):
            return F.lit(float(text.strip().rstrip("fFdD"))).cast(dt)
        return f"Unable to convert {text} ({dt.simpleString()})"
    if isinstance(dt, DecimalType):
        try:
            Decimal(text)
        except InvalidOperation:
            return f"Unable to convert {text} ({dt.simpleString()})"
        return F.lit(text).cast(dt)
    if isinstance(dt, StringType):
        return F.lit(text)
    return f"Cannot mask value of type {dt.simpleString()} with custom replacement"


@variant_capable
@key_value_variants
class MaskField(KeyOrValue):
    """Mask the listed fields: booleans become false, numbers 0, strings "", dates the epoch, arrays and
    maps empty; with ``replacement``, numbers and strings become the replacement (parsed to the field's type).
    A null field stays null. A null key/value, a struct/binary field (or a boolean/date/array/map field with a
    replacement), or a replacement that does not parse, fails the record when the field holds a value.
    Schemaless Maps get missing listed fields added with null. A struct read from schemaless JSON (Kafka sees a
    Map) masks a nested object as Kafka's empty Map: the struct with every field null.
    """

    liftable = True
    config_def = (
        ConfigDef()
        .define("fields", Type.LIST, validator=ValidList.non_empty_list(), importance=Importance.HIGH,
                doc="Names of fields to mask.")
        .define("replacement", Type.STRING, None, NonEmptyString(), Importance.LOW,
                "Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty "
                "string values only).")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def configure(self, config: Config) -> None:
        self.fields = list(dict.fromkeys(config.fields))
        self.replacement = config.replacement

    def _mask(self, col: Column, dt: DataType, step: Step, schemaless: bool = False) -> Column:
        new: Column | str | None
        if self.replacement is None and schemaless and isinstance(dt, StructType):
            # a nested object of a schemaless message: Kafka's empty Map, as the struct's type can hold it
            new = null_of(dt) if not dt.fields else F.struct(*[null_of(f.dataType).alias(f.name) for f in dt.fields])
        elif self.replacement is None:
            new = _empty(dt)
            if new is None:
                step.fail(col.isNotNull(), f"Cannot mask value of type {dt.simpleString()}")
                return col
        else:
            new = _replacement(dt, self.replacement)
            if isinstance(new, str):
                step.fail(col.isNotNull(), new)
                return col
        return F.when(col.isNull(), col).otherwise(new)

    def _mask_variant(self, value: Column, step: Step) -> Column:
        """An entry of a schemaless object masked by the Java class Kafka's JsonConverter reads it as (Long,
        Double, String, Boolean, ArrayList, HashMap); a missing or null entry becomes null."""
        cls = java_class_of_variant(value)
        integral, fractional, text = cls == "java.lang.Long", cls == "java.lang.Double", cls == "java.lang.String"
        null = value.isNull() | F.is_variant_null(value)
        if self.replacement is None:
            masked = (F.when(cls == "java.lang.Boolean", F.lit(False).cast("variant"))
                      .when(integral, F.lit(0).cast("long").cast("variant"))
                      .when(fractional, F.lit(0.0).cast("variant")).when(text, F.lit("").cast("variant"))
                      .when(cls == "java.util.ArrayList", F.to_variant_object(F.array().cast("array<string>")))
                      .when(cls == "java.util.HashMap",
                            F.to_variant_object(F.create_map().cast("map<string,string>"))))
            return F.when(null, F.lit(None).cast("variant")).otherwise(masked)
        as_long, as_double = _replacement(LongType(), self.replacement), _replacement(DoubleType(), self.replacement)
        for condition, replaced in ((integral, as_long), (fractional, as_double)):
            if isinstance(replaced, str):
                step.fail(~null & condition, f"Unable to convert {self.replacement} to the value's type")
        step.fail(~null & ~integral & ~fractional & ~text, F.concat(
            F.lit("Cannot mask value of type class "), cls, F.lit(" with custom replacement")))
        masked = F.when(text, F.lit(self.replacement).cast("variant"))
        for condition, replaced in ((integral, as_long), (fractional, as_double)):
            if not isinstance(replaced, str):
                masked = masked.when(condition, replaced.cast("variant"))
        return F.when(null, F.lit(None).cast("variant")).otherwise(masked)

    def plan(self, df: DataFrame) -> Step:
        op = F.col(self.target)
        dtype = df.schema[self.target].dataType
        step = Step()
        if isinstance(dtype, StructType):
            new = op
            schemaless = is_schemaless(dict(df.schema[self.target].metadata))  # Kafka sees a Map
            for f in dtype.fields:
                if f.name in self.fields:
                    new = new.withField(q(f.name), self._mask(op.getField(f.name), f.dataType, step, schemaless))
            # update_fields keeps field order, and of a null struct is null; it drops field metadata, which a
            # cast back to the (unchanged) type restores.
            if any(f.metadata for f in dtype.fields if f.name in self.fields):
                new = new.cast(dtype)
            step.updates[self.target] = new
        elif isinstance(dtype, VariantType):  # a schemaless JSON object as Kafka's Map
            def masked(m: Column) -> Step:
                step.updates[self.target] = map_put(m, [(f, self._mask_variant(F.try_element_at(m, F.lit(f)), step))
                                                        for f in self.fields])
                return step
            step = plan_object(self.target, op, "masking fields", masked)
        elif isinstance(dtype, MapType):
            vt = dtype.valueType
            entries = [(f, self._mask(F.try_element_at(op, F.lit(f)), vt, step)) for f in self.fields]
            step.updates[self.target] = F.when(op.isNull(), op).otherwise(map_put(op, entries))
        else:
            return step.fail(F.lit(True), struct_or_map_required("masking fields", type_name(dtype)))
        return step.fail(tombstone(df, self.target), struct_or_map_required("masking fields", "null"))
