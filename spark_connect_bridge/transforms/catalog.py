"""Built-in plugins of this family: every name each one answers to. Kept import-free."""

from ..core.plugins import PluginSpec

_KAFKA = "org.apache.kafka.connect.transforms"
_MOD = "spark_connect_bridge.transforms"

# (module, class, has Key/Value variants, Java class name or None)
_TRANSFORMS = [
    ("cast", "Cast", True, f"{_KAFKA}.Cast"),
    ("drop_headers", "DropHeaders", False, f"{_KAFKA}.DropHeaders"),
    ("extract_field", "ExtractField", True, f"{_KAFKA}.ExtractField"),
    ("filter", "Filter", False, f"{_KAFKA}.Filter"),
    ("flatten", "Flatten", True, f"{_KAFKA}.Flatten"),
    ("header_from", "HeaderFrom", True, f"{_KAFKA}.HeaderFrom"),
    ("hoist_field", "HoistField", True, f"{_KAFKA}.HoistField"),
    ("insert_field", "InsertField", True, f"{_KAFKA}.InsertField"),
    ("insert_header", "InsertHeader", False, f"{_KAFKA}.InsertHeader"),
    ("mask_field", "MaskField", True, f"{_KAFKA}.MaskField"),
    ("regex_router", "RegexRouter", False, f"{_KAFKA}.RegexRouter"),
    ("replace_field", "ReplaceField", True, f"{_KAFKA}.ReplaceField"),
    ("set_schema_metadata", "SetSchemaMetadata", True, f"{_KAFKA}.SetSchemaMetadata"),
    ("timestamp_converter", "TimestampConverter", True, f"{_KAFKA}.TimestampConverter"),
    ("timestamp_router", "TimestampRouter", False, f"{_KAFKA}.TimestampRouter"),
    ("value_to_key", "ValueToKey", False, f"{_KAFKA}.ValueToKey"),
    ("extract_new_record_state", "ExtractNewRecordState", False, "io.debezium.transforms.ExtractNewRecordState"),
    ("outbox_event_router", "EventRouter", False, "io.debezium.transforms.outbox.EventRouter"),
    ("by_logical_table_router", "ByLogicalTableRouter", False, "io.debezium.transforms.ByLogicalTableRouter"),
    ("extract_changed_record_state", "ExtractChangedRecordState", False,
     "io.debezium.transforms.ExtractChangedRecordState"),
    ("explode", "Explode", True, None),
    ("sql", "SqlTransform", False, None),
]

_PREDICATES = ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"]


def _transform_specs() -> list[PluginSpec]:
    specs = []
    for module, cls, variants, java in _TRANSFORMS:
        target = f"{_MOD}.{module}:{cls}"
        if variants:
            for v in ("Value", "Key"):
                names = [f"{java}${v}"] if java else []
                names += [f"{_MOD}.{cls}${v}", f"{cls}${v}", f"{cls}.{v}", f"{_MOD}.{module}.{cls}.{v}"]
                specs.append(PluginSpec("transformation", f"{target}.{v}", tuple(dict.fromkeys(names))))
        else:
            names = [java] if java else []
            names += [f"{_MOD}.{cls}", cls, f"{_MOD}.{module}.{cls}"]
            if cls == "SqlTransform":
                names += ["Sql", f"{_MOD}.Sql"]
            if cls == "ExtractNewRecordState":
                names += ["UnwrapFromEnvelope", "unwrap"]
            specs.append(PluginSpec("transformation", target, tuple(dict.fromkeys(names))))
    for cls in _PREDICATES:
        specs.append(PluginSpec("predicate", f"{_MOD}.predicates:{cls}",
                                (f"{_KAFKA}.predicates.{cls}", cls, f"{_MOD}.predicates.{cls}")))
    return specs


CATALOG: list[PluginSpec] = _transform_specs()
