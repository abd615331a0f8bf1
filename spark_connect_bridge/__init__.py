"""spark_connect_bridge: Kafka Connect's pipelines, native on Apache Spark.

>>> import spark_connect_bridge as scb                                     # doctest: +SKIP
>>> df = scb.read_stream(spark, {"connector.class": "DatagenConnector", "kafka.topic": "orders",
...                              "quickstart": "orders", "max.interval": "0"})
>>> q = scb.write_stream(df, {"connector.class": "FileStreamSink", "file": "/tmp/orders.txt"},
...                      checkpoint="/tmp/ckpt/orders")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "__version__", "register", "read_stream", "read_batch", "write_stream", "write_batch",
    "ConnectError", "ConfigError", "RecordError", "RetriableError", "WorkerPythonError", "load_config_file",
    "check_python_workers",
]

import importlib

from .config import load_config_file
from .engine.python_workers import WorkerPythonError, check_python_workers
from .errors import ConfigError, ConnectError, RecordError, RetriableError
from .version import __version__

# Subpackages reached as attributes (`scb.transforms.apply_transforms`) are imported on first use.
_SUBMODULES = frozenset({"core", "config", "converters", "transforms", "connectors", "engine", "bus", "runtime", "rest",
                         "jvm", "docs", "errors"})

if TYPE_CHECKING:
    from .engine.pipeline import read_batch, read_stream, write_batch, write_stream


def register(spark: Any) -> None:
    """Register the ``kconnect`` data source on ``spark`` explicitly (Spark Connect clients, notebooks).

    On a local master it first checks that Spark's Python workers can import this package
    (:func:`check_python_workers`) and raises :class:`WorkerPythonError` saying which Python they run if not.

    >>> import spark_connect_bridge; spark_connect_bridge.register(spark)   # doctest: +SKIP
    """
    from .engine.datasource import register as _register

    check_python_workers(spark)
    _register(spark)


def __getattr__(name: str) -> Any:
    # The pipeline functions import pyspark: keep `import spark_connect_bridge` itself cheap.
    if name in ("read_stream", "read_batch", "write_stream", "write_batch"):
        from .engine import pipeline

        return getattr(pipeline, name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'spark_connect_bridge' has no attribute {name!r}")
