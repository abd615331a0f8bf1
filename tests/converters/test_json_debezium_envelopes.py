"""Debezium change events (JsonConverter envelopes with schemas, as Debezium's PostgreSQL connector writes them)
read by a sink of ours: several topics of envelopes in one sink, and Debezium's Decimal and VariableScaleDecimal
values, under errors.tolerance=all (a stream's per-batch conversion is tolerant). The messages are built here with
Debezium's schemas (field for field those of tests/differential/test_debezium_postgres.py), so no Debezium runs."""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal

import psycopg
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from spark_connect_bridge.converters import apply_sink_converters
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.core.topic_schemas import topic_layouts
from spark_connect_bridge.engine.pipeline import write_stream
from spark_connect_bridge.transforms import apply_transforms
from tests.support import servers

JSON = "org.apache.kafka.connect.json.JsonConverter"

SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "fields": [
    {"type": "string", "optional": False, "field": "version"}, {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"}, {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "lsn"}]}
DECIMAL_10_2 = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                "parameters": {"scale": "2", "connect.decimal.precision": "10"}}  # numeric(10,2)
VARIABLE_SCALE = {"type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
                  "doc": "Variable scaled decimal", "fields": [{"type": "int32", "optional": False, "field": "scale"},
                                                               {"type": "bytes", "optional": False, "field": "value"}]}
ORDERS = [("id", {"type": "int64", "optional": False}), ("customer", {"type": "int32", "optional": True}),
          ("note", {"type": "string", "optional": True})]
CUSTOMERS = [("id", {"type": "int32", "optional": False}), ("name", {"type": "string", "optional": False}),
             ("amount", DECIMAL_10_2)]


def _unscaled(value: str, scale: int) -> str:
    """Connect's Decimal bytes (two's complement of the unscaled value, minimal), as Base64."""
    n = int(Decimal(value).scaleb(scale))
    return base64.b64encode(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)).decode()


def _event(topic: str, columns: list, op: str | None, before: dict | None, after: dict | None,
           key: dict) -> tuple[str, bytes, bytes | None]:
    """(topic, key bytes, value bytes) of one Debezium change event; ``op`` None is the delete's tombstone."""
    row = {"type": "struct", "optional": True, "name": f"{topic}.Value",
           "fields": [{**schema, "field": name} for name, schema in columns]}
    envelope = {"type": "struct", "optional": False, "name": f"{topic}.Envelope", "version": 2, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {**SOURCE, "field": "source"},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
    key_schema = {"type": "struct", "optional": False, "name": f"{topic}.Key",
                  "fields": [{**schema, "field": name} for name, schema in columns if name in key]}
    key_bytes = json.dumps({"schema": key_schema, "payload": key}).encode()
    if op is None:
        return topic, key_bytes, None
    source = {"version": "3.6.1.Final", "name": "shop", "ts_ms": 1, "table": topic, "lsn": 7}
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 2}
    return topic, key_bytes, json.dumps({"schema": envelope, "payload": payload}).encode()


def _order(op, before, after):
    return _event("orders", ORDERS, op, before, after, {"id": (after or before)["id"]})


def _customer(op, before, after):
    return _event("customers", CUSTOMERS, op, before, after, {"id": (after or before)["id"]})


ADA = {"id": 1, "name": "ada", "amount": _unscaled("1.25", 2)}
BATCHES = [
    [_order("r", None, {"id": 1, "customer": 1, "note": "first"}),
     _customer("r", None, ADA),
     _order("r", None, {"id": 2, "customer": 2, "note": "second"}),
     _customer("c", None, {"id": 4, "name": "dee", "amount": _unscaled("99999999.99", 2)})],
    [_order("u", {"id": 2, "customer": 2, "note": "second"}, {"id": 2, "customer": 2, "note": "changed"}),
     _customer("u", ADA, {**ADA, "amount": _unscaled("-0.50", 2)}),
     _order("d", {"id": 1, "customer": 1, "note": "first"}, None), _order(None, None, {"id": 1}),
     _customer("c", None, {"id": 5, "name": "eve", "amount": None})],
]


def _records(spark, events, offset=0):
    rows = [(key, value, topic, 0, offset + i, None, []) for i, (topic, key, value) in enumerate(events)]
    return spark.createDataFrame(rows, record_schema(BinaryType(), BinaryType()))


@pytest.fixture
def pg_database():
    pg = servers.postgres()
    name = f"dbz_sink_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(host=pg[0], port=pg[1], user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    yield pg, name
    with psycopg.connect(host=pg[0], port=pg[1], user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def _table(pg, database: str, table: str) -> tuple[list, list]:
    with psycopg.connect(host=pg[0], port=pg[1], user="postgres", dbname=database) as conn:
        columns = conn.execute("select column_name, data_type from information_schema.columns where "
                               "table_name = %s order by ordinal_position", (table,)).fetchall()
        return columns, conn.execute(f'select * from "{table}" order by 1').fetchall()


def test_a_stream_of_several_topics_of_envelopes_reaches_each_topics_table(spark, tmp_path, pg_database):
    """Debezium's JDBC sink case with Confluent's sink of ours: ExtractNewRecordState, then ReplaceField's exclude,
    renames and include (each a topic's columns, ``id`` one kept apart per topic: orders' id is an int64), upserts
    by the record key, deletes; each topic's table gets its own columns and key type (orders.id bigint,
    customers.id integer), not the union of the topics'."""
    pg, database = pg_database
    for i, events in enumerate(BATCHES):
        _records(spark, events, offset=10 * i).write.parquet(str(tmp_path / "in" / f"b{i}"))
    stream = (spark.readStream.schema(record_schema(BinaryType(), BinaryType())).option("maxFilesPerTrigger", 1)
              .parquet(str(tmp_path / "in" / "*")))
    config = {"name": "dbz-mirror", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
              "topics": "orders,customers", "connection.url": f"jdbc:postgresql://{pg[0]}:{pg[1]}/{database}",
              "connection.user": "postgres", "insert.mode": "upsert", "pk.mode": "record_key",
              "delete.enabled": "true", "auto.create": "true", "key.converter": JSON, "value.converter": JSON,
              "transforms": "unwrap,drop,rename,keep",
              "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
              "transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
              "transforms.drop.exclude": "customer",
              "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
              "transforms.rename.renames": "note:remark,name:full_name",
              "transforms.keep.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
              "transforms.keep.include": "remark,full_name,amount"}
    query = write_stream(stream, config, checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    # the key's id (the value's is excluded by include), then each topic's own value columns
    assert _table(pg, database, "orders") == ([("id", "bigint"), ("remark", "text")], [(2, "changed")])
    assert _table(pg, database, "customers") == (
        [("id", "integer"), ("full_name", "text"), ("amount", "numeric")],
        [(1, "ada", Decimal("-0.50")), (4, "dee", Decimal("99999999.99")), (5, "eve", None)])


def test_debeziums_decimals_parse_under_errors_tolerance_all(spark):
    """numeric(10,2) as Connect's Decimal and numeric without a scale as Debezium's VariableScaleDecimal, the
    values of the differential test's customers table, with a second topic of envelopes beside them."""
    columns = CUSTOMERS + [("price", VARIABLE_SCALE)]
    price = {"scale": 3, "value": _unscaled("-12345678901234567890.123", 3)}
    events = [_event("customers", columns, "r", None, {**ADA, "price": price}, {"id": 1}),
              _event("customers", columns, "c", None, {"id": 4, "name": "dee", "amount": _unscaled("99999999.99", 2),
                                                       "price": None}, {"id": 4}),
              _event("customers", columns, "d", {"id": 2, "name": "", "amount": None, "price": None}, None,
                     {"id": 2}),
              _order("r", None, {"id": 1, "customer": 1, "note": "first"})]
    typed = apply_sink_converters(enable_error_column(_records(spark, events)),
                                  {"key.converter": JSON, "value.converter": JSON})
    rows = typed.select(F.col(ERROR_COL).alias("error"), "topic", "value").collect()
    assert [r.error for r in rows] == [None] * 4
    after = [r.value.after for r in rows]
    assert (after[0].amount, after[0].price.scale, after[0].price.value) == (
        Decimal("1.25"), 3, base64.b64decode(price["value"]))
    assert (after[1].amount, after[1].price) == (Decimal("99999999.99"), None)
    assert (rows[2].value.op, rows[2].value.before.name, after[2]) == ("d", "", None)
    # one envelope over the union of the rows, as a CDC connector's DataFrame: orders' id (int64) kept apart
    layouts = topic_layouts(typed.schema, "value")
    assert layouts["orders"]["fields"] == ["id__orders", "customer", "note"]
    assert layouts["customers"]["columns"] == ["id", "name", "amount", "price"]
    assert (after[3].id__orders, after[3].note, after[3].amount) == (1, "first", None)
    assert rows[3].value.source.table == "orders"


def _columns(df) -> dict[str, list[str]]:
    """Each topic's value columns, as a sink narrows them (its own, then those a transform added to all)."""
    return {topic: info["columns"] + info["added"] for topic, info in topic_layouts(df.schema, "value").items()}


KAFKA_SMT = "org.apache.kafka.connect.transforms"
ORDER_COLUMNS, CUSTOMER_COLUMNS = ["id", "customer", "note"], ["id", "name", "amount", "price"]
SMTS_AFTER_UNWRAP = [  # (SMT, its config, each topic's value columns after it)
    ("MaskField$Value", {"fields": "note,name"}, ORDER_COLUMNS, CUSTOMER_COLUMNS),
    ("Cast$Value", {"spec": "customer:int64,id:string"}, ORDER_COLUMNS, CUSTOMER_COLUMNS),
    ("TimestampConverter$Value", {"field": "customer", "target.type": "string", "format": "yyyy"},
     ORDER_COLUMNS, CUSTOMER_COLUMNS),
    ("InsertField$Value", {"topic.field": "from", "static.field": "origin", "static.value": "dbz"},
     ORDER_COLUMNS + ["from", "origin"], CUSTOMER_COLUMNS + ["from", "origin"]),
    ("Flatten$Value", {"delimiter": "_"}, ORDER_COLUMNS, ["id", "name", "amount", "price_scale", "price_value"]),
    ("HeaderFrom$Value", {"fields": "note", "headers": "note", "operation": "move"}, ["id", "customer"],
     CUSTOMER_COLUMNS),
    ("ReplaceField$Value", {"exclude": "id,note", "renames": "name:full_name"}, ["customer"],
     ["full_name", "amount", "price"]),
]


def test_smts_after_unwrap_keep_each_topics_columns(spark):
    """Every SMT that rebuilds the value struct keeps each topic's layout after ExtractNewRecordState: a field it
    adds belongs to every topic, one it drops or renames leaves that topic's columns (``id`` too, kept apart for
    orders as an int64), a flattened struct becomes its leaves in its own topic only."""
    columns = CUSTOMERS + [("price", VARIABLE_SCALE)]
    price = {"scale": 3, "value": _unscaled("1.500", 3)}
    events = [_event("customers", columns, "r", None, {**ADA, "price": price}, {"id": 1}),
              _order("r", None, {"id": 1, "customer": 1, "note": "first"})]
    typed = apply_sink_converters(_records(spark, events), {"key.converter": JSON, "value.converter": JSON})
    unwrap = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
    assert _columns(apply_transforms(typed, unwrap)) == {"orders": ORDER_COLUMNS, "customers": CUSTOMER_COLUMNS}
    for smt, props, orders, customers in SMTS_AFTER_UNWRAP:
        config = {**unwrap, "transforms": "unwrap,smt", "transforms.smt.type": f"{KAFKA_SMT}.{smt}",
                  **{f"transforms.smt.{k}": v for k, v in props.items()}}
        assert _columns(apply_transforms(typed, config)) == {"orders": orders, "customers": customers}, smt
