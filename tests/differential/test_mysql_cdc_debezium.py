"""Debezium's own MariaDB connector (``debezium-connector-mariadb``, in the reference Kafka Connect worker) and ours,
on the same server, tables and changes: the events compared field by field (key, op, before, after, the
``source`` fields that describe the change). Debezium's JSON (with schemas) is decoded to values by its Connect
schema; ours are the records our connector emits."""

from __future__ import annotations

import base64
import json
import time
from decimal import Decimal
from typing import Any

import pytest

from spark_connect_bridge.connectors.offsets import canonical
from tests.connectors.mysql_support import TYPE_VALUES, TYPES, config, execute, new_database, server, source, step
from tests.support.kafka_connect import KafkaConnectWorker, _records_in, topic_records
from tests.support.waiting import until

#: source fields both describe alike (Debezium's ts_ms, version and its own name differ by design)
_SOURCE = ("db", "table", "server_id", "gtid", "file", "pos", "row", "thread", "query", "snapshot")


@pytest.fixture(scope="module")
def debezium(reference_kafka):
    with KafkaConnectWorker(reference_kafka.bootstrap, plugins=("debezium-mariadb",), trace_tasks=False) as worker:
        yield worker


def _value(schema: dict | None, value: Any) -> Any:
    """A Connect JSON value as the Python value our records hold (Decimal, bytes, nested dicts and lists)."""
    if value is None or schema is None:
        return value
    name = schema.get("name")
    if name == "org.apache.kafka.connect.data.Decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return Decimal(f"{unscaled}E-{schema['parameters']['scale']}")  # exact (scaleb rounds to 28 digits)
    if schema["type"] == "bytes":
        return base64.b64decode(value)
    if schema["type"] == "struct":
        return {f["field"]: _value(f, value.get(f["field"])) for f in schema["fields"]}
    if schema["type"] == "array":
        return [_value(schema["items"], v) for v in value]
    return value


def _decoded(raw: bytes | None) -> Any:
    if raw is None:
        return None
    doc = json.loads(raw)
    return _value(doc["schema"], doc["payload"])


def _comparable(key: Any, value: Any) -> dict[str, Any]:
    if value is None:
        return {"key": key, "tombstone": True}
    return {"key": key, "op": value["op"], "before": value["before"], "after": value["after"],
            "source": {k: value["source"].get(k) for k in _SOURCE}}


def test_debezium_and_ours_emit_the_same_events_for_every_type(debezium, reference_kafka):
    """Snapshot, insert, update, delete (and its tombstone), a primary-key change (delete, tombstone, create) of
    a row of every type family: nine events, equal field by field; the snapshot's schema change events (the
    server's charset, DROP/CREATE DATABASE, USE, each table's CREATE TABLE) and the streamed DDL's, with the
    tables they describe (``tableChanges[].table``), alike but for the fields listed in the test."""
    db = new_database("dbz")
    execute(f"create table {new_database('other')}.x (id int primary key)")  # not captured
    execute(TYPES.format(db=db))
    execute(f"create table {db}.auto (id bigint unsigned not null auto_increment, name varchar(20) character set "
            f"latin1 not null default 'x' comment 'the name', total decimal(8,3) default 1.5, "
            f"g int as (id * 2) virtual, created timestamp not null default current_timestamp, "
            f"primary key (id, name)) comment 'auto t'")
    execute(f"insert into {db}.types values {TYPE_VALUES % 1}")
    execute(f"insert into {db}.types (id) values (3)")
    host, port = server()
    ours = source(config(db, **{"bigint.unsigned.handling.mode": "precise"}))
    at, rows = _all(ours, canonical(ours.initial_offsets()))  # our snapshot, before the changes
    snapshot_changes = [r for r in rows if r["topic"] == "shop"]
    rows = [r for r in rows if r["topic"] != "shop"]
    ddl = source(config(db, **{"snapshot.mode": "no_data"}))  # schema change events (include.schema.changes)
    ddl_at = canonical(ddl.initial_offsets())
    topic = f"dbz.{db}.types"
    name = f"dbz-{db}"
    debezium.create({
        "name": name, "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": host, "database.port": str(port), "database.user": "root", "database.password": "",
        "database.server.id": "5401", "topic.prefix": "dbz", "database.include.list": db,
        "bigint.unsigned.handling.mode": "precise", "include.schema.changes": "true",
        "schema.history.internal.kafka.bootstrap.servers": reference_kafka.bootstrap,
        "schema.history.internal.kafka.topic": f"history-{db}", "tasks.max": "1"})

    def ddl_seen(text: bytes) -> bool:
        return any(text in (r.value or b"").lower() for r in topic_records(reference_kafka.bootstrap, "dbz"))

    try:
        until(lambda: _records_in(reference_kafka.bootstrap, [topic]) >= 2, what="Debezium's records")
        execute(f"insert into {db}.types values {TYPE_VALUES % 2};\n"
                f"update {db}.types set vc = 'changed', dec1 = 1.5, tm = '01:02:03.5' where id = 1;\n"
                f"delete from {db}.types where id = 3;\nupdate {db}.types set id = 20 where id = 2")
        until(lambda: _records_in(reference_kafka.bootstrap, [topic]) >= 2 + 1 + 1 + 2 + 3, what="Debezium's records")
        execute(f"alter table {db}.types comment = 'types';\ncreate index ix_vc on {db}.types (vc);\n"
                f"alter table {db}.auto add column note text null, modify total decimal(10,2) not null;\n"
                f"create table {db}.more (id int primary key, e enum('a','b') default 'a')")
        until(lambda: ddl_seen(b"create table " + db.encode() + b".more"), what="Debezium's records")
        ddl_at, ddl_rows = _all(ddl, ddl_at)  # read before `more` is dropped: ours describes tables as they are
        execute(f"drop table {db}.more")
        until(lambda: ddl_seen(b"drop table"), what="Debezium's records")
    finally:
        debezium.delete(name)
    theirs = [_comparable(_decoded(r.key), _decoded(r.value)) for r in topic_records(reference_kafka.bootstrap, topic)]
    rows += [r for r in _all(ours, at)[1] if r["topic"] != "shop"]
    types = ours.layout().table(db, "types")  # our rows hold the union of both tables' columns: narrowed
    mine = [_comparable(_own(r["key"], types.key), _own(r["value"], types.columns)) for r in rows]
    assert len(mine) == len(theirs) == 9
    assert not _diffs(mine, theirs), _diffs(mine, theirs)

    streamed = [(_decoded(r.key), _decoded(r.value)) for r in topic_records(reference_kafka.bootstrap, "dbz")]
    # Debezium's snapshot also records every other database's tables (schema.history.internal.store.only.captured.
    # tables.ddl=false, its default); ours records the captured databases' only
    theirs = [_schema_change(k, v) for k, v in streamed
              if v["source"]["snapshot"] != "false" and v["databaseName"] in ("", db)]
    mine = [_schema_change({"databaseName": r["key"]["databaseName"]}, r["value"]) for r in snapshot_changes]
    assert [c["ddl"] for c in mine] == [c["ddl"] for c in theirs] and len(mine) == 1 + 2 + 3 + 2
    assert not _diffs(mine, theirs), _diffs(mine, theirs)

    theirs = [_schema_change(k, v) for k, v in streamed if v["source"]["snapshot"] == "false"]
    mine = [_schema_change({"databaseName": r["key"]["databaseName"]}, r["value"])
            for r in ddl_rows + _all(ddl, ddl_at)[1] if r["topic"] == "shop"]
    assert [c["ddl"] for c in mine] == [c["ddl"] for c in theirs] and len(mine) == 5
    # The one field that can only differ: Debezium takes a column's length from the statement's text (`id int`:
    # none), ours from the server's catalog (`int(11)`)
    created = mine[3]["tableChanges"][0]["table"]["columns"][0]
    assert (created["name"], created["length"]) == ("id", 11)
    created["length"] = None
    assert not _diffs(mine, theirs), _diffs(mine, theirs)


def _own(struct: dict | None, columns: Any) -> dict | None:
    """A record's key or envelope narrowed to one table's columns (by their names, not their union fields)."""
    if struct is None:
        return None
    if "op" not in struct:
        return {c.name: struct[c.field] for c in columns}
    return {**struct, **{part: None if struct[part] is None else {c.name: struct[part][c.field] for c in columns}
                         for part in ("before", "after")}}


def _diffs(mine: list[dict], theirs: list[dict]) -> str:
    """(event, part, field, ours, Debezium's) of every field that differs."""
    out: list[tuple] = []
    for i, (a, b) in enumerate(zip(mine, theirs)):
        for part in a:
            if isinstance(a[part], dict) and isinstance(b.get(part), dict):
                out += [(i, part, k, a[part].get(k), b[part].get(k)) for k in sorted(set(a[part]) | set(b[part]))
                        if a[part].get(k) != b[part].get(k)]
            elif a[part] != b.get(part):
                out.append((i, part, None, a[part], b.get(part)))
    return "\n".join(map(str, out))


def _schema_change(key: Any, value: Any) -> dict[str, Any]:
    return {"key": key, "source": {k: value["source"].get(k) for k in _SOURCE},
            **{k: value[k] for k in ("databaseName", "schemaName", "ddl")},
            "tableChanges": value["tableChanges"]}


def _all(src: Any, at: dict) -> tuple[dict, list]:
    rows: list = []
    for _ in range(10):
        end, batch = step(src, at)
        if end == at:
            break
        rows += batch
        at = end
    return at, rows


def _wait(check: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "Debezium's connector did not deliver in time"
        time.sleep(0.3)
