"""RegexRouter: rename the topic with a Java regular expression."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type
from ..config.validators import Lambda
from ..errors import ConfigProblem
from .base import Step, Transformation
from .regex import (
    LINE_TERMINATORS,
    anchored,
    group_count,
    java_regex_problem,
    replacement_parts,
    replacement_problem,
    simple_shape,
)

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
        shape = simple_shape(config["regex"])
        parts = replacement_parts(config["replacement"]) if shape else None
        max_group = 1 if shape and shape[2] else 0
        ok = parts is not None and all(not isinstance(p, int) or p <= max_group for p in parts)
        self.fast = (shape, parts) if ok else None

    def _fast(self, topic: Column) -> Column:
        """``literal`` / ``literal(.*)literal`` patterns with plain string functions (no regex per record):
        same result as Java's ``matches()`` + ``replaceFirst()``."""
        assert self.fast is not None
        (pre, suf, group), parts = self.fast
        assert parts is not None
        if not group:
            match = topic == F.lit(pre)
            g1 = topic
        else:
            n = len(pre) + len(suf)
            match = topic.startswith(pre) & topic.endswith(suf) & (F.length(topic) >= F.lit(n))
            g1 = F.substring(topic, len(pre) + 1, F.length(topic) - F.lit(n))
            # '.' does not match a line terminator; when prefix and suffix hold none, checking the whole
            # topic is the same as checking the group, and cheaper.
            scope = topic if not any(t in pre + suf for t in LINE_TERMINATORS) else g1
            for t in LINE_TERMINATORS:  # contains() compares bytes; instr() walks characters (slower)
                match = match & ~scope.contains(t)
        pieces = [F.lit(p) if isinstance(p, str) else (topic if p == 0 else g1) for p in parts]
        new = F.concat(*pieces) if pieces else F.lit("")
        return F.when(match, new).otherwise(topic)

    def plan(self, df: DataFrame) -> Step:
        if self.fast is not None:
            return Step({"topic": self._fast(F.col("topic"))})
        # The pattern is anchored (^...\z), so it matches at most once, at the start, and only when it
        # matches the whole topic: one regexp_replace is Java's matches() + replaceFirst().
        return Step({"topic": F.regexp_replace(F.col("topic"), F.lit(self.pattern), F.lit(self.replacement))})
