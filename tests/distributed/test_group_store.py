"""The group store contract and the commit fence, run against every store (no Spark): PostgreSQL (the run's
server), Kafka (the run's broker; topics of its own per test) and a bucket (the run's S3 server, S3's conditional
writes; what only the bucket store has is in test_group_on_a_bucket.py)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from spark_connect_bridge.bus.admin import ensure_topics
from spark_connect_bridge.connectors.base import WriteContext
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.core.fencing import FENCE_ENV, before_commit
from spark_connect_bridge.engine.datasource import _Message, _StreamWriter
from spark_connect_bridge.errors import FencedError
from spark_connect_bridge.runtime.group.assignment import plan
from spark_connect_bridge.runtime.group.bucket import BUCKET_CHECK, BucketGroupStore
from spark_connect_bridge.runtime.group.fencing import POSTGRES_CHECK, FenceFile
from spark_connect_bridge.runtime.group.kafka import KAFKA_CHECK, KafkaGroupStore, KafkaTopics
from spark_connect_bridge.runtime.group.kafka_topics import TopicReader, TransactionalWriter
from spark_connect_bridge.runtime.group.postgres import PostgresGroupStore
from spark_connect_bridge.runtime.group.store import Move
from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server
from tests.support.waiting import until


@pytest.fixture(scope="module")
def url():
    host, port = servers.postgres()
    return f"postgresql://postgres@{host}:{port}/test"


_buckets: dict[str, tuple[str, dict[str, str]]] = {}


def s3_bucket() -> tuple[str, dict[str, str]]:
    """A bucket of this module's on the run's S3 server (made once) and the S3A keys of a worker config reaching it."""
    if not _buckets:
        endpoint = servers.s3()
        name = "group-" + uuid.uuid4().hex[:10]
        MotoS3Server(port=int(endpoint.rsplit(":", 1)[1])).create_bucket(name)
        _buckets["s3"] = (name, {"spark.hadoop.fs.s3a.endpoint": endpoint,
                                 "spark.hadoop.fs.s3a.path.style.access": "true",
                                 "spark.hadoop.fs.s3a.endpoint.region": REGION,
                                 "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
                                 "spark.hadoop.fs.s3a.secret.key": SECRET_KEY})
    return _buckets["s3"]


def open_store(kind: str, url: str, group: str, *, rebalance_delay_ms: int = 0):
    """One store instance (a worker's) of ``group`` on the run's PostgreSQL, Kafka or S3 server."""
    if kind == "postgres":
        return PostgresGroupStore(url, group, rebalance_delay_ms=rebalance_delay_ms)
    if kind == "bucket":
        name, hadoop = s3_bucket()
        return BucketGroupStore(f"s3a://{name}/kconnect", group, hadoop, rebalance_delay_ms=rebalance_delay_ms)
    return KafkaGroupStore({"bootstrap.servers": servers.kafka()}, group,
                           topics=KafkaTopics(group + "-configs", group + "-status", 1, 1, 1),
                           heartbeat_interval_ms=100, rebalance_delay_ms=rebalance_delay_ms)


@pytest.fixture(params=["postgres", "kafka", "bucket"])
def stores(request, url):
    """``open(**kw)``: store instances of one new group, as several workers hold them; closed after the test."""
    group = "g-" + uuid.uuid4().hex[:8]
    opened = []

    def open_one(**kw):
        opened.append(open_store(request.param, url, group, **kw))
        return opened[-1]

    yield open_one
    for s in reversed(opened):
        s.close()


@pytest.fixture
def store(stores):
    return stores()


def fence_file(store, url: str, worker: str) -> FenceFile:
    """The fence file a worker of ``store``'s group writes."""
    if isinstance(store, KafkaGroupStore):
        return FenceFile(KAFKA_CHECK, {"kafka": {"bootstrap.servers": servers.kafka()},
                                       "config_topic": store.topics.config}, store.group_id, worker)
    if isinstance(store, BucketGroupStore):
        return FenceFile(BUCKET_CHECK, {"url": store.url, "hadoop": s3_bucket()[1]}, store.group_id, worker)
    return FenceFile(POSTGRES_CHECK, {"url": url, "password": None}, store.group_id, worker)


def test_a_lease_that_ran_out_is_refused_until_the_worker_joins_again(store):
    # the test broker's minimum session: 500 ms; the bucket's clock (its Date header) counts in seconds
    lease = 100 if isinstance(store, PostgresGroupStore) else 1000
    store.join("w1:1", "http://w1:1", lease)
    assert [(m.worker_id, m.url) for m in store.members()] == [("w1:1", "http://w1:1")]
    time.sleep(lease * 1.5 / 1000)  # no heartbeat for longer than the lease
    until(lambda: store.members() == [], what="the lease to run out", interval=0.1)
    assert store.heartbeat("w1:1", lease) is False
    store.join("w1:1", "http://w1:1", 60_000)
    assert store.heartbeat("w1:1", 60_000) is True


def test_connector_states_are_shared_and_created_once(store):
    assert store.put_connector("a", {"name": "a", "config": {"x": "1"}}, create=True)
    assert not store.put_connector("a", {"name": "a", "config": {"x": "2"}}, create=True)
    assert store.put_connector("a", {"name": "a", "config": {"x": "3"}})
    assert store.get_connector("a").doc["config"] == {"x": "3"}
    store.request_restart("a", only_failed=True)
    got = store.get_connector("a")
    assert (got.restarts, got.only_failed) == (1, True)
    assert store.delete_connector("a")
    assert store.get_connector("a") is None and store.connectors() == []
    assert not store.delete_connector("a")  # deleted already (through another worker): nothing to delete
    assert not store.put_connector("a", {"name": "a", "config": {"x": "4"}})  # an update does not bring it back
    assert store.get_connector("a") is None


def test_concurrent_creates_of_one_name_store_exactly_one(stores):
    """Workers (store instances) creating one name at the same instant: exactly one wins and its config is the
    one stored; an update racing a delete never brings the connector back."""
    instances = [stores() for _ in range(3)]
    start = threading.Barrier(6)

    def create(i: int) -> bool:
        start.wait(timeout=60)
        return instances[i % 3].put_connector("c", {"name": "c", "config": {"by": str(i)}}, create=True)

    with ThreadPoolExecutor(6) as pool:
        won = list(pool.map(create, range(6)))
    assert won.count(True) == 1
    winner = str(won.index(True))
    assert {s.get_connector("c").doc["config"]["by"] for s in instances} == {winner}

    start = threading.Barrier(2)

    def delete() -> bool:
        start.wait(timeout=60)
        return instances[0].delete_connector("c")

    def update() -> bool:
        start.wait(timeout=60)
        return instances[1].put_connector("c", {"name": "c", "config": {"by": "update"}})

    with ThreadPoolExecutor(2) as pool:
        deleted, updated = pool.submit(delete), pool.submit(update)
        assert deleted.result()
        updated.result()  # before the delete (True) or after it (False): either way the delete wins
    assert [s.get_connector("c") for s in instances] == [None, None, None]


def test_each_new_owner_gets_a_larger_epoch_and_only_the_current_one_reports(store):
    store.join("w1:1", "http://w1:1", 60_000)
    store.put_connector("c", {"name": "c", "config": {}}, create=True)
    store.rebalance(plan)
    first = store.assignments()["c"]
    assert first.worker_id == "w1:1"
    store.join("w2:1", "http://w2:1", 60_000)
    store.leave("w1:1")  # a clean leave frees its connectors at once
    store.rebalance(plan)
    second = store.assignments()["c"]
    assert second.worker_id == "w2:1" and second.epoch > first.epoch
    assert not store.report("c", "w1:1", first.epoch, "RUNNING", None, {})
    assert store.report("c", "w2:1", second.epoch, "RUNNING", None, {"batches": 1})
    assert store.assignments()["c"].state == "RUNNING"


def test_a_hand_over_waits_for_the_owner_to_release(store):
    store.join("w1:1", "http://w1:1", 60_000)
    for name in ("c1", "c2"):
        store.put_connector(name, {"name": name, "config": {}}, create=True)
    store.rebalance(plan)
    store.join("w2:1", "http://w2:1", 60_000)
    moves = store.rebalance(plan)
    assert [(m.worker_id, m.pending) for m in moves] == [("w2:1", True)]
    moved = store.assignments()[moves[0].connector]
    assert (moved.worker_id, moved.pending_worker) == ("w1:1", "w2:1")
    assert store.rebalance(plan) == []  # nothing more while the hand-over is under way
    assert store.release(moved.connector, "w1:1", moved.epoch)
    after = store.assignments()[moved.connector]
    assert (after.worker_id, after.pending_worker) == ("w2:1", None) and after.epoch > moved.epoch


def test_a_commit_under_a_lost_epoch_is_fenced(store, url, monkeypatch):
    store.join("w1:1", "http://w1:1", 60_000)
    store.put_connector("sink", {"name": "sink", "config": {}}, create=True)
    store.rebalance(plan)
    held = store.assignments()["sink"]
    fence = fence_file(store, url, "w1:1")
    try:
        fence.install()
        fence.hold("ckpt-0001", "sink", held.epoch)
        before_commit("ckpt-0001")  # still the owner: passes
        before_commit("dlq-ckpt-0001")
        before_commit("ckpt-other")  # not a fenced query
        store.join("w2:1", "http://w2:1", 60_000)
        store.leave("w1:1")
        store.rebalance(plan)  # w2 takes the connector over under a new epoch
        with pytest.raises(FencedError, match=r"lost connector sink.*w2:1"):
            before_commit("ckpt-0001")
        with pytest.raises(FencedError):
            before_commit("dlq-ckpt-0001")  # its dead-letter writes too
    finally:
        fence.remove()
    assert FENCE_ENV not in os.environ


def test_the_store_never_shows_its_url(url):
    s = PostgresGroupStore(url.replace("postgres@", "postgres:s3cret@"), "g-" + uuid.uuid4().hex[:8])
    try:
        assert "s3cret" not in repr(s)
    finally:
        s.close()


def test_a_fenced_sink_commit_leaves_the_sink_untouched(store, url, tmp_path):
    out = tmp_path / "out.txt"
    sink = build_connector({"connector.class": "FileStreamSink", "file": str(out)}, kind="sink")
    writer = _StreamWriter(sink, None, False, "ckpt-sink")
    store.join("w1:1", "http://w1:1", 60_000)
    store.put_connector("sink", {"name": "sink", "config": {}}, create=True)
    store.rebalance(plan)
    fence = fence_file(store, url, "w1:1")
    try:
        fence.install()
        fence.hold("ckpt-sink", "sink", store.assignments()["sink"].epoch)

        def batch(batch_id: int, values: list[str]) -> list:
            staged = sink.write(iter([pa.record_batch({"value": pa.array(values)})]),
                                WriteContext("ckpt-sink", batch_id, 0, 0))
            return [_Message(staged)]

        writer.commit(batch(0, ["a", "b"]), 0)
        assert out.read_text().splitlines() == ["a", "b"]
        store.join("w2:1", "http://w2:1", 60_000)
        store.leave("w1:1")
        store.rebalance(plan)
        with pytest.raises(FencedError):
            writer.commit(batch(1, ["c"]), 1)
        assert out.read_text().splitlines() == ["a", "b"]
    finally:
        fence.remove()


def test_a_new_leader_honours_the_rebalance_delay_already_run(stores):
    """``scheduled.rebalance.max.delay.ms`` counts from when the group first saw the owner gone, whichever worker
    (on Kafka: whichever leader) decides next: a new one does not start the delay again."""
    delay_ms = 2000
    first, second = stores(rebalance_delay_ms=delay_ms), stores(rebalance_delay_ms=delay_ms)
    first.join("a:1", "http://a:1", 60_000)  # on Kafka the first member leads
    first.put_connector("c", {"name": "c", "config": {}}, create=True)
    if isinstance(first, KafkaGroupStore):
        first.rebalance(lambda view: [Move("c", "w:1")])  # an owner that is not in the group (it died)
    else:
        first.join("w:1", "http://w:1", 200)
        first.rebalance(lambda view: [Move("c", "w:1")])
        until(lambda: "w:1" not in {m.worker_id for m in first.members()}, what="the owner's lease to run out",
              interval=0.1)
    assert first.rebalance(plan) == []  # within the delay: the connector waits for its owner
    if isinstance(first, KafkaGroupStore):  # the leadership moves to the second worker
        second.join("b:1", "http://b:1", 60_000)
        first.leave("a:1")
        until(lambda: second._leading() == "b:1", what="the second worker to lead", interval=0.1)
    time.sleep(delay_ms / 1000)
    moves = second.rebalance(plan)  # the first decision of this worker, a delay after the owner was seen gone
    assert [(m.connector, m.pending) for m in moves] == [("c", False)]
    assert second.assignments()["c"].worker_id == moves[0].worker_id != "w:1"


def test_a_kafka_leader_paused_past_its_session_is_fenced_and_steps_down(url, monkeypatch):
    """The leader stops polling and heartbeating for longer than its session (a paused process) and the other
    worker leads. The paused one wakes while the new leader decides, between its read of the config topic and its
    write, before its own consumer has heard that it lost the group: its decision is refused (the new leader's
    init_transactions came before its read) and nothing it wrote lands; then it steps down, and its sink commits
    under the lost epoch are fenced."""
    group = "g-" + uuid.uuid4().hex[:8]
    a, b = open_store("kafka", url, group), open_store("kafka", url, group)
    fence = fence_file(a, url, "a:1")
    paused = threading.Event()

    def heartbeats() -> None:  # a's heartbeat thread, until it is paused
        while not paused.wait(0.1):
            a.heartbeat("a:1", 1000)

    beating = threading.Thread(target=heartbeats, daemon=True)
    try:
        a.join("a:1", "http://a:1", 1000)  # the first member leads
        beating.start()
        b.join("b:1", "http://b:1", 60_000)
        until(lambda: a._leading() == "a:1" and b._members["b:1"].assigned, what="the group to settle", interval=0.1)
        a.put_connector("c", {"name": "c", "config": {}}, create=True)
        assert a.rebalance(lambda view: [Move("c", "a:1")]) and b.rebalance(plan) == []
        held = a.assignments()["c"]
        fence.install()
        fence.hold("ckpt-c", "c", held.epoch)
        before_commit("ckpt-c")

        # a stops heartbeating: its consumer is no longer polled and leaves the group; b leads.
        paused.set()
        beating.join()
        until(lambda: b._leading() == "b:1", what="the other worker to lead", interval=0.1)
        woken: list = []

        def b_decides(view):
            with monkeypatch.context() as stale:  # a's consumer has not polled since it woke
                stale.setattr(a, "_poll_members", lambda: None)
                assert a._leading() == "a:1"
                woken.append(a.rebalance(lambda view: [Move("c", "a:1")]))
            return plan(view)

        taken = b.rebalance(b_decides)
        assert woken == [[]]  # fenced: b's producer was initialised before b read the topic
        assert [(m.connector, m.worker_id) for m in taken] == [("c", "b:1")]
        committed = config_records(a)
        assert committed["kconnect-assignment-c"] == {"worker_id": "b:1", "epoch": held.epoch + 1}

        assert a.heartbeat("a:1", 1000) is False  # then it hears it lost the group, and steps down
        assert a.rebalance(lambda view: [Move("c", "a:1")]) == [] and config_records(a) == committed
        with pytest.raises(FencedError, match=r"lost connector c.*b:1"):
            before_commit("ckpt-c")
    finally:
        paused.set()
        fence.remove()
        a.close()
        b.close()


def test_a_kafka_worker_that_leads_again_decides_again(url):
    """A leader that lost the leader's partition without writing (its producer fenced unknown to it by the next
    leader's) and got it back leads with a new producer rather than stepping down."""
    group = "g-" + uuid.uuid4().hex[:8]
    m, a = open_store("kafka", url, group), open_store("kafka", url, group)
    try:
        m.join("m:1", "http://m:1", 60_000)
        m.put_connector("c", {"name": "c", "config": {}}, create=True)
        assert m.rebalance(plan)
        a.join("a:1", "http://a:1", 60_000)  # sorts first: leads, and fences m's producer
        until(lambda: a._leading() == "a:1", what="the second worker to lead", interval=0.1)
        assert a.rebalance(plan) == []  # nothing to move, but its producer is initialised
        a.leave("a:1")
        until(lambda: m._leading() == "m:1", what="the first worker to lead again", interval=0.1)
        assert m.rebalance(lambda view: [Move("c", "m:1")])
    finally:
        m.close()
        a.close()


def test_a_kafka_leader_fenced_by_a_member_that_missed_the_rebalance_leads_again(url):
    """The member that led before the last rebalance, not yet having served its revoke, initialises the leader's
    producer once more (as its heartbeat's rebalance does) and so fences the real leader, whose next write fails.
    The real leader does not wait for another rebalance that may never come (the group is stable: nobody would
    lead): the group's description says partition 0 is its own, and it leads again with a new producer. Seen in
    CI: two workers started together, the sink never assigned."""
    group = "g-" + uuid.uuid4().hex[:8]
    m, a = open_store("kafka", url, group), open_store("kafka", url, group)
    try:
        m.join("m:1", "http://m:1", 60_000)
        m.put_connector("c", {"name": "c", "config": {}}, create=True)
        a.join("a:1", "http://a:1", 60_000)  # sorts first: takes the leader's partition
        until(lambda: a._leading() == "a:1" and m._leading() is None, what="the second worker to lead",
              interval=0.1)
        assert [(x.connector, x.worker_id) for x in a.rebalance(lambda view: [Move("c", "a:1")])] == [("c", "a:1")]
        m._leader.drop()
        assert m._leader.ready()  # the stale leader's init_transactions: a's producer is fenced
        assert a.rebalance(lambda view: [Move("c", "m:1")]) == []  # its write fails: fenced
        moves = a.rebalance(lambda view: [Move("c", "m:1")])  # the broker says it leads: it decides again
        assert [(x.connector, x.worker_id) for x in moves] == [("c", "m:1")]
        assert config_records(a)["kconnect-assignment-c"]["worker_id"] == "m:1"
        assert m.rebalance(plan) == []
    finally:
        m.close()
        a.close()


def config_records(store: KafkaGroupStore) -> dict:
    """The group's config topic as a new reader finds it (committed records only, the latest value per key)."""
    reader = TopicReader({"bootstrap.servers": servers.kafka()}, [store.topics.config], fetch_wait_ms=10)
    try:
        reader.catch_up()
        return dict(reader.values[store.topics.config])
    finally:
        reader.close()


def test_a_fenced_config_writer_says_so_and_writes_again_with_a_new_producer():
    """The loser of a compare-and-set: its commit fails as FencedError (the store decides again), never as the
    fenced producer's raw fatal error, which its clean-up raised again when the other worker's producer was
    initialised between this one's records and its commit (a 500 for a create that lost the race)."""
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    ensure_topics({"bootstrap.servers": servers.kafka()}, {topic: (1, 1, {})})
    first, second = (TransactionalWriter({"bootstrap.servers": servers.kafka()}, f"{topic}-configs",
                                         lambda err, msg: None) for _ in range(2))
    assert first.ready()
    producer = first._producer

    class OtherWorkerInitialisesBeforeTheCommit:
        def __getattr__(self, name: str):
            return getattr(producer, name)

        def commit_transaction(self, timeout: float):
            producer.flush(10)  # this writer's records are on the broker, in its open transaction
            assert second.ready()  # fences the first
            return producer.commit_transaction(timeout)

    first._producer = OtherWorkerInitialisesBeforeTheCommit()
    with pytest.raises(FencedError, match="Failed to end transaction"):
        first.commit([(topic, "k", {"v": 1})])
    first.commit([(topic, "k", {"v": 2})])  # a new producer (it fences the second in turn)
    with pytest.raises(FencedError):
        second.commit([(topic, "k", {"v": 3})])
