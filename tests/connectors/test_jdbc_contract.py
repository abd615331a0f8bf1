"""The connector contract applied to the JDBC source and sink (SQLite: no server needed)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pyspark.sql import functions as F

from tests.contract.contract import SinkContract, SourceContract


def _url(path: Path) -> str:
    return f"jdbc:sqlite:{path}"


class TestJdbcSourceContract(SourceContract):
    bad_configs = [({"mode": "sometimes"}, "mode"), ({"connection.url": None}, "connection.url"),
                   ({"batch.max.rowz": "5"}, "batch.max.rowz"), ({"tasks.max": "0"}, "tasks.max")]

    def source_config(self, tmp_path: Path) -> dict:
        db = tmp_path / "src.db"
        if not db.exists():
            with sqlite3.connect(db) as conn:
                conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
                conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item-{i}") for i in range(1, 13)])
        return {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": _url(db),
                "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items",
                "topic.prefix": "db-"}

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        with sqlite3.connect(tmp_path / "src.db") as conn:
            conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item-{i}") for i in range(13, 20)])
        return config


class TestJdbcSinkContract(SinkContract):
    def sink_config(self, tmp_path: Path) -> dict:
        return {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "connection.url": _url(tmp_path / "sink.db"), "table.name.format": "lines",
                "insert.mode": "insert", "pk.mode": "none", "auto.create": "true"}

    def shape_input(self, df):
        return df.withColumn("value", F.struct(F.col("value").alias("line")))

    def read_back(self, config: dict) -> list[str]:
        path = config["connection.url"][len("jdbc:sqlite:"):]
        if not Path(path).exists():
            return []
        with sqlite3.connect(path) as conn:
            try:
                return [r[0] for r in conn.execute("SELECT line FROM lines")]
            except sqlite3.OperationalError:
                return []  # no table yet: nothing was written
