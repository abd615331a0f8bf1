import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import HeaderFrom

from .conftest import errors, header_dict

VT = "struct<id:int,name:string,score:double,ok:boolean,tags:array<string>,sub:struct<a:int,b:string>>"


def test_copy_struct_fields_encoded_like_simple_header_converter(make_records):
    value = {"id": 1, "name": "x", "score": 1e10, "ok": True, "tags": ["a", "b"], "sub": {"a": 1, "b": None}}
    df = make_records([{"key": "k", "value": value, "headers": [("id", b"old")]}], value_type=VT)
    out = df.transform(HeaderFrom.Value(fields="id,name,score,ok,tags,sub", headers="id,n,s,o,t,sub",
                                        operation="copy"))
    row = out.collect()[0]
    assert header_dict(row) == [("id", b"old"), ("id", b"1"), ("n", b"x"), ("s", b"1.0E10"), ("o", b"true"),
                                ("t", b'["a","b"]'), ("sub", b'{"a":1,"b":null}')]
    assert row["value"]["name"] == "x"


def test_move_removes_fields(make_records):
    df = make_records([("k", {"id": 1, "name": "x", "score": None, "ok": None, "tags": None, "sub": None})],
                      value_type=VT)
    out = df.transform(HeaderFrom.Value(fields="id,score", headers="h1,h2", operation="move"))
    row = out.collect()[0]
    assert out.schema["value"].dataType.fieldNames() == ["name", "ok", "tags", "sub"]
    assert header_dict(row) == [("h1", b"1"), ("h2", None)]


def test_two_fields_to_same_header_append_both(make_records):
    df = make_records([("k", {"a": "1", "b": "2"})], value_type="struct<a:string,b:string>")
    row = df.transform(HeaderFrom.Value(fields="a,b", headers="h,h", operation="copy")).collect()[0]
    assert header_dict(row) == [("h", b"1"), ("h", b"2")]


def test_tombstone_fails_record(make_records):
    df = make_records([("k", None), ("k", {"a": "1", "b": "2"})], value_type="struct<a:string,b:string>",
                      tolerant=True)
    msgs = errors(df.transform(HeaderFrom.Value(fields="a", headers="h", operation="copy")).collect())
    assert "found: null" in msgs[0] and msgs[1] is None


def test_schemaless_map_missing_field_gives_null_header(make_records):
    df = make_records([("k", {"a": "1"})], value_type="map<string,string>")
    row = df.transform(HeaderFrom.Value(fields="a,zz", headers="ha,hz", operation="move")).collect()[0]
    assert header_dict(row) == [("ha", b"1"), ("hz", None)]
    assert row["value"] == {}


def test_missing_struct_field_fails_every_record(make_records):
    df = make_records([("k", {"a": "1", "b": "2"})], value_type="struct<a:string,b:string>", tolerant=True)
    msgs = errors(df.transform(HeaderFrom.Value(fields="zz", headers="h", operation="copy")).collect())
    assert "zz" in msgs[0]


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v")], tolerant=True)
    assert errors(df.transform(HeaderFrom.Value(fields="a", headers="h", operation="copy")).collect())[0]


def test_key_variant(make_records):
    df = make_records([({"id": 5}, "v")], key_type="struct<id:bigint>")
    row = df.transform(HeaderFrom.Key(fields="id", headers="kid", operation="copy")).collect()[0]
    assert header_dict(row) == [("kid", b"5")]


@pytest.mark.parametrize("config, key, fragment", [
    ({"headers": "h", "operation": "copy"}, "fields", "Missing required configuration"),
    ({"fields": "", "headers": "h", "operation": "copy"}, "fields", "Empty list"),
    ({"fields": "a", "operation": "copy"}, "headers", "Missing required configuration"),
    ({"fields": "a", "headers": "h"}, "operation", "Missing required configuration"),
    ({"fields": "a", "headers": "h", "operation": "Move"}, "operation", "String must be one of: move, copy"),
    ({"fields": "a,b", "headers": "h", "operation": "copy"}, "headers", "same number of elements"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        HeaderFrom.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


def test_composites_and_timestamps_written_like_values_convert_to_string(make_records):
    """Kafka's Values.convertToString: maps keep non-string keys unquoted, timestamps take dateFormatFor's
    pattern (a date at midnight UTC, an ISO timestamp otherwise)."""
    import datetime as dt

    vt = "struct<m:map<int,string>,at:timestamp,day:timestamp,ts:array<timestamp>>"
    utc = dt.timezone.utc
    value = {"m": {1: "x"}, "at": dt.datetime(2024, 3, 1, 12, 30, 5, 123000, tzinfo=utc),
             "day": dt.datetime(2024, 3, 1, tzinfo=utc), "ts": [dt.datetime(2024, 3, 1, tzinfo=utc), None]}
    df = make_records([{"key": "k", "value": value}], value_type=vt)
    row = df.transform(HeaderFrom.Value(fields="m,at,day,ts", headers="m,at,day,ts", operation="copy")).collect()[0]
    assert header_dict(row) == [("m", b'{1:"x"}'), ("at", b"2024-03-01T12:30:05.123Z"), ("day", b"2024-03-01"),
                                ("ts", b"[2024-03-01,null]")]
