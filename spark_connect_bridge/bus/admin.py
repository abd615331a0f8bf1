"""Kafka admin work of the bus, through confluent-kafka's AdminClient: topic creation (KIP-158's
``topic.creation.*`` groups, and the dead-letter topic as Kafka Connect creates it) and the offsets of a
sink's consumer group ``connect-<name>``.

Offsets here are Spark's Kafka source offsets, ``{topic: {partition: next offset}}`` (the JSON Spark keeps in
the query's offset log, partitions as strings).

>>> creation = TopicCreation.from_config({"topic.creation.default.partitions": "3",
...                                       "topic.creation.default.replication.factor": "1"})
>>> creation.settings_for("orders")
(3, 1, {})
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, ConfigProblem, ConnectError

__all__ = ["TopicCreation", "admin_client", "ensure_topics", "kafka_topics", "commit_group_offsets", "group_offsets",
           "delete_group"]

log = logging.getLogger(__name__)

_TIMEOUT = 30.0


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError as e:  # an optional client library
        raise ConnectError("Kafka as the bus needs confluent-kafka for topic creation and consumer-group offsets: "
                           "pip install 'spark_connect_bridge[kafka]'") from e
    return confluent_kafka


def admin_client(client: Mapping[str, str]) -> Any:
    """An AdminClient for ``client`` (``bootstrap.servers`` and librdkafka settings)."""
    from confluent_kafka.admin import AdminClient

    _confluent()
    return AdminClient(dict(client))


@dataclass(frozen=True)
class _Group:
    name: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    partitions: int = -1
    replication_factor: int = -1
    configs: tuple[tuple[str, str], ...] = ()

    def matches(self, topic: str) -> bool:
        if any(re.fullmatch(p, topic) for p in self.exclude):
            return False
        return any(re.fullmatch(p, topic) for p in self.include)


@dataclass(frozen=True)
class TopicCreation:
    """KIP-158's topic creation rules of a source connector: the ``default`` group and the groups named by
    ``topic.creation.groups``, matched in order by ``include``/``exclude`` regexes (first match wins).
    ``-1`` partitions or replication factor means the broker's default."""

    default: _Group
    groups: tuple[_Group, ...] = field(default_factory=tuple)

    @classmethod
    def from_config(cls, props: Mapping[str, Any]) -> TopicCreation | None:
        """The rules of a connector config; None when it declares none (Kafka Connect creates no topics then).
        Raises one ConfigError with every problem."""
        keys = {k: str(v) for k, v in props.items() if k.lower().startswith("topic.creation.")}
        if not keys:
            return None
        problems: list[ConfigProblem] = []
        names = [g.strip() for g in keys.get("topic.creation.groups", "").split(",") if g.strip()]
        if "default" in names:
            problems.append(ConfigProblem("topic.creation.groups", "Invalid value default for configuration "
                                                                   "topic.creation.groups: 'default' is implicit"))

        def number(key: str, required: bool) -> int:
            raw = keys.get(key)
            if raw is None:
                if required:
                    problems.append(ConfigProblem(key, f'Missing required configuration "{key}" which has no '
                                                       f'default value.'))
                return -1
            try:
                value = int(raw)
            except ValueError:
                problems.append(ConfigProblem(key, f"Invalid value {raw} for configuration {key}: Not a number "
                                                   f"of type INT"))
                return -1
            if value == 0 or value < -1:
                problems.append(ConfigProblem(key, f"Invalid value {value} for configuration {key}: Number of "
                                                   f"partitions/replication factor must be positive, or -1 to "
                                                   f"use the broker's default"))
            return value

        own = ("include", "exclude", "partitions", "replication.factor")

        def group(name: str) -> _Group:
            prefix = f"topic.creation.{name}."
            sub = {k[len(prefix):]: v for k, v in keys.items() if k.startswith(prefix)}
            is_default = name == "default"
            return _Group(name,
                          (".*",) if is_default else tuple(p.strip() for p in sub.get("include", "").split(",")
                                                           if p.strip()),
                          () if is_default else tuple(p.strip() for p in sub.get("exclude", "").split(",")
                                                      if p.strip()),
                          number(prefix + "partitions", is_default),
                          number(prefix + "replication.factor", is_default),
                          tuple(sorted((k, v) for k, v in sub.items() if k not in own)))

        default = group("default")
        groups = tuple(group(n) for n in names if n != "default")
        known = {"topic.creation.groups", "topic.creation.enable"}
        for k in keys:
            if k in known or any(k.startswith(f"topic.creation.{n}.") for n in ["default", *names]):
                continue
            problems.append(ConfigProblem(k, f"Configuration {k} names a topic creation group that is not listed "
                                             f"in topic.creation.groups ({', '.join(names) or 'none'})"))
        for g in groups:
            for pattern in g.include + g.exclude:
                try:
                    re.compile(pattern)
                except re.error as e:
                    problems.append(ConfigProblem(f"topic.creation.{g.name}.include", f"Invalid regex {pattern}: "
                                                                                      f"{e}"))
        if problems:
            raise ConfigError(problems)
        if str(keys.get("topic.creation.enable", "true")).strip().lower() == "false":
            return None
        return cls(default, groups)

    def settings_for(self, topic: str) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, topic configs) for a new ``topic``."""
        chosen = next((g for g in self.groups if g.matches(topic)), self.default)
        parts = chosen.partitions if chosen.partitions != -1 else self.default.partitions
        rf = chosen.replication_factor if chosen.replication_factor != -1 else self.default.replication_factor
        # Partitions and replication factor fall back to the default group's; other topic configs do not.
        return parts, rf, dict(chosen.configs)


def ensure_topics(client: Mapping[str, str], wanted: Mapping[str, tuple[int, int, Mapping[str, str]]],
                  known: set[str] | None = None) -> list[str]:
    """Create the topics of ``wanted`` (topic -> (partitions, replication factor, configs)) that do not exist;
    return the ones created. ``known`` caches topics seen to exist (updated in place)."""
    from confluent_kafka.admin import NewTopic

    kafka = _confluent()
    todo = {t: s for t, s in wanted.items() if known is None or t not in known}
    if not todo:
        return []
    admin = admin_client(client)
    existing = set(admin.list_topics(timeout=_TIMEOUT).topics)
    missing = [t for t in todo if t not in existing]
    created: list[str] = []
    if missing:
        new = [NewTopic(t, num_partitions=todo[t][0], replication_factor=todo[t][1], config=dict(todo[t][2]))
               for t in missing]
        for topic, fut in admin.create_topics(new, request_timeout=_TIMEOUT).items():
            try:
                fut.result()
                created.append(topic)
                log.info("Created topic %s (partitions %s, replication factor %s)", topic, todo[topic][0],
                         todo[topic][1])
            except kafka.KafkaException as e:
                if e.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:  # another writer was first
                    raise ConnectError(f"Cannot create topic {topic}: {e.args[0].str()}") from e
    if known is not None:
        known.update(todo)
    return created


def kafka_topics(client: Mapping[str, str]) -> list[str]:
    """The topics of the cluster whose partitions all have a leader (ready to be consumed), sorted."""
    admin = admin_client(client)
    topics = admin.list_topics(timeout=_TIMEOUT).topics
    return sorted(name for name, meta in topics.items()
                  if meta.error is None and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()))


def _partitions(offsets: Mapping[str, Mapping[str, int]]) -> list[Any]:
    kafka = _confluent()
    return [kafka.TopicPartition(topic, int(part), int(off))
            for topic, parts in sorted(offsets.items()) for part, off in sorted(parts.items(), key=lambda x: int(x[0]))
            if int(off) >= 0]


def commit_group_offsets(client: Mapping[str, str], group: str, offsets: Mapping[str, Mapping[str, int]]) -> None:
    """Commit ``offsets`` (next offsets to read) to consumer group ``group``, as a consumer that owns no
    partitions does (the group has no members: Spark assigns partitions itself)."""
    kafka = _confluent()
    tps = _partitions(offsets)
    if not tps:
        return
    admin = admin_client(client)
    delay, deadline = 0.2, time.monotonic() + _TIMEOUT
    while True:
        # The group coordinator moves or is still loading (a new __consumer_offsets partition): retriable.
        futures = admin.alter_consumer_group_offsets([kafka.ConsumerGroupTopicPartitions(group, tps)],
                                                     request_timeout=_TIMEOUT)
        try:
            errors = [tp.error for fut in futures.values() for tp in fut.result().topic_partitions
                      if tp.error is not None]
        except kafka.KafkaException as e:
            errors = [e.args[0]]
        if not errors:
            return
        retriable = {kafka.KafkaError.NOT_COORDINATOR, kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                     kafka.KafkaError.COORDINATOR_NOT_AVAILABLE, kafka.KafkaError.REQUEST_TIMED_OUT,
                     kafka.KafkaError._TIMED_OUT, kafka.KafkaError._TRANSPORT}
        if not all(err.retriable() or err.code() in retriable for err in errors) or time.monotonic() > deadline:
            raise ConnectError(f"Committing offsets of consumer group {group} failed: {errors[0]}")
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def group_offsets(client: Mapping[str, str], group: str) -> dict[str, dict[str, int]]:
    """The committed offsets of consumer group ``group`` (empty when it has none)."""
    kafka = _confluent()
    admin = admin_client(client)
    fut = admin.list_consumer_group_offsets([kafka.ConsumerGroupTopicPartitions(group)],
                                            request_timeout=_TIMEOUT)[group]
    out: dict[str, dict[str, int]] = {}
    for tp in fut.result().topic_partitions:
        if tp.offset >= 0:
            out.setdefault(tp.topic, {})[str(tp.partition)] = tp.offset
    return out


def delete_group(client: Mapping[str, str], group: str) -> bool:
    """Delete consumer group ``group`` and its offsets; False when it did not exist."""
    kafka = _confluent()
    admin = admin_client(client)
    try:
        admin.delete_consumer_groups([group], request_timeout=_TIMEOUT)[group].result()
    except kafka.KafkaException as e:
        if e.args[0].code() in (kafka.KafkaError.GROUP_ID_NOT_FOUND,):
            return False
        raise ConnectError(f"Deleting consumer group {group} failed: {e.args[0].str()}") from e
    return True
