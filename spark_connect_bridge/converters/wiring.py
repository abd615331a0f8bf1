"""Apply a Kafka Connect config's ``key.converter``, ``value.converter`` and ``header.converter`` to a record
DataFrame, in Kafka Connect's order:

* source side, **after** the transforms: :func:`apply_source_converters` turns typed ``key``/``value``/header
  values into bytes;
* sink side, **before** the transforms: :func:`apply_sink_converters` turns binary ``key``/``value``/header
  values into typed columns.

A converter's sub-keys are the keys under its prefix (``value.converter.schemas.enable``); each converter
class validates them with its ``config_def`` (an unknown sub-key is a ConfigError naming the full key, with a
"did you mean"). Every config problem of the three converters is reported at once, when the wiring is built,
before any action runs. **A missing converter key leaves its column as it is** (typed on the source side,
binary on the sink side); there is no worker-level default here.

A row that fails to convert is a record error (stage ``KEY_CONVERTER``/``VALUE_CONVERTER``/
``HEADER_CONVERTER``, class = the converter's Kafka class name) through
:func:`spark_connect_bridge.core.record_errors.checked`: strict DataFrames fail with the record's
topic/partition/offset, tolerant ones (``_kc_error``) record it.

>>> cfg = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",      # doctest: +SKIP
...        "value.converter.schemas.enable": "false",
...        "value.converter.spark.schema": "id BIGINT, name STRING"}
>>> typed = apply_sink_converters(kafka_df, cfg)                                    # doctest: +SKIP
>>> back = apply_source_converters(typed, cfg)                                      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, StructType

from ..core.plugins import resolve_class
from ..core.record_errors import checked
from ..core.topic_schemas import narrow, topic_layouts
from ..errors import ConfigError, ConfigProblem
from .base import Converter, parse_spark_type
from .json_envelopes import BatchTexts

__all__ = ["CONVERTER_KEYS", "build_converters", "apply_source_converters", "apply_sink_converters"]

CONVERTER_KEYS = {"key": "key.converter", "value": "value.converter", "headers": "header.converter"}
STAGES = {"key": "KEY_CONVERTER", "value": "VALUE_CONVERTER", "headers": "HEADER_CONVERTER"}
_TMP = "_kc_conv"


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    if key in config:
        return config[key]
    low = key.lower()
    return next((v for k, v in config.items() if k.lower() == low), None)


def build_converters(config: Mapping[str, Any]) -> dict[str, Converter]:
    """The configured converters by column (``key``, ``value``, ``headers``); raise one ConfigError listing
    every problem. ``config`` (a whole connector config) is not modified."""
    out: dict[str, Converter] = {}
    errors: list[ConfigError] = []
    for column, key in CONVERTER_KEYS.items():
        name = _lookup(config, key)
        if name is None or (isinstance(name, str) and not name.strip()):
            continue
        try:
            if isinstance(name, Converter):
                out[column] = name
                continue
            cls = name if isinstance(name, type) else resolve_class("converter", str(name).strip(), key=key)
            if not issubclass(cls, Converter):
                raise ConfigError([ConfigProblem(key, f"Invalid value {name} for configuration {key}: not a "
                                                      f"spark_connect_bridge converter")])
            if column == "headers" and not getattr(cls, "header_capable", True):
                raise ConfigError([ConfigProblem(key, f"Invalid value {name} for configuration {key}: "
                                                      f"{cls.__name__} cannot convert header values")])
            out[column] = cls(config, is_key=(column == "key"), prefix=key + ".")
        except ConfigError as e:
            errors.append(e)
    if errors:
        raise ConfigError.merge(errors, context="converters")
    return out


def _header_value_type(df: DataFrame) -> DataType | None:
    if "headers" not in df.columns:
        return None
    t = df.schema["headers"].dataType
    if isinstance(t, ArrayType) and isinstance(t.elementType, StructType) and "value" in t.elementType.names:
        return t.elementType["value"].dataType
    return None


def _compiled_per_expression(c: Column, anchor: Column) -> Column:
    """``c``, in a projection Spark compiles expression by expression (methods of ~1 KB, which HotSpot
    JIT-compiles), not as one whole-stage method: a projection holding a higher-order function (this always-true
    ``exists`` over ``anchor``, a column, so that it is not folded) is left out of whole-stage code generation. The
    per-topic serialization of a CDC connector's envelopes is one whole-stage method of tens of KB (30 KB for
    test_debezium_postgres.py's four tables), over HotSpot's 8,000-byte HugeMethodLimit, so it was never
    JIT-compiled (measured, bench/bench_cdc_json_serialize.py: 17 JVM CPU-us per record warm, 8 like this)."""
    return F.when(F.exists(F.array(anchor), lambda _: F.lit(True)), c)


def _serialize_per_topic(df: DataFrame, column: str, conv: Converter, data_type: DataType,
                         metadata: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]]) -> DataFrame:
    """Serialize each topic's records with that topic's own schema (its fields only, its connect.name): a
    CASE over the topics, so each row is serialized once. Topics the layouts do not list keep the union."""
    topic = F.col("topic")
    value = failed = message = None
    # A UDF's branch sees its own topic's rows only (null elsewhere): Spark evaluates a Python UDF of a CASE branch
    # (a registry lookup keyed by the row's topic) on every row, which would register one topic's schema under
    # another topic's subject. Expressions are left unguarded: the optimizer pushes a guard into every field the
    # branch reads, which for a Debezium envelope of a few tables grew the generated method beyond 64 KB.
    listed = F.coalesce(topic.isin(sorted(layouts)), F.lit(False))

    def guarded(c: Column, keep: Column) -> Column:
        return c if conv.serializes_in_expressions else F.when(keep, c)

    union = conv.serialize_checked(guarded(F.col(column), ~listed), data_type, metadata=metadata,
                                   topic=guarded(topic, ~listed))
    for name, info in sorted(layouts.items()):
        narrowed, narrowed_t, narrowed_meta = narrow(F.col(column), data_type, info, column)
        if "connect.version" in metadata and "connect.version" not in narrowed_meta:  # a Debezium envelope's 2
            narrowed_meta = {**narrowed_meta, "connect.version": metadata["connect.version"]}
        is_topic = topic == F.lit(name)
        c = conv.serialize_checked(guarded(narrowed, is_topic), narrowed_t, metadata=narrowed_meta,
                                   topic=guarded(topic, is_topic))
        value = (F.when(is_topic, c.value) if value is None else value.when(is_topic, c.value))
        f = c.failed if c.failed is not None else F.lit(False)
        failed = F.when(is_topic, f) if failed is None else failed.when(is_topic, f)
        m = c.message if c.message is not None else F.lit(None).cast("string")
        message = F.when(is_topic, m) if message is None else message.when(is_topic, m)
    assert value is not None and failed is not None and message is not None
    value = _compiled_per_expression(value.otherwise(union.value), topic)
    failed = failed.otherwise(union.failed if union.failed is not None else F.lit(False))
    message = message.otherwise(union.message if union.message is not None else F.lit(None).cast("string"))
    return checked(df, {column: value}, failed=failed, message=message, stage=STAGES[column],
                   class_name=conv.class_name)


def _apply(df: DataFrame, column: str, conv: Converter, *, parse: bool, data_type: DataType,
           metadata: Mapping[str, Any] | None) -> DataFrame:
    topic = F.col("topic") if "topic" in df.columns else None
    stage, cls = STAGES[column], conv.class_name
    frame = getattr(conv, "parse_frame", None) if parse and column != "headers" else None
    staged = frame(df, column, data_type, _TMP) if frame is not None else None
    if staged is not None:  # a converter's own DataFrame-level pass (from_json / the Avro UDF projected once)
        return checked(staged, {column: F.col(column)}, failed=F.col(_TMP).isNotNull(), message=F.col(_TMP),
                       stage=stage, class_name=cls, drop=[_TMP], metadata={column: metadata} if metadata else None)
    staging = getattr(conv, "parse_staged", None) if parse and conv.sample_every_message else None
    parts = staging(df, column, data_type) if staging is not None and column != "headers" else None
    if parts is not None:  # planned again for every micro-batch: the parse staged once, not copied per use
        sdf, c, temp = parts
        return checked(sdf, {column: c.value}, failed=c.failed, message=c.message, stage=stage, class_name=cls,
                       drop=temp, metadata={column: metadata} if metadata else None)
    if column != "headers":
        c = (conv.parse_checked(F.col(column), data_type, topic=topic) if parse
             else conv.serialize_checked(F.col(column), data_type, metadata=metadata, topic=topic))
        # One projection: Spark's subexpression elimination shares what value, failed and message have in
        # common (a struct staged in a projection of its own would be one more row copy).
        return checked(df, {column: c.value}, failed=c.failed, message=c.message, stage=stage, class_name=cls,
                       metadata={column: metadata} if parse and metadata else None)

    def one(h):
        return (conv.parse_checked(h["value"], data_type, topic=topic) if parse
                else conv.serialize_checked(h["value"], data_type, metadata=metadata, topic=topic))

    probe = one(F.struct(F.lit(None).cast("string").alias("key"), F.lit(None).cast(
        BinaryType() if parse else data_type).alias("value")))
    new = F.transform(F.col("headers"), lambda h: F.struct(h["key"].alias("key"), one(h).value.alias("value")))
    if probe.failed is None:
        return df.withColumn("headers", new)
    results = F.transform(F.col("headers"), lambda h: F.struct(
        F.coalesce(one(h).failed, F.lit(False)).alias("f"),
        F.concat(F.lit("header "), F.coalesce(h["key"], F.lit("null")), F.lit(": "),
                 F.coalesce(one(h).message, F.lit(""))).alias("m")))
    bad = F.filter(results, lambda r: r["f"])
    return checked(df, {"headers": new}, failed=F.size(bad) > 0, message=bad[0]["m"], stage=stage,
                   class_name=cls)


def apply_source_converters(df: DataFrame, config: Mapping[str, Any]) -> DataFrame:
    """Serialize typed ``key``/``value``/header values to bytes with the configured converters (source side,
    after the transforms). Columns whose converter is not configured are left as they are.

    >>> out = apply_source_converters(df, {"value.converter": "StringConverter"})   # doctest: +SKIP
    """
    convs = build_converters(config)
    for column in ("key", "value", "headers"):
        conv = convs.get(column)
        if conv is None or column not in df.columns:
            continue
        if column == "headers":
            dt = _header_value_type(df)
            if dt is None or isinstance(dt, BinaryType):
                continue  # already bytes
            meta: Mapping[str, Any] = {}
        else:
            field = df.schema[column]
            dt, meta = field.dataType, field.metadata
            layouts = topic_layouts(df.schema, column) if "topic" in df.columns else None
            if layouts and len(layouts) > 1:
                df = _serialize_per_topic(df, column, conv, dt, meta, layouts)
                continue
        df = _apply(df, column, conv, parse=False, data_type=dt, metadata=meta)
    return df


def apply_sink_converters(df: DataFrame, config: Mapping[str, Any], *, key_schema: DataType | str | None = None,
                          value_schema: DataType | str | None = None,
                          header_schema: DataType | str | None = None, every_message: bool = False,
                          texts: BatchTexts | None = None) -> DataFrame:
    """Parse binary ``key``/``value``/header values into typed columns with the configured converters (sink
    side, before the transforms). ``key_schema``/``value_schema``/``header_schema`` (a Spark type or DDL) take
    precedence over the converters' own ways to find the type (see each converter). ``every_message``: a type
    read from the messages (JsonConverter's envelopes) is read from all of them, not a sample (a stream's
    micro-batch). ``texts``: the query's memory of its previous micro-batch's schema texts
    (:class:`~spark_connect_bridge.converters.json_envelopes.BatchTexts`).

    >>> typed = apply_sink_converters(df, cfg, value_schema="id BIGINT, name STRING")   # doctest: +SKIP
    """

    convs = build_converters(config)
    explicit = {"key": key_schema, "value": value_schema, "headers": header_schema}
    plans: list[tuple[str, Converter, DataType, dict[str, Any]]] = []
    errors: list[ConfigError] = []
    for column in ("key", "value", "headers"):
        conv = convs.get(column)
        if conv is None or column not in df.columns:
            continue
        conv.sample_every_message = every_message
        conv.batch_texts = texts
        try:
            given = explicit[column]
            if isinstance(given, str):
                given = parse_spark_type(given, key=f"{column}_schema")
            dt, meta = conv.resolve_parse_type(df, column if column != "headers" else None, given)
            plans.append((column, conv, dt, meta))
        except ConfigError as e:
            errors.append(e)
    if errors:
        raise ConfigError.merge(errors, context="converters")
    for column, conv, dt, meta in plans:
        current = _header_value_type(df) if column == "headers" else df.schema[column].dataType
        if current is not None and not isinstance(current, BinaryType):
            if column == "headers":
                continue
            raise ConfigError([ConfigProblem(CONVERTER_KEYS[column],
                                             f"{CONVERTER_KEYS[column]} parses binary {column}s; the {column} "
                                             f"column is {current.simpleString()}")])
        df = _apply(df, column, conv, parse=True, data_type=dt, metadata=meta)
    return df

