"""Record errors as Column expressions: how transforms and converters report a record that fails.

Kafka Connect handles a failing record per record in Java. Here a stage (a transform or a converter) computes,
with Column expressions only, a boolean ``failed`` and a ``message`` for each row, and hands them to
:func:`checked`. What happens next depends on the DataFrame:

* **strict** (no ``_kc_error`` column; ``errors.tolerance=none`` or a bare ``df.transform(...)``): every updated
  column is wrapped in ``when(failed, raise_error(message))``, so the query fails on the first bad record with
  a message naming the stage, the class and the record's topic/partition/offset. While a chain runs with the
  key/value lifted (``transforms/chain.py``), the check is a filter instead, before the updates: a raise inside
  the struct would keep Catalyst from merging the stages' struct updates;
* **tolerant** (the pipeline added ``_kc_error`` with :func:`enable_error_column`; ``errors.tolerance=all``):
  the first failure of each row is recorded in ``_kc_error`` (stage, class name, alias, exception class,
  message) and later stages leave that row's error alone; the pipeline then splits the batch into good rows
  and failed rows for the dead-letter sink.

Stage names are Kafka's (``TRANSFORMATION``, ``KEY_CONVERTER``, ``VALUE_CONVERTER``, ``HEADER_CONVERTER``,
``TASK_PUT``, ``TASK_POLL``).

>>> df2 = checked(df, {"value": F.try_cast("value", "int")},              # doctest: +SKIP
...               failed=F.col("value").isNotNull() & F.try_cast("value", "int").isNull(),
...               message=F.lit("cannot cast"), stage="TRANSFORMATION", class_name="Cast$Value")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

__all__ = ["ERROR_COL", "ERROR_TYPE", "DATA_EXCEPTION", "has_error_column", "enable_error_column", "checked",
           "coordinates", "drop_where", "ok", "with_metadata"]

ERROR_COL = "_kc_error"
ERROR_TYPE = StructType([StructField(n, StringType()) for n in
                         ("stage", "class_name", "alias", "exception_class", "message")])
DATA_EXCEPTION = "org.apache.kafka.connect.errors.DataException"
LIFT_FLAG_PREFIX = "__kc_null_"  # transforms.base.null_flag


def has_error_column(df: DataFrame) -> bool:
    return ERROR_COL in df.columns


def enable_error_column(df: DataFrame) -> DataFrame:
    """Switch ``df`` to tolerant mode: add an all-null ``_kc_error`` column (idempotent)."""
    if has_error_column(df):
        return df
    return df.withColumn(ERROR_COL, F.lit(None).cast(ERROR_TYPE))


def ok(df: DataFrame) -> Column:
    """True for rows that have not failed (always true in strict mode)."""
    return F.col(ERROR_COL).isNull() if has_error_column(df) else F.lit(True)


def coordinates(df: DataFrame) -> Column:
    """`` (topic=t, partition=p, offset=o)`` for the columns that exist, as a string Column."""
    parts = []
    for name in ("topic", "partition", "offset"):
        if name in df.columns:
            parts.append(F.concat(F.lit(f"{name}="), F.coalesce(F.col(name).cast("string"), F.lit("null"))))
    if not parts:
        return F.lit("")
    return F.concat(F.lit(" ("), F.concat_ws(", ", *parts), F.lit(")"))


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def checked(df: DataFrame, updates: Mapping[str, Column], *, failed: Column | None, message: Column | str | None,
            stage: str, class_name: str, alias: str | None = None,
            exception_class: str = DATA_EXCEPTION, drop: Sequence[str] = (),
            metadata: Mapping[str, Mapping[str, Any]] | None = None) -> DataFrame:
    """Apply ``updates`` (column name -> new expression) with per-record failure detection.

    ``failed`` is a boolean Column (null counts as false); ``message`` a string Column or literal that says
    what went wrong for that row (the record's coordinates are appended here). ``drop``: columns left out of the
    result (staged inputs of the updates); ``metadata``: an updated column's new metadata. Both in the same
    projection: a sink typed from its messages builds this for every micro-batch, and Spark analyses the whole plan
    again for every DataFrame step.
    """
    if failed is None:
        return _project(df, dict(updates), drop, metadata) if updates or drop or metadata else df
    msg = F.lit(message) if isinstance(message, str) else message if message is not None else F.lit("failed")
    failed = F.coalesce(failed, F.lit(False))
    who = f"{stage} {class_name}" + (f" (alias {alias})" if alias else "")
    full = F.concat(F.lit(f"{who} failed: "), msg, coordinates(df))
    if has_error_column(df):
        err = F.when(F.col(ERROR_COL).isNull() & failed,
                     F.struct(F.lit(stage).alias("stage"), F.lit(class_name).alias("class_name"),
                              F.lit(alias).cast("string").alias("alias"),
                              F.lit(exception_class).alias("exception_class"),
                              full.alias("message"))).otherwise(F.col(ERROR_COL))
        # The updates take temporary names in the check's projection and their own in a projection of plain
        # references after it. In one projection, Spark resolves a column read inside a lambda whose body holds
        # an expression resolved late (from_json inside the Decimal decode's transform) against a same-named
        # alias of that projection, not the input: the check of a "value" update read the new value, and every
        # Decimal failed as "invalid Decimal" under errors.tolerance=all.
        temp = {name: f"_kc_update_{i}" for i, name in enumerate(updates)}
        staged = df.withColumns({**{temp[name]: expr for name, expr in updates.items()}, ERROR_COL: err})
        ordered = [c for c in df.columns if c not in drop] + [name for name in updates if name not in df.columns]
        return staged.select(*[_named(F.col(_quoted(temp[c])) if c in temp else F.col(_quoted(c)), c, metadata)
                               for c in ordered])
    if any(c.startswith(LIFT_FLAG_PREFIX) for c in df.columns):
        # A chain runs with key/value lifted (transforms/chain.py): a raise folded into the struct would make it
        # nullable again and keep Catalyst from merging the stages' struct updates. A filter is never pruned;
        # it runs before the updates, on the same record.
        df = df.filter(F.when(failed, F.raise_error(full).cast("boolean")).otherwise(F.lit(True)))
        return _project(df, dict(updates), drop, metadata) if updates or drop or metadata else df
    if not updates:
        # Nothing to attach the check to: keep a checked copy of an existing column.
        first = next(c for c in df.columns if c not in drop)
        updates = {first: F.col(_quoted(first))}
    # raise_error is folded into each updated column so that column pruning can never drop the check.
    guarded = {name: F.when(failed, F.raise_error(full)).otherwise(expr) for name, expr in updates.items()}
    return _project(df, guarded, drop, metadata)


def with_metadata(df: DataFrame, metadata: Mapping[str, Mapping[str, Any]]) -> DataFrame:
    """``df`` with each named column's metadata replaced (``withMetadata`` of each), in one projection."""
    return _project(df, {}, (), metadata) if metadata else df


def _named(c: Column, name: str, metadata: Mapping[str, Mapping[str, Any]] | None) -> Column:
    if metadata and name in metadata:
        return c.alias(name, metadata=dict(metadata[name]))
    return c.alias(name)


def _project(df: DataFrame, updates: Mapping[str, Column], drop: Sequence[str],
             metadata: Mapping[str, Mapping[str, Any]] | None) -> DataFrame:
    """``df.withColumns(updates).drop(*drop)`` with ``metadata`` set, as one projection (one DataFrame step)."""
    lower = {c.lower() for c in df.columns}
    if any(n not in df.columns and n.lower() in lower for n in updates) or \
            any(n not in df.columns and n not in updates for n in metadata or {}):
        # A name that matches no column exactly: Spark's own resolution, as withColumns and withMetadata do it
        # (case-insensitive by default; metadata of a column that does not exist is an error)
        out = df.withColumns(dict(updates)).drop(*drop)
        for name, md in (metadata or {}).items():
            out = out.withMetadata(name, dict(md))
        return out
    kept = [c for c in df.columns if c not in drop]
    cols = [_named(updates[c], c, metadata) if c in updates
            else _named(F.col(_quoted(c)), c, metadata) if metadata and c in metadata else F.col(_quoted(c))
            for c in kept]
    cols += [_named(e, name, metadata) for name, e in updates.items() if name not in df.columns]
    return df.select(*cols)


def drop_where(df: DataFrame, condition: Column) -> DataFrame:
    """Drop rows where ``condition`` holds, but never a row that already failed (it goes to the DLQ)."""
    keep = ~F.coalesce(condition, F.lit(False))
    if has_error_column(df):
        keep = keep | F.col(ERROR_COL).isNotNull()
    return df.filter(keep)
