"""Confluent's S3 sink on the worker, as a REST user runs it: the config POSTed over HTTP (its secret through the
worker's file config provider), records from a Datagen source land in the bucket (the run's S3 server), the status
is RUNNING, and a restart of the connector over REST writes nothing twice."""

from __future__ import annotations

import json
import uuid

from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server
from tests.support.waiting import until

JSON = {"value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter"}


def _records(store: MotoS3Server, bucket: str) -> list[tuple[str, dict]]:
    return [(key, json.loads(line)) for key, data in store.objects(bucket, "exports").items()
            for line in data.decode().splitlines()]


def test_the_s3_sink_posted_over_rest_writes_every_record_once_across_a_restart(start_worker, tmp_path):
    endpoint = servers.s3()
    store = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the run's server
    bucket = "kc-" + uuid.uuid4().hex[:12]
    store.create_bucket(bucket)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "aws.properties").write_text(f"secret={SECRET_KEY}\n")
    _, api = start_worker(**{
        "connector.allowed.paths": f"{tmp_path},s3://{bucket}/exports",
        "config.providers": "file", "config.providers.file.class":
            "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets)})
    source = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
              "iterations": "60", "max.interval": "0", "tasks.max": "1", **JSON}
    sink = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": "orders",
            "s3.bucket.name": bucket, "s3.region": REGION, "store.url": endpoint, "topics.dir": "exports",
            "aws.access.key.id": ACCESS_KEY, "aws.secret.access.key": f"${{file:{secrets}/aws.properties:secret}}",
            "flush.size": "25", "format.class": "io.confluent.connect.s3.format.json.JsonFormat", **JSON}
    for name, config in (("orders-source", source), ("orders-to-s3", sink)):
        r = api.call("POST", "/connectors", {"name": name, "config": config})
        assert r.status_code == 201, r.text
        assert SECRET_KEY not in r.text
    until(lambda: len(_records(store, bucket)) >= 60, timeout=300, what="60 records in the bucket")
    status = api.wait_state("orders-to-s3", "RUNNING")
    assert all(t["state"] == "RUNNING" for t in status["tasks"]), status
    names = sorted(store.objects(bucket, "exports"))
    assert names[0] == "exports/orders/partition=0/orders+0+0000000000.json"
    assert all(n.startswith("exports/orders/partition=") for n in names)

    r = api.call("POST", "/connectors/orders-to-s3/restart", includeTasks="true")
    assert r.status_code in (202, 204), r.text
    api.wait_state("orders-to-s3", "RUNNING")
    assert sorted(store.objects(bucket, "exports")) == names  # resumed where it was: no object rewritten or added
    records = _records(store, bucket)
    assert len(records) == 60
    # JsonConverter without schemas: each line is the value's JSON object (a Map in Kafka Connect), not a string
    assert sorted(r["orderid"] for _, r in records) == list(range(60))
    assert set(records[0][1]) == {"ordertime", "orderid", "itemid", "orderunits", "address"}
