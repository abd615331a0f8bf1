"""Debezium's signals and the incremental snapshot they drive, as a pure state machine.

**Incremental snapshots on demand** (``signal.data.collection``, Debezium's signal table ``(id varchar primary
key, type varchar, data varchar)``, captured but never emitted): inserting ``type='execute-snapshot'``,
``data='{"data-collections": ["public.orders"], "type": "incremental"}'`` snapshots those tables in primary-key
chunks of ``incremental.snapshot.chunk.size`` rows, one chunk per micro-batch, as ``op=r`` events with
``source.snapshot="incremental"`` interleaved with the stream. Debezium's other signals: ``stop-snapshot``
(``data-collections`` lists tables to drop from the running snapshot; none or empty stops it; a chunk in
flight for a stopped table is dropped), ``pause-snapshot``/``resume-snapshot`` (no chunk is written while
paused, the stream goes on; resume continues after the last key; the in-flight chunk is still delivered, as
Debezium delivers its open window), ``log`` (``data.message`` logged at INFO, its ``{}`` replaced by the
signal's position). ``additional-conditions`` (``[{"data-collection": "public.orders", "filter": "qty > 10
AND status IN ('new', 'paid')"}]``) restrict a table's chunks, in the language of :mod:`.filters`. Bad signals
are logged and skipped. Not implemented: ``surrogate-key``, blocking snapshots, tables without a primary key.

**Debezium's watermark algorithm (DBLog), made replayable.** Debezium reads a chunk between a low and a high
watermark it writes into the signal table, buffers the chunk and drops every buffered row whose key the
stream changes between the two watermarks. A chunk read cannot be repeated here: a database cannot read a
table "as of" a log position, and Spark replays a micro-batch from its offsets. So the driver writes the
chunk itself into the log: the high watermark row carries the chunk's rows (their text forms) in its
``data``. The executor then finds the low watermark, the changes in the window and the chunk, all in the log,
and de-duplicates there (:class:`ChunkWindows`): a batch stays a pure function of its log range, exactly
like a streamed change. Offsets only say where the snapshot stands (the offset's ``incremental`` entry:
remaining tables, last key emitted, paused, filters), folded by :func:`fold` from the signal rows of each
batch's range; the executor folds the same rows, so a chunk is emitted exactly when the offsets count it,
and a crashed driver's chunk that reached the log is emitted and counted like any other.

>>> fold(None, [{"id": "1", "type": "pause-snapshot", "data": ""}], layout, name="cdc")   # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...errors import ConnectError
from .filters import fullmatch, parse_filter
from .layout import Layout, Table

__all__ = ["ACTIONS", "CLOSE", "OPEN", "ChunkWindows", "State", "accepts", "collections", "fold", "signal_data",
           "snapshot_request", "state_of", "state_text", "with_tables"]

log = logging.getLogger(__name__)

#: The watermark rows the driver writes around a chunk (their ``data`` is JSON: ``window``, ``table``; the
#: high watermark adds ``columns``, ``rows``, ``after``, ``last``, ``done`` and ``snapshot``).
OPEN, CLOSE = "snapshot-window-open", "snapshot-window-close"
#: the signal types that act on the incremental snapshot (``log`` only logs)
ACTIONS = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot")

#: The incremental snapshot: ``signal`` (id of the execute-snapshot signal), ``tables`` (left, the current one
#: first), ``key`` (JSON of the last key read of the current table, "" before its first), optionally ``paused``
#: and ``filters`` (table -> additional-conditions filter).
State = dict[str, Any]


def state_of(pos: dict[str, Any]) -> State | None:
    """The incremental snapshot of an offset position (None when none is running)."""
    return json.loads(pos["incremental"]) if pos.get("incremental") else None


def state_text(state: State) -> str:
    """The offset's ``incremental`` entry: canonical JSON."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


def fold(state: State | None, signals: Sequence[dict[str, Any]], layout: Layout, *, name: str,
         quiet: bool = False) -> State | None:
    """The incremental snapshot after ``signals`` (in commit order), Debezium's signal actions:
    execute-snapshot adds tables; stop-snapshot removes the listed tables, or stops the whole snapshot;
    pause-snapshot/resume-snapshot stop and restart the writing of chunks; log logs its message; a high
    watermark the state accepts (:func:`accepts`) moves the last key (or finishes its table). Bad
    signals are logged and skipped. ``quiet``: log at DEBUG and leave out the log signal's message (the
    same signals are folded again with ``quiet=False`` once per batch, by the driver when it sets a batch's end).
    Pure: the executor folds the same rows to decide which chunks to emit."""
    say = log.debug if quiet else log.warning
    tell = log.debug if quiet else log.info
    for sig in signals:
        kind, raw, sid = (sig.get("type") or "").strip(), sig.get("data") or "", sig.get("id")
        if kind == OPEN:
            continue
        if kind == CLOSE:
            close = json.loads(raw)
            if accepts(state, close):
                assert state is not None
                if close["done"]:
                    state = with_tables(state, state["tables"][1:], "")
                else:
                    state = {**state, "key": close["last"]}
                if not state["tables"]:
                    tell("%s: incremental snapshot %s finished", name, state["signal"])
                    state = None
            continue
        if kind == "log":
            if not quiet:
                _log_signal(sig, raw, name)
            continue
        if kind not in ACTIONS:
            say("%s: signal %s of type %r ignored: supported types are %s", name, sid, kind,
                ", ".join(ACTIONS + ("log",)))
            continue
        data, problem = signal_data(raw)
        if problem:
            say("%s: signal %s (%s) ignored: %s (data: %s)", name, sid, kind, problem, raw[:200])
            continue
        if kind == "execute-snapshot":
            tables, filters, problem = snapshot_request(data, layout)
            if problem:
                say("%s: signal %s ignored: %s (data: %s)", name, sid, problem, raw[:200])
                continue
            base = state or {"signal": sid or "", "tables": [], "key": ""}
            added = [t for t in tables if t not in base["tables"]]
            filters = {**base.get("filters", {}), **{t: f for t, f in filters.items() if t in added}}
            state = with_tables({**base, "filters": filters}, base["tables"] + added, base["key"])
            tell("%s: signal %s: incremental snapshot of %s%s", name, sid, ", ".join(tables),
                 " (paused: it starts on resume-snapshot)" if state.get("paused") else "")
        elif state is None:
            tell("%s: signal %s (%s) ignored: no incremental snapshot is running", name, sid, kind)
        elif kind == "stop-snapshot":
            state = _stop(state, data, layout, sid, tell, say, name)
        elif kind == "pause-snapshot":
            if not state.get("paused"):
                tell("%s: signal %s: incremental snapshot %s paused after key %s of %s", name, sid,
                     state["signal"], state["key"] or "(start)", state["tables"][0])
            state = {**state, "paused": True}
        elif state.get("paused"):  # resume-snapshot
            tell("%s: signal %s: incremental snapshot %s resumed", name, sid, state["signal"])
            state = {k: v for k, v in state.items() if k != "paused"}
        else:
            tell("%s: signal %s (resume-snapshot) ignored: the incremental snapshot is not paused", name,
                 sid)
    return state


def accepts(state: dict[str, Any] | None, close: dict[str, Any]) -> bool:
    """Whether a high watermark's chunk belongs to the running snapshot: the table it is at, the key it
    stands after, the snapshot that wrote it (absent in watermarks of older versions). A chunk the state
    does not accept (its table was stopped meanwhile, or a stale chunk) is neither counted nor emitted."""
    return (state is not None and bool(state["tables"]) and state["tables"][0] == close["table"]
            and state["key"] == close["after"] and close.get("snapshot", state["signal"]) == state["signal"])

def signal_data(raw: str) -> tuple[dict[str, Any], str | None]:
    """A signal's ``data`` as a JSON object (empty data: ``{}``), and its ``type`` checked: only
    incremental snapshots are supported."""
    if not raw.strip():
        return {}, None
    try:
        d = json.loads(raw)
    except ValueError as e:
        return {}, f"data is not JSON ({e})"
    if not isinstance(d, dict):
        return {}, "data must be a JSON object"
    kind = d.get("type", "incremental")
    if not isinstance(kind, str) or kind.lower() != "incremental":
        return {}, f"snapshot type {kind!r} is not supported (only incremental)"
    return d, None

def collections(names: Any, layout: Layout) -> tuple[list[str], str | None]:
    """Captured tables named by ``data-collections`` (names or regular expressions), in layout order
    per name; or why they are rejected."""
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return [], "data-collections must be a non-empty list of <schema>.<table> names"
    tables = []
    for n in names:
        n = n.strip()
        found = [t for t in layout.tables if t.id == n or fullmatch(n, t.id)]
        if not found:
            return [], f"{n!r} is not a captured table (captured: {', '.join(t.id for t in layout.tables)})"
        tables += [t.id for t in found if t.id not in tables]
    return tables, None

def _stop(state: dict[str, Any], data: dict[str, Any], layout: Layout, sid: Any,
          tell: Callable[..., None], say: Callable[..., None], name: str) -> State | None:
    """stop-snapshot: without data-collections (or an empty list) the whole incremental snapshot stops;
    with them, those tables leave it (the current one at once: its chunk in flight is dropped)."""
    names = data.get("data-collections")
    if not names:
        tell("%s: signal %s: incremental snapshot %s stopped (%s left unread)", name, sid,
             state["signal"], ", ".join(state["tables"]))
        return None
    tables, problem = collections(names, layout)
    if problem:
        say("%s: signal %s (stop-snapshot) ignored: %s", name, sid, problem)
        return state
    absent = [t for t in tables if t not in state["tables"]]
    if absent:
        say("%s: signal %s: %s not part of the running incremental snapshot", name, sid,
            ", ".join(absent))
    left = [t for t in state["tables"] if t not in tables]
    if len(left) == len(state["tables"]):
        return state
    tell("%s: signal %s: %s removed from incremental snapshot %s", name, sid,
         ", ".join(t for t in state["tables"] if t in tables), state["signal"])
    if not left:
        tell("%s: incremental snapshot %s stopped", name, state["signal"])
        return None
    return with_tables(state, left, state["key"] if left[0] == state["tables"][0] else "")

def with_tables(state: dict[str, Any], tables: list[str], key: str) -> dict[str, Any]:
    """``state`` with these tables left and the current one after ``key``; the filters of tables that
    left are dropped (and the entry when none is left, so offsets without filters stay as they were)."""
    out = {**state, "tables": tables, "key": key}
    filters = {t: f for t, f in state.get("filters", {}).items() if t in tables}
    if filters:
        out["filters"] = filters
    else:
        out.pop("filters", None)
    return out

def _log_signal(sig: dict[str, Any], raw: str, name: str) -> None:
    """Debezium's log signal: ``data.message`` at INFO, its first ``{}`` replaced by the signal's
    position (as Debezium fills in the offset)."""
    data, problem = signal_data(raw)
    message = data.get("message") if not problem else None
    if not isinstance(message, str) or not message:
        log.warning("%s: log signal %s ignored: its data has no 'message' (data: %s)", name, sig.get("id"),
                    raw[:200])
        return
    where = json.dumps({k: sig[k] for k in ("lsn", "txId", "ts_usec") if k in sig}, sort_keys=True)
    log.info("%s", message.replace("{}", where, 1))

def snapshot_request(data: dict[str, Any],
                      layout: Layout) -> tuple[list[str], dict[str, str], str | None]:
    """Tables and filters (table -> filter text) of an execute-snapshot signal's data, or the reason it
    is rejected."""
    for unsupported in ("additional-condition", "surrogate-key"):
        if data.get(unsupported):
            return [], {}, (f"{unsupported} is not supported"
                            + (" (use additional-conditions)" if unsupported == "additional-condition" else ""))
    tables, problem = collections(data.get("data-collections"), layout)
    if problem:
        return [], {}, problem
    for tid in tables:
        t = layout.table(*tid.split(".", 1))
        if t is not None and not t.key:
            return [], {}, f"table {t.id} has no primary key (incremental snapshots read chunks by key)"
    filters, problem = _filters(data.get("additional-conditions") or [], tables, layout)
    return (tables, filters, None) if problem is None else ([], {}, problem)

def _filters(conditions: Any, tables: list[str], layout: Layout) -> tuple[dict[str, str], str | None]:
    """``additional-conditions`` (``[{"data-collection": ..., "filter": ...}]``) as table -> filter
    text, each filter checked by :func:`_parse_filter` against its table."""
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        return {}, "additional-conditions must be a list of {\"data-collection\": ..., \"filter\": ...}"
    out: dict[str, str] = {}
    for c in conditions:
        name, text = c.get("data-collection"), c.get("filter")
        if not isinstance(text, str) or not text.strip():
            return {}, f"additional-conditions: the filter of {name!r} must be a non-empty string"
        found, problem = collections([name], layout)
        if problem:
            return {}, f"additional-conditions: {problem}"
        for tid in found:
            if tid not in tables:
                return {}, f"additional-conditions: {tid} is not in data-collections"
            t = layout.table(*tid.split(".", 1))
            assert t is not None
            _, problem = parse_filter(text, t)
            if problem:
                return {}, f"additional-conditions: filter {text!r} of {tid} is not supported: {problem}"
            out[tid] = text
    return out, None


class ChunkWindows:
    """The open incremental-snapshot chunk windows of a batch being read (window id -> (table, keys the
    stream changed inside it; None after a truncate)) and the incremental snapshot state, folded over the
    batch's signal rows from the range's start offset."""

    def __init__(self, state: State | None, layout: Layout, *, name: str):
        self.state = state
        self.layout = layout
        self.name = name
        self.open: dict[str, tuple[str, set[tuple[str, ...]] | None]] = {}

    def watches(self, table_id: str) -> bool:
        """Whether changes of ``table_id`` matter to an open window (their keys are then :meth:`touch`-ed)."""
        return any(table == table_id and seen is not None for table, seen in self.open.values())

    def touch(self, table_id: str, keys: Iterable[tuple[str, ...]]) -> None:
        """Remember the keys (as text) of a change the stream made inside the open windows of ``table_id``."""
        keys = list(keys)
        for table, seen in self.open.values():
            if table == table_id and seen is not None:
                seen.update(keys)

    def truncate(self, table_id: str) -> None:
        """A truncate inside a window touches every key: the window's chunk is dropped."""
        for wid, (table, _) in list(self.open.items()):
            if table == table_id:
                self.open[wid] = (table, None)

    def signal(self, row: dict[str, str | None], where: str) -> tuple[Table, list[str], list[list[Any]]] | None:
        """A signal-table insert (column -> text) at ``where`` (its log position, for messages): folded into
        the state as the driver folds it for the offsets (:func:`fold`); a low watermark opens a window; a
        high watermark the state accepts closes it and gives its table, the chunk's column names and the
        rows to emit: all but those whose key the stream changed inside the window."""
        kind = (row.get("type") or "").strip()
        before = self.state
        self.state = fold(before, [row], self.layout, name=self.name, quiet=True)
        if kind not in (OPEN, CLOSE):
            return None  # no signal row becomes an event
        watermark = json.loads(row.get("data") or "")
        if kind == OPEN:
            self.open[watermark["window"]] = (watermark["table"], set())
            return None
        opened = self.open.pop(watermark["window"], None)
        if not accepts(before, watermark):
            log.debug("%s: incremental snapshot chunk %s of %s dropped: not part of the running snapshot (stopped "
                      "meanwhile)", self.name, watermark["window"], watermark["table"])
            return None
        if opened is None:
            raise ConnectError(f"Incremental snapshot chunk {watermark['window']} of {watermark['table']} ends at "
                               f"{where} but its window did not open in this batch: the batch cannot de-duplicate "
                               f"it (its offsets were not chosen by this connector)")
        t = self.layout.table_by_id(watermark["table"])
        seen = opened[1]
        if t is None or seen is None or not watermark["rows"]:
            return None
        names = watermark["columns"]
        idx = [names.index(c.name) for c in t.key]
        return t, names, [r for r in watermark["rows"] if tuple(r[i] for i in idx) not in seen]
