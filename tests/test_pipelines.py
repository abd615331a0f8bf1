"""Spark Declarative Pipelines: the example spec (conf/pipelines) run by ``spark-pipelines run`` (its own local Spark
Connect server) with a Debezium PostgreSQL config as its source, its tables checked row by row.

Two runs, as a scheduled pipeline does: the first takes the snapshot, the second the inserts, updates and deletes
made since (the streaming table resumes at its checkpoint under the spec's storage).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
from deltalake import DeltaTable

from tests.support import servers

CONF = Path(__file__).resolve().parent.parent / "conf"
SPARK_PIPELINES = Path(sys.executable).parent / "spark-pipelines"


def _run(project: Path, env: dict) -> None:
    # A persistent catalog (Hive's, Derby in the project directory): Spark's in-memory one forgets the tables, and a
    # second run then finds their directories taken (LOCATION_ALREADY_EXISTS).
    run = subprocess.run([str(SPARK_PIPELINES), "--conf", "spark.sql.catalogImplementation=hive",
                          "run", "--spec", "pipelines/spark-pipeline.yml"], cwd=project,
                         env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "Run is COMPLETED" in run.stdout + run.stderr


def _delta_rows(path: Path, columns: list[str]) -> list[tuple]:
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in rows)


def test_pipeline_spec_mirrors_debezium_changes(tmp_path):
    host, port = servers.postgres()
    with psycopg.connect(host=host, port=port, user="postgres", dbname="test", autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS pipeline_shop WITH (FORCE)")
        admin.execute("CREATE DATABASE pipeline_shop")
    db = psycopg.connect(host=host, port=port, user="postgres", dbname="pipeline_shop", autocommit=True)
    db.execute("CREATE TABLE orders (id int PRIMARY KEY, product text, qty int)")
    db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    db.execute("INSERT INTO orders VALUES (1, 'pen', 2), (2, 'ink', 1), (3, 'paper', 10)")

    project, orders = tmp_path / "project", tmp_path / "orders-delta"
    shutil.copytree(CONF, project, symlinks=False)
    spec = project / "pipelines" / "spark-pipeline.yml"
    spec.write_text(spec.read_text().replace("file:///tmp/kconnect-pipelines/shop_mirror",
                                             (tmp_path / "storage").as_uri()))
    env = {**os.environ, "PGHOST": host, "PGPORT": str(port), "PGUSER": "postgres", "PGDATABASE": "pipeline_shop",
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "ORDERS_DELTA_PATH": str(orders)}
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)
    try:
        _run(project, env)
        assert _delta_rows(orders, ["id", "product", "qty"]) == [(1, "pen", 2), (2, "ink", 1), (3, "paper", 10)]

        db.execute("INSERT INTO orders VALUES (4, 'nib', 1)")
        db.execute("UPDATE orders SET qty = 5 WHERE id = 2")
        db.execute("DELETE FROM orders WHERE id = 3")
        with db.transaction():
            db.execute("UPDATE orders SET product = 'fountain pen' WHERE id = 1")
            db.execute("UPDATE orders SET qty = 3 WHERE id = 1")
        _run(project, env)
        expected = sorted(db.execute("SELECT id, product, qty FROM orders").fetchall())
        assert expected == [(1, "fountain pen", 3), (2, "ink", 5), (4, "nib", 1)]
        assert _delta_rows(orders, ["id", "product", "qty"]) == expected
        ops = pq.read_table(project / "spark-warehouse" / "orders_events", columns=["value"]).to_pylist()
        assert sorted(r["value"]["op"] for r in ops if r["value"] is not None) == [  # tombstones are null values
            "c", "d", "r", "r", "r", "u", "u", "u"]
    finally:
        db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                   "WHERE slot_name = 'shop_pipeline'")
        db.close()
