"""Debezium's keys that change a PostgreSQL connector's records, configs written as Debezium's docs write them:
``message.key.columns``, ``column.propagate.source.type``/``datatype.propagate.source.type``,
``binary.handling.mode``, ``column.mask.with.<n>.chars``, ``column.truncate.to.<n>.chars``. Each against a real
PostgreSQL (snapshot and stream), row by row; tests/differential/test_debezium_postgres.py ("dbz-keys") compares
the same keys with Debezium's own output. Bad values fail naming the key before data moves."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical
from spark_connect_bridge.errors import ConfigError
from tests.support import servers

TABLES = """
    create table customers (id int primary key, name varchar(20), email text, code char(3), photo bytea,
                            amount numeric(10,2), tags text[]);
    create table orders (id bigint primary key, customer int, note varchar(50));
    alter table orders replica identity full;
    insert into customers values (1, 'ada lovelace', 'ada@example.com', 'abc', '\\x01ff00', 1.25, '{x}'),
                                 (2, null, null, null, null, null, null);
    insert into orders values (1, 7, 'first order'), (2, 8, null);
"""
CHANGES = """
    update customers set name = 'grace hopper', photo = '\\xfbff' where id = 1;
    update orders set customer = 9 where id = 1;
    update orders set note = 'changed' where id = 2;
"""


@pytest.fixture(scope="module")
def pg() -> tuple[str, int]:
    return servers.postgres()


def _sql(pg: tuple[str, int], database: str, sql: str) -> None:
    with psycopg.connect(host=pg[0], port=pg[1], user="postgres", dbname=database, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def database(pg) -> str:
    name = f"cols_{uuid.uuid4().hex[:8]}"
    _sql(pg, "postgres", f'create database "{name}"')
    _sql(pg, name, TABLES)
    yield name
    _sql(pg, name, "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                   "where database = current_database() and not active")


def _config(pg: tuple[str, int], database: str, **keys: str) -> dict[str, str]:
    return {"name": "cols", "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": pg[0], "database.port": str(pg[1]), "database.user": "postgres",
            "database.dbname": database, "topic.prefix": "shop", "plugin.name": "pgoutput",
            "slot.name": f"slot_{database}", **keys}


def _read(connector: Any, a: dict, b: dict) -> list[dict]:
    return [row for t in connector.plan(a, b) for r in t.ranges for batch in connector.read_range(r)
            for row in batch.to_pylist()]


def _events(pg: tuple[str, int], database: str, **keys: str) -> tuple[Any, list[dict]]:
    """The connector, and its snapshot events then the events of CHANGES."""
    src = build_connector(_config(pg, database, **keys), kind="source")
    start = canonical(src.initial_offsets())
    snapshot_end = canonical(src.latest_offsets(start, None, None))
    _sql(pg, database, CHANGES)
    end = canonical(src.latest_offsets(snapshot_end, None, None))
    rows = _read(src, start, snapshot_end) + _read(src, snapshot_end, end)
    src.stop()
    return src, rows


def _of(rows: list[dict], table: str) -> list[tuple]:
    return [(r["key"], r["value"]["op"] if r["value"] else None,
             r["value"] and (r["value"]["after"] or r["value"]["before"])) for r in rows
            if r["topic"] == f"shop.public.{table}"]


def test_message_key_columns_make_each_matching_tables_key(pg, database):
    src, rows = _events(pg, database, **{"message.key.columns": "public.orders:customer,note"})
    keys = [(key, op) for key, op, _ in _of(rows, "orders")]
    # the key is (customer, note) in the table's order; a change of it is Debezium's delete + tombstone + create
    assert [(k and (k.get("customer"), k.get("note")), op) for k, op in keys] == [
        ((7, "first order"), "r"), ((8, None), "r"),
        ((7, "first order"), "d"), ((7, "first order"), None), ((9, "first order"), "c"),
        ((8, None), "d"), ((8, None), None), ((8, "changed"), "c")]
    assert [k["id"] for k, _, _ in _of(rows, "customers")] == [1, 2, 1]  # a table it does not name keeps its key
    key_type = src.schema()["key"].dataType
    assert {"customer", "note", "id"} <= set(key_type.fieldNames())


def test_binary_handling_modes_write_bytea_as_debezium_strings(pg, database):
    photos = {}
    for mode in ("bytes", "base64", "base64-url-safe", "hex"):
        _sql(pg, database, "update customers set photo = '\\x01ff00' where id = 1")
        db = database
        src = build_connector(_config(pg, db, **{"binary.handling.mode": mode, "snapshot.mode": "initial_only",
                                                 "slot.name": f"slot_{db}_{mode.replace('-', '_')}"}), kind="source")
        start = canonical(src.initial_offsets())
        rows = _read(src, start, canonical(src.latest_offsets(start, None, None)))
        src.stop()
        photos[mode] = [r["value"]["after"]["photo"] for r in rows if r["topic"] == "shop.public.customers"]
    assert photos == {"bytes": [b"\x01\xff\x00", None], "base64": ["Af8A", None], "base64-url-safe": ["Af8A", None],
                      "hex": ["01ff00", None]}
    _sql(pg, database, "update customers set photo = '\\xfbff' where id = 1")
    _, rows = _events(pg, database, **{"binary.handling.mode": "base64-url-safe"})
    assert [after["photo"] for _, op, after in _of(rows, "customers")] == ["-_8=", None, "-_8="]


def test_propagate_source_type_puts_debeziums_parameters_in_the_schema(pg, database):
    src, _ = _events(pg, database, **{"column.propagate.source.type": r"public\.customers\.(name|amount)",
                                      # <schema>.<table>.<type>, as Debezium's ColumnMappers matches it:
                                      # the bare int4 matches no column (customers.id is int4)
                                      "datatype.propagate.source.type": r"int4,.+\.int8,public\.customers\._text"})
    row = src.schema()["value"].dataType["after"].dataType

    def params(field: str) -> dict:
        return {k: v for k, v in (row[field].metadata.get("connect.parameters") or {}).items()
                if k.startswith("__debezium")}

    prefix = "__debezium.source.column."
    assert params("name") == {prefix + "type": "VARCHAR", prefix + "name": "name", prefix + "length": "20",
                              prefix + "scale": "0"}
    assert params("amount") == {prefix + "type": "NUMERIC", prefix + "name": "amount", prefix + "length": "10",
                                prefix + "scale": "2"}
    assert params("tags") == {prefix + "type": "_TEXT", prefix + "name": "tags", prefix + "length": "2147483647",
                              prefix + "scale": "0"}
    assert params("id") == {}  # customers.id is int4 (a bare type name); orders.id (int8) is a field of its own
    assert params("id__public_orders")[prefix + "type"] == "INT8"
    assert params("email") == {}
    # the key is built without Debezium's column mappers: no parameters there
    assert not src.schema()["key"].dataType["id__public_orders"].metadata.get("connect.parameters")


def test_mask_and_truncate_change_only_the_named_character_columns(pg, database):
    _, rows = _events(pg, database, **{"column.mask.with.5.chars": r"public\.customers\.(email|amount)",
                                       "column.truncate.to.4.chars": "public.customers.name,public.orders.note,"
                                                                     "public.customers.code"})
    customers = [(after["name"], after["email"], after["code"], after["amount"])
                 for _, _, after in _of(rows, "customers")]
    # masks replace nulls too (Debezium's); a numeric column is not masked; char(3) is no longer than 4: untouched
    assert [(n, e, c, str(a) if a is not None else None) for n, e, c, a in customers] == [
        ("ada ", "*****", "abc", "1.25"), (None, "*****", None, None), ("grac", "*****", "abc", "1.25")]
    assert [after["note"] for _, op, after in _of(rows, "orders") if op] == ["firs", None, "firs", "chan"]


@pytest.mark.parametrize("key, value, message", [
    ("message.key.columns", "public.orders", "is not <table regex>:<column>"),
    ("message.key.columns", "public.orders:(", "is not a valid regular expression"),
    ("column.propagate.source.type", "public.customers.(", "is not a valid regular expression"),
    ("binary.handling.mode", "base32", "base32"),
    ("column.truncate.to.0.chars", "public.orders.note", "the length must be positive"),
    ("column.mask.with.3.chars", "[", "is not a valid regular expression"),
    ("column.mask.hash.SHA-256.with.salt.CzQMA0cB5K", "public.orders.note", "not implemented here"),
])
def test_bad_values_fail_naming_the_key_before_data_moves(key, value, message):
    config = _config(("localhost", 1), "nowhere", **{key: value})
    with pytest.raises(ConfigError) as e:
        build_connector(config, kind="source")
    assert e.value.problems[0].key == key and message in str(e.value)
