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
from .by_logical_table_router import ByLogicalTableRouter
from .cast import Cast
from .catalog import CATALOG
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
from .outbox_event_router import EventRouter
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
    "EventRouter", "ByLogicalTableRouter",
    "TopicNameMatches", "HasHeaderKey", "RecordIsTombstone",
]


_NOTES = """\
How Kafka Connect's record-by-record semantics map onto typed DataFrame columns:

* **Struct, Map, primitive.** A struct `value`/`key` is schema'd data, a `map<string,X>` is Kafka's schemaless
  Map, other types are primitives. Spark knows the type of every column, so a transform picks its behaviour
  from the schema once, not per record. A schemaless Map holds one value type: a change that needs another
  value type (e.g. `Cast` of one Map entry to `int32` in a `map<string,string>`) is rejected with a
  `ConfigError` when the chain is applied, rather than producing mixed types.
* **Record errors.** Where Kafka throws for one record (a string that does not parse, a tombstone given to
  `MaskField`), the record fails: strict mode fails the query naming the alias and the record's
  topic/partition/offset; tolerant mode (`_kc_error`) marks exactly that record for the dead-letter sink.
  Where Kafka would throw for *every* record because of the schema (a field the struct lacks), every
  non-null record fails the same way.
* **Predicates.** A stage runs for a record iff it has no predicate, or `negate` XOR the predicate holds;
  other records keep their columns. One column has one type, so when a predicated stage changes the type of
  `key`/`value`, both branches are unified: equal types, or structs merged by field name (fields missing on
  one side are null for it). A `$Value` stage that skips tombstones (`RecordIsTombstone` with `negate=true`)
  keeps its own type, as in Kafka: the records it leaves unchanged are null. Anything else (e.g. `ExtractField`
  under a predicate, Kafka's own documented example) makes the column a VARIANT holding both shapes, as a
  schemaless value: later stages follow Kafka's schemaless rules on it and JsonConverter writes it without a
  schema (Kafka writes each record's own schema). `SetSchemaMetadata` and
  `Explode` never take a predicate (column metadata is per column; an exploded array changes type): that is
  reported when the chain is built.
* **Dropped records** (`Filter`, `ExtractNewRecordState`, `Sql` filter, `Explode` of an empty array) skip
  the rest of the chain; a record that already failed is never dropped (it goes to the dead-letter sink).
* **Headers** are `array<struct<key:string,value:binary>>`, an append-only multimap. `HeaderFrom`,
  `InsertHeader` and `ExtractNewRecordState` write values as Kafka's `SimpleHeaderConverter` does: UTF-8 of
  `Values.convertToString` (strings as they are, numbers and booleans as Java prints them, bytes in Base64,
  Date/Time/Timestamp in ISO form, structs/maps/arrays in Connect's JSON-like form via `to_json`).
* **`replace.null.with.default`** is accepted everywhere Kafka has it, with no effect: Spark types carry no
  default values.
* **Time zones.** Date formats are Java `SimpleDateFormat` patterns translated to Spark's (what cannot be
  translated faithfully is rejected) and applied in UTC whatever the session time zone; a pattern letter
  that prints a zone (`z`, `Z`, `X`) prints the session zone, so keep `spark.sql.session.timeZone=UTC`.
"""


def reference_markdown() -> str:
    """A generated reference of every built-in transform and predicate: names, description, config table."""

    seen: dict[str, list[str]] = {}
    order: list[str] = []
    for spec in CATALOG:
        base = spec.target.rsplit(".", 1)[0] if spec.target.endswith((".Key", ".Value")) else spec.target
        if base not in seen:
            seen[base] = []
            order.append(base)
        # The reported class name, then the short names (no package).
        seen[base].extend([spec.names[0]] + [n for n in spec.names if "." not in n])
    out = ["## Transforms and predicates reference", "",
           ("Generated from each plugin's config declaration "
            "(`spark_connect_bridge.transforms.reference_markdown()`)."), "", _NOTES, ""]
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
