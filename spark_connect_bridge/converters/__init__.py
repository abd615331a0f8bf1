"""Converters: Kafka Connect's bytes <-> typed values, as Column expressions.

* :class:`JsonConverter`, :class:`StringConverter`, :class:`ByteArrayConverter`, the primitive converters
  (:class:`ShortConverter` ... :class:`BooleanConverter`), :class:`SimpleHeaderConverter`, and
  :class:`AvroConverter` (Confluent wire format; Spark's native ``from_avro``/``to_avro`` when spark-avro is
  loaded, a vectorised fastavro engine otherwise), :class:`JsonSchemaConverter` (JSON with a JSON Schema in the
  Confluent wire format);
* :func:`apply_source_converters` / :func:`apply_sink_converters`: the ``key.converter``/``value.converter``/
  ``header.converter`` wiring of a Kafka Connect config;
* :class:`SchemaRegistryClient` and the embedded Confluent-compatible registry (:mod:`.registry_server`).

Submodules are imported lazily so that ``import spark_connect_bridge.converters`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Converter", "HeaderConverter", "Conversion", "JsonConverter", "StringConverter", "ByteArrayConverter",
           "ShortConverter", "IntegerConverter", "LongConverter", "FloatConverter", "DoubleConverter",
           "BooleanConverter", "SimpleHeaderConverter", "AvroConverter", "JsonSchemaConverter", "SchemaRegistryClient",
           "SchemaRegistryError", "apply_source_converters", "apply_sink_converters", "build_converters"]

_WHERE = {
    "Converter": "base", "HeaderConverter": "base", "Conversion": "base",
    "JsonConverter": "json",
    "StringConverter": "simple", "ByteArrayConverter": "simple", "ShortConverter": "simple",
    "IntegerConverter": "simple", "LongConverter": "simple", "FloatConverter": "simple", "DoubleConverter": "simple",
    "BooleanConverter": "simple",
    "SimpleHeaderConverter": "header",
    "AvroConverter": "avro",
    "JsonSchemaConverter": "json_schema",
    "SchemaRegistryClient": "schema_registry", "SchemaRegistryError": "schema_registry",
    "apply_source_converters": "wiring", "apply_sink_converters": "wiring", "build_converters": "wiring",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
