"""Apache Iceberg's own Kafka Connect sink (``org.apache.iceberg.connect.IcebergSinkConnector``, iceberg-kafka-connect
1.12.0 from Maven Central) beside ours, on the same topic with the same config: both tables are read back with
pyiceberg and compared row by row.

The original runs as a plugin of the differential tests' Kafka Connect 4.3 worker (tests/support/kafka_connect.py,
plugin directory ``iceberg-kafka-connect``: the sink, iceberg-parquet, Hadoop's client for its HadoopFileIO and the
PostgreSQL driver of its JdbcCatalog), and commits through its control topic and coordinator every
``iceberg.control.commit.interval-ms``. Ours runs the same config with
:func:`~spark_connect_bridge.engine.pipeline.write_batch` over one batch read of the topic. Both write to one JDBC
catalog in the run's PostgreSQL (Iceberg's JdbcCatalog tables, which pyiceberg's SQL catalog shares), each to a table
of its own; ``iceberg.tables`` is the one key that differs.

Differences are pinned here and listed in docs/comparison.md: Apache's sink has no upsert mode
(``iceberg.tables.upsert-mode-enabled`` and ``iceberg.tables.cdc-field`` are keys of the Tabular sink it grew from,
which ours implements), so it appends every record where ours keeps the last row per id column; and a table it
creates has a required column where the record's schema says ``optional: false``, where ours has it optional.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.iceberg import load_iceberg_catalog
from spark_connect_bridge.core.records import HEADERS, HEADERS_TYPE, RECORD_COLUMNS
from spark_connect_bridge.engine.pipeline import write_batch
from tests.support import servers

pytest.importorskip("pyiceberg")

SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "qty", "type": "int32", "optional": True}]}
#: (topic, rows): the second topic updates ids of the first rows (for the upsert config)
ORDERS = [{"id": 1, "name": "pen", "qty": 2}, {"id": 2, "name": None, "qty": 5}, {"id": 3, "name": "pad", "qty": None},
          {"id": 4, "name": "ink", "qty": 1}]
UPDATES = ORDERS + [{"id": 2, "name": "nib", "qty": 6}, {"id": 4, "name": "ink", "qty": 9}]


@pytest.fixture(scope="module")
def catalog_db():
    """A fresh PostgreSQL database on the run's server: the JDBC catalog of both sinks."""
    host, port = servers.postgres()
    name = "kc_iceberg_" + uuid.uuid4().hex[:10]
    with psycopg.connect(host=host, port=port, user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"jdbc:postgresql://{host}:{port}/{name}"
    with psycopg.connect(host=host, port=port, user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _config(catalog_uri: str, warehouse: str, topic: str, table: str, **extra: str) -> dict[str, str]:
    """The sink config as a Kafka Connect user writes it (JsonConverter with schemas, a JDBC catalog)."""
    return {"name": table.replace(".", "-").replace("_", "-"), "connector.class":
            "org.apache.iceberg.connect.IcebergSinkConnector", "topics": topic, "tasks.max": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true",
            "iceberg.tables": table, "iceberg.tables.auto-create-enabled": "true",
            "iceberg.catalog.type": "jdbc", "iceberg.catalog.uri": catalog_uri,
            "iceberg.catalog.jdbc.user": "postgres", "iceberg.catalog.warehouse": warehouse,
            # the original commits on its coordinator's interval (default 5 minutes); ours per batch
            "iceberg.control.commit.interval-ms": "1000", **extra}


def _produce(bootstrap: str, topic: str, rows: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for row in rows:
        producer.produce(topic, key=str(row["id"]).encode(), value=json.dumps({"schema": SCHEMA, "payload": row}))
    producer.flush(30)


def _records(spark, bootstrap: str, topic: str):
    """The topic as one batch record DataFrame, as the sink's stream reads it (bus.kafka.read_topics)."""
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("includeHeaders", "true").option("startingOffsets", "earliest").load())
    headers = F.coalesce(F.col(HEADERS), F.array().cast(HEADERS_TYPE)).alias(HEADERS)
    return df.select(*[headers if c == HEADERS else F.col(c) for c in RECORD_COLUMNS])


def _catalog(config: dict):
    return load_iceberg_catalog("iceberg", {k[len("iceberg.catalog."):]: v for k, v in config.items()
                                            if k.startswith("iceberg.catalog.")})


def _rows(config: dict, table: str) -> list[dict] | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        data = _catalog(config).load_table(table).scan().to_arrow()
    except NoSuchTableError:
        return None
    return sorted(data.to_pylist(), key=lambda r: (r["id"], json.dumps(r, sort_keys=True)))


def _schema(config: dict, table: str) -> list[tuple[str, str, bool]]:
    return [(f.name, str(f.field_type), f.required) for f in _catalog(config).load_table(table).schema().fields]


def _both(spark, connect, reference_kafka, catalog_db, tmp_path, rows: list[dict], **extra: str):
    """(theirs, ours): the config run by Apache's sink and by ours on one topic holding ``rows``."""
    topic = "iceberg-orders-" + uuid.uuid4().hex[:6]
    _produce(reference_kafka.bootstrap, topic, rows)
    warehouse = str(tmp_path / "warehouse")
    suffix = topic.rsplit("-", 1)[1]
    theirs = _config(catalog_db, warehouse, topic, f"db.theirs_{suffix}", **extra)
    ours = _config(catalog_db, warehouse, topic, f"db.ours_{suffix}", **extra)
    connect.run(theirs, done=lambda: len(_rows(theirs, theirs["iceberg.tables"]) or []) == len(rows), timeout=90)
    write_batch(_records(spark, reference_kafka.bootstrap, topic), ours)
    return theirs, ours


def test_append_lands_the_same_rows_and_columns(spark, connect, reference_kafka, catalog_db, tmp_path):
    theirs, ours = _both(spark, connect, reference_kafka, catalog_db, tmp_path, ORDERS)
    assert _rows(ours, ours["iceberg.tables"]) == _rows(theirs, theirs["iceberg.tables"]) == ORDERS
    # a difference (docs/comparison.md): the original makes a column required where the record's Connect schema
    # says optional=false; ours creates every column but the id columns optional (Spark hands the sink nullable
    # fields), so the types agree and only id's required flag differs
    assert _schema(theirs, theirs["iceberg.tables"]) == [("id", "long", True), ("name", "string", False),
                                                         ("qty", "int", False)]
    assert _schema(ours, ours["iceberg.tables"]) == [("id", "long", False), ("name", "string", False),
                                                     ("qty", "int", False)]


def test_upsert_config_apache_appends_every_record_ours_keeps_the_last_per_id(spark, connect, reference_kafka,
                                                                              catalog_db, tmp_path):
    """A difference (docs/comparison.md): Apache's 1.12 sink declares no upsert mode, so the Tabular keys do
    nothing there; ours replaces the rows of each id."""
    theirs, ours = _both(spark, connect, reference_kafka, catalog_db, tmp_path, UPDATES,
                         **{"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"})
    assert _rows(theirs, theirs["iceberg.tables"]) == sorted(UPDATES, key=lambda r: (r["id"],
                                                                                      json.dumps(r, sort_keys=True)))
    last = {r["id"]: r for r in UPDATES}
    assert _rows(ours, ours["iceberg.tables"]) == [last[i] for i in sorted(last)]
