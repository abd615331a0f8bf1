"""Delta tables written and read without a JVM: the deltalake (delta-rs) half of the Delta sink and source.

Executors write Parquet files with pyarrow straight into the table directory and return the Delta ``add`` action
data (path, size, partition values, stats) as :class:`FileAdd`; the driver commits them in one Delta transaction
carrying the app transaction ``(app_id, batch_id)``, after checking what deltalake does not check itself
(:func:`commit_files`): that every file exists, that the data schema matches the table (or evolving it), and that
the app transaction version only moves forward. CDC batches are applied with ``DeltaTable.merge`` on the driver
(:func:`merge_changes`), with the same app transaction. :func:`latest_version` and :func:`read_commit` read the
log for the Delta source and the worker's offsets.

A table lives on a local (or mounted) path or in a bucket (``s3a://bucket/prefix`` or ``s3://``): every file is
reached through :class:`~spark_connect_bridge.core.locations.Locations` (the project's one file layer, ``pyarrow.fs``)
and delta-rs gets the same settings as its storage options (:meth:`Locations.storage_options`). In a bucket a data
file is one whole PUT (no half-written object to rename away from), and delta-rs commits a version with S3's
conditional PUT (``If-None-Match``), so two writers cannot both write one version.

Delta's own JVM writer (the ``delta-spark`` engine) is :mod:`spark_connect_bridge.engine.delta_spark`; both write
standard Delta tables that the other reads.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ..core.locations import S3_SCHEMES, Locations, is_remote, remote_scheme
from ..errors import ConnectError, DataError

__all__ = ["FileAdd", "write_files", "delete_files", "commit_files", "merge_changes", "create_table", "table_schema",
           "reconcile_schema", "cast_to", "normalize_schema", "latest_version", "read_commit", "committed_version",
           "is_replay", "require_deltalake", "table_root", "quote_identifier", "widens", "HIVE_NULL", "LOCAL"]

log = logging.getLogger(__name__)

_INSTALL = "pip install 'spark_connect_bridge[delta]'"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def require_deltalake() -> Any:
    """Import deltalake, or fail naming the extra to install."""
    try:
        import deltalake
    except ImportError as e:  # pragma: no cover - deltalake is installed in the test venv
        raise ConnectError(f"The Delta connectors need the 'deltalake' library (the Delta engine without the "
                           f"JVM): {_INSTALL}") from e
    return deltalake


#: Local (and mounted) paths only: the files of a function not given the connector's :class:`Locations`.
LOCAL = Locations()


def table_root(uri: str | os.PathLike) -> str:
    """A table's location as this module reaches it: an absolute local path (``/x``, ``x``, ``file:///x``), or an
    ``s3a://`` / ``s3://`` URI without a trailing slash. Other object stores are written by the delta-spark engine."""
    uri = os.fspath(uri).strip()
    if uri.startswith("file://"):
        return os.path.abspath(uri[len("file://"):])
    if is_remote(uri):
        if remote_scheme(uri) not in S3_SCHEMES:
            raise ConnectError(f"Delta table {uri}: the deltalake engine of this connector writes local or mounted "
                               f"paths and {' and '.join(s + '://' for s in S3_SCHEMES)} buckets; use the "
                               f"delta-spark engine for other object stores")
        return uri.rstrip("/")
    return os.path.abspath(uri)


def _options(files: Locations, root: str) -> dict[str, str] | None:
    """delta-rs's storage options of ``root`` (secrets: passed on, never logged)."""
    return files.storage_options(root) or None


def _file(root: str, relative: str) -> str:
    """The location of a data file of the table at ``root`` (``relative``: URL-encoded, as in the log)."""
    return Locations.join(root, *unquote(relative).split("/"))


# ------------------------------------------------------------------------------------------ engine choice

# Delta type widening (typeWidening table feature): from -> the wider types it may become.
_INTS = ("int8", "int16", "int32", "int64")


def widens(src: Any, dst: Any) -> bool:
    """True when values of Arrow type ``src`` fit losslessly in ``dst`` as Delta widens types."""
    import pyarrow as pa

    if src.equals(dst):
        return True
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        return _INTS.index(str(src)) <= _INTS.index(str(dst))
    if pa.types.is_floating(dst) and str(dst) == "double":
        return (pa.types.is_integer(src) and str(src) != "int64") or str(src) == "float"
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale
    if pa.types.is_integer(src) and pa.types.is_decimal(dst):
        digits = {"int8": 3, "int16": 5, "int32": 10, "int64": 20}[str(src)]
        return dst.precision - dst.scale >= digits
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return src.tz == dst.tz
    if (pa.types.is_string(src) and pa.types.is_large_string(dst)) or \
            (pa.types.is_binary(src) and pa.types.is_large_binary(dst)):
        return True
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        dst_fields = {f.name: f for f in dst}
        return all(f.name in dst_fields and widens(f.type, dst_fields[f.name].type) for f in src)
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (pa.types.is_list(dst) or
                                                                   pa.types.is_large_list(dst)):
        return widens(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return widens(src.key_type, dst.key_type) and widens(src.item_type, dst.item_type)
    return False


def delta_arrow_type(t: Any) -> Any:
    """The Arrow type a Delta table stores for Arrow type ``t`` (what a reader of the table gets back)."""
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC") if t.tz else pa.timestamp("us")
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, delta_arrow_type(f.type), True, f.metadata) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", delta_arrow_type(t.value_type), True))
    if pa.types.is_map(t):
        return pa.map_(delta_arrow_type(t.key_type), pa.field("value", delta_arrow_type(t.item_type), True))
    if pa.types.is_null(t):
        return pa.string()
    return t


def normalize_schema(schema: Any) -> Any:
    """``schema`` with Delta's storage types and every field nullable (Delta tables written here are)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, delta_arrow_type(f.type), True) for f in schema])


@dataclass(frozen=True)
class SchemaPlan:
    """How a batch's schema fits a table: the schema to write files with and the columns to add."""

    target: Any  # pa.Schema the data is cast to (table columns first, new columns after)
    new_fields: tuple = ()  # pa.Field objects added to the table
    widened: tuple = ()  # names of table columns whose type must widen (not supported by deltalake)


def reconcile_schema(table: Any | None, incoming: Any, *, evolve: bool, where: str) -> SchemaPlan:
    """Fit ``incoming`` (an Arrow schema) to ``table`` (the table's Arrow schema, None when new).

    Columns missing from the data are written as nulls; narrower incoming types are cast up to the table's;
    new columns are added when ``evolve`` (else a DataError lists them); a type that would have to widen in the
    table, or an incompatible one, is a DataError naming the column and both types.
    """
    import pyarrow as pa

    incoming = normalize_schema(incoming)
    if table is None:
        return SchemaPlan(incoming)
    table = normalize_schema(table)
    have = {f.name.lower(): f for f in incoming}
    problems, widened = [], []
    for f in table:
        g = have.get(f.name.lower())
        if g is None or g.type.equals(f.type) or pa.types.is_null(g.type):
            continue
        if widens(g.type, f.type):
            continue
        if widens(f.type, g.type):
            widened.append(f.name)
            problems.append(f"column {f.name} is {f.type} in the table and {g.type} in the data: widening the "
                            f"table's type needs Delta's typeWidening feature, which only the delta-spark engine "
                            f"writes (and delta-rs does not read); cast the column to {f.type} upstream (e.g. "
                            f"with the Cast SMT)")
        else:
            problems.append(f"column {f.name} is {f.type} in the table and {g.type} in the data, which is not a "
                            f"type Delta can widen to")
    names = {f.name.lower() for f in table}
    new = tuple(f for f in incoming if f.name.lower() not in names)
    if new and not evolve:
        problems.append(f"the data has columns the table lacks ({', '.join(f.name for f in new)}); set "
                        f"delta.schema.evolution=true to add them")
    if problems:
        raise DataError(f"Delta table {where}: the batch does not match the table schema: " + "; ".join(problems))
    return SchemaPlan(pa.schema(list(table) + list(new)), new, tuple(widened))


def cast_to(data: Any, target: Any) -> Any:
    """``data`` (a pa.Table) with exactly ``target``'s columns (case-insensitive names, nulls for missing)."""
    import pyarrow as pa

    by_name = {n.lower(): i for i, n in enumerate(data.column_names)}
    cols = []
    for f in target:
        i = by_name.get(f.name.lower())
        col = data.column(i) if i is not None else pa.nulls(data.num_rows, f.type)
        if not col.type.equals(f.type):
            col = col.cast(f.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=target)


def table_schema(uri: str, *, files: Locations = LOCAL) -> Any | None:
    """The Arrow schema of the Delta table at ``uri`` (None when there is no table)."""
    deltalake = require_deltalake()
    path = table_root(uri)
    if latest_version(path, files=files) is None:
        return None
    return pa_schema_of(deltalake.DeltaTable(path, storage_options=_options(files, path)))


def pa_schema_of(dt: Any) -> Any:
    import pyarrow as pa

    return pa.schema(dt.schema().to_arrow())


# ------------------------------------------------------------------------------------------ executors: files
@dataclass(frozen=True)
class FileAdd:
    """A Parquet file written into a table directory, as a Delta ``add`` action needs it (picklable)."""

    path: str  # relative to the table root, URL-encoded as in the Delta log
    size: int
    partition_values: dict
    modification_time: int
    stats: str
    rows: int
    schema: bytes = field(default=b"", repr=False)  # serialized pa.Schema the file was written with


def _partition_text(v: Any) -> str | None:
    import datetime

    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(v)


def _stats(table: Any) -> str:
    """Delta file statistics: numRecords, nullCount of top-level columns, min/max of ints, strings and dates."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mins, maxs, nulls = {}, {}, {}
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_large_list(t):
            continue
        nulls[name] = col.null_count
        if col.null_count == len(col):
            continue
        if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_date32(t):
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if pa.types.is_date32(t):
                lo, hi = lo.isoformat(), hi.isoformat()
            mins[name], maxs[name] = lo, hi
    return json.dumps({"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
                      separators=(",", ":"))


def write_files(table_uri: str, data: Any, *, partition_by: Sequence[str] = (), prefix: str = "part",
                max_rows_per_file: int = 1_000_000, files: Locations = LOCAL) -> list[FileAdd]:
    """Executor: write ``data`` (a pa.Table already cast to the target schema) as Parquet files under the
    table directory (one directory per partition value, partition columns not stored in the files)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root = table_root(table_uri)
    if data.num_rows == 0:
        return []
    groups: list[tuple[dict, Any]]
    if partition_by:
        keys = data.select(list(partition_by))
        uniq = keys.group_by(list(partition_by), use_threads=False).aggregate([]).to_pylist()
        groups = []
        for values in uniq:
            mask = None
            for k, v in values.items():
                col = data.column(k)
                m = pc.is_null(col) if v is None else pc.fill_null(pc.equal(col, pa.scalar(v, col.type)), False)
                mask = m if mask is None else pc.and_(mask, m)
            groups.append(({k: _partition_text(v) for k, v in values.items()},
                           data.filter(mask).drop_columns(list(partition_by))))
    else:
        groups = [({}, data)]
    out = []
    for pvalues, part in groups:
        rel_dir = "/".join(f"{k}={quote(HIVE_NULL if v is None else v, safe='')}" for k, v in pvalues.items())
        for lo in range(0, part.num_rows, max_rows_per_file):
            chunk = part.slice(lo, max_rows_per_file)
            name = f"{prefix}-{uuid.uuid4()}.c000.snappy.parquet"
            rel = f"{rel_dir}/{name}" if rel_dir else name
            # A file at its final name is always complete: written whole in memory, then one atomic write
            # (locally a temporary file renamed, in a bucket one PUT).
            sink = pa.BufferOutputStream()
            pq.write_table(chunk, sink, compression="snappy")
            body = sink.getvalue().to_pybytes()
            files.write_bytes(Locations.join(root, *rel.split("/")), body)
            # The log stores the URL-encoded path (Delta's protocol); file names here need no encoding.
            out.append(FileAdd(rel, len(body), pvalues, int(time.time() * 1000), _stats(chunk), chunk.num_rows,
                               data.schema.serialize().to_pybytes()))
    return out


def delete_files(table_uri: str, written: Iterable[FileAdd], *, files: Locations = LOCAL) -> None:
    """Remove written but uncommitted files (an aborted or replayed batch)."""
    root = table_root(table_uri)
    for f in written:
        files.remove(_file(root, f.path))


# ------------------------------------------------------------------------------------------ driver: commits
def _commit_properties(app_id: str, batch_id: int | None, metadata: Mapping[str, Any] | None = None) -> Any:
    from deltalake import CommitProperties, Transaction

    txns = [Transaction(app_id, int(batch_id))] if batch_id is not None else None
    return CommitProperties(app_transactions=txns, custom_metadata=dict(metadata or {}) or None)


def committed_version(table_uri: str, app_id: str, *, files: Locations = LOCAL) -> int | None:
    """The last batch id ``app_id`` committed to the table (None: none, or no table)."""
    deltalake = require_deltalake()
    path = table_root(table_uri)
    if latest_version(path, files=files) is None:
        return None
    return deltalake.DeltaTable(path, storage_options=_options(files, path)).transaction_version(app_id)


def is_replay(table_uri: str, app_id: str, batch_id: int | None, *, files: Locations = LOCAL) -> bool:
    """True when ``batch_id`` of ``app_id`` is already in the table (Spark replays a committed batch)."""
    if batch_id is None:
        return False
    last = committed_version(table_uri, app_id, files=files)
    return last is not None and last >= batch_id


def _check_forward(dt: Any, app_id: str, batch_id: int | None, where: str) -> None:
    if batch_id is None:
        return
    last = dt.transaction_version(app_id)
    if last is not None and last >= batch_id:
        raise ConnectError(f"Delta table {where}: application {app_id} already committed batch {last}; refusing "
                           f"to move its transaction version back to {batch_id}")


def _evolve(dt: Any, plan: SchemaPlan) -> None:
    if plan.new_fields:
        from deltalake import Field, Schema

        fields = Schema.from_arrow(__import__("pyarrow").schema(list(plan.new_fields))).fields
        log.info("Delta table %s: adding columns %s", dt.table_uri, [f.name for f in fields])
        dt.alter.add_columns(list(fields) if not isinstance(fields, Field) else [fields])


def commit_files(table_uri: str, written: Sequence[FileAdd], *, app_id: str, batch_id: int | None,
                 partition_by: Sequence[str] = (), evolve: bool = False, overwrite: bool = False,
                 configuration: Mapping[str, str] | None = None, metadata: Mapping[str, Any] | None = None,
                 files: Locations = LOCAL) -> bool:
    """Driver: commit ``written`` (the files) in one Delta transaction with the app transaction ``(app_id, batch_id)``.

    Returns False (and deletes the files) when the batch was already committed (a replay). Before the commit,
    checks that every file exists with its recorded size, that every file's schema fits the table (adding new
    columns when ``evolve``), and that the app transaction version only moves forward.
    """
    import pyarrow as pa
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    path = table_root(table_uri)
    options = _options(files, path)
    if is_replay(path, app_id, batch_id, files=files):
        log.info("Delta table %s: batch %s of %s already committed; skipping the replay", path, batch_id, app_id)
        delete_files(path, written, files=files)
        return False
    for f in written:  # pitfall 1: deltalake commits adds for files that do not exist
        try:
            size = files.size(_file(path, f.path))
        except FileNotFoundError:
            raise ConnectError(f"Delta table {path}: data file {f.path} written by a task of batch {batch_id} "
                               f"is missing; the batch is not committed (Spark retries it)") from None
        if size != f.size:
            raise ConnectError(f"Delta table {path}: data file {f.path} has {size} bytes, {f.size} expected")
    schemas = {f.schema for f in written if f.schema}
    incoming = [pa.ipc.read_schema(pa.py_buffer(s)) for s in schemas]
    exists = latest_version(path, files=files) is not None
    actions = [AddAction(f.path, f.size, f.partition_values, f.modification_time, True, f.stats) for f in written]
    props = _commit_properties(app_id, batch_id, metadata)
    if not exists:
        if not incoming:
            return False  # nothing to create a table from
        schema = normalize_schema(incoming[0])
        for s in incoming[1:]:  # pitfall 2: deltalake does not validate the data schema
            reconcile_schema(schema, s, evolve=False, where=path)
        files.makedirs(path)
        create_table_with_add_actions(path, Schema.from_arrow(schema), actions, mode="append",
                                      partition_by=list(partition_by) or None, configuration=configuration,
                                      commit_properties=props, storage_options=options)
        return True
    dt = DeltaTable(path, storage_options=options)
    mapping = dt.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mapping != "none":  # our Parquet files carry the logical names; such a table reads them as nulls
        delete_files(path, written, files=files)
        raise ConnectError(f"Delta table {path} uses column mapping (delta.columnMapping.mode={mapping}), which the "
                           f"deltalake engine does not write; write it with delta.engine=delta-spark")
    current = pa_schema_of(dt)
    for s in incoming:
        plan = reconcile_schema(current, _with_partitions(s, current, partition_by), evolve=evolve, where=path)
        if plan.new_fields:
            _evolve(dt, plan)
            dt = DeltaTable(path, storage_options=options)
            current = pa_schema_of(dt)
        elif not _same_columns(plan.target, current):
            raise DataError(f"Delta table {path}: files were written with schema {s} that is not the table's")
    table_parts = list(dt.metadata().partition_columns)
    if list(partition_by) and list(partition_by) != table_parts:
        raise DataError(f"Delta table {path} is partitioned by {table_parts}, not by {list(partition_by)} "
                        f"(delta.partition.by)")
    _check_forward(dt, app_id, batch_id, path)  # pitfall 3: versions may otherwise go backwards
    # list(...): deltalake takes a list[AddAction | RemoveAction], which a list[AddAction] is not (lists are invariant).
    dt.create_write_transaction(list(actions), mode="overwrite" if overwrite else "append", schema=current,
                                partition_by=table_parts or None, commit_properties=props)
    return True


def _with_partitions(file_schema: Any, table: Any, partition_by: Sequence[str]) -> Any:
    """A file's schema plus the partition columns it does not store (typed as in the table)."""
    import pyarrow as pa

    names = set(file_schema.names)
    extra = [table.field(p) for p in partition_by if p not in names and p in table.names]
    return pa.schema(list(file_schema) + extra)


def _same_columns(a: Any, b: Any) -> bool:
    return [f.name.lower() for f in a] == [f.name.lower() for f in b]


def create_table(table_uri: str, schema: Any, *, partition_by: Sequence[str] = (),
                 configuration: Mapping[str, str] | None = None, files: Locations = LOCAL) -> None:
    """Create an empty Delta table (no-op when one exists)."""
    from deltalake import DeltaTable, Schema

    path = table_root(table_uri)
    if latest_version(path, files=files) is not None:
        return
    files.makedirs(path)
    DeltaTable.create(path, Schema.from_arrow(normalize_schema(schema)), mode="ignore",
                      partition_by=list(partition_by) or None, configuration=configuration,
                      storage_options=_options(files, path))


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge_changes(table_uri: str, changes: Any, *, keys: Sequence[str], op_column: str, app_id: str,
                  batch_id: int | None, partition_by: Sequence[str] = (), evolve: bool = False,
                  configuration: Mapping[str, str] | None = None, files: Locations = LOCAL) -> bool:
    """Driver: apply ``changes`` (a pa.Table: one row per key, the last change; ``op_column`` is ``"d"`` for a
    delete) with ``DeltaTable.merge``, committed with the app transaction ``(app_id, batch_id)``.

    Returns False when the batch was already committed (a replay)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    path = table_root(table_uri)
    options = _options(files, path)
    if is_replay(path, app_id, batch_id, files=files):
        log.info("Delta table %s: batch %s of %s already committed; skipping the replay", path, batch_id, app_id)
        return False
    rows_schema = pa.schema([f for f in changes.schema if f.name != op_column])
    if latest_version(path, files=files) is None:
        create_table(path, rows_schema, partition_by=partition_by, configuration=configuration, files=files)
    dt = DeltaTable(path, storage_options=options)
    plan = reconcile_schema(pa_schema_of(dt), rows_schema, evolve=evolve, where=path)
    if plan.new_fields:
        _evolve(dt, plan)
        dt = DeltaTable(path, storage_options=options)
    _check_forward(dt, app_id, batch_id, path)
    target = plan.target
    source = cast_to(changes, pa.schema(list(target) + [pa.field(op_column, pa.string())]))
    cond = " AND ".join(f"t.{quote_identifier(k)} = s.{quote_identifier(k)}" for k in keys)
    present = {n.lower() for n in rows_schema.names}
    # Columns the batch does not carry keep their table values on update (insert: null).
    sets = {quote_identifier(f.name): f"s.{quote_identifier(f.name)}" for f in target if f.name.lower() in present}
    is_delete = f"s.{quote_identifier(op_column)} = 'd'"
    (dt.merge(source, cond, source_alias="s", target_alias="t",
              commit_properties=_commit_properties(app_id, batch_id))
     .when_matched_delete(predicate=is_delete)
     .when_matched_update(updates=sets, predicate=f"NOT ({is_delete})")
     .when_not_matched_insert(updates=sets, predicate=f"NOT ({is_delete})")
     .execute())
    return True


# ------------------------------------------------------------------------------------------ the log (source)
def latest_version(table_uri: str, *, files: Locations = LOCAL) -> int | None:
    """The table's newest version from a listing of ``_delta_log`` (None when there is no table)."""
    log_dir = Locations.join(table_root(table_uri), "_delta_log")
    names = files.names(log_dir)
    best = None
    for n in names:
        if len(n) == 25 and n.endswith(".json") and n[:20].isdigit():
            v = int(n[:20])
            best = v if best is None or v > best else best
    if best is None:
        try:  # only checkpoints left (log cleanup): the checkpoint's version
            best = int(json.loads(files.read_text(Locations.join(log_dir, "_last_checkpoint")))["version"])
        except (FileNotFoundError, ValueError, KeyError):
            return None
    return best


def read_commit(table_uri: str, version: int, *, files: Locations = LOCAL) -> list[dict]:
    """The actions of one commit (``_delta_log/<version>.json``)."""
    p = Locations.join(table_root(table_uri), "_delta_log", f"{version:020d}.json")
    try:
        return [json.loads(line) for line in files.read_text(p).splitlines() if line.strip()]
    except FileNotFoundError:
        raise ConnectError(f"Delta table {table_uri}: the log of version {version} is gone (log retention "
                           f"removed it); restart the query from a newer version with a new checkpoint") from None
