"""A worker group whose shared state lives in a bucket (``group.store.url=s3a://bucket/prefix``, the run's moto S3
server), what only the bucket store has: the group as one object a restarted worker reads back, a PUT whose answer
was lost, the worker config that names the bucket, and two ``kconnect distributed`` workers on it, one killed.
The store contract on S3's conditional writes (one create of a name wins, epochs, hand-overs, leases on the
bucket's clock, the commit fence) runs in test_group_store.py, its ``bucket`` parameter."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from spark_connect_bridge.errors import ConfigError, ConnectError
from spark_connect_bridge.runtime.group.assignment import plan
from spark_connect_bridge.runtime.group.bucket import BUCKET_CHECK, BucketGroupStore, object_name
from spark_connect_bridge.runtime.group.service import fence_settings, open_store
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.distributed.group_helpers import GroupWorker
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


def test_a_restarted_worker_finds_the_groups_state_in_one_object(stores, bucket):
    """A store instance opened afterwards (a restarted worker, nothing local) reads the group's connectors, restart
    requests, members and assignments from the bucket, where the group is one object."""
    a = stores()
    a.put_connector("c", {"name": "c", "config": {"by": "a"}}, create=True)
    a.join("w1:1", "http://w1:1", 60_000)
    a.request_restart("c", only_failed=True)
    a.rebalance(plan)
    restarted = stores()
    assert [s.name for s in restarted.connectors()] == ["c"]
    got = restarted.get_connector("c")
    assert (got.doc["config"]["by"], got.restarts, got.only_failed) == ("a", 1, True)
    assert [(m.worker_id, m.url) for m in restarted.members()] == [("w1:1", "http://w1:1")]
    assert restarted.current_epoch("c") == ("w1:1", a.assignments()["c"].epoch)
    name, _, client = bucket
    bucket_name, key = object_name(f"s3a://{name}/kconnect", a.group_id)
    assert bucket_name == name and key in client.objects(name, "kconnect")  # one object per group


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


@pytest.mark.timeout(900)
def test_two_workers_on_a_bucket_one_killed_the_other_takes_over_and_every_line_lands_once(bucket, tmp_path):
    """Two ``kconnect distributed`` processes whose group store, checkpoints and topic store are all in the bucket
    (the S3A keys in their worker configs): a source and a file sink created through one worker run; the worker
    running the sink is killed (``kill -9``, its Spark too); the other takes the sink over under a new epoch
    (a commit of the killed one would be fenced in the Spark query's commit) and every line is in the file once."""
    name, hadoop, _ = bucket
    group = "g-" + uuid.uuid4().hex[:8]
    keys = {"spark.master": "local[1]", "spark.driver.memory": "512m", **hadoop,
            "offset.storage.dir": f"s3a://{name}/{group}/state", "topics.dir": f"s3a://{name}/{group}/topics"}
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line-{i:03d}\n" for i in range(50)))
    workers = [GroupWorker(tmp_path, {"group.store.url": f"s3a://{name}/groups"}, group, f"w{i}", spark=keys).start()
               for i in range(2)]

    def explain() -> str:
        return "\n".join(f"--- {w.name}:\n" + "\n".join(line for line in w.stderr().splitlines()
                                                       if "spark_connect_bridge" in line or "Error" in line)[-3000:]
                         for w in workers)

    def written() -> list[str]:
        got = out.read_text().splitlines() if out.exists() else []
        assert len(got) == len(set(got)), f"duplicates in the file sink: {sorted(got)}"
        return got

    def running(via: GroupWorker, connector: str) -> str | None:
        status = via.status(connector)["connector"]
        assert status["state"] != "FAILED", status.get("trace")
        return status["worker_id"] if status["state"] == "RUNNING" else None

    try:
        for w in workers:
            w.wait_healthy()
        first = workers[0]
        for connector, config in (("lines", {"connector.class": "FileStreamSource", "file": str(src),
                                             "topic": "lines"}),
                                  ("sink", {"connector.class": "FileStreamSink", "file": str(out),
                                            "topics": "lines"})):
            r = first.call("POST", "/connectors", {"name": connector, "config": config})
            assert r.status_code == 201, r.text
        until(lambda: len(written()) == 50, what="the first 50 lines", timeout=400, explain=explain)
        owner = running(first, "sink")
        victim = next(w for w in workers if w.worker_id == owner)
        survivor = next(w for w in workers if w is not victim)
        victim.kill_all()
        with src.open("a") as f:
            f.write("".join(f"line-{i:03d}\n" for i in range(50, 80)))
        until(lambda: running(survivor, "sink") == survivor.worker_id == running(survivor, "lines"),
              what="the survivor to run both connectors", timeout=300, explain=explain)
        until(lambda: len(written()) == 80, what="the 30 lines after the kill", timeout=300, explain=explain)
        assert written() == [f"line-{i:03d}" for i in range(80)]  # each once, in order
        assert SECRET_KEY not in survivor.stderr()
    finally:
        for w in workers:
            w.stop()
