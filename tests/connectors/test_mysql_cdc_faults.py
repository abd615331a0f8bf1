"""Faults of the server and of the binlog stream under the MariaDB CDC source (no Spark: ranges are planned and
read as a query would): a server restart mid-stream, a binlog stream that stalls or drops mid-range. Every
change arrives once, in order."""

from __future__ import annotations

import threading

import pytest

from spark_connect_bridge.connectors.offsets import canonical
from spark_connect_bridge.core.retry import retries_so_far
from tests.connectors.mysql_support import config, execute, new_database, read, restartable_mariadb, source, step
from tests.support.binlog_proxy import BinlogProxy


def _created(events: list) -> list[int]:
    return [e["value"]["after"]["id"] for e in events if e["value"] and e["value"]["op"] == "c"]


def test_a_server_restart_mid_stream_loses_and_doubles_nothing():
    with restartable_mariadb() as server:
        def run(sql: str) -> None:
            server.execute(sql)

        db = new_database("restart", execute=server.execute)
        run(f"create table {db}.t (id int primary key)")
        cfg = config(db, port=server.port, **{"snapshot.mode": "no_data", "errors.retry.timeout": 60000,
                                              "errors.retry.delay.max.ms": 500})
        src = source(cfg)
        at = canonical(src.initial_offsets())
        for i in range(1, 6):
            run(f"insert into {db}.t values ({i})")
        at, events = step(src, at)
        for i in range(6, 11):
            run(f"insert into {db}.t values ({i})")
        end = canonical(src.latest_offsets(at, None, None))
        server.stop()  # the range is planned; the server goes away before it is read and comes back
        restart = threading.Timer(1.0, server.start)
        restart.start()
        try:
            events += read(src, at, end)  # waits for the server within errors.retry.timeout
        finally:
            restart.join()
        at = end
        for i in range(11, 16):  # after the restart: a new binlog file
            run(f"insert into {db}.t values ({i})")
        for _ in range(10):
            end, rows = step(src, at, 100)  # the driver's connection broke too: it reconnects
            if end == at:
                break
            events, at = events + rows, end
        assert _created(events) == list(range(1, 16))


@pytest.mark.parametrize("fault", ["stall", "drop"])
def test_a_binlog_stream_that_stalls_or_drops_mid_range_is_read_again_from_where_it_broke(fault):
    db = new_database("fault")
    execute(f"create table {db}.t (id int primary key, pad varchar(100))")
    cfg = config(db, **{"snapshot.mode": "no_data", "binlog.read.timeout.ms": 1000, "heartbeat.interval.ms": 500,
                        "errors.retry.timeout": 30000})
    src = source(cfg)
    start = canonical(src.initial_offsets())
    execute("start transaction;\n" + "".join(f"insert into {db}.t values ({i}, repeat('x', 100));\n"
                                             for i in range(1, 401)) + "commit")
    end = canonical(src.latest_offsets(start, None, None))
    host, port = src._settings.host, src._settings.port
    before = retries_so_far()
    with BinlogProxy((host, port), fault, after=20_000) as proxy:
        broken = source({**cfg, "database.port": str(proxy.port)})
        events = read(broken, start, end)
    assert proxy.dumps == 2 and retries_so_far() > before  # the first dump broke after 20 kB; read again
    assert _created(events) == list(range(1, 401))
