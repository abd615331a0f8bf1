"""A worker's warm-up: one tiny streaming query through the path every connector takes, run once at start.

Kafka Connect loads its plugins when the worker starts; a connector submitted later only instantiates them. Ours
would otherwise pay, on the first connector, what every Spark application pays on its first Python data source
query: the Python daemons Spark forks its workers from (one per worker module), the workers' imports of pyspark,
pyarrow and this package, the data source's lookup, and the JVM's first (interpreted, then compiled) run of the
micro-batch machinery. :func:`warm_up` runs one ``kconnect`` source into Spark's ``noop`` sink with
``availableNow``, in a directory of its own that it removes after: :class:`WarmUpChangeEvents`,
:data:`WARM_UP_EVENTS` synthetic Debezium change events of a PostgreSQL table (``bigint`` key, ``text``,
``numeric(12,2)``, ``timestamptz``) built by the CDC connectors' own Arrow envelope builder, serialized by
JsonConverter (key schemaless, value with its schema) into the columns Spark's Kafka sink writes. That is the path
every source connector takes (a Python data source's Arrow batches, JsonConverter) and, beyond it, the code a CDC
stream's first micro-batches run (the Arrow reading of the envelope's structs, decimals and timestamps, Jackson's
generation of the envelope's JSON, the decimal conversions), with enough rows for the JVM to compile it before a
connector's first events arrive rather than while they do. The Kafka producer itself cannot be warmed without a
broker. It writes nothing anywhere else and touches no external system.

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
from collections.abc import Iterator
from typing import Any

from ..connectors.base import ReadRange, SourceConnector
from ..connectors.cdc.envelope import EnvelopeBuilder
from ..connectors.cdc.layout import Layout, build_layout
from ..connectors.offsets import Offsets, partition_key
from ..connectors.postgres.layout import SOURCE_NAME, pg_record_type, source_type
from ..connectors.postgres.types import to_arrow, type_spec
from ..version import __version__
from .pipeline import observe_batches, read_stream
from .queries import start_query

__all__ = ["WARM_UP_EVENTS", "WARM_UP_QUERY", "WarmUpChangeEvents", "warm_up"]

log = logging.getLogger(__name__)

#: The warm-up query's name (in Spark's UI and listeners).
WARM_UP_QUERY = "kconnect-warm-up"
#: Change events the CDC part of the warm-up serializes: enough invocations of the per-row code for the JVM's JIT
#: to compile its hottest parts (HotSpot compiles a method after some thousands of calls), few enough to cost
#: about what the former one-line FileStreamSource query did.
WARM_UP_EVENTS = 4096
_EVENTS_PER_BATCH = 2048  # PostgresConnector's max.batch.size default: the Arrow batches it hands Spark
_PARTITION = partition_key({"warm.up": "change-events"})
_NUMERIC_12_2 = ((12 << 16) | 2) + 4  # PostgreSQL's typmod of numeric(12,2)


def _layout() -> Layout:
    return build_layout("kconnect-warm-up", [("public", "events", [
        ("id", type_spec("int8", -1), 1), ("name", type_spec("text", -1), 0),
        ("amount", type_spec("numeric", _NUMERIC_12_2), 0), ("at", type_spec("timestamptz", -1), 0)])])


class WarmUpChangeEvents(SourceConnector):
    """The warm-up's CDC source: :data:`WARM_UP_EVENTS` Debezium change events of one PostgreSQL table, made in
    memory by :class:`~spark_connect_bridge.connectors.cdc.envelope.EnvelopeBuilder` with PostgresConnector's
    record schema and type conversions (no database). Not a plugin: used by :func:`warm_up` only."""

    def schema(self) -> Any:
        return pg_record_type(_layout())

    def initial_offsets(self) -> Offsets:
        return {_PARTITION: {"n": 0}}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        done = int(start.get(_PARTITION, {}).get("n", 0))
        return {_PARTITION: {"n": min(WARM_UP_EVENTS, done + (max_records or WARM_UP_EVENTS))}}

    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import pyarrow as pa

        layout = _layout()
        envelope = EnvelopeBuilder(layout, source_type=source_type(), source_name=SOURCE_NAME,
                                   connector="postgresql", db="warm-up", version=__version__,
                                   batch_size=_EVENTS_PER_BATCH, convert=to_arrow)
        table = layout.tables[0]
        first, end = int((rng.start or {}).get("n", 0)), int(rng.end["n"])
        for lo in range(first, end, _EVENTS_PER_BATCH):
            ids = range(lo + 1, min(end, lo + _EVENTS_PER_BATCH) + 1)
            texts = {"id": pa.array([str(i) for i in ids]), "name": pa.array([f"name-{i}" for i in ids]),
                     "amount": pa.array([f"{i % 100000}.{i % 100:02d}" for i in ids]),
                     "at": pa.array([f"2026-01-01 00:00:{i % 60:02d}.{i % 1000000:06d}+00" for i in ids])}
            yield envelope.read_events(table, texts, len(ids), ts_us=1_767_225_600_000_000 + lo, offset=lo,
                                       snapshot="false", txId=lo, lsn=lo)


def warm_up(spark: Any, directory: str | None = None) -> float:
    """Run the warm-up query on ``spark`` and return its seconds. Its checkpoint lives in a new directory
    under ``directory`` (default: the system's temporary directory), removed afterwards. Raises what the query
    raises; a worker logs it and goes on (see :class:`~spark_connect_bridge.runtime.worker.Worker`)."""
    started = time.monotonic()
    if directory:
        os.makedirs(directory, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kconnect-warm-up-", dir=directory or None)
    try:
        json = "org.apache.kafka.connect.json.JsonConverter"
        config = {"name": WARM_UP_QUERY, "connector.class": f"{__name__}.{WarmUpChangeEvents.__name__}",
                  "key.converter": json, "key.converter.schemas.enable": "false", "value.converter": json}
        # As write_kafka plans a query straight into Spark's Kafka sink: counted, then the columns it writes
        records = observe_batches(read_stream(spark, config)).select("key", "value", "topic", "headers")
        query = start_query(records.writeStream.format("noop"), os.path.join(work, "checkpoint"),
                            {"availableNow": True}, WARM_UP_QUERY)
        query.awaitTermination()
        if query.exception() is not None:  # awaitTermination raises it on pyspark's classic session already
            raise query.exception()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - started
    log.info("Warm-up query ran in %.1f s", seconds)
    return seconds

