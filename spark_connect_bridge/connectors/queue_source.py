"""What every message-broker source that cannot rewind shares (MQTT, RabbitMQ): messages held on the driver until
Spark has committed the micro-batch that read them, then acknowledged.

A queue or a subscription cannot be read again from a checkpoint's position, so these sources do not pretend to:

* On the driver, the connector keeps one client (the one session or channel that may acknowledge) and an
  :class:`Inbox` of the messages it received. ``latest_offsets`` numbers the new ones after the start position:
  the offset is ``{"received": n}``, the count of messages this query has planned so far.
* ``plan`` hands each message of ``(start, end]`` to the executors inside the read task, so a retried Spark task
  reads the same records: the task's records are built into one Arrow record batch on the driver, where the
  messages are, and travel as its IPC bytes (one buffer rather than a pickled object per message; the executor
  only maps it). They are acknowledged upstream once Spark's commit log holds their batch: in
  ``commit(end)``, or earlier in the next ``latest_offsets(start)`` (Spark asks for a next batch only after it
  committed the one ending at ``start``; it calls ``commit`` only when that next batch has data).
* A driver that stops or dies before that commit leaves them unacknowledged: the broker delivers them again to
  the next session, where they are numbered after the checkpoint. The replayed batch of the dead driver's last
  offsets finds none of them in the new inbox and reads nothing; the messages come in the next batch.

The guarantee is **at least once**: nothing is acknowledged before Spark's commit. A message is read twice only
when a driver stopped after the sink made its batch durable and before Spark's commit recorded it (at most one
micro-batch: the one in flight).
"""

from __future__ import annotations

import abc
import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from ..errors import ConnectError
from .base import ReadRange, ReadTask, SourceConnector
from .offsets import Offsets, partition_key

__all__ = ["Delivered", "Inbox", "QueueSourceConnector", "MessagesRange"]

log = logging.getLogger(__name__)


class Delivered(NamedTuple):
    """One message as received: what becomes a record (``timestamp_us``: microseconds since the epoch). A named
    tuple: the broker's client thread makes one per message."""

    key: Any
    value: bytes
    timestamp_us: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class MessagesRange(ReadRange):
    """A range of a queue source with its records: ``arrow``, the IPC bytes of one record batch (built on the
    driver, :func:`records_batch`), ``count`` its rows."""

    arrow: bytes = b""
    count: int = 0


def records_batch(messages: Sequence[Delivered], offsets: Sequence[int], topics: Any, target: Any) -> Any:
    """The record batch of ``messages`` (schema ``target``, the connector's record schema in Arrow): ``offsets``
    each message's position, ``topics`` one topic for all or a list. The headers column is built from flat key and
    value arrays and list offsets, not a dict per header."""
    import pyarrow as pa

    n = len(messages)
    header_type = target.field("headers").type
    bounds, names, values = [0], [], []
    for m in messages:
        for k, v in m.headers:
            names.append(k)
            values.append(v)
        bounds.append(len(names))
    entries = pa.StructArray.from_arrays([pa.array(names, pa.string()), pa.array(values, pa.binary())],
                                         fields=list(header_type.value_type))
    headers = pa.ListArray.from_arrays(pa.array(bounds, pa.int32()), entries, type=header_type)
    topic_values = [topics] * n if isinstance(topics, str) else topics
    return pa.RecordBatch.from_arrays(
        [pa.array([m.key for m in messages], target.field("key").type),
         pa.array([m.value for m in messages], target.field("value").type),
         pa.array(topic_values, pa.string()),
         pa.array([0] * n, pa.int32()),
         pa.array(offsets, pa.int64()),
         pa.array([m.timestamp_us for m in messages], pa.timestamp("us", tz="UTC")),
         headers],
        schema=target)


class Inbox:
    """Driver side: messages received and not yet acknowledged, in order. The broker's client thread puts, the
    stream reader numbers, takes and acknowledges. ``token`` is what the client needs to acknowledge a message."""

    def __init__(self) -> None:
        self._lock = threading.Condition(threading.Lock())  # not re-entered: a plain lock is cheaper per put
        self._unnumbered: deque[tuple[Delivered, Any]] = deque()
        self._numbered: deque[tuple[int, Delivered, Any]] = deque()
        self._last = 0  # the position of the last numbered message
        self._waiting = 0  # threads in wait(): put notifies only then (it runs for every message)

    def put(self, message: Delivered, token: Any) -> None:
        with self._lock:
            self._unnumbered.append((message, token))
            if self._waiting:
                self._lock.notify_all()

    def holds(self, token: Any) -> bool:
        """Whether a message with this acknowledgement token is held (a redelivery of it is a duplicate)."""
        with self._lock:
            return any(t == token for _, t in self._unnumbered) or any(t == token for _, _, t in self._numbered)

    def drop_unnumbered(self, lost: Callable[[Any], bool]) -> int:
        """Forget the messages not yet numbered whose token is ``lost`` (delivered on a connection that was lost:
        the broker delivers them again); return how many."""
        with self._lock:
            kept = deque(item for item in self._unnumbered if not lost(item[1]))
            dropped = len(self._unnumbered) - len(kept)
            self._unnumbered = kept
            return dropped

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a first unnumbered message."""
        with self._lock:
            if not self._unnumbered:
                self._waiting += 1
                try:
                    self._lock.wait(timeout)
                finally:
                    self._waiting -= 1

    def number(self, start: int, limit: int | None) -> int:
        """Number the messages received after position ``start`` (at most ``limit`` past it); return the last."""
        with self._lock:
            if not self._numbered:
                # A new query, or a restarted one: positions go on from the checkpoint's.
                self._last = max(self._last, start)
            bound = None if limit is None else start + limit
            while self._unnumbered and (bound is None or self._last < bound):
                message, token = self._unnumbered.popleft()
                self._last += 1
                self._numbered.append((self._last, message, token))
            return self._last if bound is None else min(self._last, max(bound, start))

    def take(self, start: int, end: int) -> list[tuple[int, Delivered]]:
        """The numbered messages in ``(start, end]`` (they stay held until acknowledged)."""
        with self._lock:
            return [(n, m) for n, m, _ in self._numbered if start < n <= end]

    def release(self, end: int) -> list[Any]:
        """Forget the messages up to ``end``; return their tokens to acknowledge."""
        out = []
        with self._lock:
            while self._numbered and self._numbered[0][0] <= end:
                out.append(self._numbered.popleft()[2])
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._unnumbered) + len(self._numbered)


class QueueSourceConnector(SourceConnector, abc.ABC):
    """Base of broker sources that acknowledge after Spark's commit. A subclass opens its client in
    :meth:`_open` (receiving into :attr:`inbox`); the client acknowledges (``ack``), closes (``close``) and reports a
    failure (``failure``) as :meth:`_ack`, :meth:`_close` and :meth:`_check` expect."""

    offset_fields: ClassVar[dict[str, type] | None] = {"received": int}
    #: how long ``latest_offsets`` waits for a first message when none is held (seconds)
    poll_wait: ClassVar[float] = 0.1

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._runtime: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_runtime"] = {}  # the driver's client never travels
        return state

    # -- what a broker implements ------------------------------------------------------------------
    @abc.abstractmethod
    def _partition(self) -> dict[str, Any]:
        """The source partition map (stable across restarts of the same config)."""

    @abc.abstractmethod
    def _open(self, inbox: Inbox) -> Any:
        """Connect, subscribe and start delivering into ``inbox``; return the client handle."""

    # The client _open returns acknowledges with ack(tokens), closes with close() and holds a failure (a text, or
    # None) met on its own thread; a broker whose client differs overrides these three.
    def _ack(self, client: Any, tokens: Sequence[Any]) -> None:
        """Acknowledge the messages of ``tokens`` (in order of receipt)."""
        client.ack(tokens)

    def _close(self, client: Any) -> None:
        """Close the client."""
        client.close()

    def _check(self, client: Any) -> None:
        """Raise the client's failure, if it has one (called on every trigger)."""
        if client.failure:
            raise ConnectError(client.failure)

    def _record_topics(self, messages: Sequence[Delivered]) -> str | list[str]:
        """The records' topic: one for all (``kafka.topic``), or a subclass's list, one per message."""
        return str(self.config.get("kafka.topic"))

    # -- driver ------------------------------------------------------------------------------------
    @property
    def inbox(self) -> Inbox:
        if "inbox" not in self._runtime:
            self._runtime["inbox"] = Inbox()
        return self._runtime["inbox"]

    def _client(self) -> Any:
        if "client" not in self._runtime:
            self._runtime["client"] = self._open(self.inbox)
            # The messages wait here until Spark's commit, several tracked objects each: without this, every full
            # collection of the cyclic GC walks the whole runner (pyspark, pyarrow) again, ~2 us a message
            # (measured: 3.9 -> 2.2 us per received message). The objects alive now live as long as the process.
            gc.freeze()
        client = self._runtime["client"]
        self._check(client)
        return client

    @property
    def _key(self) -> str:
        return partition_key(self._partition())

    def initial_offsets(self) -> Offsets:
        return {self._key: {"received": 0}}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        client = self._client()
        begin = int((start.get(self._key) or {"received": 0})["received"])
        # Spark asks for the next batch only once its commit log holds the one ending at ``start``: acknowledge it
        # now rather than at commit(), which Spark calls only when a next batch has data.
        tokens = self.inbox.release(begin)
        if tokens:
            self._ack(client, tokens)
        if not len(self.inbox):
            self.inbox.wait(self.poll_wait)
        limit = max_records
        if until is not None and self._key in until:
            cap = int(until[self._key]["received"]) - begin
            limit = max(0, cap) if limit is None else max(0, min(limit, cap))
        return {self._key: {"received": self.inbox.number(begin, limit)}}

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        begin = int((start.get(self._key) or {"received": 0})["received"])
        last = int(end[self._key]["received"])
        held = self.inbox.take(begin, last) if "inbox" in self._runtime else []
        if len(held) < last - begin:
            # A batch planned by a driver that stopped before Spark's commit: its messages were not acknowledged,
            # the broker delivers them again and they come in a later batch.
            log.info("%s: replaying positions (%d, %d] of a previous driver: %d of its %d messages are held here; "
                     "the broker redelivers the others (unacknowledged) in a later batch", self.name, begin, last,
                     len(held), last - begin)
        tasks = max(1, min(int(self.config.get("tasks.max", 1)), len(held)))
        size = -(-len(held) // tasks) if held else 0
        out = []
        for i in range(tasks):
            part = held[i * size:(i + 1) * size]
            if not part and held:
                continue
            out.append(ReadTask(i, (MessagesRange(self._partition(), start.get(self._key), end[self._key],
                                                  self._arrow(part), len(part)),)))
        return out

    def _arrow(self, part: Sequence[tuple[int, Delivered]]) -> bytes:
        """The IPC bytes of the record batch of ``part`` (empty: no messages)."""
        if not part:
            return b""
        from ..core.records import arrow_schema

        if "arrow_schema" not in self._runtime:
            self._runtime["arrow_schema"] = arrow_schema(self.schema())
        messages = [m for _, m in part]
        batch = records_batch(messages, [n for n, _ in part], self._record_topics(messages),
                              self._runtime["arrow_schema"])
        return bytes(batch.serialize())

    def commit(self, end: Offsets) -> None:
        if self._key not in end or "inbox" not in self._runtime:
            return
        tokens = self.inbox.release(int(end[self._key]["received"]))
        if tokens:
            self._ack(self._client(), tokens)

    def stop(self) -> None:
        client = self._runtime.pop("client", None)
        if client is not None:
            self._close(client)

    def lag(self, current: Offsets) -> int | None:
        return len(self.inbox) if "inbox" in self._runtime else None

    # -- executor ----------------------------------------------------------------------------------
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        import pyarrow as pa

        from ..core.records import arrow_schema

        data = getattr(rng, "arrow", b"")
        if data:
            yield pa.ipc.read_record_batch(pa.py_buffer(data), arrow_schema(self.schema()))


def now_us() -> int:
    """The current time in microseconds since the epoch (a received message's timestamp)."""
    return time.time_ns() // 1000
