"""The whole chain stays in the JVM (no Python evaluation), and the docs are generated for every plugin."""

import pytest

from spark_connect_bridge.core.plugins import resolve_class
from spark_connect_bridge.transforms import apply_transforms, reference_markdown
from spark_connect_bridge.transforms.catalog import CATALOG

PYTHON_NODES = ("BatchEvalPython", "ArrowEvalPython", "MapInArrow", "MapInPandas", "PythonUDF", "FlatMapGroupsInPandas",
                "PythonMapInArrow", "EvalPython")

VT = ("struct<id:int,name:string,secret:string,ts:bigint,items:array<string>,nested:struct<a:int,b:string>>")

FULL_CHAIN = {
    "transforms": "mask,cast,flat,ins,hdr,hf,ts,route,troute,drop,replace,meta,tokey,ext,hoist,explode,sql,filter",
    "predicates": "tomb,isT",
    "predicates.tomb.type": "RecordIsTombstone",
    "predicates.isT.type": "TopicNameMatches", "predicates.isT.pattern": "t.*",
    "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "secret",
    "transforms.mask.predicate": "tomb", "transforms.mask.negate": "true",
    "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "id:int64",
    "transforms.flat.type": "Flatten$Value", "transforms.flat.delimiter": "_",
    "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "src",
    "transforms.hdr.type": "InsertHeader", "transforms.hdr.header": "v", "transforms.hdr.value.literal": "1",
    "transforms.hf.type": "HeaderFrom$Value", "transforms.hf.fields": "name", "transforms.hf.headers": "n",
    "transforms.hf.operation": "copy",
    "transforms.ts.type": "TimestampConverter$Value", "transforms.ts.field": "ts",
    "transforms.ts.target.type": "string",
    "transforms.ts.format": "yyyy-MM-dd",
    "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-x",
    "transforms.troute.type": "TimestampRouter",
    "transforms.drop.type": "DropHeaders", "transforms.drop.headers": "v",
    "transforms.replace.type": "ReplaceField$Value", "transforms.replace.exclude": "nested_b",
    "transforms.meta.type": "SetSchemaMetadata$Value", "transforms.meta.schema.name": "x.Y",
    "transforms.tokey.type": "ValueToKey", "transforms.tokey.fields": "id",
    "transforms.ext.type": "ExtractField$Key", "transforms.ext.field": "id",
    "transforms.hoist.type": "HoistField$Key", "transforms.hoist.field": "k",
    "transforms.explode.type": "Explode$Value", "transforms.explode.field": "items",
    "transforms.sql.type": "Sql", "transforms.sql.select": "upper(topic) AS topic",
    "transforms.filter.type": "Filter", "transforms.filter.predicate": "isT",
}


def test_full_chain_plan_has_no_python_evaluation(make_records):
    df = make_records([("k", {"id": 1, "name": "a", "secret": "s", "ts": 0, "items": ["x", "y"],
                              "nested": {"a": 1, "b": "b"}})], value_type=VT)
    out = apply_transforms(df, FULL_CHAIN)
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert not [n for n in PYTHON_NODES if n in plan], plan
    rows = out.collect()  # topics are upper-cased, so the final Filter (isT) keeps them
    assert [(r["key"].k, r["value"].items, r["topic"]) for r in rows] == [(1, "x", "T-X-20240506"),
                                                                          (1, "y", "T-X-20240506")]
    assert out.schema["value"].metadata["connect.name"] == "x.Y"


def test_reference_lists_every_plugin_with_its_keys():
    text = reference_markdown()
    for title in ("Cast", "DropHeaders", "ExtractField", "Filter", "Flatten", "HeaderFrom", "HoistField", "InsertField",
                  "InsertHeader", "MaskField", "RegexRouter", "ReplaceField", "SetSchemaMetadata",
                  "TimestampConverter", "TimestampRouter", "ValueToKey", "ExtractNewRecordState", "Explode",
                  "SqlTransform", "TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert f"### {title}\n" in text
    assert "| `unix.precision` | string | `milliseconds` |" in text
    assert "`org.apache.kafka.connect.transforms.ReplaceField$Value`" in text


@pytest.mark.parametrize("spec", CATALOG, ids=lambda s: s.names[0])
def test_catalog_entries_resolve_to_plugins(spec):
    family = "predicate" if spec.type == "predicate" else "transformation"
    for name in spec.names:
        cls = resolve_class(family, name)
        assert cls is spec.load() and cls.plugin_type == spec.type
        assert cls.config_def is not None


def test_catalog_names_are_unique():
    names = [n for s in CATALOG for n in s.names]
    assert len(names) == len(set(names))
