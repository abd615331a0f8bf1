"""The user's path: start the worker as a user does (``kconnect standalone worker.properties``, a subprocess) and
drive it only over HTTP with configs written as Debezium's and Confluent's documentation writes them, checking
the data that arrives row by row.

* Debezium PostgreSQL, initial snapshot then streaming, into a Confluent JDBC sink mirror (ExtractNewRecordState);
* Confluent JDBC source (incrementing) into a Confluent JDBC sink, both on PostgreSQL;
* FileStreamSource with SMTs (HoistField, InsertField) and JsonConverter ``schemas.enable=true`` into a
  FileStreamSink, then pause, stop and delete without ERROR stack traces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.postgres import PostgresCluster, free_port
from tests.support.processes import interrupt
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(1800)


class HttpWorker:
    """A ``kconnect standalone`` process and a JSON client of its REST API."""

    def __init__(self, root: Path, extra: dict[str, str] | None = None):
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        props = root / "worker.properties"
        props.write_text("\n".join([
            f"listeners=http://127.0.0.1:{self.port}", f"offset.storage.dir={root / 'state'}",
            f"topics.dir={root / 'topics'}", "trigger.interval.ms=1000", "spark.master=local[2]",
            "spark.sql.shuffle.partitions=2", "spark.ui.enabled=false", "spark.driver.host=127.0.0.1",
            "warm.up.enable=false", "spark.driver.bindAddress=127.0.0.1",
            "spark.python.authenticate.socketTimeout=300s",
            *(f"{k}={v}" for k, v in (extra or {}).items()), ""]))
        kconnect = Path(sys.executable).with_name("kconnect")
        cmd = [str(kconnect)] if kconnect.exists() else [sys.executable, "-m", "spark_connect_bridge.cli"]
        self.stderr_path = root / "worker.stderr"
        self._stderr = open(self.stderr_path, "w")
        # PYTHONSAFEPATH is the worker's to set (this test session set it for its own Spark)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
        self.proc = subprocess.Popen(cmd + ["standalone", str(props), "--no-live"], cwd=root, env=env,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr)
        until(lambda: self.proc.poll() is None and requests.get(self.url + "/health", timeout=5).status_code == 200,
               timeout=300, what="the worker's /health")

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        assert self.proc.poll() is None, self.stderr()
        return requests.request(method, self.url + path, json=body, timeout=120)

    def get(self, path: str) -> Any:
        r = self.call("GET", path)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def create(self, name: str, config: dict[str, str]) -> None:
        r = self.call("POST", "/connectors", {"name": name, "config": config})
        assert r.status_code == 201, r.text

    def healthy(self, *names: str) -> bool:
        """True; fails at once with the trace when one of the connectors FAILED (no point waiting on)."""
        for name in names:
            status = self.get(f"/connectors/{name}/status")
            assert status["connector"]["state"] != "FAILED", status["connector"].get("trace")
        return True

    def delete_all(self, *names: str) -> None:
        for name in names:
            self.call("DELETE", f"/connectors/{name}")
        until(lambda: not set(names) & set(self.get("/connectors")), what=f"{', '.join(names)} deleted")

    def wait_state(self, name: str, state: str) -> dict:
        return until(lambda: (s := self.get(f"/connectors/{name}/status"))["connector"]["state"] == state and s,
                      what=f"{name} to be {state}")

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        interrupt(self.proc)
        self._stderr.close()


@pytest.fixture(scope="module")
def http_worker(tmp_path_factory):
    worker = HttpWorker(tmp_path_factory.mktemp("http-worker"))
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def acceptance_pg():
    with PostgresCluster() as pg:
        yield pg


def _rows(pg: PostgresCluster, sql: str, db: str) -> list[tuple]:
    try:
        return sorted(pg.execute(sql, database=db))
    except Exception as e:  # the sink has not created its table yet
        if "does not exist" in str(e):
            return []
        raise


def test_debezium_snapshot_and_changes_reach_a_jdbc_sink_mirror(http_worker, acceptance_pg):
    pg = acceptance_pg
    db, mirror = pg.new_database("inventory"), pg.new_database("mirror")
    pg.execute("create table customers (id int primary key, first_name text, email text);"
               "insert into customers values (1001, 'Sally', 'sally@example.com'), (1002, 'George', 'gbailey@"
               "foobar.com'), (1003, 'Edward', 'ed@walker.com')", database=db)
    # Debezium's PostgreSQL connector documentation, "Example configuration"
    http_worker.create("inventory-connector", {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.user": "postgres",
        "database.password": "", "database.dbname": db, "topic.prefix": "fulfillment",
        "table.include.list": "public.customers", "plugin.name": "pgoutput", "slot.name": "inventory_slot"})
    # Confluent's JDBC sink documentation with Debezium's ExtractNewRecordState ("unwrap")
    http_worker.create("mirror-sink", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics": "fulfillment.public.customers",
        "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{mirror}", "connection.user": "postgres",
        "connection.password": "", "insert.mode": "upsert", "delete.enabled": "true", "pk.mode": "record_key",
        "pk.fields": "id", "auto.create": "true", "table.name.format": "customers",
        "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.drop.tombstones": "false"})
    try:
        _check_mirror(http_worker, pg, db, mirror)
    finally:
        http_worker.delete_all("mirror-sink", "inventory-connector")


def _check_mirror(http_worker: HttpWorker, pg: PostgresCluster, db: str, mirror: str) -> None:
    query = "select id, first_name, email from customers"
    want = [(1001, "Sally", "sally@example.com"), (1002, "George", "gbailey@foobar.com"),
            (1003, "Edward", "ed@walker.com")]
    names = ("inventory-connector", "mirror-sink")
    until(lambda: http_worker.healthy(*names) and _rows(pg, query, mirror) == want,
           what="the snapshot's rows in the mirror")
    topics = http_worker.get("/connectors/inventory-connector/topics")
    assert topics == {"inventory-connector": {"topics": ["fulfillment.public.customers"]}}

    pg.execute("insert into customers values (1004, 'Anne', 'annek@noanswer.org');"
               "update customers set email = 'sally@thomas.example' where id = 1001;"
               "delete from customers where id = 1002", database=db)
    want = [(1001, "Sally", "sally@thomas.example"), (1003, "Edward", "ed@walker.com"),
            (1004, "Anne", "annek@noanswer.org")]
    until(lambda: http_worker.healthy(*names) and _rows(pg, query, mirror) == want,
           what="the streamed changes in the mirror")
    # 3 snapshot reads, the insert, the update, the delete and its tombstone
    until(lambda: http_worker.get("/connectors/inventory-connector/status")["metrics"]["records_in_total"] == 7,
           what="7 records counted")


def test_debezium_postgres_into_an_iceberg_upsert_mirror(http_worker, acceptance_pg):
    """Debezium PostgreSQL and the Iceberg sink POSTed to the running worker, the sink configured as Iceberg's CDC
    mirror is written (ExtractNewRecordState with add.fields=op and deletes rewritten, iceberg.tables.cdc-field,
    id columns): after the snapshot and after inserts, updates and deletes, the Iceberg table equals the source
    table row by row."""
    pytest.importorskip("pyiceberg")
    from spark_connect_bridge.connectors.iceberg import load_iceberg_catalog

    pg = acceptance_pg
    db = pg.new_database("shop")
    pg.execute("create table customers (id int primary key, first_name text, email text);"
               "insert into customers select g, 'name' || g, 'c' || g || '@example.com' "
               "from generate_series(1, 20) g", database=db)
    data = http_worker.root / "work" / "data" / "iceberg"  # under the worker's default connector.allowed.paths
    data.mkdir(parents=True, exist_ok=True)
    catalog = {"type": "jdbc", "uri": f"jdbc:sqlite:{data / 'catalog.db'}", "warehouse": str(data / "wh")}
    http_worker.create("shop-cdc", {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.user": "postgres",
        "database.password": "", "database.dbname": db, "topic.prefix": "shop",
        "table.include.list": "public.customers", "plugin.name": "pgoutput", "slot.name": "shop_iceberg_slot"})
    http_worker.create("shop-iceberg", {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector", "tasks.max": "1",
        "topics": "shop.public.customers", "iceberg.tables": "shop.customers",
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.tables.cdc-field": "__op", "iceberg.tables.default-id-columns": "id",
        **{f"iceberg.catalog.{k}": v for k, v in catalog.items()},
        "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.add.fields": "op", "transforms.unwrap.delete.tombstone.handling.mode": "rewrite"})
    query = "select id, first_name, email from customers"

    def mirrored() -> list[tuple]:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            table = load_iceberg_catalog("iceberg", catalog).load_table("shop.customers")
        except NoSuchTableError:
            return []
        return sorted((r["id"], r["first_name"], r["email"]) for r in table.scan().to_arrow().to_pylist())

    names = ("shop-cdc", "shop-iceberg")
    try:
        until(lambda: http_worker.healthy(*names) and mirrored() == sorted(pg.execute(query, database=db)),
              timeout=600, what="the snapshot's rows in the Iceberg table")
        pg.execute("insert into customers values (100, 'new', 'new@example.com');"
                   "update customers set email = 'changed@example.com' where id in (1, 2, 100);"
                   "delete from customers where id in (3, 4);"
                   "insert into customers values (3, 'again', 'again@example.com')", database=db)
        want = sorted(pg.execute(query, database=db))
        assert len(want) == 20 and (3, "again", "again@example.com") in want
        until(lambda: http_worker.healthy(*names) and mirrored() == want,
              timeout=600, what="the streamed changes in the Iceberg table")
    finally:
        http_worker.delete_all(*names)


def test_jdbc_source_into_a_jdbc_sink(http_worker, acceptance_pg):
    pg = acceptance_pg
    src_db, dst_db = pg.new_database("sales"), pg.new_database("warehouse")
    pg.execute("create table orders (id serial primary key, product text not null, quantity int not null);"
               "insert into orders (product, quantity) values ('tea', 2), ('jam', 1), ('bread', 4)", database=src_db)
    # Confluent's JDBC source documentation, incrementing mode
    http_worker.create("jdbc-source-orders", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "tasks.max": "1",
        "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{src_db}", "connection.user": "postgres",
        "connection.password": "", "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": "orders", "topic.prefix": "pg-sales-", "poll.interval.ms": "1000"})
    # Confluent's JDBC sink documentation
    http_worker.create("jdbc-sink-orders", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics": "pg-sales-orders", "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{dst_db}",
        "connection.user": "postgres", "connection.password": "", "auto.create": "true",
        "insert.mode": "insert", "pk.mode": "none"})
    try:
        _check_orders(http_worker, pg, src_db, dst_db)
    finally:
        http_worker.delete_all("jdbc-sink-orders", "jdbc-source-orders")


def _check_orders(http_worker: HttpWorker, pg: PostgresCluster, src_db: str, dst_db: str) -> None:
    query = 'select id, product, quantity from "pg-sales-orders"'
    names = ("jdbc-source-orders", "jdbc-sink-orders")
    until(lambda: http_worker.healthy(*names) and _rows(pg, query, dst_db) == [(1, "tea", 2), (2, "jam", 1),
                                                                                 (3, "bread", 4)],
           what="the three orders in the sink's table")
    pg.execute("insert into orders (product, quantity) values ('honey', 3)", database=src_db)
    until(lambda: http_worker.healthy(*names) and _rows(pg, query, dst_db) == [(1, "tea", 2), (2, "jam", 1),
                                                                                 (3, "bread", 4), (4, "honey", 3)],
           what="the new order in the sink's table")
    # The sink's offsets are its checkpoint's commit, made just after the rows are: wait for it.
    expected = [{"partition": {"kafka_topic": "pg-sales-orders", "kafka_partition": 0}, "offset": {"kafka_offset": 4}}]
    until(lambda: http_worker.get("/connectors/jdbc-sink-orders/offsets")["offsets"] == expected,
           what="the sink's committed offset 4")


def test_filestream_with_smts_and_json_schemas_then_pause_stop_delete_quietly(http_worker):
    # By default connectors touch files only under work/data in the worker's directory (connector.allowed.paths).
    data = http_worker.root / "work" / "data"
    data.mkdir(parents=True, exist_ok=True)
    source_file, sink_file = data / "test.txt", data / "test.sink.txt"
    source_file.write_text("foo\nbar\n")
    # Kafka's connect-file-source.properties + the SMT example of Kafka's documentation, JSON with schemas
    http_worker.create("local-file-source", {
        "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source_file), "topic": "connect-test",
        "transforms": "MakeMap,InsertSource",
        "transforms.MakeMap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.MakeMap.field": "line",
        "transforms.InsertSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.InsertSource.static.field": "data_source",
        "transforms.InsertSource.static.value": "test-file-source",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"})
    # connect-file-sink.properties; the StringConverter writes the JSON text as it travels
    http_worker.create("local-file-sink", {
        "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(sink_file), "topics": "connect-test",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"})

    # the same records read with their schemas (JsonConverter): a sink typed from its messages, which runs as a
    # plain streaming query once its first micro-batch was written (engine/schema_restarts.py), quietly
    typed_file = data / "test.typed.txt"
    http_worker.create("local-file-sink-typed", {
        "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(typed_file), "topics": "connect-test",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter"})

    def sink_lines(path: Path = sink_file) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    names = ("local-file-source", "local-file-sink", "local-file-sink-typed")
    got = until(lambda: http_worker.healthy(*names) and len(sink_lines()) >= 2 and sink_lines(),
                 what="two JSON lines in the sink file")
    schema = {"type": "struct", "optional": False,
              "fields": [{"field": "line", "type": "string", "optional": False},
                         {"field": "data_source", "type": "string", "optional": True}]}
    for line, text in zip(got, ["foo", "bar"]):
        envelope = json.loads(line)
        assert envelope["payload"] == {"line": text, "data_source": "test-file-source"}
        assert envelope["schema"]["type"] == "struct"
        assert [(f["field"], f["type"]) for f in envelope["schema"]["fields"]] == \
            [(f["field"], f["type"]) for f in schema["fields"]]

    # pause, resume, stop, delete: the operator's routine, with no ERROR stack traces in the worker's output
    with open(source_file, "a") as f:
        f.write("baz\n")
    for verb, state in (("pause", "PAUSED"), ("resume", "RUNNING"), ("stop", "STOPPED"), ("resume", "RUNNING")):
        assert http_worker.call("PUT", f"/connectors/local-file-source/{verb}").status_code in (202, 204)
        http_worker.wait_state("local-file-source", state)
    for verb, state in (("pause", "PAUSED"), ("resume", "RUNNING")):
        assert http_worker.call("PUT", f"/connectors/local-file-sink-typed/{verb}").status_code in (202, 204)
        http_worker.wait_state("local-file-sink-typed", state)
    until(lambda: len(sink_lines()) == 3, what="the third line after resume")
    assert json.loads(sink_lines()[2])["payload"] == {"line": "baz", "data_source": "test-file-source"}
    assert until(lambda: len(sink_lines(typed_file)) == 3 and sink_lines(typed_file),
                 what="three lines in the typed sink's file") == [
        f"Struct{{line={t},data_source=test-file-source}}" for t in ("foo", "bar", "baz")]
    # two more micro-batches, one at a time: the resumed sink's second one goes to its plain query (the hand-over
    # logs at INFO, which this worker, started without -v, does not print; the noise check below covers its logs)
    for n, text in enumerate(("qux", "quux"), start=4):
        with open(source_file, "a") as f:
            f.write(text + "\n")
        until(lambda n=n: len(sink_lines(typed_file)) == n, what=f"{n} lines in the typed sink's file")
    # counted across pause and resume, never backwards (a reset would stay at 1); the status follows the query's
    # progress events, which may arrive after the sink's file shows the line
    until(lambda: http_worker.get("/connectors/local-file-source/status")["metrics"]["records_out_total"] >= 3,
           timeout=60, what="records_out_total >= 3 in the source's status")
    http_worker.delete_all("local-file-sink", "local-file-sink-typed", "local-file-source")
    time.sleep(3)
    noise = [line for line in http_worker.stderr().splitlines() if "TaskKilledException" in line or " ERROR " in line]
    assert noise == []
