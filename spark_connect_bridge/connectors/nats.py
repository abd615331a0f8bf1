"""NATS JetStream source and sink with the keys of Apache Camel's Kafka connectors for NATS
(``org.apache.camel.kafkaconnector.natssource.CamelNatssourceSourceConnector`` and
``org.apache.camel.kafkaconnector.natssink.CamelNatssinkSinkConnector``: the ``nats-source``/``nats-sink``
kamelets, the Kafka Connect connectors with JetStream keys), on the nats-py client.

**CamelNatssourceSourceConnector** reads the JetStream stream ``camel.kamelet.nats-source.jetstreamName`` by stream
sequence: the offset is the sequence of the last message a batch covers (``{"sequence": 42}``), each micro-batch
reads the messages of subject ``camel.kamelet.nats-source.topic`` in ``(start, end]`` through a short-lived
consumer that starts at ``start + 1``, so a replayed batch reads the same messages and a restart from the
checkpoint resumes exactly (no duplicates, nothing skipped). Beside it the connector keeps a **durable pull
consumer** (``nats.durable.name``, default ``kconnect-<connector name>``) that it acknowledges up to each batch
only after Spark has committed it (at the commit, or at the next trigger): a new query without a checkpoint starts
after that consumer's acknowledged floor, and tools that watch the consumer see the connector's progress. Records:
``key`` null (or the header that ``camel.source.camelMessageHeaderKey`` names), ``value`` the payload (binary),
``topic`` ``topics``, ``offset`` the stream sequence; the message's NATS headers as record headers and its subject
as ``CamelHeader.CamelNatsSubject``, as Camel's source task names it.

**CamelNatssinkSinkConnector** publishes each record's value to subject ``camel.kamelet.nats-sink.topic``, record
headers as NATS headers. With ``camel.kamelet.nats-sink.jetstreamEnabled=true`` every publish waits for
JetStream's acknowledgement (concurrently with ``jetstreamAsync=true``): a message no stream stores fails the task,
naming the subject (at least once). Without JetStream it is a core NATS publish, flushed to the server.

>>> spark.readStream.format("kconnect").options(**{"connector.class": "CamelNatssourceSourceConnector",
...     "camel.kamelet.nats-source.servers": "nats://127.0.0.1:4222", "camel.kamelet.nats-source.topic": "orders.>",
...     "camel.kamelet.nats-source.jetstreamEnabled": "true",
...     "camel.kamelet.nats-source.jetstreamName": "ORDERS", "topics": "orders"}).load()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from ..config import ConfigDef, Importance, NonEmptyString, Password, Range, Type
from ..errors import ConfigError, ConfigProblem, ConnectError, RetriableError
from .base import CommitContext, ReadRange, ReadTask, SinkConnector, SourceConnector, WriteContext
from .offsets import Offsets, partition_key

__all__ = ["CamelNatssourceSourceConnector", "CamelNatssinkSinkConnector"]

log = logging.getLogger(__name__)

_SOURCE = "org.apache.camel.kafkaconnector.natssource.CamelNatssourceSourceConnector"
_SINK = "org.apache.camel.kafkaconnector.natssink.CamelNatssinkSinkConnector"
_SRC = "camel.kamelet.nats-source."
_SNK = "camel.kamelet.nats-sink."
_WAIT = 5.0  # seconds a pull request waits for messages the stream holds
_T = TypeVar("_T")


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run one coroutine to its end on a private event loop (Spark's threads have none)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _servers(config: Any, prefix: str) -> list[str]:
    value = config[prefix + "servers"]
    text = (value.value() if isinstance(value, Password) else str(value or "")) or ""
    return [s.strip() for s in text.split(",") if s.strip()]


def _shown(servers: Sequence[str]) -> str:
    """The servers without any user or token a URL carries (the key is a password in the original)."""
    out = []
    for server in servers:
        parts = urlsplit(server if "://" in server else "nats://" + server)
        out.append(f"{parts.scheme}://{parts.hostname}:{parts.port or 4222}")
    return ", ".join(out)


def _connection_keys(prefix: str) -> ConfigDef:
    return (
        ConfigDef()
        .define(prefix + "servers", Type.PASSWORD, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="Comma separated list of NATS Servers (nats://host:4222, tls://host:4222; a URL may carry "
                    "user:password@ or a token, which is why the original declares it a password).")
        .define(prefix + "jetstreamName", Type.STRING, "", importance=Importance.MEDIUM,
                doc="Sets the name of the JetStream stream to use.")
        .define("nats.credentials.file", Type.STRING, "", importance=Importance.MEDIUM,
                doc="A NATS credentials file (.creds: the user JWT and its NKey seed) to authenticate with. Not a key "
                    "of the original (Camel's NATS component's credentialsFilePath); under the worker's "
                    "connector.allowed.paths when the config comes over REST.")
        .define("nats.connect.timeout.ms", Type.INT, 10000, Range.at_least(1), Importance.LOW,
                "How long to wait for a connection to a server (not a key of the original).")
    )


async def _connect(config: Any, prefix: str) -> Any:
    try:
        import nats
    except ImportError as e:
        raise ConnectError("The NATS connectors need nats-py: pip install 'spark_connect_bridge[brokers]'") from e
    from nats.errors import Error as NatsError

    servers = _servers(config, prefix)

    async def quiet(error: Exception) -> None:  # failures are raised to the caller, not logged twice by nats-py
        log.debug("NATS client: %r", error)

    try:
        timeout = config["nats.connect.timeout.ms"] / 1000
        # bounded here too: nats-py 2.15 can keep retrying a refused first connect despite allow_reconnect=False
        return await asyncio.wait_for(
            nats.connect(servers=servers, user_credentials=config["nats.credentials.file"] or None,
                         connect_timeout=timeout, allow_reconnect=False, max_reconnect_attempts=0, error_cb=quiet),
            timeout=timeout * 2 + 1)
    except (NatsError, OSError, asyncio.TimeoutError) as e:
        text = type(e).__name__
        if "authorization" in str(e).lower():
            raise ConnectError(f"The NATS server at {_shown(servers)} ({prefix}servers) refused the login (check "
                               f"the credentials of {prefix}servers / nats.credentials.file)") from e
        raise RetriableError(f"Cannot connect to the NATS servers of {prefix}servers ({_shown(servers)}): "
                             f"{text}") from e


def _jetstream_problems(prefix: str, source: bool) -> Any:
    def check(config: Any) -> list[ConfigProblem]:
        problems = []
        if source and not config[prefix + "jetstreamEnabled"]:
            problems.append(ConfigProblem(prefix + "jetstreamEnabled", (
                f"{prefix}jetstreamEnabled=false (a core NATS subscription) is not supported by the source: core "
                f"NATS keeps no message for a query that is down and cannot replay a batch; store the subject in a "
                f"JetStream stream and set {prefix}jetstreamEnabled=true and {prefix}jetstreamName")))
        if source and config[prefix + "jetstreamEnabled"] and not config[prefix + "jetstreamName"]:
            problems.append(ConfigProblem(prefix + "jetstreamName",
                                          f"{prefix}jetstreamName must name the JetStream stream to read"))
        return problems
    return check


# -- source ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _MessagesRange(ReadRange):
    """A sequence range whose messages the driver has read already (through the durable consumer, which that read
    moves): ``arrow``, the IPC bytes of their record batch. A task of it reads nothing from NATS."""

    arrow: bytes = b""


class CamelNatssourceSourceConnector(SourceConnector):
    """Reads a NATS JetStream stream by sequence (Camel's ``nats-source`` connector keys), replayable; a durable
    consumer acknowledged after Spark's commit."""

    kafka_class = _SOURCE
    partition_fields: ClassVar[dict[str, type] | None] = {"stream": str, "subject": str}
    offset_fields: ClassVar[dict[str, type] | None] = {"sequence": int}
    config_def = (
        ConfigDef()
        .define(_SRC + "topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="NATS Topic name: the subject (wildcards * and > allowed) whose messages of the stream are read")
        .define(_SRC + "jetstreamEnabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Sets whether to enable JetStream support for this endpoint (required by this source: true).")
        .define(_SRC + "jetstreamAsync", Type.BOOLEAN, True, importance=Importance.MEDIUM,
                doc="Sets whether to operate JetStream requests asynchronously (no effect on the source: each "
                    "batch pulls its messages).")
        .define("topics", Type.STRING, "test", importance=Importance.HIGH,
                doc="The topic of the records (the Kafka topic the original writes to).")
        .define("camel.source.camelMessageHeaderKey", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The header whose value becomes the record key (CamelNatsSubject: the message's subject; or a "
                    "NATS header name). Blank: no key.")
        .define("camel.source.maxBatchPollSize", Type.LONG, 1000, Range.at_least(1), Importance.MEDIUM,
                "The most messages of one pull request (the original's: of one poll). A micro-batch, the unit "
                "Spark commits, holds up to max.records.per.trigger (100,000 when not set): Kafka Connect commits "
                "offsets every offset.flush.interval.ms, not per poll, and a micro-batch costs Spark about 0.2 "
                "CPU-s whatever it holds.")
        .define("nats.durable.name", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The durable consumer acknowledged after each committed batch, where a query without a "
                    "checkpoint starts (blank: kconnect-<connector name>). Not a key of the original.")
        .merge(_connection_keys(_SRC))
        .accept(_SOURCE, no_effect={
            "camel.source.maxPollDuration": "each trigger reads the messages of its planned sequence range",
            "camel.source.pollingConsumerQueueSize": "no hand-off queue: executors pull their batch's messages",
            "camel.source.pollingConsumerBlockTimeout": "no hand-off queue: executors pull their batch's messages",
            "camel.source.pollingConsumerBlockWhenFull": "no hand-off queue: executors pull their batch's messages",
            "camel.source.contentLogLevel": "records are not logged",
        }, not_supported={
            "camel.source.url": "the nats-source keys configure the source; a Camel endpoint URL is not read",
            "camel.source.component": "the nats-source keys configure the source",
            "camel.source.marshal": "the value is the payload as bytes: set value.converter (e.g. "
                                    "ByteArrayConverter) or a transform",
            "camel.source.unmarshal": "the value is the payload as bytes: set value.converter or a transform",
        })
        .check(_jetstream_problems(_SRC, source=True))
    )

    default_max_records_per_trigger = 100_000

    @property
    def _pull_size(self) -> int:
        return int(self.config["camel.source.maxBatchPollSize"])

    @property
    def _stream(self) -> str:
        return str(self.config[_SRC + "jetstreamName"])

    @property
    def _subject(self) -> str:
        return str(self.config[_SRC + "topic"])

    @property
    def _durable(self) -> str:
        name = str(self.config["nats.durable.name"] or f"kconnect-{self.name}")
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)  # no '.', '*', '>' in a consumer name

    @property
    def _key(self) -> str:
        return partition_key({"stream": self._stream, "subject": self._subject})

    def schema(self) -> Any:
        from pyspark.sql.types import BinaryType, StringType

        from ..core.records import record_schema

        return record_schema(StringType(), BinaryType())

    def _failed(self, error: Exception) -> ConnectError:
        from nats.js.errors import NotFoundError

        if isinstance(error, NotFoundError):
            return ConnectError(f"NATS JetStream has no stream {self._stream!r} ({_SRC}jetstreamName)")
        if isinstance(error, ConnectError):
            return error
        return RetriableError(f"NATS JetStream stream {self._stream!r} ({_SRC}jetstreamName): {error!r}")

    async def _durable_consumer(self, js: Any) -> Any:
        """The durable consumer's info, created (from the stream's start) when missing."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        try:
            return await js.consumer_info(self._stream, self._durable)
        except NotFoundError:
            return await js.add_consumer(self._stream, ConsumerConfig(
                durable_name=self._durable, filter_subject=self._subject, ack_policy=AckPolicy.ALL,
                deliver_policy=DeliverPolicy.ALL, max_ack_pending=-1))

    def initial_offsets(self) -> Offsets:
        async def floor() -> int:
            nc = await _connect(self.config, _SRC)
            try:
                info = await self._durable_consumer(nc.jetstream())
                return int(info.ack_floor.stream_seq or 0)
            finally:
                await nc.close()

        try:
            return {self._key: {"sequence": _run(floor())}}
        except Exception as e:
            raise self._failed(e) from e

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        if start.get(self._key):
            # Spark asks for the next batch only after it committed the one ending at start; it calls commit() only
            # when a next batch has data, so the durable consumer is acknowledged here too.
            self._acknowledge(int(start[self._key]["sequence"]))
        current = int((start.get(self._key) or self.initial_offsets()[self._key])["sequence"])
        if max_records is not None:
            try:
                ahead = _run(self._read_ahead(current, max_records, until))
            except Exception as e:
                raise self._failed(e) from e
            if ahead is not None:
                return {self._key: {"sequence": ahead}}

        async def last() -> int:
            nc = await _connect(self.config, _SRC)
            try:
                info = await nc.jetstream().stream_info(self._stream)
                return int(info.state.last_seq or 0)
            finally:
                await nc.close()

        try:
            end = max(current, _run(last()))
        except Exception as e:
            raise self._failed(e) from e
        if max_records is not None:
            end = min(end, current + max_records)
        if until is not None and self._key in until:
            end = min(end, int(until[self._key]["sequence"]))
        return {self._key: {"sequence": max(end, current)}}

    async def _read_ahead(self, current: int, max_records: int, until: Offsets | None) -> int | None:
        """The next batch's end, its messages read once, through the durable consumer, when that consumer stands
        exactly at ``current`` (acknowledged and delivered up to it, nothing outstanding: the steady state of a
        running query). The messages go to the read task as Arrow (:meth:`plan`) and the last one's acknowledgement
        after Spark's commit moves the consumer: each message is read once, not by the read task and again to move
        the consumer. ``None`` when the consumer stands elsewhere (a restart, another reader of it): the batch's end
        then comes from the stream's last sequence, the read task reads the range and the acknowledgement reads
        through the consumer (:meth:`_acknowledge`)."""
        self.__dict__.pop("_ahead", None)
        nc = await _connect(self.config, _SRC)
        try:
            js = nc.jetstream()
            info = await self._durable_consumer(js)
            if not (int(info.ack_floor.stream_seq or 0) == current == int(info.delivered.stream_seq or 0)
                    and not info.num_ack_pending):
                return None
            bound = int(until[self._key]["sequence"]) if until is not None and self._key in until else None
            pending = min(int(info.num_pending or 0), max_records)
            if not pending or (bound is not None and bound <= current):
                return current
            sub = await js.pull_subscribe_bind(self._durable, self._stream)
            kept: list[Any] = []
            while pending:
                msgs = await self._fetch(sub, pending)
                if not msgs:
                    break
                pending -= len(msgs)
                over = [m for m in msgs if bound is not None and m.metadata.sequence.stream > bound]
                kept += [m for m in msgs if bound is None or m.metadata.sequence.stream <= bound]
                for msg in over:  # past the Trigger.AvailableNow target: handed back for a later batch
                    await msg.nak()
                if over or not msgs[-1].metadata.num_pending:
                    break
            if not kept:
                return current
            end = int(kept[-1].metadata.sequence.stream)
            self.__dict__["_ahead"] = (current, end, bytes(self._batch(kept).serialize()), kept[-1].reply)
            return end
        finally:
            await nc.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_ahead", None)  # the driver's messages travel inside the read task, as Arrow
        state.pop("_ack_reply", None)
        return state

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        ahead = self.__dict__.pop("_ahead", None)
        begin = int((start.get(self._key) or {"sequence": 0})["sequence"])
        if ahead is None or self._key not in end or (ahead[0], ahead[1]) != (begin, int(end[self._key]["sequence"])):
            return super().plan(start, end)
        self.__dict__["_ack_reply"] = (ahead[1], ahead[3])
        return [ReadTask(0, (_MessagesRange({"stream": self._stream, "subject": self._subject}, start.get(self._key),
                                            end[self._key], ahead[2]),))]

    def commit(self, end: Offsets) -> None:
        if self._key in end:
            self._acknowledge(int(end[self._key]["sequence"]))

    def _acknowledge(self, sequence: int) -> None:
        """Acknowledge the durable consumer up to stream sequence ``sequence`` (AckPolicy.ALL: one ack covers every
        earlier message). Best effort: Spark's checkpoint, not the consumer, is where a running query resumes."""
        if self.__dict__.get("_acked", -1) >= sequence:
            return
        held = self.__dict__.pop("_ack_reply", None)

        async def ack() -> None:
            nc = await _connect(self.config, _SRC)
            try:
                if held is not None and held[0] == sequence:
                    # the batch was read through the durable consumer: its last message's acknowledgement
                    await nc.request(held[1], b"+ACK", timeout=_WAIT)
                    return
                js = nc.jetstream()
                info = await self._durable_consumer(js)
                if int(info.ack_floor.stream_seq or 0) >= sequence:
                    return
                sub = await js.pull_subscribe_bind(self._durable, self._stream)
                covered, beyond = None, []
                seen = int(info.ack_floor.stream_seq or 0)
                while True:
                    try:
                        msgs = await sub.fetch(max(1, min(self._pull_size, sequence - seen)), timeout=1.0)
                    except asyncio.TimeoutError:
                        break
                    seen = max(seen, msgs[-1].metadata.sequence.stream)
                    for msg in msgs:
                        if msg.metadata.sequence.stream <= sequence:
                            covered = msg
                        else:
                            beyond.append(msg)
                    if msgs[-1].metadata.sequence.stream >= sequence or not msgs[-1].metadata.num_pending:
                        break
                if covered is not None:
                    await covered.ack_sync()
                # Fetched past the batch: handed back at once, or they would stay out (unacknowledged, not
                # delivered again until ack_wait) and the next batch's fetch would find nothing to acknowledge.
                for msg in beyond:
                    await msg.nak()
            finally:
                await nc.close()

        try:
            _run(ack())
            self.__dict__["_acked"] = sequence
        except Exception as e:  # noqa: BLE001 - the consumer is a progress marker; logged, never fatal
            log.warning("%s: could not acknowledge durable consumer %r of stream %r up to sequence %d: %r",
                        self.name, self._durable, self._stream, sequence, e)

    def lag(self, current: Offsets) -> int | None:
        async def pending() -> int:
            nc = await _connect(self.config, _SRC)
            try:
                info = await nc.jetstream().stream_info(self._stream)
                return max(0, int(info.state.last_seq or 0) - int((current.get(self._key) or {}).get("sequence", 0)))
            finally:
                await nc.close()

        try:
            return _run(pending())
        except Exception:  # noqa: BLE001 - a lag metric is optional
            return None

    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        if isinstance(rng, _MessagesRange):
            import pyarrow as pa

            from ..core.records import arrow_schema

            yield pa.ipc.read_record_batch(pa.py_buffer(rng.arrow), arrow_schema(self.schema()))
            return
        start = int((rng.start or {"sequence": 0})["sequence"])
        end = int(rng.end["sequence"])
        if end <= start:
            return
        loop = asyncio.new_event_loop()
        try:
            nc = loop.run_until_complete(_connect(self.config, _SRC))
            try:
                sub, pending = loop.run_until_complete(self._reader(nc, start))
                last = start
                while pending:
                    msgs = loop.run_until_complete(self._fetch(sub, min(pending, end - last)))
                    if msgs:
                        last = msgs[-1].metadata.sequence.stream
                    kept = [m for m in msgs if m.metadata.sequence.stream <= end]
                    if kept:
                        yield self._batch(kept)
                    if not msgs or len(kept) < len(msgs) or kept[-1].metadata.sequence.stream >= end \
                            or not msgs[-1].metadata.num_pending:
                        break
                loop.run_until_complete(sub.unsubscribe())
            finally:
                loop.run_until_complete(nc.close())
        except ConnectError:
            raise
        except Exception as e:
            raise self._failed(e) from e
        finally:
            loop.close()

    async def _reader(self, nc: Any, start: int) -> tuple[Any, int]:
        """An ephemeral pull consumer of the subject from sequence ``start + 1`` (no acks); how many it holds."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        sub = await nc.jetstream().pull_subscribe(
            self._subject, stream=self._stream,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start + 1,
                                  ack_policy=AckPolicy.NONE, inactive_threshold=60.0, mem_storage=True))
        info = await sub.consumer_info()
        return sub, int(info.num_pending or 0)

    async def _fetch(self, sub: Any, left: int) -> list[Any]:
        try:
            return list(await sub.fetch(max(1, min(self._pull_size, left)), timeout=_WAIT))
        except asyncio.TimeoutError:
            return []

    def _batch(self, msgs: list[Any]) -> Any:
        import pyarrow as pa

        from ..core.records import arrow_schema

        target = arrow_schema(self.schema())
        key_header = str(self.config["camel.source.camelMessageHeaderKey"] or "")
        names, values, bounds, keys = [], [], [0], []
        for m in msgs:
            for k, v in (m.headers or {}).items():
                names.append(str(k))
                values.append(str(v).encode())
            names.append("CamelHeader.CamelNatsSubject")
            values.append(m.subject.encode())
            bounds.append(len(names))
            if key_header == "CamelNatsSubject":
                keys.append(m.subject)
            else:
                keys.append((m.headers or {}).get(key_header) if key_header else None)
        n = len(msgs)
        header_type = target.field("headers").type
        headers = pa.ListArray.from_arrays(
            pa.array(bounds, pa.int32()),
            pa.StructArray.from_arrays([pa.array(names, pa.string()), pa.array(values, pa.binary())],
                                       fields=list(header_type.value_type)), type=header_type)
        return pa.RecordBatch.from_arrays(
            [pa.array(keys, pa.string()), pa.array([bytes(m.data) for m in msgs], pa.binary()),
             pa.array([str(self.config["topics"])] * n, pa.string()), pa.array([0] * n, pa.int32()),
             pa.array([m.metadata.sequence.stream for m in msgs], pa.int64()),
             pa.array([int(m.metadata.timestamp.timestamp() * 1_000_000) for m in msgs],
                      pa.timestamp("us", tz="UTC")),
             headers], schema=target)


# -- sink -----------------------------------------------------------------------------------------------------------

class CamelNatssinkSinkConnector(SinkConnector):
    """Publishes record values to a NATS subject (Camel's ``nats-sink`` connector keys), with JetStream publish
    acknowledgements when ``jetstreamEnabled``: at least once."""

    kafka_class = _SINK
    config_def = (
        ConfigDef()
        .define(_SNK + "topic", Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                doc="NATS Topic name: the subject every record's value is published to.")
        .define(_SNK + "jetstreamEnabled", Type.BOOLEAN, False, importance=Importance.MEDIUM,
                doc="Sets whether to enable JetStream support for this endpoint: each publish waits for the "
                    "stream's acknowledgement (false: a core NATS publish, flushed to the server).")
        .define(_SNK + "jetstreamAsync", Type.BOOLEAN, True, importance=Importance.MEDIUM,
                doc="Sets whether to operate JetStream requests asynchronously: publishes in flight together, every "
                    "acknowledgement awaited before the task ends (false: one at a time).")
        .merge(_connection_keys(_SNK))
        .accept(_SINK, no_effect={
            "camel.sink.contentLogLevel": "records are not logged",
        }, not_supported={
            "camel.sink.url": "the nats-sink keys configure the sink; a Camel endpoint URL is not read",
            "camel.sink.component": "the nats-sink keys configure the sink",
            "camel.sink.marshal": "the value is published as it is (bytes or text): set value.converter",
            "camel.sink.unmarshal": "the value is published as it is (bytes or text): set value.converter",
            "camel.beans.aggregate": "each record is one message",
            "camel.beans.aggregation.size": "each record is one message",
            "camel.beans.aggregation.timeout": "each record is one message",
        })
    )

    def validate_input(self, schema: Any) -> None:
        from pyspark.sql.types import BinaryType, StringType

        if "value" not in schema.fieldNames():
            raise ConfigError(f"CamelNatssinkSinkConnector needs a 'value' column; the input has "
                              f"{schema.fieldNames()}")
        if not isinstance(schema["value"].dataType, (BinaryType, StringType)):
            raise ConfigError(f"CamelNatssinkSinkConnector publishes a binary or string value, not "
                              f"{schema['value'].dataType.simpleString()} (set value.converter, e.g. "
                              f"ByteArrayConverter or JsonConverter)")

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> int:
        return _run(self._publish(batches))

    async def _publish(self, batches: Iterator[Any]) -> int:
        from nats.errors import Error as NatsError

        subject = str(self.config[_SNK + "topic"])
        stream = str(self.config[_SNK + "jetstreamName"] or "") or None
        jetstream = bool(self.config[_SNK + "jetstreamEnabled"])
        together = 1000 if self.config[_SNK + "jetstreamAsync"] else 1
        nc = await _connect(self.config, _SNK)
        sent = 0
        try:
            js = nc.jetstream()
            inflight: list[Any] = []

            async def settle() -> None:
                try:
                    await asyncio.gather(*inflight)
                except (NatsError, asyncio.TimeoutError) as e:
                    raise self._refused(subject, stream, e) from e
                inflight.clear()

            for batch in batches:
                names = batch.schema.names
                values = batch.column(names.index("value")).to_pylist()
                headers = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
                for i, value in enumerate(values):
                    body = value.encode() if isinstance(value, str) else (value or b"")
                    nats_headers = {h["key"]: (h["value"] or b"").decode("utf-8", "replace")
                                    for h in (headers[i] or [])} if headers else None
                    if jetstream:
                        inflight.append(js.publish(subject, body, stream=stream, headers=nats_headers or None))
                        if len(inflight) >= together:
                            await settle()
                    else:
                        await nc.publish(subject, body, headers=nats_headers or None)
                    sent += 1
            await settle()
            if not jetstream:
                await nc.flush()
        finally:
            await nc.close()
        return sent

    def _refused(self, subject: str, stream: str | None, error: Exception) -> ConnectError:
        from nats.errors import NoRespondersError

        if isinstance(error, NoRespondersError):
            return ConnectError(f"NATS JetStream stored no message published to subject {subject!r} "
                                f"({_SNK}topic): no stream captures the subject (create one, or set "
                                f"{_SNK}jetstreamEnabled=false for a core NATS publish)")
        where = f" of stream {stream!r} ({_SNK}jetstreamName)" if stream else ""
        return RetriableError(f"NATS JetStream{where} did not acknowledge a message published to subject "
                              f"{subject!r} ({_SNK}topic): {error!r}")

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        """Nothing to do: JetStream acknowledged every message in :meth:`write` (or the server got the flush)."""
