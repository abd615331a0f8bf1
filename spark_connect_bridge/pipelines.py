"""Kafka Connect configs in Spark Declarative Pipelines (``pyspark.pipelines``, the ``spark-pipelines`` CLI).

A pipeline's Python file declares its datasets with these functions, as it would with ``dp.table`` and
``dp.create_auto_cdc_flow``; ``spark`` is the session the pipeline gives the file.

- :func:`source_table`: a streaming table fed by a ``kconnect`` source config (its transforms and converters).
- :func:`debezium_auto_cdc`: a Debezium config's change events stored in a streaming table, then applied to a
  target table by the pipeline's AUTO CDC flow (keys from the record key, sequenced by the source position: the
  LSN for PostgreSQL; binlog file, position and row for MySQL/MariaDB; deletes from ``op = 'd'``), or, where Spark
  refuses AUTO CDC for the target, by our Delta sink's MERGE through a pipeline sink (``apply="merge"``).

>>> from spark_connect_bridge import pipelines as kp                              # doctest: +SKIP
>>> kp.debezium_auto_cdc(spark, "orders", "../postgres-cdc.properties", table="public.orders")  # doctest: +SKIP

Checkpoints are the pipeline's own (under the spec's ``storage``, one per flow): a ``kconnect`` source keeps its
offsets there as in any streaming query. ``errors.*`` keys work inside the source's transforms and converters as
in :func:`~spark_connect_bridge.engine.pipeline.read_stream`; the failed records go to the config's dead-letter
topic in the topic store (``errors.deadletterqueue.topics.dir``).
"""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from typing import Any

from .config import load_config_file
from .connectors.base import stable_app_id
from .connectors.cdc.layout import table_events
from .engine.pipeline import read_stream
from .errors import ConfigError

__all__ = ["source_table", "debezium_changes", "debezium_changes_columns", "debezium_auto_cdc"]

SEQUENCE = "__kconnect_sequence"
#: How :func:`debezium_auto_cdc` applies the changes.
APPLY_MODES = ("auto_cdc", "merge", "materialized_view")
OPERATION = "__kconnect_op"


def _config(config: Mapping[str, Any] | str | PathLike[str]) -> dict[str, Any]:
    return dict(config) if isinstance(config, Mapping) else dict(load_config_file(str(config)))


def _events(spark: Any, config: dict[str, Any], table: str | None) -> Any:
    events = read_stream(spark, config)
    return table_events(events, table) if table else events


def source_table(spark: Any, name: str, config: Mapping[str, Any] | str | PathLike[str], *,
                 table: str | None = None, comment: str | None = None) -> None:
    """Declare the streaming table ``name`` fed by a ``kconnect`` source config (a dict, or a ``.properties`` /
    JSON file): its records, after the config's transforms and converters, one row each.

    ``table``: of a CDC connector's events, only that captured table's (``"public.orders"``), with its own columns.

    >>> source_table(spark, "orders_events", "../postgres-cdc.properties", table="public.orders")  # doctest: +SKIP
    """
    from pyspark import pipelines as dp

    # Built (and analysed: table_events reads the schema) here, at registration: a pipeline's query functions may
    # not analyse a DataFrame.
    events = _events(spark, _config(config), table)
    dp.table(name=name, comment=comment)(lambda: events)


def debezium_changes(events: Any, schema: Any = None) -> Any:
    """Debezium change events as change rows: the key's columns (from the record key, so deletes have them), the
    ``after`` row's other columns, the source position as ``__kconnect_sequence`` and ``op`` as
    ``__kconnect_op``; tombstones (null values) are left out. ``schema``: the events' schema when ``events`` may
    not be analysed (a pipeline's query function); by default ``events.schema``.

    >>> changes = debezium_changes(table_events(events, "public.orders"))      # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    schema = schema if schema is not None else events.schema
    key_t, value_t = schema["key"].dataType, schema["value"].dataType
    if not (isinstance(key_t, StructType) and isinstance(value_t, StructType)
            and {"after", "op", "source"} <= set(value_t.fieldNames())):
        raise ConfigError("debezium_changes needs Debezium change events: a struct key and a value envelope with "
                          "'after', 'op' and 'source' (no ExtractNewRecordState, no value converter)")
    keys = key_t.fieldNames()
    sequence = F.col("value.source.lsn") if _sequence_field(schema) == "lsn" else \
        F.struct(F.col("value.source.file"), F.col("value.source.pos"), F.col("value.source.row"))
    after_t = value_t["after"].dataType
    after = [c for c in after_t.fieldNames() if c not in keys] if isinstance(after_t, StructType) else []
    return events.where(F.col("value").isNotNull()).select(
        *[F.col(f"key.{k}").alias(k) for k in keys], *[F.col(f"value.after.{c}").alias(c) for c in after],
        sequence.alias(SEQUENCE), F.col("value.op").alias(OPERATION))


def debezium_auto_cdc(spark: Any, target: str, config: Mapping[str, Any] | str | PathLike[str], *,
                      table: str | None = None, events_table: str | None = None, apply: str = "auto_cdc",
                      target_format: str | None = None, delta_path: str | None = None) -> None:
    """Declare the table ``target`` kept equal to a captured table by a Debezium config's change events.

    The events (of ``table``, when the config captures several) land in the streaming table ``events_table``
    (default ``<target>_events``), then:

    - ``apply="auto_cdc"``: a temporary view ``<target>_changes`` turns them into change rows
      (:func:`debezium_changes`) that the pipeline's ``create_auto_cdc_flow`` applies to the streaming table
      ``target`` as SCD type 1: upserts keyed by the record key, in source order, deletes for ``op = 'd'``. The
      target must support row-level operations (MERGE) in that Spark: Apache Spark 4.2 refuses a Parquet table,
      and Delta Lake 4.4's table does not offer them to it either (``AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE``);
      ``target_format`` names a format whose tables do.
    - ``apply="merge"``: ``target`` is a pipeline sink (``create_sink``, format ``kconnect``) running our Delta sink
      in merge mode on the Delta table at ``delta_path`` (a path or URI, outside the pipeline's catalog), fed by an
      append flow from the events table: keys from the record key, the last change per key by the source position
      (``source.lsn`` for PostgreSQL; binlog order, the events' offsets, for MySQL/MariaDB), ``op = 'd'`` deletes,
      every micro-batch one Delta transaction. It needs no row-level operation API in Spark, so it runs where
      AUTO CDC is refused.
    - ``apply="materialized_view"``: ``target`` is a materialized view over the events: per key, the last change
      by source position, deleted keys left out. Each update recomputes it from the events table; it needs no
      MERGE, so it runs on any Spark.

    >>> debezium_auto_cdc(spark, "orders", "../postgres-cdc.properties", table="public.orders")  # doctest: +SKIP
    """
    from pyspark import pipelines as dp
    from pyspark.sql import functions as F

    if apply not in APPLY_MODES:
        raise ConfigError(f"debezium_auto_cdc: invalid value {apply!r} for apply: use one of "
                          f"{', '.join(map(repr, APPLY_MODES))}")
    if (apply == "merge") != bool(delta_path):
        raise ConfigError("debezium_auto_cdc: delta_path (the Delta table's path or URI) is needed with apply='merge' "
                          "and only there" + (f", not with apply={apply!r}" if delta_path else ""))
    events_name = events_table or f"{target}_events"
    events = _events(spark, _config(config), table)
    schema = events.schema                       # the stored events' schema, read here: not in a query function
    keys = schema["key"].dataType.fieldNames()
    dp.table(name=events_name)(lambda: events)

    if apply == "merge":
        order_by = {"lsn": "source.lsn"}.get(_sequence_field(schema), "")  # else the events' own (binlog) order
        dp.create_sink(target, format="kconnect", options={
            "connector.class": "delta-sink", "delta.table.path": str(delta_path), "delta.write.mode": "merge",
            "delta.cdc.format": "debezium", "delta.merge.order.by": order_by,
            # one transaction id per target table across runs: a replayed batch is recognised and skipped
            "kconnect.app.id": "pipeline-" + stable_app_id(str(delta_path))})
        dp.append_flow(target=target, name=f"{target}_merge")(lambda: spark.readStream.table(events_name))
        return

    if apply == "materialized_view":
        def current() -> Any:
            changes = debezium_changes(spark.read.table(events_name), schema)
            rest = [c for c in debezium_changes_columns(schema) if c not in keys]
            last = F.max_by(F.struct(*rest), F.col(SEQUENCE)).alias("last")
            return (changes.groupBy(*keys).agg(last).where(F.col(f"last.{OPERATION}") != "d")
                    .select(*keys, *[F.col(f"last.{c}").alias(c) for c in rest if c not in (SEQUENCE, OPERATION)]))

        dp.materialized_view(name=target)(current)
        return

    def changes() -> Any:
        return debezium_changes(spark.readStream.table(events_name), schema)

    dp.temporary_view(name=f"{target}_changes")(changes)
    dp.create_streaming_table(target, format=target_format)
    dp.create_auto_cdc_flow(target=target, source=f"{target}_changes", keys=keys, sequence_by=SEQUENCE,
                            apply_as_deletes=f"{OPERATION} = 'd'", except_column_list=[SEQUENCE, OPERATION],
                            stored_as_scd_type=1)


def _source_fields(schema: Any) -> list[str]:
    """The field names of the events' ``value.source`` block."""
    from pyspark.sql.types import StructType

    source_t = schema["value"].dataType["source"].dataType
    return source_t.fieldNames() if isinstance(source_t, StructType) else []


def _sequence_field(schema: Any) -> str:
    """What orders the events' changes: ``lsn`` (PostgreSQL) or ``binlog`` (MySQL/MariaDB's file, pos, row)."""
    fields = _source_fields(schema)
    if "lsn" in fields:
        return "lsn"
    if {"file", "pos", "row"} <= set(fields):
        return "binlog"
    raise ConfigError(f"debezium_changes: the events' source block has neither 'lsn' nor 'file'/'pos'/'row' "
                      f"to order changes by (it has {sorted(fields)})")


def debezium_changes_columns(schema: Any) -> list[str]:
    """The columns :func:`debezium_changes` gives events of ``schema``, in order."""
    keys = schema["key"].dataType.fieldNames()
    after = [c for c in schema["value"].dataType["after"].dataType.fieldNames() if c not in keys]
    return [*keys, *after, SEQUENCE, OPERATION]
