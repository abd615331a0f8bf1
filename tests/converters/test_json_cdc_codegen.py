"""JsonConverter (schemas.enable=true, as Debezium's docs configure it) over a CDC connector's records: one
envelope whose ``before``/``after`` hold the union of several tables' rows, serialized per topic. Its projection
must compile: ``spark.sql.codegen.fallback=false`` (whole-stage code) and ``factoryMode=CODEGEN_ONLY`` (a
projection's own code) turn Janino's "Code grows beyond 64 KB" (the generated method of this very shape grew to
17,000 lines, issue #38) into an error instead of a logged stack trace and a fallback. The tables are those of
tests/differential/test_debezium_postgres.py, with the Spark types our PostgreSQL connector gives their columns."""

from __future__ import annotations

import base64
import json
from decimal import Decimal

from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from spark_connect_bridge.converters import apply_source_converters
from spark_connect_bridge.core.records import record_schema
from spark_connect_bridge.core.topic_schemas import envelope_union_of, union_of

JSON = "org.apache.kafka.connect.json.JsonConverter"
ROWS = {  # topic -> (row DDL, key columns)
    "dbz.public.customers": (
        "id int, name string, amount decimal(10,2), price struct<scale:int,value:binary>, created string, "
        "created0 string, created3 string, born int, at_time bigint, at_time3 int, local_ts bigint, local_ts3 bigint, "
        "span bigint, tags array<string>, scores array<int>, doc string, raw string, photo binary, ratio double, "
        "share float, active boolean, ref string, small smallint, code string, label string, notes string", ["id"]),
    "dbz.public.orders": ("id bigint, customer int, note string", ["id"]),
    "dbz.public.notice": ("id int, body string", ["id"]),
    "dbz.inv.items": ("sku string, qty int", ["sku"]),
}
SOURCE = ("version string, connector string, name string, ts_ms bigint, snapshot string, db string, "
          "sequence string, ts_us bigint, ts_ns bigint, schema string, table string, txId bigint, lsn bigint, "
          "xmin bigint, origin string, origin_lsn bigint")


def _envelope(topic: str, row: StructType) -> tuple[StructType, dict]:
    row_meta = {"connect.name": f"{topic}.Value"}
    env = StructType([
        StructField("before", row, True, row_meta), StructField("after", row, True, row_meta),
        StructField("source", _parse_datatype_string(SOURCE), True,
                    {"connect.name": "io.debezium.connector.postgresql.Source", "connect.version": 1}),
        StructField("op", _parse_datatype_string("string")), StructField("ts_ms", _parse_datatype_string("bigint"))])
    return env, {"connect.name": f"{topic}.Envelope", "connect.version": 2}


def cdc_records(spark):
    """(record DataFrame, the changes in it): one change per row, each topic's as a CDC connector types it."""
    rows_t = {t: _parse_datatype_string(ddl) for t, (ddl, _) in ROWS.items()}
    value_t, value_meta = envelope_union_of({t: _envelope(t, r) for t, r in rows_t.items()})
    key_t, key_meta = union_of({t: (StructType([r[c] for c in ROWS[t][1]]), {"connect.name": f"{t}.Key"})
                                for t, r in rows_t.items()}, keys=True)
    customer = {"id": 1, "name": "ada", "amount": Decimal("-1234.50"), "price": {"scale": 3, "value": b"\x01\xff"},
                "born": 10957, "tags": ["x", None], "photo": b"\x00\x01", "ratio": 1.5, "active": True, "small": 7}
    changes = [("dbz.public.customers", {"id": 1}, None, customer, "c"),
               ("dbz.public.customers", {"id": 1}, customer, {**customer, "amount": Decimal("99999999.99")}, "u"),
               ("dbz.public.orders", {"id": 10}, {"id": 10, "customer": 1, "note": None}, None, "d"),
               ("dbz.inv.items", {"sku": "s1"}, None, {"sku": "s1", "qty": 3}, "r")]

    def placed(row, union, meta, topic):
        """A topic's row in the union struct: each column in the union field that holds it."""
        held = json.loads(meta["kconnect.cdc.tables"])[topic]
        by_field = {f: row.get(c) for c, f in zip(held["columns"], held["fields"])}
        return tuple(by_field.get(f.name) for f in union.fields)

    def union_row(topic, row):
        return None if row is None else placed(row, value_t["after"].dataType, value_meta, topic)

    source = tuple({"connector": "postgresql", "name": "dbz", "ts_ms": 5}.get(f.name)
                   for f in value_t["source"].dataType.fields)
    data = [(placed(k, key_t, key_meta, t), (union_row(t, b), union_row(t, a), source, op, 6), t, 0, i, None, [])
            for i, (t, k, b, a, op) in enumerate(changes)]
    schema = record_schema(key_t, value_t)
    schema = StructType([StructField(f.name, f.dataType, f.nullable,
                                     value_meta if f.name == "value" else key_meta if f.name == "key" else f.metadata)
                         for f in schema.fields])
    # localCheckpoint: a Project over a LocalRelation is evaluated on the driver, interpreted, never compiled
    return spark.createDataFrame(data, schema).localCheckpoint(), changes


def _wire(row: dict | None) -> dict | None:
    """A row as JsonConverter writes it: Decimal as the base64 of its unscaled two's complement bytes, bytes as
    base64, every other column of the table present (null)."""
    if row is None:
        return None
    out = {}
    for k, v in row.items():
        if isinstance(v, Decimal):
            n = int(v.scaleb(2))
            v = base64.b64encode(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)).decode()
        elif isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        elif isinstance(v, dict):
            v = {**v, "value": base64.b64encode(v["value"]).decode()}
        out[k] = v
    return out


def test_cdc_envelopes_of_several_tables_serialize_in_compiled_code(spark):
    df, changes = cdc_records(spark)
    strict = {"spark.sql.codegen.fallback": "false", "spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}
    for key, setting in strict.items():
        spark.conf.set(key, setting)
    try:
        out = apply_source_converters(df, {"key.converter": JSON, "value.converter": JSON}) \
            .select("topic", F.col("key").cast("string"), F.col("value").cast("string")).collect()
    finally:
        for key in strict:
            spark.conf.unset(key)
    assert [r.topic for r in out] == [t for t, *_ in changes]
    for r, (topic, key, before, after, op) in zip(out, changes):
        columns = [f.split(" ")[0] for f in ROWS[topic][0].replace("struct<scale:int,value:binary>", "s").split(", ")]
        value, key_json = json.loads(r.value), json.loads(r.key)
        assert value["schema"]["name"] == f"{topic}.Envelope"
        assert [f["field"] for f in value["schema"]["fields"][1]["fields"]] == columns
        full = {c: None for c in columns}
        payload = value["payload"]
        assert (payload["before"], payload["after"], payload["op"], payload["ts_ms"]) == \
            (_wire(None if before is None else {**full, **before}), _wire(None if after is None else {**full, **after}),
             op, 6)
        assert key_json == {"schema": {"type": "struct", "fields": [
            {"type": "string" if topic.endswith("items") else "int64" if "orders" in topic else "int32",
             "optional": True, "field": c} for c in ROWS[topic][1]], "optional": True, "name": f"{topic}.Key"},
            "payload": key}
