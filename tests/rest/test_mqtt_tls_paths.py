"""The MQTT connectors' TLS file keys over the worker's REST API, attacked as someone with only the REST port would:
a key naming a file outside ``connector.allowed.paths`` (the worker's own key, /etc/shadow) is refused before the
connector exists, naming the key; one inside the allowed directory is accepted."""

from __future__ import annotations

import pytest

SOURCE = {"connector.class": "io.confluent.connect.mqtt.MqttSourceConnector", "mqtt.server.uri": "ssl://127.0.0.1:9",
          "mqtt.topics": "plant/#", "kafka.topic": "readings"}
TLS_PATH_KEYS = ["mqtt.ssl.trust.store.path", "mqtt.ssl.key.store.path"]


@pytest.mark.parametrize("key", TLS_PATH_KEYS)
def test_a_tls_file_outside_the_allowed_paths_is_refused(rest_only, tmp_path, key):
    _, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "mqtt", "config": {**SOURCE, key: "/etc/shadow"},
                                         "initial_state": "STOPPED"})
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert api.call("GET", "/connectors").json() == []
    inside = tmp_path / "data" / "ca.pem"
    inside.write_text("")
    r = api.call("POST", "/connectors", {"name": "mqtt", "config": {**SOURCE, key: str(inside)},
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
