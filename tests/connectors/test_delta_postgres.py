"""Debezium events from the PostgreSQL CDC connector applied to Delta with MERGE, on both Delta engines
(delta-spark: Delta's own MERGE; deltalake: delta-rs): the Delta table equals the source table, through a
snapshot, streamed changes (several per key in one micro-batch), a restart and a replayed batch."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_connect_bridge.connectors.postgres_cdc import table_events
from spark_connect_bridge.engine import delta_spark as delta_spark_engine
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module", autouse=True)
def _small_delta_log_replay(spark):
    """Delta's log replay on 2 partitions instead of 50 (a 2-core machine)."""
    key = "spark.databricks.delta.snapshotPartitions"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "2")
    yield
    spark.conf.unset(key) if before is None else spark.conf.set(key, before)


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


def _source_rows(pg: PostgresCluster, db: str) -> list[tuple]:
    return sorted(pg.execute("select id, name, qty, price from items", database=db))


def _delta_rows(spark, path) -> list[tuple]:
    """The table as deltalake reads it, checked equal to what Delta's own reader gives."""
    by_deltalake = sorted((r["id"], r["name"], r["qty"], r["price"])
                          for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist())
    by_delta_spark = sorted((r.id, r.name, r.qty, r.price)
                            for r in spark.read.format("delta").load(str(path)).collect())
    assert by_deltalake == by_delta_spark
    return by_deltalake


@pytest.mark.parametrize("engine", ["delta-spark", "deltalake"])
def test_postgres_cdc_events_merged_into_delta_equal_the_source_table(spark, pg, tmp_path, engine):
    db = pg.new_database("delta")
    pg.execute("""
        create table items (id bigint primary key, name text, qty int, price numeric(10,2));
        insert into items select g, 'item' || g, g, g * 1.5 from generate_series(1, 20) g;
    """, database=db)
    source = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
              "slot.name": f"slot_{db}", "table.include.list": "public.items", "max.records.per.trigger": "15",
              **pg.connector_config(db)}
    table, ckpt = tmp_path / "items", tmp_path / "ckpt"
    sink = {"connector.class": "delta-sink", "delta.table.path": str(table), "delta.write.mode": "merge",
            "delta.merge.order.by": "source.lsn"}

    def run() -> None:
        events = table_events(spark.readStream.format("kconnect").options(**source).load(), "public.items")
        delta_spark_engine.write_stream(events, sink, checkpoint=str(ckpt), engine=engine,
                                  trigger={"availableNow": True}).awaitTermination()

    run()  # the snapshot (op=r)
    assert _delta_rows(spark, table) == _source_rows(pg, db)
    pg.execute("""
        begin;
        update items set qty = qty + 100 where id <= 5;
        update items set qty = qty + 1000, name = 'twice' where id <= 2;
        delete from items where id in (3, 7, 11);
        insert into items values (21, 'new', 21, 0.5), (22, 'gone', 22, 1);
        delete from items where id = 22;
        insert into items values (3, 'back', 3, 3);
        commit;
        update items set price = null where id = 4;
    """, database=db)
    run()  # streamed changes, several per key in one micro-batch
    assert _delta_rows(spark, table) == _source_rows(pg, db)
    # A lost Spark commit: the last batch is replayed and recognised by its app transaction.
    version = DeltaTable(str(table)).version()
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    assert DeltaTable(str(table)).version() == version
    assert _delta_rows(spark, table) == _source_rows(pg, db)
