"""``org.apache.kafka.connect.json.JsonConverter`` on Spark's own ``from_json`` / ``to_json`` (no UDF).

With ``schemas.enable=true`` (the default) a message is the envelope ``{"schema": <Connect schema>, "payload":
<value>}``; with ``false`` it is the bare value. Logical types follow Kafka:

| Connect | Spark | JSON payload |
|---|---|---|
| Decimal | ``decimal(p,s)`` | ``decimal.format=BASE64``: Base64 of the unscaled two's complement bytes (``"BAE="`` = 10.25); ``NUMERIC``: a number. Parsing accepts both. |
| Date | ``date`` | int days since 1970-01-01 |
| Time | ``int`` with ``connect.name = org.apache.kafka.connect.data.Time`` | int ms of the day |
| Timestamp | ``timestamp`` | long ms since the epoch |
| bytes | ``binary`` | Base64 string |

**Where the parsed type comes from** (plan time), in this order: the caller's ``value_schema``/``key_schema``
argument, the ``spark.schema`` sub-key (``value.converter.spark.schema``, a Spark DDL or JSON schema), then with
``schemas.enable=false`` a ``VARIANT`` (Kafka's schemaless Map, list or primitive, through ``try_parse_json``; see
:meth:`JsonConverter._parse_variant`), with ``schemas.enable=true`` Kafka 4.2's ``schema.content`` (KIP-1054: a
Connect schema with which each message is read as a bare payload), then, with a batch DataFrame, the ``schema`` part of the first
``schemas.sample.size`` messages (each topic's must map to one Spark type; several topics with their own
struct types give their union, see :mod:`spark_connect_bridge.core.topic_schemas`, and each topic's messages are
read with its own type). A sink's stream does this per micro-batch, over every message of the batch
(:func:`spark_connect_bridge.engine.pipeline.write_stream`). Otherwise (a header converter) it is a ConfigError
naming ``<prefix>spark.schema``, reported by config validation for a sink (:meth:`JsonConverter.sink_problems`). The
payload of every message is read with that plan-time type; the ``schema`` part of each message is not re-read
per message.

Tombstones (null bytes) stay null and a null value serializes to null bytes. Invalid JSON, a message
without the envelope (for example plain JSON with ``schemas.enable=true``) and a payload that does not fit
the type are record errors. Unlike Kafka, an envelope whose payload is present is accepted even when it has
keys besides ``schema`` and ``payload``: the keys are checked only when the payload is null, which keeps the
decode a single JSON parse per message.
The JSON grammar is Kafka's (Jackson's defaults plus leading zeros): ``007`` is 7, text after the value is
ignored; single quotes, ``NaN``/``Infinity``, comments, unquoted names and trailing commas are record errors.
Where Kafka coerces a value of the wrong JSON type (a string where the schema says int64 reads as 0, a number
where it says string as null), this is a record error; a number read into a string field keeps its text, as
Spark does. With ``schemas.enable=false``, a value followed by text is read a second time through
``try_parse_json``, which rejects what Jackson would take in that one case: leading zeros or duplicate keys
together with the trailing text.
A map with non-string keys is written and read as Kafka's array of ``[key, value]`` pairs only by the Avro
converter; for JSON it is a plan-time error.

>>> conv = JsonConverter({"schemas.enable": "false"})                      # doctest: +SKIP
>>> df.select(conv.parse("value", "id BIGINT, name STRING").alias("value"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, overload

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from ..config import CaseInsensitiveValidString, ConfigDef, Importance, Range, Type
from ..core.records import SCHEMALESS_META
from ..core.topic_schemas import TABLES_META, as_nullable, envelope_union_of, is_envelope_type, union_of
from ..errors import ConfigError, ConfigProblem, DataError
from .base import SPARK_SCHEMA_DOC, Conversion, Converter, utf8_bytes
from .connect_schema import connect_to_spark, spark_to_connect
from .decimal_bytes import bytes_to_decimal, decimal_to_bytes
from .json_envelopes import MAX_SCHEMAS, BatchTexts, schemas_by_prefix, topic_column
from .json_envelopes import barrier as _barrier

__all__ = ["JsonConverter", "connect_schema_json", "infer_schema_from_envelopes"]

_CORRUPT = "_kc_corrupt"
# Kafka's JsonDeserializer reads with a default Jackson ObjectMapper plus ALLOW_LEADING_ZEROS_FOR_NUMBERS
# (``readTree``, so text after the first value is ignored). Spark's JSON options differ from Jackson's defaults
# on three features; comments, unquoted field names, backslash-escaping any character and unescaped control
# characters are off in both.
_JACKSON_OPTIONS = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false",
                    "allowNumericLeadingZeros": "true"}
_ENVELOPE_MESSAGE = ('JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain '
                     'additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false '
                     'in your converter configuration.')


def connect_schema_json(data_type: DataType, nullable: bool = True,
                        metadata: Mapping[str, Any] | None = None) -> str | None:
    """The envelope's ``schema`` text for a Spark type; ``None`` (JSON null) for a schemaless map."""
    meta = dict(metadata or {})
    if isinstance(data_type, MapType) and isinstance(data_type.keyType, StringType) and not meta:
        return None
    return json.dumps(spark_to_connect(data_type, nullable, meta), separators=(",", ":"))


# -- parse: JSON text -> wire types (what from_json can read) -> Spark types ------------------------------

def _wire(dt: DataType, key: str) -> DataType:
    if isinstance(dt, DecimalType):
        return VariantType()
    if isinstance(dt, DateType):
        return IntegerType()
    if isinstance(dt, (TimestampType, TimestampNTZType)):
        return LongType()
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _wire(f.dataType, key), f.nullable, f.metadata) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_wire(dt.elementType, key), dt.containsNull)
    if isinstance(dt, MapType):
        if not isinstance(dt.keyType, StringType):
            raise ConfigError([ConfigProblem(key, f"JsonConverter reads maps with string keys only; "
                                                  f"{dt.simpleString()} has {dt.keyType.simpleString()} keys")])
        return MapType(StringType(), _wire(dt.valueType, key), dt.valueContainsNull)
    return dt


def _needs_fix(dt: DataType) -> bool:
    if isinstance(dt, (DecimalType, DateType, TimestampType, TimestampNTZType)):
        return True
    if isinstance(dt, StructType):
        return any(_needs_fix(f.dataType) for f in dt.fields)
    if isinstance(dt, ArrayType):
        return _needs_fix(dt.elementType)
    if isinstance(dt, MapType):
        return _needs_fix(dt.valueType)
    return False


@overload
def _or(a: Column | None, b: Column) -> Column: ...
@overload
def _or(a: Column | None, b: Column | None) -> Column | None: ...


def _or(a: Column | None, b: Column | None) -> Column | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _false_if_none(bad: Column | None) -> Column:
    """``bad`` with null as false; false when the type cannot be bad (``None``)."""
    return F.lit(False) if bad is None else F.coalesce(bad, F.lit(False))


def _from_wire(c: Column, dt: DataType) -> tuple[Column, Column | None]:
    """(typed value, bad) for a wire value; ``bad`` is true where a non-null wire value did not convert."""
    if not _needs_fix(dt):
        return c, None
    if isinstance(dt, DecimalType):
        # The base64 text's bytes are read from the VARIANT once per value: ``bytes_to_decimal`` refers to them
        # a dozen times, and each ``variant_get`` builds a Cast (measured: 16% of a JDBC sink's CPU when each
        # reference read them again). Spark's subexpression elimination shares an expression only if it occurs
        # twice where it is always evaluated: ``from_text`` is the coalesce's first input (always evaluated),
        # and its own first condition tests ``raw`` twice (null, empty), so ``raw`` is computed once per row and
        # every other reference reads that. A number (or null) is read only where there is no text.
        is_text = F.schema_of_variant(c) == F.lit("STRING")
        raw = F.try_to_binary(F.when(is_text, F.try_variant_get(c, "$", "string")), F.lit("base64"))
        from_number = F.when(~is_text, F.try_variant_get(c, "$", dt.simpleString()))
        value = F.coalesce(bytes_to_decimal(raw, dt), from_number)
        return value, c.isNotNull() & ~F.is_variant_null(c) & value.isNull()
    if isinstance(dt, DateType):
        return F.date_from_unix_date(c), None
    if isinstance(dt, TimestampType):
        return F.timestamp_millis(c), None
    if isinstance(dt, TimestampNTZType):
        return F.timestamp_millis(c).cast(dt), None
    if isinstance(dt, StructType):
        # withField keeps the untouched fields (and their connect.* metadata) as from_json typed them.
        value, bad = c, None
        for f in dt.fields:
            if _needs_fix(f.dataType):
                v, b = _from_wire(c[f.name], f.dataType)
                value = value.withField(f.name, v)
                bad = _or(bad, b)
        return value, bad
    if isinstance(dt, ArrayType):
        elem = dt.elementType
        value = F.transform(c, lambda x: _from_wire(x, elem)[0])
        probe = _from_wire(F.lit(None).cast(_wire(elem, "")), elem)[1]
        bad = None if probe is None else F.exists(c, lambda x: _false_if_none(_from_wire(x, elem)[1]))
        return value, bad
    if isinstance(dt, MapType):
        vt = dt.valueType
        value = F.transform_values(c, lambda _k, v: _from_wire(v, vt)[0])
        probe = _from_wire(F.lit(None).cast(_wire(vt, "")), vt)[1]
        bad = None if probe is None else F.exists(F.map_values(c), lambda x: _false_if_none(_from_wire(x, vt)[1]))
        return value, bad
    raise AssertionError(dt)


def _placed(value: Column, union: StructType, holder: Mapping[str, str]) -> Column:
    """A topic's parsed struct as the union struct: each union field from the topic's column it holds
    (``holder``: union field -> column), null where the topic has none."""
    parts = [(value[holder[f.name]] if f.name in holder else F.lit(None).cast(f.dataType)).alias(f.name)
             for f in union.fields]
    return F.when(value.isNull(), F.lit(None)).otherwise(F.struct(*parts)).cast(union)


# -- serialize: Spark types -> wire values -> to_json -------------------------------------------------------

def _to_wire(c: Column, dt: DataType, numeric_decimals: bool) -> Column:
    if not _needs_fix(dt):
        return c
    if isinstance(dt, DecimalType):
        return c if numeric_decimals else F.base64(decimal_to_bytes(c, dt))
    if isinstance(dt, DateType):
        return F.unix_date(c)
    if isinstance(dt, TimestampType):
        return F.unix_millis(c)
    if isinstance(dt, TimestampNTZType):
        return F.unix_millis(c.cast(TimestampType()))
    if isinstance(dt, StructType):
        parts = [_to_wire(c[f.name], f.dataType, numeric_decimals).alias(f.name) for f in dt.fields]
        return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if isinstance(dt, ArrayType):
        return F.transform(c, lambda x: _to_wire(x, dt.elementType, numeric_decimals))
    if isinstance(dt, MapType):
        return F.transform_values(c, lambda _k, v: _to_wire(v, dt.valueType, numeric_decimals))
    raise AssertionError(dt)


def infer_schema_from_envelopes(
    df: DataFrame, column: str, sample_size: int | None, key: str, *, keys: bool = False,
    texts: BatchTexts | None = None,
) -> tuple[DataType, dict[str, Any], dict[Any, tuple[StructType, dict[str, Any]]]]:
    """The Spark type of the ``schema`` part of JSON envelopes in a batch DataFrame (the first
    ``sample_size`` messages; every message when ``None``): ``(type, column metadata, per-topic types)``.

    One schema gives that type and no per-topic types. Several topics with one schema each give their union
    (:func:`spark_connect_bridge.core.topic_schemas.union_of`; for Debezium envelopes one envelope over the union
    of their rows, :func:`~spark_connect_bridge.core.topic_schemas.envelope_union_of`) and each topic's own type,
    which :meth:`parse` reads each topic's messages with. Several schemas in one topic are an error. ``keys``:
    the messages are record keys. ``texts``: a streaming query's memory (:class:`BatchTexts`): while it guesses,
    the previous micro-batch's rows are taken without a job; else what this batch's job found is recorded."""
    topic = topic_column(df)
    rows = texts.rows(column) if texts is not None else None
    if df.isStreaming and not rows:  # a plain query typed by its texts' rows is built over the stream itself
        raise ConfigError([ConfigProblem(key, f"Set {key}: the Spark type of a streaming DataFrame's JSON cannot "
                                              f"be inferred from its messages (a Spark DDL or JSON schema)")])
    if rows is None:
        found_texts: set[tuple[Any, str]] = set()
        rows = schemas_by_prefix(df, column, topic, sample_size, found_texts)
        if texts is not None:
            texts.record(column, rows, found_texts)
    if rows is None:  # not every message starts with its schema: each message's "schema" part, parsed
        found_rows = df.select(topic.alias("t"),
                               F.get_json_object(F.col(column).cast("string"), "$.schema").alias("s"))
        found_rows = found_rows.where(F.col("s").isNotNull())
        if sample_size is not None:
            found_rows = found_rows.limit(sample_size)
        rows = [(r["t"], r["s"]) for r in found_rows.distinct().limit(MAX_SCHEMAS).collect()]
    if not rows and sample_size is None and not df.where(F.col(column).isNotNull()).limit(1).collect():
        # A micro-batch of tombstones only (or none at all): nothing to type, and nothing typed is read.
        return StructType([]), {}, {}
    if not rows:
        where = f"the first {sample_size} messages" if sample_size is not None else "the messages"
        raise ConfigError([ConfigProblem(key, f"Set {key}: no JSON envelope with a schema in {where} of column "
                                              f"{column!r} to infer it from")])
    by_topic: dict[Any, dict[str, tuple[DataType, dict[str, Any]]]] = {}
    for t, schema in rows:
        try:
            dt, _, meta = connect_to_spark(json.loads(schema) if isinstance(schema, str) else schema)
        except (ValueError, DataError) as e:
            raise ConfigError([ConfigProblem(key, f"Set {key}: a message's Connect schema is invalid ({e})")]) from e
        by_topic.setdefault(t, {}).setdefault(dt.json() + json.dumps(meta, sort_keys=True), (dt, meta))
    for t, found in by_topic.items():
        if len(found) > 1:
            kinds = "; ".join(sorted(dt.simpleString() for dt, _ in found.values()))[:500]
            where = f" of topic {t!r}" if t is not None else ""
            raise ConfigError([ConfigProblem(key, f"Set {key}: the messages{where} carry {len(found)} different "
                                                  f"schemas ({kinds})")])
    per_topic = {t: next(iter(found.values())) for t, found in by_topic.items()}
    distinct = {dt.json() + json.dumps(meta, sort_keys=True): (dt, meta) for dt, meta in per_topic.values()}
    if len(distinct) == 1:
        dt, meta = next(iter(distinct.values()))
        return dt, meta, {}
    structs = {t: (dt, meta) for t, (dt, meta) in per_topic.items() if isinstance(dt, StructType)}
    if None in per_topic or len(structs) < len(per_topic):
        kinds = "; ".join(sorted(dt.simpleString() for dt, _ in distinct.values()))[:500]
        raise ConfigError([ConfigProblem(key, f"Set {key}: the messages carry {len(distinct)} different schemas "
                                              f"({kinds}); only struct schemas of different topics can be told "
                                              f"apart")])
    if all(is_envelope_type(dt) for dt, _ in structs.values()):
        try:
            union, meta = envelope_union_of(structs)
        except ValueError as e:
            raise ConfigError([ConfigProblem(key, f"Set {key}: {e}")]) from e
    else:
        union, meta = union_of(structs, keys=keys)
    return union, meta, structs


class JsonConverter(Converter):
    """``org.apache.kafka.connect.json.JsonConverter`` (also usable as ``header.converter``)."""

    class_name = "org.apache.kafka.connect.json.JsonConverter"
    serializes_in_expressions = True
    config_def = (
        ConfigDef()
        .define("schemas.enable", Type.BOOLEAN, True, None, Importance.HIGH,
                "Include schemas within each of the serialized values and keys (the {\"schema\", \"payload\"} "
                "envelope).")
        .define("schema.content", Type.STRING, None, None, Importance.HIGH,
                "Kafka 4.2's schema of every message (KIP-1054): a Connect JSON schema, as the \"schema\" part of "
                "an envelope has it. When set, with schemas.enable=true, each message is read as a bare payload of "
                "this schema (no envelope; an envelope's \"schema\" is not read). Ignored with "
                "schemas.enable=false, as Kafka does; spark.schema takes precedence. Sink side only.")
        .define("schemas.cache.size", Type.INT, 1000, Range.at_least(0), Importance.HIGH,
                "Kafka's cache of schemas; accepted for compatibility (schemas are resolved once per plan).")
        .define("decimal.format", Type.STRING, "BASE64", CaseInsensitiveValidString("BASE64", "NUMERIC"),
                Importance.LOW, "How Decimal values are serialized: BASE64 (Base64 of the unscaled bytes) or "
                "NUMERIC (a JSON number). Parsing accepts both.")
        .define("replace.null.with.default", Type.BOOLEAN, True, None, Importance.LOW,
                "Kafka's option to replace a null by the schema's default; Spark types carry no defaults, so "
                "nulls stay null.")
        .define("spark.schema", Type.STRING, None, None, Importance.MEDIUM, SPARK_SCHEMA_DOC)
        .define("schemas.sample.size", Type.INT, 1000, Range.at_least(1), Importance.LOW,
                "With schemas.enable=true and no spark.schema: how many messages of a batch DataFrame are "
                "sampled to find the Spark type from their \"schema\" part (a stream's micro-batches read "
                "every message).")
    )

    # Set by an inference that found several topics with their own schemas (see infer_schema_from_envelopes).
    _topic_types: Mapping[Any, tuple[StructType, dict[str, Any]]] = {}
    _union_type: DataType | None = None
    _union_tables = "{}"  # the union's kconnect.cdc.tables metadata (each topic's fields in it)

    @property
    def schemas_enabled(self) -> bool:
        return bool(self.config.schemas_enable)

    def validate(self) -> None:
        self._content: tuple[DataType, dict[str, Any]] | None = None
        text = self.config.get("schema.content")
        if text and self.schemas_enabled:
            key = self.key_name("schema.content")
            try:
                schema = json.loads(text)
                if not isinstance(schema, dict):
                    raise DataError(f"a JSON object is required, got {type(schema).__name__}")
                dt, _, meta = connect_to_spark(schema)
            except (ValueError, DataError) as e:
                raise ConfigError([ConfigProblem(key, f"Invalid value {str(text)[:200]} for configuration {key}: "
                                                      f"not a Connect JSON schema ({e})")]) from e
            self._content = (dt, meta)

    @property
    def _enveloped(self) -> bool:
        """Messages are ``{"schema", "payload"}`` envelopes: schemas.enable without a schema.content."""
        return self.schemas_enabled and self._content is None

    def types_from_messages(self, column: str) -> bool:
        return self._enveloped and column != "headers" and not self.config.get("spark.schema")

    def resolve_parse_type(self, df: Any = None, column: str | None = None,
                           explicit: DataType | None = None) -> tuple[DataType, dict[str, Any]]:
        data_type, metadata = super().resolve_parse_type(df, column, explicit)
        if not self.schemas_enabled and column in ("key", "value") and isinstance(data_type, StructType):
            # Kafka reads these messages as Maps: the SMTs follow Kafka's schemaless rules (core.records)
            metadata = {**metadata, SCHEMALESS_META: "true"}
        return data_type, metadata

    def schemaless_key(self, column: str) -> str | None:
        if column in ("key", "value") and not self.schemas_enabled and not self.config.get("spark.schema"):
            return self.key_name("schemas.enable")
        return None

    def sink_problems(self, column: str) -> list[ConfigProblem]:
        if self.config.get("spark.schema") or column != "headers":
            return []
        key = self.key_name("spark.schema")
        return [ConfigProblem(key, f"Set {key}: JsonConverter as header.converter of a sink needs the Spark "
                                   f"type of the header values (a Spark DDL or JSON schema)")]

    def default_parse_type(self, df: DataFrame | None, column: str | None) -> tuple[DataType, dict[str, Any]]:
        """Without ``spark.schema``: ``schema.content``'s type; with ``schemas.enable=false`` a VARIANT (Kafka's
        schemaless Map, list or primitive: no declaration needed); else the envelopes' schemas."""
        if self._content is not None:
            return self._content
        if not self.schemas_enabled:
            return VariantType(), {}
        key = self.key_name("spark.schema")
        if df is None or column is None:
            raise ConfigError([ConfigProblem(key, f"Set {key}: JsonConverter needs the Spark type of the parsed "
                                                  f"{self.side} (no DataFrame to sample; a Spark DDL or JSON "
                                                  f"schema)")])
        sample = None if self.sample_every_message else self.config.schemas_sample_size
        dt, meta, self._topic_types = infer_schema_from_envelopes(df, column, sample, key, keys=self.is_key,
                                                                  texts=self.batch_texts)
        self._union_type = dt if self._topic_types else None
        self._union_tables = str(meta.get(TABLES_META, "{}"))
        return dt, meta

    def _parsed(self, col: Column, data_type: DataType,
                stage: Callable[[Column], Column] | None = None) -> tuple[Column, Column]:
        """The one ``from_json`` of a message: ``(payload in the wire type, corrupt)``; ``corrupt`` is true where the
        text is not JSON of that type (or, with ``schemas.enable``, has no envelope to read the payload from).
        ``stage`` (see :meth:`parse_staged`) takes the parsed struct and gives the Column to read it from.

        The options matter beyond the corrupt-record column: Spark's ``OptimizeJsonExprs`` rewrites an
        option-less ``from_json`` into one pruned ``from_json`` per extracted field, which would defeat the
        subexpression elimination that parses each message once (measured: ~7x the CPU)."""
        wire = _wire(data_type, self.key_name("spark.schema"))
        opts = {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE", **_JACKSON_OPTIONS}
        text = col.cast("string")
        if not self._enveloped and isinstance(wire, StructType) and _CORRUPT not in wire.names:
            # A struct is read from the text itself: Spark's parser reads the root object and, like Jackson's
            # readTree, ignores what follows it. Measured: the {"payload": ...} wrapper below costs a copy of
            # every message and ~15% more CPU. The JSON text null is a null value, not a corrupt record.
            parsed = F.from_json(text, StructType(wire.fields + [StructField(_CORRUPT, StringType())]), opts)
            parsed = stage(parsed) if stage is not None else parsed
            is_null_text = F.regexp_like(text, F.lit(r"^\s*null\s*$"))  # evaluated for a corrupt record only
            corrupt = parsed.isNull() | (parsed[_CORRUPT].isNotNull() & ~is_null_text)
            return F.when(parsed[_CORRUPT].isNull(), parsed.dropFields(_CORRUPT)), corrupt
        st = StructType([StructField("payload", wire), StructField(_CORRUPT, StringType())])
        if self._enveloped:
            # The "schema" part is skipped by the parser, not copied; like Jackson's readTree, Spark's parser
            # stops at the end of the root object and ignores what follows it.
            parsed = F.from_json(text, st, opts)
            parsed = stage(parsed) if stage is not None else parsed
            return parsed["payload"], parsed.isNull() | parsed[_CORRUPT].isNotNull()
        wrapped = F.from_json(F.concat(F.lit('{"payload":'), text, F.lit("}")), st, opts)
        # Text after the value breaks the wrapper. Only where the wrapper fails, the first JSON value alone
        # (try_parse_json stops after it, as readTree does) is parsed again; a message that is bad anyway is
        # parsed twice, a good one once.
        first = F.to_json(F.try_parse_json(text))
        retry = F.from_json(F.concat(F.lit('{"payload":'), first, F.lit("}")), st, opts)
        parsed = F.when(wrapped.isNotNull() & wrapped[_CORRUPT].isNull(), wrapped).otherwise(retry)
        parsed = stage(parsed) if stage is not None else parsed
        return parsed["payload"], parsed.isNull() | parsed[_CORRUPT].isNotNull()

    def _bad_envelope(self, col: Column, payload: Column) -> Column:
        """With ``schemas.enable``: a message without exactly the ``schema`` and ``payload`` keys. The keys are
        listed (a second parse) only for rows whose payload is null, which is where a plain-JSON message lands:
        one reference inside a CASE branch, so that codegen never hoists it for every row. sort_array, not
        array_sort: no lambda, so no interpreted fallback."""
        if not self._enveloped:
            return F.lit(False)
        exact = F.sort_array(F.json_object_keys(col.cast("string"))) == F.array(F.lit("payload"), F.lit("schema"))
        return F.when(payload.isNull(), ~F.coalesce(exact, F.lit(False))).otherwise(F.lit(False))

    @staticmethod
    def _corrupt_message(col: Column, data_type: DataType) -> Column:
        return F.concat(F.lit(f"Converting byte[] to Kafka Connect data failed due to serialization error: invalid "
                              f"JSON, or a payload that does not fit the schema {data_type.simpleString()[:300]}: "),
                        F.substring(col.cast("string"), 1, 200))

    def _finish(self, col: Column, parsed: tuple[Column, Column], data_type: DataType) -> Conversion:
        payload, corrupt = parsed
        bad_envelope = self._bad_envelope(col, payload)
        value, bad_value = _from_wire(payload, data_type)
        if _needs_fix(data_type) and isinstance(data_type, (StructType, ArrayType, MapType)):
            # withField drops the metadata of the field it sets (a Decimal's connect.parameters; a nested
            # struct's connect.name, as Debezium's before/after): the cast gives it back.
            value = value.cast(as_nullable(data_type))
        snippet = F.substring(col.cast("string"), 1, 200)
        fit = f"does not fit the schema {data_type.simpleString()[:300]}"
        # Only ever evaluated where ``failed`` holds (the wiring's raise_error / _kc_error branch), which also
        # makes it the free place for the push-down barrier (see parse_checked).
        message = (F.when(~_barrier(), F.lit(None).cast("string"))
                   .when(corrupt, self._corrupt_message(col, data_type))
                   .when(bad_envelope, F.lit(_ENVELOPE_MESSAGE))
                   .otherwise(F.concat(F.lit(f"Converting byte[] to Kafka Connect data failed: the payload {fit} "
                                             f"(invalid Decimal): "), snippet)))
        failed = col.isNotNull() & (corrupt | bad_envelope | F.coalesce(_or(bad_value, F.lit(False)), F.lit(False)))
        out = F.when(col.isNull() | failed, F.lit(None)).otherwise(value)  # NullType keeps the metadata
        return Conversion(out, failed, message)

    def parse_checked(self, col: Column, data_type: DataType, *, topic: Column | None = None) -> Conversion:
        """One projection: ``from_json`` is referenced by the value, the check and the message, and Spark's
        subexpression elimination evaluates it once per row (measured: within a few % of the JVM CPU of a bare
        ``from_json``). A separate ``from_json`` projection costs an extra row copy of the parsed struct and
        the message bytes (~10% of the decode). The message carries a nondeterministic always-true test
        (:func:`_barrier`), evaluated only for a failed record, so that the optimizer never pushes a later filter
        on the result below this projection, which would parse every message a second time inside the filter."""
        if isinstance(data_type, VariantType):
            return self._parse_variant(col)
        if self._topic_types and topic is not None and data_type == self._union_type:
            return self._parse_per_topic(col, data_type, topic)
        return self._finish(col, self._parsed(col, data_type), data_type)

    def parse_staged(self, df: DataFrame, column: str, data_type: DataType
                     ) -> tuple[DataFrame, Conversion, list[str]] | None:
        """For a plan made again for every micro-batch (types read from its messages): the parse in a projection of
        its own, ``(df with the parsed struct staged, the Conversion reading it, the staged columns)``; None where
        :meth:`parse_checked` has nothing to stage (a VARIANT, several topics: :meth:`parse_frame`).

        :meth:`parse_checked`'s one projection repeats the ``from_json`` in every reference to the payload (a
        Debezium envelope's conversion held 414 copies, ~700 KB of plan text): subexpression elimination makes that
        one parse per row, but Spark analyses, optimises and generates code for every copy, which cost a JDBC
        sink over 1 CPU-second per micro-batch. Staged, the plan holds one. The staged struct is behind the
        nondeterministic :func:`_barrier`, so the optimizer does not fold it back into its references."""
        if isinstance(data_type, VariantType) or (self._topic_types and data_type == self._union_type):
            return None
        name = "_kc_json_parsed"
        staged: dict[str, Column] = {}

        def stage(parsed: Column) -> Column:
            staged[name] = F.when(_barrier(), parsed)
            return F.col(name)

        parsed = self._parsed(F.col(column), data_type, stage)
        conversion = self._finish(F.col(column), parsed, data_type)
        return df.withColumns(staged), conversion, list(staged)

    def _parse_variant(self, col: Column) -> Conversion:
        """A message as a VARIANT (``parse_json``): what Kafka reads without a schema, a Map, a list or a
        primitive. The JSON text ``null`` is a null value; text after the first value is ignored, as Jackson's
        ``readTree`` does. An envelope (with schemas.enable) gives its payload, its schema ignored."""
        parsed = F.try_parse_json(col.cast("string"))
        if self._enveloped:
            payload = F.try_variant_get(parsed, "$.payload", "variant")
            keys = F.sort_array(F.json_object_keys(col.cast("string")))
            bad_envelope = parsed.isNotNull() & ~F.coalesce(keys == F.array(F.lit("payload"), F.lit("schema")),
                                                            F.lit(False))
        else:
            payload, bad_envelope = parsed, F.lit(False)
        corrupt = col.isNotNull() & parsed.isNull()
        failed = corrupt | bad_envelope
        message = (F.when(~_barrier(), F.lit(None).cast("string"))
                   .when(corrupt, F.concat(F.lit("Converting byte[] to Kafka Connect data failed due to "
                                                 "serialization error: invalid JSON: "),
                                           F.substring(col.cast("string"), 1, 200)))
                   .otherwise(F.lit(_ENVELOPE_MESSAGE)))
        value = F.when(failed | payload.isNull() | F.is_variant_null(payload), F.lit(None).cast(VariantType())) \
            .otherwise(payload)
        return Conversion(value, failed, message)

    def _parse_per_topic(self, col: Column, union: DataType, topic: Column) -> Conversion:
        """Each topic's messages parsed with that topic's own type (one ``from_json`` per row: a CASE over the
        topics) and placed in the union struct, its other topics' fields null (for envelopes: in the union rows
        of ``before``/``after``)."""
        assert isinstance(union, StructType)
        wire, problem = self._per_topic_wire(col, union, topic)
        return self._decode_union(col, wire, problem, union)

    def parse_frame(self, df: DataFrame, column: str, data_type: DataType, error_column: str) -> DataFrame | None:
        """The pipeline wiring's DataFrame-level parse of several topics' messages (else None: the Column-level
        :meth:`parse_checked`). Each topic's payload is placed in the union's wire type in a projection of its
        own, and the Decimal, Date and Timestamp values are decoded after it, once over the union: placed after
        the decode, each union field copied that topic's whole decoded value into the plan (measured: ~5 s of
        planning and 2.3 s to run per batch of two Debezium tables; 1.6 s and 0.4 s here). The staging projection holds a
        nondeterministic test (:func:`_barrier`), so a later filter is never pushed below it."""
        if not (self._topic_types and data_type == self._union_type and "topic" in df.columns):
            return None
        assert isinstance(data_type, StructType)
        wire, problem = self._per_topic_wire(F.col(column), data_type, F.col("topic"))
        staged = df.withColumns({"_kc_json_wire": wire, "_kc_json_problem": F.when(_barrier(), problem)})
        c = self._decode_union(F.col(column), F.col("_kc_json_wire"), F.col("_kc_json_problem"), data_type)
        assert c.failed is not None
        out = staged.withColumns({column: c.value, error_column: F.when(c.failed, c.message)})
        return out.drop("_kc_json_wire", "_kc_json_problem")

    def _per_topic_wire(self, col: Column, union: StructType, topic: Column) -> tuple[Column, Column]:
        """``(payload, problem)``: each topic's payload placed in the union's wire type (see :func:`_wire`),
        and the message of a message that is not JSON of its topic's type, has no envelope or has a topic none
        of the schemas was found for (null otherwise)."""
        wire_union = _wire(union, self.key_name("spark.schema"))
        assert isinstance(wire_union, StructType)
        layouts = json.loads(self._union_tables)
        wire = problem = None
        for name, (dt, _meta) in sorted(self._topic_types.items()):
            payload, corrupt = self._parsed(col, dt)
            holder = dict(zip(layouts[name]["fields"], layouts[name]["columns"]))
            if is_envelope_type(wire_union):
                row_t = wire_union["after"].dataType
                assert isinstance(row_t, StructType)
                parts = [(_placed(payload[f.name], row_t, holder) if f.name in ("before", "after")
                          else payload[f.name] if f.name in dt.names else F.lit(None).cast(f.dataType))
                         .alias(f.name) for f in wire_union.fields]
                placed = F.when(payload.isNull(), F.lit(None)).otherwise(F.struct(*parts)).cast(wire_union)
            else:
                placed = _placed(payload, wire_union, holder)
            bad = (F.when(col.isNull(), F.lit(None).cast("string"))
                   .when(corrupt, self._corrupt_message(col, dt))
                   .when(self._bad_envelope(col, payload), F.lit(_ENVELOPE_MESSAGE)))
            is_topic = topic == F.lit(name)
            wire = F.when(is_topic, placed) if wire is None else wire.when(is_topic, placed)
            problem = F.when(is_topic, bad) if problem is None else problem.when(is_topic, bad)
        assert wire is not None and problem is not None
        unknown = ("Converting byte[] to Kafka Connect data failed: the message's topic is none of the topics "
                   f"whose schemas were found ({', '.join(sorted(map(str, self._topic_types)))})")[:500]
        return (wire.otherwise(F.lit(None).cast(wire_union)),
                problem.otherwise(F.when(col.isNotNull(), F.lit(unknown))))

    def _decode_union(self, col: Column, wire: Column, problem: Column, union: StructType) -> Conversion:
        value, bad_value = _from_wire(wire, union)
        failed = col.isNotNull() & (problem.isNotNull() | _false_if_none(bad_value))
        invalid = F.concat(F.lit(f"Converting byte[] to Kafka Connect data failed: the payload does not fit the "
                                 f"schema {union.simpleString()[:300]} (invalid Decimal): "),
                           F.substring(col.cast("string"), 1, 200))
        message = F.when(~_barrier(), F.lit(None).cast("string")).otherwise(F.coalesce(problem, invalid))
        # The cast gives back the union's field metadata (the layouts on before/after) that withField drops.
        return Conversion(F.when(col.isNull() | failed, F.lit(None)).otherwise(value).cast(union), failed, message)

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        return Conversion(utf8_bytes(self.serialize_text(col, data_type, metadata=metadata)))

    def serialize_text(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None
                       ) -> Column:
        """The JSON text Kafka's converter writes for each value of ``col`` (a string Column; null for a null
        value): what :meth:`serialize_checked` encodes, and what a JSON object format writes on each line (Confluent's
        storage sinks' ``JsonFormat`` is this converter without schemas)."""
        if isinstance(data_type, VariantType):
            # Kafka writes a schemaless value as its JSON ({"schema":null,"payload":...} with schemas.enable).
            body = F.to_json(col)
            if self.schemas_enabled:
                body = F.concat(F.lit('{"schema":null,"payload":'), F.coalesce(body, F.lit("null")), F.lit("}"))
            return F.when(col.isNull(), F.lit(None).cast("string")).otherwise(body)
        numeric = self.config.decimal_format.upper() == "NUMERIC"
        schema = None
        if self.schemas_enabled:
            try:
                schema = connect_schema_json(data_type, True, metadata)
            except DataError as e:
                raise ConfigError([ConfigProblem(self.prefix.rstrip(".") or "data_type", str(e))]) from e
        wire = _to_wire(col, data_type, numeric)
        if isinstance(data_type, (StructType, MapType, ArrayType)):
            # to_json writes these itself, and null for a null value: no CASE around it. (Spark's subexpression
            # elimination does not share an expression used twice inside one CASE branch, which the wrapped form
            # below needs: measured, to_json ran twice per record there.)
            body = F.to_json(wire, {"ignoreNullFields": "false"})
            if self.schemas_enabled:
                body = F.concat(F.lit('{"schema":' + (schema or "null") + ',"payload":'), body, F.lit("}"))
            return body
        payload = F.to_json(F.struct(wire.alias("payload")), {"ignoreNullFields": "false"})  # '{"payload":X}'
        if self.schemas_enabled:
            text = F.concat(F.lit('{"schema":' + (schema or "null") + ","), payload.substr(F.lit(2), F.length(payload)))
        else:
            text = payload.substr(F.lit(12), F.length(payload) - 12)
        return F.when(col.isNull(), F.lit(None).cast("string")).otherwise(text)
