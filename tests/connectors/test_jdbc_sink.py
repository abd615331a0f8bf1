"""JDBC sink: insert/upsert/update, pk modes, deletes, DDL, exactly-once replay and row errors, on SQLite,
PostgreSQL and MariaDB (real servers), driven through the connector SPI (executor write + driver commit)."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from jdbc_support import my_conn, my_db, my_url, pg_conn, pg_db, pg_url, query, records  # noqa: F401

from spark_connect_bridge.connectors.base import CommitContext, WriteContext
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import (
    ConfigError,
    ConnectError,
    DataError,
    RecordError,
)

VALUE = pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2))])
KEY = pa.struct([("id", pa.int64())])


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db(request, tmp_path):
    """(url, fetch(sql) -> rows, quote char) for each database."""
    if request.param == "sqlite":
        import sqlite3

        path = tmp_path / "sink.db"

        def fetch(sql):
            with sqlite3.connect(path) as c:
                return [tuple(r) for r in c.execute(sql).fetchall()]
        return f"jdbc:sqlite:{path}", fetch, '"'
    if request.param == "postgresql":
        name = request.getfixturevalue("pg_db")
        c = pg_conn(name)
        request.addfinalizer(c.close)
        return pg_url(name), lambda sql: query(c, sql), '"'
    name = request.getfixturevalue("my_db")
    c = my_conn(name)
    request.addfinalizer(c.close)
    return my_url(name), lambda sql: query(c, sql.replace('"', "`")), "`"


_n = [0]


def table_name() -> str:
    _n[0] += 1
    return f"sink_t{_n[0]}"


def sink(url: str, **cfg):
    props = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": url,
             "auto.create": "true"}
    props.update({k.replace("_", "."): v for k, v in cfg.items()})
    return build_connector(props, kind="sink")


def run(s, batches, app=None, batch_id=0, part=0):
    app = (app or "app") + "-" + s.config["table.name.format"]
    msg = s.write(iter(batches), WriteContext(app, batch_id, part, 0))
    s.commit([msg], CommitContext(app, batch_id))


def rows_of(fetch, table, cols="id, name, amount"):
    out = fetch(f'SELECT {cols} FROM "{table}" ORDER BY id')
    return [tuple(float(v) if isinstance(v, decimal.Decimal) else v for v in r) for r in out]


def test_insert_and_replayed_batch_is_skipped(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t)
    b = records([{"id": 1, "name": "a", "amount": decimal.Decimal("1.50")},
                 {"id": 2, "name": "b", "amount": None}], VALUE)
    run(s, [b], batch_id=0)
    run(s, [b], batch_id=0)  # replay of batch 0: skipped
    assert rows_of(fetch, t) == [(1, "a", 1.5), (2, "b", None)]
    run(s, [records([{"id": 3, "name": "c", "amount": None}], VALUE, first_offset=2)], batch_id=1)
    assert len(rows_of(fetch, t)) == 3
    assert fetch('SELECT batch_id FROM "__kconnect_offsets" WHERE app_id = \'app-' + t + '\'') == [(1,)]
    # No staging table is left behind.
    names = fetch("SELECT name FROM sqlite_master" if url.startswith("jdbc:sqlite") else
                  "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog')")
    assert not [n for (n,) in names if n.startswith("__kc_s")]


def test_upsert_last_record_per_key_wins_and_tombstone_deletes(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_key", pk_fields="id",
             delete_enabled="true")
    run(s, [records([{"id": 1, "name": "a", "amount": None}, {"id": 2, "name": "b", "amount": None},
                     {"id": 3, "name": "c", "amount": None}], VALUE, keys=[{"id": 1}, {"id": 2}, {"id": 3}],
                    key_type=KEY)], batch_id=0)
    # One batch: update 1 twice (last wins), delete 2, delete-then-reinsert 3.
    run(s, [records([{"id": 1, "name": "x", "amount": None}, {"id": 1, "name": "y", "amount": decimal.Decimal(2)},
                     None, None, {"id": 3, "name": "c2", "amount": None}], VALUE,
                    keys=[{"id": 1}, {"id": 1}, {"id": 2}, {"id": 3}, {"id": 3}], key_type=KEY, first_offset=3)],
        batch_id=1)
    assert rows_of(fetch, t) == [(1, "y", 2.0), (3, "c2", None)]


def run_tasks(s, tasks, batch_id=0):
    """One micro-batch written by several tasks (task i is Spark partition i), then committed."""
    app = "app-" + s.config["table.name.format"]
    msgs = [s.write(iter(batches), WriteContext(app, batch_id, part, 0)) for part, batches in enumerate(tasks)]
    s.commit(msgs, CommitContext(app, batch_id))


def test_upsert_key_repeated_across_tasks_keeps_the_later_task_record(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_key", pk_fields="id",
             delete_enabled="true")
    run(s, [records([{"id": 5, "name": "old", "amount": None}], VALUE, keys=[{"id": 5}], key_type=KEY)])
    # Each task's keys are unique, but 1 and 2 are in both tasks (2 is deleted by the later one); 3 and 4
    # are in one task each.
    run_tasks(s, [[records([{"id": 1, "name": "a", "amount": None}, {"id": 2, "name": "b", "amount": None},
                            {"id": 3, "name": "c", "amount": None}], VALUE,
                           keys=[{"id": 1}, {"id": 2}, {"id": 3}], key_type=KEY)],
                  [records([{"id": 1, "name": "a2", "amount": None}, None, {"id": 4, "name": "d", "amount": None}],
                           VALUE, keys=[{"id": 1}, {"id": 2}, {"id": 4}], key_type=KEY, partition=1)]],
              batch_id=1)
    assert rows_of(fetch, t) == [(1, "a2", None), (3, "c", None), (4, "d", None), (5, "old", None)]


def test_upsert_of_unique_keys_without_tombstones_inserts_and_updates(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_key", pk_fields="id",
             delete_enabled="true")
    run(s, [records([{"id": 1, "name": "a", "amount": None}], VALUE, keys=[{"id": 1}], key_type=KEY)])
    run_tasks(s, [[records([{"id": 1, "name": "a2", "amount": decimal.Decimal(1)}], VALUE, keys=[{"id": 1}],
                           key_type=KEY)],
                  [records([{"id": 2, "name": "b", "amount": None}], VALUE, keys=[{"id": 2}], key_type=KEY,
                           partition=1)]], batch_id=1)
    assert rows_of(fetch, t) == [(1, "a2", 1.0), (2, "b", None)]


def test_upsert_tasks_with_interleaved_distinct_keys_apply_every_record(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_key", pk_fields="id",
             delete_enabled="true")
    run(s, [records([{"id": 3, "name": "old", "amount": None}], VALUE, keys=[{"id": 3}], key_type=KEY)])
    # Key ranges 1..3 and 2..4 overlap, but no key is in both tasks; 3 is deleted.
    run_tasks(s, [[records([{"id": 1, "name": "a", "amount": None}, None], VALUE, keys=[{"id": 1}, {"id": 3}],
                           key_type=KEY)],
                  [records([{"id": 2, "name": "b", "amount": None}, {"id": 4, "name": "d", "amount": None}], VALUE,
                           keys=[{"id": 2}, {"id": 4}], key_type=KEY, partition=1)]], batch_id=1)
    assert rows_of(fetch, t) == [(1, "a", None), (2, "b", None), (4, "d", None)]


def test_upsert_composite_key_repeated_in_a_task_keeps_the_last_record(db):
    url, fetch, _ = db
    t = table_name()
    key = pa.struct([("id", pa.int64()), ("name", pa.string())])
    s = sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_key")
    # (1, "a") twice in the first task's two Spark batches; (1, "b") differs in the second column only.
    run_tasks(s, [[records([{"id": 1, "name": "a", "amount": decimal.Decimal(1)}], VALUE,
                           keys=[{"id": 1, "name": "a"}], key_type=key),
                   records([{"id": 1, "name": "a", "amount": decimal.Decimal(2)},
                            {"id": 1, "name": "b", "amount": decimal.Decimal(3)}], VALUE,
                           keys=[{"id": 1, "name": "a"}, {"id": 1, "name": "b"}], key_type=key, first_offset=1)]])
    assert sorted(rows_of(fetch, t)) == [(1, "a", 2.0), (1, "b", 3.0)]


def test_only_integer_keys_are_proven_unique_outside_the_database():
    from spark_connect_bridge.connectors.jdbc.sink import _key_stats

    assert _key_stats([pa.table({"id": [3, 1]}), pa.table({"id": [2]})]) == (True, (1, 3))
    assert _key_stats([pa.table({"id": [1, 1]})]) == (False, None)
    # MariaDB's default collations make 'A' and 'a' one key: distinct bytes in Arrow prove nothing there (a
    # behaviour test cannot show it: MariaDB applies a staging table in insertion order, so it passes either way)
    assert _key_stats([pa.table({"name": ["A", "a"]})]) == (None, None)
    assert _key_stats([pa.table({"id": [1, 1], "name": ["a", "b"]})]) == (None, None)


def test_update_mode_changes_only_existing_rows(db):
    url, fetch, _ = db
    t = table_name()
    run(sink(url, table_name_format=t, insert_mode="upsert", pk_mode="record_value", pk_fields="id"),
        [records([{"id": 1, "name": "a", "amount": None}], VALUE)], app="a1")
    run(sink(url, table_name_format=t, insert_mode="update", pk_mode="record_value", pk_fields="id"),
        [records([{"id": 1, "name": "u", "amount": None}, {"id": 9, "name": "new", "amount": None}], VALUE)],
        app="a2")
    assert rows_of(fetch, t) == [(1, "u", None)]


def test_pk_mode_kafka_whitelist_and_topic_table_format(db):
    url, fetch, _q = db
    s = sink(url, table_name_format="kafka_${topic}", pk_mode="kafka", fields_whitelist="name",
             insert_mode="upsert")
    topic = table_name()
    b = records([{"id": 1, "name": "a", "amount": None}, {"id": 2, "name": "b", "amount": None}], VALUE,
                topic=topic, partition=3, first_offset=10)
    run(s, [b])
    out = fetch(f'SELECT "__connect_topic", "__connect_partition", "__connect_offset", name FROM "kafka_{topic}" '
                'ORDER BY 3')
    assert out == [(topic, 3, 10, "a"), (topic, 3, 11, "b")]
    cols = fetch(f"SELECT name FROM pragma_table_info('kafka_{topic}')") if url.startswith("jdbc:sqlite") else \
        fetch(f"SELECT column_name FROM information_schema.columns WHERE table_name = 'kafka_{topic}'")
    assert "amount" not in {c for (c,) in cols}


def test_auto_evolve_adds_and_widens_columns(db):
    url, fetch, _ = db
    t = table_name()
    narrow = pa.struct([("id", pa.int32()), ("n", pa.int16())])
    run(sink(url, table_name_format=t, pk_mode="record_value", pk_fields="id"),
        [records([{"id": 1, "n": 5}], narrow)], app="e1")
    wide = pa.struct([("id", pa.int32()), ("n", pa.int64()), ("extra", pa.string())])
    with pytest.raises(ConnectError, match=r"auto.evolve"):
        run(sink(url, table_name_format=t, pk_mode="record_value", pk_fields="id"),
            [records([{"id": 2, "n": 2**40, "extra": "x"}], wide)], app="e2")
    run(sink(url, table_name_format=t, pk_mode="record_value", pk_fields="id", auto_evolve="true"),
        [records([{"id": 2, "n": 2**40, "extra": "x"}], wide)], app="e3")
    assert fetch(f'SELECT id, n, extra FROM "{t}" ORDER BY id') == [(1, 5, None), (2, 2**40, "x")]


def test_rejected_row_names_its_record_or_is_reported(db):
    url, fetch, _ = db
    t = table_name()
    s = sink(url, table_name_format=t, pk_mode="record_value", pk_fields="id")
    run(s, [records([{"id": 5, "name": "exists", "amount": None}], VALUE)], app="r0")
    bad = records([{"id": 1, "name": "ok", "amount": None}, {"id": 5, "name": "dup", "amount": None},
                   {"id": 6, "name": "ok2", "amount": None}], VALUE, topic="orders", partition=2, first_offset=40)
    with pytest.raises(RecordError, match=r"topic=orders, partition=2, offset=41"):
        run(s, [bad], app="r1")
    assert rows_of(fetch, t) == [(5, "exists", None)]  # nothing of the failed batch is visible
    tolerant = sink(url, table_name_format=t, pk_mode="record_value", pk_fields="id", errors_tolerance="all")
    run(tolerant, [bad], app="r2")
    assert [(r.topic, r.partition, r.offset) for r in tolerant.last_rejected] == [("orders", 2, 41)]
    assert rows_of(fetch, t) == [(1, "ok", None), (5, "exists", None), (6, "ok2", None)]


def test_tombstone_without_delete_enabled_fails_with_coordinates(tmp_path):
    s = sink(f"jdbc:sqlite:{tmp_path}/x.db", pk_mode="record_key", pk_fields="id")
    with pytest.raises(RecordError, match="offset=7"):
        s.write(iter([records([None], VALUE, keys=[{"id": 1}], key_type=KEY, first_offset=7)]),
                WriteContext("a", 0, 0, 0))


@pytest.mark.parametrize("cfg, key", [
    ({"delete.enabled": "true"}, "delete.enabled"),
    ({"insert.mode": "upsert"}, "pk.mode"),
    ({"pk.mode": "record_value"}, "pk.fields"),
    ({"pk.mode": "sideways"}, "pk.mode"),
    ({"insert.mode": "merge"}, "insert.mode"),
    ({"connection.url": "jdbc:oracle:thin:@x:1521:o"}, "connection.url"),
    ({"quote.sql.identifiers": "sometimes"}, "quote.sql.identifiers"),
])
def test_config_errors_name_the_key(cfg, key, tmp_path):
    props = {"connector.class": "JdbcSinkConnector", "connection.url": f"jdbc:sqlite:{tmp_path}/x.db", **cfg}
    with pytest.raises(ConfigError) as e:
        build_connector(props, kind="sink")
    assert key in e.value.keys


def test_password_never_shown():
    props = {"connector.class": "JdbcSinkConnector", "connection.password": "s3cret",
             "connection.url": "jdbc:postgresql://127.0.0.1:1/nodb?user=x&password=s3cret2",
             "errors.retry.timeout": "100", "connection.backoff.ms": "10"}
    s = build_connector(props, kind="sink")
    assert "s3cret" not in repr(s) and "s3cret" not in repr(s._info)
    from spark_connect_bridge.errors import RetriableError

    with pytest.raises(RetriableError) as e:  # connection refused: retried, then RetriableError
        s.write(iter([]), WriteContext("a", 0, 0, 0))
    assert "s3cret" not in str(e.value)
    with pytest.raises(ConfigError) as e2:
        build_connector({**props, "connection.url": "jdbc:bogus://h/db?password=s3cret"}, kind="sink")
    assert "s3cret" not in str(e2.value)


def test_validate_input_rejects_non_struct_values(spark):
    from pyspark.sql.types import StringType

    from spark_connect_bridge.core.records import record_schema

    s = sink("jdbc:sqlite:/tmp/none.db")
    with pytest.raises(DataError, match="struct values"):
        s.validate_input(record_schema(StringType(), StringType()))


def test_validate_input_checks_only_the_whitelisted_fields(spark):
    """A struct field that fields.whitelist does not list is not written, so it is no problem (Confluent's sink
    maps only the listed fields); listed, it is."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    from spark_connect_bridge.core.records import record_schema

    value = StructType([StructField("id", LongType()), StructField("price", StructType([
        StructField("scale", IntegerType()), StructField("value", BinaryType())]))])
    sink("jdbc:sqlite:/tmp/none.db", fields_whitelist="id").validate_input(record_schema(StringType(), value))
    with pytest.raises(ConfigError, match="value field 'price' is struct"):
        sink("jdbc:sqlite:/tmp/none.db", fields_whitelist="id,price").validate_input(record_schema(StringType(), value))


def _task_sink(url: str, t: str, **cfg):
    return sink(url, table_name_format=t, commit_scope="task", **cfg)


def test_task_scope_tasks_commit_their_rows_once_and_replays_are_skipped(pg_db):  # noqa: F811 - fixture
    """commit.scope=task: each task COPYs into the table and commits with its own offsets row; a replayed task
    writes nothing, a replay split differently is refused, and no staging table is created."""
    url, c, t = pg_url(pg_db), pg_conn(pg_db), table_name()
    s = _task_sink(url, t)
    parts = [records([{"id": i, "name": f"n{i}", "amount": decimal.Decimal("1.25")} for i in range(p, 10, 2)],
                     VALUE, partition=p) for p in (0, 1)]
    app = "task-" + t

    def batch(batch_id, tasks, commit=True):
        msgs = [s.write(iter([parts[p]]), WriteContext(app, batch_id, p, 0)) for p in tasks]
        if commit:
            s.commit(msgs, CommitContext(app, batch_id))

    batch(0, [0], commit=False)  # task 0 committed, then the driver died before its commit
    assert query(c, f'SELECT count(*) FROM "{t}"') == [(5,)]
    batch(0, [0, 1])  # the replay: task 0 is skipped, task 1 writes, the driver records the batch
    batch(0, [0, 1])  # a replay of a committed batch writes nothing
    totals = query(c, f'SELECT count(*), count(DISTINCT id), sum(amount) FROM "{t}"')
    assert totals == [(10, 10, decimal.Decimal("12.50"))]
    with pytest.raises(ConnectError, match="same split on replay"):
        s.write(iter([parts[0].slice(0, 2)]), WriteContext(app, 1, 0, 0))  # committed with 2 records
        s.write(iter([parts[0].slice(0, 1)]), WriteContext(app, 1, 0, 0))
    assert not query(c, "SELECT 1 FROM information_schema.tables WHERE table_name LIKE '\\_\\_kc\\_s%'")
    c.close()


def test_task_scope_casts_through_a_temporary_stage_when_column_types_differ(pg_db):  # noqa: F811 - fixture
    url, c, t = pg_url(pg_db), pg_conn(pg_db), table_name()
    c.execute(f'CREATE TABLE "{t}" (id integer, name varchar(10), amount real, extra text DEFAULT \'d\')')
    c.commit()
    run(_task_sink(url, t), [records([{"id": 1, "name": "a", "amount": decimal.Decimal("2.50")}], VALUE)])
    assert query(c, f'SELECT id, name, amount, extra FROM "{t}"') == [(1, "a", 2.5, "d")]
    c.close()


def test_task_scope_rejected_rows_are_isolated_in_the_task(pg_db):  # noqa: F811 - fixture
    url, c, t = pg_url(pg_db), pg_conn(pg_db), table_name()

    def fetch(sql):
        return query(c, sql)
    s = _task_sink(url, t, pk_mode="record_value", pk_fields="id")
    run(s, [records([{"id": 5, "name": "exists", "amount": None}], VALUE)], app="r0")
    bad = records([{"id": 1, "name": "ok", "amount": None}, {"id": 5, "name": "dup", "amount": None},
                   {"id": 6, "name": "ok2", "amount": None}], VALUE, topic="orders", partition=2, first_offset=40)
    with pytest.raises(RecordError, match=r"topic=orders, partition=2, offset=41"):
        run(s, [bad], app="r1")
    assert rows_of(fetch, t) == [(5, "exists", None)]  # nothing of the failed task is visible
    tolerant = _task_sink(url, t, pk_mode="record_value", pk_fields="id", errors_tolerance="all")
    run(tolerant, [bad], app="r2")
    assert [(r.topic, r.partition, r.offset) for r in tolerant.last_rejected] == [("orders", 2, 41)]
    assert rows_of(fetch, t) == [(1, "ok", None), (5, "exists", None), (6, "ok2", None)]
    c.close()


def test_mariadb_load_data_keeps_special_characters_nulls_and_times(my_db):  # noqa: F811 - fixture
    """MariaDB staging is LOAD DATA LOCAL INFILE of an Arrow-built text file: tabs, newlines, backslashes,
    empty strings and NULLs, and timestamps (as db.timezone wall time) arrive unchanged."""
    import datetime as dt

    t = table_name()
    vt = pa.struct([("id", pa.int64()), ("s", pa.string()), ("ok", pa.bool_()), ("at", pa.timestamp("us", "UTC"))])
    at = dt.datetime(2024, 3, 1, 12, 30, 15, 250000, tzinfo=dt.UTC)
    vals = [{"id": 1, "s": "tab\there", "ok": True, "at": at}, {"id": 2, "s": "line\nbreak\\slash", "ok": False,
                                                                 "at": None},
            {"id": 3, "s": "", "ok": None, "at": at}, {"id": 4, "s": None, "ok": True, "at": at}]
    run(sink(my_url(my_db), table_name_format=t, db_timezone="Europe/Paris"), [records(vals, vt)])
    c = my_conn(my_db)
    got = query(c, f"SELECT id, s, ok, at FROM `{t}` ORDER BY id")
    c.close()
    local = dt.datetime(2024, 3, 1, 13, 30, 15, 250000)
    assert got == [(1, "tab\there", 1, local), (2, "line\nbreak\\slash", 0, None), (3, "", None, local),
                   (4, None, 1, local)]


JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


@pytest.mark.parametrize("cfg, keys, requirement", [
    ({}, ["value.converter.schemas.enable"],
     "Sink connector 'j' is configured with 'delete.enabled=false' and 'pk.mode=none' and therefore requires records "
     "with a non-null Struct value and non-null Struct schema, but value.converter.schemas.enable=false reads every "
     "value without a schema"),
    ({"pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true", "key.converter": JSON_CONVERTER,
      "key.converter.schemas.enable": "false"}, ["key.converter.schemas.enable", "value.converter.schemas.enable"],
     "Sink connector 'j' is configured with 'delete.enabled=true' and 'pk.mode=record_key' and therefore requires "
     "records with a non-null key and non-null Struct or primitive key schema, but key.converter.schemas.enable="
     "false reads every key without a schema"),
])
def test_schemaless_json_is_refused_at_validation_with_confluents_reason(cfg, keys, requirement, tmp_path):
    """Confluent's sink fails every schemaless record (its RecordValidator); here the config that makes them so is
    refused before any data moves, with the original's reason and the keys that give the records a schema."""
    from spark_connect_bridge.engine.pipeline import prepare

    props = {"name": "j", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t",
             "connection.url": f"jdbc:sqlite:{tmp_path}/x.db", "value.converter": JSON_CONVERTER,
             "value.converter.schemas.enable": "false", **cfg}
    with pytest.raises(ConfigError) as e:
        prepare(props, kind="sink")
    assert sorted(e.value.keys) == keys
    assert requirement in str(e.value)
    assert "value.converter.schema.content" in str(e.value) and "value.converter.spark.schema" in str(e.value)
    prepare({**props, "value.converter.spark.schema": "id BIGINT", "key.converter.spark.schema": "id BIGINT"},
            kind="sink")  # a declared schema: accepted
