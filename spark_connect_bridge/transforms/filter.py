"""Filter: drop records (every record, or those its predicate selects)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import ConfigDef
from .base import Step, Transformation

__all__ = ["Filter"]


class Filter(Transformation):
    """Drop the record. Used with a predicate (``transforms.x.predicate``), it drops the records the predicate
    selects (or, with ``negate=true``, the ones it does not). A dropped record skips the rest of the chain."""

    liftable = True
    kafka_class = "org.apache.kafka.connect.transforms.Filter"
    config_def = ConfigDef()

    def plan(self, df: DataFrame) -> Step:
        return Step(drop=F.lit(True))
