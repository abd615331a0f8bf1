"""JDBC connectors end to end in Spark: Confluent's example configs, PostgreSQL → PostgreSQL and
PostgreSQL → MariaDB mirrors (inserts, updates, deletes) and the exactly-once sink across a crashed writer."""

from __future__ import annotations

import decimal
import os

import jdbc_support
import pytest
from jdbc_support import my_conn, my_db, my_url, pg_conn, pg_db, pg_url, query  # noqa: F401
from pyspark.sql import functions as F

from spark_connect_bridge.config import load_config_file

CONF = os.path.join(os.path.dirname(__file__), "..", "..", "conf")


def with_db(props: dict, db: str) -> dict:
    """The example config pointed at this test's database (the host/database is the only change)."""
    out = dict(props)
    host, port = jdbc_support.PG  # the run's PostgreSQL (set by the pg_db fixture)
    out["connection.url"] = out["connection.url"].replace("127.0.0.1:5432/test?", f"{host}:{port}/{db}?")
    return out


def run_until_caught_up(spark, source: dict, sink: dict, ckpt: str, fault: str) -> Exception | None:
    """One AvailableNow query source -> sink on ``ckpt`` with the sink's fault injection point set; the
    exception that ended it (the injected crash), or None."""
    stream = spark.readStream.format("kconnect").options(**source).load()
    q = (stream.writeStream.format("kconnect").options(**sink).option("fault.injection.point", fault)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    except Exception as e:  # noqa: BLE001 - the injected crash
        return e
    return None


def test_confluent_example_configs_run_unchanged(spark, pg_db):  # noqa: F811 - pytest fixture
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL)")
    c.execute("INSERT INTO users (name) VALUES ('alice'), ('bob')")
    src = with_db(load_config_file(os.path.join(CONF, "jdbc-source.properties")), pg_db)
    df = spark.read.format("kconnect").options(**src).load()
    got = sorted((r.topic, r.value.id, r.value.name) for r in df.collect())
    assert got == [("test-postgres-jdbc-users", 1, "alice"), ("test-postgres-jdbc-users", 2, "bob")]

    sink = with_db(load_config_file(os.path.join(CONF, "jdbc-sink.properties")), pg_db)
    orders = spark.createDataFrame(
        [(None, (1, "pen", decimal.Decimal("1.50")), "orders", 0, 0),
         (None, (2, "ink", decimal.Decimal("9.99")), "orders", 0, 1),
         (None, (3, "skip me", None), "other", 0, 0)],
        "key binary, value struct<id:int,product:string,price:decimal(10,2)>, topic string, partition int, "
        "offset bigint")
    orders.write.format("kconnect").options(**sink).mode("append").save()
    assert query(c, "SELECT id, product, price FROM orders ORDER BY id") == \
        [(1, "pen", decimal.Decimal("1.50")), (2, "ink", decimal.Decimal("9.99"))]
    c.close()


def _mirror_sink(url: str, table: str) -> dict:
    return {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": url,
            "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true",
            "table.name.format": table, "auto.create": "true"}


@pytest.mark.parametrize("target", ["postgresql", "mariadb"])
def test_postgres_mirror_equals_source_after_inserts_updates_deletes(spark, pg_db, target, request, tmp_path):  # noqa: F811 - pytest fixture
    src_table = f"items_{target}"
    c = pg_conn(pg_db)
    c.execute(f"CREATE TABLE {src_table} (id serial PRIMARY KEY, updated timestamptz NOT NULL DEFAULT now(), "
              "name text, qty int, price numeric(10,2))")
    c.execute(f"INSERT INTO {src_table} (name, qty, price) SELECT 'n' || g, g, g / 4.0 "
              "FROM generate_series(1, 200) g")
    if target == "postgresql":
        tdb = pg_db
        url, tconn = pg_url(pg_db), pg_conn(pg_db)
    else:
        tdb = request.getfixturevalue("my_db")
        url, tconn = my_url(tdb), my_conn(tdb)
    source = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db),
              "mode": "timestamp+incrementing", "timestamp.column.name": "updated",
              "incrementing.column.name": "id", "table.whitelist": src_table, "topic.prefix": "pg-",
              "tasks.max": "2"}
    sink = _mirror_sink(url, "mirror")
    ckpt = str(tmp_path / "ckpt")

    def sync() -> None:
        stream = spark.readStream.format("kconnect").options(**source).load()
        keyed = stream.withColumn("key", F.struct(F.col("value.id").alias("id")))
        q = (keyed.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()

    sync()
    c.execute(f"UPDATE {src_table} SET name = name || '-v2', qty = qty * 10, updated = clock_timestamp() "
              "WHERE id % 7 = 0")
    c.execute(f"INSERT INTO {src_table} (name, qty, price) VALUES ('late', 1, NULL)")
    sync()  # restarts from the checkpoint: only the changed rows are read
    gone = [r[0] for r in query(c, f"SELECT id FROM {src_table} WHERE id % 11 = 0")]
    c.execute(f"DELETE FROM {src_table} WHERE id % 11 = 0")
    schema = spark.read.format("kconnect").options(**source).load().schema
    tombstones = spark.createDataFrame([(i, "pg-" + src_table) for i in gone], "id int, topic string").select(
        F.struct("id").alias("key"), F.lit(None).cast(schema["value"].dataType).alias("value"), "topic",
        F.lit(0).alias("partition"), F.lit(0).cast("bigint").alias("offset"))
    tombstones.write.format("kconnect").options(**sink).mode("append").save()

    want = query(c, f"SELECT id, name, qty, price, (extract(epoch FROM updated) * 1000000)::bigint "
                    f"FROM {src_table} ORDER BY id")
    epoch = "(extract(epoch FROM updated) * 1000000)::bigint" if target == "postgresql" else \
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', updated) AS SIGNED)"
    got = query(tconn, f"SELECT id, name, qty, price, {epoch} FROM mirror ORDER BY id")
    assert len(want) == 200 + 1 - len(gone)
    assert got == want
    c.close()
    tconn.close()


def test_exactly_once_sink_survives_a_writer_killed_between_write_and_commit(spark, pg_db, tmp_path):  # noqa: F811 - pytest fixture
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE crash_src (id serial PRIMARY KEY, v text)")
    c.execute("INSERT INTO crash_src (v) SELECT 'v' || g FROM generate_series(1, 300) g")
    source = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "incrementing",
              "incrementing.column.name": "id", "table.whitelist": "crash_src", "topic.prefix": "c-",
              "max.records.per.trigger": "100"}
    sink = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "auto.create": "true",
            "table.name.format": "crash_dst"}  # insert mode, no key: a doubled batch would show
    ckpt = str(tmp_path / "ckpt")

    def run(fault: str) -> Exception | None:
        return run_until_caught_up(spark, source, sink, ckpt, fault)

    def dst() -> tuple[int, int]:
        if not query(c, "SELECT 1 FROM pg_tables WHERE tablename = 'crash_dst'"):
            return (0, 0)
        return query(c, "SELECT count(*), count(DISTINCT id) FROM crash_dst")[0]

    # Crash after the executors staged batch 0, before the commit transaction: nothing visible.
    assert "after-stage" in str(run("after-stage"))
    assert dst() == (0, 0)
    # Crash after the commit transaction of the replayed batch 0, before Spark recorded it.
    assert "after-apply" in str(run("after-apply"))
    assert dst() == (100, 100)
    # Restart: batch 0 is replayed and skipped (already in the offsets table), then batches 1 and 2.
    assert run("none") is None
    assert dst() == (300, 300)
    assert query(c, "SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_\\_kc\\_s%'")[0][0] == 0
    c.close()


def test_task_scope_sink_is_exactly_once_across_crashes(spark, pg_db, tmp_path):  # noqa: F811 - fixture
    """commit.scope=task: the tasks' rows are committed before the driver's commit, so a crash there leaves
    them visible; the replay skips them and nothing is doubled or lost."""
    c = pg_conn(pg_db)
    c.execute("CREATE TABLE task_src (id serial PRIMARY KEY, v text)")
    c.execute("INSERT INTO task_src (v) SELECT 'v' || g FROM generate_series(1, 300) g")
    source = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "incrementing",
              "incrementing.column.name": "id", "table.whitelist": "task_src", "topic.prefix": "c-",
              "max.records.per.trigger": "100", "tasks.max": "2"}
    sink = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "auto.create": "true",
            "table.name.format": "task_dst", "commit.scope": "task"}
    ckpt = str(tmp_path / "ckpt")

    def run(fault: str) -> Exception | None:
        return run_until_caught_up(spark, source, sink, ckpt, fault)

    def dst() -> tuple[int, int]:
        return query(c, "SELECT count(*), count(DISTINCT id) FROM task_dst")[0]

    assert "after-stage" in str(run("after-stage"))
    assert dst() == (100, 100)  # the tasks committed batch 0; the driver did not
    assert "after-apply" in str(run("after-apply"))
    assert dst() == (100, 100)  # batch 0 replayed: every task skipped
    assert run("none") is None
    assert dst() == (300, 300)
    c.close()


@pytest.mark.parametrize("mode", ["incrementing", "bulk"])
def test_split_initial_load_restarts_from_checkpoint_exactly_once(spark, pg_db, tmp_path, mode):  # noqa: F811
    """tasks.max=2 splits one table's read into two key ranges (two Spark partitions); a crash after the first
    batch's commit and a restart from the checkpoint leave every row in the target once."""
    c = pg_conn(pg_db)
    c.execute(f"CREATE TABLE split_src_{mode} (id bigint PRIMARY KEY, v text NOT NULL)")
    c.execute(f"INSERT INTO split_src_{mode} SELECT g, 'v' || g FROM generate_series(1, 12000) g")
    source = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": mode,
              "table.whitelist": f"split_src_{mode}", "topic.prefix": "s-", "tasks.max": "2"}
    if mode == "incrementing":
        source.update({"incrementing.column.name": "id", "max.records.per.trigger": "4000"})
    else:
        source["poll.interval.ms"] = str(10 ** 9)  # one bulk round: a new round would re-read the table
    sink = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "auto.create": "true",
            "table.name.format": f"split_dst_{mode}"}
    ckpt = str(tmp_path / "ckpt")

    def run(fault: str) -> Exception | None:
        return run_until_caught_up(spark, source, sink, ckpt, fault)

    assert spark.read.format("kconnect").options(**source).load().rdd.getNumPartitions() == 2
    assert "after-apply" in str(run("after-apply"))
    first = query(c, f"SELECT count(*) FROM split_dst_{mode}")[0][0]
    assert first == (4000 if mode == "incrementing" else 12000)
    assert run("none") is None
    assert query(c, f"SELECT count(*), count(DISTINCT id), sum(id) FROM split_dst_{mode}") == \
        [(12000, 12000, 12000 * 12001 // 2)]
    c.close()
