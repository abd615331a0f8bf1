import datetime as dt

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.transforms import TimestampConverter
from spark_connect_bridge.transforms.datetime_format import FormatError, translate
from spark_connect_bridge.transforms.values import TIME_NAME

from .conftest import errors

MS = 1714979289123  # 2024-05-06T07:08:09.123Z
TS = dt.datetime(2024, 5, 6, 7, 8, 9, 123000)


def test_unix_millis_to_every_target(make_records):
    df = make_records([("k", {"t": MS})], value_type="struct<t:bigint>")
    got = {}
    for target in ("string", "Date", "Time", "Timestamp", "unix"):
        cfg = {"field": "t", "target.type": target, "format": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"}
        got[target] = df.transform(TimestampConverter.Value(cfg)).collect()[0]["value"].t
    assert got == {"string": "2024-05-06T07:08:09.123Z", "Date": dt.date(2024, 5, 6),
                   "Time": (7 * 3600 + 8 * 60 + 9) * 1000 + 123, "Timestamp": TS, "unix": MS}


def test_time_output_is_tagged_and_string_input_parsed(make_records):
    df = make_records([("k", {"s": "2024-05-06 07:08:09"}), ("k", {"s": "nope"}), ("k", {"s": None})],
                      value_type="struct<s:string>", tolerant=True)
    out = df.transform(TimestampConverter.Value(field="s", target_type="Time", format="yyyy-MM-dd HH:mm:ss"))
    assert out.schema["value"].dataType["s"].metadata == {"connect.name": TIME_NAME}
    rows = out.collect()
    assert rows[0]["value"].s == (7 * 3600 + 8 * 60 + 9) * 1000
    msgs = errors(rows)
    assert "Could not parse timestamp" in msgs[1] and msgs[0] is None and msgs[2] is None


@pytest.mark.parametrize("precision, raw", [("seconds", MS // 1000), ("milliseconds", MS),
                                            ("microseconds", MS * 1000 + 999), ("nanoseconds", MS * 1000000 + 5)])
def test_unix_precision_applies_to_reading(make_records, precision, raw):
    df = make_records([("k", raw)], value_type="bigint")
    out = df.transform(TimestampConverter.Value(target_type="Timestamp", unix_precision=precision))
    expected = TS.replace(microsecond=0) if precision == "seconds" else TS
    assert out.collect()[0]["value"] == expected


def test_whole_value_timestamp_to_unix_micros_and_tombstone(make_records):
    df = make_records([("k", TS), ("k", None)], value_type="timestamp")
    out = df.transform(TimestampConverter.Value(target_type="unix", unix_precision="microseconds"))
    assert out.schema["value"].dataType.simpleString() == "bigint"
    assert [r["value"] for r in out.collect()] == [MS * 1000, None]


def test_integer_input_fails_record(make_records):
    df = make_records([("k", 5)], value_type="int", tolerant=True)
    assert "does not support int input" in errors(
        df.transform(TimestampConverter.Value(target_type="Timestamp")).collect())[0]


def test_string_input_without_format_fails_record(make_records):
    df = make_records([("k", "2024-01-01")], tolerant=True)
    assert "format" in errors(df.transform(TimestampConverter.Value(target_type="unix")).collect())[0]


def test_key_variant_with_date(make_records):
    df = make_records([(dt.date(2024, 5, 6), "v")], key_type="date")
    row = df.transform(TimestampConverter.Key(target_type="unix")).collect()[0]
    assert row["key"] == 1714953600000 and row["value"] == "v"


def test_schemaless_map_field(make_records):
    df = make_records([("k", {"t": "2024-05-06", "x": "y"})], value_type="map<string,string>")
    v = df.transform(TimestampConverter.Value(field="t", target_type="string", format="yyyy-MM-dd")) \
        .collect()[0]["value"]
    assert v == {"t": "2024-05-06", "x": "y"}


@pytest.mark.parametrize("pattern, spark", [("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
                                            ("dd/MM/yy HH:mm", "dd/MM/yy HH:mm"), ("y", "yyyy"),
                                            ("EEEEE d LLL", "EEEE d MMM")])
def test_simple_date_format_translation(pattern, spark):
    assert translate(pattern) == spark


@pytest.mark.parametrize("pattern", ["YYYY", "u", "ww", "S", "SSSSSS", "q", "'open"])
def test_untranslatable_patterns_rejected(pattern):
    with pytest.raises(FormatError):
        translate(pattern)


@pytest.mark.parametrize("config, key, fragment", [
    ({}, "target.type", "Missing required configuration"),
    ({"target.type": "timestamp"}, "target.type", "String must be one of: string, unix, Date, Time, Timestamp"),
    ({"target.type": "string"}, "format", "requires format option"),
    ({"target.type": "unix", "format": "YYYY"}, "format", "week-based year"),
    ({"target.type": "unix", "unix.precision": "minutes"}, "unix.precision", "String must be one of: seconds"),
])
def test_config_errors(config, key, fragment):
    with pytest.raises(ConfigError) as e:
        TimestampConverter.Value(config)
    assert e.value.keys == [key] and fragment in str(e.value)


def test_formats_are_utc_whatever_the_session_time_zone(spark, make_records):
    df = make_records([("k", {"t": MS, "s": "2024-05-06 07:08:09"})], value_type="struct<t:bigint,s:string>")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        out = df.transform(TimestampConverter.Value(field="t", target_type="string", format="yyyy-MM-dd HH:mm:ss")) \
            .transform(TimestampConverter.Value(field="s", target_type="unix", format="yyyy-MM-dd HH:mm:ss"))
        v = out.collect()[0]["value"]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert (v.t, v.s) == ("2024-05-06 07:08:09", MS - 123)


def test_struct_without_the_field_passes_unchanged_as_in_kafka(make_records):
    # Kafka's applyWithSchema converts the field of that name and copies the others: a schema without it
    # leaves the record as it was (tests/differential/test_fuzz_transforms.py found ours failing it)
    df = make_records([("k", {"id": 1})], value_type="struct<id:int>")
    out = df.transform(TimestampConverter.Value(field="ts", **{"target.type": "unix"})).collect()
    assert out[0]["value"]["id"] == 1


def test_epoch_millis_beyond_a_spark_timestamp_fail_the_record_not_the_query(make_records):
    # A java.util.Date holds any long of milliseconds, a Spark timestamp a thousandth of that range; Spark's
    # timestamp_millis failed the whole query on one such record (found by the converters family of
    # tests/differential/test_fuzz_transforms.py, a LongConverter value)
    limit = (2 ** 63 - 1) // 1000  # a Spark timestamp's last millisecond (year 294247: Python's datetime has none)
    df = make_records([("k", 253402300799999), ("k", limit + 1), ("k", -(2 ** 63)), ("k", None)],
                      value_type="bigint", tolerant=True)
    for target in ("Timestamp", "Date", "string"):
        rows = df.transform(TimestampConverter.Value(target_type=target, format="yyyy-MM-dd")).collect()
        msgs = errors(rows)
        assert msgs[0] is None and msgs[3] is None, target
        assert "beyond a Spark timestamp" in msgs[1] and "beyond a Spark timestamp" in msgs[2], target


def test_unix_seconds_saturate_as_javas_time_unit(make_records):
    # Kafka reads seconds with TimeUnit.SECONDS.toMillis, which saturates at Long.MAX_VALUE/MIN_VALUE (Spark's
    # multiplication failed the query); written back as seconds, Long.MAX_VALUE ms is 9223372036854775 s
    df = make_records([("k", 2 ** 63 - 1), ("k", -(2 ** 63)), ("k", 1_700_000_000)], value_type="bigint")
    rows = df.transform(TimestampConverter.Value(target_type="unix", unix_precision="seconds")).collect()
    assert [r["value"] for r in rows] == [(2 ** 63 - 1) // 1000, -((2 ** 63) // 1000), 1_700_000_000]
