"""Relative paths in connector options resolve where Spark resolves its own: the driver's working directory."""

from __future__ import annotations

import os

from spark_connect_bridge.core.paths import local_path


def test_relative_path_is_relative_to_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_JOB_ARTIFACT_UUID", raising=False)
    monkeypatch.chdir(tmp_path)
    assert local_path("test.sink.txt") == str(tmp_path / "test.sink.txt")
    assert local_path("/abs/./x.txt") == "/abs/x.txt"


def test_in_a_spark_connect_session_worker_it_is_relative_to_the_server_start_directory(monkeypatch, tmp_path):
    # A Connect server runs a session's Python workers in a per-session artifact directory, deleted with the session.
    artifacts = tmp_path / "userFiles" / "session-uuid"
    artifacts.mkdir(parents=True)
    monkeypatch.chdir(artifacts)
    monkeypatch.setenv("SPARK_JOB_ARTIFACT_UUID", "session-uuid")
    monkeypatch.setenv("PWD", str(tmp_path / "repo"))
    assert local_path("test.sink.txt") == str(tmp_path / "repo" / "test.sink.txt")
    assert local_path(str(tmp_path / "in.txt")) == str(tmp_path / "in.txt")
    assert os.getcwd() == str(artifacts)
