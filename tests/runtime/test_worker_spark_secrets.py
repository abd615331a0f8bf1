"""A credential among the worker's ``spark.*`` settings (a resolved ``spark.hadoop.fs.s3a.secret.key``, here
``spark.ssl.keyPassword`` through the file config provider) reaches its Spark JVM but never that JVM's command line,
where any local user reads it in ``ps`` (jvm.get_or_create). The attack: read every process's command line and
environment while the worker's JVM runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from spark_connect_bridge.jvm import _escape_property

pytestmark = pytest.mark.timeout(300)

#: every character java.util.Properties treats specially, and a space Spark would not trim
SECRET = "s3cr3t pw=with:all#the!chars\\and\ttabs"

_WORKER = textwrap.dedent("""
    import glob, json, os, sys
    from spark_connect_bridge.runtime.worker import Worker
    from spark_connect_bridge.runtime.worker_config import parse_worker_config

    # the secret comes through a file, so that no command line of the test holds it either
    secret, creds, state = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
    worker = Worker(parse_worker_config({
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "offset.storage.dir": state, "spark.master": "local[1]", "spark.ui.enabled": "false",
        "spark.ssl.keyPassword": "${file:" + creds + ":password}"}))
    spark = worker.spark
    seen = []
    for proc in glob.glob("/proc/[0-9]*"):
        for part in ("cmdline", "environ"):
            try:
                with open(f"{proc}/{part}", "rb") as f:
                    if secret.encode() in f.read():
                        seen.append(f"{proc}/{part}")
            except OSError:
                pass
    print(json.dumps({"arrived": spark.sparkContext.getConf().get("spark.ssl.keyPassword") == secret,
                      "seen": seen, "submit_args": os.environ.get("PYSPARK_SUBMIT_ARGS"),
                      "files_left": glob.glob(os.path.join(os.environ["TMPDIR"], "kconnect-spark-*"))}))
    spark.stop()
""")


def test_a_secret_spark_setting_reaches_the_jvm_but_not_its_command_line(tmp_path):
    creds = tmp_path / "creds.properties"
    creds.write_text(f"password={_escape_property(SECRET)}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", TMPDIR=str(tmp_path))
    (tmp_path / "secret").write_text(SECRET)
    done = subprocess.run([sys.executable, "-c", _WORKER, str(tmp_path / "secret"), str(creds),
                           str(tmp_path / "state")], capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"arrived": True, "seen": [], "submit_args": None, "files_left": []}


def test_the_properties_escape_reads_back_as_java_reads_it():
    """Each special character escaped as java.util.Properties.load expects (checked through the JVM above; here
    the shape of the line)."""
    assert _escape_property("a b=c:d#e!f\\g\nh") == "a\\ b\\=c\\:d\\#e\\!f\\\\g\\nh"
