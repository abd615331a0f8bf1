"""The REST operations of two workers of one group that race each other, decided in the store (PostgreSQL; the
services are not started: no Spark, no queries), as ``PUT /connectors/{name}/config`` and ``DELETE`` answer."""

from __future__ import annotations

import uuid

import pytest

from spark_connect_bridge.runtime.errors import AlreadyExistsError, NotFoundError
from spark_connect_bridge.runtime.group.service import GroupService
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.support import servers


@pytest.fixture
def workers(tmp_path):
    """Two workers of a new group on the run's PostgreSQL, sharing ``tmp_path``."""
    host, port = servers.postgres()
    group = "g-" + uuid.uuid4().hex[:8]
    opened = [GroupService(parse_worker_config({
        "group.id": group, "group.store.url": f"postgresql://postgres@{host}:{port}/test",
        "offset.storage.dir": str(tmp_path / "state"), "connector.allowed.paths": str(tmp_path),
        "listeners": f"http://127.0.0.1:{18000 + i}"}, base_dir=str(tmp_path))) for i in range(2)]
    yield opened
    for service in opened:
        service.fence.remove()
        service.store.close()


def test_put_config_and_delete_take_the_other_way_when_another_worker_won(workers, tmp_path, monkeypatch):
    a, b = workers

    def sink(n: int) -> dict[str, str]:
        return {"connector.class": "FileStreamSink", "file": str(tmp_path / f"out-{n}.txt"), "topics": "t"}

    assert b.list_connectors() == []  # b's view, from before a creates the connector
    created, _ = a.put_config("x", sink(1))
    assert created  # 201
    with pytest.raises(AlreadyExistsError, match="Connector x already exists"):
        b.create({"name": "x", **sink(2)})
    created, info = b.put_config("x", sink(2))  # b's create loses: it replaces (200)
    assert not created and info["config"]["file"].endswith("out-2.txt")
    assert a.get_config("x")["file"].endswith("out-2.txt")

    a.delete("x")
    created, _ = b.put_config("x", sink(3))  # b still saw it: its replace finds it deleted and creates (201)
    assert created and a.get_config("x")["file"].endswith("out-3.txt")

    a.delete("x")
    with pytest.raises(NotFoundError):
        b.delete("x")  # deleted through the other worker: 404, and nothing brought back
    with pytest.raises(NotFoundError):
        b.pause("x")
    assert a.list_connectors() == b.list_connectors() == [] and a.store.connectors() == []

    # A delete through a lands between b's look at the store and b's write: the store refuses b's write.
    a.put_config("y", sink(4))
    assert b.list_connectors() == ["y"]
    a.delete("y")
    with monkeypatch.context() as stale:
        stale.setattr(b, "_sync", lambda: None)  # b decides on its view from before the delete
        with pytest.raises(NotFoundError):
            b.pause("y")
        with pytest.raises(NotFoundError):
            b.delete("y")
    assert b.store.get_connector("y") is None
    created, _ = b.put_config("y", sink(5))
    assert created and b.list_connectors() == ["y"]
