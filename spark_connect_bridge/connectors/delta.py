"""Delta connectors: a sink that appends or MERGEs records into Delta tables exactly once, and a source that
streams a Delta table's new versions.

**DeltaSinkConnector** (``delta-sink``). What a record becomes in the table (``delta.table.columns``):

* ``value`` — the value struct's fields are the table's columns (what Kafka Connect sinks write);
* ``record`` — the record columns as they are (``key, value, topic, partition, offset, timestamp, headers``),
  e.g. binary key/value after the source-side converters (the topic store writes this);
* ``auto`` (default) — ``value`` when the value is a struct, else ``record``; a DataFrame that is not a record
  DataFrame (no ``value``/``topic`` columns) is written with its own columns.

``delta.write.mode=append`` appends the rows (a tombstone, a null value, has no row in ``value`` mode and is
counted and logged). ``merge`` applies changes with MERGE on ``delta.merge.keys``: Debezium envelopes (``op``
``c``/``r``/``u`` upsert the ``after`` row, ``d`` deletes the ``before`` row; Debezium's tombstone that follows a
delete carries nothing new and is skipped) or plain rows (after ExtractNewRecordState: a tombstone, or
``__deleted = "true"``, deletes the key). Within a micro-batch the last change per key wins, ordered by
``delta.merge.order.by`` (e.g. ``source.lsn``) and then by the record position (partition, offset).

Exactly once: every micro-batch is committed in one Delta transaction carrying the app transaction
``(application id of the checkpoint, batch id)``; a batch whose id the table already holds is skipped (Spark
replays the last batch after a crash). Appends are written as Parquet by the executors and committed by the
driver; MERGE batches are staged by the executors (deduplicated per task), then deduplicated again and merged
on the driver (``max.records.per.trigger`` bounds the batch the driver holds). ``${topic}`` in
``delta.table.path`` (or ``topics.dir``) writes one table per topic; each table keeps its own app transaction.

**DeltaSourceConnector** (``delta-source``). Source partition ``{"table": <path>}``, position
``{"version": <last version read>}``; a micro-batch reads exactly the data files added by versions
``(start, end]`` (``dataChange`` adds in log order), or their change data (``delta.source.read.change.feed``,
columns ``_change_type``, ``_commit_version``, ``_commit_timestamp``). A table that already holds the record
columns (a topic-store table) gives back the same records; any other table gives one record per row with the
row as the value struct, key null (or ``delta.source.key.fields``), topic ``topic`` (default: the table's
directory name), partition 0, offset ``version * 10^9 + row index in the version`` and timestamp the commit
time. Rows of one version come in log order (files as the commit lists them, rows in file order); change-data
rows of a version are sorted by their columns, since deltalake reads change files in parallel. Admission control
(``max.records.per.trigger``) takes whole versions (at least one).

>>> (df.writeStream.format("kconnect").option("connector.class", "delta-sink")          # doctest: +SKIP
...    .option("delta.table.path", "/data/orders").option("checkpointLocation", "/ckpt/orders").start())
>>> spark.readStream.format("kconnect").option("connector.class", "delta-source") \\
...     .option("delta.table.path", "/data/orders").load()                              # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ConfigDef, Importance, Lambda, Range, Type
from ..config.definition import Password
from ..config.validators import CaseInsensitiveValidString
from ..core.locations import Locations
from ..core.records import RECORD_COLUMNS, arrow_schema, no_headers, record_schema
from ..core.topic_schemas import narrow_arrow, topic_layouts
from ..errors import ConfigError, ConfigProblem, ConnectError, DataError
from .base import CommitContext, ReadRange, SinkConnector, SourceConnector, WriteContext
from .delta_files import (
    HIVE_NULL,
    cast_to,
    commit_files,
    delete_files,
    is_replay,
    latest_version,
    merge_changes,
    normalize_schema,
    read_commit,
    reconcile_schema,
    require_deltalake,
    table_root,
    table_schema,
    write_files,
)
from .offsets import Offsets, partition_key

__all__ = ["DeltaSinkConnector", "DeltaSourceConnector", "rows_arrow", "rows_frame", "last_per_key",
           "OP_COLUMN", "VERSION_STRIDE"]

log = logging.getLogger(__name__)

OP_COLUMN = "_kc_op"
_SORT = ("_kc_order", "_kc_part", "_kc_off", "_kc_task", "_kc_idx")
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
VERSION_STRIDE = 1_000_000_000
STAGING_DIR = "_kconnect_staging"

_OBJECT_STORE = "Object store"
#: Hadoop's S3A keys, which Spark's and Delta's own readers and writers take as per-query options: here they reach a
#: table at an s3a:// or s3:// URI with the deltalake engine (its storage options, from the same settings). Unset:
#: the AWS default chain (AWS_ACCESS_KEY_ID..., AWS_ENDPOINT_URL, the profile, the instance role). A worker refuses
#: them in connector configs received over REST (the endpoint its credentials go to is its own).
S3A_KEYS = (
    ConfigDef()
    .define("fs.s3a.endpoint", Type.STRING, "", importance=Importance.LOW, group=_OBJECT_STORE,
            doc="The S3 endpoint of a table in a bucket (an S3-compatible store, an emulator): host:port or a URL.")
    .define("fs.s3a.endpoint.region", Type.STRING, "", importance=Importance.LOW, group=_OBJECT_STORE,
            doc="The bucket's AWS region.")
    .define("fs.s3a.path.style.access", Type.BOOLEAN, False, importance=Importance.LOW, group=_OBJECT_STORE,
            doc="Path-style requests (endpoint/bucket/key) to fs.s3a.endpoint; false: virtual-hosted.")
    .define("fs.s3a.connection.ssl.enabled", Type.BOOLEAN, True, importance=Importance.LOW, group=_OBJECT_STORE,
            doc="HTTPS to an fs.s3a.endpoint given without a scheme (false: plain HTTP, e.g. a local emulator).")
    .define("fs.s3a.access.key", Type.STRING, "", importance=Importance.LOW, group=_OBJECT_STORE,
            doc="The access key id (empty: the AWS default chain).")
    .define("fs.s3a.secret.key", Type.PASSWORD, None, importance=Importance.LOW, group=_OBJECT_STORE,
            doc="The secret key of fs.s3a.access.key (never logged or shown).")
    .define("fs.s3a.session.token", Type.PASSWORD, None, importance=Importance.LOW, group=_OBJECT_STORE,
            doc="A session token with temporary keys (never logged or shown).")
)


def locations_of(config: Any) -> Locations:
    """The files of a Delta connector's tables: local paths, and buckets with its fs.s3a.* keys."""
    settings: dict[str, str] = {}
    for key in S3A_KEYS.names():
        value = config.get(key)
        if isinstance(value, Password):
            value = value.value()
        if value is None or value == "":
            continue
        settings[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return Locations(settings)


class _TableFiles:
    """A Delta connector's :class:`Locations`, made once from its config."""

    config: Any

    @property
    def files(self) -> Locations:
        """The tables' files (local, or in a bucket with the fs.s3a.* keys): one per connector."""
        found = self.__dict__.get("_files")
        if found is None:
            found = self.__dict__["_files"] = locations_of(self.config)
        return found


def _properties(value: list[str]) -> str | None:
    bad = [v for v in value if "=" not in v or not v.split("=", 1)[0].strip()]
    return f"entries must be key=value, got {', '.join(bad)}" if bad else None


def _sink_checks(cfg: Any) -> list[ConfigProblem]:
    out = []
    path, tdir = cfg.delta_table_path, cfg.topics_dir
    if not path and not tdir:
        out.append(ConfigProblem("delta.table.path", "Missing configuration delta.table.path (the Delta table to "
                                                     "write; ${topic} names one table per topic), or set "
                                                     "topics.dir"))
    if path and tdir:
        out.append(ConfigProblem("topics.dir", "topics.dir and delta.table.path are mutually exclusive"))
    if cfg.delta_write_mode == "merge" and cfg.delta_table_columns == "record":
        out.append(ConfigProblem("delta.table.columns", "Invalid value record for configuration "
                                                        "delta.table.columns: delta.write.mode=merge writes rows "
                                                        "(value or auto)"))
    return out


class DeltaSinkConnector(_TableFiles, SinkConnector):
    """Appends or MERGEs records into a Delta table, exactly once per micro-batch."""

    delivery = "exactly-once"
    holds_task = True  # write() makes one Arrow table of the task's records before writing its files
    config_def = (
        ConfigDef()
        .define("delta.table.path", Type.STRING, "", importance=Importance.HIGH,
                doc="Path of the Delta table to write (created on the first batch). ${topic} in the path is "
                    "replaced by each record's topic: one table per topic.", group="Delta")
        .define("topics.dir", Type.STRING, "", importance=Importance.HIGH,
                doc="Alternative to delta.table.path: a directory holding one table per topic, "
                    "<topics.dir>/<topic> (the topic store layout).", group="Delta")
        .define("delta.write.mode", Type.STRING, "append", CaseInsensitiveValidString("append", "merge"),
                Importance.HIGH, "append: add every record's row. merge: apply changes (Debezium events or "
                                 "rows with tombstones as deletes) with MERGE on delta.merge.keys, the last "
                                 "change per key in a batch winning.", group="Delta")
        .define("delta.merge.keys", Type.LIST, [], importance=Importance.HIGH,
                doc="Merge mode: the row columns that identify a row. Default: the fields of the record key "
                    "struct.", group="Delta")
        .define("delta.merge.order.by", Type.STRING, "", importance=Importance.MEDIUM,
                doc="Merge mode: the field that orders changes of one key within a batch (last wins), e.g. "
                    "source.lsn of a Debezium envelope, a row column such as updated_at, or a record column "
                    "(offset, timestamp). Ties, and an unset value, fall back to the record position "
                    "(partition, offset).", group="Delta")
        .define("delta.partition.by", Type.LIST, [], importance=Importance.MEDIUM,
                doc="Columns to partition a new table by (partitionBy). A table that exists keeps its "
                    "partitioning; a different list is an error.", group="Delta")
        .define("delta.schema.evolution", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Add columns the data has and the table lacks. Narrower types in the data (int into a "
                    "bigint column) are always cast up; widening a table column's type needs Delta's "
                    "typeWidening feature (delta-spark engine only).", group="Delta")
        .define("delta.table.columns", Type.STRING, "auto", CaseInsensitiveValidString("auto", "value", "record"),
                Importance.MEDIUM, "What a record becomes: value = the value struct's fields as columns, record = "
                                   "the record columns as they are, auto = value for struct values else record.",
                group="Delta")
        .define("delta.cdc.format", Type.STRING, "auto", CaseInsensitiveValidString("auto", "debezium", "row"),
                Importance.MEDIUM, "Merge mode: debezium = values are Debezium envelopes (op, before, after); "
                                   "row = values are rows (null value or __deleted=true deletes); auto = "
                                   "debezium when the value struct has op and after fields.", group="Delta")
        .define("delta.table.properties", Type.LIST, [], Lambda(_properties, "key=value entries"), Importance.LOW,
                "Table properties of a new table, as key=value (e.g. delta.enableChangeDataFeed=true).",
                group="Delta")
        .define("delta.file.max.rows", Type.INT, 1_000_000, Range.at_least(1), Importance.LOW,
                "Maximum rows per Parquet file written by one task.", group="Delta")
        .define("delta.engine", Type.STRING, "auto", CaseInsensitiveValidString("auto", "deltalake", "delta-spark"),
                Importance.LOW, "auto: delta-spark when the Spark session has Delta loaded, deltalake otherwise, "
                                "where spark_connect_bridge.engine.delta_spark.write_stream / write_batch run the "
                                "config. "
                                "The kconnect data source (format(\"kconnect\")) runs the deltalake engine: auto "
                                "and deltalake, while delta-spark there is a config error naming write_stream.",
                group="Delta")
        .check(_sink_checks)
        .merge(S3A_KEYS)
    )

    # -- layout ------------------------------------------------------------------------------------
    def table_path(self, topic: str | None = None, *, local: bool = True) -> str:
        """The table of ``topic`` (the one table when the path does not depend on the topic); ``local=False``
        keeps an object-store URI as it is (the delta-spark engine writes those)."""

        template = self.config.delta_table_path or Locations.join(self.config.topics_dir, "${topic}")
        if "${topic}" in template:
            if topic is None or not _TOPIC_RE.match(topic) or topic in (".", ".."):
                raise DataError(f"Record topic {topic!r} cannot name a Delta table under {template}: topics are "
                                f"made of letters, digits, '.', '_' and '-'")
            template = template.replace("${topic}", topic)
        return table_root(template) if local else template

    @property
    def per_topic(self) -> bool:
        """True when every record's topic names its own table (``${topic}`` in the path, or ``topics.dir``)."""
        return "${topic}" in (self.config.delta_table_path or "${topic}")

    def table_properties(self) -> dict[str, str]:
        """``delta.table.properties`` as a mapping: the properties a new table is created with."""
        return dict(e.split("=", 1) for e in self.config.delta_table_properties)

    def validate_input(self, schema: Any) -> None:
        import pyarrow as pa

        require_deltalake()
        if self.config.delta_engine == "delta-spark":
            # A Python data source gets Arrow batches in Python workers, where no SparkSession (so no Delta JVM
            # writer) exists: the engine is chosen where the query is built.
            raise ConfigError([ConfigProblem("delta.engine", "Invalid value delta-spark for configuration "
                                                             "delta.engine: the kconnect data source (format("
                                                             "\"kconnect\")) writes with the deltalake engine; run "
                                                             "the config with spark_connect_bridge.engine.delta_spark."
                                                             "write_stream(df, config, checkpoint=...) or "
                                                             "write_batch(df, config) for Delta's own writer")])
        target = arrow_schema(schema)
        if self.per_topic and "topic" not in target.names:
            raise ConfigError([ConfigProblem("delta.table.path", "${topic} in the table path needs a 'topic' "
                                                                 f"column; the input has {target.names}")])
        rows_arrow(pa.Table.from_batches([], schema=target), self.config)  # raises on a bad layout
        # Several schemas in one input (one CDC connector over many tables): each topic's table gets only its
        # own columns (see spark_connect_bridge.core.topic_schemas).
        layouts = topic_layouts(schema, "value") if "topic" in schema.names else None
        if layouts and len(layouts) > 1 and not self.per_topic:
            self._refuse_one_table_for_many(layouts)
        self._layouts = layouts if layouts and len(layouts) > 1 and self.per_topic else None

    def _refuse_one_table_for_many(self, layouts: dict[str, Any]) -> None:
        """One Delta table for the records of several topics that each have their own columns (one CDC connector
        over many tables) would give every table's rows the union of all their columns: refused, before any data
        moves, unless the sink takes only one of those topics."""
        wanted, regex = set(self.config.get("topics") or ()), self.config.get("topics.regex") or ""
        taken = sorted(t for t in layouts if (not wanted and not regex) or t in wanted
                       or (regex and re.fullmatch(regex, t)))
        if len(taken) > 1:
            shown = ", ".join(taken[:4]) + (", ..." if len(taken) > 4 else "")
            raise ConfigError([ConfigProblem("delta.table.path", (
                f"Invalid value {self.config.delta_table_path} for configuration delta.table.path: the sink takes "
                f"{len(taken)} topics whose records have different columns ({shown}; one source connector over "
                "several tables), and one Delta table would give each table's rows the union of all their "
                "columns; put ${topic} in the path (a table per topic, e.g. work/delta/${topic}) or give each "
                "topic a sink of its own (topics=...)"))])

    # -- executor ---------------------------------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Any:
        import pyarrow as pa

        nonempty = [b for b in batches if b.num_rows]
        if not nonempty:
            return None
        data = pa.Table.from_batches(nonempty)
        groups = self._by_topic(data)
        if self.config.delta_write_mode == "merge":
            return _Message({path: self._stage(path, part, ctx) for path, part in groups.items()}, merge=True)
        return _Message({path: self._append(path, part, ctx) for path, part in groups.items()})

    def _by_topic(self, data: Any) -> dict[str, Any]:
        import pyarrow.compute as pc

        if not self.per_topic:
            return {self.table_path(): data}
        out = {}
        for topic in pc.unique(data.column("topic")).to_pylist():
            mask = pc.is_null(data.column("topic")) if topic is None else pc.equal(data.column("topic"), topic)
            part = data.filter(mask)
            layouts = getattr(self, "_layouts", None)
            if layouts and topic in layouts:
                part = narrow_arrow(part, layouts[topic])
            out[self.table_path(topic)] = part
        return out

    def _append(self, path: str, data: Any, ctx: WriteContext) -> list:
        rows, _ = rows_arrow(data, self.config)
        if rows.num_rows == 0:
            return []
        plan = reconcile_schema(table_schema(path, files=self.files), rows.schema,
                                evolve=self.config.delta_schema_evolution, where=path)
        return write_files(path, cast_to(rows, plan.target), partition_by=self.config.delta_partition_by,
                           prefix=f"part-{ctx.partition_id:05d}", max_rows_per_file=self.config.delta_file_max_rows,
                           files=self.files)

    def _stage(self, path: str, data: Any, ctx: WriteContext) -> list[tuple[str, tuple[str, ...]]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows, keys = rows_arrow(data, self.config)
        if rows.num_rows == 0:
            return []
        rows = rows.append_column("_kc_task", pa.array([ctx.partition_id] * rows.num_rows, pa.int64()))
        rows = last_per_key(rows, keys)  # shrink what travels to the driver
        d = Locations.join(path, STAGING_DIR, ctx.app_id,
                           str(ctx.batch_id if ctx.batch_id is not None else "batch"))
        p = Locations.join(d, f"{ctx.partition_id:05d}-{ctx.attempt}-{uuid.uuid4().hex[:8]}.parquet")
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink)
        self.files.write_bytes(p, sink.getvalue().to_pybytes())  # atomic: a staged file is whole or absent
        return [(p, tuple(keys))]

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        tables: dict[str, list] = {}
        merge = False
        for m in messages:
            merge = merge or m.merge
            for path, items in m.tables.items():
                tables.setdefault(path, []).extend(items)
        for path in sorted(tables):
            if merge:
                self._merge(path, tables[path], ctx)
            else:
                commit_files(path, tables[path], app_id=ctx.app_id, batch_id=ctx.batch_id,
                             partition_by=self.config.delta_partition_by,
                             evolve=self.config.delta_schema_evolution, overwrite=ctx.overwrite,
                             configuration=self.table_properties(),
                             metadata={"kconnect.connector": self.name, "kconnect.batch": ctx.batch_id},
                             files=self.files)

    def _merge(self, path: str, staged: list[tuple[str, tuple[str, ...]]], ctx: CommitContext) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        paths = [p for p, _ in staged]
        try:
            if not staged or is_replay(path, ctx.app_id, ctx.batch_id, files=self.files):
                return
            keys = list(staged[0][1])
            changes = pa.concat_tables([pq.read_table(pa.BufferReader(self.files.read_bytes(p))) for p in paths],
                                       promote_options="permissive")
            changes = last_per_key(changes, keys).drop_columns([c for c in _SORT if c in changes.column_names])
            merge_changes(path, changes, keys=keys, op_column=OP_COLUMN, app_id=ctx.app_id, batch_id=ctx.batch_id,
                          partition_by=self.config.delta_partition_by, evolve=self.config.delta_schema_evolution,
                          configuration=self.table_properties(), files=self.files)
        finally:
            _discard_staged(self.files, paths)

    def abort(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        for m in messages:
            for path, items in m.tables.items():
                if m.merge:
                    _discard_staged(self.files, [p for p, _ in items])
                else:
                    delete_files(path, items, files=self.files)


@dataclass
class _Message:
    tables: dict  # table path -> [FileAdd] (append) or [(staged parquet path, merge keys)] (merge)
    merge: bool = False


def _discard_staged(files: Locations, paths: Sequence[str]) -> None:
    for p in paths:
        files.remove(p)
    for d in {Locations.parent(p) for p in paths}:
        files.remove_tree(d)


# ---------------------------------------------------------------------------------------------- rows (Arrow)
def _is_record(schema: Any) -> bool:
    return "value" in schema.names and "topic" in schema.names


def _columns_mode(schema: Any, cfg: Any) -> str:
    import pyarrow as pa

    mode = cfg.delta_table_columns
    if not _is_record(schema):
        if mode == "value":
            raise ConfigError([ConfigProblem("delta.table.columns", "Invalid value value for configuration "
                                                                    "delta.table.columns: the input has no 'value' "
                                                                    f"column ({schema.names})")])
        return "columns"
    value_is_struct = pa.types.is_struct(schema.field("value").type)
    if mode == "auto":
        return "value" if value_is_struct else "record"
    if mode == "value" and not value_is_struct:
        raise ConfigError([ConfigProblem("delta.table.columns", f"Invalid value value for configuration "
                                                                f"delta.table.columns: the record value is "
                                                                f"{schema.field('value').type}, not a struct; parse "
                                                                f"it with a value.converter first, or use record")])
    return mode


def _struct_table(arr: Any) -> Any:
    """The fields of a struct array as a table (a null struct gives nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    names = [f.name for f in arr.type]
    return pa.Table.from_arrays([pc.struct_field(arr, [i]) for i in range(len(names))], names=names)


def _path(table: Any, value: Any, dotted: str) -> Any | None:
    """The column a dotted path names: inside the value struct first, then a top-level column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = dotted.split(".")
    if value is not None:
        cur, ok = value, True
        for p in parts:
            if not pa.types.is_struct(cur.type) or cur.type.get_field_index(p) < 0:
                ok = False
                break
            cur = pc.struct_field(cur, [cur.type.get_field_index(p)])
        if ok:
            return cur
    if parts[0] in table.column_names:
        cur = table.column(parts[0])
        for p in parts[1:]:
            if not pa.types.is_struct(cur.type) or cur.type.get_field_index(p) < 0:
                return None
            cur = pc.struct_field(cur, [cur.type.get_field_index(p)])
        return cur
    return None


def _merge_keys_of(rows: Any, cfg: Any, key: Any = None) -> list[str]:
    import pyarrow as pa

    keys = list(cfg.delta_merge_keys)
    if not keys and key is not None and pa.types.is_struct(key.type):
        keys = [f.name for f in key.type]
    if not keys:
        raise ConfigError([ConfigProblem("delta.merge.keys", "Missing configuration delta.merge.keys: merge mode "
                                                             "needs the key columns (the record key is not a "
                                                             "struct to take them from)")])
    missing = [k for k in keys if k not in rows.column_names]
    if missing:
        columns = ", ".join(c for c in rows.column_names if not c.startswith("_kc_"))
        raise ConfigError([ConfigProblem("delta.merge.keys", f"Invalid value {','.join(keys)} for configuration "
                                                             f"delta.merge.keys: the rows have no column "
                                                             f"{', '.join(missing)} (columns: {columns})")])
    return keys


def rows_arrow(data: Any, cfg: Any) -> tuple[Any, list[str]]:
    """Records (a pa.Table) → table rows, with Arrow compute only.

    Append mode returns ``(rows, [])``. Merge mode returns ``(changes, keys)`` where ``changes`` holds the row
    columns plus ``_kc_op`` (``"d"`` delete, ``"u"`` upsert) and the ordering columns ``_kc_order``,
    ``_kc_part``, ``_kc_off``, ``_kc_idx`` that :func:`last_per_key` sorts by.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    mode = _columns_mode(data.schema, cfg)
    n = data.num_rows
    if cfg.delta_write_mode == "append":
        if mode == "columns":
            return data, []
        if mode == "record":
            return data.select([c for c in RECORD_COLUMNS if c in data.column_names] +
                               [c for c in data.column_names if c not in RECORD_COLUMNS]), []
        value = data.column("value")
        present = pc.is_valid(value)
        tombstones = n - pc.sum(present).as_py() if n else 0
        if tombstones:
            log.warning("Delta sink: %d records with a null value (tombstones) have no row in append mode and "
                        "were not written", tombstones)
            data = data.filter(present)
        return _struct_table(data.column("value")), []

    # merge
    value = data.column("value") if "value" in data.column_names else None
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks() if value.num_chunks else pa.array([], value.type)
    key = data.column("key") if "key" in data.column_names else None
    if isinstance(key, pa.ChunkedArray):
        key = key.combine_chunks() if key.num_chunks else pa.array([], key.type)
    fmt = cfg.delta_cdc_format
    if value is None or not pa.types.is_struct(value.type):
        raise ConfigError([ConfigProblem("delta.write.mode", "delta.write.mode=merge needs struct values "
                                                             "(parse them with a value.converter first)")])
    vt = value.type
    envelope = vt.get_field_index("op") >= 0 and vt.get_field_index("after") >= 0
    if fmt == "debezium" and not envelope:
        raise ConfigError([ConfigProblem("delta.cdc.format", "Invalid value debezium for configuration "
                                                             "delta.cdc.format: the value struct has no op/after "
                                                             "fields")])
    if fmt == "row":
        envelope = False
    if envelope:
        op = pc.struct_field(value, [vt.get_field_index("op")])
        after = pc.struct_field(value, [vt.get_field_index("after")])
        before = pc.struct_field(value, [vt.get_field_index("before")]) if vt.get_field_index("before") >= 0 \
            else pa.nulls(n, after.type)
        if n and pc.any(pc.fill_null(pc.equal(op, "t"), False)).as_py():
            raise DataError("Delta sink: a Debezium truncate event (op=t) cannot be applied by MERGE; filter it "
                            "out upstream (e.g. with the Filter SMT) or truncate the table yourself")
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        keep = pc.and_(pc.is_valid(value), pc.is_valid(op))  # Debezium's tombstone after a delete: skip
        if not before.type.equals(after.type):
            before = before.cast(after.type)
        row = pc.if_else(is_delete, before, after)
        rows = _struct_table(row)
    else:
        is_delete = pc.invert(pc.is_valid(value))
        keep = pa.array(np.ones(n, dtype=bool))
        rows = _struct_table(value)
        if "__deleted" in rows.column_names:
            flag = pc.fill_null(pc.equal(pc.cast(rows.column("__deleted"), pa.string()), "true"), False)
            is_delete = pc.or_(is_delete, flag)
            rows = rows.drop_columns(["__deleted"])
    keys = _merge_keys_of(rows, cfg, key)
    if key is not None:  # deletes without a row (tombstones, key-only before) take the key from the record key
        for k in keys:
            if pa.types.is_struct(key.type) and key.type.get_field_index(k) >= 0:
                kv = pc.struct_field(key, [key.type.get_field_index(k)])
            elif not pa.types.is_struct(key.type) and len(keys) == 1:
                kv = key
            else:
                continue
            col = rows.column(k)
            if kv.type != col.type:
                kv = kv.cast(col.type)
            rows = rows.set_column(rows.column_names.index(k), k, pc.coalesce(col, kv))
    order_by = cfg.delta_merge_order_by
    if order_by:
        order = _path(data, value, order_by)
        if order is None:
            raise ConfigError([ConfigProblem("delta.merge.order.by", f"Invalid value {order_by} for configuration "
                                                                     f"delta.merge.order.by: no such field in the "
                                                                     f"value or the record")])
    else:
        order = pa.nulls(n, pa.int64())
    extra = {
        OP_COLUMN: pc.if_else(is_delete, "d", "u"),
        "_kc_order": order,
        "_kc_part": data.column("partition").cast(pa.int64()) if "partition" in data.column_names
        else pa.nulls(n, pa.int64()),
        "_kc_off": data.column("offset").cast(pa.int64()) if "offset" in data.column_names
        else pa.nulls(n, pa.int64()),
        "_kc_idx": pa.array(np.arange(n, dtype=np.int64)),
    }
    for name, col in extra.items():
        rows = rows.append_column(name, col)
    return rows.filter(keep), keys


def last_per_key(changes: Any, keys: Sequence[str]) -> Any:
    """The last change of every key (sorted by the ``_kc_*`` ordering columns), with Arrow compute only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if changes.num_rows == 0:
        return changes
    sort = [(c, "ascending", "at_start") for c in _SORT if c in changes.column_names]
    changes = changes.take(pc.sort_indices(changes, sort_keys=sort))
    changes = changes.set_column(changes.column_names.index("_kc_idx"), "_kc_idx",
                                 pa.array(np.arange(changes.num_rows, dtype=np.int64)))
    last = changes.select(list(keys) + ["_kc_idx"]).group_by(list(keys), use_threads=False) \
        .aggregate([("_kc_idx", "max")])
    return changes.take(np.sort(last.column("_kc_idx_max").to_numpy()))


# ---------------------------------------------------------------------------------------------- rows (Spark)
def rows_frame(df: Any, cfg: Any) -> tuple[Any, list[str]]:
    """The delta-spark engine's :func:`rows_arrow` + :func:`last_per_key`: records → rows with Column
    expressions. Append mode returns ``(rows, [])``; merge mode ``(changes, keys)`` with the last change per key
    (a window over the batch) and the ``_kc_op`` column."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    names = df.columns
    is_record = "value" in names and "topic" in names
    value_struct = is_record and isinstance(df.schema["value"].dataType, StructType)
    mode = cfg.delta_table_columns
    if mode == "auto":
        mode = ("value" if value_struct else "record") if is_record else "columns"
    if cfg.delta_write_mode == "append":
        if mode == "value":
            return df.filter(F.col("value").isNotNull()).select("value.*"), []
        return df, []
    vt = df.schema["value"].dataType
    envelope = "op" in vt.fieldNames() and "after" in vt.fieldNames() and cfg.delta_cdc_format != "row"
    if envelope:
        is_delete = F.col("value.op") == "d"
        rows = df.filter(F.col("value").isNotNull() & F.col("value.op").isNotNull()) \
            .withColumn("_kc_row", F.when(is_delete, F.col("value.before")).otherwise(F.col("value.after"))) \
            .withColumn(OP_COLUMN, F.when(is_delete, "d").otherwise("u"))
    else:
        deleted = F.col("value").isNull()
        if "__deleted" in vt.fieldNames():
            deleted = deleted | F.coalesce(F.col("value.__deleted").cast("string") == "true", F.lit(False))
        rows = df.withColumn("_kc_row", F.col("value")).withColumn(OP_COLUMN, F.when(deleted, "d").otherwise("u"))
    row_fields = [f for f in rows.schema["_kc_row"].dataType.fieldNames() if f != "__deleted"]
    kt = df.schema["key"].dataType if "key" in names else None
    keys = list(cfg.delta_merge_keys) or (kt.fieldNames() if isinstance(kt, StructType) else [])
    if not keys or any(k not in row_fields for k in keys):
        raise ConfigError([ConfigProblem("delta.merge.keys", f"Invalid value {','.join(keys)} for configuration "
                                                             f"delta.merge.keys: the rows have columns "
                                                             f"{', '.join(row_fields)}")])
    cols = []
    for f in row_fields:
        c = F.col(f"_kc_row.`{f}`")
        if f in keys and kt is not None:  # deletes without a row take the key from the record key
            if isinstance(kt, StructType) and f in kt.fieldNames():
                c = F.coalesce(c, F.col(f"key.`{f}`").cast(rows.schema["_kc_row"].dataType[f].dataType))
            elif not isinstance(kt, StructType) and len(keys) == 1:
                c = F.coalesce(c, F.col("key").cast(rows.schema["_kc_row"].dataType[f].dataType))
        cols.append(c.alias(f))
    order_by = cfg.delta_merge_order_by
    extra = [F.col(c) for c in ("partition", "offset") if c in names]
    if order_by:  # a path in the value first, then a record column (as rows_arrow resolves it)
        in_value = order_by.split(".")[0] in vt.fieldNames()
        if not in_value and order_by.split(".")[0] not in names:
            raise ConfigError([ConfigProblem("delta.merge.order.by", f"Invalid value {order_by} for configuration "
                                                                     f"delta.merge.order.by: no such field in the "
                                                                     f"value or the record")])
        extra.append(F.col(f"value.{order_by}" if in_value else order_by).alias("_kc_order"))
    out = rows.select(*cols, OP_COLUMN, *extra)
    order = [F.col("_kc_order").desc_nulls_last()] if order_by else []
    order += [F.col(c).desc_nulls_last() for c in ("partition", "offset") if c in names]
    if not order:
        order = [F.monotonically_increasing_id().desc()]
    w = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(*order)
    out = out.withColumn("_kc_rn", F.row_number().over(w)).filter("_kc_rn = 1").select(*row_fields, OP_COLUMN)
    return out, keys


# ---------------------------------------------------------------------------------------------- source
def _source_checks(cfg: Any) -> list[ConfigProblem]:
    out = []
    if not cfg.delta_table_path and not cfg.topics_dir:
        out.append(ConfigProblem("delta.table.path", "Missing configuration delta.table.path (the Delta table to "
                                                     "stream), or set topics.dir with topics/topics.regex"))
    if cfg.delta_table_path and cfg.topics_dir:
        out.append(ConfigProblem("topics.dir", "topics.dir and delta.table.path are mutually exclusive"))
    if cfg.topics and cfg.topics_regex:
        out.append(ConfigProblem("topics", "topics and topics.regex are mutually exclusive."))
    if (cfg.topics or cfg.topics_regex) and not cfg.topics_dir:
        out.append(ConfigProblem("topics", "topics and topics.regex select tables under topics.dir; set "
                                           "topics.dir"))
    return out


class DeltaSourceConnector(_TableFiles, SourceConnector):
    """Streams a Delta table's new versions (appends, or change data)."""

    config_def = (
        ConfigDef()
        .define("delta.table.path", Type.STRING, "", importance=Importance.HIGH,
                doc="Path of the Delta table to stream.", group="Delta")
        .define("topics.dir", Type.STRING, "", importance=Importance.HIGH,
                doc="Topic store mode: a directory of one Delta table per topic (<topics.dir>/<topic>); with "
                    "topics or topics.regex choosing the tables (all of them when both are unset). Tables "
                    "created later are picked up and read from their first version.", group="Delta")
        .define("topics", Type.LIST, [], importance=Importance.HIGH,
                doc="Topic store mode: the topics (tables under topics.dir) to read.", group="Delta")
        .define("topics.regex", Type.STRING, "", importance=Importance.HIGH,
                doc="Topic store mode: a regular expression of the topics to read.", group="Delta")
        .define("topic", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The record topic for rows of a plain table (default: the table's directory name).",
                group="Delta")
        .define("delta.source.starting.version", Type.LONG, 0, Range.at_least(0), Importance.MEDIUM,
                "The first table version a new query reads (0: the whole table).", group="Delta")
        .define("delta.source.read.change.feed", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Read the change data feed (the table needs delta.enableChangeDataFeed=true): rows carry "
                    "_change_type (insert, update_preimage, update_postimage, delete), _commit_version and "
                    "_commit_timestamp.", group="Delta")
        .define("delta.source.skip.change.commits", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Skip versions that update or delete rows (without it such a version fails the query, as "
                    "rows would be lost or read twice; use the change feed to see them).", group="Delta")
        .define("delta.source.key.fields", Type.LIST, [], importance=Importance.LOW,
                doc="Row columns that make up the record key struct of a plain table (default: null key).",
                group="Delta")
        .define("delta.engine", Type.STRING, "auto", CaseInsensitiveValidString("auto", "deltalake", "delta-spark"),
                Importance.LOW, "delta-spark: spark_connect_bridge.engine.delta_spark.read_stream reads with Delta's "
                                "own streaming source (records without per-row offsets; see the docs' Delta "
                                "page). auto and deltalake, and the kconnect data source: the deltalake reader.",
                group="Delta")
        .check(_source_checks)
        .merge(S3A_KEYS)
    )

    # -- tables -------------------------------------------------------------------------------------
    def tables(self) -> list[str]:
        """The tables this source reads now (sorted absolute paths)."""

        if self.config.delta_table_path:
            return [table_root(self.config.delta_table_path)]
        root = table_root(self.config.topics_dir)
        names = self.files.names(root)
        topics, regex = self.config.topics, self.config.topics_regex
        pattern = re.compile(f"(?:{regex})\\Z") if regex else None
        out = []
        for n in names:
            if (topics and n not in topics) or (pattern and not pattern.match(n)) or n.startswith(("_", ".")):
                continue
            p = Locations.join(root, n)
            if latest_version(p, files=self.files) is not None:
                out.append(p)
        return out

    def _arrow_table_schema(self, path: str) -> Any:
        s = table_schema(path, files=self.files)
        if s is None:
            raise ConnectError(f"Delta source: there is no Delta table at {path}")
        return s

    def schema(self) -> Any:
        require_deltalake()
        if self.config.delta_engine == "delta-spark":
            raise ConfigError([ConfigProblem("delta.engine", "Invalid value delta-spark for configuration "
                                                             "delta.engine: the kconnect data source reads with "
                                                             "the deltalake engine; read with "
                                                             "spark_connect_bridge.engine.delta_spark."
                                                             "read_stream(spark, "
                                                             "config) for Delta's own source")])
        tables = self.tables()
        if not tables:
            if self.config.delta_table_path:
                raise ConnectError(f"Delta source: there is no Delta table at {self.config['delta.table.path']}")
            return record_schema()  # an empty topic store: binary key/value records
        return self._schema_of(tables[0])

    def _schema_of(self, path: str) -> Any:
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import BinaryType, StructType

        s = self._arrow_table_schema(path)
        spark_schema = from_arrow_schema(s)
        if all(c in s.names for c in RECORD_COLUMNS) and not self.config.delta_source_read_change_feed:
            return StructType([spark_schema[c] for c in RECORD_COLUMNS])
        row = spark_schema
        if self.config.delta_source_read_change_feed:
            row = from_arrow_schema(pa.schema(list(s) + _cdf_fields()))
        kf = self.config.delta_source_key_fields
        key = StructType([row[k] for k in kf]) if kf else BinaryType()
        return record_schema(key, row)

    # -- offsets ------------------------------------------------------------------------------------
    def initial_offsets(self) -> Offsets:
        start = int(self.config.delta_source_starting_version) - 1
        return {partition_key({"table": t}): {"version": start} for t in self.tables()}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        first = int(self.config.delta_source_starting_version) - 1
        out: dict[str, Any] = {}
        budget = max_records
        for t in self.tables():
            k = partition_key({"table": t})
            cur = int((start.get(k) or {"version": first})["version"])
            last = latest_version(t, files=self.files)
            if last is None:  # the table went away since tables() listed it: it keeps its position
                out[k] = {"version": cur}
                continue
            if until is not None:
                if k not in until:
                    out[k] = {"version": cur}
                    continue
                last = min(last, int(until[k]["version"]))
            end = cur
            if budget is None:
                end = max(cur, last)
            else:
                # whole versions, at least one per table with news, until the budget is spent
                while end < last and (budget > 0 or end == cur):
                    budget -= self._version_rows(t, end + 1)
                    end += 1
            out[k] = {"version": end}
        for k, v in start.items():  # a table that went away keeps its position
            out.setdefault(k, v)
        return out

    def _version_rows(self, path: str, version: int) -> int:
        import json

        n = 0
        for a in read_commit(path, version, files=self.files):
            add = a.get("add")
            if add and add.get("dataChange", True):
                try:
                    n += int(json.loads(add.get("stats") or "{}").get("numRecords", 1))
                except ValueError:
                    n += 1
        return max(n, 1)

    def lag(self, current: Offsets) -> int | None:
        behind = 0
        for t in self.tables():
            k = partition_key({"table": t})
            cur = int((current.get(k) or {"version": -1})["version"])
            behind += max(0, (latest_version(t, files=self.files) or 0) - cur)
        return behind  # versions, not records

    # -- executor -----------------------------------------------------------------------------------
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        path = rng.partition["table"]
        lo = int(rng.start["version"]) if rng.start else int(self.config.delta_source_starting_version) - 1
        hi = int(rng.end["version"])
        if hi <= lo:
            return
        schema = self._schema_of(path)
        for v in range(lo + 1, hi + 1):
            row = 0  # offsets number the rows of a version across its files
            for data, ts in self._version_data(path, v):
                if data.num_rows:
                    yield self._records(data, schema, path, v * VERSION_STRIDE + row, ts)
                    row += data.num_rows

    def _version_data(self, path: str, version: int) -> Iterator[tuple[Any, int]]:
        """The rows version ``version`` added (or its change data), with the commit time in ms."""
        from urllib.parse import unquote

        import pyarrow as pa
        import pyarrow.parquet as pq

        actions = read_commit(path, version, files=self.files)
        ts = next((a["commitInfo"].get("timestamp") for a in actions if "commitInfo" in a), None)
        table = normalize_schema(self._arrow_table_schema(path))
        for a in actions:
            if "protocol" in a and "columnMapping" in str(a["protocol"]):
                raise ConnectError(f"Delta source: table {path} uses column mapping, which this source does "
                                   f"not read")
        if self.config.delta_source_read_change_feed:
            from deltalake import DeltaTable

            table_log = DeltaTable(path, storage_options=self.files.storage_options(path) or None)
            reader = table_log.load_cdf(starting_version=version, ending_version=version)
            data = pa.RecordBatchReader.from_stream(reader).read_all()  # deltalake returns arro3 objects
            data = data.cast(normalize_schema(data.schema))  # view types → plain ones
            if data.num_rows:
                data = data.take(_stable_order(data))
            yield data, int(ts or 0)
            return
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        if removes:
            if self.config.delta_source_skip_change_commits:
                log.info("Delta source: skipping version %d of %s (it updates or deletes rows)", version, path)
                return
            raise ConnectError(f"Delta source: version {version} of {path} updates or deletes rows (it removes "
                               f"{len(removes)} data files); set delta.source.skip.change.commits=true to skip such "
                               f"versions or delta.source.read.change.feed=true to read its changes")
        for a in actions:
            add = a.get("add")
            if not add or not add.get("dataChange", True):
                continue
            if add.get("deletionVector"):
                raise ConnectError(f"Delta source: {path} version {version} adds a file with a deletion vector, "
                                   f"which this source does not read")
            filesystem, where = self.files.filesystem(Locations.join(path, *unquote(add["path"]).split("/")))
            f = pq.read_table(where, filesystem=filesystem)
            for name, text in (add.get("partitionValues") or {}).items():
                typ = table.field(name).type
                val = None if text is None or text == HIVE_NULL else text
                arr = pa.array([val] * f.num_rows, pa.string())
                f = f.append_column(name, arr.cast(typ) if not pa.types.is_string(typ) else arr)
            yield cast_to(f, table), int(ts or add.get("modificationTime") or 0)

    def _records(self, data: Any, schema: Any, path: str, first_offset: int, ts_ms: int) -> Any:
        import numpy as np
        import pyarrow as pa

        target = arrow_schema(schema)
        if "topic" in data.column_names and [f.name for f in target] == list(RECORD_COLUMNS) and \
                all(c in data.column_names for c in RECORD_COLUMNS):
            return pa.Table.from_arrays([data.column(c) for c in RECORD_COLUMNS], names=list(RECORD_COLUMNS)) \
                .cast(target).combine_chunks().to_batches()[0]
        n = data.num_rows
        value_type = target.field("value").type
        value = pa.StructArray.from_arrays(
            [data.column(f.name).combine_chunks().cast(f.type) for f in value_type], fields=list(value_type))
        key_type = target.field("key").type
        if pa.types.is_struct(key_type):
            key = pa.StructArray.from_arrays([data.column(f.name).combine_chunks().cast(f.type) for f in key_type],
                                             fields=list(key_type))
        else:
            key = pa.nulls(n, key_type)
        topic = self.config.topic or os.path.basename(path.rstrip("/"))
        offsets = first_offset + np.arange(n, dtype=np.int64)
        batch = pa.RecordBatch.from_arrays(
            [key, value, pa.repeat(pa.scalar(topic, pa.string()), n), pa.array(np.zeros(n, dtype=np.int32)),
             pa.array(offsets), pa.array(np.full(n, ts_ms * 1000, dtype=np.int64)).cast(target.field("timestamp").type),
             no_headers(n)],
            schema=target)
        return batch


def _cdf_fields() -> list:
    import pyarrow as pa

    return [pa.field("_change_type", pa.string()), pa.field("_commit_version", pa.int64()),
            pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC"))]


def _stable_order(data: Any) -> Any:
    """Sort indices that make a change-data read deterministic (delta-rs reads files in parallel)."""
    import pyarrow.compute as pc

    keys = [(c, "ascending") for c in data.column_names
            if not str(data.schema.field(c).type).startswith(("struct", "list", "map", "large_list"))]
    return pc.sort_indices(data, sort_keys=keys)
