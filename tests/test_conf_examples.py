"""The example configs of conf/ run as they are; the only change a test makes is where a server or a table lives
(host and port of a throwaway PostgreSQL, a table path under the test's temp dir).

mariadb-cdc.properties is also the MariaDB block of docs/tasks/debezium.md. Covered elsewhere: file-source/file-sink
and demo/datagen-orders (tests/test_readme.py, the docs' commands),
postgres-cdc.properties (the docs' CDC example in tests/test_readme.py), jdbc-source/jdbc-sink
(tests/connectors/test_jdbc_spark.py), worker.properties (the docs' worker block in tests/test_readme.py, on its
own port 8083), connect-distributed.properties with worker processes (tests/distributed/test_group_kafka.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
        pg.drop_slots("slot_name = 'shop_cdc'", database=db)


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


def test_kconnect_run_prints_a_runtime_config_error_once_first_with_the_trace_behind_debug(pg, tmp_path):
    """`kconnect run` of datagen's orders into the JDBC sink without its Flatten transform: the sink's message
    (the field, its type, the transform to add) once, first; Spark's Java/Python stack traces only with --debug."""
    db = pg.new_database("orders_cli")
    sink = {**scb.load_config_file(str(CONF / "datagen-to-jdbc.properties")),
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{db}?user=postgres"}
    (tmp_path / "sink.properties").write_text("".join(f"{k}={v}\n" for k, v in sink.items()
                                                      if not k.startswith("transforms")))
    (tmp_path / "orders.properties").write_text("name=orders\nconnector.class=DatagenConnector\nkafka.topic=orders\n"
                                                "quickstart=orders\niterations=5\nmax.interval=0\n")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    def kconnect(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(Path(sys.executable).with_name("kconnect")), *flags, "run", "orders.properties",
                               "sink.properties", "--once", "--checkpoint-dir", f"ckpt{len(flags)}"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300, check=False)

    run = kconnect()
    assert run.returncode == 1, run.stderr[-3000:]
    # What the JVM says while starting (its own WARNING lines) comes before; from our line on, nothing but the hint.
    lines = run.stderr.strip().splitlines()
    ours = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(ours) == 1, run.stderr[-3000:]
    first, *rest = lines[ours[0]:]
    assert re.match(r"error: query .* failed: .*value field 'address' is struct<.*Flatten transform", first), first
    assert rest == ["(Spark's Java/Python stack trace: run again with kconnect --debug ...)"], run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "\tat " not in run.stderr and run.stderr.count("'address'") == 1
    debug = kconnect("--debug")
    assert debug.returncode == 1
    lines = debug.stderr.strip().splitlines()
    assert next(line for line in lines if line.startswith("error:")) == first
    after = debug.stderr.split(first, 1)[1]
    assert "Traceback (most recent call last)" in after and "at org.apache.spark." in after  # Python and Java


def test_worker_on_kafka_runs_datagen_into_kafka_and_a_sink_out_of_it(tmp_path):
    """`kconnect standalone conf/worker-kafka.properties conf/datagen.properties conf/kafka-orders-file-sink.properties`
    as a process with its own Spark session, on the run's broker: the orders go through Kafka as schemaless JSON and
    the sink writes them. Changed: the broker's address, the port, the state and output paths, and the topic's name
    (the run's broker is shared)."""
    from tests.support.postgres import free_port
    from tests.support.processes import interrupt

    topic = f"orders-{time.monotonic_ns()}"
    port, out = free_port(), tmp_path / "orders.jsonl"
    worker = {**scb.load_config_file(str(CONF / "worker-kafka.properties")), "bootstrap.servers": servers.kafka(),
              "listeners": f"http://127.0.0.1:{port}", "offset.storage.dir": str(tmp_path / "state")}
    source = {**scb.load_config_file(str(CONF / "datagen.properties")), "kafka.topic": topic}
    sink = {**scb.load_config_file(str(CONF / "kafka-orders-file-sink.properties")), "topics": topic,
            "file": str(out)}
    paths = []
    for name, config in (("worker", worker), ("source", source), ("sink", sink)):
        paths.append(tmp_path / f"{name}.properties")
        paths[-1].write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log = tmp_path / "worker.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("kconnect")), "standalone", *map(str, paths)],
                                cwd=tmp_path, env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            got = until_lines(out, 10, proc, log)
        finally:
            interrupt(proc)
    # FileStreamSink writes each value as Kafka's does: the schemaless JSON value is a Map, written as Java prints
    # one ({orderid=0, itemid=Item_457, address={zipcode=71585, city=City_98, state=State_91}, ...}).
    orders = [dict(re.findall(r"(orderid|itemid|city)=([^,}]+)", line)) for line in got]
    assert [int(o["orderid"]) for o in orders] == list(range(len(orders)))
    assert all(o["itemid"].startswith("Item_") and o["city"].startswith("City_") for o in orders), got
    assert topic in servers_topics()


def until_lines(path: Path, n: int, proc: subprocess.Popen, log: Path) -> list[str]:
    from tests.support.waiting import until

    return until(lambda: proc.poll() is None and path.exists() and len(lines := path.read_text().splitlines()) >= n
                 and lines, what=f"{n} orders in {path.name}", timeout=300, explain=lambda: log.read_text()[-3000:])


def servers_topics() -> set[str]:
    return set(admin_client({"bootstrap.servers": servers.kafka()}).list_topics(timeout=30).topics)
