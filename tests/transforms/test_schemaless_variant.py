"""The SMTs that take a schemaless VARIANT (JsonConverter ``schemas.enable=false`` without ``spark.schema``) as Kafka's
take its Map. tests/differential/test_fuzz_transforms.py (family ``schemaless``) compares them with Kafka's own
classes on generated records; these pin the shapes and the failures of one small batch."""

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import (
    HeaderFrom,
    HoistField,
    InsertField,
    MaskField,
    SetSchemaMetadata,
    TimestampConverter,
    ValueToKey,
)

from .conftest import errors

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
