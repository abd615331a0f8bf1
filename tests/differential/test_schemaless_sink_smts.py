"""Sink-side SMT chains over schemaless JSON (JsonConverter ``schemas.enable=false``), through Kafka Connect and
through ours: one topic of JSON objects (missing fields, nulls, nested objects and arrays, a tombstone) read by the
same FileStreamSink configs, one per chain, and the written lines compared record by record.

Kafka Connect runs every config as a connector of the differential package's one worker; ours runs the same
configs with :func:`~spark_connect_bridge.engine.pipeline.write_batch` over one batch read of the topic from the
run's broker (the sink side of a stream does the same per micro-batch). ``value.converter.spark.schema`` tells ours
the JSON's Spark type; Kafka's JsonConverter ignores the key.

Kafka's JsonConverter reads a schemaless object as a ``java.util.Map`` and FileStreamSink writes its ``toString()``
(``{id=1, tags=[a, b]}``, in HashMap order); ours reads a struct and writes the same text of it, in the same order,
but for null entries: a struct has every field of its type, where a Map has only those the message had (a missing
field and a null one are one here), so ours leaves null entries out and Kafka's prints ``k=null`` for the message's
null fields. The lines are compared through :func:`_canonical`, which leaves Kafka's null entries out. Every other
difference is named in :data:`DIFFERENCES` and checked exactly.
"""

from __future__ import annotations

import json
import os

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from spark_connect_bridge.core.records import HEADERS, HEADERS_TYPE, RECORD_COLUMNS
from spark_connect_bridge.engine.pipeline import write_batch
from spark_connect_bridge.errors import ConfigError
from tests.support.chains import chain_config

T = "org.apache.kafka.connect.transforms."
JSON = "org.apache.kafka.connect.json.JsonConverter"
TOPIC = "schemaless-sink-in"
T0 = 1_700_000_000_123  # the records' Kafka timestamps: T0, T0 + 1, ...
MESSAGES = [
    (b"k1", {"id": 1, "name": "ada", "ts": 1_700_000_000_000, "tags": ["a", "b"],
             "addr": {"city": "Oslo", "zip": "0150"}, "secret": "s1"}),
    (b"k2", {"id": 2, "name": None, "tags": [], "addr": {"city": None, "zip": "2"}}),  # no ts, no secret
    (b"k3", {"id": 3}),
    (b"k4", None),  # a tombstone
    (None, {"name": "eve", "ts": 0, "tags": None, "addr": None, "secret": "s5"}),  # no id
]
SPARK_SCHEMA = "id BIGINT, name STRING, ts BIGINT, tags ARRAY<STRING>, addr STRUCT<city: STRING, zip: STRING>, " \
               "secret STRING"


def _steps(*steps: tuple[str, dict[str, str]]) -> dict[str, str]:
    return chain_config(*steps, prefix=T)


# connector name -> its chain (each a FileStreamSink of the one topic)
CHAINS: dict[str, dict[str, str]] = {
    "sl-extract-field": _steps(("ExtractField$Value", {"field": "name"})),
    "sl-keys-times-headers": _steps(
        ("ValueToKey", {"fields": "id,name"}), ("ExtractField$Key", {"field": "name"}),
        ("TimestampConverter$Value", {"field": "ts", "target.type": "string", "format": "yyyy-MM-dd'T'HH:mm"}),
        ("HeaderFrom$Value", {"fields": "addr", "headers": "h_addr", "operation": "move"})),
    "sl-mask-field": _steps(("MaskField$Value", {"fields": "id,name,tags,addr,secret"})),
    "sl-replace-flatten-cast-insert": _steps(
        ("ReplaceField$Value", {"exclude": "secret", "renames": "name:who"}), ("Flatten$Value", {}),
        ("Cast$Value", {"spec": "id:string"}),
        ("InsertField$Value", {"timestamp.field": "at", "offset.field": "off", "partition.field": "part",
                               "topic.field": "t", "static.field": "s", "static.value": "v"})),
    # ours renames the declared schema, which a FileStreamSink line does not show: ours' plain lines
    "sl-set-schema-metadata": _steps(("SetSchemaMetadata$Value", {"schema.name": "com.example.Row"})),
    # Kafka 4 ignores these keys: Kafka's plain lines
    "sl-replace-field-3x-names": _steps(("ReplaceField$Value", {"blacklist": "secret", "whitelist": "id,secret"})),
    "sl-plain": {},
    "sl-replace-field": _steps(("ReplaceField$Value", {"exclude": "secret,tags", "renames": "name:who,id:key"})),
    "sl-extract-nested": _steps(("ExtractField$Value", {"field": "addr.city", "field.syntax.version": "V2"})),
    "sl-insert-hoist": _steps(("InsertField$Value", {"timestamp.field": "at", "offset.field": "off",
                                                     "partition.field": "part", "topic.field": "t",
                                                     "static.field": "s", "static.value": "v"}),
                              ("HoistField$Value", {"field": "row"})),
}
#: The chains ours runs without value.converter.spark.schema (the value a VARIANT, as Kafka's a Map), compared with
#: Kafka Connect's lines entry by entry, null entries included (Flatten and Cast among them).
VARIANT_CHAINS = ("sl-plain", "sl-replace-field", "sl-extract-nested", "sl-extract-field", "sl-mask-field",
                  "sl-insert-hoist", "sl-set-schema-metadata", "sl-keys-times-headers",
                  "sl-replace-flatten-cast-insert")

#: Chains whose lines cannot be the same, and why (README, "Compared with Kafka Connect"); each is checked exactly.
DIFFERENCES = {
    "sl-set-schema-metadata": "Kafka fails every non-null record ('Schema required for [updating schema metadata]': "
                              "it reads a Map); ours renames the struct schema the config declares "
                              "(value.converter.spark.schema) and writes every record",
    "sl-replace-field-3x-names": "Kafka 4 removed ReplaceField's blacklist/whitelist and ignores unknown keys, so the "
                                 "field to drop is written; ours reads them as Kafka 3.x did (include/exclude, "
                                 "with a deprecation warning), so it is dropped",
}


def _config(name: str, path: str, *, declared: bool = True) -> dict[str, str]:
    """The chain's FileStreamSink config; ``declared``: with ours' ``value.converter.spark.schema``."""
    return {"name": name, "connector.class": "FileStreamSink", "topics": TOPIC, "file": path,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": JSON,
            "value.converter.schemas.enable": "false", "errors.tolerance": "all", **CHAINS[name],
            **({"value.converter.spark.schema": SPARK_SCHEMA} if declared else {})}


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, (key, value) in enumerate(MESSAGES):
        producer.produce(TOPIC, key=key, value=None if value is None else json.dumps(value).encode(),
                         timestamp=T0 + i)
    producer.flush(30)


def _records(spark, bootstrap: str):
    """The topic as one batch record DataFrame, as the sink's stream reads it (bus.kafka.read_topics)."""
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
          .option("includeHeaders", "true").option("startingOffsets", "earliest").load())
    headers = F.coalesce(F.col(HEADERS), F.array().cast(HEADERS_TYPE)).alias(HEADERS)
    return df.select(*[headers if c == HEADERS else F.col(c) for c in RECORD_COLUMNS])


def _read(path: str) -> list[str] | None:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def lines(spark, connect, reference_kafka, bootstrap, tmp_path_factory):
    """{chain: (Kafka Connect's lines | its failure, ours | the ConfigError ours raised)}."""
    root = str(tmp_path_factory.mktemp("schemaless-sink"))
    for broker in (reference_kafka.bootstrap, bootstrap):
        _produce(broker)
    theirs_path, ours_path = (lambda n: f"{root}/theirs-{n}.txt"), (lambda n: f"{root}/ours-{n}.txt")

    def done(name: str):
        def check() -> bool:  # every record consumed (committed), the file flushed with them
            committed = [o["offset"]["kafka_offset"] for o in connect.offsets(name)]
            return committed == [len(MESSAGES)] and os.path.exists(theirs_path(name))
        return check
    failed = connect.run([_config(n, theirs_path(n)) for n in CHAINS], done={n: done(n) for n in CHAINS},
                         timeout=300, allow_failures=True)  # ten connectors on a loaded machine
    records = _records(spark, bootstrap).cache()
    ours: dict[str, list[str] | ConfigError | None] = {}
    for name in CHAINS:
        for declared in (True, False):
            path = ours_path(name) + ("" if declared else ".variant")
            try:
                write_batch(records, _config(name, path, declared=declared))
                ours[name if declared else name + "/variant"] = _read(path) or []
            except ConfigError as e:
                ours[name if declared else name + "/variant"] = e
    records.unpersist()
    out = {n: (failed[n] or _read(theirs_path(n)), ours[n]) for n in CHAINS}
    out.update({n + "/variant": (out[n][0], ours[n + "/variant"]) for n in CHAINS})
    return out


def _java(line: str):
    """A line of Kafka's FileStreamSink (a value's ``toString()``: ``{k=v, ...}``, ``[a, b]``, ``Struct{k=v,...}``
    or a scalar) as Python: dicts, lists, scalars as their text, ``null`` as None. The test's strings hold no
    ``,``, ``=``, brackets or braces, so the form reads back unambiguously."""
    pos = 0

    def read(stops: str):
        nonlocal pos
        if line.startswith("Struct{", pos):
            pos += len("Struct")
        if line[pos] in "{[":
            close = "}" if line[pos] == "{" else "]"
            pos += 1
            items: list = []
            while line[pos] != close:
                if close == "}":
                    eq = line.index("=", pos)
                    key, pos = line[pos:eq], eq + 1
                    items.append((key, read(",}")))
                else:
                    items.append(read(",]"))
                if line[pos] == ",":
                    pos += 2 if line.startswith(", ", pos) else 1
            pos += 1
            return dict(items) if close == "}" else items
        end = pos
        while end < len(line) and line[end] not in stops:
            end += 1
        text, pos = line[pos:end], end
        return None if text == "null" else text
    out = read("")
    assert pos == len(line), line
    return out


def _canonical(value):
    """Null entries of maps left out (see the module's docstring); the order of a map's entries is not compared: a
    schemaless SMT copies Kafka's HashMap into one sized for its entries, which can change the order it prints."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if v is not None}
    return [_canonical(v) for v in value] if isinstance(value, list) else value


def _compared(theirs: list[str], ours: list[str]) -> tuple[list, list]:
    return [_canonical(_java(line)) for line in theirs], [_canonical(_java(line)) for line in ours]


@pytest.mark.parametrize("name", [n for n in CHAINS if n not in DIFFERENCES and n not in VARIANT_CHAINS[:3]])
def test_same_lines_as_kafka_connect(lines, name):
    theirs, ours = lines[name]
    assert isinstance(theirs, list), f"Kafka Connect fails where ours writes {ours}: {str(theirs)[:3000]}"
    assert isinstance(ours, list), f"ours rejects a config Kafka Connect runs: {ours}"
    assert theirs, "Kafka Connect wrote nothing"
    kafka, here = _compared(theirs, ours)
    assert here == kafka


def test_plain_lines_are_the_same_but_for_null_entries(lines):
    """No SMT: Kafka's lines (the chain whose keys Kafka 4 ignores) and ours (the chain whose schema rename a line
    does not show) are the same text; what :func:`_canonical` leaves out, shown: Kafka's Map has the message's
    keys, some null, ours the struct's non-null fields."""
    theirs, ours = lines["sl-replace-field-3x-names"][0], lines["sl-set-schema-metadata"][1]
    kafka, here = _compared(theirs, ours)
    assert here == kafka and len(kafka) == len(MESSAGES)
    assert _java(theirs[1]) == {"name": None, "id": "2", "addr": {"zip": "2", "city": None}, "tags": []}
    assert _java(ours[1]) == {"id": "2", "tags": [], "addr": {"zip": "2"}}
    assert theirs[3] == ours[3] == "null"  # the tombstone
    # The same text, in the same (HashMap) order, where a message has no null field; else without Kafka's k=null
    assert ours[0] == theirs[0] and ours[2] == theirs[2]
    assert ours[1] == "{id=2, addr={zip=2}, tags=[]}" and ours[4] == "{name=eve, secret=s5, ts=0}"


def test_schemaless_smts_follow_kafkas_schemaless_rules(lines):
    """InsertField's timestamp is epoch milliseconds and MaskField empties a nested object and an array, as Kafka
    does with the Map it reads, though ours reads the declared struct; the tombstone passes InsertField and fails
    MaskField and ValueToKey on both sides."""
    theirs, ours = lines["sl-replace-flatten-cast-insert"]
    assert [_java(line)["at"] for line in theirs if line != "null"] == [str(T0 + i) for i in (0, 1, 2, 4)]
    assert [_java(line)["at"] for line in ours if line != "null"] == [str(T0 + i) for i in (0, 1, 2, 4)]
    theirs, ours = lines["sl-mask-field"]
    assert _java(theirs[0]) == {"name": "", "id": "0", "secret": "", "addr": {}, "ts": "1700000000000", "tags": []}
    assert ours[0] == theirs[0]  # the masked struct is printed as Kafka's empty Map: every field of it is null
    for name in ("sl-mask-field", "sl-keys-times-headers"):
        assert [len(side) for side in lines[name]] == [len(MESSAGES) - 1] * 2, name
        assert "null" not in lines[name][0] + lines[name][1]


def test_set_schema_metadata_renames_the_declared_schema_where_kafka_fails(lines):
    theirs, ours = lines["sl-set-schema-metadata"]
    assert theirs == ["null"]  # every non-null record failed: "Schema required for [updating schema metadata]"
    assert len(ours) == len(MESSAGES)  # every record: the schema's name is not in a FileStreamSink line


def test_replace_field_kafka_3x_names_are_read_as_kafka_3x_did_where_kafka_4_ignores_them(lines):
    theirs, ours = lines["sl-replace-field-3x-names"]
    assert [_java(line).get("secret") for line in theirs if line != "null"] == ["s1", None, None, "s5"]  # written
    assert not isinstance(ours, ConfigError)
    kept = [set(_java(line)) for line in ours if line != "null"]
    assert kept and all(fields <= {"id"} for fields in kept)  # whitelist id,secret minus blacklist secret


def _entries(line: str):
    """A line as Python, the order of a map's entries not compared (see :func:`_canonical`), null entries kept."""
    def sort(value):
        if isinstance(value, dict):
            return sorted((k, sort(v)) for k, v in value.items())
        return [sort(v) for v in value] if isinstance(value, list) else value
    return sort(_java(line))


@pytest.mark.parametrize("name", VARIANT_CHAINS)
def test_without_spark_schema_the_same_entries_as_kafka_connect_null_ones_too(lines, name):
    """No spark.schema: the value is a VARIANT, as Kafka's is a Map, so even a null entry is printed as Kafka
    prints it (``k=null``)."""
    theirs, ours = lines[name + "/variant"]
    assert isinstance(theirs, list) and theirs, f"Kafka Connect: {str(theirs)[:3000]}"
    assert isinstance(ours, list), f"ours rejects a config Kafka Connect runs: {ours}"
    assert [_entries(line) for line in ours] == [_entries(line) for line in theirs]


def test_without_spark_schema_plain_lines_are_kafkas_text(lines):
    """The same text, in Kafka's HashMap order, null entries included, but for two keys in one bucket (``ts`` and
    ``tags`` here): Kafka's map keeps the message's order there, ours the VARIANT's (sorted by key)."""
    theirs, ours = lines["sl-plain/variant"]
    assert ours[1:4] == theirs[1:4]
    assert ours[1] == "{name=null, id=2, addr={zip=2, city=null}, tags=[]}"
    assert theirs[0] == "{name=ada, id=1, secret=s1, addr={zip=0150, city=Oslo}, ts=1700000000000, tags=[a, b]}"
    assert ours[0] == "{name=ada, id=1, secret=s1, addr={zip=0150, city=Oslo}, tags=[a, b], ts=1700000000000}"
