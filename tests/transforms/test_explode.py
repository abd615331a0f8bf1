import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import Explode, TopicNameMatches, apply_transforms

from .conftest import header_dict

VT = "struct<order:int,items:array<struct<sku:string,qty:int>>>"


def test_one_record_per_element_keeping_offsets(make_records):
    df = make_records([{"key": "k", "value": {"order": 1, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]},
                        "offset": 10},
                       {"key": "k", "value": {"order": 2, "items": []}, "offset": 11},
                       {"key": "k", "value": None, "offset": 12}], value_type=VT)
    out = apply_transforms(df, {"transforms": "x", "transforms.x.type": "Explode$Value",
                                "transforms.x.field": "items"})
    assert out.schema["value"].dataType.simpleString() == "struct<order:int,items:struct<sku:string,qty:int>>"
    rows = out.collect()
    assert [(r["offset"], r["value"].items.sku, header_dict(r)) for r in rows] == [
        (10, "a", [("kc.explode.index", b"0")]), (10, "b", [("kc.explode.index", b"1")])]


def test_keep_empty_and_tombstone(make_records):
    df = make_records([("k", {"order": 2, "items": []}), ("k", None)], value_type=VT)
    rows = df.transform(Explode.Value(field="items", keep_empty=True, index_header="")).collect()
    assert [(r["value"] and r["value"].asDict(), r["headers"]) for r in rows] == [
        ({"order": 2, "items": None}, []), (None, [])]


def test_whole_primitive_array_key_variant(make_records):
    df = make_records([(["a", "b"], "v")], key_type="array<string>")
    rows = df.transform(Explode.Key()).collect()
    assert [(r["key"], r["value"]) for r in rows] == [("a", "v"), ("b", "v")]


def test_not_an_array_and_predicate_are_config_errors(make_records):
    df = make_records([("k", {"order": 1, "items": []})], value_type=VT)
    with pytest.raises(ConfigError, match="expected an array"):
        df.transform(Explode.Value(field="order"))
    with pytest.raises(ConfigError, match="predicate"):
        df.transform(Explode.Value(field="items", predicate=TopicNameMatches(pattern="t")))


@pytest.mark.parametrize("config, key, fragment", [
    ({"field": "`a", "field.syntax.version": "V2"}, "field", "Incomplete backtick"),
    ({"keep.empty": "maybe"}, "keep.empty", "true or false"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        Explode.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)
