"""The connector contract applied to the MariaDB CDC source on the run's throwaway MariaDB.

``snapshot.mode=never`` streams from the oldest binlog file, as Debezium's does: a batch read of the same config
then reads the same binlog, so it is the reference the streamed records are compared with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.connectors.mysql_support import config, execute, new_database
from tests.contract.contract import SourceContract


class TestMariaDbCdcContract(SourceContract):
    bad_configs = [({"snapshot.mode": "sometimes"}, "snapshot.mode"),
                   ({"database.hostname": None}, "database.hostname"),
                   ({"database.server.id": "0"}, "database.server.id"),
                   ({"snapshot.mdoe": "initial"}, "snapshot.mdoe"),  # a misspelling (an unknown key only warns)
                   ({"table.include.list": "a.b", "table.exclude.list": "a.c"}, "table.exclude.list"),
                   ({"decimal.handling.mode": "exact"}, "decimal.handling.mode")]

    @pytest.fixture(autouse=True)
    def _database(self) -> None:
        self.db: str | None = None

    def _insert(self, ids: range) -> None:
        for i in ids:  # one transaction each: micro-batches end at transaction boundaries
            execute(f"insert into {self.db}.items values ({i}, 'item-{i}')")

    def source_config(self, tmp_path: Path) -> dict:
        if self.db is None:
            self.db = new_database("contract")
            execute(f"create table {self.db}.items (id int primary key, name varchar(20))")
            self._insert(range(1, 13))
        return {**config(self.db, **{"snapshot.mode": "never"}), "database.server.id": "4242"}

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        self._insert(range(13, 20))
        return config
