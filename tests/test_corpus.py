"""The corpus (tests/corpus/, sources in tests/corpus/SOURCES.md): connector and worker configs written by others,
kept as written. Every one is validated as ``PUT /connector-plugins/{class}/config/validate`` and ``kconnect plugins
validate`` validate it (worker configs as ``kconnect standalone`` reads them), and one per connector class runs end
to end against the test servers, data checked row by row. The README's claim ("N of N public configs validate; M
run end to end") is computed here.

The only change a test makes to a corpus config is where a server, a file or a table lives: the keys of
``LOCATION_KEYS`` (as an operator's host mapping, ``${file:...}``/``${env:...}`` provider or mounted path would).
A config posted as the body of ``PUT /connectors/{name}/config`` (a bare map) takes its name from that path: the
file's name here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient

import spark_connect_bridge as scb
from spark_connect_bridge.errors import ConnectError
from spark_connect_bridge.runtime.validate import validate_connector_config
from spark_connect_bridge.runtime.worker_config import parse_worker_config
from tests.support.postgres import PostgresCluster, free_port
from tests.support.processes import interrupt
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT / "corpus"
README = ROOT.parent / "README.md"

#: The keys a test may change: where a server, file or table lives, and who logs in.
LOCATION_KEYS = frozenset({
    "database.hostname", "database.port", "database.user", "database.password", "database.dbname",
    "connection.url", "connection.user", "connection.password", "file", "bootstrap.servers", "listeners",
    "offset.storage.file.filename", "offset.storage.dir", "topics.dir",
    "key.converter.schema.registry.url", "value.converter.schema.registry.url"})

#: One corpus config per connector class, run end to end below (the test that runs it in brackets).
END_TO_END = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "apache-kafka/connect-file-source.properties",
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "apache-kafka/connect-file-sink.properties",
    "io.confluent.kafka.connect.datagen.DatagenConnector": "kafka-connect-datagen/connector_users.config",
    "io.debezium.connector.postgresql.PostgresConnector": "debezium-examples/tutorial__register-postgres.json",
    "io.confluent.connect.jdbc.JdbcSourceConnector": "kafka-connect-jdbc/source-quickstart-sqlite.properties",
    "io.confluent.connect.jdbc.JdbcSinkConnector": "kafka-connect-jdbc/sink-quickstart-sqlite.properties",
}
#: Corpus configs whose transforms are the point, run end to end below (transform class -> config).
END_TO_END_TRANSFORMS = {
    "io.debezium.transforms.outbox.EventRouter": "debezium-examples/outbox__register-postgres.json",
    "io.debezium.transforms.ByLogicalTableRouter": "debezium-examples/cqrs__postgres-source.json",
}
#: Worker configs run end to end (a ``kconnect standalone`` or ``kconnect distributed`` process).
END_TO_END_WORKERS = ("apache-kafka/connect-standalone.properties", "strimzi/kafka-connect.yaml")
#: Strimzi's KafkaConnector resources, run on the Strimzi KafkaConnect worker as Strimzi's operator runs them.
END_TO_END_STRIMZI = ("strimzi/source-connector.yaml",)
#: Debezium's MySQL/MariaDB connector configs, each run end to end against the run's MariaDB (its database
#: ``inventory``, user ``debezium``/``dbz`` as the configs have them; only host and port, and a converter's registry
#: URL, change), with what each should deliver: its topics (``{}`` the table), captured tables, and how the rows
#: arrive (``unwrap``: ExtractNewRecordState; ``decimal``: decimal.handling.mode; ``converter``: none (typed
#: records), ``json`` (schemaless JsonConverter) or ``avro`` (AvroConverter and its registry)).
_ALL = ("addresses", "categories", "customers", "orders")
END_TO_END_MYSQL: dict[str, dict[str, Any]] = {
    "debezium-examples/end-to-end-demo__register-hiking-connector-json.json": {"topic": "dbserver1_inventory_{}_json"},
    "debezium-examples/end-to-end-demo__register-hiking-connector.json": {"topic": "dbserver1_inventory_{}",
                                                                          "converter": "avro"},
    "debezium-examples/graphql__mysql-source.json": {"tables": ("customers", "orders"), "decimal": "string"},
    "debezium-examples/ksql__register-mysql.json": {"topic": "dbserver.inventory.{}", "unwrap": True,
                                                    "converter": "json"},
    "debezium-examples/kstreams-live-update__mysql-source.json": {"tables": ("categories", "orders"),
                                                                  "decimal": "string"},
    "debezium-examples/kstreams__mysql-source.json": {"tables": ("addresses", "customers"), "unwrap": True},
    "debezium-examples/mysql-replication__connector-config-master.json": {},
    "debezium-examples/mysql-replication__connector-config-replica.json": {},
    "debezium-examples/mysql-replication__register-mysql.json": {},
    "debezium-examples/tutorial__register-mariadb.json": {},
    "debezium-examples/tutorial__register-mysql-apicurio.json": {"converter": "avro"},
    "debezium-examples/tutorial__register-mysql-avro.json": {"converter": "avro"},
    "debezium-examples/tutorial__register-mysql.json": {},
    "debezium-examples/unwrap-smt__source.json": {"topic": "{}"},
}


def corpus_files() -> list[str]:
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*") if p.is_file())


def load(name: str) -> dict[str, str]:
    """A corpus file as the flat string map Kafka Connect (or Strimzi's operator) makes of it."""
    path = CORPUS / name
    if path.suffix == ".yaml":
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = doc["spec"]
        config = {k: str(v) for k, v in spec.get("config", {}).items()}
        if doc["kind"] == "KafkaConnector":
            return {**config, "name": doc["metadata"]["name"], "connector.class": spec["class"],
                    "tasks.max": str(spec.get("tasksMax", 1))}
        # A KafkaConnect resource: the operator's defaults for what spec.config leaves out (Strimzi's
        # KafkaConnectSpec reference: group.id, the three storage topics, JsonConverter for keys and values).
        defaults = {"group.id": "connect-cluster", "offset.storage.topic": "connect-cluster-offsets",
                    "config.storage.topic": "connect-cluster-configs", "status.storage.topic": "connect-cluster-status",
                    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
        return {**defaults, **config, "bootstrap.servers": spec["bootstrapServers"]}
    config = dict(scb.load_config_file(str(path)))
    if "connector.class" in config and "name" not in config:  # the body of PUT /connectors/{name}/config
        config["name"] = path.stem.split("__")[-1]
    return config


def relocated(config: Mapping[str, str], **where: str) -> dict[str, str]:
    """``config`` with location keys only changed (or added)."""
    assert set(where) <= LOCATION_KEYS, set(where) - LOCATION_KEYS
    return {**config, **where}


def validation_errors(name: str) -> list[str]:
    """Every error validation reports for a corpus file, as ``key: message``."""
    config = load(name)
    if "connector.class" not in config:
        try:
            parse_worker_config(config)
        except ConnectError as e:
            return [f"{p.key}: {p.message}" for p in getattr(e, "problems", ())] or [str(e)]
        return []
    try:
        infos = validate_connector_config(config["connector.class"], config)
    except ConnectError as e:  # the endpoint's 400: an unknown connector class
        return [f"connector.class: {e}"]
    return [f"{c['value']['name']}: {m}" for c in infos["configs"] for m in c["value"]["errors"]]


def test_the_corpus_holds_at_least_50_configs_each_with_its_source():
    files = corpus_files()
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| ([\w.-]+/[\w.-]+) \| [\w.-]+/[\w.-]+ \| `", sources, re.M)
    assert sorted(listed) == [f for f in files if f != "SOURCES.md"]
    assert len(listed) >= 50
    for name in listed:
        if not name.endswith((".json", ".config")):  # JSON has no comments: its source is SOURCES.md alone
            assert (CORPUS / name).read_text(encoding="utf-8").startswith("# source: "), name


#: Public configs that do not validate yet, with the refusal they get (issue #34: plugins real configs name beside the
#: connector, not yet run here). Each is pinned: it must fail with that reason until the plugin exists, and the test
#: fails as soon as it validates, to move it out of this list.
NOT_YET: dict[str, str] = {}


@pytest.mark.parametrize("name", [f for f in corpus_files() if f != "SOURCES.md"])
def test_corpus_config_validates(name):
    errors = validation_errors(name)
    if name in NOT_YET:
        assert errors, f"{name} validates now: remove it from NOT_YET"
        assert any(NOT_YET[name] in e for e in errors), errors
    else:
        assert errors == []


def test_readme_states_the_corpus_numbers():
    names = [f for f in corpus_files() if f != "SOURCES.md"]
    valid = sum(not validation_errors(n) for n in names)
    runs = len(set(END_TO_END.values()) | set(END_TO_END_TRANSFORMS.values()) | set(END_TO_END_WORKERS)
               | set(END_TO_END_MYSQL) | set(END_TO_END_STRIMZI))
    claim = f"{valid} of {len(names)} public configs validate; {runs} run end to end"
    assert claim in README.read_text(encoding="utf-8"), claim


# -- end to end --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _memory(spark, df, name: str, checkpoint: str, *, until_rows: int | None = None) -> list[Any]:
    """The rows of a stream: all of them (availableNow), or the first ``until_rows`` of an endless one."""
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
    if until_rows is None:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        query = writer.trigger(processingTime="1 second").start()
        try:
            until(lambda: query.exception() is None and spark.table(name).count() >= until_rows,
                  what=f"{until_rows} rows", timeout=180)
        finally:
            query.stop()
    assert query.exception() is None, query.exception()
    rows = spark.table(name).collect()
    spark.catalog.dropTempView(name)
    return rows


def test_datagen_users_config_generates_users(spark, tmp_path):
    config = load(END_TO_END["io.confluent.kafka.connect.datagen.DatagenConnector"])
    rows = _memory(spark, scb.read_stream(spark, config), "corpus_users", str(tmp_path / "ckpt"), until_rows=3)
    assert len(rows) >= 3
    for r in rows:  # StringConverter key, schemaless JSON value, as the config says
        assert r.topic == "users"
        value = json.loads(r.value)
        assert set(value) == {"registertime", "userid", "regionid", "gender"}
        assert r.key == value["userid"].encode() or r.key == value["userid"]
        assert re.fullmatch(r"User_[1-9]", value["userid"]) and re.fullmatch(r"Region_[1-9]", value["regionid"])
        assert value["gender"] in ("MALE", "FEMALE", "OTHER")


def test_debezium_postgres_tutorial_config_snapshots_the_inventory_schema(spark, pg, tmp_path):
    db = pg.new_database("corpus_inventory")
    pg.execute("CREATE SCHEMA inventory; CREATE TABLE inventory.customers (id int PRIMARY KEY, first_name text, "
               "email text); INSERT INTO inventory.customers VALUES (1001, 'Sally', 'sally.thomas@acme.com'), "
               "(1002, 'George', 'gbailey@foobar.com'); CREATE TABLE public.other (id int PRIMARY KEY); "
               "INSERT INTO public.other VALUES (1)", database=db)
    config = relocated(load(END_TO_END["io.debezium.connector.postgresql.PostgresConnector"]),
                       **{"database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.dbname": db})
    rows = _memory(spark, scb.read_stream(spark, config), "corpus_pg", str(tmp_path / "ckpt"))
    got = sorted((r.topic, r.value.op, tuple(r.value.after)) for r in rows)
    assert got == [("dbserver1.inventory.customers", "r", (1001, "Sally", "sally.thomas@acme.com")),
                   ("dbserver1.inventory.customers", "r", (1002, "George", "gbailey@foobar.com"))]


def _free_default_slot(pg) -> None:
    """The corpus configs keep Debezium's default slot.name (``debezium``), which is the cluster's: drop the
    one an earlier test's connector left in its database (its query has ended)."""
    for (database,) in pg.execute("select database from pg_replication_slots where slot_name = 'debezium'"):
        pg.drop_slots("slot_name = 'debezium'", database=database)


def test_debezium_outbox_config_routes_the_outbox_rows(spark, pg, tmp_path):
    _free_default_slot(pg)
    db = pg.new_database("corpus_outbox")
    pg.execute("CREATE SCHEMA inventory; CREATE TABLE inventory.outboxevent (id uuid PRIMARY KEY, aggregatetype "
               "varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, timestamp "
               "timestamp NOT NULL, payload varchar(8000)); INSERT INTO inventory.outboxevent VALUES "
               "('4d47e190-0402-4048-bc2c-89dd54343cdc', 'Order', '1', 'OrderCreated', '2019-05-03 13:38:14', "
               "'{\"id\": 1}'), ('5e57f2a0-0402-4048-bc2c-89dd54343cdc', 'Customer', '7', 'CustomerCreated', "
               "'2019-05-03 13:38:15', null)", database=db)
    config = relocated(load(END_TO_END_TRANSFORMS["io.debezium.transforms.outbox.EventRouter"]),
                       **{"database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.dbname": db,
                          "database.user": "postgres"})
    rows = _memory(spark, scb.read_stream(spark, config), "corpus_outbox", str(tmp_path / "ckpt"))
    got = sorted((r.topic, r.key, r.value, [(h.key, bytes(h.value)) for h in r.headers]) for r in rows)
    assert got == [
        ("Customer.events", "7", None, [("id", b"5e57f2a0-0402-4048-bc2c-89dd54343cdc"),
                                        ("eventType", b"CustomerCreated")]),
        ("Order.events", "1", '{"id": 1}', [("id", b"4d47e190-0402-4048-bc2c-89dd54343cdc"),
                                             ("eventType", b"OrderCreated")])]


def test_debezium_cqrs_config_routes_tables_to_logical_topics(spark, pg, tmp_path):
    _free_default_slot(pg)
    db = pg.new_database("corpus_cqrs")
    pg.execute("CREATE TABLE pollentity (id bigint PRIMARY KEY, question text); CREATE TABLE voteentity (id bigint "
               "PRIMARY KEY, option_id bigint); INSERT INTO pollentity VALUES (1, 'why?'); INSERT INTO voteentity "
               "VALUES (1, 10)", database=db)
    config = relocated(load(END_TO_END_TRANSFORMS["io.debezium.transforms.ByLogicalTableRouter"]),
                       **{"database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.dbname": db})
    rows = _memory(spark, scb.read_stream(spark, config), "corpus_cqrs", str(tmp_path / "ckpt"))
    got = sorted((r.topic, r.key.asDict(), r.value.op) for r in rows)
    assert got == [("pollentity", {"id": 1, "__dbz__physicalTableIdentifier": "polls.public.pollentity"}, "r"),
                   ("voteentity", {"id": 1, "__dbz__physicalTableIdentifier": "polls.public.voteentity"}, "r")]


def test_jdbc_quickstart_source_and_sink_configs_copy_a_table(spark, pg, tmp_path):
    db = pg.new_database("corpus_jdbc")
    url = f"jdbc:postgresql://127.0.0.1:{pg.port}/{db}"
    pg.execute("CREATE TABLE accounts (id serial PRIMARY KEY, name text NOT NULL);"
               "INSERT INTO accounts (name) VALUES ('alice'), ('bob')", database=db)
    source = relocated(load(END_TO_END["io.confluent.connect.jdbc.JdbcSourceConnector"]),
                       **{"connection.url": url, "connection.user": "postgres"})
    rows = _memory(spark, scb.read_stream(spark, source), "corpus_jdbc_src", str(tmp_path / "src"))
    assert sorted((r.topic, r.value.id, r.value.name) for r in rows) == [
        ("test-sqlite-jdbc-accounts", 1, "alice"), ("test-sqlite-jdbc-accounts", 2, "bob")]

    # The sink quickstart reads topic "orders" and creates its table (auto.create=true).
    orders = spark.createDataFrame([("orders", 0, i, (i, f"item-{i}", 1.5 * i)) for i in (1, 2, 3)],
                                   "topic string, partition int, offset long, "
                                   "value struct<id:int,product:string,price:double>")
    sink = relocated(load(END_TO_END["io.confluent.connect.jdbc.JdbcSinkConnector"]),
                     **{"connection.url": url, "connection.user": "postgres"})
    scb.write_batch(orders, sink)
    assert sorted(pg.execute("SELECT id, product, price FROM orders", database=db)) == [
        (1, "item-1", 1.5), (2, "item-2", 3.0), (3, "item-3", 4.5)]


def test_kafka_s_own_standalone_worker_and_file_configs_run_as_kconnect_standalone(tmp_path):
    """``kconnect standalone connect-standalone.properties connect-file-source.properties connect-file-sink.properties``
    as Kafka's quickstart runs it: a process with its own Spark session, Kafka as the bus (bootstrap.servers)."""
    from tests.support import servers

    port = free_port()
    admin = AdminClient({"bootstrap.servers": servers.kafka()})
    if "connect-test" in admin.list_topics(timeout=30).topics:  # the run's broker is shared: start from no topic
        admin.delete_topics(["connect-test"])["connect-test"].result(30)
    worker = tmp_path / "connect-standalone.properties"
    worker_config = relocated(load(END_TO_END_WORKERS[0]), **{
        "bootstrap.servers": servers.kafka(), "listeners": f"http://127.0.0.1:{port}",
        "offset.storage.file.filename": str(tmp_path / "connect.offsets"),
        "offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics")})
    worker.write_text("".join(f"{k}={v}\n" for k, v in worker_config.items()))
    test_txt, sink_txt = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    test_txt.write_text("foo\nbar\n")
    connectors = []
    for kind, where in (("source", str(test_txt)), ("sink", str(sink_txt))):
        path = tmp_path / f"connect-file-{kind}.properties"
        config = relocated(load(f"apache-kafka/connect-file-{kind}.properties"), file=where)
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        connectors.append(str(path))
    kconnect = Path(sys.executable).with_name("kconnect")
    stderr = tmp_path / "worker.stderr"
    with open(stderr, "w") as err:
        proc = subprocess.Popen([str(kconnect), "standalone", str(worker), *connectors, "--no-live"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            until(lambda: proc.poll() is None and sink_txt.exists()
                  and sink_txt.read_text().splitlines() == ["foo", "bar"],
                  what="foo and bar in test.sink.txt", timeout=300, explain=lambda: stderr.read_text()[-3000:])
        finally:
            interrupt(proc)
    assert "Failed to find data source" not in stderr.read_text()


# -- MySQL/MariaDB CDC ---------------------------------------------------------------------------------------------

#: The tables of Debezium's tutorial ``inventory`` database that the configs capture (kstreams-live-update's
#: ``categories`` beside them), small: the point is each config as written, the connector is tested elsewhere.
_INVENTORY = """DROP DATABASE IF EXISTS inventory;
CREATE DATABASE inventory;
CREATE TABLE inventory.customers (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, first_name varchar(255) NOT NULL,
  last_name varchar(255) NOT NULL, email varchar(255) NOT NULL UNIQUE KEY) AUTO_INCREMENT=1001;
INSERT INTO inventory.customers VALUES (default, 'Sally', 'Thomas', 'sally.thomas@acme.com'),
  (default, 'George', 'Bailey', 'gbailey@foobar.com');
CREATE TABLE inventory.addresses (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, customer_id int NOT NULL,
  street varchar(255) NOT NULL, city varchar(255) NOT NULL, type enum('SHIPPING', 'BILLING', 'LIVING') NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES inventory.customers(id)) AUTO_INCREMENT=10;
INSERT INTO inventory.addresses VALUES (default, 1001, '3183 Moore Avenue', 'Euless', 'SHIPPING');
CREATE TABLE inventory.categories (id bigint NOT NULL PRIMARY KEY, name varchar(255) NOT NULL,
  average_price decimal(8, 2));
INSERT INTO inventory.categories VALUES (1, 'Pets', 19.99), (2, 'Books', NULL);
CREATE TABLE inventory.orders (order_number int NOT NULL AUTO_INCREMENT PRIMARY KEY, order_date date NOT NULL,
  purchaser int NOT NULL, quantity int NOT NULL, price decimal(10, 2) NOT NULL) AUTO_INCREMENT=10001;
INSERT INTO inventory.orders VALUES (default, '2016-01-16', 1001, 1, 19.99), (default, '2016-01-17', 1002, 2, 5.00);
CREATE USER IF NOT EXISTS 'debezium'@'%' IDENTIFIED BY 'dbz';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'debezium'@'%'
"""
_KEY = {"addresses": "id", "categories": "id", "customers": "id", "orders": "order_number"}


@pytest.fixture(scope="module")
def inventory():
    """The run's MariaDB with Debezium's tutorial database and user; (host, port)."""
    from tests.connectors.mysql_support import execute, server

    execute(_INVENTORY)
    return server()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from spark_connect_bridge.converters.registry_server import serve

    server = serve(port=0, db_path=str(tmp_path_factory.mktemp("registry") / "registry.db"))
    yield server
    server.shutdown()


def _inventory_rows(table: str, decimal: str, json: bool = False) -> list[dict[str, Any]]:
    """A table's rows as Debezium delivers them (DATE as days since the epoch, DECIMAL as ``decimal`` says; in
    schemaless JSON a precise DECIMAL is Kafka's JsonConverter's base64 of its unscaled two's complement bytes)."""
    import base64
    import datetime as dt
    from decimal import Decimal

    from tests.connectors.mysql_support import execute

    columns = [c for (c,) in execute(f"SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                     f"'inventory' AND table_name = '{table}' ORDER BY ordinal_position")]

    def value(v: Any) -> Any:
        if isinstance(v, dt.date):
            return (v - dt.date(1970, 1, 1)).days
        if isinstance(v, Decimal) and decimal == "string":
            return str(v)
        if isinstance(v, Decimal) and json:
            unscaled = int(v.scaleb(-v.as_tuple().exponent))  # type: ignore[operator]
            return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()
        return v

    return [dict(zip(columns, map(value, row))) for row in execute(f"SELECT * FROM inventory.{table}")]


def _avro(registry, data: bytes | None) -> Any:
    """A Confluent wire-format Avro message decoded with its schema from the registry."""
    import io
    import urllib.request

    import fastavro

    if data is None:
        return None
    assert data[0] == 0, data[:5]
    with urllib.request.urlopen(f"{registry.url}/schemas/ids/{int.from_bytes(data[1:5], 'big')}") as r:
        schema = json.loads(json.loads(r.read())["schema"])
    return fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(schema))


def _plain(v: Any) -> Any:
    return v.asDict(recursive=True) if hasattr(v, "asDict") else v


def _own(union: dict[str, Any] | None, table: str, columns: Any) -> dict[str, Any] | None:
    """One table's columns out of the union struct typed records of several tables share (a column whose type
    differs between tables is ``<column>__inventory_<table>`` there); every other field of the union is null."""
    if union is None:
        return None
    held = {c: f"{c}__inventory_{table}" if f"{c}__inventory_{table}" in union else c for c in columns}
    assert {f: v for f, v in union.items() if f not in held.values() and v is not None} == {}, (table, union)
    return {c: union[f] for c, f in held.items()}


@pytest.mark.parametrize("name", list(END_TO_END_MYSQL))
def test_debezium_mysql_config_snapshots_the_inventory_database(spark, inventory, registry, name):
    expect = END_TO_END_MYSQL[name]
    host, port = inventory
    where = {"database.hostname": host, "database.port": str(port)}
    if expect.get("converter") == "avro":
        where |= {"key.converter.schema.registry.url": registry.url,
                  "value.converter.schema.registry.url": registry.url}
    config = relocated(load(name), **where)
    rows = scb.read_batch(spark, config).collect()

    prefix = config.get("topic.prefix") or config["database.server.name"]
    topic = expect.get("topic", f"{prefix}.inventory.{{}}")
    tables = expect.get("tables", _ALL)
    decode: Any = {"avro": lambda v: _avro(registry, v), "json": lambda v: json.loads(v) if v else None}.get(
        expect.get("converter", ""), _plain)
    events = [(r.topic, decode(r.key), decode(r.value)) for r in rows]
    changes = sorted(((t, k, v) for t, k, v in events if t != prefix), key=lambda e: (e[0], json.dumps(e[1])))
    want = sorted(((topic.format(table), table, {_KEY[table]: row[_KEY[table]]}, row) for table in tables
                   for row in _inventory_rows(table, expect.get("decimal", "precise"),
                                              json=expect.get("converter") == "json")),
                  key=lambda e: (e[0], json.dumps(e[2])))
    assert len(changes) == len(want), changes
    for (t, key, value), (want_topic, table, want_key, row) in zip(changes, want):
        if expect.get("unwrap"):  # ExtractNewRecordState: the row (a typed one in the union of the tables')
            after = value if decode is not _plain else _own(value, table, row)
        else:
            assert value["op"] == "r" and value["before"] is None, (t, value)
            after = value["after"] if decode is not _plain else _own(value["after"], table, row)
            source = value["source"]
            assert (source["name"], source["db"], source["table"], source["connector"]) == (
                prefix, "inventory", table, "mariadb" if "mariadb" in name else "mysql"), source
        assert (t, _own(key, table, want_key) if decode is _plain else key, after) == (want_topic, want_key, row)
    if expect.get("unwrap"):  # Debezium passes its schema change events on unchanged; dropped here (documented)
        assert not [e for e in events if e[0] == prefix]
        return
    # The schema change topic <topic.prefix>: the DDL of every captured table, keyed by its database.
    ddl = [(k["databaseName"], v["ddl"]) for t, k, v in events if t == prefix]
    for table in tables:
        assert [db for db, d in ddl if d.startswith(f"CREATE TABLE `{table}`")] == ["inventory"], (table, ddl)


# -- Strimzi -------------------------------------------------------------------------------------------------------

def test_strimzi_kafka_connect_and_kafka_connector_resources_run_as_strimzi_s_operator_runs_them(tmp_path):
    """Strimzi's KafkaConnect resource is a distributed worker (``spec.config``, ``spec.bootstrapServers``): here a
    ``kconnect distributed`` process with its own Spark session, on the run's broker; its KafkaConnector resource
    reaches it as Strimzi's operator sends it, ``PUT /connectors/<metadata.name>/config``. The FileStreamSource
    (two tasks asked, one file) writes the file's lines to ``my-topic`` with the worker's default converters
    (Kafka's JsonConverter with schemas)."""
    import requests
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from tests.support import servers

    bootstrap = servers.kafka()
    worker_config = load("strimzi/kafka-connect.yaml")
    connector = load("strimzi/source-connector.yaml")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ours = [worker_config[k] for k in ("offset.storage.topic", "config.storage.topic", "status.storage.topic")]
    stale = [t for t in [*ours, connector["topic"]] if t in admin.list_topics(timeout=30).topics]
    for future in admin.delete_topics(stale).values() if stale else ():  # the run's broker is shared
        future.result(30)
    port = free_port()
    worker = tmp_path / "kafka-connect.properties"
    worker.write_text("".join(f"{k}={v}\n" for k, v in relocated(worker_config, **{
        "bootstrap.servers": bootstrap, "listeners": f"http://127.0.0.1:{port}",
        "offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics")}).items()))
    # The file, where the worker lets REST-created connectors read (connector.allowed.paths: work/data).
    lines = ["Apache License", "Version 2.0, January 2004", "http://www.apache.org/licenses/"]
    (tmp_path / "work" / "data").mkdir(parents=True)
    (license_file := tmp_path / "work" / "data" / "LICENSE").write_text("\n".join(lines) + "\n")
    body = relocated(connector, file=str(license_file))
    kconnect = Path(sys.executable).with_name("kconnect")
    stderr = tmp_path / "worker.stderr"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"corpus-{port}", "enable.auto.commit": False})
    got: list[tuple[Any, Any]] = []

    def read() -> bool:
        if not consumer.assignment():  # once the worker created the topic: all of it, from the start
            found = admin.list_topics(connector["topic"], timeout=10).topics.get(connector["topic"])
            if found is None or found.error is not None or not found.partitions:
                return False
            consumer.assign([TopicPartition(connector["topic"], p, OFFSET_BEGINNING) for p in found.partitions])
        for m in consumer.consume(100, timeout=1):
            if m.error() is None:
                got.append((m.key(), json.loads(m.value())))
        return len(got) >= len(lines)

    with open(stderr, "w") as err:
        proc = subprocess.Popen([str(kconnect), "distributed", str(worker), "--no-live"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            until(lambda: proc.poll() is None and requests.get(f"http://127.0.0.1:{port}/", timeout=5).ok,
                  what="the worker's REST API", timeout=600, explain=lambda: stderr.read_text()[-3000:])
            put = requests.put(f"http://127.0.0.1:{port}/connectors/{body['name']}/config", json=body, timeout=60)
            assert put.status_code == 201, put.text
            until(read, what=f"{len(lines)} records on {connector['topic']}", timeout=300,
                  explain=lambda: stderr.read_text()[-3000:])
            status = requests.get(f"http://127.0.0.1:{port}/connectors/{body['name']}/status", timeout=30).json()
            assert status["connector"]["state"] == "RUNNING", status
        finally:
            consumer.close()
            interrupt(proc)
    # "optional": false, as Kafka writes it: FileStreamSource's value schema is Schema.STRING_SCHEMA (required).
    assert got == [(None, {"schema": {"type": "string", "optional": False}, "payload": line}) for line in lines]
