"""Kafka Connect's single message transforms (SMTs) and predicates as DataFrame transforms.

Every SMT compiles to Column expressions (no Python UDFs, no actions), so a chain is one projection in
Spark's generated code. Use a connector config::

    >>> out = apply_transforms(df, {                                     # doctest: +SKIP
    ...     "transforms": "mask,route",
    ...     "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    ...     "transforms.mask.fields": "ssn",
    ...     "transforms.route.type": "RegexRouter",
    ...     "transforms.route.regex": "db\\\\.(.*)", "transforms.route.replacement": "$1"})

or Python objects::

    >>> out = df.transform(MaskField.Value(fields=["ssn"]))             # doctest: +SKIP
"""

from __future__ import annotations

from .base import Predicate, Step, Transformation
from .cast import Cast
from .chain import Chain, Stage, apply_transforms, build_chain
from .drop_headers import DropHeaders
from .explode import Explode
from .extract_field import ExtractField
from .extract_new_record_state import ExtractNewRecordState
from .filter import Filter
from .flatten import Flatten
from .header_from import HeaderFrom
from .hoist_field import HoistField
from .insert_field import InsertField
from .insert_header import InsertHeader
from .mask_field import MaskField
from .predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from .regex_router import RegexRouter
from .replace_field import ReplaceField
from .set_schema_metadata import SetSchemaMetadata
from .sql import SqlTransform
from .timestamp_converter import TimestampConverter
from .timestamp_router import TimestampRouter
from .value_to_key import ValueToKey

__all__ = [
    "apply_transforms", "build_chain", "Chain", "Stage", "Transformation", "Predicate", "Step",
    "reference_markdown",
    "Cast", "DropHeaders", "ExtractField", "Filter", "Flatten", "HeaderFrom", "HoistField", "InsertField",
    "InsertHeader", "MaskField", "RegexRouter", "ReplaceField", "SetSchemaMetadata", "TimestampConverter",
    "TimestampRouter", "ValueToKey", "ExtractNewRecordState", "Explode", "SqlTransform",
    "TopicNameMatches", "HasHeaderKey", "RecordIsTombstone",
]


def reference_markdown() -> str:
    """A generated reference of every built-in transform and predicate: names, description, config table."""
    from .catalog import CATALOG

    seen: dict[str, list[str]] = {}
    order: list[str] = []
    for spec in CATALOG:
        base = spec.target.rsplit(".", 1)[0] if spec.target.endswith((".Key", ".Value")) else spec.target
        if base not in seen:
            seen[base] = []
            order.append(base)
        seen[base].extend(n for n in spec.names if "$" in n or "." not in n)
    out = ["## Transforms and predicates reference", "",
           "Generated from each plugin's config declaration "
           "(`spark_connect_bridge.transforms.reference_markdown()`).", ""]
    for base in order:
        module, _, attr = base.partition(":")
        import importlib

        cls = getattr(importlib.import_module(module), attr)
        kind = "Predicate" if getattr(cls, "plugin_type", "") == "predicate" else "Transform"
        out.append(f"### {attr}")
        out.append("")
        names = ", ".join(f"`{n}`" for n in dict.fromkeys(seen[base]))
        out.append(f"*{kind}.* Names: {names}")
        out.append("")
        out.append(" ".join((cls.__doc__ or "").split()))
        out.append("")
        if len(cls.config_def):
            out.append(cls.config_def.to_markdown())
        else:
            out.append("No configuration.")
        out.append("")
    return "\n".join(out)
