"""spark_connect_bridge: Kafka Connect's pipelines, native on Apache Spark.

>>> import spark_connect_bridge as scb                                     # doctest: +SKIP
>>> df = scb.read_stream(spark, {"connector.class": "DatagenConnector", "kafka.topic": "orders",
...                              "quickstart": "orders", "max.interval": "0"})
>>> q = scb.write_stream(df, {"connector.class": "FileStreamSink", "file": "/tmp/orders.txt"},
...                      checkpoint="/tmp/ckpt/orders")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "__version__", "register", "read_stream", "read_batch", "write_stream", "write_batch",
    "ConnectError", "ConfigError", "RecordError", "RetriableError", "load_config_file",
]

from .config import load_config_file
from .errors import ConfigError, ConnectError, RecordError, RetriableError

if TYPE_CHECKING:
    from .pipeline import read_batch, read_stream, write_batch, write_stream


def register(spark: Any) -> None:
    """Register the ``kconnect`` data source on ``spark`` explicitly (Spark Connect clients, notebooks).

    >>> import spark_connect_bridge; spark_connect_bridge.register(spark)   # doctest: +SKIP
    """
    from .datasource import register as _register

    _register(spark)


def __getattr__(name: str) -> Any:
    # The pipeline functions import pyspark: keep `import spark_connect_bridge` itself cheap.
    if name in ("read_stream", "read_batch", "write_stream", "write_batch"):
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'spark_connect_bridge' has no attribute {name!r}")
