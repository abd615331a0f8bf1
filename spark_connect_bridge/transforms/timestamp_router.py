"""TimestampRouter: route each record to a topic named from its topic and timestamp."""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type
from ..errors import ConfigProblem
from .base import Step, Transformation
from .datetime_format import FormatError, format_utc, translate

__all__ = ["TimestampRouter"]


class TimestampRouter(Transformation):
    """Set the topic to ``topic.format`` with every ``${topic}`` replaced by the topic and every
    ``${timestamp}`` by the record timestamp formatted with ``timestamp.format`` (a SimpleDateFormat pattern,
    UTC). A record without a timestamp fails. An untranslatable format is a config error (Kafka finds it on
    the first record)."""

    liftable = True
    kafka_class = "org.apache.kafka.connect.transforms.TimestampRouter"
    config_def = (
        ConfigDef()
        .define("topic.format", Type.STRING, "${topic}-${timestamp}", importance=Importance.HIGH,
                doc="Format string which can contain ${topic} and ${timestamp} as placeholders for the topic and "
                    "timestamp, respectively.")
        .define("timestamp.format", Type.STRING, "yyyyMMdd", importance=Importance.HIGH,
                doc="Format string for the timestamp that is compatible with java.text.SimpleDateFormat.")
    )

    def validate(self, config: Config) -> list[ConfigProblem]:
        try:
            translate(config.timestamp_format)
        except FormatError as e:
            return [ConfigProblem("timestamp.format", f"Invalid value {config['timestamp.format']} for "
                                                      f"configuration timestamp.format: {e}")]
        return []

    def configure(self, config: Config) -> None:
        self.parts = re.split(r"(\$\{topic\}|\$\{timestamp\})", config.topic_format)
        self.fmt = translate(config.timestamp_format)

    def plan(self, df: DataFrame) -> Step:
        ts = F.col("timestamp")
        pieces = []
        for p in self.parts:
            if p == "${topic}":
                pieces.append(F.col("topic"))
            elif p == "${timestamp}":
                pieces.append(format_utc(ts, self.fmt))
            elif p:
                pieces.append(F.lit(p))
        topic = F.concat(*pieces) if pieces else F.lit("")
        return Step({"topic": topic}).fail(ts.isNull(), "Timestamp missing on record")
