"""A worker group whose shared state lives in a bucket (``group.store.url=s3a://bucket/prefix``, the run's moto S3
server): the store contract on S3's conditional writes (of workers creating one name at once exactly one wins; a
new owner's epoch is larger; a commit under a lost epoch is fenced; a restarted worker finds the state), and the
worker config that names it."""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from spark_connect_bridge.core.fencing import FENCE_ENV, before_commit
from spark_connect_bridge.errors import ConfigError, ConnectError, FencedError
from spark_connect_bridge.runtime.group.assignment import plan
from spark_connect_bridge.runtime.group.bucket import BUCKET_CHECK, BucketGroupStore, object_name
from spark_connect_bridge.runtime.group.fencing import FenceFile
from spark_connect_bridge.runtime.group.service import fence_settings, open_store
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server
from tests.support.waiting import until


@pytest.fixture(scope="module")
def bucket():
    """A fresh bucket on the run's S3 server, the S3A keys of a worker config that reach it, and a test client."""
    endpoint = servers.s3()
    client = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))
    name = "group-" + uuid.uuid4().hex[:10]
    client.create_bucket(name)
    hadoop = {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
              "spark.hadoop.fs.s3a.endpoint.region": REGION, "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
              "spark.hadoop.fs.s3a.secret.key": SECRET_KEY}
    return name, hadoop, client


@pytest.fixture
def stores(bucket):
    """``open(**kw)``: store instances of one new group in the bucket, as several workers hold them."""
    name, hadoop, _ = bucket
    group = "g-" + uuid.uuid4().hex[:8]
    opened: list[BucketGroupStore] = []

    def open_one(**kw) -> BucketGroupStore:
        opened.append(BucketGroupStore(f"s3a://{name}/kconnect", group, hadoop, **kw))
        return opened[-1]

    yield open_one
    for s in opened:
        s.close()


def test_concurrent_creates_of_one_name_store_exactly_one_and_a_restart_finds_the_state(stores, bucket):
    """Two workers (store instances) creating one name from six threads at once: exactly one wins, both read its
    config; an update racing a delete never brings the connector back; a third instance (a restarted worker,
    nothing local) reads the group's connectors, members and assignments from the bucket."""
    a, b = stores(), stores()
    start = threading.Barrier(6)

    def create(i: int) -> bool:
        start.wait(timeout=60)
        return (a, b)[i % 2].put_connector("c", {"name": "c", "config": {"by": str(i)}}, create=True)

    with ThreadPoolExecutor(6) as pool:
        won = list(pool.map(create, range(6)))
    assert won.count(True) == 1
    assert {s.get_connector("c").doc["config"]["by"] for s in (a, b)} == {str(won.index(True))}

    a.put_connector("d", {"name": "d", "config": {"x": "1"}}, create=True)
    start = threading.Barrier(2)

    def delete() -> bool:
        start.wait(timeout=60)
        return a.delete_connector("d")

    def update() -> bool:
        start.wait(timeout=60)
        return b.put_connector("d", {"name": "d", "config": {"x": "2"}})

    with ThreadPoolExecutor(2) as pool:
        deleted, updated = pool.submit(delete), pool.submit(update)
        assert deleted.result()
        updated.result()  # before the delete or after it: either way the delete wins
    assert a.get_connector("d") is None and b.get_connector("d") is None

    a.join("w1:1", "http://w1:1", 60_000)
    b.request_restart("c", only_failed=True)
    a.rebalance(plan)
    restarted = stores()
    assert [s.name for s in restarted.connectors()] == ["c"]
    got = restarted.get_connector("c")
    assert (got.doc["config"]["by"], got.restarts, got.only_failed) == (str(won.index(True)), 1, True)
    assert [(m.worker_id, m.url) for m in restarted.members()] == [("w1:1", "http://w1:1")]
    assert restarted.current_epoch("c") == ("w1:1", a.assignments()["c"].epoch)
    name, _, client = bucket
    bucket_name, key = object_name(f"s3a://{name}/kconnect", a.group_id)
    assert bucket_name == name and key in client.objects(name, "kconnect")  # one object per group


def test_a_new_owner_gets_a_larger_epoch_and_a_commit_under_the_lost_one_is_fenced(stores, bucket):
    w1, w2 = stores(), stores()
    w1.join("w1:1", "http://w1:1", 60_000)
    w1.put_connector("sink", {"name": "sink", "config": {}}, create=True)
    w1.rebalance(plan)
    held = w1.assignments()["sink"]
    assert held.worker_id == "w1:1"
    _, hadoop, _ = bucket
    fence = FenceFile(BUCKET_CHECK, {"url": w1.url, "hadoop": hadoop}, w1.group_id, "w1:1")
    try:
        fence.install()
        fence.hold("ckpt-sink", "sink", held.epoch)
        before_commit("ckpt-sink")  # still the owner: passes
        w2.join("w2:1", "http://w2:1", 60_000)
        w1.leave("w1:1")  # a clean leave frees its connectors at once
        w2.rebalance(plan)
        moved = w2.assignments()["sink"]
        assert moved.worker_id == "w2:1" and moved.epoch > held.epoch
        assert not w1.report("sink", "w1:1", held.epoch, "RUNNING", None, {})
        assert w2.report("sink", "w2:1", moved.epoch, "RUNNING", None, {"batches": 1})
        assert w1.assignments()["sink"].state == "RUNNING"
        with pytest.raises(FencedError, match=r"lost connector sink.*w2:1"):
            before_commit("ckpt-sink")
    finally:
        fence.remove()
    assert FENCE_ENV not in os.environ


def test_a_hand_over_waits_for_the_owner_to_release(stores):
    store = stores()
    store.join("w1:1", "http://w1:1", 60_000)
    for name in ("c1", "c2"):
        store.put_connector(name, {"name": name, "config": {}}, create=True)
    store.rebalance(plan)
    store.join("w2:1", "http://w2:1", 60_000)
    moves = store.rebalance(plan)
    assert [(m.worker_id, m.pending) for m in moves] == [("w2:1", True)]
    moved = store.assignments()[moves[0].connector]
    assert store.rebalance(plan) == []  # nothing more while the hand-over is under way
    assert not store.release(moved.connector, "w2:1", moved.epoch)  # not the owner
    assert store.release(moved.connector, "w1:1", moved.epoch)
    after = store.assignments()[moved.connector]
    assert (after.worker_id, after.pending_worker) == ("w2:1", None) and after.epoch > moved.epoch


def test_a_lease_runs_out_on_the_buckets_clock(stores):
    store = stores()
    store.join("w1:1", "http://w1:1", 1000)
    assert [m.worker_id for m in store.members()] == ["w1:1"]
    until(lambda: store.members() == [], what="the lease to run out", interval=0.2, timeout=10)
    assert store.heartbeat("w1:1", 1000) is False
    store.join("w1:1", "http://w1:1", 60_000)
    assert store.heartbeat("w1:1", 60_000) is True


def test_a_worker_config_names_the_bucket_and_never_shows_its_keys(bucket, tmp_path):
    name, hadoop, _ = bucket
    props = {"group.id": "g-" + uuid.uuid4().hex[:8], "group.store.url": f"s3a://{name}/kconnect",
             "offset.storage.dir": f"s3a://{name}/state", **hadoop}
    config = parse_worker_config(props, base_dir=str(tmp_path))
    store = open_store(config)
    try:
        assert isinstance(store, BucketGroupStore)
        assert SECRET_KEY not in repr(store) and ACCESS_KEY not in repr(store)
        assert store.put_connector("c", {"name": "c", "config": {}}, create=True)
        assert [s.name for s in store.connectors()] == ["c"]
    finally:
        store.close()
    checker, settings = fence_settings(config)
    assert checker == BUCKET_CHECK and settings["url"] == f"s3a://{name}/kconnect"


@pytest.mark.parametrize("url, message", [
    ("s3a:///kconnect", "group.store.url: no bucket"),
    ("s3a://AKID:url-s3cret@lake/kconnect", "credentials in the URL are not accepted"),
    ("gs://lake/kconnect", "a postgresql:// URL or s3a://bucket/prefix"),
])
def test_a_group_store_url_that_names_no_bucket_is_refused_naming_the_key(url, message, tmp_path):
    with pytest.raises(ConfigError, match=message) as raised:
        parse_worker_config({"group.id": "g", "group.store.url": url, "offset.storage.dir": str(tmp_path)},
                            base_dir=str(tmp_path))
    assert [p.key for p in raised.value.problems] == ["group.store.url"]
    assert "url-s3cret" not in str(raised.value)


def test_a_group_store_in_a_bucket_that_does_not_exist_fails_at_open_naming_the_key(bucket):
    _, hadoop, _ = bucket
    with pytest.raises(ConnectError, match=r"s3a://no-such-bucket-[0-9a-f]+/kconnect/g/group.json "
                                           r"\(group.store.url\): NoSuchBucket") as raised:
        BucketGroupStore(f"s3a://no-such-bucket-{uuid.uuid4().hex[:8]}/kconnect", "g", hadoop)
    assert SECRET_KEY not in str(raised.value)


def test_two_workers_racing_one_create_through_the_service_one_wins_and_a_restart_finds_it(bucket, tmp_path):
    """Two workers' service layers (as ``POST /connectors`` reaches them; not started: no Spark) of one group whose
    store, checkpoints and config key all live in the bucket: one create of a name wins, the other is a 409; a
    worker started afterwards on another disk reads the connector and its decrypted config back from the bucket;
    the stored config is encrypted in the group's object."""
    from spark_connect_bridge.runtime.errors import AlreadyExistsError
    from spark_connect_bridge.runtime.group.service import GroupService

    name, hadoop, client = bucket
    group = "g-" + uuid.uuid4().hex[:8]

    def worker(i: int, disk: str) -> GroupService:
        return GroupService(parse_worker_config({
            "group.id": group, "group.store.url": f"s3a://{name}/groups", "offset.storage.dir": f"s3a://{name}/{group}",
            "connector.allowed.paths": str(tmp_path), "listeners": f"http://127.0.0.1:{18100 + i}", **hadoop},
            base_dir=str(tmp_path / disk)))

    opened = [worker(0, "a"), worker(1, "b")]
    try:
        start = threading.Barrier(2)

        def create(i: int) -> str:
            start.wait(timeout=60)
            try:
                opened[i].create({"name": "sink", "connector.class": "FileStreamSink", "topics": "t",
                                  "file": str(tmp_path / f"out-{i}.txt")})
                return "created"
            except AlreadyExistsError:
                return "409"

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(create, range(2)))
        assert sorted(answers) == ["409", "created"]
        winner = answers.index("created")
        opened.append(worker(2, "c"))  # a worker started later, on another disk
        assert opened[2].list_connectors() == ["sink"]
        assert opened[2].get_config("sink")["file"] == str(tmp_path / f"out-{winner}.txt")
        stored = client.objects(name, "groups")[object_name(f"s3a://{name}/groups", group)[1]]
        assert b"out-" not in stored and SECRET_KEY.encode() not in stored  # encrypted; no key of the worker's
    finally:
        for service in opened:
            service.fence.remove()
            service.store.close()


def test_a_create_whose_put_landed_but_whose_answer_was_lost_still_wins(stores):
    """The client retries a PUT whose answer it lost; the retry finds the object changed (by the first attempt) and
    gets 412. The store recognises its own change on the next read: the create answers True, not "exists"."""
    from botocore.exceptions import ClientError

    store = stores()
    real_put = store._client.put_object
    lost: list[bool] = []

    def put_then_lose_the_answer(**kw):
        real_put(**kw)
        if not lost:
            lost.append(True)
            raise ClientError({"Error": {"Code": "PreconditionFailed", "Message": "At least one of the pre-conditions "
                                         "you specified did not hold"}}, "PutObject")
        return None

    store._client.put_object = put_then_lose_the_answer
    assert store.put_connector("c", {"name": "c", "config": {}}, create=True) is True
    assert lost == [True] and [s.name for s in store.connectors()] == ["c"]
