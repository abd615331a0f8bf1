"""Kafka's predicates (``org.apache.kafka.connect.transforms.predicates``) as boolean Columns."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..config import ConfigDef, Importance, NonEmptyString, Type
from ..config.validators import Lambda, all_of
from .base import Predicate, tombstone
from .regex import anchored, java_regex_problem

__all__ = ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"]

_PKG = "org.apache.kafka.connect.transforms.predicates"


class TopicNameMatches(Predicate):
    """True for records whose topic matches the Java regular expression ``pattern`` as a whole."""

    liftable = True
    kafka_class = f"{_PKG}.TopicNameMatches"
    config_def = ConfigDef().define(
        "pattern", Type.STRING, validator=all_of(NonEmptyString(), Lambda(java_regex_problem, "valid regex")),
        importance=Importance.MEDIUM, doc="A Java regular expression matched against the whole topic name.")

    def test(self, df: DataFrame) -> Column:
        return F.col("topic").isNotNull() & F.col("topic").rlike(anchored(self.config.pattern))


class HasHeaderKey(Predicate):
    """True for records with at least one header with the given key."""

    liftable = True
    kafka_class = f"{_PKG}.HasHeaderKey"
    config_def = ConfigDef().define("name", Type.STRING, validator=NonEmptyString(), importance=Importance.MEDIUM,
                                    doc="The header name.")

    def test(self, df: DataFrame) -> Column:
        name = self.config.name
        return F.coalesce(F.exists(F.col("headers"), lambda h: h["key"] == F.lit(name)), F.lit(False))


class RecordIsTombstone(Predicate):
    """True for tombstones: records whose value is null."""

    liftable = True
    kafka_class = f"{_PKG}.RecordIsTombstone"
    config_def = ConfigDef()

    def test(self, df: DataFrame) -> Column:
        return tombstone(df, "value")

    def null_columns(self, outcome: bool) -> frozenset[str]:
        return frozenset({"value"}) if outcome else frozenset()
