"""Issue 33, item 1 without a worker process: the settings that keep connectors' files off Python's import path."""

from __future__ import annotations

import os
import sys

import pytest

from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.runtime.worker_config import parse_worker_config


def _worker(tmp_path, **overrides: str):
    return parse_worker_config({"offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics"),
                                **overrides}, base_dir=str(tmp_path))


def test_connectors_default_to_a_data_directory_apart_from_the_workers(tmp_path):
    assert _worker(tmp_path).policy.allowed_paths == (os.path.realpath(tmp_path / "work" / "data"),)


SITE_PACKAGES = os.path.dirname(os.path.dirname(pytest.__file__))


@pytest.mark.parametrize("allowed", ["/", os.path.dirname(os.__file__), SITE_PACKAGES, "/tmp"])
def test_an_allowed_directory_holding_an_import_path_is_refused(tmp_path, allowed):
    """The interpreter's own directories (the standard library, site-packages), and Spark's local directory (/tmp
    by default: its userFiles-* are on the Python workers' path)."""
    with pytest.raises(ConfigError) as raised:
        _worker(tmp_path, **{"connector.allowed.paths": allowed})
    assert [p.key for p in raised.value.problems] == ["connector.allowed.paths"]
    assert "import modules from" in str(raised.value)


def test_sessions_of_ours_run_python_with_a_safe_path(spark):
    """tests/conftest.py builds the session with configure_spark, as a user does: every Python process Spark starts
    has PYTHONSAFEPATH, through spark.executorEnv and the JVM's own environment, so none imports from its working
    directory."""
    assert spark.conf.get("spark.executorEnv.PYTHONSAFEPATH") == "1"
    assert spark._jvm.java.lang.System.getenv("PYTHONSAFEPATH") == "1"

    def probe(_):
        return [str(sys.flags.safe_path), *sys.path]

    # (the test run's PYTHONPATH names the checkout, the workers' working directory, on purpose)
    flag, *path = spark.sparkContext.parallelize([0], 1).map(probe).first()
    assert flag == "True" and "" not in path
