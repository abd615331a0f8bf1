"""``io.confluent.connect.json.JsonSchemaConverter``: JSON with a JSON Schema in a Schema Registry.

Wire format (Confluent's): byte 0 = magic ``0x00``, bytes 1-4 = schema id (big-endian int32), then the JSON text
of the value. A null value is null bytes both ways (tombstones stay null). The JSON text is read with Spark's
``from_json`` and written with ``to_json``, with the JsonConverter's grammar and logical types (Decimal as Base64
or a number by ``decimal.format``, Date as days, Time as ms of the day, Timestamp as epoch ms, bytes as Base64):
Column expressions only, no Python per record.

**Parse type** (plan time), in this order: the caller's argument, ``<prefix>spark.schema``, ``<prefix>use.schema.id``
(that registry schema), then the latest version of the subject of the connector's single topic (``topics``) under
TopicNameStrategy; the registry schema must be a JSON Schema (``schemaType: JSON``) and maps to Spark as
:mod:`.json_schema_data` describes. Otherwise a ConfigError names the keys to set. Every message is read with that
type, whatever schema id it carries (JSON names its fields; this is what lets a query read the versions registered
after it started): the id is not looked up per record.

**Serialize**: the JSON Schema is derived from the column's Spark type (Confluent's ``fromConnectSchema``) and, per
topic, registered under the subject name strategy (``auto.register.schemas``) or looked up; ``use.latest.version``
frames the records with the subject's latest schema id (checked with ``latest.compatibility.strict`` to accept what
is written), ``use.schema.id`` with that id. The topic's id is resolved once per process and topic (a small Arrow
UDF over the topic column, vectorised over the distinct topics of a batch), or when the query is planned with
``use.schema.id``.

Record errors: a missing or wrong magic byte ("Unknown magic byte!"), JSON that does not parse or does not fit the
type, a null in a required (non-nullable) field (as Confluent's converter, which makes every property optional only
when its schema admits null, or with ``use.optional.for.nonrequired`` when ``required`` does not list it), a map
with a null or repeated key, a subject the registry refuses (serializing).
An unreachable registry is a system error (:class:`~spark_connect_bridge.errors.RetriableError`, retried first).
Not done: validating each message against its JSON Schema (``json.fail.invalid.schema=true`` would be a Python
validator per record; it is a config error), Confluent's generalized sum types.

>>> conv = JsonSchemaConverter({"schema.registry.url": "http://127.0.0.1:8081"})        # doctest: +SKIP
>>> df.select(conv.serialize("value", df.schema["value"].dataType, topic=F.col("topic")))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa  # module-level so arrow_udf can resolve the 'pa.Array' hints
import pyarrow.compute as pc
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
from ..errors import ConfigError, ConfigProblem, DataError
from .base import SPARK_SCHEMA_DOC, Conversion, Converter, scalar_arrow_udf
from .json import JsonConverter
from .json_schema_compat import can_read
from .json_schema_data import json_schema_to_spark, spark_to_json_schema
from .registry_keys import accept_registry
from .schema_registry import (
    DEFAULT_STRATEGY,
    STRATEGY_NAMES,
    SchemaRegistryError,
    client_for,
    strategy_of,
    subject_name,
)

__all__ = ["JsonSchemaConverter", "header_batch"]

_MAGIC = b"\x00"
_MAX = 2147483647


def _header(schema_id: int) -> bytes:
    return _MAGIC + schema_id.to_bytes(4, "big", signed=True)


# -- the schema id of a topic, resolved on the executors, once per process -----------------------------------

_IDS: dict[tuple[Any, ...], bytes | str] = {}
_IDS_LOCK = threading.Lock()


def _resolve_header(reg: tuple[Any, ...], mode: Mapping[str, Any], topic: str | None) -> bytes | str:
    """The 5-byte header of ``topic``'s records, or an error message (cached per process)."""
    key = (reg, json.dumps(mode, sort_keys=True), topic)
    hit = _IDS.get(key)
    if hit is not None:
        return hit
    subject = None
    try:
        if topic is None and mode["strategy"] != "record":
            raise DataError("the record has no topic to name its subject")
        subject = subject_name(mode["strategy"], topic, mode["is_key"], mode["record"])
        client = client_for(*reg)
        if mode["use_latest"]:
            latest = client.get_latest(subject)
            if latest.schema_type != "JSON":
                raise DataError(f"the latest schema of subject {subject} is {latest.schema_type}, not JSON")
            if mode["strict"]:
                problems = can_read(latest.schema, mode["schema"])
                if problems:
                    raise DataError(f"the latest schema (id {latest.id}) does not accept the records' schema: "
                                    f"{'; '.join(problems)[:400]}")
            sid = latest.id
        elif mode["auto_register"]:
            sid = client.register(subject, mode["schema"], normalize=mode["normalize"], schema_type="JSON")
        else:
            sid = client.lookup(subject, mode["schema"], schema_type="JSON").id
        found: bytes | str = _header(sid)
    except (SchemaRegistryError, DataError) as e:
        found = f"Error registering or retrieving the JSON Schema for subject {subject or topic}: {e}"[:600]
    with _IDS_LOCK:
        _IDS[key] = found
    return found


def header_batch(topics: pa.Array, reg: tuple[Any, ...], mode: Mapping[str, Any]) -> pa.StructArray:
    """``struct<value: binary, error: string>`` per row of ``topics``: the header of each distinct topic, taken
    for every row (the UDF body; Python work per distinct topic, not per record)."""
    distinct = pc.unique(topics)
    resolved = [_resolve_header(reg, mode, t) for t in distinct.to_pylist()]
    headers = pa.array([r if isinstance(r, bytes) else None for r in resolved], pa.binary())
    errors = pa.array([r if isinstance(r, str) else None for r in resolved], pa.string())
    at = pc.index_in(topics, value_set=distinct)
    return pa.StructArray.from_arrays([headers.take(at), errors.take(at)], names=["value", "error"])


def _header_udf(reg: tuple[Any, ...], mode: Mapping[str, Any]) -> Callable[..., Column]:
    def json_schema_header(topics: pa.Array) -> pa.Array:
        return header_batch(topics, reg, mode)

    rt = StructType([StructField("value", BinaryType()), StructField("error", StringType())])
    return scalar_arrow_udf(json_schema_header, rt)


# -- maps with non-string keys: JSON arrays of {"key", "value"} objects ---------------------------------------

def _entries_map(dt: DataType) -> bool:
    return isinstance(dt, MapType) and not isinstance(dt.keyType, StringType)


def _has_entries(dt: DataType) -> bool:
    if _entries_map(dt):
        return True
    if isinstance(dt, StructType):
        return any(_has_entries(f.dataType) for f in dt.fields)
    if isinstance(dt, ArrayType):
        return _has_entries(dt.elementType)
    if isinstance(dt, MapType):
        return _has_entries(dt.keyType) or _has_entries(dt.valueType)
    return False


def _wire_type(dt: DataType) -> DataType:
    """The type JSON text is read as: maps with non-string keys as arrays of key/value structs."""
    if not _has_entries(dt):
        return dt
    if isinstance(dt, MapType):
        if _entries_map(dt):
            return ArrayType(StructType([StructField("key", _wire_type(dt.keyType)),
                                         StructField("value", _wire_type(dt.valueType), dt.valueContainsNull)]))
        return MapType(dt.keyType, _wire_type(dt.valueType), dt.valueContainsNull)
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _wire_type(f.dataType), f.nullable, f.metadata) for f in dt.fields])
    assert isinstance(dt, ArrayType)
    return ArrayType(_wire_type(dt.elementType), dt.containsNull)


def _to_entries(c: Column, dt: DataType) -> Column:
    if not _has_entries(dt):
        return c
    if isinstance(dt, MapType):
        if _entries_map(dt):
            return F.transform(F.map_entries(c), lambda e: F.struct(_to_entries(e["key"], dt.keyType).alias("key"),
                                                                    _to_entries(e["value"], dt.valueType)
                                                                    .alias("value")))
        return F.transform_values(c, lambda _k, v: _to_entries(v, dt.valueType))
    if isinstance(dt, StructType):
        parts = [_to_entries(c[f.name], f.dataType).alias(f.name) for f in dt.fields]
        return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    assert isinstance(dt, ArrayType)
    return F.transform(c, lambda x: _to_entries(x, dt.elementType))


def _bad_entries(c: Column, dt: DataType) -> Column:
    """Whether ``c`` (of wire type for ``dt``) holds a bad map somewhere; false where ``dt`` has no maps."""
    bad = _from_entries(c, dt)[1]
    return F.lit(False) if bad is None else F.coalesce(bad, F.lit(False))


def _from_entries(c: Column, dt: DataType) -> tuple[Column, Column | None]:
    """(typed value, bad) from the wire value; ``bad``: a map with a null or repeated key somewhere."""
    if not _has_entries(dt):
        return c, None
    if isinstance(dt, MapType) and _entries_map(dt):
        keys = F.transform(c, lambda e: _from_entries(e["key"], dt.keyType)[0])
        bad = F.exists(c, lambda e: e["key"].isNull()) | (F.size(F.array_distinct(keys)) != F.size(c))
        inner = _from_entries(F.lit(None).cast(_wire_type(dt.valueType)), dt.valueType)[1]
        if inner is not None:
            bad = bad | F.exists(c, lambda e: _bad_entries(e["value"], dt.valueType))
        values = F.transform(c, lambda e: _from_entries(e["value"], dt.valueType)[0])
        return F.when(c.isNull() | bad, F.lit(None)).otherwise(F.map_from_arrays(keys, values)), bad
    if isinstance(dt, MapType):
        value = F.transform_values(c, lambda _k, v: _from_entries(v, dt.valueType)[0])
        return value, F.exists(F.map_values(c), lambda v: _bad_entries(v, dt.valueType))
    if isinstance(dt, StructType):
        parts: list[Column] = []
        any_bad: Column | None = None
        for f in dt.fields:
            v, b = _from_entries(c[f.name], f.dataType)
            parts.append(v.alias(f.name))
            if b is not None:
                any_bad = b if any_bad is None else any_bad | F.coalesce(b, F.lit(False))
        return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*parts)), any_bad
    assert isinstance(dt, ArrayType)
    value = F.transform(c, lambda x: _from_entries(x, dt.elementType)[0])
    return value, F.exists(c, lambda x: _bad_entries(x, dt.elementType))


# -- required (non-nullable) fields -------------------------------------------------------------------------

def _nulls(c: Column, dt: DataType, path: str) -> list[tuple[str, Column]]:
    """(field path, the field is null where it is required) for every non-nullable field under ``c``."""
    out: list[tuple[str, Column]] = []
    if isinstance(dt, StructType):
        for f in dt.fields:
            where = f"{path}.{f.name}" if path else f.name
            if not f.nullable:
                out.append((where, c.isNotNull() & c[f.name].isNull()))
            out.extend(_nulls(c[f.name], f.dataType, where))
    elif isinstance(dt, ArrayType):
        inner = _nulls(F.lit(None).cast(dt.elementType), dt.elementType, "")
        if not dt.containsNull or inner:
            def bad(x: Column) -> Column:
                conds = [cond for _, cond in _nulls(x, dt.elementType, "")]
                anyone = F.lit(False) if dt.containsNull else x.isNull()
                for cond in conds:
                    anyone = anyone | F.coalesce(cond, F.lit(False))
                return anyone
            out.append((f"{path}[]", F.exists(c, bad)))
    elif isinstance(dt, MapType):
        out.extend((w.replace("[]", "{}", 1), cond) for w, cond in _nulls(F.map_values(c), ArrayType(
            dt.valueType, dt.valueContainsNull), path))
    return out


def _first_null(checks: list[tuple[str, Column]], text: str) -> tuple[Column | None, Column | None]:
    """(any required field is null, a message naming the first such field)."""
    if not checks:
        return None, None
    failed = None
    message = None
    for where, cond in checks:
        cond = F.coalesce(cond, F.lit(False))
        failed = cond if failed is None else failed | cond
        msg = F.lit(text.format(field=where or "the value"))
        message = F.when(cond, msg) if message is None else message.when(cond, msg)
    return failed, message


# -- the converter --------------------------------------------------------------------------------------------

class JsonSchemaConverter(Converter):
    """``io.confluent.connect.json.JsonSchemaConverter`` (key and value; not a header converter)."""

    class_name = "io.confluent.connect.json.JsonSchemaConverter"
    header_capable = False
    config_def = (
        ConfigDef()
        .define("schema.registry.url", Type.LIST, NO_DEFAULT, ValidList(NonEmptyString(), non_empty=True),
                Importance.HIGH, "Comma-separated list of Schema Registry URLs.")
        .define("auto.register.schemas", Type.BOOLEAN, True, None, Importance.MEDIUM,
                "Register the JSON Schema of the records under their subject when serializing.")
        .define("use.latest.version", Type.BOOLEAN, False, None, Importance.MEDIUM,
                "Frame the records with the subject's latest schema id instead of registering theirs.")
        .define("latest.compatibility.strict", Type.BOOLEAN, True, None, Importance.LOW,
                "With use.latest.version: check that the latest schema accepts the records' schema (a record "
                "error otherwise).")
        .define("use.schema.id", Type.INT, -1, Range.at_least(-1), Importance.LOW,
                "Frame the records with this schema id; parse with this schema's type (-1: not set).")
        .define("normalize.schemas", Type.BOOLEAN, False, None, Importance.LOW,
                "Ask the registry to normalize the schemas it registers.")
        .define("key.subject.name.strategy", Type.STRING, DEFAULT_STRATEGY,
                CaseInsensitiveValidString(*STRATEGY_NAMES), Importance.MEDIUM,
                "Subject name strategy of keys: TopicNameStrategy, RecordNameStrategy (the schema's title), "
                "TopicRecordNameStrategy.")
        .define("value.subject.name.strategy", Type.STRING, DEFAULT_STRATEGY,
                CaseInsensitiveValidString(*STRATEGY_NAMES), Importance.MEDIUM, "Subject name strategy of values.")
        .define("basic.auth.credentials.source", Type.STRING, "URL",
                CaseInsensitiveValidString("URL", "USER_INFO", "SASL_INHERIT"), Importance.MEDIUM,
                "Where basic auth credentials come from: URL (user info in the URL) or USER_INFO.")
        .define("basic.auth.user.info", Type.PASSWORD, None, None, Importance.MEDIUM,
                "user:password for basic.auth.credentials.source=USER_INFO.")
        .define("schemas.cache.config", Type.INT, 1000, Range.at_least(1), Importance.LOW,
                "Size of the per-process cache of schemas and ids.")
        .define("object.additional.properties", Type.BOOLEAN, True, None, Importance.MEDIUM,
                "Whether the generated object schemas allow additional properties (false: additionalProperties "
                "false, a closed content model, which can gain optional properties compatibly).")
        .define("use.optional.for.nonrequired", Type.BOOLEAN, False, None, Importance.MEDIUM,
                "Read the properties a schema does not list in \"required\" as optional (nullable) fields; "
                "otherwise only schemas that admit null are.")
        .define("decimal.format", Type.STRING, "BASE64", CaseInsensitiveValidString("BASE64", "NUMERIC"),
                Importance.LOW, "How Decimal values are serialized: BASE64 (Base64 of the unscaled bytes) or "
                "NUMERIC (a JSON number). Parsing accepts both.")
        .define("json.fail.invalid.schema", Type.BOOLEAN, False, None, Importance.LOW,
                "Validate each message against its JSON Schema: not supported (true is a config error); types "
                "and required fields are checked by the Spark type.")
        .define("generalized.sum.type.support", Type.BOOLEAN, False, None, Importance.LOW,
                "Confluent's sum types (oneOf of several types as a struct): not supported (true is a config "
                "error).")
        .define("ignore.default.for.nullables", Type.BOOLEAN, False, None, Importance.LOW,
                "Accepted for compatibility: Spark types carry no defaults, so a null stays null.")
        .define("spark.schema", Type.STRING, None, None, Importance.MEDIUM, SPARK_SCHEMA_DOC)
    )

    def validate(self) -> None:
        problems = []
        if self.config.basic_auth_credentials_source.upper() == "USER_INFO" and \
                not self.config.password("basic.auth.user.info"):
            key = self.key_name("basic.auth.user.info")
            problems.append(ConfigProblem(key, f"Missing {key}: basic.auth.credentials.source=USER_INFO needs "
                                               f"user:password"))
        unsupported = {"json.fail.invalid.schema": "validating every message against its JSON Schema would run a "
                                                   "Python validator per record; the Spark type checks types and "
                                                   "required fields",
                       "generalized.sum.type.support": "a oneOf of several types has no Spark type"}
        for name, why in unsupported.items():
            if self.config[name]:
                key = self.key_name(name)
                problems.append(ConfigProblem(key, f"Invalid value true for configuration {key}: {why}"))
        if problems:
            raise ConfigError(problems)
        # The JSON text after the 5-byte header is what JsonConverter reads and writes without its envelope.
        self._body = JsonConverter({"schemas.enable": False, "decimal.format": self.config.decimal_format})

    # -- registry -----------------------------------------------------------------------------------
    @property
    def _reg(self) -> tuple[Any, ...]:
        info = None
        if self.config.basic_auth_credentials_source.upper() == "USER_INFO":
            info = self.config.password("basic.auth.user.info")
        return tuple(self.config.schema_registry_url), info, self.config.schemas_cache_config

    @property
    def _strategy(self) -> str:
        return strategy_of(self.config[f"{self.side}.subject.name.strategy"])

    def _single_topic(self) -> str | None:
        topics = (self.connector_config or {}).get("topics")
        if isinstance(topics, str):
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        return topics[0] if topics and len(topics) == 1 else None

    # -- parse ----------------------------------------------------------------------------------------
    def default_parse_type(self, df: Any, column: str | None) -> tuple[DataType, dict[str, Any]]:
        keys = [self.key_name("spark.schema"), self.key_name("use.schema.id")]
        sid = self.config.use_schema_id
        client = client_for(*self._reg)
        try:
            if sid >= 0:
                text, stype, where = client.get_schema(sid), client.get_schema_type(sid), f"schema id {sid}"
            else:
                topic = self._single_topic()
                if topic is None or self._strategy != "topic":
                    why = ("the subject name strategy needs the record name" if self._strategy != "topic"
                           else "the connector has no single topic in 'topics'")
                    raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]} or {keys[1]}: JsonSchemaConverter "
                                                              f"cannot find the {self.side} schema in the registry "
                                                              f"({why})")])
                subject = subject_name("topic", topic, self.is_key, None)
                latest = client.get_latest(subject)
                text, stype, where = latest.schema, latest.schema_type, f"subject {subject}"
        except SchemaRegistryError as e:
            raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]} or {keys[1]}: the {self.side} schema is not "
                                                      f"in the registry ({e})")]) from e
        if stype != "JSON":
            raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]} or {keys[1]}: the registry's {where} is a "
                                                      f"{stype} schema; JsonSchemaConverter reads JSON Schema")])
        try:
            dt, _, meta = json_schema_to_spark(json.loads(text),
                                               optional_for_nonrequired=self.config.use_optional_for_nonrequired)
        except (DataError, ValueError) as e:
            raise ConfigError([ConfigProblem(keys[0], f"Set {keys[0]}: the registry's {where} has no Spark "
                                                      f"equivalent ({e})")]) from e
        return dt, meta

    def _decoded(self, col: Column, data_type: DataType) -> Column:
        """``struct<ok, v, f, m>``: the header is there (``ok``), the JSON text read as the wire type (``v``) and
        the text's failure and message (``f``, ``m``). The parts share one ``from_json`` (one projection)."""
        framed = (F.length(col) >= 5) & (F.substring(col, 1, 1) == F.lit(bytearray(_MAGIC)))
        inner = self._body.parse_checked(F.when(framed, F.substring(col, 6, _MAX)), _wire_type(data_type))
        return F.struct(F.coalesce(framed, F.lit(False)).alias("ok"), inner.value.alias("v"),
                        (F.lit(False) if inner.failed is None else F.coalesce(inner.failed, F.lit(False))).alias("f"),
                        (inner.message if inner.message is not None else F.lit(None).cast("string")).alias("m"))

    @staticmethod
    def _checked(col: Column, decoded: Column, data_type: DataType) -> Conversion:
        """The typed value, failure and message from :meth:`_decoded`'s struct (a column or a lambda variable, so
        that the value's expression is referenced, not copied, by every check)."""
        value, bad_map = _from_entries(decoded["v"], data_type)
        missing, missing_message = _first_null(
            _nulls(decoded["v"], _wire_type(data_type), ""),
            "Converting byte[] to Kafka Connect data failed: invalid null value for required field {field}")
        failed = ~decoded["ok"] | decoded["f"]
        for extra in (bad_map, missing):
            if extra is not None:
                failed = failed | F.coalesce(extra, F.lit(False))
        failed = col.isNotNull() & failed
        message = (F.when(~decoded["ok"], F.lit("Converting byte[] to Kafka Connect data failed due to "
                                                "serialization error: Unknown magic byte!"))
                   .when(decoded["f"], decoded["m"]))
        if bad_map is not None:
            message = message.when(bad_map, F.lit("Converting byte[] to Kafka Connect data failed: a map has a null "
                                                  "or repeated key"))
        if missing_message is not None:
            message = message.otherwise(missing_message)
        return Conversion(F.when(col.isNull() | failed, F.lit(None)).otherwise(value), failed, message)

    def parse_checked(self, col: Column, data_type: DataType, *, topic: Column | None = None) -> Conversion:
        """The Column form (``parse()``): the decoded struct is bound once as a lambda variable. The pipeline
        wiring uses :meth:`parse_frame`, which stages it in a projection instead (faster: compiled code)."""
        def bound(decoded: Column) -> Column:
            c = self._checked(col, decoded, data_type)
            failed = F.lit(False) if c.failed is None else c.failed
            message = F.lit(None).cast("string") if c.message is None else c.message
            return F.struct(c.value.alias("v"), failed.alias("f"), message.alias("m"))

        out = F.transform(F.array(self._decoded(col, data_type)), bound)[0]
        return Conversion(out["v"], out["f"], out["m"])

    def parse_frame(self, df: Any, column: str, data_type: DataType, error_column: str) -> Any:
        """DataFrame-level parse used by the pipeline wiring: the decode in a projection of its own (behind a
        nondeterministic barrier, so a later filter is not pushed below it to decode again), then ``column``
        replaced and ``error_column`` (the per-row error message) added."""
        tmp = "_kc_json_schema"
        staged = df.withColumn(tmp, F.when(F.spark_partition_id() >= 0, self._decoded(F.col(column), data_type)))
        c = self._checked(F.col(column), F.col(tmp), data_type)
        error = F.lit(None).cast("string") if c.failed is None else F.when(c.failed, c.message)
        return staged.withColumns({column: c.value, error_column: error}).drop(tmp)

    # -- serialize --------------------------------------------------------------------------------------
    def _mode(self, data_type: DataType, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        try:
            schema = spark_to_json_schema(data_type, metadata, False,
                                          additional_properties=self.config.object_additional_properties)
        except DataError as e:
            raise ConfigError([ConfigProblem(self.prefix.rstrip(".") or "data_type", str(e))]) from e
        record = schema.get("title")
        if self._strategy != "topic" and record is None and self.config.use_schema_id < 0:
            key = self.key_name(f"{self.side}.subject.name.strategy")
            raise ConfigError([ConfigProblem(key, f"{key}: {self.config[f'{self.side}.subject.name.strategy']} "
                                                  f"needs a named schema (a title: the column's connect.name); the "
                                                  f"{self.side} is {data_type.simpleString()}")])
        return {"schema": json.dumps(schema, separators=(",", ":")), "record": record, "strategy": self._strategy,
                "is_key": self.is_key, "use_latest": self.config.use_latest_version,
                "strict": self.config.latest_compatibility_strict,
                "auto_register": self.config.auto_register_schemas, "normalize": self.config.normalize_schemas}

    def serialize_checked(self, col: Column, data_type: DataType, *, metadata: Mapping[str, Any] | None = None,
                          topic: Column | None = None) -> Conversion:
        mode = self._mode(data_type, metadata)
        sid = self.config.use_schema_id
        if sid >= 0:
            header, header_error = F.lit(bytearray(_header(sid))), None
        else:
            if topic is None and mode["strategy"] != "record":
                key = self.key_name(f"{self.side}.subject.name.strategy")
                raise ConfigError([ConfigProblem(key, f"{key}: the subject name needs the record's topic; the "
                                                      f"DataFrame has no 'topic' column")])
            resolved = _header_udf(self._reg, mode)(topic if topic is not None else F.lit(None).cast("string"))
            header, header_error = resolved["value"], resolved["error"]
        body = self._body.serialize_checked(_to_entries(col, data_type), _wire_type(data_type)).value
        framed = F.concat(header, body)
        if header_error is None:
            return Conversion(F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(framed))
        failed = col.isNotNull() & header_error.isNotNull()
        return Conversion(F.when(col.isNull() | failed, F.lit(None).cast("binary")).otherwise(framed), failed,
                          header_error)


accept_registry(JsonSchemaConverter.config_def, JsonSchemaConverter.class_name)
