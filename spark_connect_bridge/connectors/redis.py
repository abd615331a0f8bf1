"""Redis Streams source and Redis sink with the keys of Redis's own Kafka connector (redis-kafka-connect:
``com.redis.kafka.connect.RedisStreamSourceConnector`` and ``RedisSinkConnector``), on redis-py.

**RedisStreamSourceConnector** reads ``redis.stream.name`` by entry id: the offset is the id of the last entry read
(``{"offset": "1700000000000-0"}``, as the original's), each micro-batch is ``XRANGE (start end]``, so a replayed
batch reads the same entries and a restart from the checkpoint resumes exactly (no duplicates, nothing skipped).
Records as the original's: key the entry id, value a struct ``{id, body: map<string,string>, stream}``, topic
``topic`` with ``${stream}`` replaced. A new query starts at ``redis.stream.offset`` (``0-0``: the whole stream;
``$``: new entries only), or where the consumer group ``redis.stream.consumer.group`` stands when it exists; after
each committed batch the group's last-delivered id is moved there (``XGROUP SETID``, when Spark commits or at the
next trigger), so tools that watch the group's lag see the connector's progress.

**RedisSinkConnector** writes each record with ``redis.command``: ``XADD`` (the default: the value's fields as the
entry of the stream ``redis.key``), ``HSET``/``SET`` (key ``redis.key`` + ``redis.separator`` + the record's key; a
tombstone deletes it), ``DEL``, ``LPUSH``/``RPUSH``/``SADD`` (the record's key as a member of ``redis.key``; a
tombstone removes it from a set), ``ZADD`` (member the key, score the value). Commands go in one pipeline per
task, in a MULTI/EXEC transaction with ``redis.multiexec=true``: at least once (XADD appends again when a batch is
retried; the others are idempotent).

>>> spark.readStream.format("kconnect").options(**{"connector.class": "RedisStreamSourceConnector",
...     "redis.uri": "redis://127.0.0.1:6379", "redis.stream.name": "orders"}).load()    # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..config import ConfigDef, Importance, Lambda, NonEmptyString, Password, Range, Type, ValidString
from ..errors import ConfigError, ConfigProblem, ConnectError, DataError, RetriableError
from .base import CommitContext, ReadRange, ReadTask, SinkConnector, SourceConnector, WriteContext
from .offsets import Offsets, partition_key

__all__ = ["RedisStreamSourceConnector", "RedisSinkConnector"]

log = logging.getLogger(__name__)

_SOURCE = "com.redis.kafka.connect.RedisStreamSourceConnector"
_SINK = "com.redis.kafka.connect.RedisSinkConnector"


def _uri_problem(uri: str) -> str | None:
    if uri and urlsplit(uri).scheme not in ("redis", "rediss", "unix"):
        return "a redis://, rediss:// or unix:// URI"
    return None


def _connection_keys() -> ConfigDef:
    return (
        ConfigDef()
        .define("redis.uri", Type.STRING, "", Lambda(_uri_problem, "redis:// or rediss:// URI"), Importance.MEDIUM,
                "URI of the Redis database to connect to, e.g. redis://redis-12000.redis.com:12000 (rediss:// for "
                "TLS); when blank, redis.host and redis.port.")
        .define("redis.host", Type.STRING, "localhost", importance=Importance.HIGH,
                doc="The Redis host to connect to (when redis.uri is blank).")
        .define("redis.port", Type.INT, 6379, Range.between(1, 65535), Importance.HIGH,
                "The Redis port to connect to (when redis.uri is blank).")
        .define("redis.username", Type.STRING, "", importance=Importance.MEDIUM,
                doc="Username to use to connect to Redis")
        .define("redis.password", Type.PASSWORD, "", importance=Importance.MEDIUM,
                doc="Password to use to connect to Redis")
        .define("redis.timeout", Type.LONG, 60, Range.at_least(1), Importance.MEDIUM,
                "Redis command timeout in seconds")
        .define("redis.tls", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Establish a secure TLS connection")
        .define("redis.insecure", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Only false here: the server's certificate is always verified.")
        .define("redis.cacert", Type.STRING, "", importance=Importance.MEDIUM,
                doc="X.509 CA certificate file to verify with (PEM)")
        .define("redis.key.file", Type.STRING, "", importance=Importance.MEDIUM,
                doc="PKCS#8 private key file to authenticate with (PEM format)")
        .define("redis.key.cert", Type.STRING, "", importance=Importance.MEDIUM,
                doc="X.509 certificate chain file to authenticate with (PEM format)")
        .define("redis.key.password", Type.PASSWORD, "", importance=Importance.MEDIUM,
                doc="Password of the private key file. Leave empty if key file is not password-protected")
        .define("redis.cluster", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Only false here: a single Redis server (or a proxy in front of a cluster).")
        .define("redis.pool", Type.INT, 8, Range.at_least(1), Importance.MEDIUM,
                "Max pool connections (each Spark task uses one connection here).")
        .check(_connection_problems)
    )


def _connection_problems(config: Any) -> list[ConfigProblem]:
    problems = []
    if config["redis.cluster"]:
        problems.append(ConfigProblem("redis.cluster", "redis.cluster=true is not supported here: connect to one "
                                                       "server (or a proxy in front of the cluster)"))
    if config["redis.insecure"]:
        problems.append(ConfigProblem("redis.insecure", "redis.insecure=true is refused: the server's certificate "
                                                        "is always verified (redis.cacert names the CA)"))
    return problems


def _secret(value: Any) -> str | None:
    return (value.value() if isinstance(value, Password) else value) or None


def connect(config: Any) -> Any:
    """A redis-py client for the connection keys (``decode_responses`` off: bytes in, bytes out)."""
    try:
        import redis
    except ImportError as e:
        raise ConnectError("The Redis connectors need redis-py: pip install 'spark_connect_bridge[brokers]'") from e

    uri = str(config["redis.uri"] or "")
    secure = bool(config["redis.tls"]) or uri.startswith("rediss://")
    tls = {"ssl_ca_certs": config["redis.cacert"] or None, "ssl_certfile": config["redis.key.cert"] or None,
           "ssl_keyfile": config["redis.key.file"] or None, "ssl_password": _secret(config["redis.key.password"]),
           "ssl_cert_reqs": "required"} if secure else {}
    common: dict[str, Any] = {
        "username": config["redis.username"] or None, "password": _secret(config["redis.password"]),
        "socket_timeout": float(config["redis.timeout"]), "socket_connect_timeout": float(config["redis.timeout"]),
        **tls}
    if uri:
        if secure and uri.startswith("redis://"):
            uri = "rediss://" + uri[len("redis://"):]
        return redis.Redis.from_url(uri, **common)
    return redis.Redis(host=config["redis.host"], port=config["redis.port"], ssl=secure, **common)


def _where(config: Any) -> str:
    uri = config["redis.uri"]
    if uri:
        parts = urlsplit(uri)
        return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}"
    return f"{config['redis.host']}:{config['redis.port']}"


def _failed(config: Any, error: Exception) -> ConnectError:
    import redis

    where = f"Redis at {_where(config)} (redis.uri / redis.host)"
    if isinstance(error, redis.AuthenticationError):
        return ConnectError(f"{where} refused the login (redis.username / redis.password)")
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return RetriableError(f"Cannot reach {where}: {type(error).__name__}")
    return ConnectError(f"{where} answered: {error}")


# -- source ---------------------------------------------------------------------------------------------------------

def _id(text: str | bytes) -> tuple[int, int]:
    value = text.decode() if isinstance(text, bytes) else text
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


def _id_problem(value: str) -> str | None:
    if value == "$":
        return None
    try:
        _id(value)
    except ValueError:
        return "a stream entry id (<milliseconds>-<sequence>, e.g. 0-0) or $"
    return None


@dataclass(frozen=True)
class _EntriesRange(ReadRange):
    """A stream range whose entries the driver has read already (to find the batch's end): ``arrow``, the IPC bytes
    of their record batch. A task of it reads nothing from Redis."""

    arrow: bytes = b""


class RedisStreamSourceConnector(SourceConnector):
    """Reads a Redis stream by entry id (redis-kafka-connect's ``RedisStreamSourceConnector``), replayable."""

    kafka_class = _SOURCE
    partition_fields: ClassVar[dict[str, type] | None] = {"stream": str}
    offset_fields: ClassVar[dict[str, type] | None] = {"offset": str}
    config_def = (
        ConfigDef()
        .define("topic", Type.STRING, "${stream}", importance=Importance.MEDIUM,
                doc="Name of the destination topic, which may contain '${stream}' as a placeholder for the "
                    "originating stream name.")
        .define("redis.stream.name", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="Name of the Redis stream to read from")
        .define("redis.stream.offset", Type.STRING, "0-0", Lambda(_id_problem, "an entry id or $"),
                Importance.MEDIUM, "Stream offset to start reading from (0-0: the whole stream; $: new entries) "
                                   "when neither a checkpoint nor the consumer group has a position.")
        .define("redis.stream.consumer.group", Type.STRING, "kafka-consumer-group", importance=Importance.MEDIUM,
                doc="Stream consumer group: where a new query starts when it exists; moved to each committed "
                    "batch's last entry (XGROUP SETID).")
        .define("batch.size", Type.INT, 500, Range.at_least(1), Importance.LOW,
                "The most entries of one read (XRANGE COUNT; the original's: of one poll). A micro-batch, the "
                "unit Spark commits, holds up to max.records.per.trigger (100,000 when not set): Kafka Connect "
                "commits offsets every offset.flush.interval.ms, not per poll, and a micro-batch costs Spark about "
                "0.2 CPU-s whatever it holds.")
        .merge(_connection_keys())
        .accept(_SOURCE, no_effect={
            "redis.stream.delivery": "entries are read by id and replayed from Spark's checkpoint: a micro-batch "
                                     "is delivered exactly as the sink's guarantee allows, whatever the setting",
            "redis.stream.consumer.name": "entries are read by id (XRANGE), not through a group consumer",
            "redis.stream.block": "each trigger asks for the entries after its start; the trigger interval sets "
                                  "how often"})
    )

    default_max_records_per_trigger = 100_000

    @property
    def _stream(self) -> str:
        return str(self.config["redis.stream.name"])

    @property
    def _key(self) -> str:
        return partition_key({"stream": self._stream})

    def schema(self) -> Any:
        from pyspark.sql.types import MapType, StringType, StructField, StructType

        from ..core.records import record_schema

        value = StructType([StructField("id", StringType()), StructField("body", MapType(StringType(), StringType())),
                            StructField("stream", StringType())])
        return record_schema(StringType(), value)

    def initial_offsets(self) -> Offsets:
        client = connect(self.config)
        try:
            start = self._group_position(client) or self.config["redis.stream.offset"]
            if start == "$":
                info = client.xinfo_stream(self._stream) if client.exists(self._stream) else None
                start = info["last-generated-id"].decode() if info else "0-0"
        except Exception as e:
            raise _failed(self.config, e) from e
        finally:
            client.close()
        return {self._key: {"offset": start}}

    def _group_position(self, client: Any) -> str | None:
        import redis

        try:
            groups = client.xinfo_groups(self._stream)
        except redis.ResponseError:  # no such stream yet
            return None
        for group in groups:
            if group["name"].decode() == self.config["redis.stream.consumer.group"]:
                return str(group["last-delivered-id"].decode())
        return None

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        if start.get(self._key):
            # Spark asks for the next batch only after it committed the one ending at start; it calls commit() only
            # when a next batch has data, so the group is moved here too (as the queue sources acknowledge)
            self._move_group(start)
        current = (start.get(self._key) or self.initial_offsets()[self._key])["offset"]
        client = connect(self.config)
        try:
            if max_records is None or client.xlen(self._stream) <= max_records:
                # No bound (Trigger.AvailableNow's target), or a stream no longer than the bound: the batch ends at
                # the stream's last entry, found without reading the entries themselves (the read task reads them)
                entries = client.xrevrange(self._stream, min=f"({current}", count=1)
            else:
                entries = client.xrange(self._stream, min=f"({current}", count=max_records)
        except Exception as e:
            raise _failed(self.config, e) from e
        finally:
            client.close()
        last = entries[-1][0].decode() if entries else current
        if until is not None and _id(last) > _id(until[self._key]["offset"]):
            last = until[self._key]["offset"]
        if max_records is not None and len(entries) > 1:
            # The XRANGE that found the end read the batch's entries: plan() ships them rather than a task reading
            # them again (kept on the driver only, for the batch (current, last]).
            bound = _id(last)
            self.__dict__["_read_ahead"] = (current, last, [e for e in entries if _id(e[0].decode()) <= bound])
        return {self._key: {"offset": last}}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_read_ahead", None)  # the driver's entries travel inside the read task, as Arrow
        return state

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        ahead = self.__dict__.pop("_read_ahead", None)
        begin = (start.get(self._key) or {}).get("offset")
        if ahead is None or self._key not in end or ahead[0] != begin or ahead[1] != end[self._key]["offset"] \
                or not ahead[2]:
            return super().plan(start, end)
        from ..core.records import arrow_schema

        batch = self._entries_batch(ahead[2], arrow_schema(self.schema()))
        return [ReadTask(0, (_EntriesRange({"stream": self._stream}, start.get(self._key), end[self._key],
                                           bytes(batch.serialize())),))]

    def commit(self, end: Offsets) -> None:
        self._move_group(end)

    def _move_group(self, end: Offsets) -> None:
        position = end.get(self._key)
        if not position:
            return
        group = self.config["redis.stream.consumer.group"]
        import redis

        client = connect(self.config)
        try:
            try:
                client.xgroup_setid(self._stream, group, position["offset"])
            except redis.ResponseError:  # no such group yet
                client.xgroup_create(self._stream, group, id=position["offset"], mkstream=True)
        except redis.RedisError as e:
            log.warning("%s: could not move consumer group %r of stream %r to %s: %s", self.name, group,
                        self._stream, position["offset"], _failed(self.config, e))
        finally:
            client.close()

    def lag(self, current: Offsets) -> int | None:
        import redis

        client = connect(self.config)
        try:
            position = (current.get(self._key) or {}).get("offset", "0-0")
            return len(client.xrange(self._stream, min=f"({position}", count=100_000))
        except redis.RedisError:
            return None
        finally:
            client.close()

    def _entries_batch(self, entries: Sequence[Any], schema: Any) -> Any:
        """The record batch of XRANGE ``entries`` (``(id, {field: value})``, bytes)."""
        import pyarrow as pa

        ids = [e[0].decode() for e in entries]
        names, values, bounds = [], [], [0]
        for e in entries:
            for k, v in e[1].items():
                names.append(k.decode())
                values.append(v.decode())
            bounds.append(len(names))
        body_type = schema.field("value").type.field("body").type
        bodies = pa.MapArray.from_arrays(pa.array(bounds, pa.int32()), pa.array(names, pa.string()),
                                         pa.array(values, pa.string()), type=body_type)
        n = len(entries)
        topic = str(self.config["topic"]).replace("${stream}", self._stream)
        return pa.RecordBatch.from_arrays([
            pa.array(ids, pa.string()),
            pa.StructArray.from_arrays(
                [pa.array(ids, pa.string()), bodies, pa.array([self._stream] * n, pa.string())],
                fields=list(schema.field("value").type)),
            pa.array([topic] * n, pa.string()), pa.nulls(n, pa.int32()), pa.nulls(n, pa.int64()),
            pa.array([_id(i)[0] * 1000 for i in ids], pa.timestamp("us", tz="UTC")),
            pa.nulls(n, schema.field("headers").type)], schema=schema)

    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import pyarrow as pa

        from ..core.records import arrow_schema

        if isinstance(rng, _EntriesRange):
            yield pa.ipc.read_record_batch(pa.py_buffer(rng.arrow), arrow_schema(self.schema()))
            return
        start = (rng.start or {"offset": "0-0"})["offset"]
        end = rng.end["offset"]
        schema = arrow_schema(self.schema())
        client = connect(self.config)
        try:
            low = f"({start}" if rng.start else "-"
            chunk = int(self.config["batch.size"])
            while True:
                entries = client.xrange(self._stream, min=low, max=end, count=chunk)
                if not entries:
                    return
                n = len(entries)
                yield self._entries_batch(entries, schema)
                if n < chunk:
                    return
                low = f"({entries[-1][0].decode()}"
        except ConnectError:
            raise
        except Exception as e:
            raise _failed(self.config, e) from e
        finally:
            client.close()


# -- sink -----------------------------------------------------------------------------------------------------------

_COMMANDS = ("HSET", "JSONSET", "JSONMERGE", "TSADD", "SET", "XADD", "LPUSH", "RPUSH", "SADD", "ZADD", "DEL")
_MODULES = {"JSONSET": "RedisJSON", "JSONMERGE": "RedisJSON", "TSADD": "RedisTimeSeries"}


def _sink_problems(config: Any) -> list[ConfigProblem]:
    problems = []
    command = str(config["redis.command"])
    if command in _MODULES:
        problems.append(ConfigProblem("redis.command", f"redis.command={command} needs the {_MODULES[command]} "
                                                       f"module and is not supported here yet"))
    if config["redis.multiexec"] and command not in ("XADD", "LPUSH", "RPUSH", "SADD", "ZADD"):
        problems.append(ConfigProblem("redis.multiexec", "multi/exec is only supported with these data structures: "
                                                         "XADD, LPUSH, RPUSH, SADD, ZADD"))
    try:
        "".encode(config["redis.charset"])
    except LookupError:
        problems.append(ConfigProblem("redis.charset", f"Unknown character set {config['redis.charset']!r}"))
    return problems


class RedisSinkConnector(SinkConnector):
    """Writes records to Redis data structures (redis-kafka-connect's ``RedisSinkConnector``), at least once."""

    kafka_class = _SINK
    destination_keys: ClassVar[tuple[str, ...]] = ("redis.uri", "redis.host", "redis.port")
    config_def = (
        ConfigDef()
        .define("redis.command", Type.STRING, "XADD", ValidString(*_COMMANDS), Importance.HIGH,
                "Destination data structure: " + ",".join(_COMMANDS))
        .define("redis.key", Type.STRING, "${topic}", importance=Importance.MEDIUM,
                doc="A format string for destination key space, which may contain '${topic}' as a placeholder for "
                    "the originating topic name. Leave empty for passthrough (only applicable to non-collection "
                    "data structures).")
        .define("redis.separator", Type.STRING, ":", importance=Importance.MEDIUM,
                doc="Separator for non-collection destination keys.")
        .define("redis.charset", Type.STRING, "UTF-8", importance=Importance.HIGH,
                doc="Character set to encode Redis key and value strings.")
        .define("redis.multiexec", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Whether to execute Redis commands in multi/exec transactions (one per Spark task).")
        .define("redis.wait.replicas", Type.INT, 0, Range.at_least(0), Importance.MEDIUM,
                "Number of replicas to wait for. Use 0 to disable waiting for replicas.")
        .define("redis.wait.timeout", Type.LONG, 1000, Range.at_least(0), Importance.MEDIUM,
                "Timeout in millis for WAIT command.")
        .merge(_connection_keys())
        .accept(_SINK, no_effect={
            "redis.json.path": "JSONMERGE (RedisJSON) is not supported here",
            "redis.json.path.fixed": "JSONMERGE (RedisJSON) is not supported here"})
        .check(_sink_problems)
    )

    def validate_input(self, schema: Any) -> None:
        if "value" not in schema.fieldNames() and str(self.config["redis.command"]) != "DEL":
            raise ConfigError(f"RedisSinkConnector needs a 'value' column; the input has {schema.fieldNames()}")

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> int:
        writer = _Writer(self.config)
        client = connect(self.config)
        try:
            pipe = client.pipeline(transaction=bool(self.config["redis.multiexec"]))
            n = 0
            for batch in batches:
                for record in _sink_records(batch):
                    writer.add(pipe, *record)
                    n += 1
                if len(pipe) >= 10_000:
                    pipe.execute()
            pipe.execute()
            if self.config["redis.wait.replicas"]:
                client.wait(self.config["redis.wait.replicas"], self.config["redis.wait.timeout"])
            return n
        except (ConnectError, DataError):
            raise
        except Exception as e:
            raise _failed(self.config, e) from e
        finally:
            client.close()

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Nothing to do: each task's commands were executed (and replicated, with redis.wait.replicas)."""


def _sink_records(batch: Any) -> Iterator[tuple[Any, ...]]:
    names = batch.schema.names
    rows = batch.num_rows

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * rows

    yield from zip(column("topic"), column("key"), column("value"), column("partition"), column("offset"))


class _Writer:
    """One record as the original's operation for ``redis.command`` writes it, queued on a pipeline."""

    def __init__(self, config: Any):
        self.command = str(config["redis.command"])
        self.keyspace = str(config["redis.key"])
        self.separator = str(config["redis.separator"])
        self.charset = str(config["redis.charset"])

    def _bytes(self, what: str, value: Any, where: str) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode(self.charset)
        raise DataError(f"The {what} of the record at {where} must be a string or bytes for redis.command="
                        f"{self.command}, not {type(value).__name__}: use the StringConverter or ByteArrayConverter "
                        f"(or a transform) so it is")

    def _text(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"  # Java's Boolean.toString, as the original writes fields
        return value.decode(self.charset) if isinstance(value, bytes) else str(value)

    def _fields(self, value: Any, where: str) -> dict[bytes, bytes]:
        if isinstance(value, dict):
            return {str(k).encode(self.charset): self._text(v).encode(self.charset) for k, v in value.items()
                    if v is not None}
        if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):  # an Arrow map
            return {str(k).encode(self.charset): self._text(v).encode(self.charset) for k, v in value if v is not None}
        raise DataError(f"The value of the record at {where} must be a struct or a map for redis.command="
                        f"{self.command} (its fields become the entry), not {type(value).__name__}")

    def _space(self, topic: str | None) -> str:
        return self.keyspace.replace("${topic}", topic or "")

    def _key(self, topic: str | None, key: Any, where: str) -> bytes:
        if not self.keyspace:
            return self._bytes("key", key, where)
        return f"{self._space(topic)}{self.separator}{self._text(key)}".encode(self.charset)

    def add(self, pipe: Any, topic: str | None, key: Any, value: Any, partition: Any, offset: Any) -> None:
        where = f"topic {topic!r} partition {partition} offset {offset}"
        command = self.command
        if command == "XADD":
            if value is not None:
                pipe.xadd(self._space(topic).encode(self.charset), self._fields(value, where))
        elif command == "HSET":
            if value is None:
                pipe.delete(self._key(topic, key, where))
            else:
                pipe.hset(self._key(topic, key, where), mapping=self._fields(value, where))
        elif command == "SET":
            if value is None:
                pipe.delete(self._key(topic, key, where))
            else:
                pipe.set(self._key(topic, key, where), self._bytes("value", value, where))
        elif command == "DEL":
            pipe.delete(self._key(topic, key, where))
        elif command in ("LPUSH", "RPUSH"):
            if value is not None:
                getattr(pipe, command.lower())(self._space(topic), self._bytes("key", key, where))
        elif command == "SADD":
            member = self._bytes("key", key, where)
            (pipe.srem if value is None else pipe.sadd)(self._space(topic), member)
        elif command == "ZADD":
            if value is None:
                return
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise DataError(f"The value of the record at {where} must be a number (the score) for "
                                f"redis.command=ZADD, not {type(value).__name__}")
            pipe.zadd(self._space(topic), {self._bytes("key", key, where): float(value)})

