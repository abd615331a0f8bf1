"""The converter contract: bytes <-> typed values as Column expressions.

Kafka Connect calls a converter once per record; here a converter builds Column expressions once, on the
driver, and Spark runs them over whole batches. Every converter offers two directions:

* :meth:`Converter.parse` (``toConnectData``): a binary Column -> a typed Column (sink side);
* :meth:`Converter.serialize` (``fromConnectData``): a typed Column -> a binary Column (source side).

Both have a ``*_checked`` form returning a :class:`Conversion` (value, failed, message) that the pipeline
wiring (:mod:`.wiring`) hands to :func:`spark_connect_bridge.core.record_errors.checked`, so that a bad record
fails the query with its coordinates (strict) or lands in ``_kc_error`` (tolerant). The plain forms fold the
failure into the Column with ``raise_error`` (strict, without record coordinates).

>>> conv = StringConverter()                                            # doctest: +SKIP
>>> df.select(conv.parse(F.col("value")).alias("value"))                # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from ..config import Config, ConfigDef, Importance, Type
from ..errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

__all__ = ["Conversion", "Converter", "HeaderConverter", "parse_prefixed", "parse_spark_type", "SPARK_SCHEMA_DOC",
           "with_spark_schema_key"]

SPARK_SCHEMA_DOC = ("Spark type of the parsed column, as a DDL string (``id BIGINT, name STRING`` or ``int``) or "
                    "Spark's JSON schema. Takes precedence over every other way the converter finds a schema.")


def with_spark_schema_key(cd: ConfigDef) -> ConfigDef:
    """Add the ``spark.schema`` sub-key shared by every parsing converter."""
    return cd.define("spark.schema", Type.STRING, None, None, Importance.MEDIUM, SPARK_SCHEMA_DOC)


@dataclass(frozen=True)
class Conversion:
    """The result of a conversion: the new value, whether it failed (``None``: it cannot fail) and why."""

    value: Column
    failed: Column | None = None
    message: Column | None = None

    def strict(self) -> Column:
        """The value, raising the message for a failed row (no record coordinates)."""
        if self.failed is None:
            return self.value
        msg = self.message if self.message is not None else F.lit("conversion failed")
        return F.when(F.coalesce(self.failed, F.lit(False)), F.raise_error(msg)).otherwise(self.value)


def parse_prefixed(config_def: ConfigDef, props: Mapping[str, Any], prefix: str = "", *,
                   context: str | None = None) -> Config:
    """Parse the keys under ``prefix`` of ``props`` with ``config_def``; problems name the full keys.

    ``props`` is not modified. ``parse_prefixed(cd, {"value.converter.schemas.enable": "false"},
    "value.converter.")`` reads ``schemas.enable``.
    """
    if not prefix:
        return config_def.parse(dict(props), context=context)
    full = ConfigDef()
    for key in config_def:
        full.define(prefix + key.name, key.type, key.default, key.validator, key.importance, key.doc,
                    internal=key.internal, support=key.support, note=key.note)
    for old, (new, accepted_by) in config_def.renames.items():
        full.renamed(prefix + old, prefix + new, accepted_by)
    sub = {k: v for k, v in props.items() if k.lower().startswith(prefix.lower())}
    cfg = full.parse(sub, context=context)
    values = {k[len(prefix):]: v for k, v in cfg.parsed.items()}
    originals = {k[len(prefix):]: v for k, v in sub.items()}
    return Config(config_def, values, originals, cfg.warnings)


def parse_spark_type(text: str | DataType, *, key: str) -> DataType:
    """A Spark type from a DDL string, Spark's JSON schema, or a DataType; ConfigError naming ``key``."""
    if isinstance(text, DataType):
        return text
    s = text.strip()
    try:
        if s.startswith("{"):
            return StructType.fromJson(json.loads(s)) if json.loads(s).get("type") == "struct" else \
                _from_json_type(json.loads(s))
        from pyspark.sql.types import _parse_datatype_string

        return _parse_datatype_string(s)
    except Exception as e:
        raise ConfigError([ConfigProblem(key, f"Invalid value {s} for configuration {key}: not a Spark DDL or "
                                              f"JSON schema ({type(e).__name__}: {str(e).splitlines()[0][:200]})")]
                          ) from e


def _from_json_type(obj: Any) -> DataType:
    from pyspark.sql.types import _parse_datatype_json_value

    return _parse_datatype_json_value(obj)


#: Keys every Kafka converter declares (``ConverterConfig``), merged into each converter's own.
CONVERTER_COMMON = ConfigDef().accept("org.apache.kafka.connect.storage.StringConverter", no_effect={
    "converter.type": "set by the worker in Kafka; here the prefix a converter is configured under "
                      "(key.converter, value.converter, header.converter) says what it converts"})


def converter_config_def(cls: type[Converter]) -> ConfigDef:
    """The full declaration of a converter class: its own keys, then the ones every converter has."""
    return cls.config_def.merge(CONVERTER_COMMON)


class Converter:
    """Base class of the converters. Subclasses set ``class_name``, ``config_def`` and implement
    :meth:`parse_checked` / :meth:`serialize_checked`.

    ``config`` holds the converter's own keys (``schemas.enable``), or, with ``prefix``, a whole connector
    config from which the keys under ``prefix`` (``value.converter.``) are read. ``is_key`` says whether the
    converter handles record keys (Kafka's ``converter.type``).
    """

    plugin_type: ClassVar[str] = "converter"
    class_name: ClassVar[str] = ""
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: A type read from the messages is read from every message of the DataFrame, not a sample (set for a
    #: stream's micro-batches, where a schema the sample missed would drop fields silently).
    sample_every_message: bool = False
    #: A streaming query's memory of its last micro-batch's schema texts
    #: (:class:`~spark_connect_bridge.converters.json_envelopes.BatchTexts`), for converters that type by them.
    batch_texts: Any = None
    #: ``serialize_checked`` is Spark expressions only (no UDF), so a CASE branch holding it is evaluated for that
    #: branch's rows only: the per-topic serialization then gives it the column as it is. A UDF would be evaluated
    #: on every row (Spark computes it before the CASE), so it gets the column nulled outside its topic.
    serializes_in_expressions: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any] | None = None, *, is_key: bool = False, prefix: str = ""):
        self.is_key = is_key
        self.prefix = prefix
        # The whole connector config (read-only): some converters read connector keys such as ``topics``.
        self.connector_config: Mapping[str, Any] = dict(config or {})
        self.config = parse_prefixed(converter_config_def(type(self)), config or {}, prefix,
                                     context=f"{prefix.rstrip('.') or type(self).__name__}")
        self.validate()

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self) -> None:
        """Cross-key checks after parsing (raise ConfigError naming full keys)."""

    def key_name(self, name: str) -> str:
        """The full config key of one of this converter's keys (``value.converter.schemas.enable``)."""
        return self.prefix + name

    @property
    def side(self) -> str:
        return "key" if self.is_key else "value"

    def explicit_schema(self) -> DataType | None:
        text = self.config.get("spark.schema")
        return parse_spark_type(text, key=self.key_name("spark.schema")) if text else None

    def resolve_parse_type(self, df: Any = None, column: str | None = None,
                           explicit: DataType | None = None) -> tuple[DataType, dict[str, Any]]:
        """The Spark type (and column metadata) :meth:`parse` produces, decided at plan time.

        Order: ``explicit`` (a caller's argument), the ``spark.schema`` sub-key, then the converter's own
        source (fixed type, registry, inference from a sample of ``df``).
        """
        if explicit is not None:
            return explicit, {}
        t = self.explicit_schema()
        if t is not None:
            return t, {}
        return self.default_parse_type(df, column)

    def types_from_messages(self, column: str) -> bool:
        """Whether the parsed type of ``column`` is read from the messages themselves (JsonConverter's
        ``schemas.enable=true``): on a stream it is then found per micro-batch, from that batch's messages."""
        return False

    def schemaless_key(self, column: str) -> str | None:
        """The config key that makes this converter read ``column`` without a schema (Kafka's null schema; a
        VARIANT here), or None when it reads it with one."""
        return None

    def sink_problems(self, column: str) -> list[ConfigProblem]:
        """What stops this converter from parsing ``column`` (``key``, ``value``, ``headers``) of a sink
        connector's input, found from the config alone, so that validation reports it, not the start."""
        return []

    def default_parse_type(self, df: Any, column: str | None) -> tuple[DataType, dict[str, Any]]:
        raise ConfigError([ConfigProblem(self.key_name("spark.schema"),
                                         f"{self.class_name} needs the Spark type of the parsed {self.side}: set "
                                         f"{self.key_name('spark.schema')} (a Spark DDL or JSON schema)")])

    # -- conversions --------------------------------------------------------------------------------
    def parse_checked(self, col: Column, data_type: DataType, *, topic: Column | None = None) -> Conversion:
        raise NotImplementedError

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        raise NotImplementedError

    def parse(self, col: Column | str, data_type: DataType | str | None = None, *,
              topic: Column | None = None) -> Column:
        """Binary -> typed Column; a bad row raises (strict). ``data_type`` defaults to the converter's own."""
        col = F.col(col) if isinstance(col, str) else col
        if isinstance(data_type, str):
            data_type = parse_spark_type(data_type, key="data_type")
        dt = data_type if data_type is not None else self.resolve_parse_type()[0]
        return self.parse_checked(col, dt, topic=topic).strict()

    def serialize(self, col: Column | str, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                  topic: Column | None = None) -> Column:
        """Typed Column of ``data_type`` -> binary Column; a bad row raises (strict)."""
        col = F.col(col) if isinstance(col, str) else col
        return self.serialize_checked(col, data_type, metadata=metadata, topic=topic).strict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class HeaderConverter(Converter):
    """A converter of header values (``header.converter``)."""

    plugin_type: ClassVar[str] = "header_converter"


def utf8_bytes(text: Column) -> Column:
    """A string column's UTF-8 bytes. A cast, not ``F.encode(text, "UTF-8")``: Spark's encode validates every
    string's UTF-8 first (a tenth of the JVM's time on a JsonConverter path into Kafka, measured); a string here
    is valid UTF-8 already, its bytes are the same."""
    return text.cast("binary")


def java_text(data: Column, encoding: str = "UTF-8") -> Column:
    """The text of ``data``'s bytes in ``encoding`` as Java's ``new String(bytes, charset)`` reads it (Kafka's
    StringDeserializer, SimpleHeaderConverter): each malformed sequence becomes U+FFFD, by Java's own decoder.
    Spark 4's ``decode`` fails the query on malformed input instead, and ``make_valid_utf8`` replaces some
    sequences otherwise than Java (an encoded surrogate, ``ED A0 80``, is three U+FFFD there and one in Java).
    Valid UTF-8 is a cast (no copy); ISO-8859-1 has no malformed input; the rest goes through
    ``java.net.URLDecoder.decode`` of the bytes percent-encoded, which decodes them with ``new String(bytes,
    charset)``: for UTF-8 through Spark's ``url_decode`` (the same call, deterministic and compiled with its
    projection), for another charset through ``reflect``, which is neither: a projection holding it is not
    collapsed with its neighbours nor compiled whole-stage (measured: the StringConverter sink's key and value
    with ``reflect`` cost ~1 us a record more than the same casts by hand)."""
    if encoding == "ISO-8859-1":
        return F.decode(data, encoding)
    percent = F.regexp_replace(F.hex(data), "(..)", "%$1")
    if encoding != "UTF-8":
        return F.when(data.isNotNull(), F.reflect(F.lit("java.net.URLDecoder"), F.lit("decode"), percent,
                                                  F.lit(encoding)))
    text = data.cast("string")
    return F.when(F.is_valid_utf8(text), text).otherwise(F.url_decode(percent))


def scalar_arrow_udf(fn: Callable[..., Any], return_type: DataType) -> UserDefinedFunctionLike:
    """``F.arrow_udf(fn, return_type)``: a scalar Arrow UDF, its kind read from ``fn``'s type hints."""
    # pyspark's stubs declare arrow_udf(f, returnType) only with an explicit functionType, which warns at run
    # time ("It is preferred to specify type hints"); without one, pyspark infers it from the hints as here.
    return F.arrow_udf(fn, return_type)  # type: ignore[call-overload]
