"""A group of ``kconnect distributed`` workers as real processes on loopback, with a Kafka Connect distributed
worker config plus the group store (PostgreSQL, conf/connect-distributed-postgres.properties): one group, started
once for the module. (A group on Kafka: test_group_kafka.py.)

One FileStreamSource writes numbered lines into the topic store; three exactly-once sinks (file, JDBC on
PostgreSQL, Delta) read them. The tests run in order on the same group: create through one worker and read
through the others; a fourth worker takes its share, moving one connector only; pause, resume and restart
through a worker that does not own the connector; ``kill -9`` of a worker mid-stream loses and duplicates nothing; a
worker paused (SIGSTOP) past its lease is fenced and leaves the data intact; the whole group restarted finds every
connector in its target state.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.group_helpers import GroupWorker, until
from tests.support import servers

pytestmark = pytest.mark.timeout(1200)

SOURCE, FILE_SINK, JDBC_SINK, DELTA_SINK = "lines-source", "file-sink", "jdbc-sink", "delta-sink"
CONNECTORS = (SOURCE, FILE_SINK, JDBC_SINK, DELTA_SINK)


class Group:
    """The module's workers, their shared directory and the data the connectors move."""

    def __init__(self, shared: Path, store_url: str, pg: tuple[str, int], database: str):
        self.shared, self.store_url, self.pg, self.database = shared, store_url, pg, database
        self.group_id = "connect-cluster-" + uuid.uuid4().hex[:6]
        self.workers: list[GroupWorker] = []
        self.lines_written = 0
        self._names = 0
        #: the owners when the fourth worker was started (its Spark starts while the first data flows)
        self.owners_before_fourth: dict[str, str] = {}

    def start_worker(self) -> GroupWorker:
        """Start one more worker process (it joins the group once its Spark session is up)."""
        worker = GroupWorker(self.shared, {"group.store.url": self.store_url}, self.group_id,
                             f"w{self._names}").start()
        self._names += 1
        self.workers.append(worker)
        return worker

    def add_workers(self, n: int) -> list[GroupWorker]:
        new = [self.start_worker() for _ in range(n)]
        for w in new:
            w.wait_healthy()
        return new

    def until(self, predicate: Any, *, what: str, timeout: float = 300.0) -> Any:
        return until(predicate, what=what, timeout=timeout, explain=self.explain)

    def explain(self) -> str:
        """What each sink holds and the end of each worker's log, for a failed wait."""
        held = {name: len(rows()) for name, rows in ((FILE_SINK, self.file_rows), (JDBC_SINK, self.jdbc_rows),
                                                     (DELTA_SINK, self.delta_rows))}
        logs = "\n".join(f"--- {w.name} ({w.worker_id}):\n" + "\n".join(
            line for line in w.stderr().splitlines() if "spark_connect_bridge" in line or "Error" in line)[-3000:]
            for w in self.workers)
        return f"{self.lines_written} lines written; sinks hold {held}\n{logs}"

    def live(self) -> list[GroupWorker]:
        return [w for w in self.workers if w.proc is not None and w.proc.poll() is None]

    def append(self, n: int) -> None:
        with open(self.shared / "in.txt", "a") as f:
            f.write("".join(f"line-{i:05d}\n" for i in range(self.lines_written, self.lines_written + n)))
        self.lines_written += n

    def expected(self) -> list[str]:
        return [f"line-{i:05d}" for i in range(self.lines_written)]

    def owners(self, via: GroupWorker | None = None) -> dict[str, str]:
        via = via or self.live()[0]
        return {n: via.status(n)["connector"]["worker_id"] for n in CONNECTORS}

    def running_on_live_workers(self, names=CONNECTORS) -> dict[str, str] | None:
        via = self.live()[0]
        ids = {w.worker_id for w in self.live()}
        out = {}
        for n in names:
            st = via.status(n)["connector"]
            assert st["state"] != "FAILED", (n, st.get("trace"))
            if st["state"] != "RUNNING" or st["worker_id"] not in ids:
                return None
            out[n] = st["worker_id"]
        return out

    # -- what each sink holds -------------------------------------------------------------------------------
    def file_rows(self) -> list[str]:
        path = self.shared / "out.txt"
        return sorted(path.read_text().splitlines()) if path.exists() else []

    def jdbc_rows(self) -> list[str]:
        import psycopg

        with psycopg.connect(host=self.pg[0], port=self.pg[1], user="postgres", dbname=self.database) as conn:
            try:
                return sorted(r[0] for r in conn.execute("SELECT line FROM lines").fetchall())
            except psycopg.errors.UndefinedTable:
                return []

    def delta_rows(self) -> list[str]:
        import deltalake

        path = self.shared / "delta" / "lines"
        if not (path / "_delta_log").is_dir():
            return []
        table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
        return sorted(str(v) for v in table.column("value").to_pylist())

    def sinks_hold_everything(self, *which: str) -> bool:
        want = self.expected()
        rows = {FILE_SINK: self.file_rows, JDBC_SINK: self.jdbc_rows, DELTA_SINK: self.delta_rows}
        for name in which or (FILE_SINK, JDBC_SINK, DELTA_SINK):
            got = rows[name]()
            dup = [line for line, n in Counter(got).items() if n > 1]
            assert not dup, f"{name} holds duplicates: {dup[:5]}"
            if got != want:
                return False
        return True


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    host, port = servers.postgres()
    import psycopg

    database = "group_" + uuid.uuid4().hex[:8]
    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    g = Group(tmp_path_factory.mktemp("group"), f"postgresql://postgres@{host}:{port}/{database}", (host, port),
              database)
    (g.shared / "in.txt").write_text("")
    try:
        g.add_workers(3)
        yield g
    finally:
        for w in g.workers:
            w.stop()


def _configs(g: Group) -> dict[str, dict[str, str]]:
    return {
        SOURCE: {"connector.class": "FileStreamSource", "file": str(g.shared / "in.txt"), "topic": "lines"},
        FILE_SINK: {"connector.class": "FileStreamSink", "file": str(g.shared / "out.txt"), "topics": "lines"},
        JDBC_SINK: {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "lines",
                    "connection.url": f"jdbc:postgresql://{g.pg[0]}:{g.pg[1]}/{g.database}",
                    "connection.user": "postgres", "connection.password": "secret-not-needed",
                    "insert.mode": "insert", "pk.mode": "none", "auto.create": "true", "table.name.format": "lines",
                    "transforms": "hoist",
                    "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
                    "transforms.hoist.field": "line"},
        DELTA_SINK: {"connector.class": "delta-sink", "topics": "lines",
                     "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                     "delta.table.path": str(g.shared / "delta" / "lines")},
    }


def test_connectors_created_through_one_worker_are_read_through_the_others(group):
    w0, w1, w2 = group.workers
    for name, config in _configs(group).items():
        r = w0.call("POST", "/connectors", {"name": name, "config": config})
        assert r.status_code == 201, r.text
    assert w0.call("POST", "/connectors", {"name": SOURCE, "config": _configs(group)[SOURCE]}).status_code == 409
    assert sorted(w1.get("/connectors")) == sorted(CONNECTORS)
    assert w2.get(f"/connectors/{JDBC_SINK}/config")["connection.password"] != "secret-not-needed"
    group.append(200)
    owners = group.until(group.running_on_live_workers, what="every connector RUNNING")
    assert sorted(Counter(owners.values()).values()) == [1, 1, 2]  # spread evenly over three workers
    assert w2.status(SOURCE)["connector"]["worker_id"] == w1.status(SOURCE)["connector"]["worker_id"]
    group.owners_before_fourth = owners
    group.start_worker()  # the next test's fourth worker: its Spark starts while the first lines flow
    group.until(group.sinks_hold_everything, what="the first 200 lines in every sink")


def test_a_fourth_worker_takes_its_share_moving_one_connector(group):
    before, w3 = group.owners_before_fourth, group.workers[3]
    w3.wait_healthy()
    after = group.until(lambda: (o := group.running_on_live_workers()) and w3.worker_id in o.values() and o,
                  what="the fourth worker to run a connector")
    assert sorted(Counter(after.values()).values()) == [1, 1, 1, 1]
    assert sum(before[n] != after[n] for n in CONNECTORS) == 1  # incremental: only what must move
    group.append(50)
    group.until(group.sinks_hold_everything, what="50 more lines")


def test_pause_resume_and_restart_reach_the_owner(group):
    owner_id = group.owners()[FILE_SINK]
    other = next(w for w in group.live() if w.worker_id != owner_id)
    owner = next(w for w in group.live() if w.worker_id == owner_id)
    assert other.call("PUT", f"/connectors/{FILE_SINK}/pause").status_code == 202
    group.until(lambda: owner.status(FILE_SINK)["connector"]["state"] == "PAUSED", what="the owner to pause it")
    group.until(lambda: other.status(FILE_SINK)["connector"] == {"state": "PAUSED", "worker_id": owner_id},
          what="the owner's PAUSED status through another worker")
    stopped_before = owner.stderr().count(f"Connector {FILE_SINK}: query stopped")
    assert other.call("PUT", f"/connectors/{FILE_SINK}/resume").status_code == 202
    group.until(lambda: other.status(FILE_SINK)["connector"]["state"] == "RUNNING", what="the owner to resume it")
    assert other.call("POST", f"/connectors/{FILE_SINK}/restart").status_code == 204
    group.until(lambda: owner.stderr().count(f"Connector {FILE_SINK}: query stopped") > stopped_before,
          what="the owner to restart the query")
    group.append(50)
    group.until(lambda: group.running_on_live_workers() and group.sinks_hold_everything(), what="50 more lines")


def test_kill_9_mid_stream_loses_and_duplicates_nothing(group):
    owners = group.owners()
    victim = next(w for w in group.live() if w.worker_id == owners[JDBC_SINK])
    group.append(300)
    group.until(lambda: len(group.jdbc_rows()) > len(group.expected()) - 300, what="the JDBC sink mid-stream")
    victim.kill()
    group.append(100)
    moved = group.until(group.running_on_live_workers, what="the killed worker's connectors RUNNING elsewhere")
    assert victim.worker_id not in moved.values()
    group.until(group.sinks_hold_everything, what="every line exactly once after the kill")


def test_a_worker_paused_past_its_lease_is_fenced(group):
    owners = group.owners()
    zombie = next(w for w in group.live() if w.worker_id == owners[FILE_SINK])
    group.append(100)
    zombie.signal(signal.SIGSTOP)
    try:
        others = [w for w in group.live() if w is not zombie]
        group.until(lambda: others[0].status(FILE_SINK)["connector"]["worker_id"] != zombie.worker_id
              and others[0].status(FILE_SINK)["connector"]["state"] == "RUNNING",
              what="another worker to take the paused worker's file sink over")
        group.append(100)
        group.until(lambda: group.sinks_hold_everything(FILE_SINK), what="the new owner to write the lines")
    finally:
        zombie.signal(signal.SIGCONT)

    def fenced() -> bool:
        log = zombie.stderr()
        return "lease in group" in log and (f"Connector {FILE_SINK} now belongs to" in log or "fenced" in log)

    group.until(fenced, what="the woken worker to find its lease lost and stop the connector")
    group.append(100)
    group.until(group.sinks_hold_everything, what="every line exactly once after the fenced worker woke")


def test_a_restarted_group_finds_every_connector_in_its_target_state(group):
    via = group.live()[0]
    assert via.call("PUT", f"/connectors/{FILE_SINK}/pause").status_code == 202
    assert via.call("PUT", f"/connectors/{DELTA_SINK}/stop").status_code == 204
    group.until(lambda: via.status(FILE_SINK)["connector"]["state"] == "PAUSED"
          and via.status(DELTA_SINK)["connector"]["state"] == "STOPPED", what="paused and stopped")
    stopping = group.live()
    for w in stopping:
        w.signal(signal.SIGINT)  # all at once: no connector moves from one stopping worker to another
    for w in stopping:
        w.stop()
    assert [w.proc.returncode for w in stopping if w.proc] == [0] * len(stopping), group.explain()  # clean stops
    group.add_workers(2)  # a smaller group: the connectors are spread over what there is
    want = {SOURCE: "RUNNING", JDBC_SINK: "RUNNING", FILE_SINK: "PAUSED", DELTA_SINK: "STOPPED"}
    via = group.live()[0]
    group.until(lambda: {n: via.status(n)["connector"]["state"] for n in CONNECTORS} == want,
          what="every connector back in its target state")
    group.append(100)
    group.until(lambda: group.sinks_hold_everything(JDBC_SINK), what="the JDBC sink to go on after the restart")
