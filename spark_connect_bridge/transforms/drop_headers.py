"""DropHeaders: remove every header whose key is listed."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type, ValidList
from .base import Step, Transformation

__all__ = ["DropHeaders"]


class DropHeaders(Transformation):
    """Remove all headers with the listed keys (every occurrence); other headers keep their order."""

    liftable = True
    kafka_class = "org.apache.kafka.connect.transforms.DropHeaders"
    config_def = ConfigDef().define("headers", Type.LIST, validator=ValidList.non_empty_list(),
                                    importance=Importance.HIGH, doc="The name of the headers to be removed.")

    def configure(self, config: Config) -> None:
        self.headers = list(dict.fromkeys(config.headers))

    def plan(self, df: DataFrame) -> Step:
        names = F.array(*[F.lit(h) for h in self.headers])
        return Step({"headers": F.filter(F.col("headers"), lambda h: ~F.array_contains(names, h["key"]))})
