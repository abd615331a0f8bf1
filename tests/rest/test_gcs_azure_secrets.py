"""The GCS and Azure Blob sinks' credentials over the worker's REST API, attacked as someone with only the REST port
would: the secrets never come back, a masked secret never goes to another bucket, container, account or endpoint,
and without credentials of its own a config reaches only the URIs the worker allows."""

from __future__ import annotations

import json

import pytest

GCS = {"connector.class": "io.confluent.connect.gcs.GcsSinkConnector", "topics": "orders", "gcs.bucket.name": "lake",
       "store.url": "http://127.0.0.1:9", "flush.size": "100",
       "gcs.credentials.json": '{"client_email": "a@b", "private_key": "gcs-s3cret"}',
       "format.class": "io.confluent.connect.gcs.format.json.JsonFormat"}
AZURE = {"connector.class": "io.confluent.connect.azure.blob.AzureBlobStorageSinkConnector", "topics": "orders",
         "azblob.account.name": "lakeacct", "azblob.account.key": "YXotczNjcmV0", "azblob.container.name": "lake",
         "store.url": "http://127.0.0.1:9", "flush.size": "100",
         "format.class": "io.confluent.connect.azure.blob.format.json.JsonFormat"}
SECRETS = {"gcs": ("gcs.credentials.json", "gcs-s3cret"), "azure": ("azblob.account.key", "YXotczNjcmV0")}
CONFIGS = {"gcs": GCS, "azure": AZURE}


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_the_secret_is_masked_everywhere(rest_only, kind):
    _, api = rest_only()
    config, (key, secret) = CONFIGS[kind], SECRETS[kind]
    plugin = config["connector.class"].rsplit(".", 1)[1]
    r = api.call("POST", "/connectors", {"name": "sink", "config": config, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    shown = api.get("/connectors/sink/config")
    assert shown[key] == "[hidden]"
    for text in (r.text, json.dumps(shown), api.call("GET", "/connectors/sink").text,
                 api.call("GET", "/connectors/sink/tasks").text,
                 api.call("GET", "/connectors", expand=["info", "status"]).text,
                 api.call("PUT", f"/connector-plugins/{plugin}/config/validate", config).text):
        assert secret not in text, text


@pytest.mark.parametrize(("kind", "moved"), [
    ("gcs", {"gcs.bucket.name": "attacker-bucket"}), ("gcs", {"store.url": "http://attacker.example:9000"}),
    ("azure", {"azblob.container.name": "attacker"}), ("azure", {"azblob.account.name": "attackeracct"}),
    ("azure", {"store.url": "http://attacker.example:10000"}),
])
def test_a_masked_secret_never_goes_to_a_new_destination(rest_only, kind, moved):
    worker, api = rest_only()
    key, secret = SECRETS[kind]
    assert api.call("POST", "/connectors", {"name": "sink", "config": CONFIGS[kind],
                                            "initial_state": "STOPPED"}).status_code == 201
    r = api.call("PUT", "/connectors/sink/config", dict(api.get("/connectors/sink/config"), **moved))
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert secret not in r.text
    kept = api.call("PUT", "/connectors/sink/config", dict(api.get("/connectors/sink/config"), **{"flush.size": "5"}))
    assert kept.status_code == 200, kept.text
    assert worker.service.raw_config("sink")[key] == CONFIGS[kind][key]


@pytest.mark.parametrize(("kind", "key"), [("gcs", "gcs.bucket.name"), ("azure", "azblob.account.name")])
def test_the_workers_own_credentials_reach_only_the_uris_it_allows(rest_only, tmp_path, kind, key):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},gs://lake/exports,"
                                                     f"abfs://lake@lakeacct.dfs.core.windows.net/exports"})
    secret_key = SECRETS[kind][0]
    own = {k: v for k, v in CONFIGS[kind].items() if k not in (secret_key, "store.url")}
    r = api.call("POST", "/connectors", {"name": "sink", "config": own, "initial_state": "STOPPED"})
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert "worker's own credentials" in r.json()["message"]
    r = api.call("POST", "/connectors", {"name": "sink", "config": dict(own, **{"topics.dir": "exports/orders"}),
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text


def test_a_credentials_path_outside_the_allowed_paths_is_refused(rest_only):
    _, api = rest_only()
    config = dict({k: v for k, v in GCS.items() if k != "gcs.credentials.json"},
                  **{"gcs.credentials.path": "/etc/shadow"})
    r = api.call("POST", "/connectors", {"name": "sink", "config": config, "initial_state": "STOPPED"})
    assert r.status_code == 400 and "gcs.credentials.path" in r.json()["message"], r.text
