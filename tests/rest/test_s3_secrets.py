"""The S3 sink's credentials over the worker's REST API, attacked as someone with only the REST port would: the
secret key never comes back (configs, tasks, listings, validate, failure traces), and a store URL cannot carry
credentials of its own."""

from __future__ import annotations

import json

S3_SINK = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": "orders",
           "s3.bucket.name": "lake", "s3.region": "us-east-1", "store.url": "http://127.0.0.1:9",
           "aws.access.key.id": "AKIDEXAMPLE", "aws.secret.access.key": "aws-s3cret-key", "flush.size": "100",
           "format.class": "io.confluent.connect.s3.format.json.JsonFormat"}


def test_the_secret_access_key_is_masked_everywhere(rest_only):
    worker, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "s3", "config": S3_SINK, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    shown = api.get("/connectors/s3/config")
    assert shown["aws.secret.access.key"] == "[hidden]" and shown["store.url"] == S3_SINK["store.url"]
    runtime = worker.service.worker.runtimes["s3"]
    runtime.phase, runtime.trace = "FAILED", "OSError: signature for aws-s3cret-key rejected"
    for text in (r.text, json.dumps(shown), api.call("GET", "/connectors/s3").text,
                 api.call("GET", "/connectors/s3/tasks").text,
                 api.call("GET", "/connectors", expand=["info", "status"]).text,
                 api.call("GET", "/connectors/s3/status").text,
                 api.call("PUT", "/connector-plugins/S3SinkConnector/config/validate", S3_SINK).text):
        assert "aws-s3cret-key" not in text, text


def test_a_masked_secret_sent_back_unchanged_keeps_the_stored_one(rest_only):
    worker, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "s3", "config": S3_SINK,
                                            "initial_state": "STOPPED"}).status_code == 201
    r = api.call("PUT", "/connectors/s3/config", dict(api.get("/connectors/s3/config"), **{"flush.size": "50"}))
    assert r.status_code == 200, r.text
    assert worker.service.raw_config("s3")["aws.secret.access.key"] == "aws-s3cret-key"


def test_credentials_inside_the_store_url_are_refused_and_never_echoed(rest_only):
    _, api = rest_only()
    config = dict(S3_SINK, **{"store.url": "http://AKID:url-s3cret@attacker.example:9000"})
    r = api.call("PUT", "/connector-plugins/S3SinkConnector/config/validate", config)
    assert r.status_code == 200 and "url-s3cret" not in r.text
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r.json()["configs"]}
    assert errors["store.url"], errors
    r = api.call("POST", "/connectors", {"name": "s3", "config": config})
    assert r.status_code == 400 and "store.url" in r.json()["message"] and "url-s3cret" not in r.text


def test_a_masked_secret_never_goes_to_a_new_endpoint(rest_only):
    worker, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "s3", "config": S3_SINK,
                                            "initial_state": "STOPPED"}).status_code == 201
    moved = dict(api.get("/connectors/s3/config"), **{"store.url": "http://attacker.example:9000"})
    r = api.call("PUT", "/connectors/s3/config", moved)
    assert r.status_code == 400 and "aws.secret.access.key" in r.json()["message"], r.text
    assert worker.service.raw_config("s3")["store.url"] == S3_SINK["store.url"]


WORKER_CREDENTIALS = {k: v for k, v in S3_SINK.items() if not k.startswith("aws.")}


def test_the_workers_own_credentials_reach_only_the_buckets_it_allows(rest_only):
    """Without aws.access.key.id the sink signs with the worker's credentials (its environment, its role): a REST
    user may then write only where connector.allowed.paths lists a URI, on AWS as on a custom endpoint."""
    _, api = rest_only()
    own = {k: v for k, v in WORKER_CREDENTIALS.items() if k != "store.url"}
    for config, key in ((own, "s3.bucket.name"), (WORKER_CREDENTIALS, "store.url"),
                        (dict(own, **{"topics.dir": "exports/../../other"}), "s3.bucket.name")):
        r = api.call("POST", "/connectors", {"name": "s3", "config": config, "initial_state": "STOPPED"})
        assert r.status_code == 400 and key in r.json()["message"], r.text
        assert "worker's own credentials" in r.json()["message"] or "segments" in r.json()["message"]


def test_a_uri_entry_of_connector_allowed_paths_lets_a_bucket_prefix_through(rest_only, tmp_path):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},s3a://lake/exports"})
    inside = {k: v for k, v in WORKER_CREDENTIALS.items() if k != "store.url"}
    r = api.call("POST", "/connectors", {"name": "s3", "config": dict(inside, **{"topics.dir": "exports/orders"}),
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    for config in (dict(inside, **{"topics.dir": "exportsX"}), dict(inside, **{"s3.bucket.name": "other"})):
        r = api.call("POST", "/connectors", {"name": "s3b", "config": config, "initial_state": "STOPPED"})
        assert r.status_code == 400, r.text


def test_a_remote_table_path_is_refused_unless_allowed(rest_only, tmp_path):
    """delta-rs and Hadoop read AWS_ACCESS_KEY_ID from the worker's environment: a Delta path on a bucket is
    reached with the worker's credentials, so it obeys the same URI entries."""
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},s3://lake/tables"})
    delta = {"connector.class": "spark_connect_bridge.connectors.delta.DeltaSinkConnector", "topics": "orders"}
    refused = api.call("PUT", "/connector-plugins/DeltaSinkConnector/config/validate",
                       dict(delta, **{"delta.table.path": "s3://victim/tables/orders"}))
    errors = {c["value"]["name"]: c["value"]["errors"] for c in refused.json()["configs"]}
    assert any("worker's own credentials" in e for e in errors["delta.table.path"]), errors
    allowed = api.call("PUT", "/connector-plugins/DeltaSinkConnector/config/validate",
                       dict(delta, **{"delta.table.path": "s3a://lake/tables/orders"}))
    errors = {c["value"]["name"]: c["value"]["errors"] for c in allowed.json()["configs"]}
    assert not any("credentials" in e for e in errors.get("delta.table.path", [])), errors
