"""The Iceberg sink's catalog over the worker's REST API: the warehouse and a SQLite catalog file are destinations
under connector.allowed.paths, a remote warehouse needs a URI entry, and catalog credentials never come back."""

from __future__ import annotations

import pytest

ICEBERG = {"connector.class": "org.apache.iceberg.connect.IcebergSinkConnector", "topics": "orders",
           "iceberg.tables": "db.orders", "iceberg.catalog.type": "jdbc"}


def _post(api, config: dict, name: str = "c"):
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
