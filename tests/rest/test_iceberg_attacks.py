"""The Iceberg sink's catalog over the worker's REST API: the warehouse and a SQLite catalog file are destinations
under connector.allowed.paths, a remote warehouse needs a URI entry, catalog credentials never come back, keys that
make pyiceberg import a class obey plugin.allowed.modules; and at run time every file a catalog's tables name (their
metadata, location, data files) must lie under connector.allowed.paths too."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_connect_bridge.connectors.base import CommitContext, ReadRange, WriteContext
from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.iceberg import load_iceberg_catalog
from spark_connect_bridge.errors import ConnectError
from spark_connect_bridge.runtime.validate import check_config

ICEBERG = {"connector.class": "org.apache.iceberg.connect.IcebergSinkConnector", "topics": "orders",
           "iceberg.tables": "db.orders", "iceberg.catalog.type": "jdbc"}


ICEBERG_SOURCE = {"connector.class": "iceberg-source", "iceberg.source.table": "db.orders", "iceberg.tables": None,
                  "topics": None}


def _post(api, config: dict, name: str = "c"):
    config = {k: v for k, v in config.items() if v is not None}
    return api.call("POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})


@pytest.mark.parametrize("key,value", [
    ("iceberg.catalog.warehouse", "/etc/cron.d"),                 # outside the allowed directory
    ("iceberg.catalog.warehouse", "{data}/../escape"),           # a '..' out of it
    ("iceberg.catalog.warehouse", "{state}/wh"),                 # the worker's own state
    ("iceberg.catalog.warehouse", "s3a://lake/wh"),              # the worker's credentials, no URI entry
    ("iceberg.catalog.uri", "jdbc:sqlite:/root/catalog.db"),     # a SQLite catalog file elsewhere
    ("iceberg.catalog.uri", "sqlite:////root/catalog.db"),       # its SQLAlchemy spelling
])
def test_catalog_destination_outside_the_allowed_paths_is_refused(rest_only, tmp_path, key, value):
    _, api = rest_only()
    config = {**ICEBERG, "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'data' / 'c.db'}",
              "iceberg.catalog.warehouse": str(tmp_path / "data" / "wh")}
    config[key] = value.format(data=tmp_path / "data", state=tmp_path / "state")
    r = _post(api, config)
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert api.get("/connectors") == []


def test_allowed_catalog_is_created_and_its_password_is_masked(rest_only, tmp_path):
    _, api = rest_only()
    config = {**ICEBERG, "iceberg.catalog.uri": "jdbc:postgresql://db:5432/cat",
              "iceberg.catalog.jdbc.user": "u", "iceberg.catalog.jdbc.password": "s3cret-pw",
              "iceberg.catalog.warehouse": str(tmp_path / "data" / "wh")}
    r = _post(api, config)
    assert r.status_code == 201, r.text
    shown = api.get("/connectors/c/config")
    assert shown["iceberg.catalog.jdbc.password"] == "[hidden]"
    assert "s3cret-pw" not in r.text + str(shown)


@pytest.mark.parametrize("key,value", [
    ("iceberg.catalog.py-io-impl", "pyiceberg.io.fsspec.FsspecFileIO"),        # pyiceberg imports the class
    ("iceberg.catalog.py-catalog-impl", "pyiceberg.catalog.sql.SqlCatalog"),
    ("iceberg.catalog.s3.retry-strategy-impl", "os.system"),
])
def test_catalog_keys_that_import_a_class_are_refused(rest_only, tmp_path, key, value):
    _, api = rest_only()
    r = _post(api, {**_allowed_catalog(tmp_path), key: value})
    assert r.status_code == 400 and key in r.json()["message"] and "plugin.allowed.modules" in r.json()["message"]
    assert api.get("/connectors") == []


# -- at run time: the catalog, not the config, names the files ----------------------------------------------------
# A catalog under the allowed paths (or a PostgreSQL or REST catalog anyone else can write) may hold tables whose
# metadata, location or data files lie elsewhere. The connector, run as the worker runs it (the stored config
# checked with the worker's config: the options the kconnect data source gets), refuses them before data moves.

_SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _allowed_catalog(tmp_path) -> dict:
    return {**ICEBERG, "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'data' / 'c.db'}",
            "iceberg.catalog.warehouse": str(tmp_path / "data" / "wh")}


def _tampered(config: dict, name: str, *, paths: list[str] | None = None, **create: Any):
    """The catalog's table ``name``, made by someone else (plain pyiceberg, no limits unless ``paths``)."""
    catalog = load_iceberg_catalog("iceberg", {k[len("iceberg.catalog."):]: v for k, v in config.items()
                                               if k.startswith("iceberg.catalog.")},
                                   **({"allowed_paths": paths} if paths else {}))
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    return catalog.create_table(name, schema=_SCHEMA, **create)


def _as_the_worker_runs(rest, api, config: dict, kind: str):
    r = _post(api, config)
    assert r.status_code == 201, r.text
    checked = check_config(rest.service.raw_config("c"), rest.service.config, kind=kind)
    return build_connector(checked.prepared.connector_options, kind=kind)


def _commit(sink, ids: list[int]) -> None:
    value = pa.array([{"id": i} for i in ids], pa.struct([("id", pa.int64())]))
    batch = pa.record_batch([value, pa.array(["orders"] * len(ids))], names=["value", "topic"])
    sink.commit([sink.write(iter([batch]), WriteContext("app", 0, 0, 0))], CommitContext("app", 0))


def _files(root) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("where", ["outside", "state"])
def test_sink_refuses_a_table_located_outside_the_allowed_paths(rest_only, tmp_path, where):
    rest, api = rest_only(**{"offset.storage.dir": str(tmp_path / "data" / "state")})
    config = _allowed_catalog(tmp_path)
    place = tmp_path / "outside" / "orders" if where == "outside" else tmp_path / "data" / "state" / "orders"
    _tampered(config, "db.orders", location=str(place))
    before = _files(place)
    sink = _as_the_worker_runs(rest, api, {**config, "kconnect.allowed.paths": '["/"]'}, "sink")  # not widened
    with pytest.raises(ConnectError, match=r"Iceberg table db\.orders: Iceberg file .*connector\.allowed\.paths"):
        _commit(sink, [1, 2])
    assert _files(place) == before  # nothing written there


def test_source_refuses_a_table_located_outside_the_allowed_paths(rest_only, tmp_path):
    rest, api = rest_only()
    config = _allowed_catalog(tmp_path)
    _tampered(config, "db.orders", location=str(tmp_path / "outside" / "orders"))
    source = _as_the_worker_runs(rest, api, {**config, **ICEBERG_SOURCE}, "source")
    with pytest.raises(ConnectError, match=r"Iceberg table db\.orders: .*not under the directories"):
        source.table()


def test_source_refuses_a_data_file_outside_the_allowed_paths(rest_only, tmp_path):
    """A table in the allowed warehouse whose snapshot lists a Parquet file elsewhere (pyiceberg's add_files):
    its rows are not read."""
    rest, api = rest_only()
    config = _allowed_catalog(tmp_path)
    secret = tmp_path / "outside" / "secret.parquet"
    secret.parent.mkdir()
    pq.write_table(pa.table({"id": pa.array([42], pa.int64())}), secret)
    _tampered(config, "db.orders").add_files([str(secret)])
    source = _as_the_worker_runs(rest, api, {**config, **ICEBERG_SOURCE}, "source")
    end = source.latest_offsets(source.initial_offsets(), None, None)
    [partition] = end
    with pytest.raises(PermissionError, match=r"secret\.parquet: not under the directories"):
        list(source.read_range(ReadRange({"table": "db.orders"}, None, end[partition])))


def test_table_properties_do_not_load_classes(rest_only, tmp_path):
    """A table's py-io-impl (pyiceberg would import it for the table's files) is not taken from the table; a
    location provider class in its properties refuses the table."""
    rest, api = rest_only()
    config = _allowed_catalog(tmp_path)
    # (made through a guarded catalog: plain pyiceberg would itself import the class, and fail, when it makes it)
    _tampered(config, "db.orders", paths=[str(tmp_path)], properties={"py-io-impl": "no_such_module.Evil"})
    _tampered(config, "db.routed", properties={"write.py-location-provider.impl":
                                               "pyiceberg.table.locations.SimpleLocationProvider"})
    sink = _as_the_worker_runs(rest, api, {**config, "iceberg.tables": "db.orders,db.routed"}, "sink")
    with pytest.raises(ConnectError, match=r"db\.routed: its property write\.py-location-provider\.impl"):
        _commit(sink, [1])
    assert [r["id"] for r in sink.catalog().load_table("db.orders").scan().to_arrow().to_pylist()] == [1]


def test_allowed_table_is_written_and_read_as_the_worker_runs_it(rest_only, tmp_path):
    rest, api = rest_only()
    config = _allowed_catalog(tmp_path)
    sink = _as_the_worker_runs(rest, api, {**config, "iceberg.tables.auto-create-enabled": "true"}, "sink")
    _commit(sink, [1, 2, 3])
    assert type(sink.catalog().load_table("db.orders").io).__name__ == "GuardedFileIO"
    api.call("DELETE", "/connectors/c")
    source = _as_the_worker_runs(rest, api, {**config, **ICEBERG_SOURCE}, "source")
    end = source.latest_offsets(source.initial_offsets(), None, None)
    [partition] = end
    rows = [r for b in source.read_range(ReadRange({"table": "db.orders"}, None, end[partition]))
            for r in b.to_pylist()]
    assert sorted(r["value"]["id"] for r in rows) == [1, 2, 3]
