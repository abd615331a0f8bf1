"""The SMTs that take a schemaless VARIANT (JsonConverter ``schemas.enable=false`` without ``spark.schema``) as Kafka's
take its Map. tests/differential/test_fuzz_transforms.py (family ``schemaless``) compares them with Kafka's own
classes on generated records; these pin the shapes and the failures of one small batch."""

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import (
    Cast,
    EventRouter,
    ExtractNewRecordState,
    Flatten,
    HeaderFrom,
    HoistField,
    InsertField,
    MaskField,
    SetSchemaMetadata,
    TimestampConverter,
    ValueToKey,
    apply_transforms,
)
from spark_connect_bridge.transforms.extract_changed_record_state import ExtractChangedRecordState

from .conftest import errors, header_dict

#: an object, one with a null and a missing entry, a tombstone, a value that is not an object
VALUES = ('{"a":1,"s":"x","d":1.5,"b":true,"l":[1],"o":{"p":1}}', '{"a":null}', None, "7")
NOT_A_MAP = "Only Map objects supported in absence of schema for [{}], found: java.lang.Long"


@pytest.mark.parametrize("smt, column, expected, failed", [
    (InsertField.Value(**{"topic.field": "t", "static.field": "st", "static.value": "v", "offset.field": "o"}),
     "value", ['{"a":1,"b":true,"d":1.5,"l":[1],"o":0,"s":"x","st":"v","t":"t"}', '{"a":null,"o":1,"st":"v","t":"t"}',
               None, None],
     [None, None, None, NOT_A_MAP.format("field insertion")]),
    (ValueToKey(fields="a,s"), "key", ['{"a":1,"s":"x"}', '{"a":null,"s":null}', None, None],
     [None, None, "Only Map objects supported in absence of schema for [copying fields from value to key], "
                  "found: null", NOT_A_MAP.format("copying fields from value to key")]),
    (HoistField.Value(field="h"), "value",
     ['{"h":{"a":1,"b":true,"d":1.5,"l":[1],"o":{"p":1},"s":"x"}}', '{"h":{"a":null}}', '{"h":null}', '{"h":7}'],
     [None, None, None, None]),
    (MaskField.Value(fields="a,s,d,b,l,o,missing"), "value",
     ['{"a":0,"b":false,"d":0.0,"l":[],"missing":null,"o":{},"s":""}', '{"a":null,"b":null,"d":null,"l":null,'
      '"missing":null,"o":null,"s":null}', None, None],
     [None, None, "Only Struct or Map objects supported for [masking fields], found: null",
      NOT_A_MAP.format("masking fields")]),
    (MaskField.Value(fields="a,d,s", replacement="12"), "value",
     ['{"a":12,"b":true,"d":12.0,"l":[1],"o":{"p":1},"s":"12"}', '{"a":null,"d":null,"s":null}', None, None],
     [None, None, "found: null", "found: java.lang.Long"]),
    (MaskField.Value(fields="b", replacement="12"), "value", [None, '{"a":null,"b":null}', None, None],
     ["Cannot mask value of type class java.lang.Boolean with custom replacement", None, "found: null",
      "found: java.lang.Long"]),
    (Flatten.Value(), "value", ['{"a":1,"b":true,"d":1.5,"l":[1],"o.p":1,"s":"x"}', '{"a":null}', None, None],
     [None, None, None, NOT_A_MAP.format("flattening")]),
    # Kafka's castValueToType by the Java class JsonConverter reads: Long 1 -> "1", Double 1.5 -> (int) 1, Boolean
    # true -> (byte) 1, String "x" -> Boolean.parseBoolean; a missing entry put as null
    (Cast.Value(spec="a:string,d:int32,b:int8,s:boolean,missing:int64"), "value",
     ['{"a":"1","b":1,"d":1,"l":[1],"missing":null,"o":{"p":1},"s":false}',
      '{"a":null,"b":null,"d":null,"missing":null,"s":null}', None, None],
     [None, None, None, NOT_A_MAP.format("cast types")]),
    (Cast.Value(spec="o:string"), "value", [None, '{"a":null,"o":null}', None, None],
     ["Cast transformation does not support casting from MAP; supported types are [INT8, INT16, INT32, INT64, "
      "FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES] (field o)", None, None, NOT_A_MAP.format("cast types")]),
])
def test_schemaless_object_as_kafkas_map(make_records, smt, column, expected, failed):
    """Each SMT's result (as JSON) or failure per record of :data:`VALUES`."""
    df = make_records([("k", v) for v in VALUES], tolerant=True).withColumn("value", F.try_parse_json("value"))
    rows = df.transform(smt).select(F.to_json(column).alias("j"), "_kc_error").orderBy("offset").collect()
    got = errors(rows)
    assert [r.j if m is None else None for r, m in zip(rows, got)] == expected
    assert [m if m is None or f is None else (f if f in m else m) for m, f in zip(got, failed)] == failed


def test_header_from_prints_each_entry_as_kafkas_values_do(make_records):
    """HeaderFrom ``move``: a header per field, its text as ``Values.convertToString`` prints the Java class Kafka
    reads (a Double by ``Double.toString``), the fields removed; a missing entry gives a null header."""
    df = make_records([("k", VALUES[0]), ("k", '{"d":12345678.9,"o":{"q":"\\t\\\\\\"\\u0001"}}')], tolerant=True) \
        .withColumn("value", F.try_parse_json("value"))
    smt = HeaderFrom.Value(fields="a,s,d,b,l,o,missing", headers="a,s,d,b,l,o,m", operation="move")
    rows = df.transform(smt).select(F.to_json("value").alias("j"), "headers").orderBy("offset").collect()
    assert [r.j for r in rows] == ["{}", "{}"]
    texts = [{h.key: None if h.value is None else bytes(h.value).decode() for h in r.headers} for r in rows]
    assert texts == [{"a": "1", "s": "x", "d": "1.5", "b": "true", "l": "[1]", "o": '{"p":1}', "m": None},
                     {"a": None, "s": None, "d": "1.23456789E7", "b": None, "l": None, "o": '{"q":"\t\\\\\\"\x01"}',
                      "m": None}]  # Values.escape: only backslashes and quotes escaped in a nested string


def test_debeziums_smts_pass_a_schemaless_value_and_handle_its_tombstone(make_records):
    # Debezium 3.6.1 passes a value that is no Struct unchanged; ExtractNewRecordState and EventRouter drop a
    # tombstone (rewrite-with-tombstone keeps it, with its __op header), ExtractChangedRecordState passes it
    df = make_records([("k", v) for v in VALUES]).withColumn("value", F.try_parse_json("value"))
    chains = {"unwrap": [ExtractNewRecordState()], "outbox": [EventRouter()],
              "changed": [ExtractChangedRecordState({"header.changed.name": "c"})],
              "keep": [ExtractNewRecordState({"delete.tombstone.handling.mode": "rewrite-with-tombstone",
                                              "add.headers": "op"})]}
    out = {name: apply_transforms(df, chain).orderBy("offset").collect() for name, chain in chains.items()}
    values = [None if v is None else str(v) for v in (r["value"] for r in out["changed"])]
    assert values == ['{"a":1,"b":true,"d":1.5,"l":[1],"o":{"p":1},"s":"x"}', '{"a":null}', None, "7"]
    assert [r["offset"] for r in out["unwrap"]] == [r["offset"] for r in out["outbox"]] == [0, 1, 3]
    assert [header_dict(r) for r in out["keep"]] == [[], [], [("__op", b"d")], []]
    assert all(header_dict(r) == [] for r in out["changed"])


def test_set_schema_metadata_fails_a_schemaless_value_but_a_tombstone(make_records):
    df = make_records([("k", v) for v in VALUES], tolerant=True).withColumn("value", F.try_parse_json("value"))
    rows = df.transform(SetSchemaMetadata.Value(**{"schema.name": "x.Y"})).orderBy("offset").collect()
    assert [m and m.split(": ", 1)[1].split(" (")[0] for m in errors(rows)] == \
        ["Schema required for [updating schema metadata]"] * 2 + [None] + ["Schema required for [updating schema "
                                                                          "metadata]"]


def test_timestamp_converter_to_a_date_type_on_a_schemaless_value_is_refused_naming_target_type(make_records):
    """Kafka would put a java.util.Date into the Map, which JsonConverter cannot write: refused before data moves."""
    df = make_records([("k", VALUES[0])]).withColumn("value", F.try_parse_json("value"))
    with pytest.raises(ConfigError) as e:
        df.transform(TimestampConverter.Value(field="a", **{"target.type": "Timestamp"}))
    assert e.value.keys == ["target.type"] and "spark.schema" in str(e.value)


def _flattened(make_records, smt, values):
    df = make_records([("k", v) for v in values], tolerant=True).withColumn("value", F.try_parse_json("value"))
    rows = df.transform(smt).select(F.to_json("value").alias("j"), "_kc_error").orderBy("offset").collect()
    return [r.j for r in rows], errors(rows)


def nested(depth: int) -> str:
    """An object of ``depth`` objects, one in the other: ``{"k":{"k":...1}}``."""
    return '{"k":' * depth + "1" + "}" * depth


def test_flatten_joins_nested_objects_to_any_depth_keeping_nulls_and_arrays(make_records):
    """Kafka's applySchemaless: nested Maps joined with the delimiter, a null entry kept, an empty object nothing,
    a list kept whole (objects in it too); 64 levels under the top one unrolled, a deeper record failed."""
    values = ['{"a":{"b":{"c":[{"d":1}],"n":null,"e":{}}},"x":"y","z":{}}', "{}", nested(65), nested(66)]
    got, failed = _flattened(make_records, Flatten.Value(delimiter="_"), values)
    assert got[:3] == ['{"a_b_c":[{"d":1}],"a_b_n":null,"x":"y"}', "{}", '{"' + "_".join(["k"] * 65) + '":1}']
    assert failed[:3] == [None] * 3 and got[3] is None
    assert "nests objects deeper than 64 levels" in failed[3]


def test_flatten_fails_a_record_where_two_entries_give_one_name_difference_is_pinned(make_records):
    """Kafka puts both into its LinkedHashMap, the one its HashMap iterates last winning (an order a VARIANT does
    not keep: it sorts keys); ours fails the record, naming the field (docs/comparison.md)."""
    got, failed = _flattened(make_records, Flatten.Value(), ['{"a.b":1,"a":{"b":2}}', '{"a_b":1,"a":{"b":2}}'])
    assert got == [None, '{"a.b":2,"a_b":1}']
    assert "produced the field name a.b twice" in failed[0] and failed[1] is None


def test_cast_of_a_whole_schemaless_value_by_its_java_class(make_records):
    """A single type casts any value as Kafka casts the Java object JsonConverter reads (a String parsed as Java
    does, a Double narrowed as Java does); an object or a list fails; a tombstone passes."""
    values = ["7", '"12"', '" 7"', "-1.9", "true", '{"a":1}', "[1]", None]
    got, failed = _flattened(make_records, Cast.Value(spec="int8"), values)
    assert got == ["7", "12", None, "-1", "1", None, None, None]
    assert [m and m.split(": ", 1)[1].split(" (")[0] for m in failed] == [
        None, None, "Unable to parse the string as INT8", None, None,
        "Cast transformation does not support casting from MAP; supported types are [INT8, INT16, INT32, INT64, "
        "FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]", "Cast transformation does not support casting from ARRAY; "
        "supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]", None]
    got, _ = _flattened(make_records, Cast.Value(spec="string"), ["1.0", "1e10", "12", "false", '"s"'])
    assert got == ['"1.0"', '"1.0E10"', '"12"', '"false"', '"s"']  # Double.toString, Long, Boolean, as they are


def test_cast_to_float32_then_string_prints_javas_float(make_records):
    """A Cast's float32 entry is Kafka's Float: a later Cast to string prints Float.toString, not the double's."""
    df = make_records([("k", '{"f":1.1}')]).withColumn("value", F.try_parse_json("value"))
    out = df.transform(Cast.Value(spec="f:float32")).transform(Cast.Value(spec="f:string"))
    assert out.select(F.to_json("value").alias("j")).first().j == '{"f":"1.1"}'
