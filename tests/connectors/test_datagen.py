"""Datagen: quickstart schemas, determinism, tasks.max, iterations and rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.contract.contract import SourceContract


def _cfg(**extra: str) -> dict:
    return {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
            "max.interval": "0", "iterations": "40", **extra}


class TestDatagenContract(SourceContract):
    bad_configs = [({"quickstart": "nope"}, "quickstart"), ({"iterations": "many"}, "iterations"),
                   ({"kafka.topic": None}, "kafka.topic"), ({"schema.keyfield": "zip"}, "schema.keyfield")]

    def source_config(self, tmp_path: Path) -> dict:
        return _cfg(**{"tasks.max": "2"})

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        return {**config, "iterations": "70"}  # Kafka lets a connector's config change between runs


def test_quickstart_schemas_and_keys(spark):
    for quickstart, key_type, fields in [
            ("orders", "int", ["ordertime", "orderid", "itemid", "orderunits", "address"]),
            ("users", "string", ["registertime", "userid", "regionid", "gender"]),
            ("pageviews", "bigint", ["viewtime", "userid", "pageid"])]:
        df = spark.read.format("kconnect").options(**_cfg(quickstart=quickstart, iterations="3")).load()
        assert df.schema["key"].dataType.simpleString() == key_type
        assert df.schema["value"].dataType.fieldNames() == fields


def test_same_seed_same_records_other_seed_other_records(spark):
    def values(seed: str) -> list:
        df = spark.read.format("kconnect").options(**_cfg(**{"random.seed": seed})).load()
        return [r.value for r in df.orderBy("offset").collect()]

    assert values("7") == values("7")
    assert values("7") != values("8")


def test_tasks_are_partitions_with_unique_keys(spark):
    df = spark.read.format("kconnect").options(**_cfg(**{"tasks.max": "3", "iterations": "10"})).load()
    rows = df.collect()
    assert len(rows) == 30
    assert sorted({r.partition for r in rows}) == [0, 1, 2]
    assert len({r.key for r in rows}) == 30  # orderid = iteration * tasks + task
    assert df.rdd.getNumPartitions() == 3


def test_rate_limits_what_is_available(tmp_path):
    src = build_connector(_cfg(**{"max.interval": "100", "iterations": "-1"}), kind="source")
    start = src.initial_offsets()
    first = src.latest_offsets(start, None, None)
    assert next(iter(first.values()))["current.iteration"] <= 1  # 10 records/s: nothing piles up at once


def test_unlimited_iterations_are_bounded_per_trigger():
    src = build_connector(_cfg(iterations="-1"), kind="source")
    end = src.latest_offsets(src.initial_offsets(), 1000, None)
    assert next(iter(end.values()))["current.iteration"] == 1000


@pytest.mark.parametrize("bad, key", [
    ({"quickstart": ""}, "quickstart"),
    ({"schema.string": "{}"}, "schema.string"),
    ({"max.interval": "-1"}, "max.interval"),
    ({"tasks.max": "0"}, "tasks.max"),
])
def test_config_errors(bad, key):
    with pytest.raises(ConfigError) as info:
        build_connector({**_cfg(), **bad}, kind="source")
    assert key in info.value.keys
