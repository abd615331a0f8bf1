"""Debezium's outbox EventRouter: turn the change events of an outbox table into the events its rows hold."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampNTZType, TimestampType

from ..config import Config, ConfigDef, Importance, Type, ValidString
from ..config.validators import Lambda
from ..converters.connect_schema import META_NAME
from ..errors import ConfigProblem
from .base import Step, Transformation, variant_capable
from .extract_new_record_state import _side_topics, is_envelope
from .insert_header import append_headers
from .regex import anchored, java_regex_problem
from .values import header_bytes

__all__ = ["EventRouter"]

_ORIGINAL = "io.debezium.transforms.outbox.EventRouter"
PLACEMENTS = ("header", "envelope", "partition")


@dataclass(frozen=True)
class _Placement:
    """One ``table.fields.additional.placement`` item: ``column:placement[:alias]``."""

    field: str
    placement: str
    alias: str

    @classmethod
    def parse(cls, item: str) -> _Placement:
        parts = [p.strip() for p in item.split(":")]
        if len(parts) not in (2, 3) or not all(parts) or parts[1] not in PLACEMENTS:
            raise ValueError(item)
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else parts[0])


def _placement_problem(items: list[str] | None) -> str | None:
    for item in items or []:
        try:
            _Placement.parse(item)
        except ValueError:
            return f"invalid item {item!r} (expected column:header|envelope|partition[:alias])"
    return None


#: Debezium's logical types of epoch time in an int64 (EventRouterDelegate.getEventTimestampMs): units per millisecond
_EPOCH_UNITS = {"io.debezium.time.Timestamp": 1, "io.debezium.time.MicroTimestamp": 1_000,
                "io.debezium.time.NanoTimestamp": 1_000_000}


def _event_timestamp(column: Column, field: StructField) -> tuple[Column | None, str | None]:
    """The record timestamp from the ``table.field.event.timestamp`` column, as Debezium reads it: (the instant,
    null where the column is, or None; the problem that fails each record, where the column is not null unless
    it is no int64 at all)."""
    name = (field.metadata or {}).get(META_NAME)
    if isinstance(field.dataType, (TimestampType, TimestampNTZType)):
        # Debezium's getInt64 fails on a Connect Timestamp (a java.util.Date); here it is the instant it holds
        return column.cast("timestamp"), None
    if not isinstance(field.dataType, LongType):
        return None, f"column {field.name} is not an int64 ({field.dataType.simpleString()})"
    if name is None:
        return None, f"unsupported field type INT64 (without logical schema name) of column {field.name}"
    if name not in _EPOCH_UNITS:
        return None, f"unsupported field type {name} of column {field.name}"
    # Java's long division truncates toward zero: a decimal's cast to long does too
    millis = (column.cast("decimal(20,0)") / F.lit(_EPOCH_UNITS[name])).cast("long")
    return F.timestamp_millis(millis), None


@variant_capable
class EventRouter(Transformation):
    """The outbox event router: from each create (or snapshot read) event of an outbox table, one record whose
    topic is ``route.topic.replacement`` applied to the row's ``route.by.field`` column (``route.topic.regex``
    must match that value), whose key is the ``table.field.event.key`` column, whose value is the
    ``table.field.event.payload`` column (a struct ``{payload, <envelope fields>}`` when
    ``table.fields.additional.placement`` puts columns in the envelope), with header ``id`` (the event id
    column), the placed headers, no Kafka partition (the producer partitions by key) unless a column is placed
    as the partition, and the timestamp of ``table.field.event.timestamp`` (an epoch in Debezium's Timestamp,
    MicroTimestamp or NanoTimestamp; else, or where it is null, the event's ``ts_ms``). As in Debezium, a record
    fails where the table lacks one of these columns. Deletes and tombstones are dropped; updates follow
    ``table.op.invalid.behavior`` (``warn``/``error`` drop them, ``fatal`` fails the record). A null or blank
    payload with ``route.tombstone.on.empty.payload`` makes a tombstone. Records whose value is no envelope
    (schemaless ones too) pass through untouched."""

    kafka_class = _ORIGINAL

    def reads_columns(self) -> tuple[str, ...]:
        return ("value",)

    config_def = (
        ConfigDef()
        .define("table.field.event.id", Type.STRING, "id", importance=Importance.LOW,
                doc="The column which contains the event ID within the outbox table (header id).")
        .define("table.field.event.key", Type.STRING, "aggregateid", importance=Importance.LOW,
                doc="The column which contains the event key within the outbox table.")
        .define("table.field.event.type", Type.STRING, "type", importance=Importance.LOW,
                doc="The column which contains the event type within the outbox table (place it with "
                    "table.fields.additional.placement).")
        .define("table.field.event.payload", Type.STRING, "payload", importance=Importance.LOW,
                doc="The column which contains the event payload within the outbox table.")
        .define("table.field.event.timestamp", Type.STRING, None, importance=Importance.MEDIUM,
                doc="A column whose value (epoch milliseconds or a timestamp) becomes the record timestamp; "
                    "default: the change event's ts_ms.")
        .define("table.fields.additional.placement", Type.LIST, None,
                validator=Lambda(_placement_problem, "column:header|envelope|partition[:alias] items"),
                importance=Importance.HIGH,
                doc="Extra columns as a list of column:placement[:alias]; placement header, envelope (a field "
                    "beside payload in the value) or partition.")
        .define("table.field.additional.missing", Type.STRING, "error", ValidString("ignore", "error"),
                Importance.MEDIUM, "A placed column the table does not have: error fails every record, ignore "
                                   "leaves it out.")
        .define("table.op.invalid.behavior", Type.STRING, "warn", ValidString("warn", "error", "fatal"),
                Importance.MEDIUM, "Update events (only creates are expected): warn and error drop them "
                                   "(Debezium logs at that level), fatal fails the record.")
        .define("route.by.field", Type.STRING, "aggregatetype", importance=Importance.LOW,
                doc="The column whose value is routed with route.topic.regex/route.topic.replacement.")
        .define("route.topic.regex", Type.STRING, "(?<routedByValue>.*)",
                validator=Lambda(java_regex_problem, "valid regex"), importance=Importance.LOW,
                doc="The regex matched against the route.by.field value (Java syntax).")
        .define("route.topic.replacement", Type.STRING, "outbox.event.${routedByValue}", importance=Importance.LOW,
                doc="The topic name; ${routedByValue} (or a group of route.topic.regex) is the routed value.")
        .define("route.tombstone.on.empty.payload", Type.BOOLEAN, False, importance=Importance.LOW,
                doc="A null payload makes a tombstone (null value).")
        .accept(_ORIGINAL, group="Accepted (Debezium)", no_effect={
            "tracing.span.context.field": "no OpenTelemetry tracing here: nothing reads the span context",
            "tracing.operation.name": "no OpenTelemetry tracing here",
            "tracing.with.context.field.only": "no OpenTelemetry tracing here",
        }, not_supported={
            "table.field.event.schema.version": "a Spark column has one schema and no per-record schema "
                                                "version: the value's schema carries no version",
            "table.json.payload.null.behavior": "goes with table.expand.json.payload, which is refused",
        }, refused={
            "table.expand.json.payload": "expanding a JSON string needs the payload's schema before reading the "
                                         "records; parse it downstream with from_json and a schema instead",
        })
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        if "routedByValue" in config.route_topic_replacement and "routedByValue" not in config.route_topic_regex:
            return [ConfigProblem("route.topic.replacement", (
                f"Invalid value {config.route_topic_replacement} for configuration route.topic.replacement: "
                f"it names the group routedByValue, which route.topic.regex does not define"))]
        return []

    def configure(self, config: Config) -> None:
        self.event_id = config.table_field_event_id
        self.event_key = config.table_field_event_key
        self.payload = config.table_field_event_payload
        self.timestamp = config.table_field_event_timestamp
        self.placements = [_Placement.parse(i) for i in config.table_fields_additional_placement or []]
        self.missing_error = config.table_field_additional_missing == "error"
        self.fatal_updates = config.table_op_invalid_behavior == "fatal"
        self.route = config.route_by_field
        self.pattern = anchored(config.route_topic_regex)
        self.replacement = config.route_topic_replacement
        self.tombstone_on_empty = config.route_tombstone_on_empty_payload

    def plan(self, df: DataFrame) -> Step:
        sf = df.schema["value"]
        env = sf.dataType
        if not isinstance(env, StructType) or not is_envelope(env, dict(sf.metadata)):
            # no change event (a schemaless VARIANT, a heartbeat): Debezium drops its tombstones, passes the rest
            return Step(drop=F.col("value").isNull())
        row_t = env["after"].dataType
        assert isinstance(row_t, StructType)  # is_envelope checked it
        cols = set(row_t.fieldNames())
        value, after = F.col("value"), F.col("value").getField("after")
        tomb = value.isNull()
        side = _side_topics(sf)
        other = F.col("topic").isin(side) if side and "topic" in df.columns else F.lit(False)
        op = F.coalesce(value.getField("op"), F.lit(""))
        event = ~tomb & ~other & op.isin("c", "r")
        step = Step()

        def field(name: str) -> Column:
            return after.getField(name)

        # (Debezium reads the key column with Struct.get, which fails where the table has none)
        for key, name in (("table.field.event.id", self.event_id), ("table.field.event.payload", self.payload),
                          ("route.by.field", self.route), ("table.field.event.key", self.event_key)):
            if name not in cols:
                step.fail(event, f"{key}: the outbox table has no column {name}")
        if self.timestamp and self.timestamp not in cols:
            step.fail(event, f"table.field.event.timestamp: the outbox table has no column {self.timestamp}")
        placements = []
        for p in self.placements:
            if p.field in cols:
                placements.append(p)
            elif self.missing_error:
                step.fail(event, f"table.fields.additional.placement: the outbox table has no column {p.field}")
        missing = step.failed is not None
        # Debezium drops deletes and handles updates before it reads a column
        update = ~tomb & ~other & (op == F.lit("u"))
        if self.fatal_updates:
            step.fail(update, "table.op.invalid.behavior=fatal: an update event on the outbox table (only inserts "
                              "are expected)")
        kept = event | update if self.fatal_updates else event
        if missing:
            step.drop = ~kept
            return step

        routed = field(self.route).cast("string")
        step.fail(event & routed.isNull(), f"route.by.field: the value of column {self.route} is null")
        topic = F.when(routed.rlike(self.pattern), F.regexp_replace(routed, F.lit(self.pattern),
                                                                    F.lit(self.replacement))).otherwise(routed)
        step.updates["topic"] = topic
        step.updates["key"] = field(self.event_key)

        payload = field(self.payload)
        envelope = [p for p in placements if p.placement == "envelope"]
        if envelope:
            out = F.struct(payload.alias("payload"), *[field(p.field).alias(p.alias) for p in envelope])
        else:
            out = payload
        if self.tombstone_on_empty:
            # Debezium: a null payload, or one whose text is blank (Java's String.trim drops every char <= ' ')
            empty = payload.isNull()
            if isinstance(row_t[self.payload].dataType, StringType):
                empty = empty | payload.rlike("^[\\x00-\\x20]*$")
            out = F.when(empty, F.lit(None)).otherwise(out)
        step.updates["value"] = out
        step.metadata["value"] = {} if envelope else dict(row_t[self.payload].metadata)
        if envelope:  # Debezium's SchemaBuilder.struct(): a required struct
            step.optional["value"] = False

        pairs = [("id", header_bytes(field(self.event_id), row_t[self.event_id].dataType,
                                     dict(row_t[self.event_id].metadata)))]
        for p in placements:
            if p.placement == "header":
                f = row_t[p.field]
                pairs.append((p.alias, header_bytes(field(p.field), f.dataType, dict(f.metadata))))
            elif p.placement == "partition":
                step.updates["partition"] = field(p.field).cast("int")
        # Debezium makes the record without a Kafka partition (the producer partitions by key), but where a
        # column is placed as the partition
        step.updates.setdefault("partition", F.lit(None).cast("int"))
        step.updates["headers"] = append_headers(pairs)

        # Debezium's record timestamp: the event's ts_ms (null without it: the producer stamps the record)
        ts_ms = F.timestamp_millis(value.getField("ts_ms")) if "ts_ms" in env.fieldNames() else \
            F.lit(None).cast("timestamp")
        if self.timestamp:
            ts_f = row_t[self.timestamp]
            ts = field(self.timestamp)
            instant, problem = _event_timestamp(ts, ts_f)
            if problem:
                every = not isinstance(ts_f.dataType, LongType)  # Struct.getInt64 checks the schema first
                step.fail(event if every else event & ts.isNotNull(), f"table.field.event.timestamp: {problem}")
            step.updates["timestamp"] = ts_ms if instant is None else F.coalesce(instant, ts_ms)
        else:
            step.updates["timestamp"] = ts_ms

        step.drop = ~kept
        return step
