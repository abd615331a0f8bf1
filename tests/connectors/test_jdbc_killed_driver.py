"""The JDBC sink across a driver killed with SIGKILL mid-stream: restarted on its checkpoint, every record is in
the table exactly once (insert mode without a key, so a doubled batch would show)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.connectors.jdbc_support import pg_conn, pg_db, pg_url, query  # noqa: F401 - pg_db is a fixture

N = 6_000

DRIVER = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession, functions as F
    src, url, ckpt, per_trigger = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    df = (spark.readStream.format("kconnect").options(**{"connector.class": "FileStreamSource", "file": src,
                                                         "topic": "lines", "max.records.per.trigger": per_trigger})
          .load().withColumn("value", F.struct(F.col("value").cast("bigint").alias("n"))))
    q = (df.writeStream.format("kconnect")
         .options(**{"connector.class": "JdbcSinkConnector", "connection.url": url, "connection.user": "postgres",
                     "table.name.format": "killed", "insert.mode": "insert", "pk.mode": "none",
                     "auto.create": "true"})
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    print("DONE", flush=True)
''')


def _count(db: str) -> int:
    with pg_conn(db) as conn:
        try:
            return query(conn, "SELECT count(*) FROM killed")[0][0]
        except Exception:  # noqa: BLE001 - the table does not exist before the first commit
            return 0


def test_sink_is_exactly_once_across_a_killed_driver(pg_db, tmp_path):  # noqa: F811 - pytest fixture
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{i}\n" for i in range(N)))
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    args = [sys.executable, str(script), str(src), pg_url(pg_db), str(tmp_path / "ckpt"), "300"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while _count(pg_db) < 600 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers, mid-stream
    first.wait()
    partial = _count(pg_db)
    assert 0 < partial < N, partial
    # The restart first runs the batch in flight at the kill with its planned range (from the offset log), then
    # the rest in one batch: a larger max.records.per.trigger on restart, as an operator might set.
    second = subprocess.run([*args[:-1], str(N)], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0 and "DONE" in second.stdout, second.stderr[-3000:]
    with pg_conn(pg_db) as conn:
        rows = query(conn, "SELECT n, count(*) FROM killed GROUP BY n HAVING count(*) > 1")
        assert rows == [], f"doubled rows: {rows[:5]}"
        assert sorted(r[0] for r in query(conn, "SELECT n FROM killed")) == list(range(N))
