"""``io.confluent.connect.avro.AvroConverter``: Avro in the Confluent wire format with a Schema Registry.

Wire format: byte 0 = magic ``0x00``, bytes 1-4 = schema id (big-endian int32), then the Avro binary datum.
A null value is null bytes both ways (tombstones stay null).

**Two engines, one API**, chosen when the expression is built (``avro.engine=auto``):

* ``native``: Spark's ``from_avro``/``to_avro`` (the spark-avro module, e.g. on Databricks), detected by
  analysing (not running) a tiny ``from_avro`` expression once per session;
* ``fastavro``: an Arrow UDF over whole record batches (``arrow_udf``): per batch, one registry lookup per
  schema id/topic (cached per process) and the fastavro decode/encode per record, nothing else per row.

**Parse type** (plan time), in this order: the caller's argument, ``<prefix>spark.schema``,
``<prefix>use.schema.id`` (that registry schema), then the latest version of the subject of the connector's
single topic (``topics``) under the subject name strategy. Otherwise a ConfigError names the keys to set.
When the Spark type comes from the registry, records written with another version are resolved to it (Avro
schema resolution: defaults, promotions); with an explicit Spark type, fields are matched by name.

**Serialize**: the Avro schema is derived from the column's Spark type (Confluent's AvroData mapping, see
:mod:`.avro_data`) and registered per topic under the subject name strategy (``auto.register.schemas``), or
looked up; ``use.latest.version`` writes with the subject's latest schema, ``use.schema.id`` with that id.

Bad input (wrong magic byte, unknown schema id, truncated or random bytes, a record that does not fit the
schema) is a record error, never a crashed worker. An unreachable registry is a system error
(:class:`~spark_connect_bridge.errors.RetriableError`, retried with backoff first).

>>> conv = AvroConverter({"schema.registry.url": "http://127.0.0.1:8081"})      # doctest: +SKIP
>>> df.select(conv.serialize("value", df.schema["value"].dataType, topic=F.col("topic")))  # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # a core dependency; module-level so arrow_udf can resolve the 'pa.Array' hints
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, MapType, StringType, StructField, StructType

from ..config import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    ConfigDef,
    Importance,
    NonEmptyString,
    Range,
    Type,
    ValidList,
)
from ..core.records import arrow_schema
from ..errors import ConfigError, ConfigProblem, DataError
from .avro_data import avro_to_spark, record_fullname, spark_to_avro
from .avro_native import NativeDecode, header_bytes, native_decode, native_encode, nullable_type, plain_logical_types
from .base import SPARK_SCHEMA_DOC, Conversion, Converter, scalar_arrow_udf
from .registry_keys import accept_registry
from .schema_registry import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    STRATEGY_NAMES,
    SchemaRegistryError,
    client_for,
    strategy_of,
    subject_name,
)

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

__all__ = ["AvroConverter", "native_avro_available", "STRATEGIES", "decode_batch", "encode_batch"]

log = logging.getLogger(__name__)


# -- engine detection ---------------------------------------------------------------------------------------

_NATIVE: dict[int, bool] = {}


def native_avro_available(spark: Any) -> bool:
    """Whether Spark's ``from_avro`` works in this session (spark-avro loaded): analyses a tiny expression
    on an empty DataFrame, runs no job; cached per session."""
    key = id(spark)
    if key not in _NATIVE:
        try:
            from pyspark.sql.avro.functions import from_avro

            spark.range(0).select(from_avro(F.lit(None).cast("binary"), '"int"')).schema  # noqa: B018
            _NATIVE[key] = True
        except Exception as e:  # noqa: BLE001 - any failure means "not available"
            log.debug("spark-avro not available: %s", str(e).splitlines()[0] if str(e) else type(e).__name__)
            _NATIVE[key] = False
    return _NATIVE[key]


# -- schema helpers shared by both engines -------------------------------------------------------------------

def _parsed(schema_text: str) -> Any:
    import fastavro

    # keeps the "parsed" hint: no re-parse per record
    return fastavro.parse_schema(plain_logical_types(json.loads(schema_text)))


def _arrow_type(dt: DataType) -> Any:
    return arrow_schema(StructType([StructField("v", dt)])).field("v").type


def _fixer(dt: DataType, decode: bool) -> Callable[[Any], Any] | None:
    """Python value conversions between fastavro and Arrow; None when the type needs none."""
    if isinstance(dt, MapType):
        vf = _fixer(dt.valueType, decode)
        if isinstance(dt.keyType, StringType):
            if decode:  # fastavro dict -> list of pairs for Arrow
                return lambda m: None if m is None else [(k, vf(v) if vf else v) for k, v in m.items()]
            return lambda m: None if m is None else {k: (vf(v) if vf else v) for k, v in m}
        kf = _fixer(dt.keyType, decode)
        if decode:  # array of MapEntry records -> pairs
            return lambda m: None if m is None else [((kf(e["key"]) if kf else e["key"]),
                                                      (vf(e["value"]) if vf else e["value"])) for e in m]
        return lambda m: None if m is None else [{"key": kf(k) if kf else k, "value": vf(v) if vf else v}
                                                 for k, v in m]
    if isinstance(dt, ArrayType):
        ef = _fixer(dt.elementType, decode)
        return None if ef is None else (lambda a: None if a is None else [ef(x) for x in a])
    if isinstance(dt, StructType):
        fixers = [(f.name, _fixer(f.dataType, decode)) for f in dt.fields]
        fs = [(n, fn) for n, fn in fixers if fn is not None]
        if not fs:
            return None

        def fix(r: Any) -> Any:
            if r is None:
                return None
            r = dict(r)
            for n, fn in fs:
                r[n] = fn(r.get(n))
            return r
        return fix
    return None


# -- fastavro engine: whole Arrow batches ------------------------------------------------------------------

_SCHEMAS: dict[tuple[Any, ...], Any] = {}
_SCHEMAS_LOCK = threading.Lock()


def _cached(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    hit = _SCHEMAS.get(key)
    if hit is None:
        hit = make()
        with _SCHEMAS_LOCK:
            _SCHEMAS[key] = hit
    return hit


def _writer_for(reg: tuple[Any, ...], sid: int, reader_text: str | None) -> tuple[Any, Any] | str:
    """(parsed writer, parsed reader or None) for a schema id, or an error message (cached per process)."""
    def make() -> tuple[Any, Any] | str:
        try:
            text = client_for(*reg).get_schema(sid)
        except SchemaRegistryError as e:
            return f"Error retrieving Avro schema for id {sid}: {e}"
        try:
            writer = _parsed(text)
            if reader_text is None or json.loads(text) == json.loads(reader_text):
                return writer, None
            return writer, _parsed(reader_text)
        except Exception as e:  # noqa: BLE001 - an unusable writer schema fails its records only
            return f"Error parsing Avro schema for id {sid}: {type(e).__name__}: {e}"
    return _cached(("w", reg, sid, reader_text), make)


def decode_batch(values: Any, reg: tuple[Any, ...], reader_text: str | None, dt_json: str) -> Any:
    """Decode one Arrow array of Confluent-framed Avro into ``struct<value, error>`` (the UDF body)."""
    from fastavro import schemaless_reader

    dt = _cached(("dt", dt_json), lambda: _type_from_json(dt_json))
    arrow_t = _cached(("at", dt_json), lambda: _arrow_type(dt))
    fix = _cached(("fix-d", dt_json), lambda: _fixer(dt, True) or False)
    raw = values.to_pylist()
    n = len(raw)
    out: list[Any] = [None] * n
    errs: list[str | None] = [None] * n
    targets: dict[bytes, Any] = {}  # 5-byte header -> (writer, reader) or an error message, for this batch
    bytes_io, reader = io.BytesIO, schemaless_reader
    for i, b in enumerate(raw):
        if b is None:
            continue
        hdr = b[:5]
        ws = targets.get(hdr)
        if ws is None:
            if len(hdr) < 5 or hdr[0] != 0:
                ws = "Error deserializing Avro message: Unknown magic byte!"
            else:
                ws = _writer_for(reg, int.from_bytes(hdr[1:], "big", signed=True), reader_text)
            targets[hdr] = ws
        if ws.__class__ is str:
            errs[i] = ws
            continue
        fo = bytes_io(b)
        fo.seek(5)
        try:
            rec = reader(fo, ws[0], ws[1])
        except Exception as e:  # noqa: BLE001 - any decode failure is this record's error
            sid = int.from_bytes(hdr[1:], "big", signed=True)
            errs[i] = f"Error deserializing Avro message for id {sid}: {type(e).__name__}: {e}"[:500]
            continue
        if fo.tell() != len(b):
            sid = int.from_bytes(hdr[1:], "big", signed=True)
            errs[i] = (f"Error deserializing Avro message for id {sid}: {len(b) - fo.tell()} trailing bytes after "
                       f"the Avro datum")
            continue
        out[i] = fix(rec) if fix else rec
    arr = _to_arrow(out, errs, arrow_t)
    return pa.StructArray.from_arrays([arr, pa.array(errs, pa.string())], names=["value", "error"])


def _to_arrow(values: list[Any], errs: list[str | None], arrow_t: Any) -> Any:
    """Arrow array of ``values``; a value that does not fit the type becomes null with an error."""
    import pyarrow as pa

    try:
        return pa.array(values, type=arrow_t)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        for i, v in enumerate(values):
            if v is None:
                continue
            try:
                pa.array([v], type=arrow_t)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                errs[i] = f"Avro record does not fit the Spark type {arrow_t}: {type(e).__name__}: {e}"[:500]
                values[i] = None
        return pa.array(values, type=arrow_t)


def _type_from_json(s: str) -> DataType:
    from pyspark.sql.types import _parse_datatype_json_string

    return _parse_datatype_json_string(s)


def _resolve_writer(reg: tuple[Any, ...], mode: dict[str, Any], topic: str | None) -> tuple[bytes, Any] | str:
    """(5-byte header, parsed writer schema) for a topic, or an error message (cached per process)."""
    subject = None

    def make() -> tuple[bytes, Any] | str:
        nonlocal subject
        client = client_for(*reg)
        try:
            subject = subject_name(mode["strategy"], topic, mode["is_key"], mode["record"])
            if mode["schema_id"] >= 0:
                sid, text = mode["schema_id"], client.get_schema(mode["schema_id"])
            elif mode["use_latest"]:
                latest = client.get_latest(subject)
                sid, text = latest.id, latest.schema
            elif mode["auto_register"]:
                sid, text = client.register(subject, mode["schema"]), mode["schema"]
            else:
                sid, text = client.lookup(subject, mode["schema"]).id, mode["schema"]
            return header_bytes(sid), _parsed(text)
        except (SchemaRegistryError, DataError) as e:
            return f"Error registering or retrieving the Avro schema for subject {subject}: {e}"
    return _cached(("e", reg, json.dumps(mode, sort_keys=True), topic), make)


def encode_batch(values: Any, topics: Any, reg: tuple[Any, ...], mode: dict[str, Any], dt_json: str) -> Any:
    """Encode one Arrow array into Confluent-framed Avro ``struct<value: binary, error>`` (the UDF body)."""
    from fastavro import schemaless_writer

    dt = _cached(("dt", dt_json), lambda: _type_from_json(dt_json))
    fix = _cached(("fix-e", dt_json), lambda: _fixer(dt, False) or False)
    rows = values.to_pylist()
    tps = topics.to_pylist() if topics is not None else [None] * len(rows)
    out: list[bytes | None] = [None] * len(rows)
    errs: list[str | None] = [None] * len(rows)
    for i, v in enumerate(rows):
        if v is None:
            continue
        w = _resolve_writer(reg, mode, tps[i])
        if isinstance(w, str):
            errs[i] = w
            continue
        buf = io.BytesIO()
        buf.write(w[0])
        try:
            schemaless_writer(buf, w[1], fix(v) if fix else v)
        except Exception as e:  # noqa: BLE001 - a value that does not fit the schema fails its record only
            errs[i] = f"Failed to serialize Avro data: {type(e).__name__}: {e}"[:500]
            continue
        out[i] = buf.getvalue()
    return pa.StructArray.from_arrays([pa.array(out, pa.binary()), pa.array(errs, pa.string())],
                                      names=["value", "error"])


def _decode_udf(reg: tuple[Any, ...], reader_text: str | None, dt: DataType) -> UserDefinedFunctionLike:
    dt_json = dt.json()

    def avro_decode(values: pa.Array) -> pa.Array:
        return decode_batch(values, reg, reader_text, dt_json)

    rt = StructType([StructField("value", dt), StructField("error", StringType())])
    return scalar_arrow_udf(avro_decode, rt)


def _encode_udf(reg: tuple[Any, ...], mode: dict[str, Any], dt: DataType,
                with_topic: bool) -> UserDefinedFunctionLike:
    dt_json = dt.json()
    rt = StructType([StructField("value", BinaryType()), StructField("error", StringType())])
    if with_topic:
        def avro_encode(values: pa.Array, topics: pa.Array) -> pa.Array:
            return encode_batch(values, topics, reg, mode, dt_json)
    else:
        # One name for both signatures: it is the UDF's name in Spark's plans.
        def avro_encode(values: pa.Array) -> pa.Array:  # type: ignore[misc]
            return encode_batch(values, None, reg, mode, dt_json)
    return scalar_arrow_udf(avro_encode, rt)


# -- the converter ----------------------------------------------------------------------------------------

class AvroConverter(Converter):
    """``io.confluent.connect.avro.AvroConverter`` (key and value; not a header converter)."""

    class_name = "io.confluent.connect.avro.AvroConverter"
    header_capable = False
    config_def = (
        ConfigDef()
        .define("schema.registry.url", Type.LIST, NO_DEFAULT, ValidList(NonEmptyString(), non_empty=True),
                Importance.HIGH,
                "Comma-separated list of Schema Registry URLs.")
        .define("auto.register.schemas", Type.BOOLEAN, True, None, Importance.MEDIUM,
                "Register the value's schema under its subject when serializing.")
        .define("use.latest.version", Type.BOOLEAN, False, None, Importance.MEDIUM,
                "Serialize with the subject's latest registered schema.")
        .define("use.schema.id", Type.INT, -1, Range.at_least(-1), Importance.LOW,
                "Serialize with this schema id; parse with this schema's type (-1: not set).")
        .define("key.subject.name.strategy", Type.STRING, DEFAULT_STRATEGY,
                CaseInsensitiveValidString(*STRATEGY_NAMES), Importance.MEDIUM,
                "Subject name strategy of keys: TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy.")
        .define("value.subject.name.strategy", Type.STRING, DEFAULT_STRATEGY,
                CaseInsensitiveValidString(*STRATEGY_NAMES), Importance.MEDIUM,
                "Subject name strategy of values.")
        .define("basic.auth.credentials.source", Type.STRING, "URL",
                CaseInsensitiveValidString("URL", "USER_INFO", "SASL_INHERIT"), Importance.MEDIUM,
                "Where basic auth credentials come from: URL (user info in the URL) or USER_INFO.")
        .define("basic.auth.user.info", Type.PASSWORD, None, None, Importance.MEDIUM,
                "user:password for basic.auth.credentials.source=USER_INFO.")
        .define("connect.meta.data", Type.BOOLEAN, True, None, Importance.LOW,
                "Add connect.* properties (name, version, parameters) to generated Avro schemas.")
        .define("enhanced.avro.schema.support", Type.BOOLEAN, False, None, Importance.LOW,
                "Accepted for compatibility; enums are read as strings.")
        .define("schemas.cache.config", Type.INT, 1000, Range.at_least(1), Importance.LOW,
                "Size of the per-process cache of schemas and ids.")
        .define("spark.schema", Type.STRING, None, None, Importance.MEDIUM, SPARK_SCHEMA_DOC)
        .define("avro.engine", Type.STRING, "auto", CaseInsensitiveValidString("auto", "native", "fastavro"),
                Importance.LOW, "auto: Spark's from_avro/to_avro where spark-avro is loaded and the schemas are known "
                "when the query is planned, else fastavro. native or fastavro: that engine.")
    )

    def validate(self) -> None:
        if self.config.basic_auth_credentials_source.upper() == "USER_INFO" and \
                not self.config.password("basic.auth.user.info"):
            key = self.key_name("basic.auth.user.info")
            raise ConfigError([ConfigProblem(key, f"Missing {key}: basic.auth.credentials.source=USER_INFO needs "
                                                  f"user:password")])
        self._reader_text: str | None = None

    # -- registry -----------------------------------------------------------------------------------
    @property
    def _reg(self) -> tuple[Any, ...]:
        info = None
        if self.config.basic_auth_credentials_source.upper() == "USER_INFO":
            info = self.config.password("basic.auth.user.info")
        return tuple(self.config.schema_registry_url), info, self.config.schemas_cache_config

    def _client(self) -> Any:
        return client_for(*self._reg)

    @property
    def _strategy(self) -> str:
        return strategy_of(self.config[f"{self.side}.subject.name.strategy"])

    def _single_topic(self) -> str | None:
        topics = (self.connector_config or {}).get("topics")
        if isinstance(topics, str):
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        return topics[0] if topics and len(topics) == 1 else None

    # -- parse ----------------------------------------------------------------------------------------
    def resolve_parse_type(self, df: Any = None, column: str | None = None,
                           explicit: DataType | None = None) -> tuple[DataType, dict[str, Any]]:
        self._reader_text = None
        return super().resolve_parse_type(df, column, explicit)

    def default_parse_type(self, df: Any, column: str | None) -> tuple[DataType, dict[str, Any]]:
        keys = [self.key_name("spark.schema"), self.key_name("use.schema.id")]
        sid = self.config.use_schema_id
        try:
            if sid >= 0:
                text = self._client().get_schema(sid)
            else:
                topic = self._single_topic()
                if topic is None or self._strategy != "topic":
                    why = ("the subject name strategy needs the record name" if self._strategy != "topic"
                           else "the connector has no single topic in 'topics'")
                    raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]} or {keys[1]}: AvroConverter cannot "
                                                              f"find the {self.side} schema in the registry ({why})")])
                text = self._client().get_latest(subject_name("topic", topic, self.is_key, None)).schema
        except SchemaRegistryError as e:
            raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]} or {keys[1]}: the {self.side} schema is not "
                                                      f"in the registry ({e})")]) from e
        try:
            dt, _, meta = avro_to_spark(json.loads(text))
        except DataError as e:
            raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]}: the registry schema has no Spark "
                                                      f"equivalent ({e})")]) from e
        self._reader_text = text
        return dt, meta

    def _native_loaded(self) -> bool:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        return spark is not None and native_avro_available(spark)

    def _engine(self) -> str:
        """``native`` or ``fastavro`` as configured; ``auto``: native where spark-avro is loaded."""
        choice = self.config.avro_engine
        if choice != "auto":
            return choice
        return "native" if self._native_loaded() else "fastavro"

    def _native_unavailable(self, why: str) -> ConfigError:
        key = self.key_name("avro.engine")
        return ConfigError([ConfigProblem(key, f"Invalid value native for configuration {key}: {why}; use "
                                               f"avro.engine=auto or fastavro")])

    def _plan_subject(self) -> str | None:
        """The subject this side's records are registered under, where it is known when the query is planned
        (TopicNameStrategy and the connector's single topic; the record name strategies name the subject after
        the record, which the bytes carry only as a schema id)."""
        topic = self._single_topic()
        return subject_name("topic", topic, self.is_key, None) if topic and self._strategy == "topic" else None

    def _native_writers(self) -> dict[int, str]:
        """The writer schemas by id that the native decode knows (from_avro needs each one as a literal):
        ``use.schema.id``'s, else every version of the subject. Empty when the subject is not known."""
        client = self._client()
        sid = self.config.use_schema_id
        if sid >= 0:
            return {sid: client.get_schema(sid)}
        subject = self._plan_subject()
        if subject is None:
            return {}
        try:
            versions = [client.get_version(subject, v) for v in client.get_versions(subject)]
        except SchemaRegistryError as e:
            log.debug("no versions of subject %s: %s", subject, e)
            return {}
        return {v.id: v.schema for v in versions}

    def _parse_engine(self) -> tuple[str, dict[int, str]]:
        """The decode engine and, for native, the writer schemas. ``auto`` decodes natively where spark-avro is
        loaded and the writer schemas are known when the query is planned, with fastavro otherwise."""
        engine = self._engine()
        if engine == "fastavro":
            return engine, {}
        writers = self._native_writers()
        if writers:
            return engine, writers
        if self.config.avro_engine == "native":
            raise self._native_unavailable("the native engine needs the writer schemas when the query is planned "
                                           "(set use.schema.id, or a single topic in 'topics' whose subject has "
                                           "versions)")
        return "fastavro", {}

    def _native_reader(self, data_type: DataType) -> str:
        """The reader schema of the native decode: the registry's (schema resolution as in fastavro), else one
        generated from the Spark type with every field optional (fields matched by name, missing ones null)."""
        if self._reader_text is not None:
            return self._reader_text
        return json.dumps(spark_to_avro(nullable_type(data_type), {}, False))

    def parse_checked(self, col: Column, data_type: DataType, *, topic: Column | None = None) -> Conversion:
        engine, writers = self._parse_engine()
        if engine == "native":
            return native_decode(col, data_type, self._native_reader(data_type), writers)
        r = _decode_udf(self._reg, self._reader_text, data_type)(col)
        return Conversion(r["value"], r["error"].isNotNull(), r["error"])

    def parse_frame(self, df: Any, column: str, data_type: DataType, error_column: str) -> Any:
        """DataFrame-level form of :meth:`parse_checked` used by the pipeline wiring: the decode runs in a
        projection of its own, then ``column`` is replaced and ``error_column`` (the per-row error message)
        added, so that the value and the error share one decode.

        fastavro: only ``column`` goes to the Python workers; the other columns stay in the JVM (a
        ``mapInArrow`` pass over whole rows measured ~0.3 s more JVM CPU per 400k records). The UDF is marked
        nondeterministic so that the optimizer keeps that projection as a barrier, like ``mapInArrow``: a later
        filter on the decoded value is never pushed below it, which would decode every record twice.
        native: the ``from_avro`` CASE is staged the same way, behind the same kind of barrier."""
        tmp = "_kc_avro"
        engine, writers = self._parse_engine()
        if engine == "native":
            parts = NativeDecode(F.col(column), data_type, self._native_reader(data_type), writers)
            # spark_partition_id() (cheap, nondeterministic) makes the projection a barrier as asNondeterministic
            # does for the UDF: a filter on the error or the value is not pushed below it to decode again.
            staged = df.withColumn(tmp, F.when(F.spark_partition_id() >= 0, parts.raw))
            value, failed, message = parts.result(F.col(tmp))
            return staged.withColumns({column: value, error_column: F.when(failed, message)}).drop(tmp)
        udf = _decode_udf(self._reg, self._reader_text, data_type).asNondeterministic()
        staged = df.withColumn(tmp, udf(F.col(column)))
        return staged.withColumns({column: F.col(f"{tmp}.value"), error_column: F.col(f"{tmp}.error")}).drop(tmp)

    # -- serialize --------------------------------------------------------------------------------------
    def _mode(self, data_type: DataType, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        try:
            schema = spark_to_avro(data_type, metadata, False, connect_meta=self.config.connect_meta_data)
        except DataError as e:
            raise ConfigError([ConfigProblem(self.prefix.rstrip(".") or "data_type", str(e))]) from e
        record = record_fullname(schema)
        if self._strategy != "topic" and record is None and self.config.use_schema_id < 0:
            key = self.key_name(f"{self.side}.subject.name.strategy")
            raise ConfigError([ConfigProblem(key, f"{key}: {self.config[f'{self.side}.subject.name.strategy']} "
                                                  f"needs a record schema; the {self.side} is "
                                                  f"{data_type.simpleString()}")])
        return {"schema": json.dumps(schema, separators=(",", ":")), "record": record, "strategy": self._strategy,
                "is_key": self.is_key, "schema_id": self.config.use_schema_id,
                "use_latest": self.config.use_latest_version, "auto_register": self.config.auto_register_schemas}

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        mode = self._mode(data_type, metadata)
        if topic is None and mode["strategy"] != "record" and mode["schema_id"] < 0:
            key = self.key_name(f"{self.side}.subject.name.strategy")
            raise ConfigError([ConfigProblem(key, f"{key}: the subject name needs the record's topic; the DataFrame "
                                                  f"has no 'topic' column")])
        if self._engine() == "native":
            native = self._native_serialize(col, data_type, mode, topic)
            if native is not None:
                return native
        udf = _encode_udf(self._reg, mode, data_type, topic is not None)
        r = udf(col, topic) if topic is not None else udf(col)
        return Conversion(F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(r["value"]),
                          col.isNotNull() & r["error"].isNotNull(), r["error"])

    # -- native engine (spark-avro) -----------------------------------------------------------------------
    def _native_serialize(self, col: Column, data_type: DataType, mode: dict[str, Any],
                          topic: Column | None) -> Conversion | None:
        """``to_avro`` behind the header of the schema id. With ``use.schema.id`` (or ``use.latest.version``
        and a single topic), that registry schema is fetched when the query is planned; otherwise the schema
        generated from the Spark type is written and a tiny Arrow UDF over the topic column registers (or
        looks up) it per topic, cached per process. None: the native engine cannot write this (then fastavro)."""
        client = self._client()
        planned: tuple[int, str, str | None] | None = None
        key = self.key_name("use.schema.id" if mode["schema_id"] >= 0 else "use.latest.version")
        try:
            if mode["schema_id"] >= 0:
                planned = mode["schema_id"], client.get_schema(mode["schema_id"]), None
            elif mode["use_latest"]:
                single = self._single_topic()
                if single is None and mode["strategy"] != "record":
                    if self.config.avro_engine == "native":
                        raise self._native_unavailable("use.latest.version needs the topic when the query is "
                                                       "planned (a single topic in 'topics')")
                    return None
                latest = client.get_latest(subject_name(mode["strategy"], single, self.is_key, mode["record"]))
                planned = latest.id, latest.schema, single
        except SchemaRegistryError as e:
            raise ConfigError([ConfigProblem(key, f"{key}: the schema to serialize with is not in the registry "
                                                  f"({e})")]) from e
        if planned is not None:
            sid, text, single = planned
            other_topic = None
            if single is not None and mode["strategy"] != "record" and topic is not None:
                other_topic = F.when(topic != F.lit(single), F.concat(
                    F.lit(f"Error retrieving the Avro schema: {key} was resolved for topic {single}, the record's "
                          f"topic is "), topic))
            return native_encode(col, data_type, text, F.lit(header_bytes(sid)), other_topic)
        reg = self._reg

        def header(topics: pa.Array) -> pa.Array:
            hs: list[bytes | None] = []
            es: list[str | None] = []
            for t in topics.to_pylist():
                if t is None and mode["strategy"] != "record":  # another topic's row (see wiring): nothing to look up
                    hs.append(None)
                    es.append(None)
                    continue
                w = _resolve_writer(reg, mode, t)
                hs.append(None if isinstance(w, str) else w[0])
                es.append(w if isinstance(w, str) else None)
            return pa.StructArray.from_arrays([pa.array(hs, pa.binary()), pa.array(es, pa.string())],
                                              names=["value", "error"])

        rt = StructType([StructField("value", BinaryType()), StructField("error", StringType())])
        h = scalar_arrow_udf(header, rt)(topic if topic is not None else F.lit(None).cast("string"))
        return native_encode(col, data_type, mode["schema"], h["value"], h["error"])


accept_registry(AvroConverter.config_def, AvroConverter.class_name)
