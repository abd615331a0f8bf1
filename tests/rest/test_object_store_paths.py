"""Every path key of ours on an object store, attacked over the worker's REST API: a URI (s3a://, gs://, abfss://)
reaches the store with the worker's own credentials, so it must lie under a URI entry of connector.allowed.paths;
no spelling gets around the list, and a connector config cannot point the worker's credentials at another endpoint.
"""

from __future__ import annotations

import pytest

DELTA = {"connector.class": "spark_connect_bridge.connectors.delta.DeltaSinkConnector", "topics": "orders"}
ALLOWED = "s3a://lake/exports,gs://lake-gcs/exports,abfss://lake@account.dfs.core.windows.net/exports"


def _post(api, config: dict, name: str = "c"):
    return api.call("POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})


def test_uri_entries_of_allowed_paths_admit_their_prefix_on_each_store(rest_only, tmp_path):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},{ALLOWED}"})
    for i, path in enumerate(("s3a://lake/exports/orders", "s3://lake/exports/orders", "S3A://lake/exports/o",
                              "gs://lake-gcs/exports/orders", "gcs://lake-gcs/exports/o",
                              "abfss://lake@account.dfs.core.windows.net/exports/orders",
                              "abfs://lake@account.dfs.core.windows.net/exports/o")):
        r = _post(api, dict(DELTA, **{"delta.table.path": path}), name=f"ok{i}")
        assert r.status_code == 201, (path, r.text)


@pytest.mark.parametrize("key,value", [
    ("delta.table.path", "s3a://other-bucket/exports/orders"),          # another bucket
    ("delta.table.path", "s3a://lake/exports-evil/orders"),              # a sibling prefix
    ("delta.table.path", "s3a://lake/exports/../private/orders"),        # a '..' segment
    ("delta.table.path", "s3a://lake/exports/%2e%2e/private"),           # a percent-encoded '..' (Hadoop decodes it)
    ("delta.table.path", "s3a://lake/exports%2F..%2Fprivate"),           # percent-encoded slashes
    ("delta.table.path", "s3a://lake@attacker.example/exports/orders"),  # user info: another host
    ("delta.table.path", "gs://lake/exports/orders"),                    # the S3 bucket's name on another store
    ("delta.table.path", "abfss://other@account.dfs.core.windows.net/exports/orders"),  # another container
    ("topics.dir", "s3a://lake/private"),                                # the topic store's key of the Delta sink
])
def test_a_path_outside_the_allowed_uris_is_refused_naming_the_key(rest_only, tmp_path, key, value):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},{ALLOWED}"})
    config = dict(DELTA, **{key: value})
    r = _post(api, config)
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert api.get("/connectors") == []


@pytest.mark.parametrize("key", ["fs.s3a.endpoint", "fs.s3a.bucket.lake.endpoint", "FS.S3A.Endpoint",
                                 "spark.hadoop.fs.s3a.endpoint", "fs.s3a.aws.credentials.provider",
                                 "fs.s3a.impl", "fs.defaultFS", "fs.gs.storage.root.url", "dfs.namenode.rpc-address",
                                 "fs.azure.account.oauth2.client.endpoint"])
def test_a_connector_cannot_send_the_workers_credentials_to_another_endpoint(rest_only, tmp_path, key):
    """Spark and Delta copy a data source's fs.* options into the Hadoop configuration of its paths: a connector
    config with an allowed path and its own endpoint would sign requests with the worker's credentials for, and
    send the data to, the attacker's server. Every such key is refused, on create and on validate."""
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},{ALLOWED}"})
    config = dict(DELTA, **{"delta.table.path": "s3a://lake/exports/orders", key: "http://attacker.example:9000"})
    r = _post(api, config)
    assert r.status_code == 400 and key in r.json()["message"] and "worker's own" in r.json()["message"], r.text
    r = api.call("PUT", "/connector-plugins/DeltaSinkConnector/config/validate", config)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r.json()["configs"]}
    assert errors.get(key), errors
