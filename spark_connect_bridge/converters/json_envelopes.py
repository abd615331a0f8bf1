"""The schemas of a batch of JsonConverter envelopes (``{"schema": ..., "payload": ...}``) without parsing a message.

JsonConverter writes the schema first, so the text before a message's first ``"payload":`` is, for every message of
one schema, the same bytes: ``{"schema": <the schema>,``. The distinct such texts of a batch are a handful whatever
its size, and each is read once, here on the driver (:func:`schema_of_prefix`).

Finding that text is a byte search per message (``substring_index``), which Spark runs as a compare at every
position of the schema's text (a Debezium envelope's schema is ~2 KB), and the distinct then hashes and compares
those kilobytes again: together ~30% of the JVM's CPU of a JDBC sink fed Debezium envelopes (issue #38's profile).
Texts seen before are therefore kept (:class:`KnownPrefixes`, per worker process, bounded), and a message is first
checked against them with one ``startswith`` each (a single compare of its first bytes): a message starts with a
known text followed by ``"payload":`` exactly when that text is what precedes its first ``"payload":`` (the key
has no proper prefix that is also its suffix, so no occurrence can start inside the text). Only the messages that
start with none of them are searched as before, in the same pass: a batch whose messages all start with known texts
is typed by compares alone. A worker's first batch of a schema is searched, and its texts are known from then on.

A streaming sink whose writes are replay-safe goes one step further (:class:`BatchTexts`): a micro-batch is typed by
the schemas of the previous one without a job of its own, and each of its messages is checked, in the write's own
pass, to start with one of the previous batch's texts (a filter that raises :data:`SCHEMAS_CHANGED` otherwise); the
first message that does not fails that write, which the sink aborts, and the batch is typed from its messages.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["MAX_SCHEMAS", "NO_SCHEMA", "SCHEMAS_CHANGED", "BatchTexts", "KnownPrefixes", "schema_of_prefix",
           "schemas_by_prefix"]

MAX_SCHEMAS = 1000  # distinct schemas of one batch looked at (more: the batch is not typed by them)
PAYLOAD_KEY = '"payload":'
_JSON_SPACE = " \t\n\r"
NO_SCHEMA = object()
SCHEMAS_CHANGED = "kconnect: a message starts with a JSON schema the messages its types came from did not carry"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_SCHEMA_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def schema_of_prefix(prefix: str) -> Any:
    """The ``schema`` value of an envelope from the text before its first ``"payload":``, when that text is exactly
    ``{"schema": <one JSON value>,`` (JSON whitespace allowed): then every message that starts with the same text
    carries that very schema. :data:`NO_SCHEMA` otherwise (the schema is not first, a ``"payload":`` inside it
    cut it short, no ``"payload":`` at all, text that is not JSON).

    >>> schema_of_prefix('{"schema": {"type": "int32"}, ')
    {'type': 'int32'}
    """
    s = prefix.lstrip(_JSON_SPACE)
    if not s.startswith("{"):
        return NO_SCHEMA
    s = s[1:].lstrip(_JSON_SPACE)
    if not s.startswith('"schema"'):
        return NO_SCHEMA
    s = s[len('"schema"'):].lstrip(_JSON_SPACE)
    if not s.startswith(":"):
        return NO_SCHEMA
    s = s[1:].lstrip(_JSON_SPACE)
    try:
        value, end = _SCHEMA_DECODER.raw_decode(s)
    except ValueError:
        return NO_SCHEMA
    return value if s[end:].strip(_JSON_SPACE) == "," else NO_SCHEMA


class KnownPrefixes:
    """Texts before ``"payload":`` that were schemas, with their schema, most recently seen first; at most
    ``entries`` of them and ``chars`` characters in all (the oldest go first).

    >>> known = KnownPrefixes()
    >>> known.add('{"schema":{"type":"int32"},', {"type": "int32"})
    >>> known.recent()
    [('{"schema":{"type":"int32"},', {'type': 'int32'})]
    """

    def __init__(self, entries: int = 32, chars: int = 4 << 20):
        self.entries, self.chars = entries, chars
        self._texts: OrderedDict[str, Any] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def recent(self) -> list[tuple[str, Any]]:
        """``(text, schema)`` pairs, most recently seen first."""
        with self._lock:
            return list(reversed(self._texts.items()))

    def add(self, text: str, schema: Any) -> None:
        """Remember ``text`` (or mark it seen again); ``schema`` is :func:`schema_of_prefix` of it."""
        if len(text) > self.chars:
            return
        with self._lock:
            if text in self._texts:
                self._texts.move_to_end(text)
                return
            self._texts[text] = schema
            self._size += len(text)
            while len(self._texts) > self.entries or self._size > self.chars:
                old, _ = self._texts.popitem(last=False)
                self._size -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
            self._size = 0


KNOWN = KnownPrefixes()


def topic_column(df: DataFrame) -> Column:
    """``df``'s ``topic`` column, or a null string where it has none."""
    return F.col("topic") if "topic" in df.columns else F.lit(None).cast("string")


def barrier() -> Column:
    """Always true, but nondeterministic: a projection or filter holding it is a barrier to filter push-down."""
    return F.spark_partition_id() >= F.lit(0)


class BatchTexts:
    """One streaming query's memory of the texts before ``"payload":`` (with their topic) that its last micro-batch
    typed from its messages started with, per column, and the ``(topic, schema)`` rows they gave.

    The next micro-batch is typed by those rows (while ``guessing``: no job) under :meth:`guarded`, a filter that
    raises :data:`SCHEMAS_CHANGED` at the first non-null message that starts with none of those texts. With every
    message starting with one of them, the batch's own distinct ``(topic, schema)`` are a subset of the previous
    batch's; the types are then those of the previous batch (a topic absent from this batch keeps its fields in a
    union, null), and every record converts as it would have. A column the previous batch could not type by its
    texts (no schema first, tombstones only) keeps the per-batch job. A query's first micro-batch is typed so by its
    own first messages (:meth:`~spark_connect_bridge.engine.pipeline.BatchRouter._learn_first_messages`). Only for
    sinks that recognise a replayed batch (``delivery = "exactly-once"``): the write the guard fails is aborted and
    the batch written again.
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[list[tuple[Any, Any]], frozenset[tuple[Any, str]]] | None] = {}
        self.guessing = False

    def ready(self) -> bool:
        """Whether the previous micro-batch typed each of its columns by texts (the next one can guess)."""
        return bool(self._last) and all(v is not None for v in self._last.values())

    def forget(self) -> None:
        self._last.clear()

    def record(self, column: str, rows: list[tuple[Any, Any]] | None, texts: set[tuple[Any, str]]) -> None:
        """What a micro-batch's job found for ``column``; ``rows`` None or empty: nothing to guess from."""
        self._last[column] = (list(rows), frozenset(texts)) if rows else None

    def rows(self, column: str) -> list[tuple[Any, Any]] | None:
        """The previous micro-batch's rows for ``column`` while guessing, else None (run the job)."""
        last = self._last.get(column)
        return list(last[0]) if self.guessing and last is not None else None

    def guarded(self, df: DataFrame) -> DataFrame:
        """``df`` behind a filter that raises :data:`SCHEMAS_CHANGED` at a non-null message of a recorded column
        that starts with none of the previous batch's texts of its topic. The filter is nondeterministic (no other
        filter is merged with it or pushed below it), so it sees every row the write reads."""
        ok: Column = F.lit(True)
        for column, last in self._last.items():
            assert last is not None
            text = F.col(column).cast("string")
            known: Column = F.lit(False)
            for t, prefix in sorted(last[1], key=lambda tp: (str(tp[0]), tp[1])):
                known = known | (topic_column(df).eqNullSafe(F.lit(t)) & text.startswith(F.lit(prefix + PAYLOAD_KEY)))
            ok = ok & (F.col(column).isNull() | known)
        return df.where(F.when(ok & barrier(), F.lit(True)).otherwise(F.raise_error(F.lit(SCHEMAS_CHANGED))))


def schemas_by_prefix(df: DataFrame, column: str, topic: Column, sample_size: int | None,
                      texts: set[tuple[Any, str]] | None = None) -> list[tuple[Any, Any]] | None:
    """The distinct ``(topic, schema)`` of the envelopes in ``df`` without parsing a message, in one pass (the
    module's docstring says how): each message is compared with the known texts, and only one that starts with
    none of them is searched. ``None`` when a distinct text before ``"payload":`` is not a schema (the caller
    parses every message's ``schema`` part instead) or there are more than :data:`MAX_SCHEMAS`. A
    ``"schema": null`` is no schema (left out), as ``get_json_object``'s null. With ``sample_size``, the first
    messages only, all searched (a batch DataFrame is read once, so no text is known). ``texts`` collects the
    distinct ``(topic, text before "payload":)`` found."""
    text = F.col(column).cast("string")
    known = KNOWN.recent() if sample_size is None else []
    number: Column = F.lit(None).cast("int")
    for i, (prefix, _) in reversed(list(enumerate(known))):  # the most recent text is compared first
        number = F.when(text.startswith(F.lit(prefix + PAYLOAD_KEY)), F.lit(i)).otherwise(number)
    searched = F.substring_index(text, PAYLOAD_KEY, 1)
    found = df.where(text.isNotNull()).select(
        topic.alias("t"), number.alias("i"), (F.when(number.isNull(), searched) if known else searched).alias("p"))
    if sample_size is not None:
        found = found.limit(sample_size)
    rows = found.distinct().limit(MAX_SCHEMAS + 1).collect()
    if len(rows) > MAX_SCHEMAS:
        return None
    out = []
    for r in rows:
        if r["i"] is not None:
            prefix, schema = known[r["i"]]
        else:
            prefix, schema = r["p"], schema_of_prefix(r["p"])
            if schema is NO_SCHEMA:
                return None
        KNOWN.add(prefix, schema)
        if texts is not None:
            texts.add((r["t"], prefix))
        if schema is not None:
            out.append((r["t"], schema))
    return out
