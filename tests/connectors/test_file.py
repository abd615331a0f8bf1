"""FileStreamSource / FileStreamSink: Kafka's semantics, exactly-once sink, restart and crash behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_connect_bridge.connectors.factory import build_connector
from spark_connect_bridge.errors import ConfigError, ConnectError
from tests.contract.contract import SinkContract, SourceContract


def _src(path: Path, **extra: str) -> dict:
    return {"connector.class": "FileStreamSource", "file": str(path), "topic": "lines", **extra}


class TestFileSourceContract(SourceContract):
    bad_configs = [({"file": None}, "file"), ({"batch.size": "0"}, "batch.size"),
                   ({"topic": ""}, "topic"), ({"batch.sise": "10"}, "batch.sise")]

    def source_config(self, tmp_path: Path) -> dict:
        path = tmp_path / "in.txt"
        if not path.exists():
            path.write_text("".join(f"first-{i}\n" for i in range(12)))
        return _src(path)

    def add_data(self, config: dict, tmp_path: Path) -> dict:
        with open(config["file"], "a") as f:
            f.writelines(f"second-{i}\n" for i in range(7))
        return config


class TestFileSinkContract(SinkContract):
    def sink_config(self, tmp_path: Path) -> dict:
        return {"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt")}

    def read_back(self, config: dict) -> list[str]:
        p = Path(config["file"])
        return p.read_text().splitlines() if p.exists() else []


def test_source_emits_complete_lines_with_byte_positions(spark, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("alpha\nbeta\r\n\nγάμμα\nhalf".encode())
    rows = spark.read.format("kconnect").options(**_src(path)).load().collect()
    assert [(r.value, r.offset, r.partition, r.topic, r.key) for r in rows] == [
        ("alpha", 0, 0, "lines", None), ("beta", 6, 0, "lines", None), ("", 12, 0, "lines", None),
        ("γάμμα", 13, 0, "lines", None)]


def test_bytes_that_are_not_utf8_become_replacement_characters_as_in_kafka(spark, tmp_path):
    # Kafka's FileStreamSourceTask reads through Java's InputStreamReader: U+FFFD for each malformed sequence.
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xff\xfe ok\r\ncaf\xc3\xa9 \xc3(\nfine\n")
    rows = spark.read.format("kconnect").options(**_src(path)).load().collect()
    assert [(r.value, r.offset) for r in rows] == [("\ufffd\ufffd ok", 0), ("café \ufffd(", 7), ("fine", 16)]


def test_half_written_line_waits_for_its_newline(spark, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("one\ntw")
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.txt"
    sink = {"connector.class": "FileStreamSink", "file": str(out)}

    def run() -> None:
        (spark.readStream.format("kconnect").options(**_src(path)).load().writeStream.format("kconnect")
         .options(**sink).option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
         .awaitTermination())

    run()
    assert out.read_text() == "one\n"
    with open(path, "a") as f:
        f.write("o\nthree\n")
    run()
    assert out.read_text() == "one\ntwo\nthree\n"


def test_admission_control_bounds_each_micro_batch(spark, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"{i}\n" for i in range(23)))
    q = (spark.readStream.format("kconnect").options(**_src(path, **{"max.records.per.trigger": "5"})).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [5, 5, 5, 5, 3]


def test_truncated_file_fails_instead_of_losing_data(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("aaaa\nbbbb\n")
    src = build_connector(_src(path), kind="source")
    end = src.latest_offsets(src.initial_offsets(), None, None)
    path.write_text("c\n")
    with pytest.raises(ConnectError, match="truncated or replaced"):
        src.latest_offsets(end, None, None)


def test_sink_writes_kafka_text_for_each_value_type(spark, tmp_path):
    out = tmp_path / "out.txt"
    df = spark.createDataFrame([(1, "x"), (None, "y"), (3, None)], "value int, other string")
    df.write.format("kconnect").options(**{"connector.class": "FileStreamSink", "file": str(out)}) \
        .mode("append").save()
    assert sorted(out.read_text().splitlines()) == ["1", "3", "null"]


def test_sink_rolls_back_an_append_interrupted_by_a_crash(tmp_path):
    sink = build_connector({"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt")}, kind="sink")
    import pyarrow as pa

    from spark_connect_bridge.connectors.base import CommitContext, WriteContext

    def stage(batch_id: int, values: list[str]):
        return sink.write(iter([pa.record_batch({"value": pa.array(values)})]),
                          WriteContext("app", batch_id, 0, 0))

    sink.commit([stage(0, ["a", "b"])], CommitContext("app", 0))
    # A crash after the append of batch 1 began and before it was recorded: pending state + torn append.
    state_dir = tmp_path / "out.txt.kconnect"
    state = (state_dir / "state.json").read_text().replace('"pending": null', '"pending": {"app": "app", '
                                                            '"batch": 1, "size": 4}')
    (state_dir / "state.json").write_text(state)
    with open(tmp_path / "out.txt", "a") as f:
        f.write("c\n")  # torn: part of batch 1 reached the file
    sink.commit([stage(1, ["c", "d"])], CommitContext("app", 1))  # Spark replays batch 1
    sink.commit([stage(1, ["c", "d"])], CommitContext("app", 1))  # and a replay after success is skipped
    assert (tmp_path / "out.txt").read_text() == "a\nb\nc\nd\n"


@pytest.mark.parametrize("config, key", [
    ({"connector.class": "FileStreamSink"}, "file"),
    ({"connector.class": "FileStreamSink", "file": "/tmp/x", "fiel": "y"}, "fiel"),
    ({"connector.class": "FileStreamSink", "file": "/tmp/x", "topics": "a", "topics.regex": "b"}, "topics"),
])
def test_sink_config_errors_name_the_key(config, key):
    with pytest.raises(ConfigError) as info:
        build_connector(config, kind="sink")
    assert key in info.value.keys
