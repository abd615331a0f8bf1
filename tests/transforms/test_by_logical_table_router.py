import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import ByLogicalTableRouter, apply_transforms

from .conftest import errors

KEY = "struct<id:int>"
ENV = "struct<before:struct<id:int>,after:struct<id:int>,op:string>"
# cqrs__postgres-source.json of Debezium's examples
CQRS = {"transforms": "reroute", "transforms.reroute.type": "io.debezium.transforms.ByLogicalTableRouter",
        "transforms.reroute.topic.regex": "polls.public.(.*)", "transforms.reroute.topic.replacement": "$1"}


def _events(make_records):
    rows = [{"key": {"id": 1}, "value": {"before": None, "after": {"id": 1}, "op": "c"}, "topic": t}
            for t in ("polls.public.pollentity", "polls.public.voteentity", "other.topic")]
    rows.append({"key": None, "value": None, "topic": "polls.public.pollentity"})
    return make_records(rows, key_type=KEY, value_type=ENV)


def test_cqrs_config_routes_and_keeps_keys_unique(make_records):
    out = apply_transforms(_events(make_records), CQRS).collect()
    assert [r["topic"] for r in out] == ["pollentity", "voteentity", "other.topic", "pollentity"]
    assert [r["key"] and r["key"].asDict() for r in out] == [
        {"id": 1, "__dbz__physicalTableIdentifier": "polls.public.pollentity"},
        {"id": 1, "__dbz__physicalTableIdentifier": "polls.public.voteentity"},
        {"id": 1, "__dbz__physicalTableIdentifier": None},  # not rerouted: the field is null (one column type)
        None,
    ]
    assert [r["value"] for r in out][:1] == [(None, (1,), "c")]  # values unchanged


def test_a_rerouted_record_whose_key_is_no_struct_fails_as_in_debezium(make_records):
    # Debezium 3.6.1's requireStruct(key, "Updating schema"); a null key, an unmatched topic or no uniqueness pass
    rows = [{"key": k, "value": None, "topic": t} for k, t in (("k", "polls.public.a"), (None, "polls.public.a"),
                                                               ("k", "other.topic"))]
    df = make_records(rows, tolerant=True)
    out = df.transform(ByLogicalTableRouter({"topic.regex": "polls\\.public\\.(.*)", "topic.replacement": "$1"}))
    assert [m and "Only Struct objects supported for [Updating schema], found: java.lang.String" in m
            for m in errors(out.collect())] == [True, None, None]
    plain = df.transform(ByLogicalTableRouter({"topic.regex": "polls\\.public\\.(.*)", "topic.replacement": "$1",
                                               "key.enforce.uniqueness": "false"}))
    assert [r["topic"] for r in plain.collect()] == ["a", "a", "other.topic"]


def test_key_field_name_regex_and_no_uniqueness(make_records):
    cfg = {"topic.regex": "polls\\.public\\.(.*)", "topic.replacement": "all", "key.field.name": "tbl",
           "key.field.regex": "polls\\.public\\.(.*)entity", "key.field.replacement": "$1"}
    out = _events(make_records).transform(ByLogicalTableRouter(cfg)).collect()
    assert [r["topic"] for r in out] == ["all", "all", "other.topic", "all"]
    assert [r["key"] and r["key"]["tbl"] for r in out] == ["poll", "vote", None, None]
    plain = _events(make_records).transform(ByLogicalTableRouter({**cfg, "key.enforce.uniqueness": "false"}))
    assert plain.schema["key"].dataType.simpleString() == KEY


@pytest.mark.parametrize("config, key, fragment", [
    ({"topic.replacement": "x"}, "topic.regex", "topic.regex"),
    ({"topic.regex": "a(.*)", "topic.replacement": "$2"}, "topic.replacement", "group"),
    ({"topic.regex": "a(.*)", "topic.replacement": "$1", "key.field.regex": "(.*)"}, "key.field.replacement",
     "key.field.regex is set"),
    ({"topic.regex": "a(", "topic.replacement": "x"}, "topic.regex", "regex"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        ByLogicalTableRouter(config)
    assert e.value.keys == [key] and fragment in str(e.value)
