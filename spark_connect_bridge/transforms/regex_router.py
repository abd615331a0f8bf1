"""RegexRouter: rename the topic with a Java regular expression."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type
from ..config.validators import Lambda
from ..errors import ConfigProblem
from .base import Step, Transformation
from .regex import anchored, group_count, java_regex_problem, replacement_problem

__all__ = ["RegexRouter"]


class RegexRouter(Transformation):
    """Update the record topic with ``replacement`` when ``regex`` matches the *whole* topic (Java regex and
    replacement syntax: ``$1``, ``${name}``, ``\\$``). A reference to a group the regex does not have is a
    config error (Kafka fails every record)."""

    kafka_class = "org.apache.kafka.connect.transforms.RegexRouter"
    config_def = (
        ConfigDef()
        .define("regex", Type.STRING, validator=Lambda(java_regex_problem, "valid regex"),
                importance=Importance.HIGH, doc="Regular expression to use for matching.")
        .define("replacement", Type.STRING, importance=Importance.HIGH, doc="Replacement string.")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        reason = replacement_problem(config["replacement"], group_count(config["regex"]))
        if reason:
            return [ConfigProblem("replacement", f"Invalid value {config['replacement']} for configuration "
                                                 f"replacement: {reason}")]
        return []

    def configure(self, config: Config) -> None:
        self.pattern = anchored(config["regex"])
        self.replacement = config["replacement"]

    def plan(self, df: DataFrame) -> Step:
        # The pattern is anchored (^...\z), so it matches at most once, at the start, and only when it
        # matches the whole topic: one regexp_replace is Java's matches() + replaceFirst().
        return Step({"topic": F.regexp_replace(F.col("topic"), F.lit(self.pattern), F.lit(self.replacement))})
