"""Contract tests every connector passes, written once.

Subclass :class:`SourceContract` or :class:`SinkContract` in a connector's test module (the class name must
start with ``Test``) and implement the hooks; pytest then runs every contract test for that connector:

* offsets survive a JSON round trip and are canonical (Spark compares them as strings);
* a replayed range yields exactly the same records (``plan`` + ``read_range`` are pure functions of offsets);
* a streaming query stopped and restarted on its checkpoint, with new data in between, delivers every record
  exactly once into an idempotent sink (counts and contents compared with a batch read of everything);
* a micro-batch that fails in the middle is replayed from the checkpoint with the same records, and nothing is
  lost or doubled;
* bad configs fail before any data moves, naming the key;
* (sinks) a replayed batch is recognised and a failed write leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.connectors.offsets import canonical, dumps


def _key(row: Any) -> tuple:
    return (row["topic"], row["partition"], row["offset"])


def _rows(df: Any) -> list[tuple]:
    """(topic, partition, offset, value as JSON) of every record, sorted."""
    out = df.select("topic", "partition", "offset", F.to_json(F.struct("key", "value")).alias("kv")).collect()
    return sorted((r["topic"], r["partition"], r["offset"], r["kv"]) for r in out)


class SourceContract:
    """Hooks: ``source_config(tmp_path)``, ``add_data(config, tmp_path) -> config`` (more records become
    available, possibly through a changed config), ``bad_configs`` (``[(config, key), ...]``) and, optionally,
    ``read_everything(spark, config)`` (the reference the streamed records are compared with)."""

    bad_configs: list[tuple[dict, str]] = []

    def source_config(self, tmp_path: Path) -> dict:
        raise NotImplementedError

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        raise NotImplementedError

    def read_everything(self, spark: Any, config: dict) -> Any:
        """Every record of the source as a DataFrame: a batch read of ``config``. A change-data-capture
        source streams its database's log from where its slot started, which a batch read cannot repeat once
        the stream moved the slot: it reads from a second slot made at the same point instead."""
        return spark.read.format("kconnect").options(**config).load()

    # -------------------------------------------------------------------------------------------
    def test_offsets_round_trip_and_are_canonical(self, tmp_path: Path) -> None:
        src = build_connector(self.source_config(tmp_path), kind="source")
        start = src.initial_offsets()
        end = src.latest_offsets(start, None, None)
        for o in (start, end):
            text = dumps(o)
            assert json.loads(text) == canonical(o)
            assert dumps(json.loads(text)) == text  # stable string: no spurious empty batches
            assert all(isinstance(k, str) for k in o)

    def test_replayed_range_yields_the_same_records(self, tmp_path: Path) -> None:
        src = build_connector(self.source_config(tmp_path), kind="source")
        start = src.initial_offsets()
        end = src.latest_offsets(json.loads(dumps(start)), None, None)
        first = [b for t in src.plan(start, end) for r in t.ranges for b in src.read_range(r)]
        again = build_connector(self.source_config(tmp_path), kind="source")
        second = [b for t in again.plan(json.loads(dumps(start)), json.loads(dumps(end)))
                  for r in t.ranges for b in again.read_range(r)]
        assert sum(b.num_rows for b in first) > 0
        assert [b.to_pylist() for b in first] == [b.to_pylist() for b in second]

    def test_restart_delivers_every_record_once(self, spark: Any, tmp_path: Path) -> None:
        config = self.source_config(tmp_path)
        ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
        self._run(spark, config, ckpt, out)
        first = spark.read.parquet(out).count()
        assert first > 0
        config = self.add_data(config, tmp_path)
        self._run(spark, config, ckpt, out)
        got = _rows(spark.read.parquet(out))
        expected = _rows(self.read_everything(spark, config))
        assert len(got) > first
        assert len(set(got)) == len(got), "duplicates after restart"
        assert got == expected

    def test_failed_batch_is_replayed_with_the_same_records(self, spark: Any, tmp_path: Path) -> None:
        config = self.source_config(tmp_path)
        config = {**config, "max.records.per.trigger": str(self.batch_bound)}
        ckpt, out, seen = str(tmp_path / "ckpt"), tmp_path / "out", tmp_path / "seen"
        seen.mkdir()
        armed = tmp_path / "fail-batch-1"  # present until batch 1 has failed once
        armed.touch()

        # Through Spark Connect this function runs in a Python process of the server, not in the test: what it
        # must remember across batches and runs lives in files.
        def sink(batch_df: Any, batch_id: int) -> None:
            rows = _rows(batch_df)
            record = seen / f"{batch_id}.json"
            if record.exists():
                assert rows == [tuple(r) for r in json.loads(record.read_text())], \
                    f"batch {batch_id} replayed different records"
            record.write_text(json.dumps(rows))
            # Idempotent per batch id, like a real exactly-once sink.
            batch_df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
            if batch_id == 1 and armed.exists():
                armed.unlink()
                raise RuntimeError("injected failure after the write, before the commit")

        def run() -> None:
            q = (spark.readStream.format("kconnect").options(**config).load().writeStream
                 .foreachBatch(sink).option("checkpointLocation", ckpt).trigger(availableNow=True).start())
            q.awaitTermination()

        with pytest.raises(Exception, match="injected failure"):
            run()
        assert not armed.exists()
        run()
        got = _rows(spark.read.parquet(str(out)).drop("batch"))
        expected = _rows(self.read_everything(spark, config))
        assert len(list(seen.glob("*.json"))) >= 2
        assert len(set(got)) == len(got)
        assert got == expected

    def test_bad_configs_fail_before_data_moves(self, spark: Any, tmp_path: Path) -> None:
        assert self.bad_configs, "a connector's contract lists its bad configs"
        base = self.source_config(tmp_path)
        for bad, key in self.bad_configs:
            config = {k: v for k, v in {**base, **bad}.items() if v is not None}
            with pytest.raises(Exception) as info:
                # .schema: a Spark Connect client sends the plan to the server lazily, at the first question.
                spark.read.format("kconnect").options(**config).load().schema
            assert key in str(info.value), (bad, str(info.value)[:500])

    batch_bound = 5

    @staticmethod
    def _run(spark: Any, config: dict, ckpt: str, out: str) -> None:
        q = (spark.readStream.format("kconnect").options(**config).load()
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()


class SinkContract:
    """Hooks: ``sink_config(tmp_path)``, ``read_back(config) -> list[str]`` (the values now in the sink, in
    any order) and, optionally, ``shape_input(df)`` (e.g. wrap the line into a struct value). The input is a
    FileStreamSource stream of text lines."""

    def shape_input(self, df: Any) -> Any:
        return df

    def sink_config(self, tmp_path: Path) -> dict:
        raise NotImplementedError

    def read_back(self, config: dict) -> list[str]:
        raise NotImplementedError

    def _source(self, tmp_path: Path, lines: list[str]) -> dict:
        path = tmp_path / "sink-input.txt"
        with open(path, "a") as f:
            f.writelines(f"{ln}\n" for ln in lines)
        return {"connector.class": "FileStreamSource", "file": str(path), "topic": "contract",
                "max.records.per.trigger": "4"}

    def _stream(self, spark: Any, src: dict, sink: dict, ckpt: str, df_fn: Any = None) -> None:
        df = spark.readStream.format("kconnect").options(**src).load()
        if df_fn is not None:
            df = df_fn(df)
        df = self.shape_input(df)
        q = (df.writeStream.format("kconnect").options(**sink).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()

    def test_replayed_batch_is_not_written_twice(self, spark: Any, tmp_path: Path) -> None:
        sink, ckpt = self.sink_config(tmp_path), str(tmp_path / "ckpt")
        lines = [f"line-{i}" for i in range(10)]
        src = self._source(tmp_path, lines)
        self._stream(spark, src, sink, ckpt)
        # Forget that Spark committed the last batch: Spark replays it on restart.
        commits = sorted((Path(ckpt) / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        assert len(commits) >= 2
        commits[-1].unlink()
        crc = commits[-1].with_name(f".{commits[-1].name}.crc")
        if crc.exists():
            crc.unlink()
        self._stream(spark, src, sink, ckpt)
        assert sorted(self.read_back(sink)) == sorted(lines)

    def test_failed_write_leaves_nothing_and_restart_delivers_all(self, spark: Any, tmp_path: Path) -> None:
        sink, ckpt = self.sink_config(tmp_path), str(tmp_path / "ckpt")
        lines = [f"row-{i}" for i in range(12)]
        src = self._source(tmp_path, lines)
        flag = tmp_path / f"fail-{uuid.uuid4().hex}"
        flag.touch()

        @F.udf("string")
        def poison(v):
            # Fails the write task of the batch holding row-6 while the flag file exists.
            if v == "row-6" and os.path.exists(str(flag)):
                raise RuntimeError("injected write failure")
            return v

        with pytest.raises(Exception, match="injected write failure"):
            self._stream(spark, src, sink, ckpt, lambda df: df.withColumn("value", poison("value")))
        partial = self.read_back(sink)
        assert "row-6" not in partial and len(partial) < len(lines)
        flag.unlink()
        self._stream(spark, src, sink, ckpt, lambda df: df.withColumn("value", poison("value")))
        assert sorted(self.read_back(sink)) == sorted(lines)
