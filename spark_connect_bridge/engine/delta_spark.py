"""The delta-spark engine: Delta's own JVM writer and streaming source, and the choice between the two engines.

:func:`choose_engine` picks one at run time: ``delta-spark`` when the Spark session has Delta loaded (the
``io.delta.sql.DeltaSparkSessionExtension`` extension and ``DeltaCatalog`` configured and the class loadable, as
on Databricks), ``deltalake`` (:mod:`spark_connect_bridge.connectors.delta_files`) otherwise. Both write standard
Delta tables that the other reads.

:func:`delta_spark_write` writes with Delta's documented idempotent-write options (``txnAppId`` / ``txnVersion``)
for appends and ``DeltaTable.merge`` (with ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` set for the
MERGE) for CDC; a stream runs it in ``foreachBatch``. Narrower types are cast up to the table's first (Delta's
writer alone refuses them), a new table takes ``delta.table.properties``. :func:`read_stream` with
``engine="delta-spark"`` reads with Delta's own streaming source, shaped into records.

Both engines read a sink config of :class:`spark_connect_bridge.connectors.delta.DeltaSinkConnector` and share
the app id of a checkpoint (:func:`~spark_connect_bridge.connectors.base.checkpoint_app_id`), so a table can change
engines. ``format("kconnect")`` is the deltalake engine (a Python data source's writer has no SparkSession to call
Delta's writer with): :func:`write_stream` / :func:`write_batch` are where the engine is chosen.

>>> from spark_connect_bridge.engine import delta_spark                              # doctest: +SKIP
>>> delta_spark.choose_engine(spark)                                                 # doctest: +SKIP
'deltalake'
>>> q = delta_spark.write_stream(df, {"connector.class": "DeltaSink", "delta.table.path": "/tmp/t"},
...                              checkpoint="/tmp/ckpt")                              # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..connectors.base import checkpoint_app_id
from ..connectors.delta import OP_COLUMN, VERSION_STRIDE, rows_frame
from ..connectors.delta_files import quote_identifier, widens
from ..connectors.factory import build_connector
from ..core.fencing import before_commit
from ..core.records import HEADERS_TYPE, RECORD_COLUMNS
from ..errors import ConfigError, ConfigProblem, ConnectError
from .queries import start_query

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["ENGINES", "choose_engine", "spark_has_delta", "write_stream", "write_batch", "read_stream",
           "delta_spark_write"]

log = logging.getLogger(__name__)

ENGINES = ("auto", "deltalake", "delta-spark")
_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def spark_has_delta(spark: Any) -> bool:
    """True when ``spark`` runs with Delta loaded: extension and catalog configured, and the class loadable."""
    conf = spark.conf
    extensions = conf.get("spark.sql.extensions", "") or ""
    catalog = conf.get("spark.sql.catalog.spark_catalog", "") or ""
    if _EXTENSION not in extensions or catalog != _CATALOG:
        return False
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None) if hasattr(spark, "_jsc") else None
    if jvm is None:  # Spark Connect: the server loaded the extension, or the session would not have started
        return True
    try:
        jvm.java.lang.Class.forName(_EXTENSION, False, jvm.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # noqa: BLE001 - py4j surfaces ClassNotFoundException as Py4JJavaError
        return False


def choose_engine(spark: Any, requested: str = "auto") -> str:
    """``"delta-spark"`` or ``"deltalake"``: the requested one, or for ``auto`` delta-spark when Spark has Delta
    loaded and deltalake otherwise."""
    requested = (requested or "auto").lower()
    if requested not in ENGINES:
        raise ConnectError(f"Invalid value {requested} for configuration delta.engine: one of {', '.join(ENGINES)}")
    if requested == "delta-spark" and not spark_has_delta(spark):
        raise ConnectError("delta.engine=delta-spark needs a Spark session with Delta loaded "
                           f"(spark.sql.extensions={_EXTENSION}, spark.sql.catalog.spark_catalog={_CATALOG} and the "
                           "delta-spark jars); use delta.engine=deltalake or auto")
    if requested != "auto":
        return requested
    return "delta-spark" if spark_has_delta(spark) else "deltalake"


# ------------------------------------------------------------------------------------------ schemas
def _sink_for(spark: Any, config: Mapping[str, Any], engine: str | None) -> tuple[dict, Any, str]:
    """The sink config with ``delta.engine`` set to the engine that runs it, its connector, and the engine."""

    props = dict(config)
    props.setdefault("connector.class", "spark_connect_bridge.connectors.delta.DeltaSinkConnector")
    requested = engine or build_connector(props, kind="sink").config.delta_engine
    chosen = choose_engine(spark, requested)
    props["delta.engine"] = chosen
    return props, build_connector(props, kind="sink"), chosen


def write_stream(df: Any, config: Mapping[str, Any], *, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                 query_name: str | None = None, engine: str | None = None) -> Any:
    """Start a streaming write of ``df`` with a Delta sink config, on the engine :func:`choose_engine` picks
    (``engine`` overrides the config's ``delta.engine``).

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g. ``{"availableNow": True}``). On both engines a
    micro-batch is one Delta commit carrying the app transaction ``(checkpoint_app_id(checkpoint), batch id)``.
    """
    props, sink, chosen = _sink_for(df.sparkSession, config, engine)
    if chosen == "delta-spark":
        app_id = checkpoint_app_id(checkpoint)

        def per_batch(batch_df: Any, batch_id: int) -> None:
            delta_spark_write(batch_df, sink, app_id=app_id, batch_id=batch_id)

        writer = df.writeStream.foreachBatch(per_batch)
    else:
        sink.validate_input(df.schema)
        writer = df.writeStream.format("kconnect").options(**{k: str(v) for k, v in props.items()})
    return start_query(writer, checkpoint, trigger, query_name)


def write_batch(df: Any, config: Mapping[str, Any], *, engine: str | None = None, app_id: str | None = None,
                batch_id: int | None = None) -> None:
    """Append (or MERGE) a batch DataFrame with a Delta sink config, on the engine :func:`choose_engine` picks.

    With ``app_id`` and ``batch_id`` the write is one commit carrying that app transaction, skipped when the table
    already holds it (what a ``foreachBatch`` needs for exactly-once).

    >>> write_batch(df, {"delta.table.path": "/data/orders"}, engine="delta-spark")   # doctest: +SKIP
    """
    props, sink, chosen = _sink_for(df.sparkSession, config, engine)
    if chosen == "delta-spark":
        delta_spark_write(df, sink, app_id=app_id, batch_id=batch_id)
        return
    sink.validate_input(df.schema)
    options = {k: str(v) for k, v in props.items()}
    if app_id is not None:
        options["kconnect.app.id"] = app_id
    if batch_id is not None:
        options["kconnect.batch.id"] = str(batch_id)
    df.write.format("kconnect").options(**options).mode("append").save()


def delta_spark_write(df: Any, sink: Any, *, app_id: str | None = None, batch_id: int | None = None) -> None:
    """delta-spark engine: write one batch of records with Delta's own writer (``sink`` is a
    :class:`~spark_connect_bridge.connectors.delta.DeltaSinkConnector`).

    Appends use Delta's idempotent writes (``txnAppId``/``txnVersion``), CDC batches ``DeltaTable.merge`` with the
    same app transaction (Delta's ``spark.databricks.delta.write.txnAppId``/``txnVersion`` session settings), so
    a replayed batch is skipped by Delta itself. ``${topic}`` tables are written one after the other, each with
    its own commit.
    """
    from pyspark.sql import functions as F

    cfg = sink.config
    if sink.per_topic:
        df = df.persist()  # read once for the topic list, once per topic
    try:
        if sink.per_topic:
            topics = sorted((r[0] for r in df.select("topic").distinct().collect()),
                            key=lambda t: (t is not None, t))
            groups = [(sink.table_path(t, local=False), df.filter(F.col("topic") == t)) for t in topics]
        else:
            groups = [(sink.table_path(None, local=False), df)]
        for path, part in groups:
            rows, keys = rows_frame(part, cfg)
            before_commit(app_id)  # each table's write is its own commit
            if cfg.delta_write_mode == "append":
                _delta_spark_append(rows, path, sink, app_id, batch_id)
            else:
                _delta_spark_merge(rows, keys, path, sink, app_id, batch_id)
    finally:
        if sink.per_topic:
            df.unpersist()


def _txn_settings(app_id: str | None, batch_id: int | None) -> dict[str, str]:
    if app_id is None or batch_id is None:
        return {}
    return {"txnAppId": app_id, "txnVersion": str(int(batch_id))}


def _cast_up_to_table(rows: Any, table: Any) -> Any:
    """``rows`` with each top-level column whose type is narrower than the table's (int into bigint, float into
    double) cast to the table's type, as the deltalake engine does: Delta's writer refuses such a batch
    ("Failed to merge fields") unless the table widens instead (typeWidening)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import ArrayType, MapType, StructType

    have = {f.name.lower(): f for f in table.fields}
    cols, changed = [], False
    for f in rows.schema.fields:
        t = have.get(f.name.lower())
        nested = (StructType, ArrayType, MapType)
        if t is None or t.dataType == f.dataType or isinstance(f.dataType, nested) or \
                isinstance(t.dataType, nested):
            cols.append(F.col(quote_identifier(f.name)))
            continue
        try:
            wider = widens(to_arrow_type(f.dataType), to_arrow_type(t.dataType))
        except (TypeError, ValueError):  # a type Arrow has no equivalent of (PySparkTypeError): Delta decides
            wider = False
        column = F.col(quote_identifier(f.name))
        cols.append(column.cast(t.dataType).alias(f.name) if wider else column)
        changed = changed or wider
    return rows.select(*cols) if changed else rows


def _spark_table_schema(spark: Any, path: str) -> Any | None:
    """The schema of the Delta table at ``path`` read by Delta (None when there is no table)."""
    from delta.tables import DeltaTable as SparkDeltaTable  # delta-spark, present where Delta is loaded

    if not SparkDeltaTable.isDeltaTable(spark, path):
        return None
    return SparkDeltaTable.forPath(spark, path).toDF().schema


def _delta_spark_append(rows: Any, path: str, sink: Any, app_id: str | None, batch_id: int | None) -> None:
    cfg = sink.config
    spark = rows.sparkSession
    table = _spark_table_schema(spark, path)
    if table is not None:
        rows = _cast_up_to_table(rows, table)
    writer = (rows.write.format("delta").mode("append")
              .option("mergeSchema", "true" if cfg.delta_schema_evolution else "false")
              .option("maxRecordsPerFile", str(cfg.delta_file_max_rows)))
    for k, v in _txn_settings(app_id, batch_id).items():
        writer = writer.option(k, v)
    if cfg.delta_partition_by:
        writer = writer.partitionBy(*cfg.delta_partition_by)
    if table is None:  # Delta takes a new table's properties from the writer's options
        for k, v in sink.table_properties().items():
            writer = writer.option(k, v)
    writer.save(path)


def _create_spark_table(spark: Any, path: str, schema: Any, partition_by: Sequence[str],
                        properties: Mapping[str, str]) -> None:
    """Create the (empty) table with its properties, as CREATE TABLE ... TBLPROPERTIES would."""
    from delta.tables import DeltaTable as SparkDeltaTable

    builder = SparkDeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for k, v in properties.items():
        builder = builder.property(k, v)
    builder.execute()


def _delta_spark_merge(rows: Any, keys: list[str], path: str, sink: Any, app_id: str | None,
                       batch_id: int | None) -> None:
    from delta.tables import DeltaTable as SparkDeltaTable

    cfg = sink.config
    spark = rows.sparkSession
    data_cols = [c for c in rows.columns if c != OP_COLUMN]
    if not SparkDeltaTable.isDeltaTable(spark, path):
        _create_spark_table(spark, path, rows.drop(OP_COLUMN).schema, cfg.delta_partition_by,
                            sink.table_properties())
    cond = " AND ".join(f"t.{quote_identifier(k)} = s.{quote_identifier(k)}" for k in keys)
    sets: dict[str, str | Column] = {quote_identifier(c): f"s.{quote_identifier(c)}" for c in data_cols}
    is_delete = f"s.{quote_identifier(OP_COLUMN)} = 'd'"
    # Delta's idempotent DML: the session's txnAppId/txnVersion go into the MERGE's commit, and a version already
    # committed for the app id makes Delta skip the command. The session's own values are restored after.
    settings = {f"spark.databricks.delta.write.{k}": v for k, v in _txn_settings(app_id, batch_id).items()}
    if cfg.delta_schema_evolution:
        settings["spark.databricks.delta.schema.autoMerge.enabled"] = "true"
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        (SparkDeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), cond)
         .whenMatchedDelete(is_delete)
         .whenMatchedUpdate(f"NOT ({is_delete})", sets)
         .whenNotMatchedInsert(f"NOT ({is_delete})", sets)
         .execute())
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def read_stream(spark: Any, config: Mapping[str, Any], *, engine: str | None = None) -> Any:
    """A streaming DataFrame of a Delta source config (see DeltaSourceConnector) on the chosen engine.

    ``deltalake`` reads through the kconnect data source; ``delta-spark`` with Delta's own streaming source
    (``startingVersion``, ``skipChangeCommits``, ``readChangeFeed``), shaped into the same records: the row as the
    value struct, the key from ``delta.source.key.fields``, topic, partition 0. What Delta's source does not give
    differs (see :func:`_delta_spark_records`). ``auto`` is the kconnect source, whose offsets are table versions.
    """

    props = dict(config)
    props.setdefault("connector.class", "spark_connect_bridge.connectors.delta.DeltaSourceConnector")
    source = build_connector(props, kind="source")
    requested = (engine or source.config.delta_engine).lower()
    if requested != "delta-spark":
        choose_engine(spark, requested)  # validates the name
        props["delta.engine"] = "deltalake"
        return spark.readStream.format("kconnect").options(**{k: str(v) for k, v in props.items()}).load()
    choose_engine(spark, "delta-spark")
    return _delta_spark_records(spark, source)


def _delta_spark_records(spark: Any, source: Any) -> Any:
    """delta-spark engine of :func:`read_stream`: Delta's streaming source, as records.

    Delta's source does not tell which version a row comes from, so ``offset`` is the commit version times 10^9
    only with the change data feed (``_commit_version``; the row's place in the version is not known: rows of one
    version share the offset) and null otherwise; ``timestamp`` is ``_commit_timestamp`` with the change feed and
    null otherwise. Micro-batches are bounded by Delta's own admission control (files, not records).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    cfg = source.config
    problems = []
    if cfg.topics_dir:
        problems.append(ConfigProblem("topics.dir", "Configuration topics.dir is not applied by Delta's own source "
                                                    "(delta.engine=delta-spark reads one table): read the topic store "
                                                    "with delta.engine=deltalake"))
    if cfg.max_records_per_trigger is not None:
        problems.append(ConfigProblem("max.records.per.trigger", "Configuration max.records.per.trigger is not "
                                                                 "applied by Delta's own source, which bounds "
                                                                 "micro-batches by files; use delta.engine=deltalake"))
    if problems:
        raise ConfigError(problems)
    path = cfg.delta_table_path
    cdf = cfg.delta_source_read_change_feed
    reader = spark.readStream.format("delta").option("startingVersion", str(cfg.delta_source_starting_version))
    if cfg.delta_source_skip_change_commits:
        reader = reader.option("skipChangeCommits", "true")
    if cdf:
        reader = reader.option("readChangeFeed", "true")
    df = reader.load(path)
    if all(c in df.columns for c in RECORD_COLUMNS) and not cdf:  # a topic-store table holds records
        return df.select(*RECORD_COLUMNS)
    key_fields = cfg.delta_source_key_fields
    key = F.struct(*[F.col(quote_identifier(k)) for k in key_fields]) if key_fields else F.lit(None).cast(BinaryType())
    topic = cfg.topic or os.path.basename(path.rstrip("/"))
    offset = (F.col("_commit_version") * VERSION_STRIDE) if cdf else F.lit(None)
    timestamp = F.col("_commit_timestamp") if cdf else F.lit(None)
    return df.select(key.alias("key"), F.struct(*[F.col(quote_identifier(c)) for c in df.columns]).alias("value"),
                     F.lit(topic).alias("topic"), F.lit(0).alias("partition"), offset.cast("long").alias("offset"),
                     timestamp.cast("timestamp").alias("timestamp"),
                     F.array().cast(HEADERS_TYPE).alias("headers"))
