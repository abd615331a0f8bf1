"""Spark's per-row Arrow batch size check is off for the writes of a sink that holds its task's records (the
object-store sinks), and only for them, only while they write, and never over a value the session sets."""

from __future__ import annotations

from spark_connect_bridge.connectors.base import SinkConnector
from spark_connect_bridge.connectors.storage.s3 import S3SinkConnector
from spark_connect_bridge.engine.arrow_hand_off import MAX_BYTES_KEY, python_writer_batches


class _Conf:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class _Session:
    def __init__(self, **values: str):
        self.conf = _Conf(dict(values))


def test_an_object_store_write_runs_without_the_check_and_the_session_is_left_as_it_was():
    session = _Session()
    assert S3SinkConnector.holds_task
    with python_writer_batches(session, S3SinkConnector):
        assert session.conf.get(MAX_BYTES_KEY) == "2147483647"
    assert session.conf.values == {}


def test_other_sinks_and_a_value_the_session_sets_are_left_alone():
    session = _Session()
    with python_writer_batches(session, SinkConnector):
        assert session.conf.values == {}
    mine = _Session(**{MAX_BYTES_KEY: "16m"})
    with python_writer_batches(mine, S3SinkConnector):
        assert mine.conf.get(MAX_BYTES_KEY) == "16m"
    assert mine.conf.values == {MAX_BYTES_KEY: "16m"}


def test_the_setting_is_unset_when_the_write_fails():
    session = _Session()
    try:
        with python_writer_batches(session, S3SinkConnector):
            raise RuntimeError("the write failed")
    except RuntimeError:
        pass
    assert session.conf.values == {}
