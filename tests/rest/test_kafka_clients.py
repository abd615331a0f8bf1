"""Existing Kafka Connect REST clients work unchanged: kafka-connect-py (PyPI; its ``KafkaConnect`` Python client
and its ``kc`` CLI), plus the validate/plugins endpoints' exact shapes, masked passwords and basic auth."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def users_file(tmp_path):
    p = tmp_path / "users.properties"
    p.write_text("admin: s3cret\n")
    return str(p)


def test_kafka_connect_py_client_and_cli_work_unchanged(start_worker, tmp_path, users_file):
    from kafka_connect import KafkaConnect
    from requests.exceptions import HTTPError

    worker, _ = start_worker(**{"rest.basic.auth.file": users_file})
    kc = KafkaConnect(url=worker.url, auth="admin:s3cret")
    info = kc.get_cluster_info()
    assert set(info) == {"version", "commit", "kafka_cluster_id"}
    with pytest.raises(HTTPError):
        KafkaConnect(url=worker.url, auth="admin:wrong").list_connectors()
    with pytest.raises(HTTPError):
        KafkaConnect(url=worker.url).list_connectors()

    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    created = kc.create_connector({"name": "f", "config": {"connector.class": "FileStreamSource", "file": str(src),
                                                            "topic": "t", "tasks.max": "2"}})
    assert created["tasks"] == [{"connector": "f", "task": 0}, {"connector": "f", "task": 1}]
    assert kc.list_connectors() == ["f"]
    assert kc.get_connector_config("f")["file"] == str(src)
    kc.pause_connector("f")
    kc.resume_connector("f")
    from runtime.worker_helpers import wait_for

    status = wait_for(lambda: (s := kc.get_connector_status("f"))["connector"]["state"] == "RUNNING" and s,
                      what="RUNNING through kafka-connect-py")
    assert [t["id"] for t in status["tasks"]] == [0, 1]
    assert kc.list_connectors(expand="status")["f"]["status"]["connector"]["state"] == "RUNNING"
    assert kc.get_connector_task_status("f", 1)["state"] == "RUNNING"
    assert [t["id"] for t in kc.list_connector_tasks("f")] == [{"connector": "f", "task": 0},
                                                               {"connector": "f", "task": 1}]
    kc.restart_connector("f")
    kc.restart_connector_task("f", 0)
    wait_for(lambda: kc.get_connector_status("f")["connector"]["state"] == "RUNNING", what="RUNNING again")
    wait_for(lambda: kc.list_connector_topics("f") == {"f": {"topics": ["t"]}}, what="topic t tracked")
    kc.reset_connector_topics("f")
    assert kc.list_connector_topics("f") == {"f": {"topics": []}}
    plugins = kc.list_connector_plugins()
    assert {"class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "type": "source",
            "version": info["version"]} in plugins
    assert {p["type"] for p in plugins} == {"source", "sink"}
    checked = kc.validate_connector_config("FileStreamSource", {"connector.class": "FileStreamSource",
                                                                "name": "x", "topic": "t"})
    assert checked["error_count"] == 1
    kc.update_connector("f", {"connector.class": "FileStreamSource", "file": str(src), "topic": "t"})
    assert kc.get_connector("f")["tasks"] == [{"connector": "f", "task": 0}]

    # The kc CLI of the same package, pointed at our worker.
    exe = shutil.which("kc") or str(__import__("pathlib").Path(__import__("sys").executable).parent / "kc")
    env_args = [exe, "--url", worker.url, "--auth", "admin:s3cret"]
    out = subprocess.run(env_args + ["list"], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["f"]
    out = subprocess.run(env_args + ["status", "f"], capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["name"] == "f"
    kc.delete_connector("f")
    assert kc.list_connectors() == []


def test_validate_returns_kafka_config_infos(start_worker, tmp_path):

    _worker, api = start_worker()
    r = api.call("PUT", "/connector-plugins/FileStreamSourceConnector/config/validate", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "name": "v",
        "tasks.max": "0", "topic": "t", "fiel": "x",
        "transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)"})
    assert r.status_code == 200, r.text
    infos = r.json()
    assert infos["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert set(infos) == {"name", "error_count", "groups", "configs"}
    assert "Common" in infos["groups"] and "Transforms: route" in infos["groups"]
    by = {c["value"]["name"]: c for c in infos["configs"]}
    for c in infos["configs"]:
        assert set(c) == {"definition", "value"}
        assert set(c["value"]) == {"name", "value", "recommended_values", "errors", "visible"}
        if c["definition"] is not None:
            assert set(c["definition"]) == {"name", "type", "required", "default_value", "importance",
                                            "documentation", "group", "order", "width", "display_name",
                                            "dependents"}
    assert by["tasks.max"]["value"]["errors"] == ["Invalid value 0 for configuration tasks.max: Value must be at "
                                                  "least 1"]
    assert by["file"]["value"]["errors"] and by["file"]["definition"]["required"] is True
    assert by["topic"]["value"] == {"name": "topic", "value": "t", "recommended_values": [], "errors": [],
                                    "visible": True}
    assert by["transforms.route.type"]["definition"]["group"] == "Transforms: route"
    assert by["transforms.route.replacement"]["value"]["errors"]  # RegexRouter's required key
    assert 'did you mean "file"' in by["fiel"]["value"]["errors"][0]
    assert infos["error_count"] == sum(len(c["value"]["errors"]) for c in infos["configs"])
    # 400: connector.class missing or not the plugin of the path; 404: unknown plugin
    assert api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", {"name": "x"}).status_code == 400
    assert api.call("PUT", "/connector-plugins/FileStreamSink/config/validate",
                    {"connector.class": "FileStreamSource"}).status_code == 400
    assert api.call("GET", "/connector-plugins/NoSuchThing/config").status_code == 404
    keys = api.get("/connector-plugins/FileStreamSinkConnector/config")
    assert {"file", "topics", "name", "tasks.max"} <= {k["name"] for k in keys}
    all_plugins = api.get("/connector-plugins", connectorsOnly="false")
    assert {"source", "sink", "transformation", "predicate", "converter"} <= {p["type"] for p in all_plugins}
    assert api.get("/health")["status"] == "healthy"


def test_get_config_masks_passwords_but_not_provider_references(start_worker, tmp_path):
    _worker, api = start_worker(**{"config.providers": "file",
                                  "config.providers.file.class":
                                      "org.apache.kafka.common.config.provider.FileConfigProvider",
                                  "config.providers.file.param.allowed.paths": str(tmp_path)})
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("pw=from-file\n")
    cfg = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
           "connection.url": f"jdbc:sqlite:{tmp_path}/db.sqlite", "connection.user": "u",
           "connection.password": "hunter2", "topics": "t"}
    r = api.call("POST", "/connectors", {"name": "j", "config": cfg, "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    assert r.json()["config"]["connection.password"] == "[hidden]"
    got = api.get("/connectors/j/config")
    assert got["connection.password"] == "[hidden]" and got["connection.user"] == "u"
    ref = f"${{file:{secrets}:pw}}"
    r = api.call("PUT", "/connectors/j/config", dict(cfg, **{"connection.password": ref}))
    assert r.status_code == 200, r.text
    assert api.get("/connectors/j/config")["connection.password"] == ref
    for body in (api.get("/connectors/j"), api.get("/connectors/j/status"), api.get("/connectors/j/tasks"),
                 api.get("/connectors", expand=["info", "status"])):
        assert "hunter2" not in json.dumps(body) and "from-file" not in json.dumps(body)
    assert api.state("j") == "STOPPED"
