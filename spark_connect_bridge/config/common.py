"""Kafka Connect's common connector keys (``ConnectorConfig``, ``SinkConnectorConfig``,
``SourceConnectorConfig``), declared once. Every connector's own ConfigDef is merged with these.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from ..errors import ConfigProblem
from .definition import Config, ConfigDef, Importance, Type
from .validators import CaseInsensitiveValidString, Lambda, NonEmptyString, Range, Regex

__all__ = ["COMMON", "SOURCE", "SINK", "PLUGIN_PREFIXES", "KAFKA_ONLY_PREFIXES", "SPARK_OPTION_KEYS",
           "CONFLUENT_LICENSE_KEYS", "ALLOWED_PATHS_OPTION", "FORBIDDEN_PATHS_OPTION", "warn_kafka_only"]

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"[\x00-\x1f\x7f]")


def _valid_name(v: str) -> str | None:
    if not v.strip():
        return "String may not be empty"
    if _NAME_RE.search(v):
        return "String may not contain control characters"
    return None


COMMON = (
    ConfigDef()
    .define("name", Type.STRING, importance=Importance.HIGH, validator=Lambda(_valid_name, "non-empty string"),
            doc="Globally unique name to use for this connector.", group="Common")
    .define("connector.class", Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
            doc="Name or alias of the connector class: a Kafka/Confluent/Debezium Java class name we implement "
                "(e.g. org.apache.kafka.connect.file.FileStreamSourceConnector), its alias (FileStreamSource), "
                "a dotted Python path to a class, or a plugin registered under the "
                "'spark_connect_bridge.connectors' entry-point group.", group="Common")
    .define("tasks.max", Type.INT, 1, Range.at_least(1), Importance.HIGH,
            "Maximum number of tasks: the number of Spark input partitions a micro-batch is split into.",
            group="Common")
    .define("tasks.max.enforce", Type.BOOLEAN, True, importance=Importance.LOW,
            doc="(Deprecated in Kafka) Fail if the connector generates more than tasks.max tasks.",
            group="Common")
    .define("key.converter", Type.CLASS, None, importance=Importance.LOW,
            doc="Converter for record keys (serialize on the source side, parse on the sink side).",
            group="Common")
    .define("value.converter", Type.CLASS, None, importance=Importance.LOW,
            doc="Converter for record values.", group="Common")
    .define("header.converter", Type.CLASS, None, importance=Importance.LOW,
            doc="Converter for header values.", group="Common")
    .define("transforms", Type.LIST, [], importance=Importance.LOW,
            doc="Aliases of the single message transforms to apply, in order.", group="Transforms")
    .define("predicates", Type.LIST, [], importance=Importance.LOW,
            doc="Aliases of the predicates used by transforms.", group="Predicates")
    .define("config.action.reload", Type.STRING, "restart", CaseInsensitiveValidString("none", "restart"),
            Importance.LOW, "What to do when a config provider's value changes.", group="Common")
    .define("errors.retry.timeout", Type.LONG, 0, Range.at_least(-1), Importance.MEDIUM,
            "Total time in ms a failed operation is retried; -1 retries forever, 0 disables retries.",
            group="Error Handling")
    .define("errors.retry.delay.max.ms", Type.LONG, 60000, Range.at_least(1), Importance.MEDIUM,
            "Maximum delay in ms between consecutive retries.", group="Error Handling")
    .define("errors.tolerance", Type.STRING, "none", CaseInsensitiveValidString("none", "all"), Importance.MEDIUM,
            "'none' fails on the first record error; 'all' skips failed records (to the dead-letter sink "
            "when one is configured).", group="Error Handling")
    .define("errors.log.enable", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Log each record error with its stage and executing class.", group="Error Handling")
    .define("errors.log.include.messages", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Also log the failed record's coordinates and content (never secrets).",
            group="Error Handling")
    .define("errors.deadletterqueue.topic.name", Type.STRING, "", importance=Importance.MEDIUM,
            doc="Dead-letter topic that receives the records that fail (as they entered the pipeline) when "
                "errors.tolerance=all; disabled when blank. A Kafka topic where Kafka is the bus (the worker's "
                "bootstrap.servers), else a table of the topic store. Unlike Kafka Connect, source connectors "
                "have one too.", group="Error Handling")
    .define("errors.deadletterqueue.topics.dir", Type.STRING, None, importance=Importance.MEDIUM,
            doc="Directory of the topic store that holds the dead-letter topic (the worker sets it to its "
                "topics.dir).", group="Error Handling")
    .define("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3, importance=Importance.LOW,
            doc="Replication factor of the dead-letter topic when it is created on Kafka; a table of the topic "
                "store has none.", group="Error Handling")
    .define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Add __connect.errors.* context headers to dead-lettered records.", group="Error Handling")
    .accept("org.apache.kafka.connect.runtime.ConnectorConfig", group="Common", no_effect={
        k: "KIP-891 plugin versions choose among installed versions of a Java plugin; here each plugin has one "
           "version, this package's" for k in ("connector.plugin.version", "key.converter.plugin.version",
                                                "value.converter.plugin.version", "header.converter.plugin.version")})
    .define("max.records.per.trigger", Type.LONG, None, Range.at_least(1), Importance.MEDIUM,
            "Spark: upper bound on the records one micro-batch reads (admission control). Unset: the "
            "connector's own default; a sink reading Kafka or the worker's topic store: 50000 (a micro-batch typed "
            "again from its messages or read with errors.tolerance=all is cached while it is converted, "
            "dead-lettered and written: a backlog read in one batch could outgrow the driver's memory). A larger "
            "bound spends less CPU per record on Spark's per-batch planning (a JDBC sink of Debezium envelopes: "
            "~8% less at 150000 than at 50000) where the driver has the memory.", group="Spark")
)

#: The micro-batch bound of a sink that reads Kafka or the topic store when its config sets none (see above):
#: 200,000 Debezium envelopes with schemas (~2 KB each) in one batch ran a 1 GB driver out of heap.
SINK_MAX_RECORDS_PER_TRIGGER = 50_000


def _topics_xor_regex(cfg: Config) -> Iterable[ConfigProblem]:
    topics, regex = cfg.get("topics") or [], cfg.get("topics.regex") or ""
    if topics and regex:
        yield ConfigProblem("topics", "topics and topics.regex are mutually exclusive.")
    dlq = cfg.get("errors.deadletterqueue.topic.name") or ""
    if dlq and dlq in topics:
        yield ConfigProblem("errors.deadletterqueue.topic.name",
                            f"The DLQ topic '{dlq}' may not be included in the list of topics "
                            f"('topics={','.join(topics)}') consumed by the connector")


SINK = (
    ConfigDef()
    .define("topics", Type.LIST, [], importance=Importance.HIGH,
            doc="Topics to consume (in the topic store; for a DataFrame input, the topics to keep).",
            group="Common")
    .define("topics.regex", Type.STRING, "", Regex(), Importance.HIGH,
            "Regular expression of the topics to consume; mutually exclusive with topics.", group="Common")
    .check(_topics_xor_regex)
)

SOURCE = (
    ConfigDef()
    .define("exactly.once.support", Type.STRING, "requested", CaseInsensitiveValidString("requested", "required"),
            Importance.LOW, "Kafka's KIP-618 key; here every source is replayable from its Spark checkpoint, so "
                            "'required' is satisfied by sources whose reads are deterministic.", group="Common")
    .define("transaction.boundary", Type.STRING, "poll", CaseInsensitiveValidString("poll", "interval", "connector"),
            Importance.LOW, "Kafka's KIP-618 key; a micro-batch is the transaction boundary here.", group="Common")
    .define("transaction.boundary.interval.ms", Type.LONG, None, Range.at_least(0), Importance.LOW,
            "Kafka's KIP-618 key; see trigger intervals instead.", group="Common")
    .define("offsets.storage.topic", Type.STRING, None, importance=Importance.LOW,
            doc="Kafka only; offsets live in the Spark checkpoint.", group="Common")
    .accept("org.apache.kafka.connect.runtime.SourceConnectorConfig", group="Common", no_effect={
        "topic.creation.groups": "topics are created by the bus (a table of the topic store, or a Kafka topic "
                                 "with the broker's defaults); there are no topic creation groups"})
)

# Key prefixes owned by other plugins (validated by them, not by the connector).
PLUGIN_PREFIXES = ("transforms.", "predicates.", "key.converter.", "value.converter.", "header.converter.",
                   # A sink connector config that receives dead letters instead of the topic store.
                   "errors.deadletterqueue.sink.")
# Key prefixes that configure Kafka clients; they have no meaning without Kafka and are warned about.
KAFKA_ONLY_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.", "topic.creation.",
                       # Kafka Connect passes these on to the clients it makes (a worker's producer/consumer keys
                       # written into a connector config; Debezium's Kafka-based schema history and signals)
                       "producer.", "consumer.", "admin.", "schema.history.internal.kafka.",
                       "schema.history.internal.producer.", "schema.history.internal.consumer.", "signal.kafka.",
                       "signal.consumer.")
# Options Spark adds by itself to a data source's options.
SPARK_OPTION_KEYS = ("path", "paths", "checkpointlocation", "queryname", "__dsv2_source_id",
                     # Set by our own foreachBatch router so that a batch write commits once per micro-batch.
                     "kconnect.app.id", "kconnect.batch.id", "kconnect.rejects.dir",
                     # Set by the Kafka bus: the records are only those of the sink's topics already.
                     "kconnect.topics.subscribed",
                     # Set by a worker for connectors that learn locations at run time (path_policy_at_run_time)
                     "kconnect.allowed.paths", "kconnect.forbidden.paths")
#: The worker's connector.allowed.paths (a JSON list), which it hands the connectors that find the files they read
#: and write at run time (an Iceberg catalog's table locations); always the worker's value, never the config's.
ALLOWED_PATHS_OPTION = "kconnect.allowed.paths"

#: Confluent's license keys, declared by its commercial connectors (HTTP, MQTT, RabbitMQ, ...): accepted with no
#: effect (``ConfigDef.accept(..., no_effect=CONFLUENT_LICENSE_KEYS)``); nothing here reads or contacts them.
CONFLUENT_LICENSE_KEYS = {
    "confluent.license": "no license is needed or checked here",
    "confluent.topic": "no license topic here", "confluent.topic.bootstrap.servers": "no license topic here",
    "confluent.topic.replication.factor": "no license topic here",
}
#: The worker's state directory (a JSON list), out of those connectors' reach likewise.
FORBIDDEN_PATHS_OPTION = "kconnect.forbidden.paths"


def warn_kafka_only(props: Mapping[str, object], context: str) -> list[str]:
    """Log (never silently drop) keys that only configure Kafka clients; return them."""
    keys = [k for k in props if k.lower().startswith(KAFKA_ONLY_PREFIXES)]
    for k in keys:
        log.warning("%s: configuration %s has no effect here: it configures a Kafka client, and there is no "
                    "Kafka between Spark and this connector", context, k)
    return keys
