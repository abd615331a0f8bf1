"""The connector contract applied to the PostgreSQL CDC source, against a real throwaway PostgreSQL.

The reference the streamed records are compared with is a batch read from a second slot created at the same
point as the connector's (before any row), so both read the same WAL: a batch read on the connector's own
slot would start where the stream left it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.contract import SourceContract
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def pg():
    with PostgresCluster() as cluster:
        yield cluster


class TestPostgresCdcContract(SourceContract):
    bad_configs = [({"snapshot.mode": "sometimes"}, "snapshot.mode"),
                   ({"database.hostname": None}, "database.hostname"),
                   ({"slot.nmae": "other"}, "slot.nmae"),
                   ({"signal.data.collection": "orders"}, "signal.data.collection"),
                   ({"table.exclude.list": "public.other"}, "table.exclude.list"),
                   ({"database.port": "0"}, "database.port")]

    @pytest.fixture(autouse=True)
    def _cluster(self, pg: PostgresCluster) -> None:
        self.pg = pg
        self.db: str | None = None

    def _insert(self, ids: range) -> None:
        for i in ids:  # one transaction each: micro-batches end at transaction boundaries
            self.pg.execute("insert into items values (%s, %s)", (i, f"item-{i}"), database=self.db)

    def source_config(self, tmp_path: Path) -> dict:
        if self.db is None:
            self.db = self.pg.new_database("contract")
            self.pg.execute("create table items (id int primary key, name text)", database=self.db)
            self.pg.execute("create publication dbz_publication for all tables", database=self.db)
            for slot in (f"slot_{self.db}", f"ref_{self.db}"):
                self.pg.execute("select pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,),
                                database=self.db)
            self._insert(range(1, 13))
        return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
                "slot.name": f"slot_{self.db}", "snapshot.mode": "never", "table.include.list": "public.items",
                **self.pg.connector_config(self.db)}

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        self._insert(range(13, 20))
        return config

    def read_everything(self, spark: Any, config: dict) -> Any:
        return spark.read.format("kconnect").options(**{**config, "slot.name": f"ref_{self.db}"}).load()
