"""JsonConverter with schemas.enable=true on the sink side: the type comes from the messages, as in Kafka
Connect, also on a stream (per micro-batch) and with one schema per topic; a config that cannot work is
reported by validation, not at the start."""

from __future__ import annotations

import json
import sqlite3

import pytest
from pyspark.sql.types import BinaryType

from spark_connect_bridge.converters import apply_sink_converters
from spark_connect_bridge.converters.json_envelopes import NO_SCHEMA, schema_of_prefix
from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.core.topic_schemas import topic_layouts
from spark_connect_bridge.engine.pipeline import write_stream
from spark_connect_bridge.errors import ConfigError
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


def test_a_schema_is_read_from_the_text_before_the_payload_only_when_that_text_is_exactly_the_schema():
    """The schemas of a batch are found from the text before each message's first '"payload":' (no JSON parse per
    message) only where that text is '{"schema": <one JSON value>,': anything else sends the batch to the per-message
    parse (the schema after the payload, a '"payload":' inside the schema, a bare value, NaN)."""
    schema = {"type": "struct", "fields": [{"field": "payload", "type": "string", "optional": True}]}
    text = json.dumps({"schema": schema, "payload": {"payload": "x"}})
    assert schema_of_prefix(text[:text.index('"payload":')]) == schema
    assert schema_of_prefix(' \n{ "schema" :\t{"type":"int32"} ,\n') == {"type": "int32"}
    assert schema_of_prefix('{"schema":null,') is None  # JSON null: no schema, as get_json_object's null
    for prefix in ('{"schema":{"type":"struct","parameters":{', '{', '{"payload2":1,', '{"schema":{"type":"int32"}}',
                   '{"schema":NaN,', '{"schema":{"type":"int32"},"x":1,', '["schema",', '{"schema":{"type":"int32"'):
        assert schema_of_prefix(prefix) is NO_SCHEMA, prefix


def test_messages_whose_text_before_the_payload_is_not_the_schema_are_typed_by_their_parsed_schema(spark):
    """A '"payload":' inside the schema (a parameter's name), or the payload before the schema, in the same batch as
    messages that start with their schema: every message is typed and read as before (the per-message parse)."""
    schema = {"type": "struct", "name": "shop.orders.Value", "optional": False,
              "parameters": {"payload": "named so on purpose"},
              "fields": [{"field": "id", "type": "int64", "optional": False},
                         {"field": "note", "type": "string", "optional": True}]}
    first = json.dumps({"schema": schema, "payload": {"id": 1, "note": "a"}}).encode()
    after = json.dumps({"payload": {"id": 2, "note": "b"}, "schema": schema}).encode()
    for messages in ([("orders", first), ("orders", after)], [("orders", after)],
                     [("orders", first), ("orders", None)]):
        typed = apply_sink_converters(_records(spark, messages), {"value.converter": JSON}, every_message=True)
        assert typed.schema["value"].dataType.simpleString() == "struct<id:bigint,note:string>"
        got = [(r.value.id, r.value.note) if r.value is not None else None for r in typed.orderBy("offset").collect()]
        expected = {first: (1, "a"), after: (2, "b"), None: None}
        assert got == [expected[v] for _, v in messages]


def test_one_topic_with_two_schemas_in_a_batch_is_still_an_error_naming_the_key(spark):
    changed = _envelope("shop.orders.Value", ORDER + [("extra", "string", True)], {"id": 3, "note": None,
                                                                                  "extra": "x"})
    df = _records(spark, [MESSAGES[0], ("orders", changed)])
    with pytest.raises(ConfigError) as e:
        apply_sink_converters(df, {"value.converter": JSON}, every_message=True)
    assert "value.converter.spark.schema" in str(e.value) and "2 different schemas" in str(e.value)


def test_envelopes_that_start_with_their_schema_are_typed_without_a_parse_per_message(spark):
    """JsonConverter's own envelopes (the schema first): the distinct texts before '"payload":' are the schemas."""
    from pyspark.sql import functions as F

    from spark_connect_bridge.converters.json_envelopes import schemas_by_prefix

    found = schemas_by_prefix(_records(spark, MESSAGES * 50), "value", F.col("topic"), None)
    assert found is not None
    assert sorted((t, s["name"]) for t, s in found) == [("customers", "shop.customers.Value"),
                                                       ("orders", "shop.orders.Value")]


def test_texts_seen_before_type_a_batch_by_compares_and_new_schemas_are_still_found(spark):
    """The texts before '"payload":' of earlier batches are looked for first (one compare per message); a batch
    that also holds a text not seen before, a tombstone, or a known text under another topic gets every
    (topic, schema) pair, as the byte search alone gives."""
    from pyspark.sql import functions as F

    from spark_connect_bridge.converters.json_envelopes import KNOWN, schemas_by_prefix

    def found(messages):
        pairs = schemas_by_prefix(_records(spark, messages), "value", F.col("topic"), None)
        assert pairs is not None
        return sorted((t, s["name"]) for t, s in pairs)

    KNOWN.clear()
    orders = [m for m in MESSAGES if m[0] == "orders"]
    assert found(orders * 3) == [("orders", "shop.orders.Value")]
    assert [s["name"] for _, s in KNOWN.recent()] == ["shop.orders.Value"]
    assert found(MESSAGES * 3 + [("customers", None)]) == [("customers", "shop.customers.Value"),
                                                          ("orders", "shop.orders.Value")]
    assert [s["name"] for _, s in KNOWN.recent()] == ["shop.customers.Value", "shop.orders.Value"]
    assert found([("orders.copy", MESSAGES[0][1]), MESSAGES[1]]) == [("customers", "shop.customers.Value"),
                                                                     ("orders.copy", "shop.orders.Value")]
    # a known text whose message has no '"payload":' right after it is searched, and is not a schema
    assert schemas_by_prefix(_records(spark, orders + [("orders", b'{"schema":{"type":"int32"},"x":1,"payload":1}')]),
                             "value", F.col("topic"), None) is None
