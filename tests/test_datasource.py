"""The kconnect data source: discovery, dispatch on connector.class, refusals, checkpointed offsets."""

from __future__ import annotations

import json

import pytest

import spark_connect_bridge as scb
from spark_connect_bridge.errors import ConfigError


def _file_src(tmp_path, **extra):
    path = tmp_path / "in.txt"
    path.write_text("a\nb\nc\n")
    return {"connector.class": "FileStreamSource", "file": str(path), "topic": "t", **extra}


def test_format_works_without_register_and_with_register(spark, tmp_path):
    assert spark.read.format("kconnect").options(**_file_src(tmp_path)).load().count() == 3
    scb.register(spark)  # explicit registration (Spark Connect, notebooks) is also fine
    assert spark.read.format("kconnect").options(**_file_src(tmp_path)).load().count() == 3


def test_stage_keys_are_refused_naming_the_call_that_applies_them(spark, tmp_path):
    cfg = _file_src(tmp_path, **{"transforms": "drop", "transforms.drop.type": "Filter",
                                 "value.converter": "org.apache.kafka.connect.storage.StringConverter"})
    with pytest.raises(Exception) as info:
        spark.read.format("kconnect").options(**cfg).load().schema
    msg = str(info.value)
    assert "transforms" in msg and "value.converter" in msg and "spark_connect_bridge.read_stream" in msg


def test_a_sink_connector_cannot_be_read(spark, tmp_path):
    with pytest.raises(Exception, match="is a sink connector"):
        spark.read.format("kconnect").options(**{"connector.class": "FileStreamSink", "file": "/tmp/x"}).load().schema


def test_unknown_connector_lists_known_ones(spark):
    with pytest.raises(Exception, match="Known connector plugins"):
        spark.read.format("kconnect").option("connector.class", "Nope").load().schema


def test_checkpoint_holds_kafka_style_offsets(spark, tmp_path):
    ckpt = tmp_path / "ckpt"
    q = (spark.readStream.format("kconnect").options(**_file_src(tmp_path)).load().writeStream.format("noop")
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination()
    last = (ckpt / "offsets" / "0").read_text().splitlines()[-1]
    assert json.loads(last) == {json.dumps({"filename": str(tmp_path / "in.txt")}, separators=(",", ":")):
                                {"position": 6}}


def test_pipeline_validates_the_whole_config_before_data_moves(spark, tmp_path):
    with pytest.raises(ConfigError) as info:
        scb.read_stream(spark, _file_src(tmp_path, **{"batch.size": "0", "tasks.maxx": "2"}))
    assert set(info.value.keys) == {"batch.size", "tasks.maxx"}


def test_pipeline_reads_a_properties_file(spark, tmp_path):
    cfg = _file_src(tmp_path)
    props = tmp_path / "src.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()) + "name=file-src\n")
    assert scb.read_batch(spark, str(props)).count() == 3


@pytest.mark.parametrize(("main_module", "frozen"), [("pyspark.daemon", 2), ("pytest", 0)])
def test_startup_heap_is_frozen_only_in_daemon_forked_workers_and_again_after_imports(main_module, frozen,
                                                                                      monkeypatch):
    """Spark's daemon-forked Python workers run gc.collect() after every task: there the objects loaded at
    start-up are frozen (gc.freeze), again only once modules were imported since (a sink's commit imports its
    catalog's client after the writer was made); any other process is left alone."""
    import gc
    import sys
    import types

    from spark_connect_bridge.engine import datasource

    calls = []
    fake_main = types.ModuleType("__main__")
    fake_main.__spec__ = types.SimpleNamespace(name=main_module)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    monkeypatch.setattr(datasource, "_frozen_modules", 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))
    datasource.freeze_startup_heap()
    datasource.freeze_startup_heap()
    assert len(calls) == min(frozen, 1)
    monkeypatch.setitem(sys.modules, "kconnect_test_imported_later", types.ModuleType("later"))
    datasource.freeze_startup_heap()
    datasource.freeze_startup_heap()
    assert len(calls) == frozen
