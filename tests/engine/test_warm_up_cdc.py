"""The warm-up's CDC source (engine/warmup.py, WarmUpChangeEvents): PostgreSQL change events made in memory by the
CDC connectors' envelope builder, serialized as a Debezium stream's records are (JsonConverter), without a
database. That the worker's warm-up query runs it end to end is tests/runtime/test_warm_up.py's."""

from __future__ import annotations

import base64
import json
from decimal import Decimal

from spark_connect_bridge.connectors.base import ReadRange
from spark_connect_bridge.connectors.factory import parse_connector_config
from spark_connect_bridge.connectors.offsets import parse_partition_key
from spark_connect_bridge.engine.pipeline import read_batch
from spark_connect_bridge.engine.warmup import WARM_UP_EVENTS, WarmUpChangeEvents

JSON = "org.apache.kafka.connect.json.JsonConverter"
CONFIG = {"name": "warm-up-cdc", "connector.class": f"{WarmUpChangeEvents.__module__}.WarmUpChangeEvents",
          "key.converter": JSON, "key.converter.schemas.enable": "false", "value.converter": JSON}


def test_warm_up_change_events_cover_every_id_once():
    # The connector's own Arrow batches (no Spark): what read_range yields for the query's one range
    cls, settings = parse_connector_config(CONFIG, kind="source")
    source = cls(settings, name="warm-up-cdc")
    (partition, end), = source.latest_offsets(source.initial_offsets(), None, None).items()
    batches = list(source.read_range(ReadRange(parse_partition_key(partition), None, end)))
    ids = [row["after"]["id"] for b in batches for row in b.column("value").to_pylist()]
    assert ids == list(range(1, WARM_UP_EVENTS + 1))
    assert all(b.schema == batches[0].schema for b in batches)


def test_warm_up_change_events_serialize_as_debezium_envelopes(spark):
    rows = read_batch(spark, CONFIG).selectExpr("cast(key as string) k", "cast(value as string) v", "topic") \
        .limit(20).collect()
    assert len(rows) == 20
    for row in rows:
        key, value = json.loads(row["k"]), json.loads(row["v"])
        after = value["payload"]["after"]
        i = after["id"]
        assert key == {"id": i}
        assert after["name"] == f"name-{i}"
        assert after["at"] == f"2026-01-01T00:00:{i % 60:02d}.{i % 1000000:06d}Z"
        # numeric(12,2) as Debezium's precise decimal: the unscaled value's bytes, scale 2 in the schema
        unscaled = int.from_bytes(base64.b64decode(after["amount"]), "big", signed=True)
        assert Decimal(unscaled).scaleb(-2) == Decimal(f"{i % 100000}.{i % 100:02d}")
        assert value["payload"]["op"] == "r" and value["payload"]["before"] is None
        assert value["payload"]["source"]["connector"] == "postgresql"
        assert row["topic"] == "kconnect-warm-up.public.events"
    after_schema = next(f for f in json.loads(rows[0]["v"])["schema"]["fields"] if f["field"] == "after")
    amount = next(f for f in after_schema["fields"] if f["field"] == "amount")
    assert amount["name"] == "org.apache.kafka.connect.data.Decimal" and amount["parameters"]["scale"] == "2"
