"""The differential fuzzer (issue 39): records drawn by Hypothesis (:mod:`tests.support.fuzz_records`) through
Kafka's own converters, SMTs and predicates (one JVM for the file, :class:`tests.support.fuzz_reference.KafkaReference`)
and through ours (:func:`tests.support.fuzz_reference.ours`), compared record by record: key, value (their
JsonConverter envelopes, schemas included), headers, topic, partition, timestamp, dropped records and errors.

A failure on both sides is equal when both are errors of the same stage and exception class. A config ours refuses
at plan time is equal to Kafka failing every record it transforms (Kafka finds the same problem per record).
Differences that remain are listed in :data:`KNOWN` with the reason (docs/comparison.md); the comparison takes them
out explicitly (a chain's own: :data:`CHAIN_DIFFERENCES`, :data:`CHAIN_LEFT_OUT`), and the ``..._is_pinned`` tests
pin each.

An example is one batch of records of one drawn schema; every chain of a family runs over it (Kafka's side: one
round trip; ours: the converters' rows parsed once into a local relation, one query per chain over them).
CI runs :data:`EXAMPLES` derandomized examples per family; ``KCONNECT_FUZZ_EXAMPLES=<n>`` runs n random examples;
``KCONNECT_FUZZ_RECORDS_PER_CHAIN=<n>`` is the long run (docs/comparison.md): random examples, one Hypothesis run of
:data:`CHUNK` examples after another (seeds ``KCONNECT_FUZZ_SEED``, ``+1``, ...), until n records have gone through
every chain of the family, each run's progress a line on stderr (``-s``); ``KCONNECT_FUZZ_CHAINS=<regex>`` keeps
only the chains whose name it matches (a long run for the transforms that fewer chains cover);
``KCONNECT_FUZZ_DUMP=<file>`` writes a failing batch as JSON.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import sys
import time
from collections import Counter
from typing import Any

import hypothesis.internal.conjecture.engine
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.support.chains import chain_config
from tests.support.fuzz_converters import converter_cases, edge_cases
from tests.support.fuzz_debezium import debezium_events
from tests.support.fuzz_records import (
    CDC_KEY,
    CDC_TOPIC,
    SOURCE,
    cases,
    decimal_of,
    schemaless_cases,
    struct_key_cases,
)
from tests.support.fuzz_records import TIMESTAMP as TIMESTAMP_SCHEMA
from tests.support.fuzz_reference import JSON_CONVERTER, KafkaReference, ours, ours_batch

#: the long run: records through every chain of a family (0: CI's run)
PER_CHAIN = int(os.environ.get("KCONNECT_FUZZ_RECORDS_PER_CHAIN", "0"))
#: examples of one Hypothesis run of the long run (each run a seed of its own)
CHUNK = int(os.environ.get("KCONNECT_FUZZ_CHUNK", "20"))
if PER_CHAIN and CHUNK < 2:
    # Hypothesis starts each run with its simplest example (every choice at its minimum): runs of one example
    # would all be that example
    raise ValueError(f"KCONNECT_FUZZ_CHUNK={CHUNK}: a long run needs runs of 2 examples or more")
LONG = int(os.environ.get("KCONNECT_FUZZ_EXAMPLES", "0")) or (CHUNK if PER_CHAIN else 0)
EXAMPLES = LONG or int(os.environ.get("KCONNECT_FUZZ_CI_EXAMPLES", "2"))
#: records per example at most: an example is one batch of records of one drawn schema (a DataFrame holds one
#: type), every chain of the family run over all of them (ours: one query per chain, over the converters' rows)
RECORDS = int(os.environ.get("KCONNECT_FUZZ_RECORDS", "24"))
#: records per example at least: the long run's examples are large (half of RECORDS at least), as an example's cost
#: is mostly fixed (a Spark query per chain): measured, 526 records cost 25.5 s an example and 28 records 19 s
#: (schemad's 27 chains, warm, load 14-17)
MIN_RECORDS = int(os.environ.get("KCONNECT_FUZZ_MIN_RECORDS", str(RECORDS // 2 if PER_CHAIN else 1)))
if RECORDS > 96:
    # Hypothesis gives an example 8 Ki units of choices (engine.BUFFER_SIZE, read when each example starts) and
    # marks a larger draw invalid (an overrun): a record of every field takes up to a few hundred
    hypothesis.internal.conjecture.engine.BUFFER_SIZE = max(8 * 1024, 512 * RECORDS)
# Shrinking reruns Spark jobs by the hundred: on for the long run (KCONNECT_FUZZ_SHRINK=0 turns it off there),
# off in CI (KCONNECT_FUZZ_SHRINK=1 turns it on; a failure there prints its drawn records as they are).
SHRINK = os.environ.get("KCONNECT_FUZZ_SHRINK", "1" if LONG else "0") == "1"
FUZZ = settings(max_examples=EXAMPLES, derandomize=not LONG, deadline=None, database=None,
                suppress_health_check=list(HealthCheck), print_blob=True,
                phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []))

SCHEMAD = {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
           "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}


def steps(*stages: tuple[str, dict[str, str]], predicates: dict[str, tuple[str, dict[str, str]]] | None = None
          ) -> dict[str, str]:
    return chain_config(*stages, predicates=predicates)


#: chain name -> its transforms/predicates config
CHAINS: dict[str, dict[str, str]] = {
    "plain": {},
    "extract-field": steps(("ExtractField$Value", {"field": "s"})),
    "value-to-key": steps(("ValueToKey", {"fields": "i32,s"})),
    "insert-field": steps(("InsertField$Value", {"offset.field": "off", "partition.field": "part",
                                                  "topic.field": "t", "timestamp.field": "at",
                                                  "static.field": "st", "static.value": "v"})),
    "mask-field": steps(("MaskField$Value", {"fields": "i32,s,f64,bool,dec,date,ts"})),
    "cast": steps(("Cast$Value", {"spec": "i8:int64,i32:string,f64:float32,bool:int8,s:string"})),
    "replace-field": steps(("ReplaceField$Value", {"exclude": "by", "renames": "s:name,i64:big"})),
    "hoist-field": steps(("HoistField$Value", {"field": "wrapped"})),
    "flatten": steps(("Flatten$Value", {"delimiter": "_"})),
    "timestamp-string": steps(("TimestampConverter$Value", {"field": "ts", "target.type": "string",
                                                             "format": "yyyy-MM-dd HH:mm:ss.SSS"})),
    "timestamp-unix": steps(("TimestampConverter$Value", {"field": "ts", "target.type": "unix"})),
    "timestamp-time": steps(("TimestampConverter$Value", {"field": "ts", "target.type": "Time"})),
    "timestamp-date": steps(("TimestampConverter$Value", {"field": "ts", "target.type": "Date"})),
    "set-schema-metadata": steps(("SetSchemaMetadata$Value", {"schema.name": "com.example.Row",
                                                               "schema.version": "3"})),
    "header-from": steps(("HeaderFrom$Value", {"fields": "i32,s", "headers": "hi,hs", "operation": "copy"})),
    "regex-router": steps(("RegexRouter", {"regex": "(ord)(.*)", "replacement": "x_$1"})),
    "timestamp-router": steps(("TimestampRouter", {"topic.format": "${topic}-${timestamp}",
                                                    "timestamp.format": "yyyyMMdd"})),
    "insert-header-drop": steps(("InsertHeader", {"header": "h3", "value.literal": "x"}),
                                 ("DropHeaders", {"headers": "h1"})),
    "filter-tombstones": steps(("Filter", {"predicate": "tomb", "negate": "false"}),
                          predicates={"tomb": ("RecordIsTombstone", {})}),
    "filter-topic": steps(("Filter", {"predicate": "users"}),
                     predicates={"users": ("TopicNameMatches", {"pattern": "us.*"})}),
    "filter-header": steps(("Filter", {"predicate": "h", "negate": "true"}),
                      predicates={"h": ("HasHeaderKey", {"name": "h2"})}),
}


SCHEMALESS = {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
              "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}

#: chains of schemaless records (maps): the SMTs' schemaless paths, missing and null fields, nested objects of any
#: shape (``deep``, :data:`tests.support.fuzz_records.NESTED`). Without ``value.converter.spark.schema`` ours reads a
#: schemaless value as a VARIANT, which the SMTs marked ``variant_capable`` take as Kafka's SMTs take its Map
#: (``transforms/base.py``, ``VARIANT_CAPABLE``: ExtractField, ReplaceField, InsertField, ValueToKey, HoistField,
#: MaskField, HeaderFrom, SetSchemaMetadata, TimestampConverter to string or unix, Flatten, Cast) with the record-level
#: transforms.
SCHEMALESS_CHAINS: dict[str, dict[str, str]] = {
    "map-plain": {},
    "map-extract-field": steps(("ExtractField$Value", {"field": "s"})),
    "map-extract-nested": steps(("ExtractField$Value", {"field": "sub.a", "field.syntax.version": "V2"})),
    "map-replace-field": steps(("ReplaceField$Value", {"exclude": "by", "renames": "s:name,i64:big"})),
    "map-filter-tombstones": steps(("Filter", {"predicate": "tomb"}), predicates={"tomb": ("RecordIsTombstone", {})}),
    "map-regex-router": steps(("RegexRouter", {"regex": "(ord)(.*)", "replacement": "x_$1"})),
    "map-insert-header-drop": steps(("InsertHeader", {"header": "h3", "value.literal": "x"}),
                                     ("DropHeaders", {"headers": "h1"})),
    "map-insert-field": steps(("InsertField$Value", {"topic.field": "t", "partition.field": "p",
                                                     "offset.field": "o", "timestamp.field": "s",
                                                     "static.field": "st", "static.value": "v"})),
    "map-value-to-key": steps(("ValueToKey", {"fields": "i32,s,sub,missing"})),
    "map-hoist-field": steps(("HoistField$Value", {"field": "h"})),
    "map-mask-field": steps(("MaskField$Value", {"fields": "i8,f64,bool,s,arr,m,sub,by,missing"})),
    "map-mask-replacement": steps(("MaskField$Value", {"fields": "i32,f32,s,missing", "replacement": "12"})),
    "map-mask-replacement-refused": steps(("MaskField$Value", {"fields": "bool", "replacement": "x"})),
    "map-hoist-then-extract": steps(("HoistField$Value", {"field": "h"}), ("ExtractField$Value", {"field": "h"})),
    "map-header-from-move": steps(("HeaderFrom$Value", {"fields": "i32,s,f64,bool,sub,arr,missing",
                                                        "headers": "a,b,c,d,e,f,g", "operation": "move"})),
    "map-header-from-copy": steps(("HeaderFrom$Value", {"fields": "i64,f32,by", "headers": "a,b,c",
                                                        "operation": "copy"})),
    "map-set-schema-metadata": steps(("SetSchemaMetadata$Value", {"schema.name": "com.example.Row"})),
    "map-timestamp-unix-to-string": steps(("TimestampConverter$Value", {
        "field": "ts", "target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSS"})),
    "map-timestamp-string-to-unix": steps(
        ("TimestampConverter$Value", {"field": "ts", "target.type": "string", "format": "yyyy-MM-dd HH:mm"}),
        ("TimestampConverter$Value", {"field": "ts", "target.type": "unix", "format": "yyyy-MM-dd HH:mm",
                                      "unix.precision": "seconds"})),
    "map-timestamp-of-a-double": steps(("TimestampConverter$Value", {"field": "f64", "target.type": "unix"})),
    "map-flatten": steps(("Flatten$Value", {"delimiter": "_"})),
    "map-cast": steps(("Cast$Value", {"spec": "i8:int16,i16:int8,i32:string,i64:float32,f32:int64,f64:string,"
                                              "bool:int8,s:boolean,by:string,missing:int32"})),
    "map-flatten-then-cast": steps(("Flatten$Value", {}), ("Cast$Value", {"spec": "sub.a:string,sub.b:boolean,"
                                                                                  "f64:float32,deep.a:string"})),
}

#: key-side SMTs ($Key) on struct keys
KEY_CHAINS: dict[str, dict[str, str]] = {
    "key-extract-field": steps(("ExtractField$Key", {"field": "i32"})),
    "key-replace-field": steps(("ReplaceField$Key", {"include": "i32,s,dec", "renames": "s:name"})),
    "key-mask-field": steps(("MaskField$Key", {"fields": "i32,s,bool,arr"})),
    "key-cast": steps(("Cast$Key", {"spec": "i16:int32,i64:string,bool:string"})),
    "key-hoist-field": steps(("HoistField$Key", {"field": "k"})),
    "key-insert-field": steps(("InsertField$Key", {"topic.field": "t", "static.field": "st",
                                                   "static.value": "v"})),
    "key-flatten": steps(("Flatten$Key", {"delimiter": "."})),
    "key-set-schema-metadata": steps(("SetSchemaMetadata$Key", {"schema.name": "com.example.Key",
                                                                 "schema.version": "2"})),
    "key-timestamp-unix": steps(("TimestampConverter$Key", {"field": "ts", "target.type": "unix"})),
    "key-header-from": steps(("HeaderFrom$Key", {"fields": "i32", "headers": "ki", "operation": "copy"})),
}

#: Cast with its types, schema'd
CAST_CHAINS: dict[str, dict[str, str]] = {
    "cast-ints": steps(("Cast$Value", {"spec": "i8:int16,i16:int8,i32:int64,i64:int32"})),
    "cast-floats": steps(("Cast$Value", {"spec": "f32:float64,f64:int32,i64:float32,i32:float64"})),
    "cast-to-string": steps(("Cast$Value", {"spec": "i8:string,f32:string,f64:string,bool:string,by:string,"
                                                    "dec:string,date:string,time:string,ts:string"})),
    "cast-to-boolean": steps(("Cast$Value", {"spec": "i32:boolean,f64:boolean,s:boolean"})),
    "cast-from-string": steps(("Cast$Value", {"spec": "s:int32"})),
    "cast-decimal": steps(("Cast$Value", {"spec": "dec:float64"})),
}

U = "io.debezium.transforms.ExtractNewRecordState"


def unwrap(**settings_: str) -> dict[str, str]:
    return {"transforms": "u", "transforms.u.type": U, **{f"transforms.u.{k}": v for k, v in settings_.items()}}


#: Debezium's ExtractNewRecordState on change events
CDC_CHAINS: dict[str, dict[str, str]] = {
    "unwrap-default": unwrap(),
    **{f"unwrap-{mode}": unwrap(**{"delete.tombstone.handling.mode": mode})
       for mode in ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")},
    "unwrap-legacy-rewrite": unwrap(**{"delete.handling.mode": "rewrite", "drop.tombstones": "false"}),
    "unwrap-legacy-none": unwrap(**{"delete.handling.mode": "none"}),
    "unwrap-add-fields": unwrap(**{"add.fields": "op,table,source.lsn,ts_ms,transaction.id:tx",
                                   "delete.tombstone.handling.mode": "rewrite"}),
    "unwrap-add-headers": unwrap(**{"add.headers": "op,db,source.lsn:lsn",
                                    "delete.tombstone.handling.mode": "rewrite-with-tombstone"}),
    "unwrap-add-headers-tombstone": unwrap(**{"add.headers": "op", "add.headers.prefix": "dbz_",
                                              "delete.tombstone.handling.mode": "tombstone"}),
}


#: chains over the primitive keys and values of Kafka's primitive converters and JsonConverter's options (the
#: ``converters`` family, :mod:`tests.support.fuzz_converters`): each example draws its key and value converters and
#: the settings below marked drawn (:func:`tests.support.fuzz_converters.converter_cases`), merged over these
CONVERTER_CHAINS: dict[str, dict[str, str]] = {
    "prim-plain": {},
    "prim-hoist": steps(("HoistField$Value", {"field": "v"}), ("InsertHeader", {"header": "h3", "value.literal": "x"}),
                        ("RegexRouter", {"regex": "(ord)(.*)", "replacement": "x_$1"})),
    "prim-cast": steps(("Cast$Value", {"spec": "int64"})),  # spec drawn: the whole value to each type
    "prim-key-cast": steps(("Cast$Key", {"spec": "string"})),  # spec drawn
    "prim-timestamp": steps(("TimestampConverter$Value", {"target.type": "unix"})),  # target.type, format drawn
    "prim-filter": steps(("Filter", {"predicate": "p-tomb"}), ("InsertHeader", {"header": "h3", "value.literal": "y"}),
                         predicates={"p-header": ("HasHeaderKey", {"name": "h2"}), "p-tomb": ("RecordIsTombstone", {}),
                                     "p-topic": ("TopicNameMatches", {"pattern": "us.*"})}),  # predicate, negate drawn
    "prim-value-to-key": steps(("ValueToKey", {"fields": "v"})),
    "prim-extract": steps(("ExtractField$Value", {"field": "v"})),
}


D = "io.debezium.transforms."


def debezium(*stages: tuple[str, dict[str, str]]) -> dict[str, str]:
    """A chain of Debezium SMTs (``io.debezium.transforms.`` + kind)."""
    return chain_config(*stages, prefix=D, alias="d")


#: Debezium's other SMTs on the cdc family's change events (rows with the outbox table's columns, records on the
#: topics of sharded tables: tests/support/fuzz_debezium.py), configs as their Debezium pages write them
DEBEZIUM_CHAINS: dict[str, dict[str, str]] = {
    # https://debezium.io/documentation/reference/stable/transformations/extract-changed-record-state.html
    "changed-headers": debezium(("ExtractChangedRecordState", {"header.changed.name": "Changed",
                                                               "header.unchanged.name": "Unchanged"})),
    # ... and its use with ExtractNewRecordState's drop.fields.header.name (the same page, the unwrap page)
    "changed-then-unwrap": debezium(("ExtractChangedRecordState", {"header.unchanged.name": "Unchanged"}),
                                    ("ExtractNewRecordState", {"drop.fields.header.name": "Unchanged",
                                                               "delete.tombstone.handling.mode": "rewrite"})),
    # https://debezium.io/documentation/reference/stable/transformations/outbox-event-router.html
    "outbox-default": debezium(("outbox.EventRouter", {})),
    "outbox-placement": debezium(("outbox.EventRouter", {
        "table.fields.additional.placement": "type:header:eventType,tenant:envelope,aggregatetype:envelope:kind",
        "route.topic.replacement": "${routedByValue}.events", "table.field.event.timestamp": "created_at",
        "table.field.additional.missing": "ignore"})),
    "outbox-route-fatal": debezium(("outbox.EventRouter", {
        "route.by.field": "type", "route.topic.regex": "(?<routedByValue>Order)(.*)",
        "route.topic.replacement": "orders.$2", "table.field.event.key": "tenant",
        "table.op.invalid.behavior": "fatal", "route.tombstone.on.empty.payload": "true",
        "table.fields.additional.placement": "aggregateid:header"})),
    "outbox-expand-json": debezium(("outbox.EventRouter", {"table.expand.json.payload": "true"})),
    # https://debezium.io/documentation/reference/stable/transformations/topic-routing.html
    "reroute-shards": debezium(("ByLogicalTableRouter", {
        "topic.regex": "(.*)customers_shard(.*)", "topic.replacement": "$1customers_all_shards",
        "key.field.name": "shard_id", "key.field.regex": "(.*)customers_shard(.*)", "key.field.replacement": "$2"})),
    "reroute-then-unwrap": debezium(("ByLogicalTableRouter", {"topic.regex": "srv\\.([^.]+)\\.(.*)",
                                                              "topic.replacement": "all.$2"}),
                                    ("ExtractNewRecordState", {})),
}

#: Debezium's SMTs on the schemaless family's records (maps, no envelopes): Debezium 3.6.1 passes a value that is
#: no Struct unchanged, and handles tombstones as it handles a change event's; ByLogicalTableRouter fails a record
#: whose key is no Struct where it reroutes the topic
MAP_DEBEZIUM_CHAINS: dict[str, dict[str, str]] = {
    "map-unwrap-keep-tombstones": debezium(("ExtractNewRecordState", {
        "delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.headers": "op,table"}),
        ("ExtractChangedRecordState", {"header.changed.name": "Changed"})),
    "map-unwrap-outbox": debezium(("ExtractNewRecordState", {}), ("outbox.EventRouter", {})),
    "map-reroute": debezium(("ByLogicalTableRouter", {"topic.regex": "ord(.*)", "topic.replacement": "all$1"})),
}


#: Chains whose Kafka side runs another config: Debezium 3.2 removed ``delete.handling.mode``/``drop.tombstones``
#: (3.6.1 ignores them, test_debezium_ignores_the_legacy_delete_keys); ours reads them as Debezium 3.1 did, which
#: 3.6.1 spells with ``delete.tombstone.handling.mode`` (docs/comparison.md)
KAFKA_SIDE = {
    "unwrap-legacy-rewrite": unwrap(**{"delete.tombstone.handling.mode": "rewrite-with-tombstone"}),
    "unwrap-legacy-none": unwrap(**{"delete.tombstone.handling.mode": "delete-to-tombstone"}),
    # Debezium's EventRouter runs in a source connector: its records have no Kafka partition (the producer
    # partitions by key), which a SinkRecord cannot hold (FuzzTransforms.java runs these on a SourceRecord)
    **{name: {"fuzz.record": "source"} for name in DEBEZIUM_CHAINS if name.startswith("outbox")},
}


@pytest.fixture(scope="module")
def kafka():
    reference = KafkaReference()
    yield reference
    reference.close()


def _is_error(result: dict[str, Any]) -> bool:
    return "error" in result


#: Differences the comparison takes out, each listed in docs/comparison.md and pinned by a test below.
KNOWN = {
    "decimal-precision": "a Decimal without connect.decimal.precision is read as decimal(38, scale) and written "
                         "with connect.decimal.precision=38; pinned by test_decimal_precision_is_pinned",
    "null-with-schema": "a key or value that is null with a schema (the envelope {\"schema\": ..., \"payload\": null}) "
                        "is null bytes here, Kafka writes the envelope; pinned by test_null_with_schema_is_pinned",
}


#: Differences of one chain, listed in docs/comparison.md with the reason: a difference line of the chain that
#: matches its pattern is expected (the chain's fuzz run pins it); any other difference still fails.
CHAIN_DIFFERENCES = {
    # Kafka reads a tombstone schemaless (JsonConverter: no schema for null bytes) and hoists it into a schemaless
    # map {field: null}; here the column's struct schema holds the hoisted null.
    "hoist-field": re.compile(r"^offset \d+: \.value\.schema: Kafka None \| ours \{'type': 'struct'"),
    # Kafka masks a Decimal with BigDecimal.ZERO (scale 0), which its own JsonConverter then refuses to write for a
    # schema of another scale; here the mask is a zero of the schema's scale and the record is written.
    # Kafka's JsonConverter reads a JSON float through BigDecimal (USE_BIG_DECIMAL_FOR_FLOATS), which has no
    # negative zero: -0.0 is read as 0.0, and Cast to string writes "0.0"; here the float keeps its sign, "-0.0".
    # Kafka formats a Date with Values.dateFormatFor, which takes any instant before 1970-01-02 for a time of day
    # ("00:00:00.000Z" for 1950-06-21); here a Date is written as a date (a Timestamp as Kafka writes it).
    "cast-to-string": re.compile(r"^offset \d+: \.value\.payload\.((f32|f64): Kafka 0\.0 \| ours -0\.0"
                                 r"|date: Kafka \d\d:\d\d:\d\d\.\d{3}Z \| ours \S+)$"),
    # (the difference line names the keys first: Kafka's result has serialize_error/message, ours schema/payload)
    "mask-field": re.compile(r"^offset \d+: \.value: .*Kafka \{'serialize_error': "
                             r"'org\.apache\.kafka\.connect\.errors\.DataException', 'message': 'Decimal value has "
                             r"mismatching scale for given Decimal schema"),
    # Debezium's EventRouter expands a JSON text payload into a struct of a schema inferred per record; a Spark
    # column needs the payload's schema before the records are read: refused here (from_json downstream instead)
    "outbox-expand-json": re.compile(r"^ours refused the config \(.*table\.expand\.json\.payload: Invalid value True"),
    # Debezium reads table.field.event.timestamp with Struct.getInt64, which fails on a Connect Timestamp (a
    # java.util.Date: time.precision.mode=connect); here its instant is the record's timestamp
    "outbox-placement": re.compile(r"^offset \d+: result: keys only Kafka's \['error', 'message', 'stage'\].*"
                                   r"'error': 'java\.lang\.ClassCastException', 'message': \"class java\.util\.Date "
                                   r"cannot be cast to class java\.lang\.Long"),
    # ByLogicalTableRouter leaves a record whose topic does not match unchanged; here the key column has one type,
    # so such a record's key carries key.field.name too, as null
    "reroute-shards": re.compile(r"^offset \d+: \.key\.schema\.fields: Kafka \[.*\] \| ours \[.*\{'type': "
                                 r"'string', 'optional': False, 'field': 'shard_id'\}\]$"),
}


# Kafka's primitive converters (String, ByteArray, Short ... Boolean) read a tombstone as a null with the
# converter's schema, and an SMT that needs a Struct or a timestamp type (ExtractField, TimestampConverter of a
# boolean) fails it for that schema; here a tombstone is a null without a schema (KNOWN["null-with-schema"]) and
# passes as null. Only tombstones: ours' result has a null value.
_PRIMITIVE_TOMBSTONE = re.compile(r"^offset \d+: result: keys only Kafka's \['error', 'message', 'stage'\], only "
                                  r"ours \[.*\] \(Kafka \{'stage': 'TRANSFORMATION', .* \| ours \{'key': .*?, "
                                  r"'value': None, ")
# TimestampConverter of epoch milliseconds: a java.util.Date holds any long, a Spark timestamp a thousandth of that
# range: beyond it (292,000 years) the record fails here (Kafka writes it, or its JsonConverter fails on a Date);
# Kafka formats with SimpleDateFormat, whose calendar is Julian before 1582-10-15 and whose "yyyy" is the year of
# the era (no sign); here the proleptic Gregorian calendar, a sign before a year under 1 or over 9999
_TIMESTAMP_RANGE = re.compile(
    _PRIMITIVE_TOMBSTONE.pattern
    + r"|^offset \d+: result: keys only Kafka's \[.*\], only ours \['error', 'message', 'stage'\] .*"
      r"'message': '[^']*failed: beyond"  # (cut at 200 characters: "beyond a Spark timestamp")
    + r"|^offset \d+: \.value\.payload: Kafka (0\d{3}|1[0-4]\d\d|15[0-7]\d|1582|\d{5,})-\d\d-\d\d \| ours "
      r"[+-]?\d{4,}-\d\d-\d\d$"
    # SimpleDateFormat parses leniently (2024-02-30 is March 1st, a field of fewer digits, leading blanks, trailing
    # text); here the whole text must match the pattern (test_timestamp_parse_of_a_string_with_trailing_text_...)
    + r"|^offset \d+: result: keys only Kafka's \[.*\], only ours \['error', 'message', 'stage'\] .*"
      r"'message': '[^']*failed: Could")
# Kafka's Cast of a whole value keeps its schema's name (SchemaUtil.copySchemaBasics): a Date, Time, Timestamp or
# Decimal cast to another type keeps the logical name, which its JsonConverter then refuses to write ("Invalid type
# for Time, expected Date but was class java.lang.Float"); here the cast value is written under its new type
_CAST_LOGICAL = re.compile(r"^offset \d+: \.(key|value): keys only Kafka's \['message', 'serialize_error'\], only ours "
                           r"\['payload', 'schema'\] \(Kafka \{'serialize_error': "
                           r"'org\.apache\.kafka\.connect\.errors\.DataException', "
                           r"'message': 'Invalid type for (Date|Time|Timestamp|Decimal), ")
# cast-to-string's negative zero, of a whole JsonConverter float or double key or value (Kafka reads it as 0.0)
_CAST_LOGICAL = re.compile(_CAST_LOGICAL.pattern + r"|^offset \d+: \.(key|value)\.payload: Kafka 0\.0 \| ours -0\.0$")
CHAIN_DIFFERENCES.update({"prim-extract": _PRIMITIVE_TOMBSTONE, "prim-timestamp": _TIMESTAMP_RANGE,
                          "prim-cast": _CAST_LOGICAL, "prim-key-cast": _CAST_LOGICAL,
                          "prim-value-to-key": _PRIMITIVE_TOMBSTONE,
                          # hoist-field's, on a JsonConverter tombstone (pinned by that chain)
                          "prim-hoist": CHAIN_DIFFERENCES["hoist-field"]})

#: Chain differences that an example shows only when its drawn schema has the field (a Decimal, a float), or its
#: drawn converters a tombstone: pinned by a test of their own below, not by the fuzz run seeing them.
PINNED_BY_TEST = {"mask-field", "cast-to-string", "prim-extract", "prim-timestamp", "prim-value-to-key", "prim-hoist",
                  "prim-cast", "prim-key-cast", "outbox-placement", "reroute-shards"}


def _without_precision(node: Any) -> Any:
    """A schema without the Decimals' connect.decimal.precision parameter (KNOWN["decimal-precision"])."""
    if isinstance(node, dict):
        if node.get("name") == "org.apache.kafka.connect.data.Decimal" and "parameters" in node:
            node = {**node, "parameters": {k: v for k, v in node["parameters"].items()
                                           if k != "connect.decimal.precision"}}
        return {k: _without_precision(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_without_precision(v) for v in node]
    return node


def _envelope(node: Any) -> Any:
    """An envelope as compared: optional flags and all; Decimals without their precision parameter
    (KNOWN["decimal-precision"]); a null payload as null (KNOWN["null-with-schema"])."""
    if isinstance(node, dict) and "payload" in node and node["payload"] is None:
        return None
    if isinstance(node, dict) and "schema" in node:
        return {"schema": _without_precision(node["schema"]), "payload": node["payload"]}
    return node


def _normal(result: dict[str, Any], config: dict[str, str] | None = None) -> dict[str, Any]:
    """A result as compared: envelopes by :func:`_envelope` (schemaless JSON as it is)."""
    if "key" not in result:
        return result
    config = config or {}
    return {**result, **{side: result[side] if config.get(f"{side}.converter.schemas.enable") == "false"
                         else _envelope(result[side]) for side in ("key", "value")}}


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path or 'result'}: keys only Kafka's {sorted(a.keys() - b.keys())}, only ours " \
                   f"{sorted(b.keys() - a.keys())} (Kafka {str(a)[:200]} | ours {str(b)[:200]})"
        for k in a:
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path or 'result'}: Kafka {str(a)[:300]} | ours {str(b)[:300]}"


def compare(config: dict[str, str], records: list[dict[str, Any]], theirs: list[dict[str, Any]],
            mine: list[dict[str, Any]]) -> list[str]:
    """The differences between Kafka's results and ours, one line each (empty when they agree)."""
    if mine and "config_error" in mine[0]:
        if theirs and "config_error" in theirs[0]:
            return []
        transformed = [r for r, rec in zip(theirs, records, strict=True) if rec["value"] is not None]
        if transformed and all(_is_error(r) and r["stage"] == "TRANSFORMATION" for r in transformed):
            return []
        return [f"ours refused the config ({mine[0]['message']}); Kafka: {theirs}"]
    if theirs and "config_error" in theirs[0]:
        return [f"Kafka refused the config ({theirs[0]['message']}); ours ran: {mine}"]
    out = []
    for rec, a, b in zip(records, theirs, mine, strict=True):
        if _is_error(a) and _is_error(b):
            # both record errors of one stage: Kafka's errors.tolerance handles every exception of a stage alike
            # (Kafka throws IllegalArgumentException or NullPointerException for some missing fields, ours a
            # DataException naming the field)
            if a["stage"] != b["stage"]:
                out.append(f"offset {rec['offset']}: errors differ: Kafka {a}, ours {b}")
        elif _normal(a, config) != _normal(b, config):
            out.append(f"offset {rec['offset']}: {_first_difference(_normal(a, config), _normal(b, config))}")
    return out


def _names_of_topics_left_out(node: Any) -> Any:
    """A result without the schema names made of a topic's name (``<topic>.Key``, ``.Value``, ``.Envelope``)."""
    if isinstance(node, dict):
        return {k: _names_of_topics_left_out(v) for k, v in node.items()
                if not (k == "name" and isinstance(v, str) and v.endswith((".Key", ".Value", ".Envelope")))}
    if isinstance(node, list):
        return [_names_of_topics_left_out(v) for v in node]
    return node


def _null_fields_left_out(result: dict[str, Any]) -> dict[str, Any]:
    """A result whose value struct is without its null fields (schema and payload)."""
    value = result.get("value")
    if not (isinstance(value, dict) and isinstance(value.get("payload"), dict) and "schema" in value):
        return result
    payload = {k: v for k, v in value["payload"].items() if v is not None}
    schema = {**value["schema"], "fields": [f for f in value["schema"]["fields"] if f["field"] in payload]}
    return {**result, "value": {"schema": schema, "payload": payload}}


def _value_name_left_out(result: dict[str, Any]) -> dict[str, Any]:
    """A result whose value schema is without its name."""
    value = result.get("value")
    if not (isinstance(value, dict) and isinstance(value.get("schema"), dict)):
        return result
    return {**result, "value": {**value, "schema": {k: v for k, v in value["schema"].items() if k != "name"}}}


#: Chains whose results are compared without a part, listed in docs/comparison.md with the reason; the rest of
#: each result is compared. ByLogicalTableRouter renames the key's and the envelope's schemas after the new topic
#: (``all.t.Key``) in the records it reroutes, and not in the others: a Spark column has one schema name.
#: Pinned by test_by_logical_table_router_unrerouted_key_and_schema_names_difference_is_pinned.
#: ExtractNewRecordState's drop.fields.header.name removes the listed fields from each record's schema; here the
#: column keeps them, null (pinned by test_unwrap_drop_fields_header_difference_is_pinned). EventRouter names the
#: struct of table.fields.additional.placement's envelope after the route.by.field value of the first event the
#: SMT instance saw (a cached schema: ``srv.public.t.<aggregatetype>.Value``); here it has no name
#: (test_outbox_envelope_schema_name_difference_is_pinned).
CHAIN_LEFT_OUT: dict[str, Any] = {
    "reroute-shards": _names_of_topics_left_out, "reroute-then-unwrap": _names_of_topics_left_out,
    "changed-then-unwrap": _null_fields_left_out, "outbox-placement": _value_name_left_out,
}


def check(spark, kafka, configs: dict[str, dict[str, str]], records: list[dict[str, Any]]) -> Counter[str]:
    """Assert that Kafka's results and ours agree on ``records`` for every config but for the chains' listed
    differences (ours: one Spark query per config over the converters' local rows; Kafka's: one round trip);
    return how many of those each chain showed."""
    drawn = getattr(records, "settings", None)
    if drawn:  # settings drawn with the records (tests.support.fuzz_converters.Drawn): "" for every chain, by name
        configs = {name: {**config, **drawn[""], **drawn.get(name, {})} for name, config in configs.items()}
    mine = ours_batch(spark, configs, records)
    [kafkas] = kafka.run_many({name: {**config, **KAFKA_SIDE[name]} if name in KAFKA_SIDE else config
                               for name, config in configs.items()}, [records])
    diffs, listed = [], Counter[str]()
    for name, config in configs.items():
        expected = CHAIN_DIFFERENCES.get(name)
        left_out = CHAIN_LEFT_OUT.get(name, lambda result: result)
        for d in compare(config, records, [left_out(r) for r in kafkas[name]], [left_out(r) for r in mine[name]]):
            if expected and expected.match(d):
                listed[name] += 1
            else:
                diffs.append(f"[{name}] {d}")
    if diffs and os.environ.get("KCONNECT_FUZZ_DUMP"):  # the failing batch, to replay outside Hypothesis
        with open(os.environ["KCONNECT_FUZZ_DUMP"], "w", encoding="utf-8") as f:
            json.dump([{**r, "key": r["key"] and r["key"].decode(), "value": r["value"] and r["value"].decode(),
                        "headers": [[k, v and v.decode()] for k, v in r["headers"]]} for r in records], f)
    assert not diffs, "\n".join(diffs[:8])
    return listed


#: family -> (the converters, its chains, the strategy of its cases)
FAMILIES: dict[str, tuple[dict[str, str], dict[str, dict[str, str]], Any]] = {
    "schemad": (SCHEMAD, {**CHAINS, **CAST_CHAINS}, cases),
    "schemaless": (SCHEMALESS, {**SCHEMALESS_CHAINS, **MAP_DEBEZIUM_CHAINS}, schemaless_cases),
    "keys": (SCHEMAD, KEY_CHAINS, struct_key_cases),
    "cdc": (SCHEMAD, {**CDC_CHAINS, **DEBEZIUM_CHAINS}, debezium_events),
    # converters and chain settings drawn per example, with the records (fuzz_converters.Drawn)
    "converters": ({}, CONVERTER_CHAINS, converter_cases),
}


#: the long run has no timeout (setup.cfg's 600 s per test ended it, the process with it)
LONG_RUN = [pytest.mark.timeout(0)] if PER_CHAIN else []


@pytest.mark.parametrize("family", [pytest.param(name, marks=LONG_RUN) for name in sorted(FAMILIES)])
def test_generated_records_give_kafkas_results(spark, kafka, family):
    converters, chains, strategy = FAMILIES[family]
    only = re.compile(os.environ.get("KCONNECT_FUZZ_CHAINS", ""))
    configs = {name: {**converters, **chain} for name, chain in chains.items() if only.search(name)}
    listed = Counter[str]()
    seen = Counter[str]()

    @given(records=strategy(max_records=RECORDS, min_records=MIN_RECORDS))
    def run(records):
        listed.update(check(spark, kafka, configs, records))
        seen["examples"] += 1
        seen["records"] += len(records)

    fuzzed = FUZZ(run)
    if not PER_CHAIN:
        fuzzed()
    else:  # the long run: Hypothesis runs of CHUNK examples, a seed each, until PER_CHAIN records per chain
        base = int(os.environ.get("KCONNECT_FUZZ_SEED", str(random.randrange(2 ** 32))))
        start, i = time.monotonic(), 0
        while seen["records"] < PER_CHAIN:
            seed(base + i)(fuzzed)()
            i += 1
            print(f"fuzz {family}: seed {base}+{i - 1} done; {seen['examples']} examples, {seen['records']} records "
                  f"through each of {len(configs)} chains, {time.monotonic() - start:.0f} s", file=sys.stderr,
                  flush=True)
    # the pin: each listed difference is still there (else docs/comparison.md is stale)
    stale = [name for name in configs if name in CHAIN_DIFFERENCES and name not in PINNED_BY_TEST
             and not listed[name]]
    assert not stale, f"the differences listed in CHAIN_DIFFERENCES were not seen: {stale}"


def _record(key: Any, value: Any) -> dict[str, Any]:
    return {"key": None if key is None else json.dumps(key).encode(),
            "value": None if value is None else json.dumps(value).encode(),
            "topic": "orders", "partition": 0, "offset": 100, "timestamp": 1_700_000_000_000, "headers": []}


def test_optional_flags_are_kafkas(spark, kafka):
    # a required field of a required struct stays required through the converters; HoistField makes a required
    # struct around the (required) value, InsertField adds an optional field and a required one ("!")
    schema = {"type": "struct", "optional": False, "fields": [{"field": "id", "type": "int32", "optional": False}]}
    records = [_record({"schema": {"type": "string", "optional": False}, "payload": "k"},
                       {"schema": schema, "payload": {"id": 1}})]
    chained = {**SCHEMAD, **steps(("HoistField$Value", {"field": "row"}),
                                  ("InsertField$Value", {"topic.field": "t", "static.field": "s!",
                                                         "static.value": "v"}))}
    theirs = {"plain": kafka.run(SCHEMAD, records)[0], "chained": kafka.run(chained, records)[0]}
    mine = {name: ours(spark, {name: config}, records)[name][0]
            for name, config in (("plain", SCHEMAD), ("chained", chained))}
    assert theirs["plain"]["value"]["schema"] == mine["plain"]["value"]["schema"] == schema
    assert [(f["field"], f["optional"]) for f in mine["chained"]["value"]["schema"]["fields"]] == \
        [("row", False), ("t", True), ("s", False)]
    assert mine["chained"]["value"]["schema"]["optional"] is False
    assert theirs == mine


def test_null_with_schema_is_pinned(spark, kafka):
    # KNOWN["null-with-schema"]: Kafka keeps the schema of a null key; here a null key is null bytes
    records = [_record({"schema": {"type": "string", "optional": True}, "payload": None},
                       {"schema": {"type": "int32", "optional": False}, "payload": 5})]
    theirs = kafka.run(SCHEMAD, records)[0]
    mine = ours(spark, {"plain": SCHEMAD}, records)["plain"][0]
    assert theirs["key"] == {"schema": {"type": "string", "optional": True}, "payload": None}
    assert mine["key"] is None
    assert _normal(theirs) == _normal(mine)


def _change_event(op: str, offset: int, before: dict[str, Any] | None, after: dict[str, Any] | None
                  ) -> dict[str, Any]:
    row = {"type": "struct", "name": f"{CDC_TOPIC}.Value", "optional": True,
           "fields": [{"field": "id", "type": "int32", "optional": False}]}
    envelope = {"type": "struct", "name": f"{CDC_TOPIC}.Envelope", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {**SOURCE, "field": "source"},
        {"field": "op", "type": "string", "optional": False}]}
    source = {"version": "3.6.1.Final", "connector": "postgresql", "name": "srv", "ts_ms": 1, "db": "db",
              "schema": "public", "table": "t", "lsn": 7}
    return {**_record({"schema": CDC_KEY, "payload": {"id": 1}}, {"schema": envelope, "payload": {
        "before": before, "after": after, "source": source, "op": op}}), "topic": CDC_TOPIC, "offset": offset}


def test_debezium_ignores_the_legacy_delete_keys(kafka):
    # Debezium 3.2 removed delete.handling.mode and drop.tombstones: 3.6.1 runs its default ("tombstone") with
    # them set; ours reads them as 3.1 did (KAFKA_SIDE, docs/comparison.md)
    records = [_change_event("c", 100, None, {"id": 1}), _change_event("d", 101, {"id": 1}, None),
               {**_change_event("d", 102, None, None), "value": None}]
    default = kafka.run({**SCHEMAD, **unwrap()}, records)
    assert [r.get("dropped", False) for r in default] == [False, False, True]  # the delete kept, the tombstone dropped
    for legacy in ({"delete.handling.mode": "rewrite", "drop.tombstones": "false"},
                   {"delete.handling.mode": "none"}, {"delete.handling.mode": "drop", "drop.tombstones": "true"}):
        assert kafka.run({**SCHEMAD, **unwrap(**legacy)}, records) == default, legacy


#: StringConverter (UTF-8) for key and value, as Kafka's docs write it
STRINGS = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
           "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


#: a string key's envelope (ours reads the batch's key type from its envelopes)
KEY = {"schema": {"type": "string", "optional": False}, "payload": "k"}


def test_decimal_precision_is_pinned(spark, kafka):
    # KNOWN["decimal-precision"]: Kafka writes a Decimal's schema as read, with its scale only; here it is read as
    # Spark's decimal(38, scale), whose precision is written back as connect.decimal.precision (with a precision
    # parameter, both sides write it as read)
    decimal = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1}
    schema = {"type": "struct", "optional": False, "fields": [
        {**decimal, "parameters": {"scale": "2"}, "field": "dec"},
        {**decimal, "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "dec10"}]}
    records = [_record(KEY, {"schema": schema, "payload": {"dec": "BAE=", "dec10": "BAE="}})]
    theirs = kafka.run(SCHEMAD, records)[0]
    mine = ours(spark, {"plain": SCHEMAD}, records)["plain"][0]
    assert theirs["value"] == {"schema": schema, "payload": {"dec": "BAE=", "dec10": "BAE="}}
    assert [f["parameters"] for f in mine["value"]["schema"]["fields"]] == [
        {"scale": "2", "connect.decimal.precision": "38"}, {"scale": "2", "connect.decimal.precision": "10"}]
    assert {**mine, "value": {**mine["value"], "schema": schema}} == theirs
    assert _normal(theirs) == _normal(mine)


def test_mask_field_decimal_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["mask-field"]: Kafka's mask of a Decimal is BigDecimal.ZERO (scale 0), which its own
    # JsonConverter refuses to write for a schema of scale 2; here a zero of the schema's scale is written
    schema = {"type": "struct", "optional": False, "fields": [
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2"}, "field": "dec"}]}
    records = [_record(KEY, {"schema": schema, "payload": {"dec": "BAE="}})]
    config = {**SCHEMAD, **steps(("MaskField$Value", {"fields": "dec"}))}
    theirs = kafka.run(config, records)[0]
    mine = ours(spark, {"mask": config}, records)["mask"][0]
    assert theirs["value"]["serialize_error"] == "org.apache.kafka.connect.errors.DataException"
    assert "Decimal value has mismatching scale" in theirs["value"]["message"]
    assert decimal_of(mine["value"]["payload"]["dec"]) == 0


def test_cast_negative_zero_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["cast-to-string"]: Kafka reads the JSON float -0.0 through BigDecimal, which has no
    # negative zero
    schema = {"type": "struct", "optional": False, "fields": [{"type": "double", "optional": True, "field": "f64"}]}
    records = [_record(KEY, {"schema": schema, "payload": {"f64": -0.0}})]
    config = {**SCHEMAD, **steps(("Cast$Value", {"spec": "f64:string"}))}
    theirs = kafka.run(config, records)[0]
    mine = ours(spark, {"cast": config}, records)["cast"][0]
    assert theirs["value"]["payload"] == {"f64": "0.0"}
    assert mine["value"]["payload"] == {"f64": "-0.0"}


def test_cast_of_a_date_before_1970_to_string_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["cast-to-string"]: Kafka's Values.dateFormatFor takes an instant before 1970-01-02 for a
    # time of day; ours writes a Date as a date, and a Timestamp as Kafka does
    schema = {"type": "struct", "optional": False, "fields": [
        {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1,
         "field": "date"},
        {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
         "field": "ts"}]}
    records = [_record(KEY, {"schema": schema, "payload": {"date": -1, "ts": -1500}})]
    config = {**SCHEMAD, **steps(("Cast$Value", {"spec": "date:string,ts:string"}))}
    theirs = kafka.run(config, records)[0]
    mine = ours(spark, {"cast": config}, records)["cast"][0]
    assert theirs["value"]["payload"] == {"date": "00:00:00.000Z", "ts": "23:59:58.500Z"}
    assert mine["value"]["payload"] == {"date": "1969-12-31", "ts": "23:59:58.500Z"}


def test_timestamp_parse_of_a_string_with_trailing_text_difference_is_pinned(spark, kafka):
    # Kafka parses with SimpleDateFormat.parse(String), which reads a prefix of the text and ignores the rest
    # ("7x" with "yyyy" is the year 7); ours parses the whole text and fails the record (docs/comparison.md)
    records = [_record(KEY, {"s": "7x"})]
    config = {**SCHEMALESS, **steps(("TimestampConverter$Value", {"field": "s", "target.type": "unix",
                                                                  "format": "yyyy"}))}
    theirs = kafka.run(config, records)[0]
    mine = ours(spark, {"ts": config}, records)["ts"][0]
    assert theirs["value"] == {"s": -61946467200000}
    assert "Could not parse timestamp: value (7x) does not match pattern" in mine["message"]
    # and it is lenient (setLenient(true), its default): fields roll over, fewer digits and leading blanks are read
    # (CHAIN_DIFFERENCES["prim-timestamp"], a StringConverter value)
    texts = ["2024-02-30", "2024-13-01", "2024-1-2", " 2024-01-02", "2024-01-02"]
    records = [{**_record(None, None), "key": b"k", "value": text.encode(), "offset": 100 + i}
               for i, text in enumerate(texts)]
    config = {**STRINGS, **steps(("TimestampConverter$Value", {"target.type": "unix", "format": "yyyy-MM-dd"}))}
    theirs = kafka.run(config, records)
    mine = ours(spark, {"ts": config}, records)["ts"]
    assert [r["value"]["payload"] for r in theirs] == [1709251200000, 1735689600000, 1704153600000, 1704153600000,
                                                       1704153600000]
    assert [r.get("stage") for r in mine] == ["TRANSFORMATION"] * 4 + [None]
    lines = compare(config, records, theirs, mine)
    assert len(lines) == 4 and all(CHAIN_DIFFERENCES["prim-timestamp"].match(line) for line in lines), lines


def test_primitive_tombstone_through_a_struct_transform_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["prim-extract"/"prim-timestamp"/"prim-value-to-key"]: Kafka's StringConverter reads a
    # tombstone as a null with OPTIONAL_STRING_SCHEMA, which ExtractField refuses ("Cannot look up fields on
    # non-struct type"); here the tombstone passes as null. A value fails on both sides.
    records = [{**_record(None, None), "key": b"k", "value": b"text"},
               {**_record(None, None), "key": b"k", "offset": 101}]
    config = {**STRINGS, **steps(("ExtractField$Value", {"field": "v"}))}
    theirs = kafka.run(config, records)
    mine = ours(spark, {"extract": config}, records)["extract"]
    assert [r.get("stage") for r in theirs] == ["TRANSFORMATION", "TRANSFORMATION"]
    assert theirs[1]["message"] == "Cannot look up fields on non-struct type"
    assert mine[0]["stage"] == "TRANSFORMATION"
    assert mine[1]["value"] is None and mine[1]["key"] == {"schema": {"type": "string", "optional": True},
                                                           "payload": "k"}


def test_json_schema_default_difference_is_pinned(spark, kafka):
    # docs/comparison.md: a Connect schema's "default" is not read here: JsonConverter's replace.null.with.default
    # (true by default) gives Kafka the default for a null payload, and Kafka writes the default back in the schema;
    # here the null stays null and the schema has no default (Spark types carry none). The converters family draws
    # no defaults for this reason.
    schema = {"type": "int32", "optional": True, "default": 7}
    records = [_record(KEY, {"schema": schema, "payload": None}), {**_record(KEY, {"schema": schema, "payload": 3}),
                                                                   "offset": 101}]
    theirs = kafka.run(SCHEMAD, records)
    mine = ours(spark, {"plain": SCHEMAD}, records)["plain"]
    assert [r["value"] for r in theirs] == [{"schema": schema, "payload": 7}, {"schema": schema, "payload": 3}]
    assert [r["value"] for r in mine] == [None, {"schema": {"type": "int32", "optional": True}, "payload": 3}]
    off = {**SCHEMAD, "value.converter.replace.null.with.default": "false"}
    assert kafka.run(off, records)[0]["value"] == {"schema": schema, "payload": None}


def test_every_converter_gives_kafkas_results_at_its_edges(spark, kafka):
    # CI's sweep of the converters family (its two drawn examples cover two converter pairs): every converter over the
    # edges of its bytes (tests.support.fuzz_converters.edge_cases), paired as key converter and value converter
    # (a query each), under HoistField (the value's schema, optional flag included, as a field's; the key as the
    # converter gives it): each converter in one pair, the drawn examples of the family mix them both ways
    keys, values = edge_cases("key.converter"), edge_cases("value.converter")
    names = list(values)
    for key_name, value_name in zip(names[0::2], names[1::2] + names[:1], strict=True):
        (key_config, key_data), (value_config, data) = keys[key_name], values[value_name]
        records = [{**_record(None, None), "key": k, "value": v, "offset": 100 + i}
                   for i, (k, v) in enumerate(itertools.zip_longest(key_data, data))]
        try:
            check(spark, kafka, {"prim-hoist": {**key_config, **value_config, **CONVERTER_CHAINS["prim-hoist"]}},
                  records)
        except AssertionError as e:
            raise AssertionError(f"key {key_name}, value {value_name}: {e}") from e


def test_timestamp_of_epoch_millis_outside_1582_to_9999_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["prim-timestamp"]: Kafka formats a java.util.Date with SimpleDateFormat (Julian calendar
    # before 1582-10-15, "yyyy" the unsigned year of the era) and holds any long; ours formats the proleptic
    # Gregorian calendar with a sign on a year under 1 or over 9999, and fails a record beyond a Spark timestamp
    values = [1_700_000_000_000, -20_000_000_000_000, 253_402_300_800_000, -1_000_000_000_000_000, 2 ** 63 - 1]
    records = [{**_record(None, None), "key": b"k", "value": v.to_bytes(8, "big", signed=True), "offset": 100 + i}
               for i, v in enumerate(values)]
    config = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.converters.LongConverter",
              **steps(("TimestampConverter$Value", {"target.type": "string", "format": "yyyy-MM-dd"}))}
    theirs = [r["value"]["payload"] for r in kafka.run(config, records)]
    mine = ours(spark, {"ts": config}, records)["ts"]
    assert theirs == ["2023-11-14", "1336-03-15", "10000-01-01", "29720-11-16", "292278994-08-17"]
    assert [r["value"]["payload"] for r in mine[:4]] == ["2023-11-14", "1336-03-23", "+10000-01-01", "-29719-04-05"]
    assert "beyond a Spark timestamp" in mine[4]["message"]
    lines = compare(config, records, kafka.run(config, records), mine)
    assert len(lines) == 4 and all(CHAIN_DIFFERENCES["prim-timestamp"].match(line) for line in lines), lines


def test_cast_of_a_whole_logical_value_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["prim-cast"]: Kafka's Cast keeps the whole value's schema name, so a Time cast to float32 is
    # a float named Time, which its JsonConverter refuses; here a float32 is written
    schema = {"type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1, "optional": False}
    records = [_record(KEY, {"schema": schema, "payload": 56631})]
    config = {**SCHEMAD, **steps(("Cast$Value", {"spec": "float32"}))}
    theirs = kafka.run(config, records)
    mine = ours(spark, {"cast": config}, records)["cast"]
    assert theirs[0]["value"]["message"] == "Invalid type for Time, expected Date but was class java.lang.Float"
    assert mine[0]["value"] == {"schema": {"type": "float", "optional": False}, "payload": 56631.0}
    assert all(_CAST_LOGICAL.match(line) for line in compare(config, records, theirs, mine))
    # CHAIN_DIFFERENCES["prim-key-cast"]: the same of a key (found by the long run: a Date key cast to int16)
    date = {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1, "optional": False}
    records = [_record({"schema": date, "payload": 2}, {"schema": schema, "payload": 1})]
    config = {**SCHEMAD, **steps(("Cast$Key", {"spec": "int16"}))}
    theirs = kafka.run(config, records)
    mine = ours(spark, {"cast": config}, records)["cast"]
    assert theirs[0]["key"]["message"] == "Invalid type for Date, expected Date but was class java.lang.Short"
    assert mine[0]["key"] == {"schema": {"type": "int16", "optional": False}, "payload": 2}
    assert all(_CAST_LOGICAL.match(line) for line in compare(config, records, theirs, mine))


def _row_event(fields: list[dict[str, Any]], op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
               topic: str = CDC_TOPIC) -> dict[str, Any]:
    """A change event of a row of ``fields`` (field schemas) on ``topic``."""
    row = {"type": "struct", "name": f"{CDC_TOPIC}.Value", "optional": True, "fields": fields}
    envelope = {"type": "struct", "name": f"{CDC_TOPIC}.Envelope", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True}]}
    return {**_record({"schema": CDC_KEY, "payload": {"id": 1}}, {"schema": envelope, "payload": {
        "before": before, "after": after, "op": op, "ts_ms": 5}}), "topic": topic}


OUTBOX_ROW = [{"field": f, "type": "string", "optional": f != "id"}
              for f in ("id", "aggregatetype", "aggregateid", "payload")]


def test_outbox_event_timestamp_of_a_connect_timestamp_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["outbox-placement"]: Debezium reads table.field.event.timestamp with Struct.getInt64, which
    # throws on a Connect Timestamp (a java.util.Date); here the column's instant is the record's timestamp
    fields = [*OUTBOX_ROW, {**TIMESTAMP_SCHEMA, "field": "created_at", "optional": True}]
    after = {"id": "e1", "aggregatetype": "order", "aggregateid": "a", "payload": "{}", "created_at": 1000}
    records = [_row_event(fields, "c", None, after)]
    config = {**SCHEMAD, **debezium(("outbox.EventRouter", {"table.field.event.timestamp": "created_at"}))}
    theirs = kafka.run({**config, "fuzz.record": "source"}, records)[0]
    mine = ours(spark, {"outbox": config}, records)["outbox"][0]
    assert theirs["error"] == "java.lang.ClassCastException" and "java.util.Date" in theirs["message"]
    assert mine["timestamp"] == 1000 and mine["topic"] == "outbox.event.order"


def test_outbox_envelope_schema_name_difference_is_pinned(spark, kafka):
    # CHAIN_LEFT_OUT["outbox-placement"]: Debezium names the struct of an envelope placement after the
    # route.by.field value of the first event its instance routed, and keeps that name for every later event
    after = {"id": "e1", "aggregatetype": "order", "aggregateid": "a", "payload": "{}"}
    records = [_row_event(OUTBOX_ROW, "c", None, after),
               {**_row_event(OUTBOX_ROW, "c", None, {**after, "aggregatetype": "customer"}), "offset": 101}]
    config = {**SCHEMAD, **debezium(("outbox.EventRouter",
                                     {"table.fields.additional.placement": "aggregateid:envelope"}))}
    theirs = kafka.run({**config, "fuzz.record": "source"}, records)
    mine = ours(spark, {"outbox": config}, records)["outbox"]
    assert [r["value"]["schema"]["name"] for r in theirs] == [f"{CDC_TOPIC}.order.Value"] * 2
    assert [r["value"]["schema"].get("name") for r in mine] == [None] * 2
    assert [_value_name_left_out(r) for r in theirs] == [_value_name_left_out(r) for r in mine]


def test_by_logical_table_router_unrerouted_key_and_schema_names_difference_is_pinned(spark, kafka):
    # CHAIN_DIFFERENCES["reroute-shards"], CHAIN_LEFT_OUT["reroute-*"]: Debezium leaves a record whose topic does
    # not match unchanged and renames the key's and the envelope's schemas of those it reroutes after the new
    # topic; here the key column has one type (the key field null where the topic does not match) and one name
    fields = [{"field": "id", "type": "int32", "optional": False}]
    records = [_row_event(fields, "c", None, {"id": 1}, topic="srv.inventory.customers_shard1"),
               {**_row_event(fields, "c", None, {"id": 2}), "offset": 101}]
    config = {**SCHEMAD, **DEBEZIUM_CHAINS["reroute-shards"]}
    theirs = kafka.run(config, records)
    mine = ours(spark, {"reroute": config}, records)["reroute"]
    assert [r["topic"] for r in theirs] == [r["topic"] for r in mine] == ["srv.inventory.customers_all_shards",
                                                                          CDC_TOPIC]
    assert theirs[0]["key"]["schema"]["name"] == "srv.inventory.customers_all_shards.Key"
    assert theirs[0]["value"]["schema"]["name"] == "srv.inventory.customers_all_shards.Envelope"
    assert mine[0]["key"]["schema"]["name"] == f"{CDC_TOPIC}.Key"
    assert theirs[0]["key"]["payload"] == mine[0]["key"]["payload"] == {"id": 1, "shard_id": "1"}
    assert theirs[1]["key"]["payload"] == {"id": 1}
    assert mine[1]["key"]["payload"] == {"id": 1, "shard_id": None}
    assert _names_of_topics_left_out(theirs[0]) == _names_of_topics_left_out(mine[0])


def test_unwrap_drop_fields_header_difference_is_pinned(spark, kafka):
    # CHAIN_LEFT_OUT["changed-then-unwrap"]: ExtractNewRecordState's drop.fields.header.name removes the listed
    # fields from the record's schema; here the column keeps them, null
    # fields (drop.fields.keep.schema.compatible, the default: only optional ones; the required id stays)
    fields = [{"field": "id", "type": "int32", "optional": False}, {"field": "s", "type": "string", "optional": True},
              {"field": "o", "type": "string", "optional": True}]
    records = [_row_event(fields, "u", {"id": 1, "s": "a", "o": "x"}, {"id": 1, "s": "b", "o": "x"})]
    config = {**SCHEMAD, **DEBEZIUM_CHAINS["changed-then-unwrap"]}
    theirs = kafka.run(config, records)[0]
    mine = ours(spark, {"unwrap": config}, records)["unwrap"][0]
    assert theirs["value"]["payload"] == {"id": 1, "s": "b", "__deleted": "false"}
    assert mine["value"]["payload"] == {"id": 1, "s": "b", "o": None, "__deleted": "false"}
    assert _null_fields_left_out(theirs) == _null_fields_left_out(mine)
