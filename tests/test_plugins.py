"""Plugin resolution: Kafka aliases, Java class names, Python paths, entry points; clear errors."""

from __future__ import annotations

import sys

import pytest

from spark_connect_bridge.connectors.file import FileStreamSourceConnector
from spark_connect_bridge.core import plugins
from spark_connect_bridge.errors import ConfigError, PluginNotFoundError


@pytest.mark.parametrize("name", ["FileStreamSource", "FileStreamSourceConnector", "file-source",
                                  "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                  "spark_connect_bridge.connectors.file.FileStreamSourceConnector",
                                  "spark_connect_bridge.connectors.file:FileStreamSourceConnector"])
def test_every_name_resolves_to_the_same_class(name):
    assert plugins.resolve_class("connector", name) is FileStreamSourceConnector


def test_unknown_class_lists_known_names_and_nearest_match():
    with pytest.raises(PluginNotFoundError) as info:
        plugins.resolve_class("connector", "FileStreamSourc")
    msg = str(info.value)
    assert 'Did you mean "FileStreamSource' in msg and "DatagenConnector" in msg
    assert info.value.keys == ["connector.class"]


def test_a_class_of_the_wrong_family_is_rejected():
    with pytest.raises(ConfigError, match="is not a connector plugin"):
        plugins.resolve_class("connector", "spark_connect_bridge.errors.ConfigError")


def test_entry_point_plugins_are_found(tmp_path, monkeypatch):
    pkg = tmp_path / "kc_extra_plugin.py"
    pkg.write_text("from spark_connect_bridge.connectors.file import FileStreamSinkConnector\n"
                   "class MySink(FileStreamSinkConnector):\n    pass\n")
    dist = tmp_path / "kc_extra_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kc-extra-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[spark_connect_bridge.connectors]\nMySink = kc_extra_plugin:MySink\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = plugins.resolve_class("connector", "MySink")
    assert cls.__name__ == "MySink" and cls.__module__ == "kc_extra_plugin"
    assert "MySink" in {r["class"] for r in plugins.describe_all(["connector"])} | \
        {n for s in plugins.all_specs("connector") for n in s.names}
    sys.modules.pop("kc_extra_plugin", None)
