import copy

import pytest

from spark_connect_bridge import __version__
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import (
    Cast,
    Chain,
    Filter,
    Flatten,
    HeaderFrom,
    HoistField,
    InsertField,
    MaskField,
    ReplaceField,
    apply_transforms,
    build_chain,
)

from .conftest import errors

VT = "struct<id:int,name:string,secret:string>"


def test_aliases_run_in_listed_order(make_records):
    df = make_records([("k", {"id": 1, "name": "x", "secret": "s"})], value_type=VT)
    cfg = {"transforms": "rename, drop",
           "transforms.drop.type": "ReplaceField$Value", "transforms.drop.exclude": "nom",
           "transforms.rename.type": "ReplaceField$Value", "transforms.rename.renames": "name:nom",
           "connector.class": "ignored", "topics": "ignored"}
    chain = build_chain(cfg)
    assert chain.aliases == ["rename", "drop"]
    assert df.transform(chain).collect()[0]["value"].asDict() == {"id": 1, "secret": "s"}


def test_predicate_and_negate_select_records(make_records):
    df = make_records([{"value": {"id": 1, "name": "a", "secret": "s"}, "topic": "pii"},
                       {"value": {"id": 2, "name": "b", "secret": "s"}, "topic": "public"}], value_type=VT)
    cfg = {"transforms": "mask,tag", "predicates": "isPii",
           "predicates.isPii.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
           "predicates.isPii.pattern": "pii",
           "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "secret",
           "transforms.mask.predicate": "isPii",
           "transforms.tag.type": "InsertField$Value", "transforms.tag.static.field": "public",
           "transforms.tag.static.value": "yes", "transforms.tag.predicate": "isPii", "transforms.tag.negate": "true"}
    rows = [r["value"].asDict() for r in apply_transforms(df, cfg).collect()]
    # The predicated InsertField adds a field: both branches are unified by name (missing field -> null).
    assert rows == [{"id": 1, "name": "a", "secret": "", "public": None},
                    {"id": 2, "name": "b", "secret": "s", "public": "yes"}]


def test_dropped_record_stops_the_chain(make_records):
    # ValueToKey fails on a tombstone; the Filter before it drops tombstones, so nothing fails.
    df = make_records([("k", {"id": 1, "name": "a", "secret": "s"}), ("k", None)], value_type=VT)
    cfg = {"transforms": "dropTomb,key", "predicates": "tomb",
           "predicates.tomb.type": "RecordIsTombstone",
           "transforms.dropTomb.type": "Filter", "transforms.dropTomb.predicate": "tomb",
           "transforms.key.type": "ValueToKey", "transforms.key.fields": "id"}
    rows = apply_transforms(df, cfg).collect()
    assert [r["key"].id for r in rows] == [1]


def test_stage_skipping_tombstones_gives_its_own_type(make_records):
    # Kafka applies HoistField only to non-tombstones; the tombstones stay null, whatever the new type is, so the
    # value takes HoistField's type as it is (no merge with the old fields, as for other predicates).
    df = make_records([("k", {"id": 1, "name": "a", "secret": "s"}), ("k", None)], value_type=VT)
    cfg = {"transforms": "hoist", "predicates": "tomb", "predicates.tomb.type": "RecordIsTombstone",
           "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "row",
           "transforms.hoist.predicate": "tomb", "transforms.hoist.negate": "true"}
    out = apply_transforms(df, cfg)
    assert out.schema["value"].dataType.simpleString() == "struct<row:struct<id:int,name:string,secret:string>>"
    assert [None if r.value is None else r.value.row.id for r in out.collect()] == [1, None]


def test_strict_failure_names_alias_and_coordinates(make_records):
    df = make_records([{"key": "k", "value": None, "topic": "orders", "partition": 2, "offset": 7}],
                      value_type=VT)
    cfg = {"transforms": "toKey", "transforms.toKey.type": "ValueToKey", "transforms.toKey.fields": "id"}
    with pytest.raises(Exception, match=r"ValueToKey \(alias toKey\).*topic=orders, partition=2, offset=7"):
        apply_transforms(df, cfg).collect()


def test_tolerant_failure_fills_error_column_for_failing_rows_only(make_records):
    df = make_records([("k", {"id": 1, "name": "a", "secret": "s"}), ("k", None)], value_type=VT, tolerant=True)
    cfg = {"transforms": "toKey", "transforms.toKey.type": "ValueToKey", "transforms.toKey.fields": "id"}
    rows = apply_transforms(df, cfg).collect()
    assert errors(rows)[0] is None
    err = rows[1]["_kc_error"]
    assert (err.stage, err.class_name, err.alias) == ("TRANSFORMATION",
                                                      "org.apache.kafka.connect.transforms.ValueToKey",
                                                      "toKey")


def test_python_objects_chain(make_records):
    df = make_records([("k", {"id": 1, "name": "a", "secret": "s"})], value_type=VT)
    chain = Chain([ReplaceField.Value(exclude=["secret"]), InsertField.Value(topic_field="t")])
    assert df.transform(chain).collect()[0]["value"].asDict() == {"id": 1, "name": "a", "t": "t"}


def test_predicated_type_change_holds_both_shapes_in_a_variant(make_records):
    # Kafka's documented predicate example changes the type for some records only: here the column becomes a
    # VARIANT holding the extracted int for topic t and the untouched struct for the others (and a tombstone null)
    df = make_records([{"key": "k", "value": {"id": 1, "name": "a", "secret": "s"}},
                       {"key": "k", "value": {"id": 2, "name": "b", "secret": None}, "topic": "u"},
                       {"key": "k", "value": None, "topic": "u"}], value_type=VT)
    cfg = {"transforms": "x", "predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "t",
           "transforms.x.type": "ExtractField$Value", "transforms.x.field": "id", "transforms.x.predicate": "p"}
    out = build_chain(cfg)(df)
    assert out.schema["value"].dataType.simpleString() == "variant"
    rows = out.selectExpr("to_json(value) AS v").collect()
    assert [r["v"] for r in rows] == ["1", '{"id":2,"name":"b","secret":null}', None]


def test_building_does_not_mutate_the_callers_config():
    cfg = {"transforms": "a", "transforms.a.type": "Filter", "predicates": "p",
           "predicates.p.type": "RecordIsTombstone",
           "transforms.a.predicate": "p", "transforms.a.negate": "false"}
    before = copy.deepcopy(cfg)
    build_chain(cfg)
    assert cfg == before


def test_every_problem_reported_at_once_under_full_keys():
    cfg = {"transforms": "a,b,c,d,e", "predicates": "p",
           "transforms.a.type": "MaskField$Value", "transforms.a.feilds": "x",
           "transforms.b.type": "NoSuchThing",
           "transforms.c.type": "Filter", "transforms.c.negate": "true",
           "transforms.d.type": "Filter", "transforms.d.predicate": "nope",
           "predicates.p.type": "TopicNameMatches"}
    with pytest.raises(ConfigError) as e:
        build_chain(cfg)
    keys = e.value.keys
    assert set(keys) == {"transforms.a.feilds", "transforms.a.fields", "transforms.b.type", "transforms.c.negate",
                         "transforms.d.predicate", "transforms.e.type", "predicates.p.pattern"}
    text = str(e.value)
    assert 'did you mean "transforms.a.fields"' in text
    assert "Invalid value NoSuchThing for configuration transforms.b.type" in text


@pytest.mark.parametrize("cfg, key, fragment", [
    ({"transforms": "a,a", "transforms.a.type": "Filter"}, "transforms", "Duplicate alias provided"),
    ({"predicates": "p,p", "predicates.p.type": "RecordIsTombstone"}, "predicates", "Duplicate alias provided"),
    ({"transforms": "a"}, "transforms.a.type", 'Missing required configuration "transforms.a.type"'),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "yes"}, "transforms.a.negate",
     "true or false"),
    ({"transforms": "a", "transforms.a.type": "TopicNameMatches"}, "transforms.a.type", "no transformation plugin"),
    ({"transforms": "a", "transforms.a.type": "Cast"}, "transforms.a.type", "no transformation plugin"),
    ({"transforms": "a", "transforms.a.type": "Cast$Value", "transforms.a.spec": "x:int9"}, "transforms.a.spec",
     "configuration transforms.a.spec: Invalid type"),
])
def test_grammar_errors(cfg, key, fragment):
    with pytest.raises(ConfigError) as e:
        build_chain(cfg)
    assert key in e.value.keys and fragment in str(e.value)


def test_filter_class_is_resolvable_by_every_name():
    for name in ("org.apache.kafka.connect.transforms.Filter", "Filter",
                 "spark_connect_bridge.transforms.filter.Filter"):
        assert isinstance(build_chain({"transforms": "f", "transforms.f.type": name}).stages[0].transform, Filter)


@pytest.mark.parametrize("smt", [{"type": "SetSchemaMetadata$Value", "schema.name": "x"},
                                 {"type": "Explode$Value", "field": "items"}])
def test_transforms_that_never_take_a_predicate_fail_at_build_time(smt):
    cfg = {"transforms": "a", "predicates": "p", "predicates.p.type": "RecordIsTombstone",
           "transforms.a.predicate": "p", **{f"transforms.a.{k}": v for k, v in smt.items()}}
    with pytest.raises(ConfigError) as e:
        build_chain(cfg)
    assert e.value.keys == ["transforms.a.predicate"] and "predicate" in str(e.value)


@pytest.mark.parametrize("spec", [None, "latest", __version__, f" {__version__} ", "0.1", f"[{__version__}]",
                                  "[0.1,1.0)", "(,1.0]", "[0.0.1,)", "(,0.0.5],[0.1,0.2)", "[0.1.0-rc1,0.1.0]"])
def test_plugin_version_selecting_the_one_version_is_accepted(spec):
    cfg = {"transforms": "a", "transforms.a.type": "Filter", "predicates": "p",
           "predicates.p.type": "RecordIsTombstone"}
    if spec is not None:
        cfg.update({"transforms.a.plugin.version": spec, "predicates.p.plugin.version": spec})
    assert build_chain(cfg).aliases == ["a"]


@pytest.mark.parametrize("spec, fragment", [
    ("4.0.0", "not found that matches the version range 4.0.0, available versions: [0.1.0, 4.1.0]"),
    ("0.1.0-SNAPSHOT", "not found that matches"), ("[1.0,4.1)", "not found that matches"),
    ("(0.1.0,1.0]", "not found that matches"), ("(,0.1.0)", "not found that matches"),
    ("[1.0,2.0", "Unbounded range"), ("(1.0)", "Single version must be surrounded by []"),
    ("[2.0,1.0]", "Range defies version ordering"), ("[1.0,2.0],[1.5,3.0]", "Ranges overlap"),
    ("[1.0,2.0],3.0", "Only fully-qualified sets allowed"),
])
def test_plugin_version_errors(spec, fragment):  # Filter is Kafka's: [0.1.0, 4.1.0]
    cfg = {"transforms": "a", "transforms.a.type": "org.apache.kafka.connect.transforms.Filter",
           "transforms.a.plugin.version": spec, "predicates": "p", "predicates.p.type": "RecordIsTombstone",
           "predicates.p.plugin.version": spec}
    with pytest.raises(ConfigError) as e:
        build_chain(cfg)
    assert set(e.value.keys) == {"predicates.p.plugin.version", "transforms.a.plugin.version"}
    assert fragment in str(e.value)
    assert f"Invalid value {spec} for configuration transforms.a.plugin.version" in str(e.value)
    if "not found" in fragment:
        assert "Plugin org.apache.kafka.connect.transforms.Filter not found" in str(e.value)


@pytest.mark.parametrize("spec", ["4.1.0", "[4.0,5.0)", "[4.1.0]"])
def test_plugin_version_of_kafka_builtins_accepts_the_kafka_release(spec):
    """Kafka reports its built-in SMTs under its own version: a Kafka 4.1 config pinning it runs unchanged;
    a plugin that is not Kafka's answers only to the package version."""
    cfg = {"transforms": "a", "transforms.a.type": "org.apache.kafka.connect.transforms.Filter",
           "transforms.a.plugin.version": spec}
    assert build_chain(cfg).aliases == ["a"]
    with pytest.raises(ConfigError, match=r"available versions: \[0\.1\.0\]"):
        build_chain({"transforms": "a", "transforms.a.type": "io.debezium.transforms.ExtractNewRecordState",
                     "transforms.a.plugin.version": spec})


# -- a nullable struct lifted over a run of stages (Chain.apply) ---------------------------------------------
NESTED = "struct<id:int,name:string,secret:string,addr:struct<city:string,zip:int>>"
RUN = {"transforms": "rename,mask,cast,insert,flatten,route,tokey",
       "transforms.rename.type": "ReplaceField$Value", "transforms.rename.renames": "name:customer",
       "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "secret",
       "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "id:string",
       "transforms.insert.type": "InsertField$Value", "transforms.insert.offset.field": "src_offset",
       "transforms.flatten.type": "Flatten$Value", "transforms.flatten.delimiter": "_",
       "transforms.route.type": "RegexRouter", "transforms.route.regex": "t", "transforms.route.replacement": "u",
       "transforms.tokey.type": "ValueToKey", "transforms.tokey.fields": "id"}


def _one_stage_at_a_time(df, cfg):
    """The chain without lifting: every stage applied on its own."""
    for stage in build_chain(cfg).stages:
        df = stage.apply(df)
    return df


def test_lifted_run_gives_what_the_stages_give_one_at_a_time(make_records):
    from chispa import assert_df_equality

    rows = [("a", {"id": 1, "name": "x", "secret": "s", "addr": {"city": "Lyon", "zip": 69}}),
            ("b", {"id": 2, "name": None, "secret": None, "addr": None}),
            ("c", {"id": None, "name": "z", "secret": "q", "addr": {"city": None, "zip": None}})]
    df = make_records(rows, value_type=NESTED).withMetadata("value", {"doc": "orders"})
    cfg = {**RUN, "transforms": "rename,mask,cast,insert,flatten,route"}
    lifted = apply_transforms(df, cfg)
    assert lifted.schema == _one_stage_at_a_time(df, cfg).schema  # nullability and metadata included
    assert not [c for c in lifted.columns if c.startswith("__kc_")]
    assert_df_equality(lifted, _one_stage_at_a_time(df, cfg))
    assert lifted.collect()[1]["value"].asDict() == {
        "id": "2", "customer": None, "secret": None, "addr_city": None, "addr_zip": None, "src_offset": 1}


def test_lifted_run_passes_a_tombstone_through_as_null(make_records):
    df = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}), ("b", None)], value_type=NESTED)
    cfg = {**RUN, "transforms": "rename,cast,insert,flatten,route"}  # no stage here fails a tombstone
    out = apply_transforms(df, cfg).collect()
    assert out[1]["value"] is None and out[1]["topic"] == "u"
    assert out[0]["value"]["customer"] == "x"


def test_lifted_run_still_fails_a_tombstone_where_kafka_does(make_records):
    df = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}),
                       {"key": "b", "value": None, "offset": 9}], value_type=NESTED)
    with pytest.raises(Exception, match=r"MaskField\$Value \(alias mask\) failed: .*found: null.*offset=9"):
        apply_transforms(df, RUN).collect()
    tolerant = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}), ("b", None)],
                            value_type=NESTED, tolerant=True)
    out = apply_transforms(tolerant, RUN).collect()
    assert errors(out)[0] is None and "MaskField$Value (alias mask)" in errors(out)[1]
    assert out[0]["key"].asDict() == {"id": "1"} and out[0]["value"]["secret"] == ""


def test_tombstone_predicate_inside_a_lifted_run_sees_the_tombstone(make_records):
    df = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}), ("b", None)], value_type=NESTED)
    cfg = {**RUN, "transforms": "rename,dropTomb,mask,tokey", "predicates": "tomb",
           "predicates.tomb.type": "RecordIsTombstone",
           "transforms.dropTomb.type": "Filter", "transforms.dropTomb.predicate": "tomb"}
    out = apply_transforms(df, cfg).collect()
    assert [r["key"]["id"] for r in out] == [1]


def test_lifted_run_builds_the_value_struct_once(make_records):
    # The point of lifting: over a nullable value, the run's struct updates merge into one struct expression
    # (stage by stage, each stage builds its own intermediate struct per record).
    df = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}), ("b", None)], value_type=NESTED)
    cfg = {**RUN, "transforms": "rename,mask,cast,insert"}

    def structs_built(out):
        return out._jdf.queryExecution().optimizedPlan().toString().count("named_struct(")

    assert structs_built(apply_transforms(df, cfg)) == 1
    assert structs_built(_one_stage_at_a_time(df, cfg)) > 1


def test_no_lifting_for_a_run_that_rewrites_the_value_less_than_twice(make_records):
    df = make_records([("a", {"id": 1, "name": "x", "secret": "s", "addr": None}), ("b", None)], value_type=NESTED)
    cfg = {**RUN, "transforms": "route,rename"}  # one $Value SMT: nothing to merge, so no flag and no coalesce
    plan = apply_transforms(df, cfg)._jdf.queryExecution().optimizedPlan().toString()
    assert "__kc_null_value" not in plan and "coalesce(value" not in plan
    cfg = {**RUN, "transforms": "route,rename,mask"}
    assert "__kc_null_value" in apply_transforms(df, cfg)._jdf.queryExecution().optimizedPlan().toString()


def test_smts_rebuilding_a_struct_keep_its_schema_name_and_version(make_records):
    """Kafka's SMTs copy a schema's name, version, doc and parameters (``SchemaUtil.copySchemaBasics``) into the
    struct they rebuild: the value's ``connect.*`` column metadata survives them. Not its optional flag: the
    rebuilt struct (``SchemaBuilder.struct()``) is required; MaskField and Cast keep the schema as it was."""
    df = make_records([(None, {"a": 1, "b": "x", "c": {"d": 2}})], value_type="struct<a:int,b:string,c:struct<d:int>>")
    df = df.withMetadata("value", {"connect.name": "com.example.Row", "connect.version": 3})
    basics = {"connect.name": "com.example.Row", "connect.version": 3}
    required = {**basics, "connect.optional": False}
    for smt, md in ((ReplaceField.Value(exclude=["b"], renames=["a:z"]), required),
                    (MaskField.Value(fields=["b"]), basics), (InsertField.Value(**{"topic.field": "t"}), required),
                    (Cast.Value(spec="a:int64"), basics), (Flatten.Value(), required),
                    (HeaderFrom.Value(fields=["b"], headers=["h"], operation="move"), required)):
        out = smt(df)
        assert dict(out.schema["value"].metadata) == md, type(smt).__qualname__
    # a new, unnamed, required struct
    assert dict(HoistField.Value(field="row")(df).schema["value"].metadata) == {"connect.optional": False}
