"""The :class:`~.store.GroupStore` on Kafka: membership from Kafka's group protocol, state in compacted topics.

Where the worker config has ``bootstrap.servers`` and no ``group.store.url`` (Kafka's own
``connect-distributed.properties``), the group coordinates through the brokers, as Kafka Connect's does:

* **Membership**: each worker runs a consumer in the consumer group ``group.id`` (``session.timeout.ms``,
  ``heartbeat.interval.ms``), subscribed to the one-partition config topic. A thread of the store polls it every
  100 ms, so a group rebalance completes whatever the worker is busy with, but only while the worker's heartbeat
  thread renews its membership: one stuck for a session is no longer polled and leaves the group when
  ``max.poll.interval.ms`` (= ``session.timeout.ms``) runs out, just as a paused process does. Its ``client.id``
  is the worker's REST URL, so the group's member list (``describe_consumer_groups``) is the list of live workers.
  It is a plain consumer group, not Kafka Connect's ``connect`` protocol.
* **Leader**: the member the broker assigned partition 0 of the config topic: exactly one at a time. Only the
  leader rebalances; it writes with a transactional producer (``transactional.id`` = ``<group.id>-leader``),
  initialised before it first reads the config topic to its end (``read_committed``), then before every decision:
  a new leader's ``init_transactions`` fences an old one that was paused, even one that wakes in the middle of the
  new leader's decision still believing it holds the partition, so epochs stay monotonic. A fenced leader steps
  down until the broker assigns it again, or until the group's description says the partition is still its own
  (it was fenced by a member that had not yet heard of the last rebalance).
* **Connector configs** (creates, replaces, deletes, restart requests) are compare-and-set transactions of
  ``transactional.id`` = ``<group.id>-configs`` (see :mod:`.kafka_topics`): of workers creating one name at once,
  exactly one commits; a replace never brings back a connector deleted meanwhile.
* **Configs and target states** in ``config.storage.topic`` (one partition, ``cleanup.policy=compact``) under
  Kafka Connect's keys: ``connector-<name>`` -> ``{"properties": {...}}`` and ``target-state-<name>`` ->
  ``{"state", "state.v2"}``, restart requests under ``restart-connector-<name>``. Configs are stored as the
  PostgreSQL store stores them: literal secrets encrypted under the group's key (``properties`` then holds only the
  name; the ciphertext is in ``"kconnect"``), config-provider references unresolved. Assignments with their epochs
  (the fencing tokens) are ``kconnect-assignment-<name>`` records of the same topic, the largest epoch ever given
  ``kconnect-epoch``, an owner's finished hand-over ``kconnect-release-<name>`` (the leader applies it), and when
  the leader first saw an owner out of the group ``kconnect-absent-<worker>`` (``scheduled.rebalance.max.delay.ms``
  counts from it, whichever worker leads next).
* **Statuses** in ``status.storage.topic`` (compacted): ``status-connector-<name>`` ->
  ``{"state", "trace", "worker_id", "generation"}`` with the assignment's epoch as ``generation``; a report under
  an older epoch is refused and ignored by readers.

A commit's fence check (:func:`check`) reads the config topic to its end, ``read_committed``, in the commit's own
process; it never calls ``init_transactions`` (that would fence the real leader).

>>> store = KafkaGroupStore({"bootstrap.servers": "kafka:9092"}, "connect-cluster",       # doctest: +SKIP
...                         config_topic="connect-configs", status_topic="connect-status")
>>> store.join("10.0.0.5:8083", "http://10.0.0.5:8083", 10_000)                             # doctest: +SKIP
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...bus.admin import admin_client, ensure_topics
from ...errors import ConnectError, FencedError
from .fencing import refuse_unless_held
from .kafka_topics import Record, TopicReader, TransactionalWriter, client_library, encode
from .store import Assignment, GroupView, Member, Move, StoredConnector

__all__ = ["KAFKA_CHECK", "KafkaGroupStore", "KafkaTopics", "check"]

log = logging.getLogger(__name__)

_TIMEOUT = 30.0
_CONNECTOR, _TARGET, _RESTART = "connector-", "target-state-", "restart-connector-"
_ASSIGNMENT, _RELEASE, _EPOCH = "kconnect-assignment-", "kconnect-release-", "kconnect-epoch"
_ABSENT = "kconnect-absent-"
_STATUS = "status-connector-"


@dataclass(frozen=True)
class KafkaTopics:
    """The group's topics (Kafka Connect's worker keys) and how to create them when missing."""

    config: str
    status: str
    config_replication_factor: int = 3
    status_replication_factor: int = 3
    status_partitions: int = 5


class _Membership:
    """One worker's consumer in the group: its assignment says whether it leads; a lost assignment (the session
    or the poll interval ran out) is remembered until :meth:`take_lost`."""

    def __init__(self, client: Mapping[str, str], group_id: str, url: str, topic: str, session_timeout_ms: int,
                 heartbeat_interval_ms: int):
        kafka = client_library()
        self.session_s = session_timeout_ms / 1000
        #: when the worker last showed it is alive (join or heartbeat), on this process's monotonic clock
        self.renewed = time.monotonic()
        heartbeat = max(1, min(int(heartbeat_interval_ms), int(session_timeout_ms) // 3))
        self.consumer = kafka.Consumer({
            **client, "group.id": group_id, "client.id": url, "session.timeout.ms": int(session_timeout_ms),
            "heartbeat.interval.ms": heartbeat, "max.poll.interval.ms": int(session_timeout_ms),
            "enable.auto.commit": False, "partition.assignment.strategy": "range",
            "auto.offset.reset": "latest"})
        self.partitions: set[int] = set()
        self.assigned = False
        #: how many assignments the broker has given this member (one per completed group rebalance)
        self.generations = 0
        self.lost = False
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.assign(partitions)
        if partitions:
            consumer.pause(partitions)  # membership only: the records are read by the store's own reader
        self.partitions = {tp.partition for tp in partitions}
        self.assigned = True
        self.generations += 1

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.partitions = set()
        consumer.unassign()

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self.partitions = set()
        self.lost = True
        consumer.unassign()

    def poll(self) -> None:
        """Serve the group's callbacks (and count as the application's poll for ``max.poll.interval.ms``)."""
        msg = self.consumer.poll(0)
        if msg is not None and msg.error() is not None:
            if msg.error().code() == client_library().KafkaError._MAX_POLL_EXCEEDED:
                self.lost, self.partitions = True, set()
            else:
                log.debug("Group consumer: %s", msg.error().str())

    @property
    def leads(self) -> bool:
        return 0 in self.partitions

    def close(self) -> None:
        self.consumer.close()  # leaves the group at once


class KafkaGroupStore:
    """A group's shared state in Kafka (see the module docstring). Thread-safe under one lock."""

    def __init__(self, client: Mapping[str, str], group_id: str, *, topics: KafkaTopics,
                 rebalance_delay_ms: int = 0, heartbeat_interval_ms: int = 3000, create_topics: bool = True):
        self._client = {k: str(v) for k, v in client.items()}
        self.group_id = group_id
        self.topics = topics
        self.rebalance_delay_ms = int(rebalance_delay_ms)
        self.heartbeat_interval_ms = int(heartbeat_interval_ms)
        self._lock = threading.RLock()
        if create_topics:
            compact = {"cleanup.policy": "compact"}
            ensure_topics(self._client, {topics.config: (1, topics.config_replication_factor, compact),
                                         topics.status: (topics.status_partitions, topics.status_replication_factor,
                                                         compact)})
        kafka = client_library()
        # A short fetch wait: a transaction's records reach a read_committed reader only once its commit marker is
        # written, which does not end a fetch waiting for data; a reader that waits 500 ms makes every write cost that.
        self._reader = TopicReader(self._client, [topics.config, topics.status], fetch_wait_ms=100)
        self._producer = kafka.Producer({**self._client, "enable.idempotence": True, "linger.ms": 0,
                                         "partitioner": "murmur2_random"})  # Java's partitioner: Connect's keys
        #: the leader's decisions, and every worker's connector configs (see :mod:`.kafka_topics`)
        self._leader = TransactionalWriter(self._client, f"{group_id}-leader", self._delivered)
        self._configs = TransactionalWriter(self._client, f"{group_id}-configs", self._delivered)
        #: this store's members' assignment counts when the leader's producer was fenced: such a member leads
        #: again only from a later assignment (a paused leader woken up steps down)
        self._fenced_at: dict[str, int] = {}
        #: the member and assignment count the leader's producer was initialised under
        self._term: tuple[str, int] | None = None
        self._members: dict[str, _Membership] = {}
        self._members_lock = threading.Lock()  # the consumers: one thread at a time (the poller, a heartbeat)
        self._closing = threading.Event()
        self._poller: threading.Thread | None = None
        self._admin = admin_client(self._client)
        #: the offset after this store's last write to each partition it wrote to
        self._written: dict[tuple[str, int], int] = {}

    def __repr__(self) -> str:  # never the client settings: they may carry a SASL password
        return f"KafkaGroupStore(group_id={self.group_id!r}, topics={self.topics.config!r})"

    def close(self) -> None:
        self._closing.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        with self._lock, self._members_lock:
            for member in self._members.values():
                member.close()
            self._members.clear()
            self._reader.close()
            self._producer.flush(_TIMEOUT)
            self._leader.close()
            self._configs.close()
            self._producer = self._admin = None  # their client threads end with them

    # -- reading and writing ------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        self._reader.catch_up(written=self._written)
        return self._reader.values[self.topics.config]

    def _delivered(self, error: Any, msg: Any) -> None:
        """A delivery report: remember the offset after this store's own write (read-your-writes)."""
        if error is None:
            key = (msg.topic(), msg.partition())
            self._written[key] = max(self._written.get(key, 0), msg.offset() + 1)

    def _status(self) -> dict[str, Any]:
        return self._reader.values[self.topics.status]

    def _write(self, records: list[Record]) -> None:
        """Produce records that need no decision (statuses, finished hand-overs) and wait until they are
        written."""
        for topic, key, value in records:
            self._producer.produce(topic, key=key.encode("utf-8"), value=encode(value), on_delivery=self._delivered)
        if self._producer.flush(_TIMEOUT) > 0:
            raise ConnectError(f"Writing to the worker group's topics timed out (group {self.group_id})")

    def _change_configs(self, change: Callable[[dict[str, Any]], tuple[list[Record], bool]]) -> bool:
        """Compare and set on the config topic: ``change(config)`` decides from the topic read to its end after
        this store's config producer fenced every other worker's; its records commit only if no other worker's
        producer was initialised since, else the topic is read and ``change`` asked again. Returns ``change``'s
        answer (False: refused, nothing written)."""
        deadline = time.monotonic() + _TIMEOUT
        with self._lock:
            while True:
                self._configs.ready()
                records, answer = change(self._config())
                if not records:
                    return answer
                try:
                    self._configs.commit(records)
                    return answer
                except FencedError as e:  # another worker wrote meanwhile: decide again on what it wrote
                    if time.monotonic() > deadline:
                        raise ConnectError(f"Writing connector configs of group {self.group_id} failed: other "
                                           f"workers kept writing for {_TIMEOUT:.0f} s") from e
                    time.sleep(random.uniform(0.01, 0.1))  # two workers deciding in turn: let one finish

    # -- membership ---------------------------------------------------------------------------------
    def _poll_members(self, *, everyone: bool = False) -> None:
        """Serve the members' group callbacks: those whose worker heartbeated within its session, or
        ``everyone`` (the worker's own heartbeat, join and leave). A REST call must not keep alive the membership
        of a worker whose heartbeat thread is stuck (nor a test's paused worker)."""
        now = time.monotonic()
        with self._members_lock:
            for member in list(self._members.values()):
                if everyone or now - member.renewed < member.session_s:
                    member.poll()

    def _poll_loop(self) -> None:
        """Serve the group's callbacks every 100 ms, so a rebalance completes whatever the worker's heartbeat
        thread is doing; a member whose worker has not heartbeated for its session is no longer polled, and leaves
        the group when ``max.poll.interval.ms`` runs out."""
        while not self._closing.wait(0.1):
            self._poll_members()

    def join(self, worker_id: str, url: str, session_timeout_ms: int) -> None:
        with self._lock:
            member = self._members.get(worker_id)
            if member is None:
                member = _Membership(self._client, self.group_id, url, self.topics.config, session_timeout_ms,
                                     self.heartbeat_interval_ms)
                with self._members_lock:
                    self._members[worker_id] = member
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll_loop, name="kconnect-group-poll", daemon=True)
                self._poller.start()
            member.lost, member.renewed = False, time.monotonic()
            others = {w: m.generations for w, m in self._members.items() if w != worker_id}
            self._settle(lambda: member.assigned, others, f"Worker {worker_id} could not join group "
                                                          f"{self.group_id} in time")
            member.lost = False  # a loss heard while joining again was the former membership's

    def _settle(self, done: Callable[[], bool], others: Mapping[str, int], failure: str) -> None:
        """Poll this store's members until ``done()`` and every member of ``others`` has its assignment of the
        group rebalance under way (``others``: their assignment counts before it)."""
        deadline = time.monotonic() + _TIMEOUT
        while not (done() and all(self._members[w].generations > n for w, n in others.items()
                                  if w in self._members)):
            if time.monotonic() > deadline:
                raise ConnectError(failure)
            self._poll_members(everyone=True)
            time.sleep(0.02)

    def heartbeat(self, worker_id: str, session_timeout_ms: int) -> bool:
        with self._lock:
            member = self._members.get(worker_id)
            if member is None:
                return False
            self._poll_members(everyone=True)  # before renewing: a lost membership is heard of now
            member.renewed = time.monotonic()
            if member.lost:
                member.lost, member.assigned = False, False
                return False
            return True

    def leave(self, worker_id: str) -> None:
        with self._lock:
            with self._members_lock:
                member = self._members.pop(worker_id, None)
            if member is not None:
                others = {w: m.generations for w, m in self._members.items()}
                member.close()
                # Members of this store (a test's, or a process running several workers) get the connectors'
                # new leader before this returns.
                self._settle(lambda: True, others, f"Group {self.group_id} did not settle after {worker_id} left")

    def members(self) -> list[Member]:
        with self._lock:
            self._poll_members()
        future = self._admin.describe_consumer_groups([self.group_id], request_timeout=_TIMEOUT)[self.group_id]
        description = future.result()
        out = {}
        for m in description.members:
            url = str(m.client_id)
            out[url.partition("://")[2] or url] = Member(url.partition("://")[2] or url, url)
        return [out[w] for w in sorted(out)]

    # -- connector states ---------------------------------------------------------------------------
    def _stored(self, name: str, config: dict[str, Any]) -> StoredConnector | None:
        value = config.get(_CONNECTOR + name)
        if value is None:
            return None
        doc = dict(value.get("kconnect") or {})
        if "config_encrypted" not in doc:
            doc["config"] = dict(value.get("properties") or {})
        doc["name"] = name
        target = config.get(_TARGET + name)
        if target is not None:
            doc["target_state"] = target.get("state.v2") or target.get("state")
        restart = config.get(_RESTART + name) or {}
        return StoredConnector(name, doc, int(restart.get("kconnect.restarts", 0)), bool(restart.get("only-failed")))

    def _connector_records(self, name: str, doc: dict[str, Any]) -> list[Record]:
        rest = {k: v for k, v in doc.items() if k not in ("config", "target_state")}
        properties = dict(doc["config"]) if "config" in doc else {"name": name}
        target = str(doc.get("target_state", "STARTED"))
        return [(self.topics.config, _CONNECTOR + name, {"properties": properties, "kconnect": rest}),
                (self.topics.config, _TARGET + name,
                 {"state": "PAUSED" if target == "STOPPED" else target, "state.v2": target})]

    def put_connector(self, name: str, doc: dict[str, Any], *, create: bool = False) -> bool:
        records = self._connector_records(name, doc)
        return self._change_configs(lambda config: (records, True) if (_CONNECTOR + name in config) != create
                                    else ([], False))

    def get_connector(self, name: str) -> StoredConnector | None:
        with self._lock:
            return self._stored(name, self._config())

    def connectors(self) -> list[StoredConnector]:
        with self._lock:
            config = self._config()
            names = sorted(k[len(_CONNECTOR):] for k in config if k.startswith(_CONNECTOR))
            return [s for s in (self._stored(n, config) for n in names) if s is not None]

    def delete_connector(self, name: str) -> bool:
        records: list[Record] = [(self.topics.config, prefix + name, None) for prefix in (_CONNECTOR, _TARGET,
                                                                                            _RESTART)]
        return self._change_configs(lambda config: (records, True) if _CONNECTOR + name in config else ([], False))

    def request_restart(self, name: str, *, only_failed: bool = False) -> None:
        def change(config: dict[str, Any]) -> tuple[list[Record], bool]:
            if _CONNECTOR + name not in config:
                return [], False
            count = int((config.get(_RESTART + name) or {}).get("kconnect.restarts", 0)) + 1
            return [(self.topics.config, _RESTART + name,
                     {"include-tasks": False, "only-failed": only_failed, "kconnect.restarts": count})], True

        self._change_configs(change)

    # -- assignments --------------------------------------------------------------------------------
    def _leading(self) -> str | None:
        """This store's member that leads the group (holds partition 0 of the config topic). A member whose leader
        producer was fenced since its last assignment leads only once the broker confirms the partition is its
        own: a leader paused past its session and woken up may still believe it holds the partition until its
        next poll, and so may a member that held it before the last rebalance and has not yet served its revoke;
        either may fence the real leader once. The woken one steps down; the real leader, confirmed by the
        group's description, takes its producer back (a new ``init_transactions`` fences the stale one)."""
        for worker, member in self._members.items():
            if not member.leads:
                continue
            if member.generations > self._fenced_at.get(worker, -1) or self._broker_says_leads(member):
                self._fenced_at.pop(worker, None)
                return worker
        return None

    def _broker_says_leads(self, member: _Membership) -> bool:
        """Whether the group's coordinator, in a stable group, assigns partition 0 of the config topic to
        ``member``'s consumer (its current membership, by member id)."""
        kafka = client_library()
        with self._members_lock:
            member_id = member.consumer.memberid()
        if not member_id:
            return False
        try:
            description = self._admin.describe_consumer_groups(
                [self.group_id], request_timeout=_TIMEOUT)[self.group_id].result()
        except kafka.KafkaException as e:
            log.debug("Describing group %s failed: %s", self.group_id, e)
            return False
        if description.state != kafka.ConsumerGroupState.STABLE:
            return False
        return any(m.member_id == member_id and any(
            (tp.topic, tp.partition) == (self.topics.config, 0) for tp in m.assignment.topic_partitions)
            for m in description.members)

    def _view_assignments(self, config: dict[str, Any]) -> dict[str, Assignment]:
        status = self._status()
        out = {}
        for key, value in config.items():
            if not key.startswith(_ASSIGNMENT):
                continue
            name = key[len(_ASSIGNMENT):]
            epoch = int(value["epoch"])
            report = status.get(_STATUS + name) or {}
            current = report.get("generation") == epoch and report.get("worker_id") == value["worker_id"]
            out[name] = Assignment(name, value["worker_id"], epoch, value.get("pending_worker"),
                                   report.get("state") if current else "UNASSIGNED",
                                   report.get("trace") if current else None,
                                   dict(report.get("kconnect.metrics") or {}) if current else {})
        return out

    def rebalance(self, decide: Callable[[GroupView], list[Move]]) -> list[Move]:
        with self._lock:
            self._poll_members()
            leader = self._leading()
            if leader is None:
                return []  # the leader decides; the others apply what it wrote
            term = (leader, self._members[leader].generations)
            if term != self._term:
                # Each assignment of the partition starts with a new producer: the one of an earlier term may have
                # been fenced meanwhile by another leader's, unknown to it until it writes.
                self._leader.drop()
                self._term = term
            try:
                if self._leader.ready():  # fences a former leader's producer: read what it committed after this
                    log.info("Worker %s leads group %s", leader, self.group_id)
                records, moves = self._decide(decide)
                if records:
                    self._leader.commit(records)
            except FencedError as e:
                self._fenced_at[leader] = self._members[leader].generations
                log.warning("Worker %s no longer leads group %s: %s", leader, self.group_id, e)
                return []
            return moves

    def _decide(self, decide: Callable[[GroupView], list[Move]]) -> tuple[list[Record], list[Move]]:
        """The leader's decision, from the config topic read to its end: the records to write and the moves."""
        live = {m.worker_id: m for m in self.members()}
        config = self._config()
        epoch = int((config.get(_EPOCH) or {}).get("epoch", 0))
        assignments = self._view_assignments(config)
        epoch = max([epoch, *(a.epoch for a in assignments.values())])
        records: list[Record] = []

        def give(name: str, worker: str) -> None:
            nonlocal epoch
            epoch += 1
            records.append((self.topics.config, _ASSIGNMENT + name, {"worker_id": worker, "epoch": epoch}))
            assignments[name] = Assignment(name, worker, epoch, state="UNASSIGNED")

        for key, value in config.items():  # hand-overs the owners finished
            if not key.startswith(_RELEASE):
                continue
            name = key[len(_RELEASE):]
            records.append((self.topics.config, key, None))
            a = assignments.get(name)
            if a is not None and (a.worker_id, a.epoch) == (value["worker_id"], value["epoch"]) \
                    and a.pending_worker is not None:
                give(name, a.pending_worker)
        members = list(live.values())
        owners = {a.worker_id for a in assignments.values() if a.worker_id is not None}
        records += self._absent(config, owners - live.keys(), members)
        names = tuple(sorted(k[len(_CONNECTOR):] for k in config if k.startswith(_CONNECTOR)))
        moves = decide(GroupView(tuple(members), names, dict(assignments)))
        for move in moves:
            if move.worker_id is None:
                records += [(self.topics.config, _ASSIGNMENT + move.connector, None),
                            (self.topics.status, _STATUS + move.connector, None)]
            elif move.pending:
                a = assignments[move.connector]
                records.append((self.topics.config, _ASSIGNMENT + move.connector,
                                {"worker_id": a.worker_id, "epoch": a.epoch, "pending_worker": move.worker_id}))
            else:
                give(move.connector, move.worker_id)
        if records:
            records.append((self.topics.config, _EPOCH, {"epoch": epoch}))
        return records, moves

    def _absent(self, config: dict[str, Any], absent: set[str], members: list[Member]) -> list[Record]:
        """Add the owners that are not in the group to ``members`` (``gone`` once absent for longer than
        ``scheduled.rebalance.max.delay.ms``); the records that keep when each was first seen absent, so that a
        new leader honours what is left of the delay rather than a fresh one (``kconnect-absent-<worker>``, on
        the wall clock of the leader that saw it: workers' clocks must agree to well within the delay)."""
        now_ms = int(time.time() * 1000)
        seen = {key[len(_ABSENT):]: int(value["since_ms"]) for key, value in config.items()
                if key.startswith(_ABSENT) and value}
        records: list[Record] = [(self.topics.config, _ABSENT + w, None) for w in sorted(seen.keys() - absent)]
        for worker in sorted(absent):
            since_ms = min(seen.get(worker, now_ms), now_ms)  # a clock ahead of this one counts from now
            if worker not in seen:
                records.append((self.topics.config, _ABSENT + worker, {"worker_id": worker, "since_ms": now_ms}))
            members.append(Member(worker, "", live=False, gone=now_ms - since_ms >= self.rebalance_delay_ms))
        return records

    def assignments(self) -> dict[str, Assignment]:
        with self._lock:
            return self._view_assignments(self._config())

    def release(self, connector: str, worker_id: str, epoch: int) -> bool:
        with self._lock:
            a = self._view_assignments(self._config()).get(connector)
            if a is None or (a.worker_id, a.epoch) != (worker_id, epoch) or a.pending_worker is None:
                return False
            self._write([(self.topics.config, _RELEASE + connector, {"worker_id": worker_id, "epoch": epoch})])
            if self._leading() is not None:
                self.rebalance(lambda view: [])  # apply it now rather than on the next heartbeat
            return True

    def report(self, connector: str, worker_id: str, epoch: int, state: str, trace: str | None,
               metrics: dict[str, Any]) -> bool:
        with self._lock:
            a = self._view_assignments(self._config()).get(connector)
            if a is None or (a.worker_id, a.epoch) != (worker_id, epoch):
                return False
            self._write([(self.topics.status, _STATUS + connector,
                          {"state": state, "trace": trace, "worker_id": worker_id, "generation": epoch,
                           "kconnect.metrics": metrics})])
            return True

    def current_epoch(self, connector: str) -> tuple[str | None, int] | None:
        with self._lock:
            value = self._config().get(_ASSIGNMENT + connector)
        return (value["worker_id"], int(value["epoch"])) if value else None


def check(doc: dict[str, Any], connector: str, epoch: int) -> None:
    """The fence check of a commit (see :mod:`.fencing`): raise :class:`FencedError` unless ``doc``'s worker still
    holds ``connector`` under ``epoch`` in the config topic, read to its end (``read_committed``)."""
    reader = TopicReader(doc["kafka"], [doc["config_topic"]], fetch_wait_ms=10)  # read once, at once
    try:
        reader.catch_up()
        value = reader.values[doc["config_topic"]].get(_ASSIGNMENT + connector)
    finally:
        reader.close()
    refuse_unless_held(doc, connector, epoch, (value["worker_id"], int(value["epoch"])) if value else None)


#: The checker of a fence file of a group on Kafka.
KAFKA_CHECK = f"{__name__}:check"
