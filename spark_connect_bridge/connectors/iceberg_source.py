"""Iceberg source: an Iceberg table's appended snapshots as records (pyiceberg, no JVM), as the Delta source streams
versions and as Iceberg's own Spark streaming source reads a table.

A new query reads the table as of its oldest snapshot still in the history (all of its rows: earlier snapshots
may have been expired), then the rows each later ``append`` snapshot added, one snapshot after the other along
the current snapshot's ancestry; with ``iceberg.source.starting-snapshot-id`` it starts with the rows that snapshot
added. The source position is the last snapshot read (``{"snapshot-id": ...}``, 0 before the first), so a query
restarted from its checkpoint goes on after it. A ``replace`` snapshot (compaction) adds no data and is passed
over; an ``overwrite`` or ``delete`` snapshot (an upsert, a row delete) fails the query unless
``iceberg.source.skip-overwrite-snapshots`` / ``iceberg.source.skip-delete-snapshots`` say to pass over it, as
Iceberg's Spark source does (``streaming-skip-overwrite-snapshots``, ``streaming-skip-delete-snapshots``).

A record's value is the row (the table's current schema: older files are read into it by field id), its key
the ``iceberg.source.key-fields`` struct (default: null), its topic ``topic`` (default: the table name), its
offset the snapshot's sequence number times 10^9 plus the row's place in the snapshot, its timestamp the
snapshot's commit time.

>>> (spark.readStream.format("kconnect")                                              # doctest: +SKIP
...    .option("connector.class", "iceberg-source").option("iceberg.source.table", "db.orders")
...    .option("iceberg.catalog.type", "jdbc").option("iceberg.catalog.uri", "jdbc:sqlite:/data/catalog.db")
...    .option("iceberg.catalog.warehouse", "/data/warehouse").load())
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from ..config import ConfigDef, Importance, Type
from ..core.records import arrow_schema, no_headers, record_schema
from ..errors import ConfigProblem, ConnectError
from .base import ReadRange, SourceConnector
from .delta import VERSION_STRIDE
from .iceberg import catalog_problems, load_checked_table, load_iceberg_catalog, require_pyiceberg, worker_paths
from .offsets import Offsets, partition_key

__all__ = ["IcebergSourceConnector"]

log = logging.getLogger(__name__)

_BEFORE_ANY = 0  # the position before the first snapshot (Iceberg's snapshot ids are positive)


def _source_checks(cfg: Any) -> list[ConfigProblem]:
    out = []
    table = cfg.iceberg_source_table or ""
    if not table:
        out.append(ConfigProblem("iceberg.source.table", "Missing configuration iceberg.source.table (the table to "
                                                         "stream, namespace.table)"))
    elif "." not in table.strip("."):
        out.append(ConfigProblem("iceberg.source.table", f"Invalid value {table} for configuration "
                                                         "iceberg.source.table: namespace.table"))
    return out + catalog_problems(cfg)


class IcebergSourceConnector(SourceConnector):
    """Streams the rows an Iceberg table's snapshots append, with snapshot ids as offsets (pyiceberg)."""

    key_prefixes = ("iceberg.catalog.",)
    path_policy_at_run_time = True  # the catalog names the files
    partition_fields: ClassVar[dict[str, type] | None] = {"table": str}
    offset_fields: ClassVar[dict[str, type] | None] = {"snapshot-id": int}
    config_def = (
        ConfigDef()
        .define("iceberg.source.table", Type.STRING, None, importance=Importance.HIGH, group="Iceberg",
                doc="The table to stream (namespace.table).")
        .define("iceberg.catalog", Type.STRING, "iceberg", importance=Importance.MEDIUM, group="Iceberg",
                doc="Iceberg catalog name; its properties are the iceberg.catalog.* keys, as the Iceberg sink "
                    "takes them (type or catalog-impl, uri, warehouse, jdbc.user, jdbc.password, S3 settings).")
        .define("topic", Type.STRING, None, importance=Importance.MEDIUM, group="Iceberg",
                doc="The records' topic (default: the table name).")
        .define("iceberg.source.starting-snapshot-id", Type.LONG, None, importance=Importance.MEDIUM,
                group="Iceberg", doc="The first snapshot a new query reads (the rows it appended), an ancestor of "
                                     "the current snapshot. Default: the whole table as of its oldest snapshot, then "
                                     "every later append.")
        .define("iceberg.source.skip-overwrite-snapshots", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                group="Iceberg", doc="Pass over overwrite snapshots (upserts, MERGE, copy-on-write deletes) "
                                     "instead of failing the query: their rows are not read.")
        .define("iceberg.source.skip-delete-snapshots", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                group="Iceberg", doc="Pass over delete snapshots instead of failing the query.")
        .define("iceberg.source.key-fields", Type.LIST, [], importance=Importance.LOW, group="Iceberg",
                doc="Row columns that make up the record key struct (default: a null key).")
        .check(_source_checks)
    )

    # -- table ---------------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        # the pyiceberg catalog (a database engine, a session) stays where it was opened: readers open their own
        return {k: v for k, v in self.__dict__.items() if k != "_catalog"}

    @property
    def table_name(self) -> str:
        return str(self.config.iceberg_source_table)

    def table(self) -> Any:
        """The table, freshly loaded (its current metadata)."""
        from pyiceberg.exceptions import NoSuchTableError

        require_pyiceberg()
        catalog = getattr(self, "_catalog", None)
        if catalog is None:
            catalog = self._catalog = load_iceberg_catalog(self.config.iceberg_catalog,
                                                           self.config.with_prefix("iceberg.catalog."),
                                                           **worker_paths(self.config))
        try:
            return load_checked_table(catalog, self.table_name)
        except NoSuchTableError:
            raise ConnectError(f"Iceberg source: there is no table {self.table_name} (iceberg.source.table) in "
                               f"catalog {self.config.iceberg_catalog}") from None

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import BinaryType, StructType

        row = from_arrow_schema(self.table().schema().as_arrow())
        missing = [k for k in self.config.iceberg_source_key_fields if k not in row.names]
        if missing:
            raise ConnectError(f"Iceberg source: table {self.table_name} has no columns {missing} "
                               f"(iceberg.source.key-fields); its columns: {row.names}")
        fields = self.config.iceberg_source_key_fields
        key = StructType([row[k] for k in fields]) if fields else BinaryType()
        return record_schema(key, row)

    # -- offsets -------------------------------------------------------------------------------------
    def _key(self) -> str:
        return partition_key({"table": self.table_name})

    def initial_offsets(self) -> Offsets:
        start = self.config.iceberg_source_starting_snapshot_id
        if start is None:
            return {self._key(): {"snapshot-id": _BEFORE_ANY}}
        table = self.table()
        snapshot = table.metadata.snapshot_by_id(int(start))
        if snapshot is None or snapshot.snapshot_id not in {s.snapshot_id for s in _ancestry(table.metadata)}:
            raise ConnectError(f"Iceberg source: snapshot {start} (iceberg.source.starting-snapshot-id) is not an "
                               f"ancestor of table {self.table_name}'s current snapshot")
        return {self._key(): {"snapshot-id": snapshot.parent_snapshot_id or _BEFORE_ANY}}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        key = self._key()
        current = int((start.get(key) or {"snapshot-id": _BEFORE_ANY})["snapshot-id"])
        last = int(until[key]["snapshot-id"]) if until is not None and key in until else None
        if until is not None and key not in until:
            return {key: {"snapshot-id": current}}
        end = current
        budget = max_records
        whole = current == _BEFORE_ANY and self.config.iceberg_source_starting_snapshot_id is None
        for snapshot in self._after(self.table().metadata, current, last):
            if budget is not None and budget <= 0 and end != current:
                break  # whole snapshots, at least one per batch
            end = snapshot.snapshot_id
            if budget is not None:
                summary = snapshot.summary or {}
                budget -= max(1, int(summary.get("total-records" if whole else "added-records", 1)))
            whole = False
        return {key: {"snapshot-id": end}}

    def _after(self, metadata: Any, current: int, last: int | None) -> list[Any]:
        """The snapshots after ``current`` up to ``last`` (default: the current one), oldest first."""
        chain = list(reversed(_ancestry(metadata)))  # oldest first
        ids = [s.snapshot_id for s in chain]
        if current != _BEFORE_ANY:
            if current not in ids:
                raise ConnectError(f"Iceberg source: snapshot {current} of table {self.table_name}, where the query "
                                   "stopped, is no longer an ancestor of its current snapshot (expired or rolled "
                                   "back); start a new query (a new checkpoint)")
            chain = chain[ids.index(current) + 1:]
        if last is not None:
            last_ids = [s.snapshot_id for s in chain]
            chain = chain[:last_ids.index(last) + 1] if last in last_ids else []
        return chain

    def lag(self, current: Offsets) -> int | None:
        position = int((current.get(self._key()) or {"snapshot-id": _BEFORE_ANY})["snapshot-id"])
        return len(self._after(self.table().metadata, position, None))  # snapshots, not records

    # -- executor ------------------------------------------------------------------------------------
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan

        start = int(rng.start["snapshot-id"]) if rng.start else _BEFORE_ANY
        end = int(rng.end["snapshot-id"])
        if end == start:
            return
        table = self.table()
        metadata = table.metadata
        target = arrow_schema(self.schema())
        whole_first = start == _BEFORE_ANY and self.config.iceberg_source_starting_snapshot_id is None
        for snapshot in self._after(metadata, start, end):
            if whole_first:
                tasks = table.scan(snapshot_id=snapshot.snapshot_id).plan_files()
                whole_first = False
            else:
                tasks = self._added_files(table, snapshot)
            if not tasks:
                continue
            tasks = sorted(tasks, key=lambda t: t.file.file_path)  # the planner's order is a set's
            scan = ArrowScan(metadata, table.io, metadata.schema(), AlwaysTrue())
            row = 0
            for batch in scan.to_record_batches(tasks):
                if batch.num_rows:
                    yield self._records(batch, target, _ordinal(metadata, snapshot) * VERSION_STRIDE + row,
                                        snapshot.timestamp_ms)
                    row += batch.num_rows

    def _added_files(self, table: Any, snapshot: Any) -> list[Any]:
        """The data files ``snapshot`` appended (none for a replace, or a skipped overwrite/delete)."""
        operation = snapshot.summary.operation.value if snapshot.summary else "append"
        skip = {"overwrite": self.config.iceberg_source_skip_overwrite_snapshots,
                "delete": self.config.iceberg_source_skip_delete_snapshots}
        if operation == "replace":
            return []
        if operation in skip:
            if skip[operation]:
                log.info("Iceberg source: passing over %s snapshot %d of %s", operation, snapshot.snapshot_id,
                         self.table_name)
                return []
            raise ConnectError(f"Iceberg source: snapshot {snapshot.snapshot_id} of table {self.table_name} is an "
                               f"{operation} (rows changed or removed); set iceberg.source.skip-{operation}-snapshots"
                               f"=true to pass over such snapshots")
        scan = table.incremental_append_scan(from_snapshot_id_exclusive=snapshot.parent_snapshot_id,
                                             to_snapshot_id_inclusive=snapshot.snapshot_id)
        if snapshot.parent_snapshot_id is None:  # the first snapshot: its own files, from_snapshot_id=None
            scan = table.incremental_append_scan(to_snapshot_id_inclusive=snapshot.snapshot_id)
        return list(scan.plan_files())

    def _records(self, batch: Any, target: Any, first_offset: int, ts_ms: int) -> Any:
        import numpy as np
        import pyarrow as pa

        n = batch.num_rows
        value_type = target.field("value").type
        value = pa.StructArray.from_arrays([batch.column(f.name).cast(f.type) for f in value_type],
                                           fields=list(value_type))
        key_type = target.field("key").type
        if pa.types.is_struct(key_type):
            key = pa.StructArray.from_arrays([batch.column(f.name).cast(f.type) for f in key_type],
                                             fields=list(key_type))
        else:
            key = pa.nulls(n, key_type)
        topic = self.config.topic or self.table_name.rsplit(".", 1)[-1]
        return pa.RecordBatch.from_arrays(
            [key, value, pa.repeat(pa.scalar(topic, pa.string()), n), pa.array(np.zeros(n, dtype=np.int32)),
             pa.array(first_offset + np.arange(n, dtype=np.int64)),
             pa.array(np.full(n, ts_ms * 1000, dtype=np.int64)).cast(target.field("timestamp").type),
             no_headers(n)], schema=target)


def _ancestry(metadata: Any) -> list[Any]:
    """The current snapshot and its ancestors, newest first (empty for a table without snapshots)."""
    from pyiceberg.table.snapshots import ancestors_of

    return list(ancestors_of(metadata.current_snapshot(), metadata))


def _ordinal(metadata: Any, snapshot: Any) -> int:
    """A number that grows with each snapshot of the history: the sequence number (format v2 and later), or in a
    v1 table (all zero) the snapshot's depth in its ancestry."""
    if snapshot.sequence_number:
        return int(snapshot.sequence_number)
    from pyiceberg.table.snapshots import ancestors_of

    return len(list(ancestors_of(snapshot, metadata)))
