import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ExtractNewRecordState, apply_transforms

from .conftest import errors, header_dict

ROW = "struct<id:int,name:string>"
ENV = (f"struct<before:{ROW},after:{ROW},source:struct<db:string,table:string,lsn:bigint>,op:string,ts_ms:bigint,"
       f"transaction:struct<id:string,total_order:bigint,data_collection_order:bigint>>")
SRC = {"db": "test", "table": "t", "lsn": 10}


def _events(make_records, tolerant=False):
    rows = [
        {"key": "1", "value": {"before": None, "after": {"id": 1, "name": "a"}, "source": SRC, "op": "c", "ts_ms": 5}},
        {"key": "1", "value": {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "b"}, "source": SRC,
                               "op": "u", "ts_ms": 6}},
        {"key": "1", "value": {"before": {"id": 1, "name": "b"}, "after": None, "source": SRC, "op": "d",
                               "ts_ms": 7}},
        {"key": "1", "value": None},
        {"key": None, "value": {"before": None, "after": None, "source": SRC, "op": "t", "ts_ms": 8}},
        {"key": "2", "value": {"before": None, "after": {"id": 2, "name": "r"}, "source": SRC, "op": "r",
                               "ts_ms": 9}},
    ]
    df = make_records(rows, value_type=ENV, tolerant=tolerant)
    return df.withMetadata("value", {"connect.name": "srv.public.t.Envelope"})


def _values(out):
    return [(r["offset"], None if r["value"] is None else r["value"].asDict()) for r in out.collect()]


def test_default_tombstone_mode(make_records):
    out = _events(make_records).transform(ExtractNewRecordState())
    assert out.schema["value"].dataType.simpleString() == ROW
    assert _values(out) == [(0, {"id": 1, "name": "a"}), (1, {"id": 1, "name": "b"}), (2, None),
                            (5, {"id": 2, "name": "r"})]


@pytest.mark.parametrize("cfg, offsets", [
    ({"delete.tombstone.handling.mode": "drop"}, [0, 1, 5]),
    ({"delete.tombstone.handling.mode": "delete-to-tombstone"}, [0, 1, 2, 5]),
    ({"delete.tombstone.handling.mode": "rewrite"}, [0, 1, 2, 5]),
    ({"delete.tombstone.handling.mode": "rewrite-with-tombstone"}, [0, 1, 2, 3, 5]),
    ({"delete.handling.mode": "none", "drop.tombstones": "false"}, [0, 1, 2, 3, 5]),
    ({"delete.handling.mode": "drop"}, [0, 1, 5]),
])
def test_modes_keep_or_drop_deletes_and_tombstones(make_records, cfg, offsets):
    out = _events(make_records).transform(ExtractNewRecordState(cfg))
    assert [r["offset"] for r in out.collect()] == offsets


@pytest.mark.parametrize("mode", ["tombstone", "drop", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone"])
def test_a_delete_with_neither_before_nor_after_is_dropped_in_every_mode(make_records, mode):
    # Debezium 3.6.1's ExtractNewRecordState drops it in every mode (found by the fuzzer's cdc family beside it)
    rows = [{"key": "1", "value": {"before": None, "after": None, "source": SRC, "op": "d", "ts_ms": 7}},
            {"key": "1", "value": {"before": {"id": 1, "name": "b"}, "after": None, "source": SRC, "op": "d",
                                   "ts_ms": 8}}]
    df = make_records(rows, value_type=ENV).withMetadata("value", {"connect.name": "srv.public.t.Envelope"})
    out = df.transform(ExtractNewRecordState({"delete.tombstone.handling.mode": mode}))
    assert [r["offset"] for r in out.collect()] == ([] if mode == "drop" else [1])


def test_legacy_keys_warn_that_debezium_3_2_removed_them(caplog):
    # Debezium 3.6.1's ConfigDef has neither key and ignores both (docs/comparison.md); here they are read as
    # Debezium 3.1 read them, as every old spelling is, with a warning naming the key
    with caplog.at_level("WARNING"):
        unwrap = ExtractNewRecordState({"delete.handling.mode": "rewrite", "drop.tombstones": "false"})
    assert unwrap.mode == "rewrite" and unwrap.keep_tombstones
    warned = [r.getMessage() for r in caplog.records if "removed in Debezium 3.2" in r.getMessage()]
    assert [w.split()[1] for w in warned] == ["delete.handling.mode", "drop.tombstones"]


def test_rewrite_adds_deleted_flag_and_uses_before(make_records):
    out = _events(make_records).transform(ExtractNewRecordState({"delete.tombstone.handling.mode": "rewrite"}))
    vals = dict(_values(out))
    assert vals[1] == {"id": 1, "name": "b", "__deleted": "false"}
    assert vals[2] == {"id": 1, "name": "b", "__deleted": "true"}


def test_add_fields_and_headers(make_records):
    cfg = {"add.fields": "op,table,source.lsn:pos,ts_ms,nope", "add.headers": "op,db",
           "add.headers.prefix": "h_", "delete.tombstone.handling.mode": "rewrite-with-tombstone"}
    out = _events(make_records).transform(ExtractNewRecordState(cfg))
    rows = {r["offset"]: r for r in out.collect()}
    assert rows[0]["value"].asDict() == {"id": 1, "name": "a", "__deleted": "false", "__op": "c", "__table": "t",
                                         "__pos": 10, "__ts_ms": 5}
    assert header_dict(rows[0]) == [("h_op", b"c"), ("h_db", b"test")]
    # Debezium 3.6 adds __deleted before the add.fields fields (tests/differential/test_debezium_postgres.py)
    assert out.schema["value"].dataType.fieldNames() == ["id", "name", "__deleted", "__op", "__table", "__pos",
                                                         "__ts_ms"]
    assert header_dict(rows[3]) == [("h_op", b"d")]  # a tombstone gets only the op header


def test_route_by_field(make_records):
    out = _events(make_records).transform(ExtractNewRecordState({"route.by.field": "name"}))
    assert [r["topic"] for r in out.collect()] == ["a", "b", "b", "r"]


def test_non_envelope_values_pass_through_and_their_tombstones_follow_the_mode(make_records):
    # Debezium 3.6.1 handles a tombstone before it looks at the value (seen beside it: the differential fuzzer)
    df = make_records([("k", {"a": 1}), ("k", None)], value_type="struct<a:int>")
    assert [r["value"] for r in df.transform(ExtractNewRecordState()).collect()] == [(1,)]
    kept = df.transform(ExtractNewRecordState({"delete.tombstone.handling.mode": "rewrite-with-tombstone",
                                               "add.headers": "op,db"})).collect()
    assert [(r["value"], header_dict(r)) for r in kept] == [((1,), []), (None, [("__op", b"d")])]
    named = _events(make_records).withMetadata("value", {"connect.name": "srv.heartbeat"})
    assert named.transform(ExtractNewRecordState()).schema["value"].dataType.simpleString() == ENV


def test_unknown_operation_fails_record(make_records):
    df = make_records([{"key": "k", "value": {"before": None, "after": None, "op": "m"}}],
                      value_type=f"struct<before:{ROW},after:{ROW},op:string>", tolerant=True)
    assert "Unsupported change event operation: m" in errors(df.transform(ExtractNewRecordState()).collect())[0]


def test_from_config_by_debezium_class_name(make_records):
    out = apply_transforms(_events(make_records), {"transforms": "unwrap",
                                                   "transforms.unwrap.type":
                                                       "io.debezium.transforms.ExtractNewRecordState",
                                                   "transforms.unwrap.delete.tombstone.handling.mode": "drop"})
    assert out.count() == 3


@pytest.mark.parametrize("config, key, fragment", [
    ({"delete.tombstone.handling.mode": "keep"}, "delete.tombstone.handling.mode", "String must be one of: drop"),
    ({"delete.handling.mode": "keep"}, "delete.handling.mode", "String must be one of: drop, rewrite, none"),
    ({"delete.tombstone.handling.mode": "drop", "drop.tombstones": "true"}, "drop.tombstones", "set only one"),
    ({"add.fields": "a:b:c"}, "add.fields", "invalid item"),
    ({"drop.tombstone": "true"}, "drop.tombstone", 'did you mean "drop.tombstones"'),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        ExtractNewRecordState(config)
    assert e.value.keys == [key] and fragment in str(e.value)


NN_ROW = "struct<id:int NOT NULL,name:string,note:string>"
NN_ENV = f"struct<before:{NN_ROW},after:{NN_ROW},source:struct<db:string>,op:string>"


def _drop_events(make_records, key_type="string"):
    def ev(op, before, after, headers, key="1"):
        return {"key": key, "value": {"before": before, "after": after, "source": {"db": "d"}, "op": op},
                "headers": headers}

    row = {"id": 1, "name": "n", "note": "x"}
    rows = [
        ev("c", None, row, [("unchanged", b'["name","note"]')]),
        ev("u", row, row, [("other", b'["name"]'), ("unchanged", b'["id","note"]'), ("unchanged", b'["name"]')]),
        ev("d", row, None, [("unchanged", b'["name"]')]),
        ev("r", None, row, [("unchanged", b"[note, name]")]),  # bare names, as Values.parseString reads them
        ev("u", row, row, []),
        ev("u", row, row, [("unchanged", None)]),
        {"key": "1", "value": None, "headers": [("unchanged", b'["name"]')]},
    ]
    if key_type != "string":
        for r in rows:
            r["key"] = {"id": 1, "name": "k"}
    df = make_records(rows, key_type=key_type, value_type=NN_ENV)
    return df.withMetadata("value", {"connect.name": "srv.public.t.Envelope"})


def test_drop_fields_listed_in_a_header_become_null(make_records):
    cfg = {"drop.fields.header.name": "unchanged", "delete.tombstone.handling.mode": "rewrite-with-tombstone"}
    out = _drop_events(make_records).transform(ExtractNewRecordState(cfg))
    vals = dict(_values(out))
    assert vals[0] == {"id": 1, "name": None, "note": None, "__deleted": "false"}
    # the first header of that name counts; id is required, and keep.schema.compatible drops only optional fields
    assert vals[1] == {"id": 1, "name": "n", "note": None, "__deleted": "false"}
    assert vals[2] == {"id": 1, "name": "n", "note": "x", "__deleted": "true"}  # a delete's row is never dropped
    assert vals[3] == {"id": 1, "name": None, "note": None, "__deleted": "false"}
    assert vals[4] == vals[5] == {"id": 1, "name": "n", "note": "x", "__deleted": "false"}
    assert vals[6] is None
    assert not out.schema["value"].dataType["id"].nullable


def test_drop_fields_not_schema_compatible_drops_required_fields_too(make_records):
    cfg = {"drop.fields.header.name": "unchanged", "drop.fields.keep.schema.compatible": "false"}
    out = _drop_events(make_records).transform(ExtractNewRecordState(cfg))
    vals = dict(_values(out))
    assert vals[1] == {"id": None, "name": "n", "note": None}
    assert out.schema["value"].dataType["id"].nullable


def test_drop_fields_from_key(make_records):
    cfg = {"drop.fields.header.name": "unchanged", "drop.fields.from.key": "true",
           "delete.tombstone.handling.mode": "rewrite"}
    out = _drop_events(make_records, key_type="struct<id:int NOT NULL,name:string>").transform(
        ExtractNewRecordState(cfg))
    keys = {r["offset"]: r["key"].asDict() for r in out.collect()}
    assert keys[0] == {"id": 1, "name": None}
    assert keys[1] == {"id": 1, "name": "k"}  # id is required; the first "unchanged" header lists no name
    assert keys[2] == {"id": 1, "name": "k"}  # a rewritten delete keeps its original key
    assert keys[4] == {"id": 1, "name": "k"}
    without = _drop_events(make_records, key_type="struct<id:int NOT NULL,name:string>").transform(
        ExtractNewRecordState({"drop.fields.header.name": "unchanged"}))
    assert {r["key"]["name"] for r in without.collect()} == {"k"}


def test_drop_fields_config_errors():
    with pytest.raises(ConfigError) as e:
        ExtractNewRecordState({"drop.fields.from.key": "maybe"})
    assert e.value.keys == ["drop.fields.from.key"]
