"""Debezium's ByLogicalTableRouter: route the change events of several physical tables to one logical topic."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    VariantType,
)

from ..config import Config, ConfigDef, Importance, Type
from ..config.validators import Lambda
from ..converters.connect_schema import with_optional
from ..core.topic_schemas import renamed_topics
from ..errors import ConfigProblem
from .base import Step, Transformation, java_class_of_variant, type_name
from .columns import q
from .regex import anchored, group_count, java_regex_problem, rename_on_driver, replacement_problem

__all__ = ["ByLogicalTableRouter"]

_ORIGINAL = "io.debezium.transforms.ByLogicalTableRouter"


#: the Java class of a key's value, by Spark type (the error messages name it)
_JAVA_CLASSES = {StringType: "java.lang.String", BinaryType: "[B", LongType: "java.lang.Long",
                 IntegerType: "java.lang.Integer", BooleanType: "java.lang.Boolean", DoubleType: "java.lang.Double"}


def _regex_problem(pattern: str | None) -> str | None:
    return None if pattern is None else java_regex_problem(pattern)


class ByLogicalTableRouter(Transformation):
    """Rename the topic with ``topic.replacement`` where ``topic.regex`` matches the whole topic (Java syntax,
    as RegexRouter). With ``key.enforce.uniqueness`` (default) a struct key of a rerouted record gets the field
    ``key.field.name`` holding the original topic, or ``key.field.replacement`` applied to it where
    ``key.field.regex`` matches: rows of different tables with the same primary key stay distinct (a rerouted
    record whose key is no struct fails, as in Debezium). A Spark
    column has one type, so records whose topic does not match carry that key field as null; a null key stays
    null. Values are not changed."""

    kafka_class = _ORIGINAL
    config_def = (
        ConfigDef()
        .define("topic.regex", Type.STRING, validator=Lambda(java_regex_problem, "valid regex"),
                importance=Importance.LOW,
                doc="The regex used for extracting the name of the logical table from the original topic name.")
        .define("topic.replacement", Type.STRING, importance=Importance.LOW,
                doc="The replacement string used in conjunction with topic.regex.")
        .define("key.enforce.uniqueness", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Augment each record's key with a field denoting the source topic.")
        .define("key.field.name", Type.STRING, "__dbz__physicalTableIdentifier", importance=Importance.LOW,
                doc="The name of the key field holding the physical table identifier.")
        .define("key.field.regex", Type.STRING, None, validator=Lambda(_regex_problem, "valid regex"),
                importance=Importance.LOW,
                doc="The regex used for extracting the physical table identifier from the original topic name.")
        .define("key.field.replacement", Type.STRING, None, importance=Importance.LOW,
                doc="The replacement string used in conjunction with key.field.regex.")
        .accept(_ORIGINAL, group="Accepted (Debezium)", no_effect={
            "logical.table.cache.size": "Spark evaluates the regex per record as a column expression: no cache",
        })
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        problems = []
        if (config.key_field_regex is None) != (config.key_field_replacement is None):
            missing, other = (("key.field.regex", "key.field.replacement") if config.key_field_regex is None
                              else ("key.field.replacement", "key.field.regex"))
            problems.append(ConfigProblem(missing, f"Missing required configuration \"{missing}\": {other} is set"))
        for regex, repl in (("topic.regex", "topic.replacement"), ("key.field.regex", "key.field.replacement")):
            if config[regex] is None or config[repl] is None:
                continue
            reason = replacement_problem(config[repl], group_count(config[regex]))
            if reason:
                problems.append(ConfigProblem(repl, f"Invalid value {config[repl]} for configuration {repl}: "
                                                    f"{reason}"))
        return problems

    def configure(self, config: Config) -> None:
        self.regex = config.topic_regex
        self.replacement = config.topic_replacement
        self.unique = config.key_enforce_uniqueness
        self.key_field = config.key_field_name
        self.key_regex = config.key_field_regex
        self.key_replacement = config.key_field_replacement

    def plan(self, df: DataFrame) -> Step:
        topic = F.col("topic")
        pattern = anchored(self.regex)
        matches = topic.rlike(pattern)
        step = Step({"topic": F.regexp_replace(topic, F.lit(pattern), F.lit(self.replacement))})
        key_t = df.schema["key"].dataType
        if self.unique and isinstance(key_t, StructType):
            ident = topic
            if self.key_regex is not None:
                ident = F.regexp_replace(topic, F.lit(anchored(self.key_regex)), F.lit(self.key_replacement))
            key = F.col("key")
            new = key.withField(q(self.key_field), F.when(matches, ident).otherwise(F.lit(None).cast("string")))
            # update_fields drops field metadata: a cast to the output type restores it
            # (Debezium's field is a required string: the records whose topic does not match have none)
            ident_f = StructField(self.key_field, StringType(), True, with_optional({}, False))
            out_t = StructType([ident_f if f.name == self.key_field else f for f in key_t.fields]
                               + ([] if self.key_field in key_t.fieldNames() else [ident_f]))
            step.updates["key"] = F.when(key.isNull(), F.lit(None)).otherwise(new).cast(out_t)
        elif self.unique:
            # Debezium adds the field to a rerouted record's key with requireStruct: a key that is no Struct fails
            found = java_class_of_variant(F.col("key")) if isinstance(key_t, VariantType) else \
                F.lit(_JAVA_CLASSES.get(type(key_t), type_name(key_t)))
            step.fail(matches & F.col("key").isNotNull(),
                      F.concat(F.lit("Only Struct objects supported for [Updating schema], found: "), found))
        step.metadata.update(renamed_topics(df.schema, self._rename))
        return step

    def _rename(self, topic: str) -> str | None:
        """The new name of one topic, on the driver (None where Python's regex cannot tell)."""
        return rename_on_driver(self.regex, self.replacement, topic)
