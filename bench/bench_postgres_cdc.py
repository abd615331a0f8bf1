"""Change events/s: PostgreSQL -> Spark (kconnect PostgreSQL CDC) -> noop, against the raw rate of reading the
same changes from the slot without Spark (peek + pgoutput decode in one Python loop), same run.

    .venv/bin/python bench/bench_postgres_cdc.py 300000
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from tests.support.postgres import PostgresCluster  # noqa: E402


def main(n: int) -> None:
    import psycopg
    from pyspark.sql import SparkSession

    from spark_connect_bridge.connectors.factory import build_connector
    from spark_connect_bridge.connectors.pgoutput import Decoder

    with PostgresCluster(settings={"max_wal_size": "'4GB'"}) as pg:
        pg.execute("create table t (id bigint primary key, name text, amount numeric(12,2), ts timestamptz, "
                   "payload text)")
        config = {"connector.class": "PostgresConnector", "topic.prefix": "bench", "snapshot.mode": "no_data",
                  "max.records.per.trigger": "200000", "max.batch.size": "20000", **pg.connector_config()}
        build_connector(config, kind="source").initial_offsets()
        t0 = time.monotonic()
        pg.execute(f"""do $$ begin for i in 0..{n // 1000 - 1} loop
            insert into t select g, 'name-' || g, g * 0.01, now(), repeat('x', 100)
              from generate_series(i * 1000 + 1, i * 1000 + 1000) g; commit; end loop; end $$""")
        print(f"generated {n} inserts in {time.monotonic() - t0:.1f}s")

        # raw: one peek, decode every message in one Python loop
        t0 = time.monotonic()
        with psycopg.connect(pg.dsn()) as conn:
            cur = conn.cursor(name="raw", binary=True)
            cur.itersize = 20000
            cur.execute("select (lsn - '0/0'::pg_lsn)::int8, data from pg_logical_slot_peek_binary_changes("
                        "'debezium', NULL, NULL, 'proto_version', '1', 'publication_names', 'dbz_publication')")
            raw = sum(1 for _ in Decoder(0, None).changes(cur))
        raw_s = time.monotonic() - t0
        print(f"raw peek+decode: {raw} changes in {raw_s:.1f}s = {raw / raw_s:,.0f}/s")

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
                 .getOrCreate())
        ckpt = f"/tmp/bench-cdc-{os.getpid()}"
        t0 = time.monotonic()
        q = (spark.readStream.format("kconnect").options(**config).load().writeStream.format("noop")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination()
        spark_s = time.monotonic() - t0
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        print(f"spark -> noop: {rows} events in {spark_s:.1f}s = {rows / spark_s:,.0f}/s "
              f"(includes query start, {len(q.recentProgress)} batches)")
        print(f"ratio spark/raw = {(rows / spark_s) / (raw / raw_s):.2f}")
        spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
