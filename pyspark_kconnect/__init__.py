"""Auto-discovery shim: Spark imports top-level ``pyspark_*`` modules and registers their ``DefaultSource``,
so ``spark.readStream.format("kconnect")`` works right after ``pip install`` with no register call.

Kept tiny: Spark imports it in several processes. ``DefaultSource`` is looked up when asked for, so that
:mod:`pyspark_kconnect.daemon` (Spark's Python daemon, run before pyspark is imported) imports nothing with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultSource"]


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        from spark_connect_bridge.engine.datasource import KConnectDataSource

        return KConnectDataSource
    raise AttributeError(f"module 'pyspark_kconnect' has no attribute {name!r}")
