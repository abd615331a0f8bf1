"""How Spark hands a sink's records to its Python writer: Arrow batches of at most
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows and, below ``Int.MaxValue``, at most
``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (64 MB by default).

The byte bound has a price: Spark measures the batch after every row it appends (``ArrowWriter.sizeInBytes``, which
walks every vector of the row's struct), measured at 0.5 us a record for the S3 sink's JSON lines and 1 us for a
Parquet value of eight fields (``bench/bench_s3_sink.py --arrow-max-bytes``), a third to two thirds of the JVM's
whole write. It buys nothing for a sink whose writer holds the whole task's records before it writes them (an
object-store sink makes whole objects): the Python worker holds them all anyway, and one batch of the task more in
the JVM's memory does not change that bound. Such a sink declares :attr:`holds_task` and its writes run without
the byte check, unless the session sets the key itself (then its value stands).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["MAX_BYTES_KEY", "python_writer_batches"]

MAX_BYTES_KEY = "spark.sql.execution.arrow.maxBytesPerBatch"
_UNBOUNDED = "2147483647"  # Int.MaxValue: Spark skips the size check
_lock = threading.Lock()  # a session's setting is read and set as one step


@contextmanager
def python_writer_batches(session: Any, sink_class: Any) -> Iterator[None]:
    """Within the block, jobs (and streaming queries started: they copy the session's settings) that hand records
    to ``sink_class``'s Python writer run without the per-row byte check, when the sink holds its task's records
    (``holds_task``) and ``session`` does not set :data:`MAX_BYTES_KEY` itself. A streaming query's
    ``foreachBatch`` gets a session of its own (Spark clones it at the query's start); another job of the same
    session that starts inside the block runs without the check too."""
    if not getattr(sink_class, "holds_task", False):
        yield
        return
    with _lock:
        ours = session.conf.get(MAX_BYTES_KEY, None) is None  # else the user's (or spark-defaults') value stands
        if ours:
            session.conf.set(MAX_BYTES_KEY, _UNBOUNDED)
    try:
        yield
    finally:
        if ours:
            with _lock:
                session.conf.unset(MAX_BYTES_KEY)
