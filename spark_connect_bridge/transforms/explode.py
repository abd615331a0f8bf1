"""Explode (beyond Kafka Connect): one record per element of an array field."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from ..config import CaseInsensitiveValidString, Config, ConfigDef, Importance, Type
from ..core.record_errors import drop_where, ok
from ..errors import ConfigError, ConfigProblem
from .base import KeyOrValue, key_value_variants, type_name
from .columns import q
from .extract_field import FIELD_SYNTAX_DOC
from .fieldpath import SYNTAX_VERSIONS, parse_path
from .insert_header import append_headers

__all__ = ["Explode"]

_POS, _ELEM = "_kc_explode_pos", "_kc_explode_elem"


@key_value_variants
class Explode(KeyOrValue):
    """Turn a record whose ``field`` is an array into one record per element, the array replaced by the
    element (with an empty ``field`` the key/value itself is the array and becomes the element).

    Offsets stay meaningful: every output record keeps its source record's ``topic``, ``partition`` and
    ``offset`` (so a replay or a dead-letter record points at the source record), and the element's
    0-based index is appended as the header ``index.header`` (text, e.g. ``2``); together ``(offset,
    index)`` identify an output record. A record whose array is empty or null is dropped (``keep.empty=true``
    keeps it, with the field null and no index header). A tombstone is dropped unless ``keep.empty``.
    The element type replaces the array type, so this transform cannot take a predicate.
    """

    kafka_base = "spark_connect_bridge.transforms.Explode"
    predicate_problem = ("Explode replaces an array by its element type, and a predicated stage would leave "
                         "non-matching records with the array type in the same column")
    config_def = (
        ConfigDef()
        .define("field", Type.STRING, "", importance=Importance.HIGH,
                doc="The array field to explode; empty means the whole key/value is the array.")
        .define("field.syntax.version", Type.STRING, "V1", CaseInsensitiveValidString(*SYNTAX_VERSIONS),
                Importance.MEDIUM, FIELD_SYNTAX_DOC)
        .define("index.header", Type.STRING, "kc.explode.index", importance=Importance.MEDIUM,
                doc="Header that receives the element index (text); empty for none.")
        .define("keep.empty", Type.BOOLEAN, False, importance=Importance.LOW,
                doc="Keep records whose array is empty or null (field set to null) instead of dropping them.")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        if config.field:
            try:
                parse_path(config.field, config.field_syntax_version)
            except ValueError as e:
                return [ConfigProblem("field", f"Invalid value {config['field']} for configuration field: {e}")]
        return []

    def configure(self, config: Config) -> None:
        self.steps = parse_path(config.field, config.field_syntax_version) if config.field else []
        self.header = config.index_header
        self.keep_empty = config.keep_empty

    def _key(self, name: str) -> str:
        return f"transforms.{self.alias}.{name}" if self.alias else name

    def apply(self, df: DataFrame, *, alias: str | None = None, condition: Column | None = None,
              unchanged_nulls: frozenset[str] = frozenset()) -> DataFrame:
        if condition is not None or self.predicate is not None:
            key = f"transforms.{alias or self.alias}.predicate" if (alias or self.alias) else "predicate"
            raise ConfigError([ConfigProblem(key, f"Invalid value for configuration {key}: {self.predicate_problem}")])
        sf = df.schema[self.target]
        # Walk the path through structs.
        types, cols = [sf.dataType], [F.col(self.target)]
        for step in self.steps:
            cur = types[-1]
            if not isinstance(cur, StructType) or step not in cur.fieldNames():
                raise ConfigError([ConfigProblem(self._key("field"), (
                    f"Invalid value {'.'.join(self.steps)} for configuration {self._key('field')}: the {self.target} "
                    f"({type_name(sf.dataType)}) has no struct field {step!r} on that path"))])
            types.append(cur[step].dataType)
            cols.append(cols[-1].getField(step))
        arr_t = types[-1]
        if not isinstance(arr_t, ArrayType):
            raise ConfigError([ConfigProblem(self._key("field"), (
                f"Invalid value {'.'.join(self.steps) or '(whole ' + self.target + ')'} for configuration "
                f"{self._key('field')}: expected an array, found {type_name(arr_t)}"))])
        run = ok(df)
        arr = F.when(run, cols[-1]).otherwise(F.array(F.lit(None).cast(arr_t.elementType)))
        exploded = df.select("*", F.posexplode_outer(arr).alias(_POS, _ELEM))
        elem = F.col(_ELEM)
        # Rebuild the path bottom-up with the element in place of the array.
        new = elem
        for i in range(len(self.steps) - 1, -1, -1):
            parent = cols[i]
            new = F.when(parent.isNull(), F.lit(None)).otherwise(parent.withField(q(self.steps[i]), new)) \
                if i else parent.withField(q(self.steps[i]), new)
        if self.steps:
            new = F.when(F.col(self.target).isNull(), F.lit(None)).otherwise(new)
        updates = {self.target: new}
        if self.header:
            updates["headers"] = F.when(F.col(_POS).isNull(), F.col("headers")).otherwise(
                append_headers([(self.header, F.col(_POS).cast("string").cast("binary"))]))
        out = exploded.withColumns(updates).withMetadata(self.target, dict(sf.metadata) if self.steps else {})
        if not self.keep_empty:
            out = drop_where(out, F.col(_POS).isNull() & run)
        return out.drop(_POS, _ELEM)
