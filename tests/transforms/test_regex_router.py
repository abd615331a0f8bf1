import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import RegexRouter, apply_transforms


def test_whole_topic_match_with_group_reference(make_records):
    df = make_records([{"value": "v", "topic": "db.public.orders"}, {"value": None, "topic": "xdb.public.orders"},
                       {"value": "v", "topic": "db.public.orders.extra"}])
    out = df.transform(RegexRouter(regex=r"db\.public\.([a-z]+)", replacement="$1-topic"))
    assert [r["topic"] for r in out.collect()] == ["orders-topic", "xdb.public.orders", "db.public.orders.extra"]


def test_replacement_is_replace_first_of_a_whole_match(make_records):
    # Java: "abc".replaceFirst(".*", "X") == "X" (replaceAll would give "XX").
    df = make_records([{"value": "v", "topic": "abc"}])
    assert df.transform(RegexRouter(regex=".*", replacement="X")).collect()[0]["topic"] == "X"


def test_struct_value_and_escaped_dollar(make_records):
    df = make_records([{"value": {"a": 1}, "topic": "t1"}], value_type="struct<a:int>")
    row = apply_transforms(df, {"transforms": "r",
                                "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
                                "transforms.r.regex": "t(\\d)", "transforms.r.replacement": "\\$$1"}).collect()[0]
    assert row["topic"] == "$1" and row["value"].a == 1


def test_java_only_syntax_accepted(make_records):
    df = make_records([{"value": "v", "topic": "Ünïcode"}])
    assert df.transform(RegexRouter(regex=r"\p{L}++", replacement="ok")).collect()[0]["topic"] == "ok"


@pytest.mark.parametrize("config, key, fragment", [
    ({"replacement": "x"}, "regex", "Missing required configuration"),
    ({"regex": "a"}, "replacement", "Missing required configuration"),
    ({"regex": "(a", "replacement": "x"}, "regex", "Invalid regex"),
    ({"regex": "(a)", "replacement": "$2"}, "replacement", "No group 2"),
])
def test_config_errors(spark, config, key, fragment):
    with pytest.raises(ConfigError) as e:
        RegexRouter(config)
    assert e.value.keys == [key] and fragment in str(e.value)


TOPICS = ["orders-1", "orders-", "orders", "xorders-1", "orders-a\nb", "orders-ünï", None, "-orders-1-sfx", "a.b",
          "ü-ß", "ü-ß-ß", "ü-é\u2028-ß", "ü--ß", "é\nx-é", "é\nx\n-é", "orders-a\u0085b", "orders-\r"]


@pytest.mark.parametrize("regex, replacement", [
    ("orders-(.*)", "clean-$1"), ("(.*)", "p_$1_$0"), ("orders-1", "one"), ("-orders-(.*)-sfx", "$1"),
    (r"a\.b", "ab\\$"), ("(.*)-sfx", "$1"), ("ü-(.*)-ß", "<$1>$0"), ("ü-(.*)", "$1ä"), ("é\nx(.*)-é", "[$1]"),
    ("(.*)", "$1"), ("orders-(.*)", "fixed"),
])
def test_string_fast_path_matches_java_regex(make_records, regex, replacement):
    router = RegexRouter(regex=regex, replacement=replacement)
    assert router.fast is not None
    df = make_records([{"value": "v", "topic": t} for t in TOPICS])
    fast = [r["topic"] for r in df.transform(router).collect()]
    router.fast = None  # force the regexp_replace path
    assert fast == [r["topic"] for r in df.transform(router).collect()]
