"""Datagen: mock records from quickstart schemas, like Confluent's kafka-connect-datagen.

The schema comes, in datagen's precedence, from ``quickstart`` (case-insensitive; every quickstart of datagen),
``schema.string`` or ``schema.filename`` (a path, else a shipped quickstart file of that name): an Avro schema with
``arg.properties``, compiled by :mod:`.datagen_schema` into vectorised generators. ``orders``, ``users`` and
``pageviews`` keep the hand-written generators below. Records of a schema-driven source carry the time they are made
(as Kafka's producer stamps datagen's records), and a null key unless ``schema.keyfield`` (or the quickstart's
default key field) names one.

Each of ``tasks.max`` tasks is one source partition ``{"task.id": i}`` with position
``{"current.iteration": n}`` (records emitted so far). Record ``n`` of task ``i`` is a pure function of
``(random.seed, i, n)`` (counter-based hashing, vectorised with numpy), so a replayed micro-batch yields the
same records, and generation needs no per-record Python.

Quickstarts (value struct; key = ``schema.keyfield``, default as Confluent's):

* ``orders``: ordertime, orderid, itemid, orderunits, address{city, state, zipcode}; key ``orderid``
* ``users``: registertime, userid, regionid, gender; key ``userid``
* ``pageviews``: viewtime, userid, pageid; key ``viewtime``

Rate: ``max.interval`` (ms) is Confluent's maximum pause between records of one task; here a task emits
records at a steady ``1000 / max.interval`` per second (0 = as fast as Spark reads). ``iterations`` records per
task, or unlimited when < 1.

>>> spark.read.format("kconnect").options(**{"connector.class": "DatagenConnector", "kafka.topic": "orders",
...     "quickstart": "orders", "iterations": "1000", "max.interval": "0"}).load().count()  # doctest: +SKIP
1000
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from ..config import ConfigDef, Importance, Lambda, NonEmptyString, Range, Type
from ..core.records import no_headers, record_schema
from ..errors import ConfigProblem
from .base import ReadRange, SourceConnector
from .datagen_schema import QUICKSTART_FILES, CompiledSchema, SchemaError, compile_schema, load_schema_file
from .offsets import Offsets, partition_key

__all__ = ["DatagenConnector", "QUICKSTARTS"]

_EPOCH_MS = 1487715775521  # Confluent's quickstarts start here
_BATCH = 65536
_UNBOUNDED_BATCH = 1_000_000  # per task, when nothing else bounds a micro-batch


def _mix(x: Any) -> Any:
    """splitmix64 finaliser over a numpy uint64 array (wrapping arithmetic)."""
    import numpy as np

    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Gen:
    """Deterministic random columns for one task and a range of iterations."""

    def __init__(self, seed: int, task: int, idx: Any):
        import numpy as np

        self.np, self.idx = np, idx
        with np.errstate(over="ignore"):  # wrapping uint64 arithmetic is the point
            seeds = np.array([seed & 0xFFFFFFFFFFFFFFFF, task], dtype=np.uint64)
            self.base = (_mix(seeds[:1] * np.uint64(0x9E3779B97F4A7C15))
                         + seeds[1:] * np.uint64(0xD1B54A32D192ED03))[0]

    def ints(self, field: int, lo: int, hi: int) -> Any:
        np = self.np
        with np.errstate(over="ignore"):
            r = _mix(self.idx.astype(np.uint64) * np.uint64(0xA24BAED4963EE407) + self.base
                     + np.uint64(field) * np.uint64(0x9FB21C651E98DF25))
        return (lo + (r % np.uint64(hi - lo + 1)).astype(np.int64))

    def labels(self, field: int, prefix: str, lo: int, hi: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        nums = pa.array(self.ints(field, lo, hi)).cast(pa.string())
        return pc.binary_join_element_wise(prefix, nums, "")

    def choice(self, field: int, options: list[str]) -> Any:
        import pyarrow as pa

        return pa.array(options).take(pa.array(self.ints(field, 0, len(options) - 1)))

    def child(self, idx: Any) -> _Gen:
        """The same streams over other indices (the elements of arrays and maps)."""
        g = object.__new__(_Gen)
        g.np, g.idx, g.base = self.np, idx, self.base
        return g


def _orders(g: _Gen, task: int, tasks: int) -> tuple[dict[str, Any], Any]:
    import pyarrow as pa

    np = g.np
    ordertime = _EPOCH_MS + g.idx * 1000 + g.ints(1, 0, 999)
    address = pa.StructArray.from_arrays(
        [g.labels(2, "City_", 1, 99), g.labels(3, "State_", 1, 99), pa.array(g.ints(4, 10000, 99999))],
        names=["city", "state", "zipcode"])
    cols = {"ordertime": pa.array(ordertime), "orderid": pa.array((g.idx * tasks + task).astype(np.int32)),
            "itemid": g.labels(5, "Item_", 1, 999),
            "orderunits": pa.array(g.ints(6, 1, 10000) / 1000.0), "address": address}
    return cols, ordertime


def _users(g: _Gen, task: int, tasks: int) -> tuple[dict[str, Any], Any]:
    import pyarrow as pa

    registertime = g.ints(1, 1487715775521, 1519273364600)
    cols = {"registertime": pa.array(registertime), "userid": g.labels(2, "User_", 1, 9),
            "regionid": g.labels(3, "Region_", 1, 9), "gender": g.choice(4, ["MALE", "FEMALE", "OTHER"])}
    return cols, registertime


def _pageviews(g: _Gen, task: int, tasks: int) -> tuple[dict[str, Any], Any]:
    import pyarrow as pa

    viewtime = 1 + (g.idx * tasks + task) * 10
    cols = {"viewtime": pa.array(viewtime), "userid": g.labels(1, "User_", 1, 9),
            "pageid": g.labels(2, "Page_", 1, 99)}
    return cols, _EPOCH_MS + viewtime


def _struct(*fields: tuple[str, Any]) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, t) for n, t in fields])


def _orders_type() -> Any:
    from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

    address = _struct(("city", StringType()), ("state", StringType()), ("zipcode", LongType()))
    return _struct(("ordertime", LongType()), ("orderid", IntegerType()), ("itemid", StringType()),
                   ("orderunits", DoubleType()), ("address", address))


def _users_type() -> Any:
    from pyspark.sql.types import LongType, StringType

    return _struct(("registertime", LongType()), ("userid", StringType()), ("regionid", StringType()),
                   ("gender", StringType()))


def _pageviews_type() -> Any:
    from pyspark.sql.types import LongType, StringType

    return _struct(("viewtime", LongType()), ("userid", StringType()), ("pageid", StringType()))


# name -> (value type, default key field, generator)
QUICKSTARTS: dict[str, tuple[Callable[[], Any], str, Callable[..., Any]]] = {
    "orders": (_orders_type, "orderid", _orders),
    "users": (_users_type, "userid", _users),
    "pageviews": (_pageviews_type, "viewtime", _pageviews),
}


def _quickstart_valid(v: str) -> str | None:
    if v and v.lower() not in QUICKSTART_FILES:
        return f"quickstart must be one out of {','.join(QUICKSTART_FILES)}"
    return None


def _schema_valid(key: str) -> Lambda:
    def check(v: str) -> str | None:
        if not v:
            return None
        try:
            text = load_schema_file(v) if key == "schema.filename" else v
            compile_schema(text, key)
        except SchemaError as e:
            return f"Unable to use the provided schema: {e}"
        return None
    return Lambda(check, "an Avro schema with arg.properties")


def resolve_schema(cfg: Any) -> tuple[str | CompiledSchema, str]:
    """The schema to generate (a built-in generator's name, or a compiled schema) and its default key field,
    in datagen's precedence: quickstart, schema.string, schema.filename."""
    if cfg.quickstart:
        name = cfg.quickstart.lower()
        file, keyfield = QUICKSTART_FILES[name]
        if name in QUICKSTARTS:
            return name, keyfield
        return compile_schema(load_schema_file(file), f"quickstart {name}"), keyfield
    if cfg.schema_string:
        return compile_schema(cfg.schema_string, "schema.string"), ""
    return compile_schema(load_schema_file(cfg.schema_filename), "schema.filename"), ""


def _value_type(source: str | CompiledSchema) -> Any:
    return QUICKSTARTS[source][0]() if isinstance(source, str) else source.spark_type


def _one_schema(cfg: Any) -> list[ConfigProblem]:
    if not (cfg.quickstart or cfg.schema_string or cfg.schema_filename):
        return [ConfigProblem("quickstart", "Missing configuration quickstart: set one of quickstart, schema.string "
                                            "or schema.filename")]
    try:
        source, _ = resolve_schema(cfg)
    except SchemaError as e:
        key = "quickstart" if cfg.quickstart else "schema.string" if cfg.schema_string else "schema.filename"
        if key == "quickstart":  # the other keys' own validators report theirs
            return [ConfigProblem(key, f"Unable to use quickstart {cfg.quickstart}: {e}")]
        return []
    keyfield = cfg.schema_keyfield
    if keyfield:
        fields = set(_value_type(source).fieldNames())
        if keyfield not in fields:
            return [ConfigProblem("schema.keyfield", f"Invalid value {keyfield} for configuration schema.keyfield: "
                                                     f"the schema has fields {', '.join(sorted(fields))}")]
    return []


class DatagenConnector(SourceConnector):
    """Generates mock records (``io.confluent.kafka.connect.datagen.DatagenConnector``)."""

    kafka_class = "io.confluent.kafka.connect.datagen.DatagenConnector"
    partition_fields: ClassVar[dict[str, type] | None] = {"task.id": int}
    offset_fields: ClassVar[dict[str, type] | None] = {"current.iteration": int}
    config_def = (
        ConfigDef()
        .define("kafka.topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="The topic to write to.")
        .define("quickstart", Type.STRING, "", Lambda(_quickstart_valid, ", ".join(QUICKSTART_FILES)),
                Importance.HIGH, "The name of the quickstart schema to generate (case-insensitive).")
        .define("schema.keyfield", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The value field used as the record key (default: the quickstart's).")
        .define("schema.string", Type.STRING, "", _schema_valid("schema.string"), Importance.LOW,
                "An Avro record schema with arg.properties to generate from (when quickstart is empty).")
        .define("schema.filename", Type.STRING, "", _schema_valid("schema.filename"), Importance.LOW,
                "A file holding the Avro schema (a shipped quickstart file name when the path does not exist).")
        .define("max.interval", Type.LONG, 500, Range.at_least(0), Importance.MEDIUM,
                "Milliseconds between records of one task (steady rate 1000/max.interval per second); "
                "0 generates as fast as Spark reads.")
        .define("iterations", Type.LONG, -1, importance=Importance.MEDIUM,
                doc="Records to generate per task; less than 1 means unlimited.")
        .define("random.seed", Type.LONG, 0, importance=Importance.LOW,
                doc="Seed of the generator: the same seed, task and iteration give the same record.")
        .check(_one_schema)
    )

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._origin: tuple[float, dict[str, int]] | None = None  # rate clock (driver only)
        self._resolved: tuple[str | CompiledSchema, str] | None = None

    @property
    def _tasks(self) -> int:
        return self.config.tasks_max

    def _keys(self) -> list[str]:
        return [partition_key({"task.id": i}) for i in range(self._tasks)]

    def _source(self) -> tuple[str | CompiledSchema, str]:
        if self._resolved is None:
            self._resolved = resolve_schema(self.config)
        return self._resolved

    def _keyfield(self) -> str:
        return self.config.schema_keyfield or self._source()[1]

    def schema(self) -> Any:
        from pyspark.sql.types import StringType

        value = _value_type(self._source()[0])
        keyfield = self._keyfield()
        key = next(f.dataType for f in value.fields if f.name == keyfield) if keyfield else StringType()
        return record_schema(key, value)

    def initial_offsets(self) -> Offsets:
        return {k: {"current.iteration": 0} for k in self._keys()}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        iterations = self.config.iterations
        cap = iterations if iterations > 0 else math.inf
        rate = 1000.0 / self.config.max_interval if self.config.max_interval > 0 else None
        per_task = math.ceil(max_records / self._tasks) if max_records else None
        now = time.monotonic()
        cur = {k: int((start.get(k) or {"current.iteration": 0})["current.iteration"]) for k in self._keys()}
        if rate is not None and (self._origin is None or any(cur[k] < self._origin[1].get(k, 0) for k in cur)):
            self._origin = (now, dict(cur))
        out = {}
        for k in self._keys():
            target = cap
            if rate is not None and self._origin is not None:
                target = min(target, self._origin[1][k] + math.floor((now - self._origin[0]) * rate))
            if until is not None and k in until:
                target = min(target, int(until[k]["current.iteration"]))
            if per_task is not None:
                target = min(target, cur[k] + per_task)
            if target == math.inf:
                target = cur[k] + _UNBOUNDED_BATCH
            out[k] = {"current.iteration": int(max(cur[k], target))}
        return out

    def lag(self, current: Offsets) -> int | None:
        iterations = self.config.iterations
        if iterations <= 0:
            return None
        return sum(max(0, iterations - int(v["current.iteration"])) for v in current.values())

    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        task = int(rng.partition["task.id"])
        lo = int(rng.start["current.iteration"]) if rng.start else 0
        hi = int(rng.end["current.iteration"])
        source = self._source()[0]
        keyfield, topic = self._keyfield(), self.config.kafka_topic
        for a in range(lo, hi, _BATCH):
            idx = np.arange(a, min(hi, a + _BATCH), dtype=np.int64)
            n = len(idx)
            g = _Gen(self.config.random_seed, task, idx)
            if isinstance(source, str):
                cols, ts_ms = QUICKSTARTS[source][2](g, task, self._tasks)
                value = pa.StructArray.from_arrays(list(cols.values()), names=list(cols))
            else:  # the record's time: when it is made, as Kafka's producer stamps datagen's records
                value = source.gen(g)
                cols = {value.type.field(i).name: value.field(i) for i in range(value.type.num_fields)}
                ts_ms = np.full(n, int(time.time() * 1000))
            key = cols[keyfield] if keyfield else pa.nulls(n, pa.string())
            yield pa.RecordBatch.from_arrays(
                [key, value, pa.repeat(pa.scalar(topic, pa.string()), n),
                 pa.array(np.full(n, task, dtype=np.int32)), pa.array(idx),
                 pa.array(ts_ms * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                 no_headers(n)],
                names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])
