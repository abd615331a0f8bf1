"""Debezium's signals and incremental snapshots on the MariaDB CDC source (the run's throwaway MariaDB, no Spark:
ranges are planned and read as a query would): chunks interleaved with the stream, no gap or stale row, the
signal table never emitted, stop/pause/resume, additional-conditions, replays identical."""

from __future__ import annotations

import json

from spark_connect_bridge.connectors.offsets import canonical, dumps
from tests.connectors.mysql_support import config, execute, new_database, read, source, step


def _setup(rows: int = 25) -> tuple[str, dict]:
    db = new_database("inc")
    execute(f"create table {db}.t (id int primary key, v varchar(20));\n"
            f"create table {db}.other (id int primary key);\n"
            f"create table {db}.dbz_signal (id varchar(42) primary key, type varchar(32) not null, "
            f"data varchar(2048) null)")
    execute(f"insert into {db}.t values " + ", ".join(f"({i}, 'v{i}')" for i in range(1, rows + 1)))
    cfg = config(db, **{"signal.data.collection": f"{db}.dbz_signal", "incremental.snapshot.chunk.size": 10,
                        "snapshot.mode": "no_data"})
    return db, cfg


def _signal(db: str, sid: str, kind: str, data: dict | None = None) -> None:
    execute(f"insert into {db}.dbz_signal values (%s, %s, %s)", (sid, kind, json.dumps(data) if data else None))


def _run(src, at: dict, limit: int | None = 5, between=None, most: int = 30) -> tuple[dict, list, list]:
    """Steps until nothing moves: (position, events, ranges)."""
    events, ranges = [], []
    for i in range(most):
        end, rows = step(src, at, limit)
        if end == at:
            break
        ranges.append((at, end))
        events += rows
        at = end
        if between is not None:
            between(i)
    return at, events, ranges


def _mirror(events: list) -> dict[int, str]:
    rows: dict[int, str] = {}
    for e in events:
        v = e["value"]
        if v is None:
            continue
        if v["op"] == "d":
            rows.pop(v["before"]["id"], None)
        else:
            rows[v["after"]["id"]] = v["after"]["v"]
    return rows


def test_an_incremental_snapshot_interleaves_chunks_with_the_stream_and_replays_identically():
    db, cfg = _setup()
    src = source(cfg)
    assert all(t.table != "dbz_signal" for t in src.layout().tables)
    at = canonical(src.initial_offsets())
    _signal(db, "s1", "execute-snapshot", {"data-collections": [f"{db}.t"], "type": "incremental"})

    def changes(i: int) -> None:  # the stream changes rows before, inside and after the chunk being read
        if i == 0:
            execute(f"update {db}.t set v = 'new5' where id = 5;\ndelete from {db}.t where id = 15;\n"
                    f"insert into {db}.t values (100, 'v100');\nupdate {db}.t set v = 'new22' where id = 22")

    at, events, ranges = _run(src, at, between=changes)
    pos = at[next(iter(at))]
    assert "incremental" not in pos  # finished
    reads = [e for e in events if e["value"] and e["value"]["op"] == "r"]
    assert {e["value"]["source"]["snapshot"] for e in reads} == {"incremental"}
    # every row once, as of its chunk's binlog position (the changes made after the first chunk come as stream events)
    assert [e["key"]["id"] for e in reads] == sorted(set(range(1, 26)) - {15} | {100})
    assert {e["topic"] for e in events} == {f"shop.{db}.t"}  # the signal table is never emitted
    assert _mirror(events) == dict(execute(f"select id, v from {db}.t"))
    again = source(cfg)  # a replay of every range: the chunks travel in the offsets
    replayed = [row for a, b in ranges for row in read(again, json.loads(dumps(a)), json.loads(dumps(b)))]
    assert replayed == events


def test_stop_pause_resume_and_additional_conditions_drive_the_snapshot():
    db, cfg = _setup(rows=40)
    src = source(cfg)
    at = canonical(src.initial_offsets())
    _signal(db, "a", "execute-snapshot", {"data-collections": [f"{db}.t"], "type": "incremental",
                                          "additional-conditions": [{"data-collection": f"{db}.t",
                                                                     "filter": "id > 30 OR id < 3"}]})
    at, events, _ = _run(src, at)
    assert not events  # an OR is not in the filter language: the signal is rejected

    _signal(db, "b", "execute-snapshot", {"data-collections": [f"{db}.t"], "type": "incremental",
                                          "additional-conditions": [{"data-collection": f"{db}.t",
                                                                     "filter": "id > 12"}]})
    _signal(db, "c", "pause-snapshot")
    at, events, _ = _run(src, at)
    assert not events and json.loads(at[next(iter(at))]["incremental"])["paused"]
    _signal(db, "d", "resume-snapshot")
    end, rows = step(src, at)  # one chunk of 10 rows above 12
    assert [r["key"]["id"] for r in rows] == list(range(13, 23))
    _signal(db, "e", "stop-snapshot", {"data-collections": [f"{db}.t"], "type": "incremental"})
    at, events, _ = _run(src, end)
    assert not events and "incremental" not in at[next(iter(at))]


def test_a_row_changed_between_the_watermarks_comes_from_the_stream_not_the_chunk():
    """MySQL's watermarks (binlog positions before and after the chunk's read) on the MariaDB server: a change
    committed while the chunk is read falls inside the window, so the chunk's stale row is dropped."""
    db, cfg = _setup(rows=5)
    src = source(cfg)
    at = canonical(src.initial_offsets())
    session = src.session
    session._flavor = "mysql"  # the driver takes MySQL's watermarks
    real_position, real_connect = session.binlog_position, session.connect
    calls: list[str] = []

    def connect(**extra):  # the chunk's own connection: its read comes between the next two positions
        calls.append("connect")
        return real_connect(**extra)

    def position():
        calls.append("position")
        if calls[-3:] == ["connect", "position", "position"]:  # after the read, before the high watermark
            execute(f"update {db}.t set v = 'late' where id = 3")
        return real_position()

    _signal(db, "s", "execute-snapshot", {"data-collections": [f"{db}.t"], "type": "incremental"})
    session.binlog_position, session.connect = position, connect
    at, events, _ = _run(src, at, limit=None)
    reads = [e["key"]["id"] for e in events if e["value"] and e["value"]["op"] == "r"]
    updates = [e["value"]["after"] for e in events if e["value"] and e["value"]["op"] == "u"]
    assert reads == [1, 2, 4, 5] and updates == [{"id": 3, "v": "late"}]
    assert _mirror(events) == dict(execute(f"select id, v from {db}.t"))
