"""Auto-discovery shim: Spark imports top-level ``pyspark_*`` modules and registers their ``DefaultSource``,
so ``spark.readStream.format("kconnect")`` works right after ``pip install`` with no register call.

Kept tiny: Spark imports it in several processes.
"""

from spark_connect_bridge.engine.datasource import KConnectDataSource as DefaultSource

__all__ = ["DefaultSource"]
