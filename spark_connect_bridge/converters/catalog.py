"""Built-in plugins of this family: every name each one answers to. Kept import-free."""

from ..core.plugins import PluginSpec

_M = "spark_connect_bridge.converters"


def _names(java: str, *extra: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((java, java.rsplit(".", 1)[-1], *extra)))


CATALOG: list[PluginSpec] = [
    PluginSpec("converter", f"{_M}.json:JsonConverter", _names("org.apache.kafka.connect.json.JsonConverter", "json"),
               "JSON with or without the {schema, payload} envelope (also a header converter)."),
    PluginSpec("converter", f"{_M}.simple:StringConverter",
               _names("org.apache.kafka.connect.storage.StringConverter", "string"), "Text in converter.encoding."),
    PluginSpec("converter", f"{_M}.simple:ByteArrayConverter",
               _names("org.apache.kafka.connect.converters.ByteArrayConverter", "bytes", "bytearray"),
               "Bytes unchanged."),
    PluginSpec("converter", f"{_M}.simple:ShortConverter",
               _names("org.apache.kafka.connect.converters.ShortConverter", "short"), "int16, 2 bytes big-endian."),
    PluginSpec("converter", f"{_M}.simple:IntegerConverter",
               _names("org.apache.kafka.connect.converters.IntegerConverter", "integer", "int"),
               "int32, 4 bytes big-endian."),
    PluginSpec("converter", f"{_M}.simple:LongConverter",
               _names("org.apache.kafka.connect.converters.LongConverter", "long"), "int64, 8 bytes big-endian."),
    PluginSpec("converter", f"{_M}.simple:FloatConverter",
               _names("org.apache.kafka.connect.converters.FloatConverter", "float"), "float32, IEEE 754."),
    PluginSpec("converter", f"{_M}.simple:DoubleConverter",
               _names("org.apache.kafka.connect.converters.DoubleConverter", "double"), "float64, IEEE 754."),
    PluginSpec("converter", f"{_M}.simple:BooleanConverter",
               _names("org.apache.kafka.connect.converters.BooleanConverter", "boolean"), "One byte 0/1."),
    PluginSpec("header_converter", f"{_M}.header:SimpleHeaderConverter",
               _names("org.apache.kafka.connect.storage.SimpleHeaderConverter", "simple"),
               "Header values as UTF-8 text."),
    PluginSpec("converter", f"{_M}.avro:AvroConverter",
               _names("io.confluent.connect.avro.AvroConverter", "avro"),
               "Avro in the Confluent wire format with a Schema Registry."),
    PluginSpec("converter", f"{_M}.json_schema:JsonSchemaConverter",
               _names("io.confluent.connect.json.JsonSchemaConverter", "json-schema", "jsonschema"),
               "JSON with a JSON Schema in the Confluent wire format with a Schema Registry."),
]
