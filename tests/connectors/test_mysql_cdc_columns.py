"""Debezium's keys that change a MySQL/MariaDB connector's records, configs written as Debezium's docs write them
(``<database>.<table>`` where PostgreSQL has ``<schema>.<table>``): ``message.key.columns``,
``column.propagate.source.type``/``datatype.propagate.source.type``, ``column.mask.with.<n>.chars``,
``column.truncate.to.<n>.chars``, the same :class:`~spark_connect_bridge.connectors.cdc.columns.ColumnRules` as the
PostgreSQL connector's. One run against the run's MariaDB, snapshot then binlog stream, checked row by row."""

from __future__ import annotations

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.mysql.types import source_column_type
from spark_connect_bridge.connectors.offsets import canonical
from spark_connect_bridge.errors import ConfigError
from tests.connectors.mysql_support import config, execute, new_database, source, step

TABLES = """
create table {db}.customers (id int primary key, name varchar(20), email text, code char(3),
                             amount decimal(10,2), big bigint unsigned);
create table {db}.orders (id bigint primary key, customer int, note varchar(50));
insert into {db}.customers values (1, 'ada lovelace', 'ada@example.com', 'abc', 1.25, 7),
                                  (2, null, null, null, null, null);
insert into {db}.orders values (1, 7, 'first order'), (2, 8, null), (3, null, 'no customer')"""
CHANGES = """
update {db}.customers set name = 'grace hopper' where id = 1;
update {db}.orders set customer = 9 where id = 1;
update {db}.orders set note = 'changed' where id = 2"""


@pytest.fixture(scope="module")
def run() -> tuple[str, object, list[dict]]:
    """One connector with every key, its snapshot (in chunks of one row) then the binlog events of CHANGES."""
    db = new_database("cols")
    execute(TABLES.format(db=db))
    src = source(config(db, **{
        "include.schema.changes": "false",
        "message.key.columns": f"{db}.orders:customer,note",
        # the first rule matching a column decides (Debezium's order: truncation, mask, propagation)
        "column.propagate.source.type": rf"{db}\.customers\.(name|amount|id),{db}\.orders\.customer",
        # <database>.<table>.<type>, as Debezium's ColumnMappers matches it: a bare type name matches nothing
        "datatype.propagate.source.type": r"int,.+\.bigint unsigned",
        "column.mask.with.5.chars": rf"{db}\.customers\.(email|amount)",
        "column.truncate.to.4.chars": f"{db}.customers.name,{db}.orders.note,{db}.customers.code"}))
    pos = canonical(src.initial_offsets())
    rows: list[dict] = []
    for _ in range(10):  # one row per batch: chunks bounded by the primary key, not the (nullable) custom key
        pos, batch = step(src, pos, 1)
        rows += batch
        if not any("snapshot_table" in offset for offset in pos.values()):
            break
    execute(CHANGES.format(db=db))
    _, streamed = step(src, pos)
    src.stop()
    return db, src, rows + streamed


def _of(rows: list[dict], db: str, table: str) -> list[tuple]:
    return [(r["key"], r["value"]["op"] if r["value"] else None,
             r["value"] and (r["value"]["after"] or r["value"]["before"])) for r in rows
            if r["topic"] == f"shop.{db}.{table}"]


def test_message_key_columns_make_the_key_and_a_change_of_it_a_delete_and_create(run):
    db, _, rows = run
    keys = [(k and (k.get("customer"), k.get("note")), op) for k, op, _ in _of(rows, db, "orders")]
    # every snapshot row, the one with a null key column too; the key (customer, note) before the truncation
    assert keys == [
        ((7, "first order"), "r"), ((8, None), "r"), ((None, "no customer"), "r"),
        ((7, "first order"), "d"), ((7, "first order"), None), ((9, "first order"), "c"),
        ((8, None), "d"), ((8, None), None), ((8, "changed"), "c")]
    assert [k["id"] for k, _, _ in _of(rows, db, "customers")] == [1, 2, 1]  # a table it does not name


def test_mask_and_truncate_change_only_the_named_character_columns(run):
    db, _, rows = run
    customers = [(a["name"], a["email"], a["code"], a["amount"]) for _, _, a in _of(rows, db, "customers")]
    # masks replace nulls too (Debezium's); a decimal is not masked; char(3) is no longer than 4: untouched
    assert [(n, e, c, str(a) if a is not None else None) for n, e, c, a in customers] == [
        ("ada ", "*****", "abc", "1.25"), (None, "*****", None, None), ("grac", "*****", "abc", "1.25")]
    assert [a["note"] for _, op, a in _of(rows, db, "orders") if op] == [
        "firs", None, "no c", "firs", "firs", None, "chan"]


def test_propagated_parameters_are_debeziums_from_the_column_type(run):
    _, src, _ = run
    row = src.schema()["value"].dataType["after"].dataType

    def params(field: str) -> dict:
        return {k[len("__debezium.source.column."):]: v
                for k, v in (row[field].metadata.get("connect.parameters") or {}).items()
                if k.startswith("__debezium")}

    own = {f: {k: v for k, v in (row[f].metadata.get("connect.parameters") or {}).items()
               if k in ("masked", "truncateLength")} for f in ("name", "amount", "email")}
    assert own == {"name": {"truncateLength": "4"}, "amount": {"masked": "true"}, "email": {"masked": "true"}}
    assert params("name") == params("amount") == {}  # truncated, masked: propagation comes after
    assert params("id") == {"type": "INT", "name": "id", "length": "11"}  # MariaDB's int(11)
    assert params("customer") == {"type": "INT", "name": "customer", "length": "11"}
    assert params("big") == {"type": "BIGINT UNSIGNED", "name": "big", "length": "20"}  # MariaDB: bigint(20)
    assert params("email") == {} and params("code") == {}  # the bare type name "int" matches no column
    # the key fields (customers.id; orders' custom key) get none, as Debezium builds the key without mappers
    key = src.schema()["key"].dataType
    assert not key["id"].metadata.get("connect.parameters") and not key["customer"].metadata.get("connect.parameters")


@pytest.mark.parametrize("column_type, expected", [
    ("int(11) unsigned zerofill", ("INT UNSIGNED ZEROFILL", 11, None)), ("int", ("INT", -1, None)),
    ("decimal(10,2)", ("DECIMAL", 10, 2)), ("varchar(20)", ("VARCHAR", 20, None)), ("text", ("TEXT", -1, None)),
    ("datetime(3)", ("DATETIME", 3, None)), ("enum('a','b''c')", ("ENUM", 1, None)),
    ("set('x','y','z')", ("SET", 5, None))])
def test_source_column_type_is_debeziums_ddl_reading(column_type, expected):
    assert source_column_type(column_type) == expected


@pytest.mark.parametrize("key, value, message", [
    ("message.key.columns", "shop.orders", "is not <table regex>:<column>"),
    ("column.propagate.source.type", "shop.orders.(", "is not a valid regular expression"),
    ("column.truncate.to.0.chars", "shop.orders.note", "the length must be positive"),
    ("column.mask.hash.SHA-256.with.salt.CzQMA0cB5K", "shop.orders.note", "not implemented here"),
])
def test_bad_values_fail_naming_the_key_before_data_moves(key, value, message):
    with pytest.raises(ConfigError) as e:
        build_connector(config("nowhere", **{key: value}), kind="source")
    assert e.value.problems[0].key == key and message in str(e.value)
