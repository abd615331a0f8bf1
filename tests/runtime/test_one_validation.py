"""One validation function: ``kconnect plugins validate --worker-config``, the REST validate endpoint, ``POST
/connectors`` and the query start agree on every config, and a config that validates starts (issue #18)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .worker_helpers import wait_for

KCONNECT = str(Path(sys.executable).with_name("kconnect"))


def _write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def _cli_validate(config: Path, worker: Path | None) -> subprocess.CompletedProcess[str]:
    args = [KCONNECT, "plugins", "validate", str(config)] + (["--worker-config", str(worker)] if worker else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def worker_setup(start_worker, tmp_path):
    props = {"offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics"),
             "connector.allowed.paths": str(tmp_path), "listeners": "http://127.0.0.1:0",
             "trigger.interval.ms": "500", "status.interval.ms": "200",
             "value.converter": "org.apache.kafka.connect.json.JsonConverter",
             "value.converter.schemas.enable": "false"}
    _, api = start_worker(**props)
    return _write_properties(tmp_path / "worker.properties", props), api


def test_cli_rest_validate_create_and_start_agree(worker_setup, tmp_path):
    worker_file, api = worker_setup
    (tmp_path / "in.txt").write_text("a\nb\n", encoding="utf-8")
    cases: dict[str, tuple[dict[str, str], str | None]] = {
        # name: (config, the key an error names; None: valid where the worker runs it)
        "file-source": ({"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"),
                         "topic": "lines", "value.converter": "org.apache.kafka.connect.storage.StringConverter"},
                        None),
        # the worker's topic store is the dead-letter directory: valid on the worker, not for kconnect run
        "dlq-sink": ({"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"), "topics": "lines",
                      "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                      "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}, None),
        # a worker's sink reads topics: it must name them (Kafka Connect's rule)
        "no-topics": ({"connector.class": "FileStreamSink", "file": str(tmp_path / "out2.txt")}, "topics"),
        # Confluent's JDBC sink refuses schemaless values: the config that makes every value so is refused
        "jdbc-schemaless": ({"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "lines",
                             "connection.url": f"jdbc:sqlite:{tmp_path}/x.db",
                             "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                             "value.converter.schemas.enable": "false"}, "value.converter.schemas.enable"),
        "typo": ({"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "x",
                  "batch.sise": "5"}, "batch.sise"),
        "bad-transform": ({"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "x",
                           "transforms": "r", "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
                           "transforms.r.regex": "("}, "transforms.r.regex"),
    }
    for name, (config, bad_key) in cases.items():
        path = _write_properties(tmp_path / f"{name}.properties", config)
        cli = _cli_validate(path, worker_file)
        plugin = config["connector.class"]
        infos = api.call("PUT", f"/connector-plugins/{plugin}/config/validate", {**config, "name": name}).json()
        created = api.call("POST", "/connectors", {"name": name, "config": config})
        if bad_key is None:
            assert cli.returncode == 0, (name, cli.stdout, cli.stderr)
            assert infos["error_count"] == 0, (name, infos)
            assert created.status_code == 201, (name, created.text)
            api.wait_state(name, "RUNNING")
        else:
            assert cli.returncode != 0 and bad_key in cli.stderr + cli.stdout, (name, cli.stdout, cli.stderr)
            assert infos["error_count"] > 0 and any(
                c["value"]["name"] == bad_key and c["value"]["errors"] for c in infos["configs"]), (name, infos)
            assert created.status_code == 400 and bad_key in created.json()["message"], (name, created.text)
    # what validated ran: the source's lines went through the sink, dead-letter queue configured
    wait_for(lambda: (tmp_path / "out.txt").exists() and (tmp_path / "out.txt").read_text().split() == ["a", "b"],
             what="the file sink to copy the source's lines")
    # without the worker, kconnect run needs the dead-letter directory named: said before any data moves
    alone = _cli_validate(tmp_path / "dlq-sink.properties", None)
    assert alone.returncode != 0 and "errors.deadletterqueue.topics.dir" in alone.stderr + alone.stdout
