import datetime as dt

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import EventRouter, apply_transforms

from .conftest import errors, header_dict

# An outbox table as Debezium's outbox example declares it (inventory.outboxevent)
ROW = "struct<id:string,aggregatetype:string,aggregateid:string,type:string,payload:string,ts:timestamp>"
ENV = f"struct<before:{ROW},after:{ROW},source:struct<db:string,table:string>,op:string,ts_ms:bigint>"
SRC = {"db": "orderdb", "table": "outboxevent"}
ONE_SECOND = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


def _row(n, agg, payload, ts=None):
    return {"id": f"e{n}", "aggregatetype": agg, "aggregateid": f"k{n}", "type": "OrderCreated",
            "payload": payload, "ts": ts}


def _events(make_records, tolerant=False):
    rows = [
        {"key": "e1", "value": {"before": None, "after": _row(1, "Order", '{"id":1}', ONE_SECOND), "source": SRC,
                                "op": "c", "ts_ms": 5000}},
        {"key": "e2", "value": {"before": None, "after": _row(2, "Customer", None), "source": SRC, "op": "r",
                                "ts_ms": 6000}},
        {"key": "e1", "value": {"before": _row(1, "Order", "x"), "after": _row(1, "Order", "y"), "source": SRC,
                                "op": "u", "ts_ms": 7000}},
        {"key": "e1", "value": {"before": _row(1, "Order", "x"), "after": None, "source": SRC, "op": "d",
                                "ts_ms": 8000}},
        {"key": "e1", "value": None},
    ]
    df = make_records(rows, value_type=ENV, tolerant=tolerant)
    return df.withMetadata("value", {"connect.name": "dbserver1.inventory.outboxevent.Envelope"})


def test_routes_creates_and_reads_by_aggregate_type(make_records):
    out = _events(make_records).transform(EventRouter()).collect()
    # deletes, tombstones and (by default, table.op.invalid.behavior=warn) updates are dropped
    assert [r["offset"] for r in out] == [0, 1]
    assert [r["topic"] for r in out] == ["outbox.event.Order", "outbox.event.Customer"]
    assert [r["key"] for r in out] == ["k1", "k2"]
    assert [r["value"] for r in out] == ['{"id":1}', None]
    assert [header_dict(r) for r in out] == [[("id", b"e1")], [("id", b"e2")]]
    # the change event's ts_ms is the record timestamp
    assert out[0]["timestamp"].astimezone(dt.UTC) == dt.datetime(1970, 1, 1, 0, 0, 5, tzinfo=dt.UTC)


def test_corpus_config_replacement_placement_and_timestamp(make_records):
    cfg = {"route.topic.replacement": "${routedByValue}.events",
           "table.fields.additional.placement": "type:header:eventType,aggregatetype:envelope:agg",
           "table.field.event.timestamp": "ts"}
    out = _events(make_records).transform(EventRouter(cfg)).collect()
    assert [r["topic"] for r in out] == ["Order.events", "Customer.events"]
    assert header_dict(out[0]) == [("id", b"e1"), ("eventType", b"OrderCreated")]
    assert out[0]["value"].asDict() == {"payload": '{"id":1}', "agg": "Order"}
    assert out[0]["timestamp"].astimezone(dt.UTC) == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


def test_event_timestamp_of_an_int64_without_logical_type_fails_the_record_as_in_debezium(make_records):
    # Debezium 3.6.1 takes an epoch only from a Timestamp, MicroTimestamp or NanoTimestamp column
    rows = [{"key": "e1", "value": {"before": None, "after": {"id": "e1", "payload": "{}", "aggregatetype": "Order",
                                                               "aggregateid": "k", "ts": ts},
                                    "source": SRC, "op": "c", "ts_ms": 5000}} for ts in (1000, None)]
    row = "struct<id:string,aggregatetype:string,aggregateid:string,payload:string,ts:bigint>"
    df = make_records(rows, value_type=f"struct<before:{row},after:{row},source:struct<db:string,table:string>,"
                                       f"op:string,ts_ms:bigint>", tolerant=True)
    out = df.withMetadata("value", {"connect.name": "srv.outbox.Envelope"}).transform(
        EventRouter({"table.field.event.timestamp": "ts"})).collect()
    assert "unsupported field type INT64 (without logical schema name) of column ts" in errors(out)[0]
    assert out[1]["timestamp"].astimezone(dt.UTC) == dt.datetime(1970, 1, 1, 0, 0, 5, tzinfo=dt.UTC)  # ts_ms


def test_regex_groups_and_custom_columns(make_records):
    cfg = {"route.by.field": "type", "route.topic.regex": "Order(.*)", "route.topic.replacement": "orders.$1",
           "table.field.event.key": "aggregatetype"}
    out = _events(make_records).transform(EventRouter(cfg)).collect()
    assert [(r["topic"], r["key"]) for r in out] == [("orders.Created", "Order"), ("orders.Created", "Customer")]


def test_tombstone_on_empty_payload(make_records):
    cfg = {"route.tombstone.on.empty.payload": "true", "table.fields.additional.placement": "type:envelope"}
    out = _events(make_records).transform(EventRouter(cfg)).collect()
    assert out[0]["value"].asDict() == {"payload": '{"id":1}', "type": "OrderCreated"}
    assert out[1]["value"] is None
    kept = _events(make_records).transform(EventRouter({"table.fields.additional.placement": "type:envelope"}))
    assert kept.collect()[1]["value"].asDict() == {"payload": None, "type": "OrderCreated"}


def test_fatal_update_and_missing_column_fail_the_record(make_records):
    out = _events(make_records, tolerant=True).transform(EventRouter({"table.op.invalid.behavior": "fatal"}))
    assert "failed: table.op.invalid.behavior=fatal: an update event" in errors(out.collect())[2]
    missing = _events(make_records, tolerant=True).transform(EventRouter({"route.by.field": "nope"})).collect()
    assert [("route.by.field: the outbox table has no column nope" in e) for e in errors(missing)] == [True] * 2
    skipped = _events(make_records).transform(EventRouter({"table.fields.additional.placement": "nope:header",
                                                           "table.field.additional.missing": "ignore"}))
    assert [header_dict(r) for r in skipped.collect()] == [[("id", b"e1")], [("id", b"e2")]]


def test_from_the_corpus_config_by_debezium_class_name(make_records):
    out = apply_transforms(_events(make_records), {
        "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.topic.replacement": "${routedByValue}.request"})
    assert [r["topic"] for r in out.collect()] == ["Order.request", "Customer.request"]


@pytest.mark.parametrize("config, key, fragment", [
    ({"table.fields.additional.placement": "type:body"}, "table.fields.additional.placement", "invalid item"),
    ({"table.op.invalid.behavior": "ignore"}, "table.op.invalid.behavior", "String must be one of"),
    ({"route.topic.regex": "(.*)"}, "route.topic.replacement", "routedByValue"),
    ({"table.expand.json.payload": "true"}, "table.expand.json.payload", "from_json"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        EventRouter(config)
    assert e.value.keys == [key] and fragment in str(e.value)
