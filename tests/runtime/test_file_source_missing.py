"""A FileStreamSource on a file that does not exist says so (once) and waits for it, as Kafka's task does,
instead of reporting 0 records in silence."""

from __future__ import annotations

import logging

from spark_connect_bridge.connectors.factory import build_connector


def test_a_missing_file_is_warned_about_once_and_read_once_it_exists(tmp_path, caplog):
    path = tmp_path / "orders.txt"
    src = build_connector({"name": "local-file-source", "connector.class": "FileStreamSource",
                           "file": str(path), "topic": "connect-test"}, kind="source")
    start = src.initial_offsets()
    with caplog.at_level(logging.INFO, logger="spark_connect_bridge.connectors.file"):
        assert src.latest_offsets(start, None, None) == start
        assert src.latest_offsets(start, None, None) == start  # the next trigger: no second warning
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [f"local-file-source: couldn't find file {path} for FileStreamSource, waiting for it "
                            f"to be created (0 records until then)"]
        path.write_text("first\nsecond\n")
        end = src.latest_offsets(start, None, None)
    assert end == {f'{{"filename":"{path}"}}': {"position": 13}}
    assert any("exists now" in r.getMessage() for r in caplog.records)
