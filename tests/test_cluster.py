"""A connector on a real Spark standalone cluster (a master and two workers on 127.0.0.1, from the pip install).

The cluster and its driver run in their own processes: the test run keeps its one local session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.distributed.group_helpers import GroupWorker, until
from tests.support import servers

pytestmark = pytest.mark.cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "workers")}
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    master_log = open(work / "master.log", "w")
    procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                                  env=env, stdout=master_log, stderr=subprocess.STDOUT))
    try:
        until(lambda: "I have been elected leader" in (work / "master.log").read_text(), timeout=90, what="the master")
        for i in range(2):
            log = open(work / f"worker{i}.log", "w")
            procs.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                 "--work-dir", str(work / f"w{i}")], env=env, stdout=log, stderr=subprocess.STDOUT))
        until(lambda: (work / "master.log").read_text().count("Registering worker") >= 2, timeout=120,
              what="two workers")
        yield url, env, work
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


DRIVER = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession
    url, out, ckpt = sys.argv[1:4]
    spark = (SparkSession.builder.master(url).appName("kconnect-cluster-test")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", "2").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    cfg = {"connector.class": "DatagenConnector", "kafka.topic": "pageviews", "quickstart": "pageviews",
           "tasks.max": "2", "iterations": "5000", "max.interval": "0", "max.records.per.trigger": "4000"}
    q = (spark.readStream.format("kconnect").options(**cfg).load()
         .selectExpr("cast(key as string) as value", "topic", "partition", "offset")
         .writeStream.format("kconnect").option("connector.class", "FileStreamSink").option("file", out)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    batches = sum(1 for p in q.recentProgress if p["numInputRows"])
    print("EXECUTORS", executors, "BATCHES", batches)
    spark.stop()
''')


def test_datagen_to_file_sink_on_a_standalone_cluster(cluster, tmp_path):
    url, env, _work = cluster
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, str(script), url, str(out), str(tmp_path / "ckpt")], env=env,
                          capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = next(ln for ln in proc.stdout.splitlines() if ln.startswith("EXECUTORS"))
    executors = int(summary.split()[1])
    assert executors == 2, summary
    assert int(summary.split()[3]) == 3  # 10,000 records, at most 4,000 per micro-batch
    viewtimes = sorted(int(v) for v in out.read_text().split())
    # pageviews keys: viewtime = 1 + (iteration * tasks + task) * 10, 5,000 iterations per task.
    assert viewtimes == [1 + i * 10 for i in range(10_000)]


def test_a_group_worker_runs_its_queries_on_the_cluster_named_by_spark_master(cluster, tmp_path):
    """``spark.master`` in a (distributed) worker config: the worker's Spark application registers with the
    standalone master and its connector's query runs on the cluster's executors."""
    import deltalake

    url, _env, work = cluster
    host, port = servers.postgres()
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    worker = GroupWorker(tmp_path, {"group.store.url": f"postgresql://postgres@{host}:{port}/test"},
                         "cluster-" + uuid.uuid4().hex[:6],
                         "w0", spark={"spark.master": url, "spark.driver.host": "127.0.0.1",
                                      "spark.executor.memory": "512m", "spark.executor.cores": "1",
                                      "spark.cores.max": "2"}).start()
    table = tmp_path / "topics" / "lines"
    try:
        worker.wait_healthy()
        config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "lines"}
        assert worker.call("POST", "/connectors", {"name": "src", "config": config}).status_code == 201
        until(lambda: (table / "_delta_log").is_dir() and deltalake.DeltaTable(str(table)).count() == 50,
              what="the lines in the topic store, through the cluster")
        assert worker.status("src")["connector"] == {"state": "RUNNING", "worker_id": worker.worker_id}
        assert "Registering app kconnect-worker" in (work / "master.log").read_text()
    finally:
        worker.stop()
