"""TimestampConverter: convert timestamps between string, unix epoch, Date, Time and Timestamp."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    VariantType,
)

from ..config import Config, ConfigDef, Importance, Type, ValidString
from ..errors import ConfigError, ConfigProblem
from .base import (
    KeyOrValue,
    Step,
    java_class_of_variant,
    key_value_variants,
    plan_object,
    struct_or_map_required,
    type_name,
    variant_capable,
)
from .columns import map_put, map_value_type_problem, rebuild_struct, same_type
from .datetime_format import FormatError, format_utc, parse_utc, translate
from .replace_field import REPLACE_NULL_DOC
from .values import TIME_NAME, is_time

__all__ = ["TimestampConverter"]

TARGET_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
PRECISIONS = ("seconds", "milliseconds", "microseconds", "nanoseconds")
_DAY_MS = 86_400_000
_OUT_TYPES: dict[str, DataType] = {"string": StringType(), "unix": LongType(), "Date": DateType(),
                                   "Time": IntegerType(), "Timestamp": TimestampType()}


def _input_kind(dt: DataType, md: dict | None) -> str | None:
    if isinstance(dt, TimestampType):
        return "Timestamp"
    if isinstance(dt, DateType):
        return "Date"
    if is_time(dt, md):
        return "Time"
    if isinstance(dt, StringType):
        return "string"
    if isinstance(dt, LongType):
        return "unix"
    return None


def _div_trunc(x: Column, d: int) -> Column:
    """Java's long division (truncates toward zero), exact for any long."""
    return (x.cast("decimal(20,0)") / F.lit(d)).cast("long")


_SCHEMA_BASICS = ("connect.name", "connect.version", "connect.doc", "connect.parameters")
_LONG_MAX = 2 ** 63 - 1
#: the milliseconds a Spark timestamp holds (microseconds in a long): about 292,000 years either side of 1970
_SPARK_MS = _LONG_MAX // 1000


def _saturated_mul(x: Column, m: int) -> Column:
    """Java's ``TimeUnit`` conversion to a finer unit (what Kafka's TimestampConverter uses): the product, or
    Long.MAX_VALUE/MIN_VALUE where it overflows (Spark's ANSI multiplication would fail the query)."""
    over = _LONG_MAX // m
    return (F.when(x > F.lit(over), F.lit(_LONG_MAX)).when(x < F.lit(-over), F.lit(-_LONG_MAX - 1))
            .otherwise(x * F.lit(m)))


@variant_capable
@key_value_variants
class TimestampConverter(KeyOrValue):
    """Convert a timestamp (the whole key/value, or the top-level ``field``) to ``target.type``: ``string``
    (formatted with ``format``, a SimpleDateFormat pattern in UTC), ``unix`` (epoch in ``unix.precision``),
    ``Date`` (midnight UTC), ``Time`` (milliseconds since midnight, an int32 tagged as Connect Time) or
    ``Timestamp``. Inputs are read by their type: timestamp, date, Time, string (parsed with ``format``) or
    int64 (unix epoch). Conversions pivot through milliseconds (sub-millisecond precision is lost, as in Kafka).
    A string that does not parse, or any other input type, fails the record. A tombstone stays null.
    """

    config_def = (
        ConfigDef()
        .define("field", Type.STRING, "", importance=Importance.HIGH,
                doc="The field containing the timestamp, or empty if the entire value is a timestamp")
        .define("target.type", Type.STRING, validator=ValidString(*TARGET_TYPES), importance=Importance.HIGH,
                doc="The desired timestamp representation: string, unix, Date, Time, or Timestamp")
        .define("format", Type.STRING, "", importance=Importance.MEDIUM,
                doc="A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when "
                    "type=string or used to parse the input if the input is a string.")
        .define("unix.precision", Type.STRING, "milliseconds", ValidString(*PRECISIONS), Importance.LOW,
                "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or "
                "nanoseconds. Used to generate the output when type=unix or used to parse the input if the input "
                "is a Long.")
        .define("replace.null.with.default", Type.BOOLEAN, True, importance=Importance.MEDIUM, doc=REPLACE_NULL_DOC)
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        problems = []
        fmt = config.format
        if config.target_type == "string" and not fmt:
            problems.append(ConfigProblem("format", "Invalid value  for configuration format: TimestampConverter "
                                                    "requires format option to be specified when using string "
                                                    "timestamps"))
        if fmt:
            try:
                translate(fmt)
            except FormatError as e:
                problems.append(ConfigProblem("format", f"Invalid value {fmt} for configuration format: "
                                                        f"TimestampConverter requires a SimpleDateFormat-compatible "
                                                        f"pattern for string timestamps: {e}"))
        return problems

    def configure(self, config: Config) -> None:
        self.field = config.field
        self.to = config.target_type
        self.fmt = translate(config.format) if config.format else None
        self.precision = config.unix_precision

    # -- conversions -------------------------------------------------------------------------------
    def _to_ms(self, c: Column, src: str, step: Step) -> Column:
        if src == "Timestamp":
            return F.unix_millis(c)
        if src == "Date":
            return F.unix_date(c).cast("long") * F.lit(_DAY_MS)
        if src == "Time":
            return c.cast("long")
        if src == "unix":
            return {"seconds": _saturated_mul(c, 1000), "milliseconds": c, "microseconds": _div_trunc(c, 1000),
                    "nanoseconds": _div_trunc(c, 1_000_000)}[self.precision]
        if self.fmt is None:
            step.fail(c.isNotNull(), "Timestamp format is required to parse string timestamps (set format)")
            return F.lit(None).cast("long")
        parsed = parse_utc(c, self.fmt)
        step.fail(c.isNotNull() & parsed.isNull(), F.concat(F.lit("Could not parse timestamp: value ("), c,
                                                            F.lit(") does not match pattern (" + self.fmt + ")")))
        return F.unix_millis(parsed)

    def _from_ms(self, ms: Column, step: Step) -> Column:
        if self.to == "Time":
            return F.pmod(ms, F.lit(_DAY_MS)).cast("int")
        if self.to == "unix":
            return {"seconds": _div_trunc(ms, 1000), "milliseconds": ms, "microseconds": _saturated_mul(ms, 1000),
                    "nanoseconds": _saturated_mul(ms, 1_000_000)}[self.precision]
        # A java.util.Date holds any long of milliseconds, a Spark timestamp a thousandth of that range: beyond it
        # the record fails (docs/comparison.md) where Spark's timestamp_millis would fail the whole query
        beyond = F.abs(ms.cast("decimal(20,0)")) > F.lit(_SPARK_MS)
        step.fail(beyond, F.concat(F.lit("beyond a Spark timestamp (about 292,000 years either side of 1970): "),
                                   ms.cast("string"), F.lit(" ms")))
        ms = F.when(~beyond, ms)
        if self.to == "Timestamp":
            return F.timestamp_millis(ms)
        if self.to == "Date":
            return F.date_from_unix_date(F.floor(ms / F.lit(_DAY_MS)).cast("int"))
        assert self.fmt is not None
        return format_utc(F.timestamp_millis(ms), self.fmt)

    def _out_md(self, md: dict) -> dict:
        # Kafka gives the converted value a new schema (the target's, with the input's optional flag): the input's
        # name, version, doc and parameters go (a Time's version 1 stayed on a string: found by the converters
        # family of tests/differential/test_fuzz_transforms.py)
        md = {k: v for k, v in md.items() if k not in _SCHEMA_BASICS}
        if self.to == "Time":
            md["connect.name"] = TIME_NAME
        return md

    def _convert(self, c: Column, dt: DataType, md: dict | None, step: Step) -> Column:
        src = _input_kind(dt, md)
        if src is None:
            step.fail(c.isNotNull(), f"TimestampConverter does not support {type_name(dt)} input; expected a "
                                     f"timestamp, date, Time, string or int64 (unix) value")
            return F.lit(None).cast(_OUT_TYPES[self.to])
        return self._from_ms(self._to_ms(c, src, step), step).cast(_OUT_TYPES[self.to])

    def _convert_variant(self, v: Column, step: Step) -> Column:
        """A schemaless timestamp (a VARIANT entry or value) by the Java class Kafka's JsonConverter reads: a Long is
        unix, a String is parsed with ``format``; any other fails the record; null stays null."""
        cls = java_class_of_variant(v)
        integral, text = cls == "java.lang.Long", cls == "java.lang.String"
        null = v.isNull() | F.is_variant_null(v)
        step.fail(~null & ~integral & ~text, F.concat(F.lit("TimestampConverter does not support "), cls,
                                                      F.lit(" objects as timestamps")))
        ms = F.when(integral, self._to_ms(F.variant_get(v, "$", "long"), "unix", step)) \
            .when(text, self._to_ms(F.when(text, F.variant_get(v, "$", "string")), "string", step))
        return F.when(null, F.lit(None).cast("variant")).otherwise(self._from_ms(ms, step).cast("variant"))

    def _variant_target(self) -> None:
        if self.to not in ("string", "unix"):
            raise ConfigError([ConfigProblem("target.type", (
                f"TimestampConverter to {self.to} on a schemaless value (a VARIANT: JsonConverter schemas.enable="
                f"false without spark.schema): Kafka puts a java.util.Date into the Map, which no converter writes; "
                f"use string or unix, or set the converter's spark.schema"))])

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema[self.target]
        op, dtype = F.col(self.target), sf.dataType
        step = Step()
        if isinstance(dtype, VariantType):  # schemaless: Kafka's Map (or the bare value)
            self._variant_target()
            if not self.field:
                step.updates[self.target] = self._convert_variant(op, step)
                return step

            def converted(m: Column) -> Step:
                at = F.try_element_at(m, F.lit(self.field))
                step.updates[self.target] = map_put(m, [(self.field, self._convert_variant(at, step))])
                return step
            return plan_object(self.target, op, "converting timestamp formats", converted)
        if not self.field:
            step.updates[self.target] = self._convert(op, dtype, dict(sf.metadata), step)
            step.metadata[self.target] = self._out_md(dict(sf.metadata))
            return step
        if isinstance(dtype, StructType):
            if self.field not in dtype.fieldNames():
                # Kafka converts the schema's field of that name and copies the others: without one, the record
                # passes unchanged (found by tests/differential/test_fuzz_transforms.py)
                return step
            parts = []
            for f in dtype.fields:
                c = op.getField(f.name)
                md = dict(f.metadata)
                if f.name == self.field:
                    c, md = self._convert(c, f.dataType, md, step), self._out_md(md)
                parts.append(c.alias(f.name, metadata=md))
            step.updates[self.target] = rebuild_struct(op, parts)
            return step
        if isinstance(dtype, MapType):
            out_t = _OUT_TYPES[self.to]
            if not same_type(out_t, dtype.valueType):
                raise map_value_type_problem("target.type", self.to, dtype, out_t, f"converting {self.field}")
            c = self._convert(F.try_element_at(op, F.lit(self.field)), dtype.valueType, None, step)
            step.updates[self.target] = F.when(op.isNull(), op).otherwise(map_put(op, [(self.field, c)]))
            return step
        return step.fail(op.isNotNull(), struct_or_map_required("converting timestamp formats", type_name(dtype)))
