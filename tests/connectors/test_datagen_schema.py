"""Datagen's own schemas: ``schema.string`` / ``schema.filename`` / every Confluent quickstart, with the
``arg.properties`` of avro-random-generator honoured (unit tests on small batches; one Spark read)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from spark_connect_bridge.connectors.datagen import _Gen
from spark_connect_bridge.connectors.datagen_schema import (
    QUICKSTART_FILES,
    SchemaError,
    compile_schema,
    load_schema_file,
)
from spark_connect_bridge.runtime.validate import validate_connector_config

N = 400


def _field(name: str, typ: dict | str | list) -> dict:
    return {"name": name, "type": typ}


def _schema(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "r", "fields": list(fields)})


def _rows(text: str, n: int = N, seed: int = 0, task: int = 0, start: int = 0) -> list[dict]:
    c = compile_schema(text, "schema.string")
    arr = c.gen(_Gen(seed, task, np.arange(start, start + n, dtype=np.int64)))
    assert arr.type == c.arrow_type
    return arr.to_pylist()


def _props(typ: str, **props: object) -> dict:
    return {"type": typ, "arg.properties": props}


def test_options_range_iteration_and_length_are_honoured():
    rows = _rows(_schema(
        _field("side", _props("string", options=["BUY", "SELL"])),
        _field("qty", _props("int", range={"min": 1, "max": 5})),
        _field("price", _props("double", range={"min": 5.0, "max": 6.0})),
        _field("id", _props("long", iteration={"start": 10, "step": 5})),
        _field("cycle", _props("int", iteration={"start": 0, "restart": 3})),
        _field("down", _props("int", iteration={"start": 5, "restart": 0})),
        _field("flip", _props("boolean", iteration={"start": True})),
        _field("name", _props("string", length={"min": 2, "max": 4})),
        _field("tags", {**_props("array", length=3), "items": _props("int", options=[7])}),
        _field("m", {**_props("map", length=2, keys={"options": ["a", "b"]}), "values": "int"}),
        _field("maybe", ["null", _props("string", options=["x"])])))
    assert {r["side"] for r in rows} == {"BUY", "SELL"}
    assert {r["qty"] for r in rows} == {1, 2, 3, 4}  # max is exclusive
    assert all(5.0 <= r["price"] < 6.0 for r in rows)
    assert [r["id"] for r in rows[:3]] == [10, 15, 20]
    assert [r["cycle"] for r in rows[:7]] == [0, 1, 2, 0, 1, 2, 0]
    assert [r["down"] for r in rows[:7]] == [5, 4, 3, 2, 1, 5, 4]
    assert [r["flip"] for r in rows[:4]] == [True, False, True, False]
    assert {len(r["name"]) for r in rows} == {2, 3}
    assert all(r["tags"] == [7, 7, 7] for r in rows)
    assert all(len(r["m"]) <= 2 and {k for k, _ in r["m"]} <= {"a", "b"} for r in rows)
    assert {r["maybe"] for r in rows} == {None, "x"}


def test_regex_strings_match_their_regex():
    patterns = ["User_[1-9]{0,1}", "Page_[1-9][0-9]?", "[A-Z][1-9]{8,8}", r"(RED|GREEN|BLUE)-\d{2}",
                "[a-c]+x*"]
    rows = _rows(_schema(*[_field(f"f{i}", _props("string", regex=p)) for i, p in enumerate(patterns)]))
    for i, p in enumerate(patterns):
        values = {r[f"f{i}"] for r in rows}
        assert all(re.fullmatch(p, v) for v in values), p
        assert len(values) > 3, p
    assert {r["f0"] for r in rows} == {"User_"} | {f"User_{d}" for d in range(1, 10)}


def test_records_are_a_pure_function_of_seed_task_and_iteration():
    text = load_schema_file("stock_trades_schema.avro")
    assert _rows(text, 50) == _rows(text, 50)
    assert _rows(text, 10, start=40) == _rows(text, 50)[40:]
    assert _rows(text, 50, seed=1) != _rows(text, 50)
    assert _rows(text, 50, task=1) != _rows(text, 50)


def test_record_level_options_pick_whole_records():
    rows = _rows(load_schema_file("credit_cards.avro"))
    options = json.loads(load_schema_file("credit_cards.avro"))["arg.properties"]["options"]
    assert all(r in options for r in rows)
    assert len({r["card_id"] for r in rows}) > 10


def test_every_shipped_quickstart_compiles_and_generates():
    for name, (file, keyfield) in QUICKSTART_FILES.items():
        c = compile_schema(load_schema_file(file), name)
        assert keyfield in c.spark_type.fieldNames(), name
        assert len(_rows(load_schema_file(file), 5)) == 5


def test_unsupported_schemas_are_refused_naming_the_field():
    cases = [(_field("a", _props("string", regex="[^a]")), "a: arg.properties regex '[^a]'"),
             (_field("b", ["int", "string"]), "b: a union other than [null, T]"),
             (_field("c", _props("int", range={"min": 5, "max": 5})), "c: arg.properties range max"),
             (_field("d", _props("string", options={"file": "x", "encoding": "json"})), "d: arg.properties options")]
    for field, message in cases:
        with pytest.raises(SchemaError, match=re.escape(message)):
            compile_schema(_schema(field), "schema.string")


def _errors(**config: str) -> dict[str, list[str]]:
    full = {"connector.class": "io.confluent.kafka.connect.datagen.DatagenConnector", "name": "d",
            "kafka.topic": "t", **config}
    infos = validate_connector_config(full["connector.class"], full)
    return {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}


def test_validation_names_the_key():
    assert _errors(quickstart="Stock_Trades") == {}  # case-insensitive, as datagen's validator
    assert "quickstart" in _errors(quickstart="nope")
    bad = _errors(**{"schema.string": _schema(_field("a", _props("string", regex="[^a]")))})
    assert list(bad) == ["schema.string"] and "a: arg.properties regex" in bad["schema.string"][0]
    assert "schema.filename" in _errors(**{"schema.filename": "/no/such/file.avro"})
    assert "schema.keyfield" in _errors(**{"schema.filename": "users_schema.avro", "schema.keyfield": "nope"})


def test_schema_derived_spark_types_and_keys(spark, tmp_path):
    path = tmp_path / "s.avro"
    path.write_text(_schema(
        _field("id", _props("long", iteration={"start": 1})),
        _field("ts", {"type": "long", "logicalType": "timestamp-millis"}),
        _field("day", {"type": "int", "logicalType": "date", "arg.properties": {"range": {"min": 0, "max": 10}}}),
        _field("amount", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2,
                          "arg.properties": {"range": {"min": 10, "max": 50}}}),
        _field("loc", {"type": "record", "name": "loc", "fields": [_field("lat", "double")]})), encoding="utf-8")
    df = spark.read.format("kconnect").options(**{
        "connector.class": "DatagenConnector", "kafka.topic": "t", "schema.filename": str(path),
        "schema.keyfield": "id", "iterations": "5", "max.interval": "0"}).load()
    assert df.schema["key"].dataType.simpleString() == "bigint"
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,ts:timestamp,day:date,amount:decimal(4,2),loc:struct<lat:double>>")
    rows = df.orderBy("offset").collect()
    assert [r.key for r in rows] == [1, 2, 3, 4, 5] == [r.value.id for r in rows]
    assert all(10 <= r.value.amount < 50 for r in rows)
    keyless = spark.read.format("kconnect").options(**{
        "connector.class": "DatagenConnector", "kafka.topic": "t", "quickstart": "TRANSACTIONS",
        "iterations": "3", "max.interval": "0"}).load().collect()
    assert [r.key for r in keyless] == [1, 2, 3]  # transactions' key field: transaction_id


def test_attack_schema_filename_over_rest_is_held_to_the_allowed_paths(tmp_path):
    """A REST user naming a host file as the schema: the worker's path policy refuses it by key, before reading."""
    from spark_connect_bridge.runtime.policy import ConnectorPolicy

    policy = ConnectorPolicy(allowed_paths=(str(tmp_path),), forbidden_paths=(str(tmp_path / "state"),))
    config = {"connector.class": "DatagenConnector", "kafka.topic": "t"}
    for target in ("/etc/passwd", str(tmp_path / "state" / "keys.json"), str(tmp_path / ".." / "x.avro")):
        assert [p.key for p in policy.check({**config, "schema.filename": target})] == ["schema.filename"]
    assert policy.check({**config, "schema.filename": str(tmp_path / "s.avro")}) == []
