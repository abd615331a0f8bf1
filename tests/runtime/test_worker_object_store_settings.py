"""A Delta connector created over REST (which may not carry fs.s3a.* keys: the policy refuses them) reaches a table
in a bucket with the worker's spark.hadoop.fs.s3a.* settings, at run time only: the config the REST API keeps and
shows has none of them."""

from __future__ import annotations

from spark_connect_bridge.connectors.delta import locations_of
from spark_connect_bridge.runtime.validate import check_config
from spark_connect_bridge.runtime.worker_config import parse_worker_config

WORKER_S3A = {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000", "spark.hadoop.fs.s3a.path.style.access": "true",
              "spark.hadoop.fs.s3a.access.key": "worker-key", "spark.hadoop.fs.s3a.secret.key": "worker-s3cret"}


def _worker(tmp_path):
    return parse_worker_config({"offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics"),
                                "connector.allowed.paths": "s3a://lake/tables", **WORKER_S3A},
                               base_dir=str(tmp_path))


def test_a_rest_made_delta_sink_runs_with_the_worker_s_s3a_settings(tmp_path):
    stored = {"name": "d", "connector.class": "delta-sink", "topics": "t", "delta.table.path": "s3a://lake/tables/t"}
    checked = check_config(stored, _worker(tmp_path), kind="sink")
    options = checked.prepared.connector_options
    assert options["fs.s3a.endpoint"] == "http://127.0.0.1:9000" and options["fs.s3a.access.key"] == "worker-key"
    storage = locations_of(checked.prepared.settings).storage_options("s3a://lake/tables/t")
    assert storage["aws_endpoint"] == "http://127.0.0.1:9000" and storage["aws_secret_access_key"] == "worker-s3cret"
    assert not any(k.startswith("fs.s3a.") for k in stored)  # the stored (and shown) config is unchanged


def test_a_config_with_its_own_s3a_keys_and_other_connectors_get_none_of_the_worker_s(tmp_path):
    own = {"name": "d", "connector.class": "delta-sink", "topics": "t", "delta.table.path": "s3a://lake/tables/t",
           "fs.s3a.endpoint": "http://127.0.0.1:9999"}
    options = check_config(own, _worker(tmp_path), kind="sink").prepared.connector_options
    assert options["fs.s3a.endpoint"] == "http://127.0.0.1:9999" and "fs.s3a.access.key" not in options
    other = {"name": "f", "connector.class": "FileStreamSink", "topics": "t", "file": str(tmp_path / "out.txt")}
    options = check_config(other, _worker(tmp_path), kind="sink").prepared.connector_options
    assert not any(k.startswith("fs.s3a.") for k in options)
