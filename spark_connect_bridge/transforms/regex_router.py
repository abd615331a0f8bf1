"""RegexRouter: rename the topic with a Java regular expression."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type
from ..config.validators import Lambda
from ..core.topic_schemas import renamed_topics
from ..errors import ConfigProblem
from .base import Step, Transformation
from .regex import (
    LINE_TERMINATORS,
    anchored,
    group_count,
    java_regex_problem,
    rename_on_driver,
    replacement_parts,
    replacement_problem,
    simple_shape,
)

__all__ = ["RegexRouter"]


class RegexRouter(Transformation):
    """Update the record topic with ``replacement`` when ``regex`` matches the *whole* topic (Java regex and
    replacement syntax: ``$1``, ``${name}``, ``\\$``). A reference to a group the regex does not have is a
    config error (Kafka fails every record)."""

    liftable = True
    kafka_class = "org.apache.kafka.connect.transforms.RegexRouter"
    config_def = (
        ConfigDef()
        .define("regex", Type.STRING, validator=Lambda(java_regex_problem, "valid regex"),
                importance=Importance.HIGH, doc="Regular expression to use for matching.")
        .define("replacement", Type.STRING, importance=Importance.HIGH, doc="Replacement string.")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        reason = replacement_problem(config.replacement, group_count(config.regex))
        if reason:
            return [ConfigProblem("replacement", f"Invalid value {config['replacement']} for configuration "
                                                 f"replacement: {reason}")]
        return []

    def configure(self, config: Config) -> None:
        self.regex = config.regex
        self.pattern = anchored(config.regex)
        self.replacement = config.replacement
        shape = simple_shape(config.regex)
        parts = replacement_parts(config.replacement) if shape else None
        max_group = 1 if shape and shape[2] else 0
        self.fast: tuple[tuple[str, str, bool], list[str | int]] | None = None
        if shape is not None and parts is not None and all(not isinstance(p, int) or p <= max_group for p in parts):
            self.fast = (shape, parts)

    def _fast(self, topic: Column) -> Column:
        """``literal`` / ``literal(.*)literal`` patterns with plain string functions (no regex per record):
        same result as Java's ``matches()`` + ``replaceFirst()``."""
        assert self.fast is not None
        (pre, suf, group), parts = self.fast
        match = topic == F.lit(pre) if not group else _matches_around_group(topic, pre, suf)
        if any(p == 1 for p in parts):
            new = _with_group(topic, pre, suf, parts)
        else:
            pieces = [F.lit(p) if isinstance(p, str) else topic for p in parts]
            new = F.concat(*pieces) if pieces else F.lit("")
        return F.when(match, new).otherwise(topic)

    def plan(self, df: DataFrame) -> Step:
        if self.fast is not None:
            step = Step({"topic": self._fast(F.col("topic"))})
        else:
            # The pattern is anchored (^...\z), so it matches at most once, at the start, and only when it
            # matches the whole topic: one regexp_replace is Java's matches() + replaceFirst().
            step = Step({"topic": F.regexp_replace(F.col("topic"), F.lit(self.pattern), F.lit(self.replacement))})
        # A DataFrame of several schemas (one CDC connector over many tables) knows each schema's topic: rename
        # those too, so that sinks still give each renamed topic its own columns.
        step.metadata.update(renamed_topics(df.schema, self._rename))
        return step

    def _rename(self, topic: str) -> str | None:
        """The new name of one topic, on the driver (None where Python's regex cannot tell)."""
        return rename_on_driver(self.regex, self.replacement, topic)


def _matches_around_group(topic: Column, pre: str, suf: str) -> Column:
    """Whether ``topic`` matches ``pre(.*)suf`` as a whole. startsWith/endsWith compare UTF-8 bytes, so a
    match ends on character boundaries and the byte lengths tell whether prefix and suffix overlap
    (``octet_length`` is O(1); ``length`` would count the characters of every topic)."""
    match = topic.startswith(pre) if pre else F.lit(True)
    if suf:
        n = len(pre.encode("utf-8")) + len(suf.encode("utf-8"))
        match = match & topic.endswith(suf) & (F.octet_length(topic) >= F.lit(n))
    # '.' does not match a line terminator. The group is checked, not the whole topic: it is exact even when
    # the literals hold one, and scanning only the group's bytes costs about half (measured on orders-N).
    # The checks come last, so they run only for topics whose literals matched.
    group = _group_bytes(topic, pre, suf).cast("string")
    for t in LINE_TERMINATORS:  # contains() compares bytes; instr() walks characters (slower)
        match = match & ~group.contains(t)
    return match


def _group_bytes(topic: Column, pre: str, suf: str) -> Column:
    """Group 1 of ``pre(.*)suf`` as UTF-8 bytes, for a topic that matches. Slicing bytes at known offsets
    needs no character counting; a character substring counts the topic's characters (twice, with its
    length), which made it the costliest part of the router."""
    start = len(pre.encode("utf-8")) + 1
    size = F.octet_length(topic) - F.lit(start - 1 + len(suf.encode("utf-8"))) if suf else F.lit(2**31 - 1)
    return F.substring(topic.cast("binary"), F.lit(start), size)


def _with_group(topic: Column, pre: str, suf: str, parts: list[str | int]) -> Column:
    """The replacement (literals, ``$0``, ``$1``). The group is the very expression the match condition
    checks, so Spark computes it once per record (subexpression elimination) and the string concat copies
    bytes without counting characters."""
    g1 = _group_bytes(topic, pre, suf).cast("string")
    return F.concat(*[F.lit(p) if isinstance(p, str) else (topic if p == 0 else g1) for p in parts])
