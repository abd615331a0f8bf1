"""A worker given ``offset.storage.dir=hdfs://...``: refused at start, naming the key and the reason, before it
reaches the NameNode (here one that does not exist: nothing is connected to, nothing written). The worker's own
files go through pyarrow.fs, which reaches HDFS only through libhdfs (a JVM and a Hadoop install on the worker's
host); Spark's checkpoints alone would reach it."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_worker_with_its_state_on_hdfs_is_refused_at_start_naming_the_key(tmp_path):
    state = "hdfs://127.0.0.1:1/kconnect/state"  # port 1: nothing listens, nothing may be tried
    props = tmp_path / "worker.properties"
    props.write_text(f"listeners=http://127.0.0.1:0\noffset.storage.dir={state}\n"
                     f"topics.dir={tmp_path / 'topics'}\nspark.master=local[1]\n")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    run = subprocess.run([sys.executable, "-m", "spark_connect_bridge.cli", "worker", str(props)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=env)
    said = run.stdout + run.stderr
    assert run.returncode == 2, said
    assert "offset.storage.dir" in said and "libhdfs" in said, said
    assert said.count(state) == 1  # the value once, in the one message
    assert sorted(os.listdir(tmp_path)) == ["worker.properties"]  # no local state, no topic store either
