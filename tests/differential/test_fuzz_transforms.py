"""The differential fuzzer (issue 39): records drawn by Hypothesis (:mod:`tests.support.fuzz_records`) through
Kafka's own converters, SMTs and predicates (one JVM for the file, :class:`tests.support.fuzz_reference.KafkaReference`)
and through ours (:func:`tests.support.fuzz_reference.ours`), compared record by record: key, value (their
JsonConverter envelopes, schemas included), headers, topic, partition, timestamp, dropped records and errors.

A failure on both sides is equal when both are errors of the same stage and exception class. A config ours refuses
at plan time is equal to Kafka failing every record it transforms (Kafka finds the same problem per record).
Differences that remain are listed in :data:`KNOWN` with the reason (docs/comparison.md); the comparison takes them
out explicitly, and the tests in ``test_fuzz_known_differences`` pin each.

CI runs :data:`EXAMPLES` derandomized examples per chain; ``KCONNECT_FUZZ_EXAMPLES=100000`` runs a long, random one.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.support.fuzz_records import cases
from tests.support.fuzz_reference import JSON_CONVERTER, KafkaReference, ours

T = "org.apache.kafka.connect.transforms."
P = "org.apache.kafka.connect.transforms.predicates."
LONG = int(os.environ.get("KCONNECT_FUZZ_EXAMPLES", "0"))
EXAMPLES = LONG or 6
# Shrinking reruns Spark jobs by the hundred: on for the long run or KCONNECT_FUZZ_SHRINK=1, off in CI (a
# failure there prints its drawn records as they are).
SHRINK = bool(LONG) or os.environ.get("KCONNECT_FUZZ_SHRINK") == "1"
FUZZ = settings(max_examples=EXAMPLES, derandomize=not LONG, deadline=None, database=None,
                suppress_health_check=list(HealthCheck), print_blob=True,
                phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []))

SCHEMAD = {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
           "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}


def steps(*stages: tuple[str, dict[str, str]], predicates: dict[str, tuple[str, dict[str, str]]] | None = None
          ) -> dict[str, str]:
    config = {"transforms": ",".join(f"s{i}" for i in range(len(stages)))}
    for i, (kind, settings_) in enumerate(stages):
        config[f"transforms.s{i}.type"] = T + kind
        config.update({f"transforms.s{i}.{k}": v for k, v in settings_.items()})
    if predicates:
        config["predicates"] = ",".join(predicates)
        for name, (kind, settings_) in predicates.items():
            config[f"predicates.{name}.type"] = P + kind
            config.update({f"predicates.{name}.{k}": v for k, v in settings_.items()})
    return config


#: chain name -> (its transforms/predicates config, the fields its records draw from: None for all)
CHAINS: dict[str, tuple[dict[str, str], tuple[str, ...] | None]] = {
    "plain": ({}, None),
    "extract-field": (steps(("ExtractField$Value", {"field": "s"})), None),
    "value-to-key": (steps(("ValueToKey", {"fields": "i32,s"})), ("i32", "s", "ts", "sub")),
    "insert-field": (steps(("InsertField$Value", {"offset.field": "off", "partition.field": "part",
                                                  "topic.field": "t", "timestamp.field": "at",
                                                  "static.field": "st", "static.value": "v"})), None),
    "mask-field": (steps(("MaskField$Value", {"fields": "i32,s,f64,bool,dec,date,ts"})), None),
    "cast": (steps(("Cast$Value", {"spec": "i8:int64,i32:string,f64:float32,bool:int8,s:string"})),
             ("i8", "i32", "f64", "bool", "s")),
    "replace-field": (steps(("ReplaceField$Value", {"exclude": "by", "renames": "s:name,i64:big"})), None),
    "hoist-field": (steps(("HoistField$Value", {"field": "wrapped"})), None),
    "flatten": (steps(("Flatten$Value", {"delimiter": "_"})), None),
    "timestamp-string": (steps(("TimestampConverter$Value", {"field": "ts", "target.type": "string",
                                                             "format": "yyyy-MM-dd HH:mm:ss.SSS"})), None),
    "timestamp-unix": (steps(("TimestampConverter$Value", {"field": "ts", "target.type": "unix"})), None),
    "set-schema-metadata": (steps(("SetSchemaMetadata$Value", {"schema.name": "com.example.Row",
                                                               "schema.version": "3"})), None),
    "header-from": (steps(("HeaderFrom$Value", {"fields": "i32,s", "headers": "hi,hs", "operation": "copy"})),
                    ("i32", "s", "i64")),
    "regex-router": (steps(("RegexRouter", {"regex": "(ord)(.*)", "replacement": "x_$1"})), None),
    "timestamp-router": (steps(("TimestampRouter", {"topic.format": "${topic}-${timestamp}",
                                                    "timestamp.format": "yyyyMMdd"})), None),
    "insert-header-drop": (steps(("InsertHeader", {"header": "h3", "value.literal": "x"}),
                                 ("DropHeaders", {"headers": "h1"})), None),
    "filter-tombstones": (steps(("Filter", {"predicate": "tomb", "negate": "false"}),
                          predicates={"tomb": ("RecordIsTombstone", {})}), None),
    "filter-topic": (steps(("Filter", {"predicate": "users"}),
                     predicates={"users": ("TopicNameMatches", {"pattern": "us.*"})}), None),
    "filter-header": (steps(("Filter", {"predicate": "h", "negate": "true"}),
                      predicates={"h": ("HasHeaderKey", {"name": "h2"})}), None),
}


@pytest.fixture(scope="module")
def kafka():
    reference = KafkaReference()
    yield reference
    reference.close()


def _is_error(result: dict[str, Any]) -> bool:
    return "error" in result


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
            if (a["stage"], a["error"]) != (b["stage"], b["error"]):
                out.append(f"offset {rec['offset']}: errors differ: Kafka {a}, ours {b}")
        elif a != b:
            out.append(f"offset {rec['offset']}: Kafka {a}\n   ours {b}")
    return out


def check(spark, kafka, config: dict[str, str], records: list[dict[str, Any]]) -> None:
    theirs = kafka.run(config, records)
    mine = ours(spark, config, records)
    diffs = compare(config, records, theirs, mine)
    assert not diffs, "\n".join(diffs[:5])


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_schemad_records_give_kafkas_results(spark, kafka, chain):
    transforms, names = CHAINS[chain]

    @FUZZ
    @given(records=cases(names=names))
    def run(records):
        check(spark, kafka, {**SCHEMAD, **transforms}, records)

    run()
