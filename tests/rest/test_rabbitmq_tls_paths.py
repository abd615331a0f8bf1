"""The RabbitMQ connectors' TLS file keys over the worker's REST API, attacked as someone with only the REST port
would: a trust store or key store naming a file outside ``connector.allowed.paths`` (/etc/shadow, the worker's own
files) is refused before the connector exists, naming the key; one inside the allowed directory is accepted."""

from __future__ import annotations

import pytest

SOURCE = {"connector.class": "io.confluent.connect.rabbitmq.RabbitMQSourceConnector", "rabbitmq.host": "127.0.0.1",
          "rabbitmq.port": "9", "rabbitmq.queue": "orders", "kafka.topic": "orders",
          "rabbitmq.security.protocol": "SSL"}
TLS_PATH_KEYS = ["rabbitmq.https.ssl.truststore.location", "rabbitmq.https.ssl.keystore.location"]


@pytest.mark.parametrize("key", TLS_PATH_KEYS)
def test_a_tls_file_outside_the_allowed_paths_is_refused(rest_only, tmp_path, key):
    _, api = rest_only()
    r = api.call("POST", "/connectors", {"name": "rmq", "config": {**SOURCE, key: "/etc/shadow"},
                                         "initial_state": "STOPPED"})
    assert r.status_code == 400 and key in r.json()["message"], r.text
    assert "root:" not in r.text
    assert api.call("GET", "/connectors").json() == []
    inside = tmp_path / "data" / "ca.pem"
    inside.write_text("")
    r = api.call("POST", "/connectors", {"name": "rmq", "config": {**SOURCE, key: str(inside)},
                                         "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
