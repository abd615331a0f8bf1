"""Cast: change the type of top-level fields, or of the whole key/value, with Kafka's conversion rules."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from ..config import Config, ConfigDef, Importance, Type, ValidList
from ..converters.connect_schema import META_OPTIONAL
from ..errors import ConfigProblem
from .base import (
    KeyOrValue,
    Step,
    key_value_variants,
    kind,
    object_entries,
    plan_object,
    struct_or_map_required,
    type_name,
    variant_capable,
)
from .columns import map_put, map_value_type_problem, q, same_type
from .replace_field import REPLACE_NULL_DOC
from .values import connect_to_string

__all__ = ["Cast", "TARGETS", "cast_column", "cast_variant"]

#: the hidden column of a schemaless value's listed entries, each cast: ``map<string,struct<value,failed,message>>``
_CAST = "__kc_cast"

TARGETS: dict[str, DataType] = {
    "int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
    "float32": FloatType(), "float64": DoubleType(), "boolean": BooleanType(), "string": StringType(),
}
_UNSUPPORTED = ("bytes", "array", "map", "struct")
_CONNECT: dict[type[DataType], str] = {
    ByteType: "INT8", ShortType: "INT16", IntegerType: "INT32", LongType: "INT64", FloatType: "FLOAT32",
    DoubleType: "FLOAT64", BooleanType: "BOOLEAN", StringType: "STRING", BinaryType: "BYTES",
}
_BITS: dict[type[DataType], int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _connect(dt: DataType) -> str:
    return _CONNECT.get(type(dt), dt.simpleString().upper())


def _wrap(x: Column, to: DataType) -> Column:
    """Java's narrowing of a long to ``to`` (keep the low bits, two's complement): 300 → int8 44."""
    bits = _BITS[type(to)]
    if bits == 64:
        return x.cast("long")
    low = x.cast("long").bitwiseAND(F.lit((1 << bits) - 1))
    return F.when(low >= F.lit(1 << (bits - 1)), low - F.lit(1 << bits)).otherwise(low).cast(to)


def _saturate(d: Column, bits: int) -> Column:
    """Java's ``(int) d`` / ``(long) d``: truncate toward zero, NaN → 0, saturate at the bounds."""
    hi, lo = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    t = "int" if bits == 32 else "long"
    return (F.when(F.isnan(d), F.lit(0).cast(t)).when(d >= F.lit(float(hi)), F.lit(hi).cast(t))
            .when(d <= F.lit(float(lo)), F.lit(lo).cast(t)).otherwise(d.cast(t)))


# Java's Integer.parseInt takes an optional sign and then any BMP character of Unicode category Nd
# (Character.digit), no whitespace; a supplementary-plane digit is a surrogate pair, which it rejects.
_JAVA_INTEGER = r"^[+-]?[\p{Nd}&&[\x{0}-\x{FFFF}]]+\z"  # \z: "$" also matches before a final "\n"
_ASCII_INTEGER = r"^[+-]?[0-9]+\z"
# Every BMP decimal digit and its ASCII value: Unicode assigns Nd digits in contiguous runs 0..9. A digit this
# Python does not know stays as it is and fails the cast (never a wrong value); one the JVM does not know fails
# _JAVA_INTEGER first.
_ND = "".join(chr(cp) for cp in range(0x80, 0x10000) if unicodedata.category(chr(cp)) == "Nd")
_ND_ASCII = "".join(str(unicodedata.digit(ch)) for ch in _ND)
# The grammar of Java's Double.valueOf / Float.valueOf (their javadoc's regular expression): characters up to
# U+0020 trimmed, NaN/Infinity spelled exactly so, ASCII digits, hexadecimal floats, an f/F/d/D suffix. Spark's
# own cast also takes "inf", "nan" and "INFINITY", which Java rejects.
_DIGITS, _HEX = "([0-9]+)", "([0-9a-fA-F]+)"
_EXP = f"[eE][+-]?{_DIGITS}"
_JAVA_FLOATING = ("^[\\x00-\\x20]*[+-]?(NaN|Infinity|(((" + _DIGITS + "(\\.)?(" + _DIGITS + "?)(" + _EXP + ")?)|"
                  "(\\.(" + _DIGITS + ")(" + _EXP + ")?)|(((0[xX]" + _HEX + "(\\.)?)|(0[xX]" + _HEX + "?(\\.)" + _HEX +
                  "))[pP][+-]?" + _DIGITS + "))[fFdD]?))[\\x00-\\x20]*\\z")


def _parse_java_integer(c: Column, to: DataType) -> Column:
    """Byte/Short/Integer/Long.parseXxx: null where Java throws NumberFormatException (or the value is out of
    range of ``to``). ASCII digits, the usual text, are cast as they are: the Unicode-digit test and the
    translation of every character are only for the rest (measured on 3M numbers: 0.7-0.9 s of JVM CPU instead
    of 1.8-1.9 s)."""
    return (F.when(c.rlike(_ASCII_INTEGER), c.try_cast(to))
            .when(c.rlike(_JAVA_INTEGER), F.translate(c, _ND, _ND_ASCII).try_cast(to)))


def _parse_java_floating(c: Column, to: DataType) -> Column:
    """Float.parseFloat / Double.parseDouble: null where Java throws NumberFormatException."""
    return F.when(c.rlike(_JAVA_FLOATING), c.try_cast(to))


def cast_column(c: Column, src: DataType, md: dict | None, to: DataType) -> tuple[Column, Column | None, str]:
    """``c`` (of Spark type ``src``) cast to ``to`` with Kafka's rules: (value, per-row failure, message)."""
    msg = f"Unable to convert value of type {_connect(src)} to {_connect(to)}"
    is_int = isinstance(to, _INTEGRAL)
    # Logical types cast to numbers through their physical form.
    if isinstance(src, DateType) and not isinstance(to, StringType):
        c, src = F.unix_date(c), IntegerType()
    elif isinstance(src, (TimestampType, TimestampNTZType)) and not isinstance(to, StringType):
        c, src = F.unix_millis(c.cast("timestamp")), LongType()
    if isinstance(to, StringType):
        return connect_to_string(c, src, md), None, msg
    if isinstance(src, _INTEGRAL):
        if is_int:
            return _wrap(c, to), None, msg
        if isinstance(to, BooleanType):
            return c != F.lit(0), None, msg
        return c.cast(to), None, msg
    if isinstance(src, (FloatType, DoubleType)):
        d = c.cast("double")
        if isinstance(to, LongType):
            return _saturate(d, 64), None, msg
        if is_int:
            return _wrap(_saturate(d, 32), to), None, msg
        if isinstance(to, BooleanType):
            return _saturate(d, 64) != F.lit(0), None, msg
        return c.cast(to), None, msg
    if isinstance(src, DecimalType):
        as_long = c.try_cast("long")
        if is_int:
            return _wrap(as_long, to), c.isNotNull() & as_long.isNull(), f"{msg}: out of range"
        if isinstance(to, BooleanType):
            return as_long != F.lit(0), c.isNotNull() & as_long.isNull(), f"{msg}: out of range"
        return c.cast(to), None, msg
    if isinstance(src, BooleanType):
        if isinstance(to, BooleanType):
            return c, None, msg
        return F.when(c.isNull(), F.lit(None)).when(c, F.lit(1)).otherwise(F.lit(0)).cast(to), None, msg
    if isinstance(src, StringType):
        if isinstance(to, BooleanType):
            return F.lower(c) == F.lit("true"), None, msg
        v = _parse_java_integer(c, to) if is_int else _parse_java_floating(c, to)
        return v, c.isNotNull() & v.isNull(), "Unable to parse the string as " + _connect(to)
    return c, c.isNotNull(), f"Cast transformation does not support casting from {type_name(src)}" + (
        "" if not isinstance(src, BinaryType) else f" to {_connect(to)} (BYTES casts only to string)")


#: Connect's types that Cast takes as input, as Kafka's message lists them
_INPUT_TYPES = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"
#: the VARIANT types (``schema_of_variant``) of JSON integers: Kafka's JsonConverter reads each as a Long
_INTEGRAL_VARIANTS = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def _variant_sources(t: Column, to: DataType) -> list[tuple[Column, DataType]]:
    """The kinds of Java object a VARIANT of type ``t`` is to Kafka (an integer a Long, a number with a fraction a
    Double whatever decimal Spark keeps it as; a float comes only from a Cast to float32, Kafka's Float), each with the
    Spark type its value is read as for a cast to ``to``. Kinds that cast alike share one: a Boolean is 1 or 0 as a
    number, a Float widens to a double exactly; as text a Long and a Boolean print as Spark prints them."""
    integral, fractional = t.isin(*_INTEGRAL_VARIANTS), (t == F.lit("DOUBLE")) | t.startswith("DECIMAL")
    if isinstance(to, StringType):
        return [(integral | t.isin("BOOLEAN", "STRING"), StringType()), (fractional, DoubleType()),
                (t == F.lit("FLOAT"), FloatType())]
    return [(integral | (t == F.lit("BOOLEAN")), LongType()), (fractional | (t == F.lit("FLOAT")), DoubleType()),
            (t == F.lit("STRING"), StringType())]


def cast_variant(value: Column, to: DataType, variant_type: Column | None = None) -> tuple[Column, Column, Column]:
    """A schemaless value or entry (a VARIANT) cast to ``to`` as Kafka's ``castValueToType`` casts the Java object
    its JsonConverter reads, its type inferred from its class: (the new VARIANT, per-row failure, message). Null
    stays null; an object or a list fails as Kafka's MAP and ARRAY do. ``variant_type``: its ``schema_of_variant``,
    where the caller has it."""
    t = F.schema_of_variant(value) if variant_type is None else variant_type
    out, failed, message = None, F.lit(False), F.lit(None).cast("string")
    for is_src, src in _variant_sources(t, to):
        c, bad, msg = cast_column(F.variant_get(value, "$", src.simpleString()), src, None, to)
        branch = c.cast(VariantType())
        out = F.when(is_src, branch) if out is None else out.when(is_src, branch)
        if bad is not None:  # a string that does not parse
            failed, message = is_src & bad, F.lit(msg)
    assert out is not None
    known = t.isin("STRING", "BOOLEAN", "DOUBLE", "FLOAT", *_INTEGRAL_VARIANTS) | t.startswith("DECIMAL")
    unsupported = (F.when(t.startswith("OBJECT"), F.lit("MAP")).when(t.startswith("ARRAY"), F.lit("ARRAY"))
                   .otherwise(t))
    null = value.isNull() | F.is_variant_null(value)
    message = F.when(known, message).otherwise(F.concat(
        F.lit("Cast transformation does not support casting from "), unsupported,
        F.lit(f"; supported types are {_INPUT_TYPES}")))
    return out, ~null & (~known | F.coalesce(failed, F.lit(False))), message


def _parse_spec(items: list[str]) -> tuple[DataType | None, dict[str, DataType], list[str]]:
    whole: DataType | None = None
    fields: dict[str, DataType] = {}
    problems: list[str] = []
    bare = 0
    for item in items:
        parts = item.split(":")
        if len(parts) > 2:
            problems.append(f"Invalid rename mapping: {item} (expected field:type or a single type)")
            continue
        name, tname = (None, parts[0]) if len(parts) == 1 else (parts[0].strip(), parts[1])
        t = tname.strip().lower()
        if t in _UNSUPPORTED:
            problems.append(f"Cast transformation does not support casting to {t.upper()}; supported types are "
                            f"{', '.join(TARGETS)}")
            continue
        if t not in TARGETS:
            problems.append(f"Invalid type found in casting spec: {tname.strip()}; supported types are "
                            f"{', '.join(TARGETS)}")
            continue
        if name is None:
            bare += 1
            whole = TARGETS[t]
        else:
            fields[name] = TARGETS[t]
    if bare and (len(items) > 1):
        problems.append("Cast transformations that specify a type to cast the entire value to may only specify "
                        "a single cast in their spec")
    return whole, fields, problems


@variant_capable
@key_value_variants
class Cast(KeyOrValue):
    """Cast fields, or the whole key/value, to another primitive type: ``spec`` is ``field:type,...`` or
    one bare ``type``. Types: int8, int16, int32, int64, float32, float64, boolean, string. Numbers narrow as
    Java does (300 → int8 44, 3.99 → int32 3); booleans become 1/0; strings parse as Java's ``Integer.parseInt``
    / ``Double.parseDouble`` do (failure fails the record): integers take a sign and any Unicode decimal digits
    but no whitespace (``" 7"`` fails, ``"\uff17"`` is 7), floats take Java's grammar (surrounding whitespace,
    ``NaN``, ``Infinity``, hexadecimal, an f/d suffix; not ``inf``); strings become boolean true only for
    "true" (any case); anything becomes a string with Java's text (bytes as
    Base64). A tombstone passes through. With a schemaless Map, listed fields missing from the Map are added
    as null, and the target type must be the Map's value type (one Spark column, one value type). A schemaless JSON
    value (a VARIANT) is cast as Kafka casts the Map its JsonConverter reads: each listed entry by the Java class of
    its value (Long, Double, String, Boolean), a missing one added as null; an object or list entry fails the
    record; a single type casts the whole value.
    """

    config_def = (
        ConfigDef()
        .define("spec", Type.LIST, validator=ValidList.non_empty_list(), importance=Importance.HIGH,
                doc="List of fields and the type to cast them to of the form field1:type,field2:type to cast "
                    "fields of Maps or Structs. A single type to cast the entire value. Valid types are int8, "
                    "int16, int32, int64, float32, float64, boolean, and string.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        _, _, problems = _parse_spec(config.spec)
        return [ConfigProblem("spec", f"Invalid value {','.join(config['spec'])} for configuration spec: {p}")
                for p in problems]

    def configure(self, config: Config) -> None:
        self.whole, self.fields, _ = _parse_spec(config.spec)
        self.spec = ",".join(config.spec)

    def lift_safe(self, column: str) -> bool:
        return self.whole is None or column != self.target  # a whole-value cast fails a struct

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema[self.target]
        op, dtype = F.col(self.target), sf.dataType
        k = kind(dtype)
        step = Step()
        if isinstance(dtype, VariantType):  # a schemaless JSON value: Kafka's object read by JsonConverter
            return self._plan_variant(op)
        if self.whole is not None:
            if k != "primitive":
                return step.fail(op.isNotNull(), f"Cast transformation does not support casting of "
                                                 f"{type_name(dtype)} as a whole; use field:type")
            new, bad, msg = cast_column(op, dtype, dict(sf.metadata), self.whole)
            step.updates[self.target] = new
            # Kafka keeps the value schema's optional flag (its name and parameters too, which a Spark type of
            # another kind cannot carry here)
            step.metadata[self.target] = dict(sf.metadata) if same_type(dtype, self.whole) else \
                _only_optional(sf.metadata)
            if bad is not None:
                step.fail(bad, msg)
            return step
        if isinstance(dtype, StructType):
            new = op
            for f in dtype.fields:
                if f.name in self.fields:
                    to = self.fields[f.name]
                    c, bad, msg = cast_column(op.getField(f.name), f.dataType, dict(f.metadata), to)
                    if bad is not None:
                        step.fail(bad, f"{msg} (field {f.name})")
                    new = new.withField(q(f.name), c)
            # update_fields keeps field order, and of a null struct is null; it drops field metadata, which a
            # cast to the output type restores for fields whose type did not change, and the optional flag of
            # those whose type changed (Kafka: each cast field optional as it was).
            kept_md = {f.name: dict(f.metadata) if same_type(f.dataType, self.fields[f.name])
                       else _only_optional(f.metadata) for f in dtype.fields if f.name in self.fields}
            if any(kept_md.values()):
                new = new.cast(StructType([StructField(f.name, self.fields.get(f.name, f.dataType), True,
                                                       kept_md.get(f.name, f.metadata)) for f in dtype.fields]))
            step.updates[self.target] = new
            return step
        if isinstance(dtype, MapType):
            entries = []
            for name, to in self.fields.items():
                if not same_type(to, dtype.valueType):
                    raise map_value_type_problem("spec", self.spec, dtype, to, f"casting {name} to {_connect(to)}")
                c, bad, msg = cast_column(F.try_element_at(op, F.lit(name)), dtype.valueType, None, to)
                if bad is not None:
                    step.fail(op.isNotNull() & bad, f"{msg} (field {name})")
                entries.append((name, c))
            step.updates[self.target] = F.when(op.isNull(), op).otherwise(map_put(op, entries))
            return step
        return step.fail(op.isNotNull(), struct_or_map_required("cast types", type_name(dtype)))

    def staged(self, df: DataFrame) -> dict[str, Column]:
        if self.whole is not None or not isinstance(df.schema[self.target].dataType, VariantType):
            return {}
        # Kafka puts every listed field, a missing one as null; each entry cast by one expression per target type
        # over the lambda's entry (an expression per field would repeat the entry's whole path in each)
        entries = object_entries(F.col(self.target))
        listed = map_put(entries, [(name, F.try_element_at(entries, F.lit(name))) for name in self.fields])
        by_type: dict[str, tuple[DataType, list[str]]] = {}
        for name, to in self.fields.items():
            by_type.setdefault(to.simpleString(), (to, []))[1].append(name)

        def cast_entry(key: Column, typed: Column) -> Column:
            new, bad, message = None, None, None
            value = typed["value"]
            for to, names in by_type.values():
                listed_here = key.isin(*names)
                as_to, bad_here, message_here = cast_variant(value, to, typed["type"])
                new = F.when(listed_here, as_to) if new is None else new.when(listed_here, as_to)
                bad = F.when(listed_here, bad_here) if bad is None else bad.when(listed_here, bad_here)
                message = F.when(listed_here, message_here) if message is None else message.when(listed_here,
                                                                                                   message_here)
            assert new is not None and bad is not None and message is not None
            return F.struct(new.otherwise(value).alias("value"), F.coalesce(bad, F.lit(False)).alias("failed"),
                            message.alias("message"))
        # each entry's type read once (a lambda's body is not deduplicated: every test of it would read it again)
        typed = F.transform_values(listed, lambda _, v: F.struct(v.alias("value"),
                                                                 F.schema_of_variant(v).alias("type")))
        return {_CAST: F.transform_values(typed, cast_entry)}

    def _plan_variant(self, op: Column) -> Step:
        if self.whole is not None:  # Kafka casts any value as a whole, a Map or a List failing
            new, bad, msg = cast_variant(op, self.whole)
            return Step({self.target: new}).fail(bad, msg)

        def casts(entries: Column) -> Step:
            cast = F.col(_CAST)
            failing = F.filter(F.map_entries(cast), lambda e: e["value"]["failed"])
            first = F.element_at(failing, 1)
            step = Step({self.target: F.transform_values(cast, lambda _, e: e["value"])})
            return step.fail(entries.isNotNull() & (F.size(failing) > 0), F.concat(
                first["value"]["message"], F.lit(" (field "), first["key"], F.lit(")")))
        return plan_object(self.target, op, "cast types", casts, F.col(_CAST))


def _only_optional(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The Connect optional flag of ``metadata`` alone (a cast keeps it, not the type's name or parameters)."""
    return {META_OPTIONAL: metadata[META_OPTIONAL]} if META_OPTIONAL in metadata else {}
