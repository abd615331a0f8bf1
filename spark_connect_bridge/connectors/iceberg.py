"""Iceberg sink: Apache Iceberg's Kafka Connect sink (``org.apache.iceberg.connect.IcebergSinkConnector``) configs,
written exactly once per micro-batch with pyiceberg (Arrow, no JVM).

What a record becomes: the value struct's fields are the table's columns (a tombstone has no row in append mode).
``iceberg.tables`` names the destination tables (``namespace.table``): every record goes to each of them, or, with
``iceberg.tables.route-field``, to those whose ``iceberg.table.<t>.route-regex`` matches the field's value; with
``iceberg.tables.dynamic-enabled`` the field's value (lower-cased) is the table name.
``iceberg.tables.upsert-mode-enabled`` (a key of the Tabular connector Apache's sink grew from) replaces the rows
of the id columns (``iceberg.tables.default-id-columns`` / ``iceberg.table.<t>.id-columns``; default: the record
key struct's fields): one transaction deletes the batch's keys and appends their last rows. ``iceberg.tables.cdc-field``
names the value field holding an operation (Debezium's ``op`` after ExtractNewRecordState's ``add.fields=op``, or
``I``/``U``/``D``): a value starting with ``d``/``D`` deletes the key, any other upserts it. A Debezium envelope
(``op``, ``before``, ``after``) is applied as it is in upsert or CDC mode.

Exactly once: every commit's snapshots carry the summary properties ``kconnect.app-id`` (the checkpoint's
application id) and ``kconnect.batch-id``, as the original keeps its control-topic offsets in the snapshot summary;
a batch whose id the table already holds for that app id is skipped (Spark replays the last batch after a crash).
A commit that loses a race with another writer (``CommitFailedException``) is retried on the refreshed table.

The control-topic keys (``iceberg.control.*``, ``iceberg.coordinator.*``, ``iceberg.connect.group-id``) are
accepted and have no effect: the micro-batch is the unit of commit, so ``iceberg.control.commit.interval-ms``
corresponds to the streaming trigger's interval (``trigger(processingTime=...)``).

>>> (df.writeStream.format("kconnect")                                           # doctest: +SKIP
...    .option("connector.class", "org.apache.iceberg.connect.IcebergSinkConnector")
...    .option("iceberg.tables", "db.orders").option("iceberg.catalog.type", "jdbc")
...    .option("iceberg.catalog.uri", "jdbc:sqlite:/data/catalog.db")
...    .option("iceberg.catalog.warehouse", "/data/warehouse")
...    .option("iceberg.tables.auto-create-enabled", "true")
...    .option("checkpointLocation", "/ckpt/orders").start())
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..config import ConfigDef, Importance, Type
from ..config.common import ALLOWED_PATHS_OPTION, FORBIDDEN_PATHS_OPTION
from ..core import plugins
from ..core.paths import local_path
from ..errors import ConfigError, ConfigProblem, ConnectError, DataError
from .base import CommitContext, SinkConnector, WriteContext
from .delta import OP_COLUMN, last_per_key, rows_arrow

__all__ = ["IcebergSinkConnector", "catalog_properties", "check_table_files", "load_checked_table",
           "load_iceberg_catalog", "partition_fields", "worker_paths", "APP_ID_PROPERTY", "BATCH_ID_PROPERTY"]

log = logging.getLogger(__name__)

ORIGINAL = "org.apache.iceberg.connect.IcebergSinkConnector"
APP_ID_PROPERTY = "kconnect.app-id"
BATCH_ID_PROPERTY = "kconnect.batch-id"
_ORDER_COLUMNS = ("_kc_order", "_kc_part", "_kc_off", "_kc_task", "_kc_idx")
_TABLE_KEYS = ("id-columns", "partition-by", "route-regex", "commit-branch")
_TABLE_KEY = re.compile(r"^iceberg\.table\.(?P<table>.+)\.(?P<key>[a-z-]+)$")
_TRANSFORM = re.compile(r"^\s*(?P<name>\w+)\s*\(\s*(?P<args>[^)]*)\)\s*$")
_COMMIT_RETRIES = 8
#: catalog property names whose value is a Python class pyiceberg imports (as iceberg_io.loads_code tells)
_CODE_KEY_ENDINGS = ("-impl", ".impl")

#: iceberg.catalog.catalog-impl -> the pyiceberg catalog type that reads and writes the same catalog
_CATALOG_IMPLS = {
    "org.apache.iceberg.jdbc.JdbcCatalog": "sql",
    "org.apache.iceberg.rest.RESTCatalog": "rest",
    "org.apache.iceberg.hive.HiveCatalog": "hive",
    "org.apache.iceberg.aws.glue.GlueCatalog": "glue",
}
_CATALOG_TYPES = {"jdbc": "sql", "sql": "sql", "rest": "rest", "hive": "hive", "glue": "glue"}
#: Java catalog property names whose pyiceberg spelling differs
_PROPERTY_NAMES = {"client.region": "s3.region"}

_CONTROL_NOTE = ("the Iceberg sink's control topic and coordinator are not used here: each Spark micro-batch is "
                 "committed by the driver in one Iceberg transaction that records the batch")


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _split_partition(text: str | None) -> list[str]:
    """``iceberg.tables.default-partition-by`` entries: commas inside ``bucket(id, 16)`` do not split."""
    out, depth, cur = [], 0, ""
    for ch in text or "":
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def partition_fields(spec: Sequence[str]) -> list[tuple[str, Any, str]]:
    """``(source column, pyiceberg transform, partition field name)`` of each partition-by entry, as Iceberg's
    Kafka Connect sink reads them: ``col``, ``year(col)``/``years``, ``month``, ``day``, ``hour``, ``bucket(col, n)``,
    ``truncate(col, n)``.

    >>> [(c, str(t), n) for c, t, n in partition_fields(["region", "days(ts)", "bucket(id, 4)"])]
    [('region', 'identity', 'region'), ('ts', 'day', 'ts_day'), ('id', 'bucket[4]', 'id_bucket_4')]
    """
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        YearTransform,
    )

    out: list[tuple[str, Any, str]] = []
    for entry in spec:
        m = _TRANSFORM.match(entry)
        if not m:
            out.append((entry, IdentityTransform(), entry))
            continue
        name, args = m["name"].lower(), [a.strip() for a in m["args"].split(",")]
        simple = {"year": YearTransform, "years": YearTransform, "month": MonthTransform, "months": MonthTransform,
                  "day": DayTransform, "days": DayTransform, "hour": HourTransform, "hours": HourTransform}
        if name in simple and len(args) == 1:
            transform = simple[name]()
            out.append((args[0], transform, f"{args[0]}_{name.rstrip('s')}"))
        elif name in ("bucket", "truncate") and len(args) == 2:
            column, width = (args[0], args[1]) if not args[0].isdigit() else (args[1], args[0])
            if not width.isdigit():
                raise ValueError(f"{entry}: {name} takes a column and a number")
            cls = BucketTransform if name == "bucket" else TruncateTransform
            out.append((column, cls(int(width)), f"{column}_{name}_{width}"))
        else:
            raise ValueError(f"{entry}: the transforms are year, month, day, hour (one column), bucket and truncate "
                             f"(a column and a number)")
    return out


def _local_uri(path: str) -> str:
    if "://" in path:
        return path
    return "file://" + local_path(path.removeprefix("file:"))


def _sqlalchemy_url(uri: str, user: str | None, password: str | None) -> str:
    """A JDBC catalog URL (``jdbc:sqlite:/x.db``, ``jdbc:postgresql://h:5432/db``) as the SQLAlchemy URL pyiceberg's
    SQL catalog opens; a SQLAlchemy URL is kept."""
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit

    if not uri.lower().startswith("jdbc:"):
        return uri
    rest = uri[len("jdbc:"):]
    if rest.lower().startswith("sqlite:"):
        path = rest[len("sqlite:"):].removeprefix("//")
        return "sqlite:///" + local_path(path) if path != ":memory:" else "sqlite://"
    if rest.lower().startswith("postgresql:"):
        parts = urlsplit(rest)
        query = dict(parse_qsl(parts.query))
        user = user or query.pop("user", None)
        password = password or query.pop("password", None)
        auth = ""
        if user:
            auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@"
        return (f"postgresql+psycopg://{auth}{parts.netloc}{parts.path}"
                + (f"?{urlencode(query)}" if query else ""))
    raise ValueError("the pyiceberg engine opens JDBC catalogs on SQLite (jdbc:sqlite:<file>) and PostgreSQL "
                     "(jdbc:postgresql://host:port/db), or a SQLAlchemy URL")


def catalog_properties(iceberg_catalog: Mapping[str, str]) -> dict[str, str]:
    """The ``iceberg.catalog.*`` entries (prefix stripped) as pyiceberg's ``load_catalog`` properties.

    >>> catalog_properties({"type": "jdbc", "uri": "jdbc:sqlite:/tmp/c.db", "warehouse": "/tmp/wh"})["uri"]
    'sqlite:////tmp/c.db'
    """
    props = {_PROPERTY_NAMES.get(k, k): str(v) for k, v in iceberg_catalog.items()}
    impl = props.pop("catalog-impl", "")
    kind = props.pop("type", "")
    if impl:
        if impl not in _CATALOG_IMPLS:
            raise ValueError(f"catalog-impl {impl} has no pyiceberg catalog; known: {', '.join(_CATALOG_IMPLS)}")
        catalog_type = _CATALOG_IMPLS[impl]
    elif kind:
        if kind.lower() not in _CATALOG_TYPES:
            raise ValueError(f"type {kind}: the pyiceberg engine opens {', '.join(sorted(set(_CATALOG_TYPES)))} "
                             "catalogs (a hadoop catalog is a directory layout only Iceberg's Java library writes)")
        catalog_type = _CATALOG_TYPES[kind.lower()]
    else:
        catalog_type = "rest"  # Iceberg's CatalogUtil default
    props.pop("io-impl", None)  # pyiceberg chooses its FileIO from the warehouse URI
    path_style = props.pop("s3.path-style-access", None)  # Java's S3FileIO key; pyiceberg's is the opposite
    if path_style is not None and "s3.force-virtual-addressing" not in props:
        props["s3.force-virtual-addressing"] = "false" if path_style.strip().lower() == "true" else "true"
    user, password = props.pop("jdbc.user", None), props.pop("jdbc.password", None)
    if catalog_type == "sql":
        if not props.get("uri"):
            raise ValueError("a JDBC catalog needs uri (jdbc:sqlite:<file> or jdbc:postgresql://...)")
        props["uri"] = _sqlalchemy_url(props["uri"], user, password)
    if props.get("warehouse"):
        props["warehouse"] = _local_uri(props["warehouse"])
    props["type"] = catalog_type
    return props


def load_iceberg_catalog(name: str, iceberg_catalog: Mapping[str, str], *,
                         allowed_paths: Sequence[str] | None = None, forbidden_paths: Sequence[str] = ()) -> Any:
    """The pyiceberg catalog ``name`` with the ``iceberg.catalog.*`` entries (prefix stripped) as properties.

    With ``allowed_paths`` (a worker's ``connector.allowed.paths``), every file the catalog's tables send pyiceberg
    to must lie under them and outside ``forbidden_paths`` (:mod:`.iceberg_io`)."""
    require_pyiceberg()
    from pyiceberg.catalog import load_catalog

    # imported here: pyiceberg is an optional extra, and iceberg_io subclasses its FileIO
    from .iceberg_io import guard_catalog, guarded_properties

    props = catalog_properties(iceberg_catalog)
    if allowed_paths is None:
        return load_catalog(name, **props)
    guarded = guarded_properties(props, list(allowed_paths), list(forbidden_paths))
    return guard_catalog(load_catalog(name, **guarded), guarded)


def worker_paths(config: Any) -> dict[str, Any]:
    """The ``allowed_paths``/``forbidden_paths`` a worker handed the connector (``kconnect.allowed.paths``), as
    :func:`load_iceberg_catalog` takes them; none outside a worker."""
    allowed = config.originals.get(ALLOWED_PATHS_OPTION)
    if allowed is None:
        return {}
    return {"allowed_paths": json.loads(str(allowed)),
            "forbidden_paths": json.loads(str(config.originals.get(FORBIDDEN_PATHS_OPTION) or "[]"))}


def load_checked_table(catalog: Any, name: str) -> Any:
    """``catalog.load_table(name)``, refused naming the table when its files lie outside a worker's allowed paths
    (:func:`check_table_files`); NoSuchTableError when there is no such table."""
    try:
        table = catalog.load_table(name)
    except PermissionError as e:  # its metadata file, refused by the FileIO before it is read
        raise ConnectError(f"Iceberg table {name}: {e}") from None
    check_table_files(table, name)
    return table


def check_table_files(table: Any, name: str) -> None:
    """Refuse, naming the table, one whose files lie outside a worker's allowed paths or whose properties would
    make pyiceberg import a class (before any data file is read or written; the FileIO checks each file too)."""
    from .iceberg_io import LOCATION_PROVIDER, GuardedFileIO

    io = table.io
    if not isinstance(io, GuardedFileIO):
        return
    if table.metadata.properties.get(LOCATION_PROVIDER):
        raise ConnectError(f"Iceberg table {name}: its property {LOCATION_PROVIDER} names a Python class, which a "
                           f"worker does not import from a table's properties")
    places = [table.metadata_location, table.metadata.location] + [
        table.metadata.properties[k] for k in ("write.data.path", "write.metadata.path", "write.object-storage.path")
        if table.metadata.properties.get(k)]
    for place in places:
        try:
            io.check(place)
        except PermissionError as e:
            raise ConnectError(f"Iceberg table {name}: {e}") from None


def _sink_checks(cfg: Any) -> list[ConfigProblem]:
    out: list[ConfigProblem] = []
    tables = list(cfg.iceberg_tables or ())
    dynamic = cfg.iceberg_tables_dynamic_enabled
    if dynamic and not cfg.iceberg_tables_route_field:
        out.append(ConfigProblem("iceberg.tables.route-field", "Missing configuration iceberg.tables.route-field: "
                                                               "iceberg.tables.dynamic-enabled=true names each "
                                                               "record's table by that field"))
    if not dynamic and not tables:
        out.append(ConfigProblem("iceberg.tables", "Missing configuration iceberg.tables (the destination tables, "
                                                   "namespace.table, comma-separated), or set "
                                                   "iceberg.tables.dynamic-enabled with iceberg.tables.route-field"))
    if dynamic and tables:
        out.append(ConfigProblem("iceberg.tables", "iceberg.tables and iceberg.tables.dynamic-enabled=true are "
                                                   "mutually exclusive"))
    for key in cfg.originals:
        m = _TABLE_KEY.match(key.lower()) if key.lower().startswith("iceberg.table.") else None
        if key.lower().startswith("iceberg.table.") and (m is None or m["key"] not in _TABLE_KEYS):
            out.append(ConfigProblem(key, f"Unknown configuration {key}: per-table keys are iceberg.table.<table>."
                                          f"{{{','.join(_TABLE_KEYS)}}}"))
    for key in ["iceberg.tables.default-partition-by"] + [k for k in cfg.originals
                                                          if k.lower().endswith(".partition-by")
                                                          and k.lower().startswith("iceberg.table.")]:
        text = cfg.originals.get(key) if key in cfg.originals else cfg.iceberg_tables_default_partition_by
        try:
            partition_fields(_split_partition(text))
        except ValueError as e:
            out.append(ConfigProblem(key, f"Invalid value {text} for configuration {key}: {e}"))
        except ImportError:
            break  # reported where the table is written (require_pyiceberg)
    return out + catalog_problems(cfg)


def catalog_problems(cfg: Any) -> list[ConfigProblem]:
    """What is wrong with the ``iceberg.catalog.*`` keys (the sink's and the source's), by key."""
    catalog = dict(cfg.with_prefix("iceberg.catalog."))
    try:
        catalog_properties(catalog)
    except ValueError as e:
        key = "iceberg.catalog." + next((k for k in ("catalog-impl", "type", "uri") if k in catalog), "type")
        return [ConfigProblem(key, f"Invalid value {catalog.get(key.rsplit('.', 1)[-1], '')} for configuration "
                                   f"{key}: {e}")]
    # pyiceberg imports the classes these name (py-io-impl, py-catalog-impl, s3.retry-strategy-impl...): only
    # from the modules a worker allows (plugin.allowed.modules); catalog-impl and io-impl are Java's, mapped above
    return [ConfigProblem(f"iceberg.catalog.{k}", f"Invalid value {v} for configuration iceberg.catalog.{k}: "
                                                   f"module {str(v).rsplit('.', 1)[0]} is not allowed here (worker "
                                                   f"config plugin.allowed.modules)")
            for k, v in catalog.items() if k.lower().endswith(_CODE_KEY_ENDINGS)
            and k.lower() not in ("catalog-impl", "io-impl") and not plugins.dotted_path_allowed(str(v))]


def require_pyiceberg() -> None:
    """Raise a ConfigError naming the extra to install when pyiceberg is missing."""
    try:
        import pyiceberg  # noqa: F401
    except ImportError as e:
        raise ConfigError([ConfigProblem("connector.class", "The Iceberg sink needs pyiceberg: pip install "
                                                            "'spark_connect_bridge[iceberg]'")]) from e


class IcebergSinkConnector(SinkConnector):
    """Appends, upserts or applies changes to Iceberg tables, exactly once per micro-batch (pyiceberg)."""

    delivery = "exactly-once"
    holds_task = True  # write() sends the task's rows whole to the driver, which writes and commits them
    kafka_class = ORIGINAL
    path_policy_at_run_time = True  # the catalog names the files
    #: keys read by prefix, as the original reads them: catalog properties, per-table keys, Hadoop and Kafka
    #: client settings (the last two have no effect here)
    key_prefixes = ("iceberg.catalog.", "iceberg.table.", "iceberg.hadoop.", "iceberg.kafka.")
    config_def = (
        ConfigDef()
        .define("iceberg.tables", Type.LIST, None, importance=Importance.HIGH, group="Iceberg",
                doc="Comma-delimited list of destination tables (namespace.table). Each record goes to every "
                    "table, or with iceberg.tables.route-field to those whose iceberg.table.<t>.route-regex "
                    "matches.")
        .define("iceberg.tables.dynamic-enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM, group="Iceberg",
                doc="Route each record to the table named by its iceberg.tables.route-field value (lower-cased).")
        .define("iceberg.tables.route-field", Type.STRING, None, importance=Importance.MEDIUM, group="Iceberg",
                doc="Value field (dotted path) whose value routes the record to tables.")
        .define("iceberg.tables.default-commit-branch", Type.STRING, None, importance=Importance.MEDIUM,
                group="Iceberg", doc="Branch the commits go to (default: main); iceberg.table.<t>.commit-branch "
                                     "per table.")
        .define("iceberg.tables.default-id-columns", Type.STRING, None, importance=Importance.MEDIUM,
                group="Iceberg", doc="Default ID columns for tables, comma-separated (upsert and CDC mode; "
                                     "default: the record key struct's fields); iceberg.table.<t>.id-columns per "
                                     "table.")
        .define("iceberg.tables.default-partition-by", Type.STRING, None, importance=Importance.MEDIUM,
                group="Iceberg", doc="Partition spec of a table the sink creates, comma-separated: col, "
                                     "year/month/day/hour(col), bucket(col, n), truncate(col, n); "
                                     "iceberg.table.<t>.partition-by per table.")
        .define("iceberg.tables.auto-create-enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                group="Iceberg", doc="Create a missing table (and namespace) from the first batch's columns.")
        .define("iceberg.tables.schema-force-optional", Type.BOOLEAN, False, importance=Importance.LOW,
                group="Iceberg", doc="Create tables and add columns as optional (nullable) whatever the record "
                                     "schema says.")
        .define("iceberg.tables.evolve-schema-enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                group="Iceberg", doc="Add record fields the table lacks and widen column types as Iceberg allows "
                                     "(int to long, float to double). Without it, fields the table lacks are "
                                     "not written, as the original does.")
        .define("iceberg.catalog", Type.STRING, "iceberg", importance=Importance.MEDIUM, group="Iceberg",
                doc="Iceberg catalog name; its properties are the iceberg.catalog.* keys (type or catalog-impl, "
                    "uri, warehouse, jdbc.user, jdbc.password, S3 settings).")
        # Keys of the Tabular connector (io.tabular.iceberg.connect) that Apache's sink dropped: upsert and CDC.
        .define("iceberg.tables.upsert-mode-enabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                group="Iceberg", doc="Replace the rows of the records' id columns (delete then append, in one "
                                     "transaction; the last record of a key in a batch wins). A key of the "
                                     "Tabular connector.")
        .define("iceberg.tables.cdc-field", Type.STRING, None, importance=Importance.MEDIUM, group="Iceberg",
                doc="Value field holding the operation: a value starting with D deletes the key, others upsert "
                    "it (Debezium op codes after ExtractNewRecordState add.fields=op, or I/U/D). A key of the "
                    "Tabular connector.")
        .accept(ORIGINAL, group="Iceberg", no_effect={
            "iceberg.control.topic": _CONTROL_NOTE,
            "iceberg.control.group-id-prefix": _CONTROL_NOTE,
            "iceberg.connect.group-id": _CONTROL_NOTE,
            "iceberg.control.commit.interval-ms": "a commit follows each micro-batch: the streaming trigger's "
                                                  "interval (trigger(processingTime=...)) plays this part",
            "iceberg.control.commit.timeout-ms": _CONTROL_NOTE,
            "iceberg.control.commit.threads": "tables of a batch are committed one after the other by the driver",
            "iceberg.coordinator.transactional.prefix": _CONTROL_NOTE + "; no Kafka transactions are needed",
            "iceberg.coordinator-executor-keep-alive-timeout-ms": _CONTROL_NOTE,
            "iceberg.control.commit.max-consecutive-failures": "a failed commit fails the micro-batch, which "
                                                               "Spark retries from the checkpoint",
        }, not_supported={
            "iceberg.tables.schema-case-insensitive": "columns are matched by their exact names",
            "iceberg.hadoop-conf-dir": "the pyiceberg engine reads no Hadoop configuration; give S3 settings as "
                                       "iceberg.catalog.s3.* keys",
        })
        .check(_sink_checks)
    )

    # -- settings -----------------------------------------------------------------------------------
    def _table_key(self, table: str, key: str) -> str | None:
        want = f"iceberg.table.{table}.{key}".lower()
        return next((str(v) for k, v in self.config.originals.items() if k.lower() == want), None)

    def id_columns(self, table: str) -> list[str]:
        return _split(self._table_key(table, "id-columns") or self.config.iceberg_tables_default_id_columns)

    def partition_by(self, table: str) -> list[str]:
        return _split_partition(self._table_key(table, "partition-by")
                                or self.config.iceberg_tables_default_partition_by)

    def branch(self, table: str) -> str:
        return self._table_key(table, "commit-branch") or self.config.iceberg_tables_default_commit_branch or "main"

    @property
    def changes_mode(self) -> bool:
        """True when records change rows by key (upsert mode, or a cdc-field)."""
        return bool(self.config.iceberg_tables_upsert_mode_enabled or self.config.iceberg_tables_cdc_field)

    def _rows_config(self, table: str) -> Any:
        # The record -> row conversion is the Delta sink's (Arrow compute only), in its append or merge mode.
        return SimpleNamespace(delta_write_mode="merge" if self.changes_mode else "append",
                               delta_table_columns="value", delta_cdc_format="auto",
                               delta_merge_keys=self.id_columns(table), delta_merge_order_by="")

    def catalog(self) -> Any:
        """The pyiceberg catalog of ``iceberg.catalog.*`` (one per connector object)."""
        cached = getattr(self, "_catalog", None)
        if cached is None:
            cached = self._catalog = load_iceberg_catalog(self.config.iceberg_catalog,
                                                          self.config.with_prefix("iceberg.catalog."),
                                                          **worker_paths(self.config))
        return cached

    def validate_input(self, schema: Any) -> None:
        require_pyiceberg()
        if "value" not in schema.names:
            raise ConfigError([ConfigProblem("connector.class", f"The Iceberg sink writes records (a 'value' "
                                                                f"column); the input has {schema.names}")])

    # -- executor: records -> rows per table --------------------------------------------------------
    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Any:
        import pyarrow as pa

        nonempty = [b for b in batches if b.num_rows]
        if not nonempty:
            return None
        data = pa.Table.from_batches(nonempty)
        out: dict[str, Any] = {}
        for table, part in self._routes(data).items():
            rows, keys = rows_arrow(part, self._rows_config(table))
            if rows.num_rows == 0:
                continue
            if self.changes_mode:
                rows = self._apply_cdc_field(rows)
                rows = rows.append_column("_kc_task", pa.array([ctx.partition_id] * rows.num_rows, pa.int64()))
                rows = last_per_key(rows, keys)
            out[table] = (rows, tuple(keys))
        return _Message(out) if out else None

    def _routes(self, data: Any) -> dict[str, Any]:
        """The records of each destination table."""
        import pyarrow.compute as pc

        field = self.config.iceberg_tables_route_field
        tables = list(self.config.iceberg_tables or ())
        if not field:
            return {t: data for t in tables}
        route = _value_path(data, field)
        if route is None:
            raise DataError(f"Iceberg sink: the records have no field {field} (iceberg.tables.route-field)")
        route = pc.cast(route, "string")
        out = {}
        if self.config.iceberg_tables_dynamic_enabled:
            names = pc.utf8_lower(route)
            missing = pc.sum(pc.is_null(names)).as_py() or 0
            if missing:
                log.warning("Iceberg sink: %d records have no %s value (iceberg.tables.route-field) and were not "
                            "written", missing, field)
            for name in pc.unique(names.drop_null()).to_pylist():
                out[name] = data.filter(pc.fill_null(pc.equal(names, name), False))
            return out
        for t in tables:
            regex = self._table_key(t, "route-regex")
            if not regex:
                continue
            hit = pc.fill_null(pc.match_substring_regex(route, f"^(?:{regex})$"), False)
            if pc.any(hit).as_py():
                out[t] = data.filter(hit)
        return out

    def _apply_cdc_field(self, rows: Any) -> Any:
        import pyarrow.compute as pc

        field = self.config.iceberg_tables_cdc_field
        if not field:
            return rows
        op = _row_path(rows, field)
        if op is None:
            return rows  # a Debezium envelope: its op already decided
        deleted = pc.fill_null(pc.starts_with(pc.utf8_lower(pc.cast(op, "string")), "d"), False)
        current = rows.column(OP_COLUMN)
        return rows.set_column(rows.column_names.index(OP_COLUMN), OP_COLUMN,
                               pc.if_else(deleted, "d", current))

    # -- driver: one transaction per table ----------------------------------------------------------
    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        import pyarrow as pa

        tables: dict[str, list] = {}
        for m in messages:
            if m is None:
                continue
            for name, item in m.tables.items():
                tables.setdefault(name, []).append(item)
        for name in sorted(tables):
            items = tables[name]
            rows = pa.concat_tables([r for r, _ in items], promote_options="permissive")
            keys = list(items[0][1])
            if self.changes_mode:
                rows = last_per_key(rows, keys)
            self._commit_table(name, rows, keys, ctx)

    def _commit_table(self, name: str, rows: Any, keys: list[str], ctx: CommitContext) -> None:
        from pyiceberg.exceptions import CommitFailedException

        properties = {APP_ID_PROPERTY: ctx.app_id, "kconnect.connector": self.name}
        if ctx.batch_id is not None:
            properties[BATCH_ID_PROPERTY] = str(ctx.batch_id)
        rows = rows.drop_columns([c for c in _ORDER_COLUMNS if c in rows.column_names])
        for attempt in range(_COMMIT_RETRIES):
            table = self._load_or_create(name, rows)
            if committed_batch(table, ctx.app_id) is not None and ctx.batch_id is not None and \
                    committed_batch(table, ctx.app_id) >= ctx.batch_id:  # type: ignore[operator]
                log.info("Iceberg table %s already holds batch %s of %s: skipped", name, ctx.batch_id, ctx.app_id)
                return
            try:
                self._apply(table, name, rows, keys, properties)
                return
            except CommitFailedException as e:
                if attempt == _COMMIT_RETRIES - 1:
                    raise ConnectError(f"Iceberg table {name}: commit failed {_COMMIT_RETRIES} times on "
                                       f"concurrent changes: {e}") from e
                log.info("Iceberg table %s: concurrent commit, retrying (%s)", name, e)
                time.sleep(0.05 * (attempt + 1))

    def _apply(self, table: Any, name: str, rows: Any, keys: list[str], properties: dict[str, str]) -> None:
        import pyarrow.compute as pc

        branch = self.branch(name)
        with _transaction_class()(table) as tx:
            rows = self._fit_schema(tx, table, name, rows)
            if self.changes_mode:
                ops = rows.column(OP_COLUMN)
                rows = rows.drop_columns([OP_COLUMN])
                if rows.num_rows:
                    with warnings.catch_warnings():  # a batch of new keys deletes nothing: not worth a warning
                        warnings.filterwarnings("ignore", "Delete operation did not match any records")
                        tx.delete(_keys_filter(rows, keys), snapshot_properties=properties, branch=branch)
                upserts = rows.filter(pc.equal(ops, "u"))
                if upserts.num_rows:
                    tx.append(upserts, snapshot_properties=properties, branch=branch)
            else:
                tx.append(rows, snapshot_properties=properties, branch=branch)

    def _fit_schema(self, tx: Any, table: Any, name: str, rows: Any) -> Any:
        """The rows as the table takes them: new columns added (evolve-schema) or left out, types widened."""
        import pyarrow as pa
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        schema = table.schema()
        current = schema.as_arrow()
        row_fields = [f for f in rows.schema if f.name != OP_COLUMN]
        extra = [f.name for f in row_fields if f.name not in current.names]
        if self.config.iceberg_tables_evolve_schema_enabled:
            wanted = pa.schema([f.with_nullable(True) for f in row_fields])
            with tx.update_schema() as update:
                update.union_by_name(wanted)
            if extra:
                log.info("Iceberg table %s: adding columns %s", name, extra)
            # the schema with those changes: each tx.table_metadata deep-copies the table's metadata, every
            # snapshot of its history included (~0.05 ms of CPU a snapshot), so only where the schema may change
            schema = tx.table_metadata.schema()
        elif extra:
            log.debug("Iceberg table %s has no columns %s (iceberg.tables.evolve-schema-enabled=false): not "
                      "written", name, extra)
            rows = rows.drop_columns(extra)
        # The table's own types and nullability (Spark hands every column over as nullable): missing columns null
        target = schema_to_pyarrow(schema, include_field_ids=False)
        columns = []
        for f in target:
            if f.name in rows.column_names:
                columns.append(rows.column(f.name).cast(f.type))
            elif not f.nullable:
                raise DataError(f"Iceberg table {name}: the records have no value for its required column {f.name}")
            else:
                columns.append(pa.nulls(rows.num_rows, f.type))
        out = pa.Table.from_arrays(columns, schema=target)
        if OP_COLUMN in rows.column_names:
            out = out.append_column(OP_COLUMN, rows.column(OP_COLUMN))
        return out

    def _load_or_create(self, name: str, rows: Any) -> Any:
        import pyarrow as pa
        from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

        catalog = self.catalog()
        try:
            return load_checked_table(catalog, name)
        except NoSuchTableError:
            if not self.config.iceberg_tables_auto_create_enabled:
                raise ConnectError(f"Iceberg table {name} does not exist; create it or set "
                                   f"iceberg.tables.auto-create-enabled=true") from None
        fields = [f for f in rows.schema if f.name != OP_COLUMN]
        keys = set(self.id_columns(name))
        if self.config.iceberg_tables_schema_force_optional:
            fields = [f.with_nullable(True) for f in fields]
        else:  # Iceberg requires identifier columns; the rest keep what the records say
            fields = [f.with_nullable(f.nullable and f.name not in keys) for f in fields]
        schema = pa.schema(fields)
        if "." in name:
            catalog.create_namespace_if_not_exists(name.rsplit(".", 1)[0])
        try:
            tx = catalog.create_table_transaction(name, schema=schema)
            spec = partition_fields(self.partition_by(name))
            if spec:
                with tx.update_spec() as update:
                    for column, transform, field_name in spec:
                        update.add_field(column, transform, field_name)
            tx.commit_transaction()
            log.info("Iceberg table %s created (partitioned by %s)", name, self.partition_by(name) or "nothing")
        except TableAlreadyExistsError:
            pass  # another writer created it meanwhile
        return load_checked_table(catalog, name)


def committed_batch(table: Any, app_id: str) -> int | None:
    """The last batch id ``app_id`` committed to ``table`` (its snapshots' summaries), or None."""
    last = None
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        if summary is None or summary.get(APP_ID_PROPERTY) != app_id:
            continue
        batch = summary.get(BATCH_ID_PROPERTY)
        if batch is not None and (last is None or int(batch) > last):
            last = int(batch)
    return last


def _keys_filter(rows: Any, keys: Sequence[str]) -> Any:
    """An Iceberg row filter matching the key values of ``rows``."""
    from pyiceberg import expressions

    # pyiceberg's expression classes are pydantic models whose generated signatures mypy misreads
    ex: Any = expressions
    if len(keys) == 1:
        from pyiceberg.expressions.literals import literal

        # the literals made once here: In (its __new__ and its __init__) would make each value's literal twice,
        # which for a batch of 100,000 keys cost 0.4 s of the commit's CPU
        values = [literal(v) for v in rows.column(keys[0]).to_pylist() if v is not None]
        if not values:
            return ex.IsNull(keys[0])
        return _keys_in()(keys[0], values) if len(values) > 1 else ex.EqualTo(keys[0], values[0])
    terms = []
    for row in {tuple(r[k] for k in keys) for r in rows.select(list(keys)).to_pylist()}:
        parts = [ex.EqualTo(k, v) if v is not None else ex.IsNull(k) for k, v in zip(keys, row, strict=True)]
        term = parts[0]
        for p in parts[1:]:
            term = ex.And(term, p)
        terms.append(term)
    expr = terms[0]
    for t in terms[1:]:
        expr = ex.Or(expr, t)
    return expr


@functools.cache
def _transaction_class() -> Any:
    """pyiceberg's ``Transaction`` whose ``table_metadata`` (the table's metadata with the transaction's updates so
    far) is made once per state of the transaction. pyiceberg's makes it again at every read, a deep copy of the
    whole metadata, every snapshot of the history included, and one append reads it about 18 times: a commit's CPU
    grew with the table's snapshots, one more per micro-batch (24 ms at 10 snapshots, 187 at 200, 472 at 400,
    bench/runs/2026-11-29-iceberg-commit/). The metadata pyiceberg hands out is a frozen model nobody changes in
    place; what the catalog commits is still made from the transaction's updates and requirements."""
    from pyiceberg.table import Transaction

    class MetadataOnceTransaction(Transaction):
        _view: tuple = ()

        @property
        def table_metadata(self) -> Any:
            view = self._view
            # _updates is a new tuple after every change, and the table's metadata a new object after a commit
            if view and view[0] is self._table.metadata and view[1] is self._updates:
                return view[2]
            metadata = super().table_metadata
            self._view = (self._table.metadata, self._updates, metadata)
            return metadata

    return MetadataOnceTransaction


@functools.cache
def _keys_in() -> Any:
    """pyiceberg's ``In`` whose ``bind`` converts its literals to the column's type with the conversion resolved once
    per literal class. pyiceberg's own bind calls each literal's ``to`` (a ``singledispatchmethod``, which builds a
    bound method and dispatches on every call) and binds the filter several times per delete (the delete, its
    inclusive and strict metrics evaluators): for 100,000 keys that was 60% of an upsert commit's CPU (py-spy)."""
    from pyiceberg.expressions import In

    class KeysIn(In):
        def bind(self, schema: Any, case_sensitive: bool = True) -> Any:
            bound_term = self.term.bind(schema, case_sensitive)
            field_type = bound_term.ref().field.field_type
            converters: dict[type, Any] = {}

            def converter(cls: type) -> Any:
                method = next(k.__dict__["to"] for k in cls.__mro__ if "to" in k.__dict__)
                return method.dispatcher.dispatch(type(field_type))

            literals = {(converters.get(type(lit)) or converters.setdefault(type(lit), converter(type(lit))))(
                lit, field_type) for lit in self.literals}
            as_bound: Any = self.as_bound  # pydantic's generated signatures, which mypy misreads
            return as_bound(bound_term, literals)

    return KeysIn


def _value_path(data: Any, dotted: str) -> Any | None:
    """The column of ``dotted`` inside the record value struct."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cur = data.column("value")
    cur = cur.combine_chunks() if isinstance(cur, pa.ChunkedArray) else cur
    for part in dotted.split("."):
        if not pa.types.is_struct(cur.type) or cur.type.get_field_index(part) < 0:
            return None
        cur = pc.struct_field(cur, [cur.type.get_field_index(part)])
    return cur


def _row_path(rows: Any, dotted: str) -> Any | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    head, *rest = dotted.split(".")
    if head not in rows.column_names:
        return None
    cur = rows.column(head).combine_chunks()
    for part in rest:
        if not pa.types.is_struct(cur.type) or cur.type.get_field_index(part) < 0:
            return None
        cur = pc.struct_field(cur, [cur.type.get_field_index(part)])
    return cur


@dataclass
class _Message:
    tables: dict  # table name -> (rows as a pa.Table, id columns)
