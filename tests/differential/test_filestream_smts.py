"""FileStreamSource with every Kafka SMT and predicate, through Apache Kafka Connect and through ours, compared
record by record: topic, key bytes, value bytes (JsonConverter with and without schemas, StringConverter),
headers (SimpleHeaderConverter).

Every case is a connector config, run unchanged on both sides: by Kafka Connect 4.3 (all cases are connectors of
one standalone worker, run together) into its own broker, and by ours (one batch job: the cases' pipelines,
``read_batch`` each, unioned, produced with Spark's Kafka writer) into the run's broker. A batch read runs the same
connector, transforms and converters as a stream's micro-batch; one streaming query over the ~40 cases would start
a Spark source runner process per case (about a minute of the suite), which the streaming tests of each part
already cover. The Kafka
record timestamp is not compared: Spark's Kafka sink cannot set it (README, "Kafka as the bus"). Where a case
cannot give the same records, :data:`DIFFERENCES` holds why, the README lists it, and the case's test checks that
difference exactly, so that a change on either side shows.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.core.records import HEADERS_TYPE
from spark_connect_bridge.engine.pipeline import read_batch
from spark_connect_bridge.errors import ConfigError
from tests.support.kafka_connect import topic_records

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
SIMPLE_HEADERS = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

INPUTS = {
    "words": ["alpha", "beta", "gamma delta", "", "ünïcödé"],
    "numbers": ["1", "-22", "300", "0", "2147483647"],
    "decimals": ["1.5", "-0.25", "3", "1e3"],
    "line-ends": ["crlf\r", "lone\rcr", "end"],
    "times": ["2024-01-02 03:04:05", "1999-12-31 23:59:59", "1970-01-01 00:00:00"],
}


def json_converters(schemas: bool = True) -> dict[str, str]:
    flag = str(schemas).lower()
    return {"key.converter": JSON, "key.converter.schemas.enable": flag,
            "value.converter": JSON, "value.converter.schemas.enable": flag,
            "header.converter": SIMPLE_HEADERS}


def chain(*steps: tuple[str, str, dict[str, str]], predicates: dict[str, tuple[str, dict[str, str]]] | None = None
          ) -> dict[str, str]:
    """``transforms``/``predicates`` keys of (alias, class, settings) steps and {alias: (class, settings)}."""
    config = {"transforms": ",".join(alias for alias, _, _ in steps)}
    for alias, kind, settings in steps:
        config[f"transforms.{alias}.type"] = kind
        config.update({f"transforms.{alias}.{k}": v for k, v in settings.items()})
    if predicates:
        config["predicates"] = ",".join(predicates)
        for alias, (kind, settings) in predicates.items():
            config[f"predicates.{alias}.type"] = kind
            config.update({f"predicates.{alias}.{k}": v for k, v in settings.items()})
    return config


def hoist(field: str = "line", alias: str = "hoist") -> tuple[str, str, dict[str, str]]:
    return (alias, T + "HoistField$Value", {"field": field})


# name -> (input, topic, config). Topics are the configs' own: each side has a broker of its own.
CASES: dict[str, tuple[str, str, dict[str, str]]] = {
    "plain-json": ("words", "plain-json", json_converters()),
    "plain-json-schemaless": ("words", "plain-json-schemaless", json_converters(False)),
    "plain-string": ("words", "plain-string", {"key.converter": STRING, "value.converter": STRING}),
    "line-ends": ("line-ends", "line-ends", {"key.converter": STRING, "value.converter": STRING}),
    "hoist": ("words", "hoist", {**json_converters(), **chain(hoist())}),
    "hoist-schemaless": ("words", "hoist-schemaless", {**json_converters(False), **chain(hoist())}),
    "insert-field": ("words", "insert-field", {**json_converters(), **chain(
        hoist(), ("insert", T + "InsertField$Value",
                  {"topic.field": "topic!", "static.field": "origin", "static.value": "file"}))}),
    "insert-field-schemaless": ("words", "insert-field-schemaless", {**json_converters(False), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"topic.field": "topic", "static.field": "origin?",
                                                      "static.value": "file"}))}),
    "insert-field-partition": ("words", "insert-field-partition", {**json_converters(), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"partition.field": "part", "static.field": "origin",
                                                      "static.value": "file"}))}),
    "insert-field-offset": ("words", "insert-field-offset", {**json_converters(), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"offset.field": "off"}))}),
    "cast-whole": ("numbers", "cast-whole", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int64"}))}),
    "cast-fields": ("numbers", "cast-fields", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int32"}), hoist("n"),
        ("insert", T + "InsertField$Value", {"static.field": "flag", "static.value": "true"}),
        ("cast2", T + "Cast$Value", {"spec": "n:float64,flag:boolean"}))}),
    "cast-narrowing": ("numbers", "cast-narrowing", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int64"}), hoist("n"),
        ("cast2", T + "Cast$Value", {"spec": "n:int8"}))}),
    "cast-floats-to-string": ("decimals", "cast-floats-to-string", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "float64"}), hoist("x"),
        ("cast2", T + "Cast$Value", {"spec": "x:string"}))}),
    "cast-floats-schemaless": ("decimals", "cast-floats-schemaless", {**json_converters(False), **chain(
        ("cast", T + "Cast$Value", {"spec": "float32"}))}),
    "extract-field": ("words", "extract-field", {**json_converters(), **chain(
        hoist(), ("extract", T + "ExtractField$Value", {"field": "line"}))}),
    "extract-field-v2": ("words", "extract-field-v2", {**json_converters(), **chain(
        hoist("inner", "h1"), hoist("outer", "h2"),
        ("extract", T + "ExtractField$Value", {"field": "outer.inner", "field.syntax.version": "V2"}))}),
    "flatten": ("words", "flatten", {**json_converters(), **chain(
        hoist("inner", "h1"), hoist("outer", "h2"), ("flatten", T + "Flatten$Value", {"delimiter": "_"}))}),
    "header-from-copy": ("words", "header-from-copy", {**json_converters(), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"static.field": "origin", "static.value": "file"}),
        ("headers", T + "HeaderFrom$Value", {"fields": "line,origin", "headers": "h_line,h_origin",
                                             "operation": "copy"}))}),
    "header-from-move": ("numbers", "header-from-move", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int32"}), hoist("n"),
        ("insert", T + "InsertField$Value", {"static.field": "origin", "static.value": "file"}),
        ("headers", T + "HeaderFrom$Value", {"fields": "n,origin", "headers": "h_n,h_n", "operation": "move"}))}),
    "insert-and-drop-headers": ("words", "insert-and-drop-headers", {**json_converters(), **chain(
        ("h1", T + "InsertHeader", {"header": "decimal", "value.literal": "1.50"}),
        ("h2", T + "InsertHeader", {"header": "text", "value.literal": "some text"}),
        ("h3", T + "InsertHeader", {"header": "gone", "value.literal": "x"}),
        ("h4", T + "InsertHeader", {"header": "list", "value.literal": "[1, 2,3]"}),
        ("h5", T + "InsertHeader", {"header": "gone", "value.literal": "y"}),
        ("drop", T + "DropHeaders", {"headers": "gone"}))}),
    "mask-field": ("numbers", "mask-field", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int32"}), hoist("n"),
        ("insert", T + "InsertField$Value", {"static.field": "secret", "static.value": "s3cr3t"}),
        ("mask", T + "MaskField$Value", {"fields": "n,secret"}))}),
    "mask-field-replacement": ("numbers", "mask-field-replacement", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int64"}), hoist("n"),
        ("mask", T + "MaskField$Value", {"fields": "n", "replacement": "-1"}))}),
    "regex-router": ("words", "orders-words", {**json_converters(), **chain(
        ("route", T + "RegexRouter", {"regex": "(.*)-words", "replacement": "$1-routed"}))}),
    "regex-router-no-match": ("words", "regex-router-no-match", {**json_converters(), **chain(
        ("route", T + "RegexRouter", {"regex": "nomatch", "replacement": "other"}))}),
    "replace-field": ("words", "replace-field", {**json_converters(), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"topic.field": "t", "static.field": "s",
                                                      "static.value": "file"}),
        ("replace", T + "ReplaceField$Value", {"exclude": "t", "renames": "s:source,line:text"}))}),
    "replace-field-include": ("words", "replace-field-include", {**json_converters(False), **chain(
        hoist(), ("insert", T + "InsertField$Value", {"topic.field": "t", "static.field": "s",
                                                      "static.value": "file"}),
        ("replace", T + "ReplaceField$Value", {"include": "line,s", "renames": "s:source"}))}),
    "set-schema-metadata": ("words", "set-schema-metadata", {**json_converters(), **chain(
        hoist(), ("meta", T + "SetSchemaMetadata$Value", {"schema.name": "com.example.Line",
                                                          "schema.version": "3"}))}),
    "set-schema-metadata-whole": ("words", "set-schema-metadata-whole", {**json_converters(), **chain(
        ("meta", T + "SetSchemaMetadata$Value", {"schema.name": "com.example.Text"}))}),
    "timestamp-converter": ("times", "timestamp-converter", {**json_converters(), **chain(
        hoist("ts"), ("ts", T + "TimestampConverter$Value", {"field": "ts", "format": "yyyy-MM-dd HH:mm:ss",
                                                            "target.type": "Timestamp"}))}),
    "timestamp-converter-chain": ("times", "timestamp-converter-chain", {**json_converters(), **chain(
        ("ts1", T + "TimestampConverter$Value", {"format": "yyyy-MM-dd HH:mm:ss", "target.type": "unix",
                                                 "unix.precision": "seconds"}),
        hoist("epoch"),
        ("ts2", T + "TimestampConverter$Value", {"field": "epoch", "target.type": "string",
                                                 "format": "dd/MM/yyyy HH:mm", "unix.precision": "seconds"}))}),
    "timestamp-converter-date": ("times", "timestamp-converter-date", {**json_converters(False), **chain(
        ("ts1", T + "TimestampConverter$Value", {"format": "yyyy-MM-dd HH:mm:ss", "target.type": "Date"}))}),
    "value-to-key": ("words", "value-to-key", {**json_converters(), **chain(
        hoist(), ("key", T + "ValueToKey", {"fields": "line"}),
        ("extract", T + "ExtractField$Key", {"field": "line"}))}),
    "value-to-key-schemaless": ("words", "value-to-key-schemaless", {**json_converters(False), **chain(
        hoist(), ("key", T + "ValueToKey", {"fields": "line"}))}),
    "hoist-key": ("words", "hoist-key", {**json_converters(), **chain(
        hoist(), ("key", T + "ValueToKey", {"fields": "line"}), ("hk", T + "HoistField$Key", {"field": "k"}))}),
    "filter-topic-matches": ("words", "filter-topic-matches", {**json_converters(), **chain(
        ("drop", T + "Filter", {"predicate": "isMine"}),
        predicates={"isMine": (P + "TopicNameMatches", {"pattern": "filter-.*"})})}),
    "filter-negated": ("words", "filter-negated", {**json_converters(), **chain(
        ("drop", T + "Filter", {"predicate": "isMine", "negate": "true"}),
        predicates={"isMine": (P + "TopicNameMatches", {"pattern": "filter-.*"})})}),
    "predicate-has-header": ("words", "predicate-has-header", {**json_converters(), **chain(
        ("mark", T + "InsertHeader", {"header": "seen", "value.literal": "yes"}),
        hoist("kept", "h1"), ("h2", T + "HoistField$Value", {"field": "never", "predicate": "hasOther"}),
        ("h3", T + "HoistField$Value", {"field": "wrapped", "predicate": "hasSeen"}),
        predicates={"hasSeen": (P + "HasHeaderKey", {"name": "seen"}),
                    "hasOther": (P + "HasHeaderKey", {"name": "other"})})}),
    "predicate-tombstone": ("words", "predicate-tombstone", {**json_converters(), **chain(
        ("drop", T + "Filter", {"predicate": "isTombstone"}), hoist(),
        ("h2", T + "HoistField$Value", {"field": "outer", "predicate": "isTombstone", "negate": "true"}),
        predicates={"isTombstone": (P + "RecordIsTombstone", {})})}),
    # Kafka's documentation, "Predicates": its two examples, as written, on topics foo, bar and baz.
    **{f"documented-predicates-{topic}": ("words", topic, {**json_converters(), **chain(
        hoist("other_field"), ("key", T + "ValueToKey", {"fields": "other_field"}),
        ("Filter", T + "Filter", {"predicate": "IsFoo"}),
        ("Extract", T + "ExtractField$Key", {"field": "other_field", "predicate": "IsBar", "negate": "true"}),
        predicates={"IsFoo": (P + "TopicNameMatches", {"pattern": "foo"}),
                    "IsBar": (P + "TopicNameMatches", {"pattern": "bar"})})}) for topic in ("foo", "bar", "baz")},
    "eight-smt-chain": ("numbers", "eight-smt-chain", {**json_converters(), **chain(
        ("cast", T + "Cast$Value", {"spec": "int64"}), hoist("n"),
        ("insert", T + "InsertField$Value", {"topic.field": "topic", "static.field": "src", "static.value": "f"}),
        ("mask", T + "MaskField$Value", {"fields": "src"}),
        ("replace", T + "ReplaceField$Value", {"renames": "n:number"}),
        ("key", T + "ValueToKey", {"fields": "number"}),
        ("header", T + "InsertHeader", {"header": "via", "value.literal": "chain"}),
        ("route", T + "RegexRouter", {"regex": "(.*)-chain", "replacement": "$1-routed"}))}),
}

#: Cases whose chain drops every record (a predicate that matches every record of the connector's one topic).
DROPS_ALL = {"filter-topic-matches"}

#: Cases whose JsonConverter schemas differ in their ``optional`` flags only (compared without them): none, each
#: schema's flag is Connect's (FileStreamSource's required string, then each SMT's schema rules).
OPTIONAL_FLAGS: set[str] = set()

#: Cases whose records cannot be the same, and why (the README lists them, "Compared with Kafka Connect"); each has a
#: test below that checks the difference exactly.
DIFFERENCES = {
    "line-ends": "a lone carriage return ends a line in Kafka's FileStreamSource; ours ends lines at \\n only",
    "insert-field-partition": "Kafka's FileStreamSource records have no Kafka partition, so InsertField's "
                              "partition.field holds null; ours carry partition 0 (the source partition)",
    "insert-field-offset": "Kafka's InsertField takes offset.field from sink records only and fails the task on a "
                           "source record; ours inserts the record's offset (its position in the file)",
    "set-schema-metadata-whole": "Kafka 4.3's SetSchemaMetadata fails on a schema that is not a struct ('Cannot list "
                                 "fields on non-struct type'); ours renames it",
    "predicate-has-header": "a predicated stage that changes a struct's fields: one DataFrame column holds one "
                            "type, so ours merges both shapes by field name (the other shape's fields are null)",
    **{f"documented-predicates-{topic}": "a predicated stage that changes the key's type (struct -> string): one "
                                         "DataFrame column holds one type, so ours holds both in a VARIANT, "
                                         "written schemaless (the payloads are Kafka's, the schema null)"
       for topic in ("foo", "bar", "baz")},
}


def _write_inputs(root: str) -> dict[str, str]:
    paths = {}
    for name, lines in INPUTS.items():
        paths[name] = os.path.join(root, f"{name}.txt")
        with open(paths[name], "w", encoding="utf-8", newline="") as f:
            f.write("".join(line + "\n" for line in lines))
    return paths


def _config(case: str, paths: dict[str, str]) -> dict[str, str]:
    source, topic, settings = CASES[case]
    return {"name": case, "connector.class": "FileStreamSource", "file": paths[source], "topic": topic,
            **settings}


def _serialized(df):
    """A pipeline's records as Spark's Kafka sink takes them (key and value as bytes), for the union."""
    def as_binary(name):
        return (F.col(name).cast("binary") if name in df.columns else F.lit(None).cast("binary")).alias(name)
    return df.select(as_binary("key"), as_binary("value"), "topic", F.col("headers").cast(HEADERS_TYPE))


def _output_topics(case: str) -> list[str]:
    topic = CASES[case][1]
    routed = {"regex-router": "orders-routed", "eight-smt-chain": "eight-smt-routed"}
    return [routed.get(case, topic)]


@pytest.fixture(scope="module")
def outputs(spark, connect, reference_kafka, bootstrap, tmp_path_factory):
    """Every case through both sides: {case: (Kafka Connect's records, ours | the ConfigError ours raised)}."""
    root = str(tmp_path_factory.mktemp("filestream"))
    paths = _write_inputs(root)
    configs = {case: _config(case, paths) for case in CASES}
    done = {case: connect.file_source_done(case, paths[CASES[case][0]], _output_topics(case)) for case in CASES}
    failed = connect.run(configs.values(), done=done, timeout=180, allow_failures=True, keep=True)
    positions = {case: _settled_offsets(connect, case) for case in ("plain-string", "line-ends")}
    for case in CASES:
        connect.delete(case)
    theirs = {case: failed[case] or [r for t in _output_topics(case)
                                     for r in topic_records(reference_kafka.bootstrap, t)]
              for case in CASES}

    ours_dfs, rejected = [], {}
    for case, config in configs.items():
        try:
            ours_dfs.append(_serialized(read_batch(spark, config)))
        except ConfigError as e:
            rejected[case] = e
    union = ours_dfs[0]
    for df in ours_dfs[1:]:
        union = union.unionByName(df)
    union.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()
    ours = {case: rejected.get(case) or [r for t in _output_topics(case) for r in topic_records(bootstrap, t)]
            for case in CASES}
    return {**{case: (theirs[case], ours[case]) for case in CASES},
            "positions": {case: (positions[case], paths[CASES[case][0]]) for case in positions}}


def _without_optional(data: bytes | None) -> bytes | None:
    """A JsonConverter envelope with the ``optional`` flags of its schema left out (see :data:`OPTIONAL_FLAGS`)."""
    if data is None or not data.startswith(b'{"schema":'):
        return data

    def strip(schema):
        if isinstance(schema, dict):
            return {k: strip(v) for k, v in schema.items() if k != "optional"}
        return [strip(v) for v in schema] if isinstance(schema, list) else schema
    envelope = json.loads(data)
    return json.dumps({"schema": strip(envelope["schema"]), "payload": envelope["payload"]}).encode()


def _settled_offsets(connect, case: str) -> list:
    """The connector's committed offsets once its committed position stops moving (commits every 200 ms)."""
    last, deadline = None, time.monotonic() + 30
    while time.monotonic() < deadline:
        offsets = connect.offsets(case)
        if offsets and offsets == last:
            return offsets
        last = offsets
        time.sleep(0.5)
    return last or []


def _comparable(records, *, optional_flags: bool = True) -> list[tuple]:
    if optional_flags:
        return [(r.topic, r.key, r.value, r.headers) for r in records]
    return [(r.topic, _without_optional(r.key), _without_optional(r.value), r.headers) for r in records]


def _payloads(records) -> list:
    return [json.loads(r.value)["payload"] for r in records]


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@pytest.mark.parametrize("case", [c for c in CASES if c not in DIFFERENCES])
def test_same_records_as_kafka_connect(outputs, case):
    theirs, ours = outputs[case]
    assert not isinstance(theirs, str), f"Kafka Connect fails where ours gives {ours}: {theirs[:3000]}"
    assert not isinstance(ours, Exception), f"ours rejects a config Kafka Connect runs: {ours}"
    assert bool(theirs) == (case not in DROPS_ALL), theirs
    flags = case not in OPTIONAL_FLAGS
    assert _comparable(ours, optional_flags=flags) == _comparable(theirs, optional_flags=flags)


def test_lone_carriage_return_ends_a_line_only_in_kafka(outputs):
    theirs, ours = outputs["line-ends"]
    assert [r.value for r in theirs] == [b"crlf", b"lone", b"cr", b"end"]
    assert [r.value for r in ours] == [b"crlf", b"lone\rcr", b"end"]


def test_insert_field_partition_is_null_only_in_kafka(outputs):
    theirs, ours = outputs["insert-field-partition"]
    assert [p for p in _payloads(theirs)] == [{"line": w, "part": None, "origin": "file"} for w in INPUTS["words"]]
    assert [p for p in _payloads(ours)] == [{"line": w, "part": 0, "origin": "file"} for w in INPUTS["words"]]


def test_insert_field_offset_on_a_source_record_fails_only_in_kafka(outputs):
    theirs, ours = outputs["insert-field-offset"]
    assert isinstance(theirs, str) and "Only SinkRecord supported for [field insertion], found: org.apache.kafka." \
                                       "connect.source.SourceRecord" in theirs
    starts = [sum(len(w.encode()) + 1 for w in INPUTS["words"][:i]) for i in range(len(INPUTS["words"]))]
    assert _payloads(ours) == [{"line": w, "off": at} for w, at in zip(INPUTS["words"], starts)]  # each line's byte


def test_set_schema_metadata_of_a_primitive_fails_only_in_kafka(outputs):
    theirs, ours = outputs["set-schema-metadata-whole"]
    assert isinstance(theirs, str) and "Cannot list fields on non-struct type" in theirs
    assert [json.loads(r.value) for r in ours] == [
        {"schema": {"type": "string", "optional": False, "name": "com.example.Text"}, "payload": w}
        for w in INPUTS["words"]]


def test_predicated_stages_merge_struct_shapes_by_field_name(outputs):
    theirs, ours = outputs["predicate-has-header"]
    assert _payloads(theirs) == [{"wrapped": {"kept": w}} for w in INPUTS["words"]]
    assert _payloads(ours)[0] == {"wrapped": {"never": None, "kept": "alpha"}, "never": None, "kept": None}
    assert [_without_nulls(p) for p in _payloads(ours)] == _payloads(theirs)
    assert [r.headers for r in ours] == [r.headers for r in theirs]


def test_kafka_documented_predicate_example_runs_with_a_schemaless_key(outputs):
    foo, bar, baz = (outputs[f"documented-predicates-{t}"] for t in ("foo", "bar", "baz"))
    assert foo[0] == [] and foo[1] == []
    assert [json.loads(r.key)["payload"] for r in bar[0]] == [{"other_field": w} for w in INPUTS["words"]]
    assert [json.loads(r.key)["payload"] for r in baz[0]] == INPUTS["words"]
    for theirs, ours in (bar, baz):
        # the same records but for the key's schema: Kafka's each record's own, ours none (a VARIANT key)
        assert [json.loads(r.key) for r in ours] == [{"schema": None, "payload": json.loads(r.key)["payload"]}
                                                     for r in theirs]
        assert [(r.topic, _without_optional(r.value), r.headers) for r in ours] == \
            [(r.topic, _without_optional(r.value), r.headers) for r in theirs]


def test_kafka_file_positions_count_java_chars_ours_bytes(outputs):
    for case, (offsets, path) in outputs["positions"].items():
        with open(path, "rb") as f:
            data = f.read()
        [offset] = offsets
        assert offset["partition"] == {"filename": path}
        assert offset["offset"]["position"] == len(data.decode("utf-8").encode("utf-16-le")) // 2, case
    # ours: the byte position of the next line (FileStreamSource's docstring); equal on an ASCII file only
    words = outputs["positions"]["plain-string"]
    assert words[0][0]["offset"]["position"] < os.path.getsize(words[1])
