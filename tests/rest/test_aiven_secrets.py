"""Aiven's S3 and GCS sinks' credentials over the worker's REST API, attacked as someone with only the REST port
would: the secrets never come back, a masked secret never goes to another bucket, region or endpoint, and without
credentials of its own a config reaches only the URIs the worker allows."""

from __future__ import annotations

import json

import pytest

S3 = {"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": "orders",
      "aws.access.key.id": "AKIAAIVENKEYID", "aws.secret.access.key": "aiven-s3cret", "aws.s3.bucket.name": "lake",
      "aws.s3.region": "eu-west-1", "aws.s3.endpoint": "http://127.0.0.1:9", "format.output.type": "jsonl"}
GCS = {"connector.class": "io.aiven.kafka.connect.gcs.GcsSinkConnector", "topics": "orders", "gcs.bucket.name": "lake",
       "gcs.endpoint": "http://127.0.0.1:9",
       "gcs.credentials.json": '{"client_email": "a@b", "private_key": "gcs-s3cret"}'}
SECRETS = {"s3": ("aws.secret.access.key", "aiven-s3cret"), "gcs": ("gcs.credentials.json", "gcs-s3cret")}
CONFIGS = {"s3": S3, "gcs": GCS}


@pytest.mark.parametrize("kind", ["s3", "gcs"])
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
        assert "AKIAAIVENKEYID" not in text, text  # Aiven declares the key id a password too


@pytest.mark.parametrize(("kind", "moved"), [
    ("s3", {"aws.s3.bucket.name": "attacker-bucket"}), ("s3", {"aws.s3.endpoint": "http://attacker.example:9000"}),
    ("s3", {"aws.s3.region": "us-east-1"}),
    ("gcs", {"gcs.bucket.name": "attacker-bucket"}), ("gcs", {"gcs.endpoint": "http://attacker.example:9000"}),
])
def test_a_masked_secret_never_goes_to_a_new_destination(rest_only, kind, moved):
    worker, api = rest_only()
    key, secret = SECRETS[kind]
    assert api.call("POST", "/connectors", {"name": "sink", "config": CONFIGS[kind],
                                            "initial_state": "STOPPED"}).status_code == 201
    r = api.call("PUT", "/connectors/sink/config", dict(api.get("/connectors/sink/config"), **moved))
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert secret not in r.text
    kept = api.call("PUT", "/connectors/sink/config",
                    dict(api.get("/connectors/sink/config"), **{"file.max.records": "5"}))
    assert kept.status_code == 200, kept.text
    assert worker.service.raw_config("sink")[key] == CONFIGS[kind][key]


@pytest.mark.parametrize(("kind", "own", "key"), [
    ("s3", {k: v for k, v in S3.items() if k not in ("aws.access.key.id", "aws.secret.access.key",
                                                      "aws.s3.endpoint")}, "aws.s3.bucket.name"),
    ("gcs", dict({k: v for k, v in GCS.items() if k not in ("gcs.credentials.json", "gcs.endpoint")},
                 **{"gcs.credentials.default": "true"}), "gcs.bucket.name"),
])
def test_the_workers_own_credentials_reach_only_the_uris_it_allows(rest_only, tmp_path, kind, own, key):
    _, api = rest_only(**{"connector.allowed.paths": f"{tmp_path / 'data'},s3://lake/exports,gs://lake/exports"})
    r = api.call("POST", "/connectors", {"name": "sink", "config": own, "initial_state": "STOPPED"})
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert "worker's own credentials" in r.json()["message"]
    for escape in ("exports/../{{topic}}-{{partition}}-{{start_offset}}", "{{topic}}/exports/{{partition}}-"
                                                                          "{{start_offset}}"):
        r = api.call("POST", "/connectors", {"name": "sink", "config": dict(own, **{"file.name.template": escape}),
                                             "initial_state": "STOPPED"})
        assert r.status_code == 400 and key in r.json()["message"], r.text
    inside = dict(own, **{"file.name.template": "exports/{{topic}}-{{partition}}-{{start_offset}}"})
    r = api.call("POST", "/connectors", {"name": "sink", "config": inside, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text


def test_the_deprecated_secret_spelling_is_refused_without_echoing_it(rest_only):
    _, api = rest_only()
    config = dict(S3, **{"aws_secret_access_key": "old-s3cret"})
    r = api.call("POST", "/connectors", {"name": "sink", "config": config, "initial_state": "STOPPED"})
    assert r.status_code == 400 and "aws_secret_access_key" in r.json()["message"], r.text
    assert "old-s3cret" not in r.text


def test_a_gcs_credentials_path_outside_the_allowed_paths_is_refused(rest_only):
    _, api = rest_only()
    config = dict({k: v for k, v in GCS.items() if k != "gcs.credentials.json"},
                  **{"gcs.credentials.path": "/etc/shadow"})
    r = api.call("POST", "/connectors", {"name": "sink", "config": config, "initial_state": "STOPPED"})
    assert r.status_code == 400 and "gcs.credentials.path" in r.json()["message"], r.text
