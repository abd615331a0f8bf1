"""Attacks on the worker's REST API, performed over HTTP as someone with only the REST port would, and shown to fail.

Each test is one item of "the worker is safe to expose": no code execution or file reads through REST, config
providers limited and never echoed, requests bounded and same-origin, secrets masked, encrypted at rest and kept
on GET → PUT, auth with Jetty's hashed credentials, TLS.
"""

from __future__ import annotations

import base64
import crypt
import json
import os
import sys
import time
import uuid

import pytest
import requests

from rest.security_helpers import raw_request, self_signed
from spark_connect_bridge.rest import auth

pytestmark = pytest.mark.timeout(300)

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


# -- 1. code execution through plugin names; files outside the allowed directories --------------------------------
@pytest.fixture
def planted_module(tmp_path, monkeypatch):
    """A module an attacker managed to place on the worker's sys.path: importing it leaves a marker file."""
    name = f"kc_planted_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / f"{name}.ran"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass Evil:\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    yield name, marker
    sys.modules.pop(name, None)


def test_plugin_names_never_import_a_module_the_worker_does_not_allow(rest_only, planted_module):
    module, marker = planted_module
    _, api = rest_only()
    evil = f"{module}.Evil"
    base = {"name": "x", "topic": "t", "file": "in.txt"}
    attempts = [
        ("PUT", f"/connector-plugins/{evil}/config/validate", {"connector.class": evil}),
        ("GET", f"/connector-plugins/{evil}/config", None),
        ("POST", "/connectors", {"name": "a", "config": {"connector.class": evil}}),
        ("PUT", "/connectors/b/config", {"connector.class": evil}),
        ("PUT", "/connector-plugins/FileStreamSource/config/validate",
         dict(base, **{"connector.class": "FileStreamSource", "transforms": "t", "transforms.t.type": evil})),
        ("PUT", "/connector-plugins/FileStreamSource/config/validate",
         dict(base, **{"connector.class": "FileStreamSource", "value.converter": evil})),
        ("PUT", "/connector-plugins/FileStreamSource/config/validate",
         dict(base, **{"connector.class": "FileStreamSource", "predicates": "p", "predicates.p.type": evil})),
        ("PUT", "/connector-plugins/FileStreamSource/config/validate",
         dict(base, **{"connector.class": "FileStreamSource", "transforms": "t", "transforms.t.type": "os.system"})),
    ]
    for method, path, body in attempts:
        r = api.call(method, path, body)
        assert r.status_code in (200, 400, 404), (path, r.status_code, r.text)
        if r.status_code == 200:  # validate: 200 with errors, as Kafka
            assert r.json()["error_count"] > 0, r.text
        assert "plugin.allowed.modules" in r.text or r.status_code == 404, r.text
    assert not marker.exists() and module not in sys.modules
    assert api.get("/connectors") == []


def test_plugin_allowed_modules_lets_the_operator_name_a_module(rest_only, planted_module):
    module, marker = planted_module
    _, api = rest_only(**{"plugin.allowed.modules": module})
    r = api.call("PUT", f"/connector-plugins/{module}.Evil/config/validate", {"connector.class": f"{module}.Evil"})
    assert marker.exists()  # the operator allowed it: it was imported (and is no connector plugin)
    assert r.status_code == 400 and "not a connector plugin" in r.json()["message"]


def test_file_connectors_touch_only_the_allowed_directories(rest_only, tmp_path):
    _, api = rest_only()
    data = tmp_path / "data"
    (data / "escape").symlink_to("/etc")
    sink = {"connector.class": "FileStreamSink", "topics": "t"}
    refused = {
        "/etc/cron.d/kconnect": "connector.allowed.paths",
        str(data / "escape" / "passwd"): "connector.allowed.paths",  # a link out of the allowed directory
        str(data / ".." / "outside.txt"): "connector.allowed.paths",
        str(tmp_path / "state" / "_connectors" / "x.json"): "state directory",
    }
    for path, why in refused.items():
        r = api.call("POST", "/connectors", {"name": "w", "config": dict(sink, file=path)})
        assert r.status_code == 400 and why in r.json()["message"] and "file" in r.json()["message"], (path, r.text)
        infos = api.call("PUT", "/connector-plugins/FileStreamSink/config/validate", dict(sink, file=path)).json()
        assert any(why in e for c in infos["configs"] if c["value"]["name"] == "file" for e in c["value"]["errors"])
    r = api.call("POST", "/connectors", {"name": "r", "config": {"connector.class": "FileStreamSource",
                                                                 "file": "/etc/passwd", "topic": "t"}})
    assert r.status_code == 400 and "connector.allowed.paths" in r.json()["message"]
    r = api.call("POST", "/connectors", {"name": "db", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t",
        "connection.url": f"jdbc:sqlite:{tmp_path / 'state' / 'evil.db'}"}})  # a SQLite database is a file too
    assert r.status_code == 400 and "connection.url" in r.json()["message"]
    # the worker's state directory is never allowed, even when an allowed directory holds it
    _, api2 = rest_only(**{"connector.allowed.paths": str(tmp_path)})
    r = api2.call("POST", "/connectors", {"name": "w", "config": dict(
        sink, file=str(tmp_path / "state" / "_connectors" / "victim.json"))})
    assert r.status_code == 400 and "state directory" in r.json()["message"]
    r = api.call("POST", "/connectors", {"name": "ok", "config": dict(sink, file=str(data / "out.txt")),
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text


# -- 2. config providers --------------------------------------------------------------------------------------------
def test_config_providers_are_off_unless_the_worker_enables_them(rest_only, tmp_path):
    _, api = rest_only()
    for ref in ("${file:/etc/passwd:root}", "${env:HOME}", "${directory:/etc:hostname}"):
        cfg = {"connector.class": "FileStreamSource", "file": str(tmp_path / "data" / "in.txt"), "topic": ref}
        r = api.call("POST", "/connectors", {"name": "p", "config": cfg})
        assert r.status_code == 400 and "config.providers" in r.json()["message"], r.text
        body = api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", cfg).text
        assert "config.providers" in body and os.environ["HOME"] not in body.replace(str(tmp_path), "")
    assert api.get("/connectors") == []


def test_file_and_directory_providers_read_only_their_allowed_paths(rest_only, tmp_path):
    allowed, other = tmp_path / "secrets", tmp_path / "other"
    allowed.mkdir(), other.mkdir()
    (allowed / "db.properties").write_text("tasks=s3cr3t-from-file\n")
    (other / "db.properties").write_text("tasks=other-secret\n")
    (allowed / "escape").symlink_to(other)
    _, api = rest_only(**{"config.providers": "file,dir", "config.providers.file.class": FILE_PROVIDER,
                          "config.providers.file.param.allowed.paths": str(allowed),
                          "config.providers.dir.class": DIRECTORY_PROVIDER,
                          "config.providers.dir.param.allowed.paths": str(allowed)})
    src = {"connector.class": "FileStreamSource", "file": str(tmp_path / "data" / "in.txt"), "topic": "t"}
    for ref in (f"${{file:{other}/db.properties:tasks}}", f"${{file:{allowed}/escape/db.properties:tasks}}",
                f"${{file:{allowed}/../other/db.properties:tasks}}", f"${{dir:{allowed}:../other/db.properties}}"):
        r = api.call("POST", "/connectors", {"name": "p", "config": dict(src, **{"tasks.max": ref})})
        assert r.status_code == 400 and "allowed.paths" in r.json()["message"], (ref, r.text)
        assert "other-secret" not in r.text
    # allowed, but not a number: the error names the key and the reference, never the value read
    ref = f"${{file:{allowed}/db.properties:tasks}}"
    r = api.call("POST", "/connectors", {"name": "p", "config": dict(src, **{"tasks.max": ref})})
    assert r.status_code == 400 and "tasks.max" in r.text and "s3cr3t-from-file" not in r.text, r.text
    r = api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", dict(src, **{"tasks.max": ref}))
    assert r.status_code == 200 and r.json()["error_count"] >= 1 and "s3cr3t-from-file" not in r.text, r.text
    # allowed and valid: stored as the reference, shown as the reference
    (allowed / "topic.properties").write_text("name=orders\n")
    ref = f"${{file:{allowed}/topic.properties:name}}"
    r = api.call("POST", "/connectors", {"name": "p", "config": dict(src, topic=ref), "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    assert api.get("/connectors/p/config")["topic"] == ref


def test_env_provider_reads_only_allowlisted_variables(rest_only, tmp_path, monkeypatch):
    monkeypatch.setenv("KCONNECT_TOPIC", "orders")
    monkeypatch.setenv("KCONNECT_DB_SECRET", "env-s3cret")
    _, api = rest_only(**{"config.providers": "env", "config.providers.env.class": ENV_PROVIDER,
                          "config.providers.env.param.allowlist.pattern": "KCONNECT_TOPIC"})
    src = {"connector.class": "FileStreamSource", "file": str(tmp_path / "data" / "in.txt")}
    r = api.call("POST", "/connectors", {"name": "e", "config": dict(src, topic="${env:KCONNECT_DB_SECRET}")})
    assert r.status_code == 400 and "allowlist.pattern" in r.text and "env-s3cret" not in r.text
    r = api.call("POST", "/connectors", {"name": "e", "config": dict(src, topic="${env:KCONNECT_TOPIC}"),
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text


# -- 4. unbounded and malformed requests -----------------------------------------------------------------------------
@pytest.fixture
def users_file(tmp_path):
    p = tmp_path / "users.properties"
    p.write_text("admin: s3cret\n")
    return str(p)


def test_bodies_are_not_read_before_authentication(rest_only, users_file):
    worker, _ = rest_only(**{"rest.basic.auth.file": users_file})
    head = ("POST /connectors HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            f"Content-Length: {400 * 1024 * 1024}")
    started = time.monotonic()
    status, answer = raw_request(worker.port, head)  # the 400 MB body is never sent: the worker must not wait
    assert status == 401 and time.monotonic() - started < 5
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"] == 401
    status, answer = raw_request(worker.port, head + "\nExpect: 100-continue")  # curl's way with big bodies
    assert status == 401, answer  # not "100 Continue": the body is never asked for


def test_malformed_and_oversized_requests_are_refused_at_once(rest_only):
    worker, api = rest_only(**{"rest.request.max.bytes": "65536"})
    base = "POST /connectors HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
    for length, expected in (("-1", 400), ("abc", 400), ("1e3", 400), (str(50 * 1024 * 1024), 413)):
        started = time.monotonic()
        status, answer = raw_request(worker.port, base + f"Content-Length: {length}")
        assert status == expected and time.monotonic() - started < 5, (length, answer)
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"] == expected
    status, _ = raw_request(worker.port, base + "Transfer-Encoding: chunked", b"5\r\n{}{}{\r\n0\r\n\r\n")
    assert status == 411
    big = {"name": "big", "config": {"connector.class": "FileStreamSource", "topic": "t", "x": "y" * 70_000}}
    assert api.call("POST", "/connectors", big).status_code == 413
    assert api.get("/connectors") == []


def test_deeply_nested_json_is_a_400(rest_only):
    _, api = rest_only()
    body = "[" * 100_000 + "]" * 100_000
    r = requests.post(api.url + "/connectors", data=body, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400 and "nested too deeply" in r.json()["message"]
    r = requests.post(api.url + "/connectors", data='{"name": NaN}', headers={"Content-Type": "application/json"},
                      timeout=30)
    assert r.status_code == 400


# -- 5. cross-site requests ------------------------------------------------------------------------------------------
def test_cross_site_requests_are_refused(rest_only, tmp_path):
    _, api = rest_only()
    cfg = json.dumps({"name": "csrf", "config": {"connector.class": "FileStreamSink", "topics": "t",
                                                 "file": str(tmp_path / "data" / "x")}})
    # a web page's "simple" POST: text/plain (or form) bodies need no CORS preflight
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        r = requests.post(api.url + "/connectors", data=cfg, headers={"Content-Type": ctype}, timeout=30)
        assert r.status_code == 415 and r.json()["error_code"] == 415, (ctype, r.text)
    # a foreign Origin, even with a JSON body and for body-less actions
    for method, path in (("POST", "/connectors"), ("POST", "/connectors/x/restart"), ("GET", "/connectors")):
        r = requests.request(method, api.url + path, data=cfg if method == "POST" else None,
                             headers={"Content-Type": "application/json", "Origin": "https://evil.example"},
                             timeout=30)
        assert r.status_code == 403 and "access.control.allow.origin" in r.json()["message"], (path, r.text)
    # DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own Host
    r = requests.get(api.url + "/connectors", headers={"Host": "evil.example"}, timeout=30)
    assert r.status_code == 403 and "rest.allowed.host.names" in r.json()["message"]
    assert api.get("/connectors") == []
    # the API's own origin (a UI served with it) and localhost are served
    r = requests.get(api.url + "/connectors", headers={"Origin": api.url}, timeout=30)
    assert r.status_code == 200
    port = api.url.rsplit(":", 1)[1]
    assert requests.get(f"http://localhost:{port}/connectors", timeout=30).status_code == 200


def test_configured_origins_get_cors_answers(rest_only):
    _, api = rest_only(**{"access.control.allow.origin": "https://ui.example",
                          "access.control.allow.methods": "GET,POST,PUT,DELETE"})
    r = requests.get(api.url + "/connectors", headers={"Origin": "https://ui.example"}, timeout=30)
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "https://ui.example"
    r = requests.options(api.url + "/connectors", headers={"Origin": "https://ui.example",
                                                           "Access-Control-Request-Method": "PUT"}, timeout=30)
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Methods"] == "GET,POST,PUT,DELETE"
    r = requests.get(api.url + "/connectors", headers={"Origin": "https://other.example"}, timeout=30)
    assert r.status_code == 403


# -- 6 + issue 16.4. secrets in URLs, GET → PUT round trips, encryption at rest ---------------------------------------
JDBC_SINK = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
             "connection.url": "jdbc:postgresql://db.example:5432/app?user=app&password=url-s3cret&ssl=true",
             "connection.user": "app", "connection.password": "key-s3cret", "topics": "orders",
             "value.converter": "io.confluent.connect.avro.AvroConverter",
             "value.converter.schema.registry.url": "https://sr-user:sr-s3cret@registry.example:8081"}


def _secrets_in(text: str) -> list[str]:
    return [s for s in ("url-s3cret", "key-s3cret", "sr-s3cret") if s in text]


def test_passwords_in_urls_are_masked_everywhere(rest_only):
    _, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "j", "config": JDBC_SINK, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    shown = api.get("/connectors/j/config")
    assert shown["connection.url"] == "jdbc:postgresql://db.example:5432/app?user=app&password=[hidden]&ssl=true"
    assert shown["value.converter.schema.registry.url"] == "https://sr-user:[hidden]@registry.example:8081"
    assert shown["connection.password"] == "[hidden]"
    for text in (r.text, json.dumps(shown), api.call("GET", "/connectors/j").text,
                 api.call("GET", "/connectors/j/tasks").text,
                 api.call("GET", "/connectors", expand=["info", "status"]).text,
                 api.call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", JDBC_SINK).text):
        assert _secrets_in(text) == [], text


def test_failure_traces_hide_the_connectors_secrets(rest_only):
    worker, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "j", "config": JDBC_SINK}).status_code == 201
    # what a driver or Spark may print when the connection fails: the URL, the password
    runtime = worker.service.worker.runtimes["j"]
    runtime.phase, runtime.trace = "FAILED", (f"ConnectionError: cannot reach {JDBC_SINK['connection.url']} "
                                              f"(password key-s3cret rejected) via "
                                              f"{JDBC_SINK['value.converter.schema.registry.url']}")
    for text in (api.call("GET", "/connectors/j/status").text, api.call("GET", "/connectors/j/tasks/0/status").text,
                 api.call("GET", "/connectors", expand="status").text):
        assert "FAILED" in text and _secrets_in(text) == [] and "[hidden]" in text, text


def test_get_then_put_keeps_the_stored_secrets(rest_only):
    worker, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "j", "config": JDBC_SINK,
                                            "initial_state": "STOPPED"}).status_code == 201
    edited = dict(api.get("/connectors/j/config"), **{"batch.size": "500"})  # an operator edits one key
    r = api.call("PUT", "/connectors/j/config", edited)
    assert r.status_code == 200, r.text
    stored = worker.service.raw_config("j")
    assert stored["connection.password"] == "key-s3cret" and stored["batch.size"] == "500"
    assert stored["connection.url"] == JDBC_SINK["connection.url"]
    assert stored["value.converter.schema.registry.url"] == JDBC_SINK["value.converter.schema.registry.url"]
    r = api.call("PATCH", "/connectors/j/config", {"connection.password": "[hidden]", "batch.size": "600"})
    assert r.status_code == 200 and worker.service.raw_config("j")["connection.password"] == "key-s3cret"
    # a masked value that is not what the API showed is refused: it would destroy the secret
    r = api.call("PUT", "/connectors/j/config", dict(edited, **{
        "connection.url": "jdbc:postgresql://attacker.example/app?password=[hidden]"}))
    assert r.status_code == 400 and "connection.url" in r.json()["message"]
    r = api.call("POST", "/connectors", {"name": "copy", "config": dict(edited, name="copy")})
    assert r.status_code == 400 and "[hidden]" in r.json()["message"]


def test_configs_are_encrypted_at_rest(rest_only, tmp_path):
    _, api = rest_only()
    assert api.call("POST", "/connectors", {"name": "j", "config": JDBC_SINK,
                                            "initial_state": "STOPPED"}).status_code == 201
    stored = (tmp_path / "state" / "_connectors" / "j.json").read_text()
    assert _secrets_in(stored) == [] and "config_encrypted" in stored
    key = tmp_path / "state" / "_keys" / "state.key"
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    # a restarted worker reads them back
    worker2, _api2 = rest_only()
    assert worker2.service.states.get("j").config["connection.password"] == "key-s3cret"


# -- 8. basic auth: Jetty's credentials, no early return, TLS --------------------------------------------------------
def test_jetty_hashed_credentials(rest_only, tmp_path):
    realm = tmp_path / "realm.properties"
    realm.write_text("md5user: MD5:5eBe2294EcD0E0F08eAb7690D2A6Ee69,admin\n"  # secret, as Jetty 12 prints it
                     "obfuser: OBF:1yta1t331v8w1v9q1t331ytc\n"               # secret
                     f"cryptuser: CRYPT:{crypt.crypt('secret', 'cr')}\n"
                     "plain: secret\n")
    _, api = rest_only(**{"rest.basic.auth.file": str(realm)})
    for user in ("md5user", "obfuser", "cryptuser", "plain"):
        assert requests.get(api.url + "/connectors", auth=(user, "secret"), timeout=30).status_code == 200, user
        assert requests.get(api.url + "/connectors", auth=(user, "wrong"), timeout=30).status_code == 401, user
    hashed = "MD5:5eBe2294EcD0E0F08eAb7690D2A6Ee69"
    assert requests.get(api.url + "/connectors", auth=("md5user", hashed), timeout=30).status_code == 401
    assert requests.get(api.url + "/connectors", auth=("nobody", "secret"), timeout=30).status_code == 401
    bad = {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}
    assert requests.get(api.url + "/connectors", headers=bad, timeout=30).status_code == 401


def test_an_empty_users_file_lets_nobody_in(rest_only, tmp_path):
    empty = tmp_path / "users.properties"
    empty.write_text("# no users yet\n")
    _, api = rest_only(**{"rest.basic.auth.file": str(empty)})
    assert requests.get(api.url + "/connectors", timeout=30).status_code == 401
    assert requests.get(api.url + "/connectors", auth=("admin", ""), timeout=30).status_code == 401


def test_unknown_users_cost_a_full_credential_check(monkeypatch):
    realm = auth.Realm({"admin": "CRYPT:" + crypt.crypt("secret", "ad")})
    checked: list[str] = []
    real = auth._credential_bytes

    def spy(credential: str, password: str) -> tuple[bytes, bytes]:
        checked.append(credential[:4])
        return real(credential, password)

    monkeypatch.setattr(auth, "_credential_bytes", spy)
    assert not realm.authenticate("nobody", "secret")
    assert not realm.authenticate("admin", "wrong")
    assert len(checked) == 2  # the unknown user was checked against a decoy, not answered early


@pytest.mark.parametrize("store", ["PEM", "PKCS12"])
def test_https_listener_with_basic_auth(rest_only, tmp_path, users_file, store):
    pem, cert, p12 = self_signed(tmp_path)
    keystore = {"listeners.https.ssl.keystore.location": pem, "listeners.https.ssl.keystore.type": "PEM"} \
        if store == "PEM" else {"listeners.https.ssl.keystore.location": p12,
                                "listeners.https.ssl.keystore.type": "PKCS12",
                                "listeners.https.ssl.keystore.password": "changeit"}
    worker, _ = rest_only(**{"listeners": "https://127.0.0.1:0", "rest.basic.auth.file": users_file, **keystore})
    assert worker.url.startswith("https://127.0.0.1:")
    r = requests.get(worker.url + "/connectors", auth=("admin", "s3cret"), verify=cert, timeout=30)
    assert r.status_code == 200 and r.json() == []
    assert requests.get(worker.url + "/connectors", verify=cert, timeout=30).status_code == 401
    with pytest.raises(requests.ConnectionError):  # no clear-text HTTP on the TLS port
        requests.get(worker.url.replace("https://", "http://") + "/connectors", auth=("admin", "s3cret"),
                     timeout=10)
