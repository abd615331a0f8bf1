"""The example configs of conf/ run as they are; the only change a test makes is where a server or a table lives
(host and port of a throwaway PostgreSQL, a table path under the test's temp dir).

mariadb-cdc.properties is also the MariaDB block of docs/tasks/debezium.md. Covered elsewhere: file-source/file-sink
and demo/datagen-orders (tests/test_readme.py, the docs' commands),
postgres-cdc.properties (the docs' CDC example in tests/test_readme.py), jdbc-source/jdbc-sink
(tests/connectors/test_jdbc_spark.py), worker.properties (the docs' worker block in tests/test_readme.py, on its
own port 8083), connect-distributed.properties with worker processes (tests/distributed/test_group_kafka.py).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest
from confluent_kafka.admin import ConfigResource

import spark_connect_bridge as scb
from spark_connect_bridge.bus.admin import admin_client
from spark_connect_bridge.runtime.group.kafka import KafkaGroupStore
from spark_connect_bridge.runtime.group.service import open_store
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.support import servers
from tests.support.postgres import PostgresCluster

CONF = Path(__file__).resolve().parent.parent / "conf"


def test_datagen_properties_streams_orders_at_its_rate(spark, tmp_path):
    config = scb.load_config_file(str(CONF / "datagen.properties"))
    assert (config["max.interval"], config["tasks.max"]) == ("100", "1")  # ten records a second, one task
    query = (scb.read_stream(spark, config).writeStream.format("memory").queryName("datagen_conf")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="1 second").start())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and spark.table("datagen_conf").count() < 10:
            assert query.exception() is None, query.exception()
            time.sleep(0.5)
    finally:
        query.stop()
    rows = spark.table("datagen_conf").orderBy("value.orderid").collect()
    spark.catalog.dropTempView("datagen_conf")
    assert len(rows) >= 10
    assert [r.value.orderid for r in rows] == list(range(len(rows)))
    assert {r.topic for r in rows} == {"orders"}
    assert all(r.key == r.value.orderid and r.value.itemid.startswith("Item_") for r in rows)


def test_delta_sink_then_delta_source_properties(spark, tmp_path):
    table = str(tmp_path / "delta" / "orders")
    sink = {**scb.load_config_file(str(CONF / "delta-sink.properties")), "delta.table.path": table}
    source = {**scb.load_config_file(str(CONF / "delta-source.properties")), "delta.table.path": table}
    orders = scb.read_batch(spark, {"connector.class": "DatagenConnector", "kafka.topic": "orders",
                                    "quickstart": "orders", "iterations": "20", "max.interval": "0"})
    scb.write_batch(orders, sink)
    expected = sorted(tuple(r) for r in orders.select("value.*").collect())
    assert len(expected) == 20

    copied = scb.read_batch(spark, source).collect()
    assert sorted(tuple(r.value) for r in copied) == expected
    assert {r.topic for r in copied} == {"orders-copy"}


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def pgpassword_for_workers(spark, monkeypatch):
    """PGPASSWORD in the environment of Spark's Python workers, as `export PGPASSWORD=...` before starting Spark
    gives it (the workers resolve ${env:...}; this session's JVM started before the test, so the variable reaches
    them through a registration that carries it)."""
    monkeypatch.setenv("PGPASSWORD", "unused-with-trust-auth")
    spark.sparkContext.environment["PGPASSWORD"] = "unused-with-trust-auth"
    scb.register(spark)
    yield
    del spark.sparkContext.environment["PGPASSWORD"]
    scb.register(spark)


def test_postgres_cdc_json_is_a_rest_body_that_streams_the_snapshot(spark, pg, tmp_path, pgpassword_for_workers):
    # The worker's POST /connectors body; the password comes from the environment (${env:PGPASSWORD}).
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com'), (2, 'Grace', NULL)")
        conn.execute("CREATE TABLE other (id int PRIMARY KEY)")  # not in table.include.list
        conn.execute("INSERT INTO other VALUES (1)")
    config = {**scb.load_config_file(str(CONF / "postgres-cdc.json")), "database.port": str(pg.port)}
    query = (scb.read_stream(spark, config).writeStream.format("memory").queryName("inventory_cdc")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.table("inventory_cdc").collect()
    spark.catalog.dropTempView("inventory_cdc")
    got = sorted((r.topic, r.key.id, r.value.op, r.value.before, tuple(r.value.after)) for r in rows)
    assert got == [("inventory.public.customers", 1, "r", None, (1, "Ada", "ada@example.com")),
                   ("inventory.public.customers", 2, "r", None, (2, "Grace", None))]



def _mariadb_run(spark, config: dict, checkpoint: str) -> list:
    rows: list = []
    query = (scb.read_stream(spark, config).writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return [(r.topic, r.key.id, None, None, None) if r.value is None else
            (r.topic, r.key.id, r.value.op, r.value.before and tuple(r.value.before),
             r.value.after and tuple(r.value.after)) for r in rows]


def test_mariadb_cdc_properties_from_debezium_s_tutorial_mirror_the_inventory(spark, tmp_path):
    """Debezium's MariaDB tutorial config, with the tutorial's user (debezium/dbz and its grants) and database;
    the test changes the host and port only. The snapshot, then a restart from the checkpoint that takes exactly
    the changes made since."""
    from tests.connectors.mysql_support import execute, server

    host, port = server()
    for who in ("'debezium'@'%'", "'debezium'@'localhost'", "'debezium'@'127.0.0.1'"):
        execute(f"CREATE USER IF NOT EXISTS {who} IDENTIFIED BY 'dbz';\n"
                f"GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {who}")
    execute("DROP DATABASE IF EXISTS inventory;\nCREATE DATABASE inventory;\n"
            "CREATE TABLE inventory.customers (id int PRIMARY KEY AUTO_INCREMENT, first_name varchar(255) NOT NULL, "
            "last_name varchar(255) NOT NULL, email varchar(255) NOT NULL UNIQUE) AUTO_INCREMENT=1001;\n"
            "INSERT INTO inventory.customers VALUES (default, 'Sally', 'Thomas', 'sally.thomas@acme.com'), "
            "(default, 'George', 'Bailey', 'gbailey@foobar.com')")
    readme = re.search(r"```properties\n([^`]*?connector.class=io.debezium.connector.mariadb[^`]*?)```",
                       (CONF.parent / "docs" / "tasks" / "debezium.md").read_text(), re.S)
    assert readme is not None and set(readme[1].splitlines()) <= set((CONF / "mariadb-cdc.properties").read_text()
                                                                     .splitlines())  # the docs show this file
    config = {**scb.load_config_file(str(CONF / "mariadb-cdc.properties")), "database.hostname": host,
              "database.port": str(port)}
    ckpt = str(tmp_path / "ckpt")
    try:
        topic = "dbserver1.inventory.customers"
        sally, george = (1001, "Sally", "Thomas", "sally.thomas@acme.com"), (1002, "George", "Bailey",
                                                                            "gbailey@foobar.com")
        snapshot = _mariadb_run(spark, config, ckpt)
        schema = [r for r in snapshot if r[0] == "dbserver1"]  # as Debezium's: SET, DROP TABLE, DROP and CREATE
        assert len(schema) == 6 and snapshot[:6] == schema     # DATABASE, USE, CREATE TABLE, before the rows
        assert sorted(snapshot[6:]) == [(topic, 1001, "r", None, sally), (topic, 1002, "r", None, george)]
        execute("INSERT INTO inventory.customers VALUES (default, 'Anne', 'Kretchmar', 'annek@noanswer.org');\n"
                "UPDATE inventory.customers SET first_name = 'Anne Marie' WHERE id = 1003;\n"
                "DELETE FROM inventory.customers WHERE id = 1002")
        anne = (1003, "Anne", "Kretchmar", "annek@noanswer.org")
        assert _mariadb_run(spark, config, ckpt) == [
            (topic, 1003, "c", None, anne), (topic, 1003, "u", anne, (1003, "Anne Marie", *anne[2:])),
            (topic, 1002, "d", george, None), (topic, 1002, None, None, None)]  # the delete's tombstone
    finally:
        execute("DROP DATABASE IF EXISTS inventory")


def test_kafka_s_connect_distributed_properties_open_a_group_on_kafka(tmp_path):
    """Kafka's file as it is, but for the broker's address: the store is Kafka's topics, created compacted."""
    props = scb.load_config_file(str(CONF / "connect-distributed.properties"))
    config = parse_worker_config({**props, "bootstrap.servers": servers.kafka()}, base_dir=str(tmp_path))
    store = open_store(config)
    try:
        assert isinstance(store, KafkaGroupStore)
        name = "conf-example-" + str(time.monotonic_ns())
        assert store.put_connector(name, {"name": name, "config": {"connector.class": "FileStreamSink"}}, create=True)
        assert store.get_connector(name).doc["config"] == {"connector.class": "FileStreamSink"}
        store.delete_connector(name)
    finally:
        store.close()
    admin = admin_client({"bootstrap.servers": servers.kafka()})
    topics = admin.list_topics(timeout=30).topics
    assert len(topics["connect-configs"].partitions) == 1
    for topic in ("connect-configs", "connect-status"):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        described = admin.describe_configs([resource])[resource].result()
        assert described["cleanup.policy"].value == "compact"


def test_postgres_cdc_into_delta_merge_mirrors_each_table(spark, pg, tmp_path):
    """conf/postgres-cdc.properties into conf/postgres-to-delta-merge.properties, as the latter's comment runs them:
    the snapshot, then an insert, an update and a delete, each table in its own Delta table with its own columns."""
    db = pg.new_database("shop")
    pg.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);"
               "CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total numeric(10,2));"
               "INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace');"
               "INSERT INTO orders VALUES (10, 1, 9.50), (11, 2, 20.00)", database=db)
    source = {**scb.load_config_file(str(CONF / "postgres-cdc.properties")), "database.port": str(pg.port),
              "database.dbname": db}
    sink = scb.load_config_file(str(CONF / "postgres-to-delta-merge.properties"))
    sink["delta.table.path"] = str(tmp_path / sink["delta.table.path"])  # work/delta/${topic} under the test's dir

    def run() -> None:
        query = scb.write_stream(scb.read_stream(spark, source), sink, checkpoint=str(tmp_path / "ckpt"),
                                 trigger={"availableNow": True})
        query.awaitTermination()
        assert query.exception() is None, query.exception()

    def table(name: str) -> list[tuple]:
        return sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "work/delta" / name))
                      .collect())

    try:
        run()
        assert table("shop.public.customers") == [(1, "Ada"), (2, "Grace")]
        assert [(i, c, float(t)) for i, c, t in table("shop.public.orders")] == [(10, 1, 9.5), (11, 2, 20.0)]
        pg.execute("INSERT INTO customers VALUES (3, 'Edsger'); UPDATE customers SET name = 'Ada L.' WHERE id = 1;"
                   "DELETE FROM orders WHERE id = 11", database=db)
        run()
        assert table("shop.public.customers") == [(1, "Ada L."), (2, "Grace"), (3, "Edsger")]
        assert [(i, c, float(t)) for i, c, t in table("shop.public.orders")] == [(10, 1, 9.5)]
        # One table path for both tables would give each the other's columns: refused, naming the key and the way.
        one_table = {**sink, "delta.table.path": str(tmp_path / "work/delta/shop")}
        with pytest.raises(Exception, match=r"delta\.table\.path.*2 topics whose records have different columns "
                                            r"\(shop\.public\.customers, shop\.public\.orders;.*\$\{topic\}"):
            query = scb.write_stream(scb.read_stream(spark, source), one_table, checkpoint=str(tmp_path / "one"),
                                     trigger={"availableNow": True})
            query.awaitTermination()
        assert not (tmp_path / "work/delta/shop").exists()
    finally:
        pg.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'shop_cdc'",
                   database=db)


def test_datagen_orders_into_jdbc_with_flatten(spark, pg):
    """conf/datagen-to-jdbc.properties: datagen's orders, their nested address flattened into columns; without
    the Flatten transform the sink names the field and the transform."""
    db = pg.new_database("orders")
    orders = scb.read_batch(spark, {"connector.class": "DatagenConnector", "kafka.topic": "orders",
                                    "quickstart": "orders", "iterations": "20", "max.interval": "0"})
    sink = {**scb.load_config_file(str(CONF / "datagen-to-jdbc.properties")),
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{db}?user=postgres"}
    unflattened = {k: v for k, v in sink.items() if not k.startswith("transforms")}
    with pytest.raises(Exception, match=r"value field 'address' is struct<.*Flatten transform"):
        scb.write_batch(orders, unflattened)
    scb.write_batch(orders, sink)
    expected = sorted((r.orderid, r.itemid, r.address.city, r.address.state, r.address.zipcode)
                      for r in orders.select("value.*").collect())
    assert len(expected) == 20
    assert sorted(pg.execute("SELECT orderid, itemid, address_city, address_state, address_zipcode FROM orders",
                             database=db)) == expected
