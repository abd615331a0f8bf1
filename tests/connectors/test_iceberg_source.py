"""Iceberg source (pyiceberg) over a JDBC catalog on SQLite in each test's tmp_path: the source contract (offsets
are snapshot ids; replays, restarts from the checkpoint), incremental reads of appended snapshots, overwrite
snapshots failing or passed over, and the sink's tables read back as records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.iceberg import load_iceberg_catalog
from spark_connect_bridge.errors import ConnectError
from tests.contract.contract import SourceContract

pytest.importorskip("pyiceberg")  # the iceberg extra (in dev)

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _source(tmp_path: Path, **extra: str) -> dict:
    return {"connector.class": "iceberg-source", "iceberg.source.table": "db.src", "iceberg.catalog.type": "jdbc",
            "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"), **extra}


def _table(config: dict):
    catalog = load_iceberg_catalog("iceberg", {k[len("iceberg.catalog."):]: v for k, v in config.items()
                                               if k.startswith("iceberg.catalog.")})
    catalog.create_namespace_if_not_exists("db")
    return catalog.create_table_if_not_exists("db.src", schema=_SCHEMA)


def _append(config: dict, ids: range) -> None:
    _table(config).append(pa.table({"id": pa.array(list(ids), pa.int64()), "name": [f"n{i}" for i in ids]},
                                   schema=_SCHEMA))


def _read(config: dict, start: dict, end: dict) -> list[dict]:
    src = build_connector(config, kind="source")
    return [r for t in src.plan(start, end) for rng in t.ranges for b in src.read_range(rng) for r in b.to_pylist()]


class TestIcebergSourceContract(SourceContract):
    """format("kconnect") streams the table's appends; offsets are snapshot ids."""

    bad_configs = [({"iceberg.source.table": None}, "iceberg.source.table"),
                   ({"iceberg.source.table": "nonamespace"}, "iceberg.source.table"),
                   ({"iceberg.catalog.type": "hadoop"}, "iceberg.catalog.type"),
                   ({"iceberg.source.tabel": "db.x"}, "iceberg.source.tabel")]
    batch_bound = 4

    def source_config(self, tmp_path: Path) -> dict:
        config = _source(tmp_path)
        if not (tmp_path / "catalog.db").exists():
            for v in range(3):  # three snapshots of four rows
                _append(config, range(v * 4, v * 4 + 4))
        return config

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        _append(config, range(100, 102))
        return config


def test_offsets_are_snapshot_ids_and_each_append_is_read_once(tmp_path):
    """The first range reads the table as of its oldest snapshot, later ranges only what each snapshot appended;
    record offsets are the snapshot's sequence number times 10^9 plus the row's place, the key the key fields."""
    config = _source(tmp_path, **{"iceberg.source.key-fields": "id", "topic": "rows"})
    _append(config, range(0, 3))
    src = build_connector(config, kind="source")
    start = src.initial_offsets()
    assert list(start.values()) == [{"snapshot-id": 0}]
    first = src.latest_offsets(start, None, None)
    table = _table(config)
    assert list(first.values()) == [{"snapshot-id": table.metadata.current_snapshot_id}]
    got = _read(config, start, first)
    assert [(r["key"], r["value"], r["topic"], r["offset"]) for r in got] == \
        [({"id": i}, {"id": i, "name": f"n{i}"}, "rows", 1_000_000_000 + i) for i in range(3)]
    _append(config, range(3, 5))
    _append(config, range(5, 6))
    second = src.latest_offsets(first, None, None)
    assert [(r["value"]["id"], r["offset"]) for r in _read(config, first, second)] == \
        [(3, 2_000_000_000), (4, 2_000_000_001), (5, 3_000_000_000)]
    bounded = src.latest_offsets(first, 1, None)  # whole snapshots: the next one only
    assert [r["value"]["id"] for r in _read(config, first, bounded)] == [3, 4]
    assert src.latest_offsets(second, None, None) == second


def test_starting_snapshot_reads_what_it_appended_onwards(tmp_path):
    config = _source(tmp_path)
    _append(config, range(0, 2))
    _append(config, range(2, 4))
    second = _table(config).metadata.current_snapshot_id
    _append(config, range(4, 5))
    src = build_connector({**config, "iceberg.source.starting-snapshot-id": str(second)}, kind="source")
    start = src.initial_offsets()
    assert [r["value"]["id"] for r in _read(config, start, src.latest_offsets(start, None, None))] == [2, 3, 4]
    with pytest.raises(ConnectError, match=r"iceberg\.source\.starting-snapshot-id"):
        build_connector({**config, "iceberg.source.starting-snapshot-id": "12345"}, kind="source").initial_offsets()


def test_overwrite_snapshots_fail_unless_passed_over(tmp_path):
    """An upsert's overwrite snapshot changes rows an append-only stream cannot express: the range fails naming
    iceberg.source.skip-overwrite-snapshots; with it set, the rows appended after are read and the rewrite is not."""
    from pyiceberg.expressions import EqualTo

    config = _source(tmp_path)
    _append(config, range(0, 3))
    src = build_connector(config, kind="source")
    first = src.latest_offsets(src.initial_offsets(), None, None)
    table = _table(config)
    table.delete(EqualTo("id", 1))  # copy-on-write: an overwrite snapshot rewriting the file without id 1
    _append(config, range(10, 12))
    end = src.latest_offsets(first, None, None)
    with pytest.raises(ConnectError, match=r"iceberg\.source\.skip-overwrite-snapshots"):
        _read(config, first, end)
    skipping = {**config, "iceberg.source.skip-overwrite-snapshots": "true"}
    assert [r["value"]["id"] for r in _read(skipping, first, end)] == [10, 11]


def test_streams_the_tables_the_sink_writes(spark, tmp_path):
    """The Iceberg sink's table read back by the Iceberg source through format("kconnect"), a batch at a time,
    row by row; a second run on the same checkpoint reads only the new append."""
    from pyspark.sql import functions as F

    sink = {"connector.class": "iceberg-sink", "iceberg.tables": "db.src", "iceberg.catalog.type": "jdbc",
            "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"), "iceberg.tables.auto-create-enabled": "true"}

    def write(ids: range) -> None:
        df = spark.range(ids.start, ids.stop).select(F.struct(F.col("id"), F.concat(F.lit("n"), F.col("id"))
                                                              .alias("name")).alias("value"),
                                                     F.lit("t").alias("topic"))
        df.write.format("kconnect").options(**sink).mode("append").save()

    seen: list = []

    def run() -> None:
        df = spark.readStream.format("kconnect").options(**_source(tmp_path)).load()
        (df.writeStream.foreachBatch(lambda b, _: seen.extend(r.value.asDict() for r in b.collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
         .awaitTermination())

    write(range(0, 3))
    write(range(3, 5))
    run()
    assert sorted(r["id"] for r in seen) == [0, 1, 2, 3, 4]
    write(range(5, 7))
    run()
    assert sorted((r["id"], r["name"]) for r in seen) == [(i, f"n{i}") for i in range(7)]


def test_catalog_paths_obey_the_workers_path_policy(tmp_path):
    """Attack: a REST user points the source's catalog or warehouse outside connector.allowed.paths (to read
    another catalog's tables): refused by key before anything runs; the same config inside is accepted."""
    from spark_connect_bridge.runtime.policy import ConnectorPolicy

    allowed = tmp_path / "data"
    policy = ConnectorPolicy(allowed_paths=(str(allowed),), forbidden_paths=(str(allowed / "state"),))
    base = {"connector.class": "iceberg-source", "iceberg.source.table": "db.t", "iceberg.catalog.type": "jdbc"}
    attacks = [({"iceberg.catalog.uri": "jdbc:sqlite:/root/catalog.db", "iceberg.catalog.warehouse": str(allowed)},
                "iceberg.catalog.uri"),
               ({"iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db", "iceberg.catalog.warehouse": "/var/lib"},
                "iceberg.catalog.warehouse"),
               ({"iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/state/c.db",
                 "iceberg.catalog.warehouse": str(allowed)}, "iceberg.catalog.uri")]
    for extra, key in attacks:
        assert [p.key for p in policy.check({**base, **extra})] == [key], extra
    assert policy.check({**base, "iceberg.catalog.uri": f"jdbc:sqlite:{allowed}/c.db",
                         "iceberg.catalog.warehouse": str(allowed)}) == []
