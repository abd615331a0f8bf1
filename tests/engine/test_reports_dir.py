"""Where a streaming sink's per-batch reports go: beside a local checkpoint, and on the driver's local disk (never a
relative directory named after the URI's scheme) when the checkpoint is a file system URI."""

from __future__ import annotations

import os
import tempfile

import pytest

from spark_connect_bridge.engine.datasource import read_batch_reports, reports_dir, write_batch_report


def test_a_local_checkpoint_keeps_its_reports_beside_it(tmp_path):
    assert reports_dir(str(tmp_path / "ckpt")) == str(tmp_path / "ckpt" / "kconnect-reports")
    assert reports_dir(f"file://{tmp_path}/ckpt") == str(tmp_path / "ckpt" / "kconnect-reports")
    assert reports_dir(f"file:{tmp_path}/ckpt") == str(tmp_path / "ckpt" / "kconnect-reports")


@pytest.mark.parametrize("uri", ["hdfs://127.0.0.1:9000/checkpoints/a", "s3a://bucket/ckpt/a", "gs://b/c/"])
def test_a_checkpoint_on_a_file_system_uri_keeps_its_reports_in_the_driver_s_temporary_directory(uri, tmp_path,
                                                                                                 monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # before the fix, the reports went to ./hdfs:/127.0.0.1:9000/...
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    where = reports_dir(uri)
    assert where.startswith(os.path.join(tempfile.gettempdir(), "kconnect-reports") + os.sep)
    assert reports_dir(uri.rstrip("/") + "/") == where != reports_dir(uri.rstrip("/") + "x")
    write_batch_report(where, "app", 7, (), retries=2)
    assert read_batch_reports(uri) == [{"batch_id": 7, "rejected": [], "retries": 2}]
    assert os.listdir(tmp_path / "cwd") == []
