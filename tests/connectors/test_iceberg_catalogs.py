"""The Iceberg sink and source on the catalogs and stores that need a server: Iceberg's own REST catalog server
(tests/support/iceberg_rest.py, from Maven Central) and a warehouse on the S3 emulator (the run's shared moto
server). The sink takes the original's configs, the source reads the table back, rows checked one by one.

The configs' keys are those of Apache Iceberg's sink (https://iceberg.apache.org/docs/latest/kafka-connect/:
`iceberg.catalog.type=rest`, `iceberg.catalog.uri`; the catalog's own properties prefixed `iceberg.catalog.`),
and for S3 the properties of Iceberg's S3FileIO (https://iceberg.apache.org/docs/latest/aws/#s3-fileio:
`s3.endpoint`, `s3.path-style-access`, `s3.access-key-id`, `s3.secret-access-key`) with `client.region`."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.support import servers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server

pytest.importorskip("pyiceberg")  # the iceberg extra (in dev)

ICEBERG = "org.apache.iceberg.connect.IcebergSinkConnector"


@pytest.fixture(scope="module")
def rest_catalog():
    from tests.support.iceberg_rest import IcebergRestCatalog

    with IcebergRestCatalog() as catalog:
        yield catalog


def _orders(spark, n: int):
    return (spark.read.format("kconnect")
            .options(**{"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
                        "iterations": str(n), "max.interval": "0"}).load())


def _round_trip(spark, catalog: dict, table: str, n: int = 40) -> None:
    """n datagen orders through the sink into ``table`` and back through the source: the same rows."""
    orders = _orders(spark, n)
    (orders.write.format("kconnect").mode("append")
     .options(**{"connector.class": ICEBERG, "iceberg.tables": table, "iceberg.tables.auto-create-enabled": "true",
                 **catalog}).save())
    back = (spark.read.format("kconnect")
            .options(**{"connector.class": "iceberg-source", "iceberg.source.table": table, **catalog}).load())
    cols = ["orderid", "itemid", "orderunits", "ordertime"]
    expected = sorted(tuple(r) for r in orders.select(*(F.col(f"value.{c}") for c in cols)).collect())
    got = sorted(tuple(r) for r in back.select(*(F.col(f"value.{c}") for c in cols)).collect())
    assert len(got) == n and got == expected


def test_rest_catalog_of_icebergs_own_server(spark, rest_catalog):
    """iceberg.catalog.type=rest at Iceberg's RESTCatalogServer: the sink creates and fills the table through the
    server (whose JDBC catalog and warehouse hold it), the source reads it back through the server."""
    catalog = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": rest_catalog.endpoint}
    _round_trip(spark, catalog, "shop.orders")
    assert list(Path(rest_catalog.warehouse, "shop", "orders").rglob("*.parquet")), "not in the server's warehouse"
    assert list(Path(rest_catalog.warehouse, "shop", "orders").rglob("*.metadata.json"))


def test_warehouse_on_the_s3_emulator(spark, tmp_path):
    """A JDBC catalog whose warehouse is s3://bucket/...: data and metadata files land in the bucket."""
    endpoint = servers.s3()
    store = MotoS3Server(port=int(endpoint.rsplit(":", 1)[1]))  # a client of the shared server
    bucket = "ice-" + uuid.uuid4().hex[:12]
    store.create_bucket(bucket)
    catalog = {"iceberg.catalog.type": "jdbc", "iceberg.catalog.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
               "iceberg.catalog.warehouse": f"s3://{bucket}/warehouse",
               "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
               "iceberg.catalog.s3.endpoint": endpoint, "iceberg.catalog.s3.path-style-access": "true",
               "iceberg.catalog.s3.access-key-id": ACCESS_KEY, "iceberg.catalog.s3.secret-access-key": SECRET_KEY,
               "iceberg.catalog.client.region": REGION}
    _round_trip(spark, catalog, "shop.orders")
    keys = store.objects(bucket, "warehouse")
    assert any(k.endswith(".parquet") and "/data/" in k for k in keys)
    assert any(k.endswith(".metadata.json") for k in keys)
