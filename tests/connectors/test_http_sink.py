"""Confluent's and Aiven's HTTP sinks against an HTTP API of the test's own (tests/support/http_server.py): bodies,
batches, URLs, authentication, retries and failures as their documentation describes them."""

from __future__ import annotations

import base64
import json

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError
from tests.support.http_server import HttpApi

CONFLUENT = "io.confluent.connect.http.HttpSinkConnector"
AIVEN = "io.aiven.kafka.connect.http.HttpSinkConnector"


@pytest.fixture
def api():
    server = HttpApi().start()
    yield server
    server.stop()


def _records(spark, n: int, value_ddl: str = "struct<id:int,name:string>", values=None):
    rows = [("orders", 0, i, f"k{i}", values[i] if values else (i, f"n{i}")) for i in range(n)]
    return spark.createDataFrame(rows, f"topic string, partition int, offset long, key string, value {value_ddl}")\
        .coalesce(1)


def _write(df, config: dict) -> None:
    df.write.format("kconnect").options(**config).mode("append").save()


def test_confluent_json_batches_as_arrays_in_record_order(spark, api):
    # The Confluent docs' JSON example: request.body.format=json with batch.json.as.array
    _write(_records(spark, 7), {"connector.class": CONFLUENT, "http.api.url": f"{api.url}/api/messages",
                                "request.body.format": "json", "batch.max.size": "3",
                                "batch.json.as.array": "true", "headers": "Content-Type:application/json"})
    assert [r.path for r in api.requests] == ["/api/messages"] * 3
    assert {r.headers["Content-Type"] for r in api.requests} == {"application/json"}
    bodies = [json.loads(r.body) for r in api.requests]
    assert [len(b) for b in bodies] == [3, 3, 1]
    assert [x for b in bodies for x in b] == [{"id": i, "name": f"n{i}"} for i in range(7)]


def test_confluent_string_values_with_prefix_suffix_separator_and_url_template(spark, api):
    values = [f"line {i}" for i in range(4)]
    _write(_records(spark, 4, "string", values),
           {"connector.class": CONFLUENT, "http.api.url": f"{api.url}/topics/${{topic}}/keys/${{key}}",
            "batch.max.size": "10", "batch.prefix": "<", "batch.suffix": ">", "batch.separator": "|",
            "request.method": "put"})
    # ${key} differs per record: one request per record, to its own URL
    assert [(r.method, r.path, r.body.decode()) for r in api.requests] == [
        ("PUT", f"/topics/orders/keys/k{i}", f"<line {i}>") for i in range(4)]


def test_a_string_value_in_a_json_body_is_quoted_as_kafka_s_json_converter_writes_it(spark, api):
    _write(_records(spark, 2, "string", ['say "hi"', "x"]),
           {"connector.class": CONFLUENT, "http.api.url": api.url, "request.body.format": "json"})
    assert [json.loads(r.body) for r in api.requests] == ['say "hi"', "x"]


def test_retries_5xx_and_429_then_delivers_each_record_once(spark, api):
    api.script = [503, 429, 500]
    _write(_records(spark, 2), {"connector.class": CONFLUENT, "http.api.url": api.url, "request.body.format": "json",
                                "retry.backoff.ms": "10", "max.retries": "5"})
    assert [json.loads(r.body)["id"] for r in api.requests] == [0, 1]


def test_behavior_on_error_fail_fails_the_batch_naming_the_records_never_the_password(spark, api):
    api.script = [400] * 10
    config = {"connector.class": CONFLUENT, "http.api.url": api.url, "max.retries": "1", "retry.backoff.ms": "1",
              "auth.type": "BASIC", "connection.user": "u", "connection.password": "pw-s3cret",
              "request.body.format": "json"}
    with pytest.raises(Exception) as e:
        _write(_records(spark, 1), config)
    text = str(e.value)
    assert "HTTP 400" in text and "topic 'orders' partition 0 offset 0" in text and "behavior.on.error" in text
    assert "pw-s3cret" not in text


def test_behavior_on_error_log_goes_on_with_the_next_records(spark, api):
    config = {"connector.class": CONFLUENT, "http.api.url": api.url, "max.retries": "1", "retry.backoff.ms": "1",
              "behavior.on.error": "log", "request.body.format": "json",
              "retry.on.status.codes": "500-"}  # 400 is not retried: the record fails at once
    api.script = [400]
    _write(_records(spark, 3), config)
    assert [json.loads(r.body)["id"] for r in api.requests] == [1, 2]


def test_basic_auth_and_sensitive_headers_reach_the_api(spark, api):
    _write(_records(spark, 1), {"connector.class": CONFLUENT, "http.api.url": api.url, "auth.type": "BASIC",
                                "connection.user": "user1", "connection.password": "pw1",
                                "sensitive.headers": "X-Api-Key:key-123|X-Other:o"})
    got = api.requests[0].headers
    assert got["Authorization"] == "Basic " + base64.b64encode(b"user1:pw1").decode()
    assert got["X-Api-Key"] == "key-123" and got["X-Other"] == "o"


def test_oauth2_client_credentials_token_sent_as_bearer(spark, api):
    _write(_records(spark, 2), {"connector.class": CONFLUENT, "http.api.url": f"{api.url}/events",
                                "auth.type": "OAUTH2", "oauth2.token.url": f"{api.url}/token",
                                "oauth2.client.id": "sink-client", "oauth2.client.secret": "client-s3cret",
                                "oauth2.client.auth.mode": "url"})
    assert {r.headers["Authorization"] for r in api.requests} == {"Bearer tok-1"}
    assert len(api.token_requests) == 1  # one token for the task's requests


def test_a_refused_client_secret_fails_naming_the_token_url_not_the_secret(spark, api):
    with pytest.raises(Exception) as e:
        _write(_records(spark, 1), {"connector.class": CONFLUENT, "http.api.url": api.url, "auth.type": "OAUTH2",
                                    "oauth2.token.url": f"{api.url}/token", "oauth2.client.id": "sink-client",
                                    "oauth2.client.secret": "wrong-s3cret"})
    assert "OAuth2 token URL" in str(e.value) and "wrong-s3cret" not in str(e.value)
    assert api.requests == []


def test_tombstones_ignored_by_default_or_deleted(spark, api):
    df = spark.createDataFrame([("t", 0, 0, "a", "x"), ("t", 0, 1, "b", None)],
                               "topic string, partition int, offset long, key string, value string").coalesce(1)
    _write(df, {"connector.class": CONFLUENT, "http.api.url": f"{api.url}/items/${{key}}"})
    assert [(r.method, r.path) for r in api.requests] == [("POST", "/items/a")]
    _write(df, {"connector.class": CONFLUENT, "http.api.url": f"{api.url}/items/${{key}}",
                "behavior.on.null.values": "delete"})
    assert [(r.method, r.path) for r in api.requests[1:]] == [("POST", "/items/a"), ("DELETE", "/items/b")]


def test_aiven_batches_with_newlines_and_static_authorization(spark, api):
    # Aiven's README example: batching with the default newline separator and suffix
    _write(_records(spark, 5, "string", [f'{{"n":{i}}}' for i in range(5)]),
           {"connector.class": AIVEN, "http.url": f"{api.url}/ingest", "http.authorization.type": "static",
            "http.headers.authorization": "Bearer static-tok", "http.headers.content.type": "application/x-ndjson",
            "http.headers.additional": "X-Source:kafka,X-Env:test", "batching.enabled": "true",
            "batch.max.size": "2"})
    bodies = [r.body.decode() for r in api.requests]
    assert bodies == ['{"n":0}\n{"n":1}\n', '{"n":2}\n{"n":3}\n', '{"n":4}\n']
    got = api.requests[0].headers
    assert got["Authorization"] == "Bearer static-tok" and got["Content-Type"] == "application/x-ndjson"
    assert got["X-Source"] == "kafka" and got["X-Env"] == "test"


def test_aiven_oauth2_with_header_client_authentication(spark, api):
    _write(_records(spark, 1, "string", ["v"]),
           {"connector.class": AIVEN, "http.url": api.url, "http.authorization.type": "oauth2",
            "oauth2.access.token.url": f"{api.url}/token", "oauth2.client.id": "sink-client",
            "oauth2.client.secret": "client-s3cret", "oauth2.client.scope": "write"})
    token_request = api.token_requests[0]
    assert token_request.headers["Authorization"].startswith("Basic ")
    assert b"scope=write" in token_request.body
    assert api.requests[0].headers["Authorization"] == "Bearer tok-1"


def test_the_pipeline_sends_converted_records(spark, api, tmp_path):
    """A FileStreamSource's lines as bytes (as a topic holds them), read by the sink's StringConverter, sent in
    batches of 5 (streaming)."""
    from spark_connect_bridge.engine.pipeline import write_stream

    lines = [json.dumps({"id": i}) for i in range(12)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    source = spark.readStream.format("kconnect").options(**{
        "connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "lines"}).load()
    source = source.withColumn("value", source["value"].cast("binary"))  # as a topic holds them: bytes
    query = write_stream(source, {"name": "http-lines", "connector.class": CONFLUENT, "topics": "lines",
                                  "http.api.url": f"{api.url}/bulk", "batch.max.size": "5",
                                  "batch.prefix": "[", "batch.suffix": "]",
                                  "value.converter": "org.apache.kafka.connect.storage.StringConverter"},
                         checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    query.awaitTermination(120)
    sent = [x for r in api.requests for x in json.loads(r.body)]
    assert sent == [{"id": i} for i in range(12)]
    assert max(len(json.loads(r.body)) for r in api.requests) == 5


@pytest.mark.parametrize(("config", "key", "message"), [
    ({"http.api.url": "file:///etc/passwd"}, "http.api.url", "an http:// or https:// URL"),
    ({"request.method": "GET"}, "request.method", "String must be one of: POST, PUT, PATCH"),
    ({"auth.type": "OAUTH2"}, "oauth2.token.url", "auth.type=OAUTH2 needs oauth2.token.url"),
    ({"auth.type": "THIRD_PARTY"}, "auth.type", "not supported here"),
    ({"retry.on.status.codes": "abc"}, "retry.on.status.codes", "codes and ranges"),
    ({"regex.patterns": "a~b", "regex.replacements": "x"}, "regex.replacements", "one replacement per pattern"),
    ({"https.ssl.keystore.location": "/x.jks"}, "https.ssl.keystore.location", "not supported"),
    ({"batch.max.sise": "3"}, "batch.max.sise", "did you mean"),
])
def test_confluent_config_errors_name_the_key(config, key, message):
    with pytest.raises(ConfigError) as e:
        build_connector({"connector.class": CONFLUENT, "http.api.url": "http://h/x", **config})
    assert key in str(e.value) and message in str(e.value)


@pytest.mark.parametrize(("config", "key"), [
    ({"http.authorization.type": "static"}, "http.headers.authorization"),
    ({"http.authorization.type": "oauth2"}, "oauth2.access.token.url"),
    ({"http.authorization.type": "basic"}, "http.authorization.type"),
    ({"http.authorization.type": "none", "batching.enabled": "true", "errors.tolerance": "all"},
     "errors.tolerance"),
])
def test_aiven_config_errors_name_the_key(config, key):
    with pytest.raises(ConfigError) as e:
        build_connector({"connector.class": AIVEN, "http.url": "http://h/x", **config})
    assert key in str(e.value)


def test_a_rest_user_cannot_send_the_stored_secrets_to_another_url():
    """The attack: GET the config (secrets masked), PUT it back with the API or token URL pointing at a server of
    one's own. Refused, naming the keys; the secret never in the error."""
    from spark_connect_bridge.runtime.secrets import mask_config, restore_masked

    stored = {"connector.class": CONFLUENT, "http.api.url": "https://api.example.com/in", "auth.type": "OAUTH2",
              "oauth2.token.url": "https://login.example.com/token", "oauth2.client.id": "c",
              "oauth2.client.secret": "client-s3cret", "sensitive.headers": "X-Api-Key:key-s3cret"}
    shown = mask_config(stored)
    assert "client-s3cret" not in str(shown) and "key-s3cret" not in str(shown)
    assert restore_masked(shown, stored)["oauth2.client.secret"] == "client-s3cret"
    for key in ("http.api.url", "oauth2.token.url"):
        with pytest.raises(ConfigError) as e:
            restore_masked({**shown, key: "https://attacker.example/x"}, stored)
        assert key in str(e.value) and "s3cret" not in str(e.value)
    aiven = {"connector.class": AIVEN, "http.url": "https://api.example.com/in", "http.authorization.type": "static",
             "http.headers.authorization": "Bearer tok-s3cret"}
    with pytest.raises(ConfigError) as e:
        restore_masked({**mask_config(aiven), "http.url": "https://attacker.example/"}, aiven)
    assert "http.url" in str(e.value) and "tok-s3cret" not in str(e.value)


def test_the_trust_store_path_obeys_the_worker_s_allowed_paths():
    from spark_connect_bridge.runtime.policy import ConnectorPolicy

    policy = ConnectorPolicy(allowed_paths=("/data",), forbidden_paths=())
    problems = policy.check({"connector.class": CONFLUENT, "http.api.url": "https://h/x",
                             "https.ssl.truststore.location": "/etc/shadow"})
    assert [p.key for p in problems] == ["https.ssl.truststore.location"]



def test_the_docs_http_example_runs(spark, api):
    """docs/tasks/brokers/http.md's HTTP block, as written, with ``api_url`` the test's API."""
    from tests.test_readme import _located_blocks

    [(page, block)] = _located_blocks("python", needs="http-api")
    exec(compile(block, page, "exec"), {"spark": spark, "api_url": api.url})
    # one request per Spark task (the DataFrame's partitions), each a JSON array of its records
    assert {(r.path, r.headers["Content-Type"]) for r in api.requests} == {("/orders", "application/json")}
    sent = sorted((x for r in api.requests for x in json.loads(r.body)), key=lambda x: x["id"])
    assert sent == [{"id": i, "amount": 10 * i} for i in range(5)]


def test_a_failed_request_fails_the_query_and_the_restart_from_the_checkpoint_sends_every_record(spark, api,
                                                                                                  tmp_path):
    """At least once: the API refuses (the query fails), then comes back; the query restarted from its checkpoint
    sends every record, the ones answered before the failure possibly twice, none lost."""
    from spark_connect_bridge.engine.pipeline import write_stream

    (tmp_path / "in.txt").write_text("".join(f"r{i}\n" for i in range(10)))
    config = {"name": "http-restart", "connector.class": CONFLUENT, "topics": "lines",
              "http.api.url": f"{api.url}/in", "batch.max.size": "4", "batch.separator": "\n",
              "max.retries": "0", "value.converter": "org.apache.kafka.connect.storage.StringConverter"}

    def run() -> None:
        source = spark.readStream.format("kconnect").options(**{
            "connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "lines"}).load()
        source = source.withColumn("value", source["value"].cast("binary"))
        query = write_stream(source, config, checkpoint=str(tmp_path / "ckpt"), trigger={"availableNow": True})
        query.awaitTermination(120)

    api.script = [200, 503]  # the first request answered, the second refused: the batch fails
    with pytest.raises(Exception, match="HTTP 503"):
        run()
    run()
    sent = [line for r in api.requests for line in r.body.decode().split("\n")]
    assert set(sent) == {f"r{i}" for i in range(10)}
    assert len(sent) - 10 <= 4  # at most the first request's records again
