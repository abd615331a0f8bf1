import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import InsertField

from .conftest import TS, errors

ALL = dict(topic_field="t", partition_field="p!", offset_field="o?", timestamp_field="ts", static_field="s",
           static_value="v")


def test_struct_value_gets_typed_fields(make_records):
    df = make_records([{"key": "k", "value": {"a": 1}, "topic": "orders", "partition": 3, "offset": 42}],
                      value_type="struct<a:int>")
    out = df.transform(InsertField.Value(**ALL))
    assert out.schema["value"].dataType.simpleString() == \
        "struct<a:int,t:string,p:int,o:bigint,ts:timestamp,s:string>"
    v = out.collect()[0]["value"].asDict()
    assert v == {"a": 1, "t": "orders", "p": 3, "o": 42, "ts": TS.replace(tzinfo=None), "s": "v"}


def test_tombstone_passes_through(make_records):
    df = make_records([("k", None)], value_type="struct<a:int>")
    assert df.transform(InsertField.Value(**ALL)).collect()[0]["value"] is None


def test_schemaless_map_timestamp_is_epoch_millis_and_null_partition_skipped(make_records):
    df = make_records([{"key": "k", "value": {"a": 1}, "partition": None}], value_type="map<string,bigint>")
    v = df.transform(InsertField.Value(partition_field="p", timestamp_field="ts", offset_field="o")) \
        .collect()[0]["value"]
    assert v == {"a": 1, "ts": int(TS.timestamp() * 1000), "o": 0}


def test_schemaless_string_map_takes_text(make_records):
    df = make_records([{"key": "k", "value": {"a": "1"}, "topic": "x"}], value_type="map<string,string>")
    v = df.transform(InsertField.Value(topic_field="t", static_field="s", static_value="c")).collect()[0]["value"]
    assert v == {"a": "1", "t": "x", "s": "c"}


def test_schemaless_map_with_other_value_type_rejected(make_records):
    df = make_records([("k", {"a": 1})], value_type="map<string,bigint>")
    with pytest.raises(ConfigError, match="schemaless Map"):
        df.transform(InsertField.Value(topic_field="t"))


def test_primitive_value_fails_record(make_records):
    df = make_records([("k", "v"), ("k", None)], tolerant=True)
    msgs = errors(df.transform(InsertField.Value(topic_field="t")).collect())
    assert msgs[0] is not None and msgs[1] is None


def test_key_variant(make_records):
    df = make_records([({"id": 1}, "v")], key_type="struct<id:int>")
    row = df.transform(InsertField.Key(static_field="s", static_value="x")).collect()[0]
    assert row["key"].asDict() == {"id": 1, "s": "x"} and row["value"] == "v"


def test_existing_field_overwritten(make_records):
    df = make_records([{"key": "k", "value": {"t": "old"}, "topic": "new"}], value_type="struct<t:string>")
    assert df.transform(InsertField.Value(topic_field="t")).collect()[0]["value"].t == "new"


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "", "No field insertion configured"),
    ({"static.field": "s"}, "static.value", "static.value"),
    ({"topic.feld": "t"}, "topic.feld", 'did you mean "topic.field"'),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        InsertField.Value(config)
    assert key in e.value.keys and fragment in str(e.value)
