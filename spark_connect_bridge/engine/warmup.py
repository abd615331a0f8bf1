"""A worker's warm-up: one tiny streaming query through the path every connector takes, run once at start.

Kafka Connect loads its plugins when the worker starts; a connector submitted later only instantiates them. Ours
would otherwise pay, on the first connector, what every Spark application pays on its first Python data source
query: the Python daemons Spark forks its workers from (one per worker module), the workers' imports of pyspark,
pyarrow and this package, the data source's lookup, and the JVM's first (interpreted, then compiled) run of the
micro-batch machinery. :func:`warm_up` runs a ``kconnect`` source (FileStreamSource over a one-line file, through
JsonConverter) into Spark's ``noop`` sink with ``availableNow``, in a directory of its own that it removes after.
It writes nothing anywhere else and touches no external system.

What stays warm: the JVM's compiled code and the Python daemons (for the life of the application); the idle forked
Python workers with the package imported (``spark.python.worker.reuse``, Spark's default) only until Spark's idle
timeout of one minute. A streaming source's own Python process is started per query by Spark and cannot be kept.

>>> from spark_connect_bridge.engine.warmup import warm_up
>>> seconds = warm_up(spark, "/tmp/kconnect-warm-up")                    # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from typing import Any

from .pipeline import read_stream
from .queries import start_query

__all__ = ["WARM_UP_QUERY", "warm_up"]

log = logging.getLogger(__name__)

#: The warm-up query's name (in Spark's UI and listeners).
WARM_UP_QUERY = "kconnect-warm-up"


def warm_up(spark: Any, directory: str | None = None) -> float:
    """Run the warm-up query on ``spark`` and return its seconds. Its file and checkpoint live in a new directory
    under ``directory`` (default: the system's temporary directory), removed afterwards. Raises what the query
    raises; a worker logs it and goes on (see :class:`~spark_connect_bridge.runtime.worker.Worker`)."""
    started = time.monotonic()
    if directory:
        os.makedirs(directory, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kconnect-warm-up-", dir=directory or None)
    try:
        path = os.path.join(work, "warm-up.txt")
        with open(path, "w") as f:
            f.write("warm-up\n")
        config = {"name": WARM_UP_QUERY, "connector.class": "FileStreamSource", "file": path, "topic": "warm-up",
                  "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
        query = start_query(read_stream(spark, config).writeStream.format("noop"),
                            os.path.join(work, "checkpoint"), {"availableNow": True}, WARM_UP_QUERY)
        query.awaitTermination()
        if query.exception() is not None:  # awaitTermination raises it on pyspark's classic session already
            raise query.exception()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - started
    log.info("Warm-up query ran in %.1f s", seconds)
    return seconds
