"""JsonConverter with schemas.enable=true on the sink side: the type comes from the messages, as in Kafka
Connect, also on a stream (per micro-batch) and with one schema per topic; a config that cannot work is
reported by validation, not at the start."""

from __future__ import annotations

import json
import sqlite3

from pyspark.sql.types import BinaryType

from spark_connect_bridge.converters import apply_sink_converters
from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.core.topic_schemas import topic_layouts
from spark_connect_bridge.engine.pipeline import write_stream
from spark_connect_bridge.runtime.validate import validate_connector_config

JSON = "org.apache.kafka.connect.json.JsonConverter"
JDBC_SINK = "io.confluent.connect.jdbc.JdbcSinkConnector"


def _envelope(name: str, fields: list[tuple[str, str, bool]], payload: dict) -> bytes:
    schema = {"type": "struct", "name": name, "optional": False,
              "fields": [{"field": f, "type": t, "optional": opt} for f, t, opt in fields]}
    return json.dumps({"schema": schema, "payload": payload}).encode()


ORDER = [("id", "int64", False), ("note", "string", True)]
CUSTOMER = [("id", "int32", False), ("name", "string", True), ("vip", "boolean", True)]
MESSAGES = [
    ("orders", _envelope("shop.orders.Value", ORDER, {"id": 1, "note": "first"})),
    ("customers", _envelope("shop.customers.Value", CUSTOMER, {"id": 7, "name": "Ann", "vip": True})),
    ("orders", _envelope("shop.orders.Value", ORDER, {"id": 2, "note": None})),
    ("customers", _envelope("shop.customers.Value", CUSTOMER, {"id": 8, "name": "Bob", "vip": False})),
]


def _records(spark, messages):
    rows = [(None, v, t, 0, i, None, []) for i, (t, v) in enumerate(messages)]
    return spark.createDataFrame(rows, record_schema(BinaryType(), BinaryType()))


def _sink_config(url: str, **extra: str) -> dict[str, str]:
    """A Confluent JDBC sink config as its documentation writes it: no project-only keys."""
    return {"name": "mirror", "connector.class": JDBC_SINK, "connection.url": url, "topics": "orders,customers",
            "auto.create": "true", "insert.mode": "insert", "pk.mode": "none",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": JSON, "value.converter.schemas.enable": "true", **extra}


def _table(path, table: str) -> tuple[list[str], list[tuple]]:
    with sqlite3.connect(path) as c:
        cols = [r[1] for r in c.execute(f'pragma table_info("{table}")')]
        rows = sorted(tuple(r) for r in c.execute(f'select * from "{table}"'))
    return cols, rows


def test_a_stream_of_envelopes_reaches_the_jdbc_sink_with_each_topics_own_columns(spark, tmp_path):
    source_dir = tmp_path / "in"
    _records(spark, MESSAGES[:2]).write.parquet(str(source_dir / "b0"))
    _records(spark, MESSAGES[2:]).write.parquet(str(source_dir / "b1"))
    stream = (spark.readStream.schema(record_schema(BinaryType(), BinaryType())).option("maxFilesPerTrigger", 1)
              .parquet(str(source_dir / "*")))
    db = tmp_path / "mirror.db"
    q = write_stream(stream, _sink_config(f"jdbc:sqlite:{db}"), checkpoint=str(tmp_path / "ckpt"),
                     trigger={"availableNow": True})
    q.awaitTermination()
    assert q.exception() is None
    assert _table(db, "orders") == (["id", "note"], [(1, "first"), (2, None)])
    assert _table(db, "customers") == (["id", "name", "vip"], [(7, "Ann", 1), (8, "Bob", 0)])


def test_a_bad_message_on_a_stream_fails_the_query_naming_the_record(spark, tmp_path):
    source_dir = tmp_path / "in"
    _records(spark, [MESSAGES[0], ("orders", b"{'id': 3}")]).write.parquet(str(source_dir / "b0"))
    stream = spark.readStream.schema(record_schema(BinaryType(), BinaryType())).parquet(str(source_dir / "*"))
    q = write_stream(stream, _sink_config(f"jdbc:sqlite:{tmp_path / 'm.db'}"), checkpoint=str(tmp_path / "ckpt"),
                     trigger={"availableNow": True})
    try:
        q.awaitTermination()
    except Exception:  # noqa: BLE001 - the query's failure is checked below
        pass
    assert q.exception() is not None
    assert "VALUE_CONVERTER" in str(q.exception()) and "offset=1" in str(q.exception())


def test_one_schema_per_topic_gives_their_union_that_narrows_back(spark):
    typed = apply_sink_converters(_records(spark, MESSAGES), {"value.converter": JSON})
    layouts = topic_layouts(typed.schema, "value")
    assert layouts["orders"]["columns"] == ["id", "note"]
    assert layouts["customers"]["columns"] == ["id", "name", "vip"]
    assert layouts["orders"]["names"] == {"value": "shop.orders.Value"}
    # id is int32 in customers and int64 in orders: kept apart in the union (topics in name order)
    assert layouts["customers"]["fields"][0] == "id" and layouts["orders"]["fields"][0] == "id__orders"
    rows = {(r.topic, r.offset): r.value for r in typed.collect()}
    assert rows[("orders", 0)].id__orders == 1 and rows[("orders", 0)].note == "first"
    assert rows[("customers", 1)].id == 7 and rows[("customers", 1)].name == "Ann"
    assert rows[("customers", 1)].id__orders is None and rows[("orders", 0)].vip is None


def test_validation_reports_a_jdbc_sink_json_converter_without_schemas(spark):
    """Confluent's JDBC sink refuses schemaless values: validation says so, on the key that makes them so."""
    cfg = _sink_config("jdbc:sqlite:/tmp/never.db", **{"value.converter.schemas.enable": "false"})
    infos = validate_connector_config(JDBC_SINK, cfg)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    assert infos["error_count"] == 1 and list(errors) == ["value.converter.schemas.enable"]
    assert "requires records with a non-null Struct value" in errors["value.converter.schemas.enable"][0]
    assert validate_connector_config(JDBC_SINK, _sink_config("jdbc:sqlite:/tmp/never.db"))["error_count"] == 0
    fixed = {**cfg, "value.converter.spark.schema": "id BIGINT, note STRING"}
    assert validate_connector_config(JDBC_SINK, fixed)["error_count"] == 0


def test_a_micro_batch_of_tombstones_only_needs_no_schema(spark):
    df = _records(spark, [("orders", None), ("orders", None)])
    typed = apply_sink_converters(df, {"value.converter": JSON}, every_message=True)
    assert [r.value for r in typed.collect()] == [None, None]
