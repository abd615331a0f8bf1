"""Every catalogued converter resolves, by each of its names, to a class that declares its config."""

from __future__ import annotations

import pytest

from spark_connect_bridge.converters.base import Converter
from spark_connect_bridge.converters.catalog import CATALOG
from spark_connect_bridge.core.plugins import resolve_class
from spark_connect_bridge.errors import PluginNotFoundError


@pytest.mark.parametrize("spec", CATALOG, ids=[s.names[1] for s in CATALOG])
def test_catalog_entry_resolves_by_every_name(spec):
    cls = spec.load()
    assert issubclass(cls, Converter) and cls.plugin_type == spec.type
    assert cls.class_name == spec.class_name
    assert cls.config_def.to_markdown()
    for name in spec.names:
        assert resolve_class("converter", name, key="value.converter") is cls


def test_unknown_converter_names_the_key_and_suggests():
    with pytest.raises(PluginNotFoundError) as e:
        resolve_class("converter", "org.apache.kafka.connect.json.JsonConverer", key="value.converter")
    assert e.value.keys == ["value.converter"] and "JsonConverter" in str(e.value)
