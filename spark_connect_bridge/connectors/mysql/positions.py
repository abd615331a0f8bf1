"""Offsets of the binlog connectors and where a micro-batch ends.

Source partition ``{"server": <topic.prefix>}``. A streaming position is Debezium's MySQL offset: ``{"file",
"pos", "row", "event", "gtids", "ts_sec"}``; here ``file``:``pos`` is always a transaction boundary (``row`` and
``event`` are 0: nothing of a transaction is left to skip), ``gtids`` the GTID set executed up to it (MariaDB:
``BINLOG_GTID_POS``), ``ts_sec`` when the driver chose it. A snapshot position adds ``"snapshot": true``,
``snapshot_table`` (``db.table`` next to read) and ``snapshot_key`` (JSON of the last primary key read).

**A micro-batch** is every transaction between two such boundaries. :func:`stream_end` picks the end without
reading the binlog itself: the server lists the events (``SHOW BINLOG EVENTS``, decoded there; only a listing
travels) and the end is the start of the first transaction (a GTID event) after the ``max.records.per.trigger``-th
row event of a captured table when the first 1,000 events after the start hold that many; otherwise after
``max.records.per.trigger`` row events' worth of events, the events per row event measured on those 1,000. A rows
event may hold many rows (a multi-row INSERT), so the bound is approximate; a batch holds at least one
transaction and never passes the binlog's end or the Trigger.AvailableNow target. A batch never spans binlog
files: the end of a file is ``{"file": <next file>, "pos": 4}``.

>>> stream_end(session, settings, {"file": "mysql-bin.000001", "pos": 4, ...}, 10_000, None, layout)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from ..cdc.layout import Layout
from .binlog import BinlogGone, file_number
from .config import Settings
from .session import BinlogPosition, Session

__all__ = ["stream_position", "stream_end", "check_available", "SAMPLE_EVENTS"]

log = logging.getLogger(__name__)

#: events listed after a batch's start to measure events per row event (and to see whether it holds any)
SAMPLE_EVENTS = 1_000
#: events of other tables passed over before a batch is cut anyway (so that finding an end stays cheap)
MAX_SKIPPED_EVENTS = 200_000
_WINDOW = 2_000
_ROW_EVENTS = ("Write_rows", "Update_rows", "Delete_rows", "Write_rows_v1", "Update_rows_v1", "Delete_rows_v1")
_GROUP_STARTS = ("Gtid", "Anonymous_Gtid")


def stream_position(at: BinlogPosition) -> dict[str, Any]:
    return {"file": at.file, "pos": at.pos, "row": 0, "event": 0, "gtids": at.gtids, "ts_sec": int(time.time())}


def check_available(session: Session, settings: Settings, pos: dict[str, Any]) -> list[tuple[str, int]]:
    """The server's binlog files; :class:`BinlogGone` when ``pos``'s file was purged."""
    files = session.binlog_files()
    if pos["file"] not in {f for f, _ in files}:
        oldest = files[0][0] if files else "none"
        raise BinlogGone(f"{settings.name}: binlog file {pos['file']} (this query's position {pos['file']}:"
                         f"{pos['pos']}) is no longer on the server (oldest: {oldest}): the changes after it are "
                         f"lost. Start a new query (new checkpoint) to take a new snapshot, or use "
                         f"snapshot.mode=when_needed")
    return files


def _position(session: Session, file: str, pos: int) -> dict[str, Any]:
    return stream_position(BinlogPosition(file, pos, session.gtids_at(file, pos)))


def stream_end(session: Session, settings: Settings, pos: dict[str, Any], max_records: int | None,
               until: dict[str, Any] | None, layout: Layout, heartbeat_due: bool) -> dict[str, Any]:
    """The end of the next batch after ``pos`` (``pos`` itself when there is nothing to read yet)."""
    files = check_available(session, settings, pos)
    head = session.binlog_position()
    target = (file_number(head.file), head.pos)
    if until is not None and "snapshot" not in until:
        target = min(target, (file_number(until["file"]), int(until["pos"])))
    here = (file_number(pos["file"]), int(pos["pos"]))
    if here >= target:
        return pos
    if max_records is None:  # everything up to the target, over as many files as it takes
        end = until if until is not None and (file_number(until["file"]), int(until["pos"])) == target else None
        return dict(end) if end is not None else stream_position(head)
    names = [f for f, _ in files]
    index = names.index(pos["file"])
    older = here[0] < target[0]
    if older:  # an older file: the batch ends at its end at the latest
        file_end = dict(files)[pos["file"]]
        nxt = names[index + 1] if index + 1 < len(names) else head.file
        last: dict[str, Any] = {"file": nxt, "pos": 4}
    else:
        file_end = target[1]
        last = {"file": pos["file"], "pos": target[1]}
    if int(pos["pos"]) >= file_end:
        return _position(session, last["file"], last["pos"])
    captured = {t.id.lower() for t in layout.tables}
    if settings.signal_table is not None:  # signals are read from the binlog like captured changes
        captured.add(".".join(settings.signal_table).lower())
    start, skipped = int(pos["pos"]), 0
    while True:  # the first events holding captured rows (traffic of other tables is passed over here)
        sample = [e for e in session.binlog_events(pos["file"], start, skipped, SAMPLE_EVENTS) if e[0] < file_end]
        rows = _captured_row_events(sample, captured)
        whole = len(sample) < SAMPLE_EVENTS or sample[-1][2] >= file_end
        if rows or whole or skipped >= MAX_SKIPPED_EVENTS:
            break
        skipped += len(sample)
    if not rows:
        if not whole:  # a long run of other tables' changes: a batch over it, ending at a transaction start
            starts = [e[0] for e in sample if e[1] in _GROUP_STARTS and e[0] > start]
            return _position(session, pos["file"], starts[-1]) if starts else pos
        # nothing of the captured tables up to the file's end or the target: move on to the next file, or over
        # this range when a heartbeat is due
        return _position(session, last["file"], last["pos"]) if older or heartbeat_due else pos
    cut = _start_after_rows(sample, captured, max_records, start)
    if cut is not None:  # the sample holds the batch's rows: end it exactly, however the rest of the sample looks
        return _position(session, pos["file"], cut)
    skip = skipped + max(1, int(max_records * len(sample) / rows))
    listed = skipped + len(sample)  # events [0, listed) after the start are in hand
    if skip < listed:
        window, exhausted = sample[skip - skipped:], whole
    else:
        window = session.binlog_events(pos["file"], start, skip, _WINDOW)
        listed, exhausted = skip + len(window), len(window) < _WINDOW
    while True:  # the batch ends where the first transaction after the skipped events starts
        for event_pos, kind, _, _ in window:
            if event_pos >= file_end:
                return _position(session, last["file"], last["pos"])
            if kind in _GROUP_STARTS and event_pos > start:
                return _position(session, pos["file"], event_pos)
        if exhausted:
            return _position(session, last["file"], last["pos"])
        window = session.binlog_events(pos["file"], start, listed, _WINDOW)
        listed, exhausted = listed + len(window), len(window) < _WINDOW


def _captured_rows(events: list[tuple[int, str, int, str]], captured: set[str]) -> Iterator[bool]:
    """For each listed event, whether it is a row event of a captured table (each follows its table's table map)."""
    current = False
    for event in events:
        if event[1] == "Table_map":
            current = _captures(event, captured)
        yield current and event[1] in _ROW_EVENTS


def _captured_row_events(events: list[tuple[int, str, int, str]], captured: set[str]) -> int:
    """Row events of captured tables in a listing."""
    return sum(_captured_rows(events, captured))


def _start_after_rows(events: list[tuple[int, str, int, str]], captured: set[str], rows: int,
                      start: int) -> int | None:
    """Where the first transaction after the ``rows``-th row event of a captured table in a listing starts (None
    when the listing holds fewer such events, or none starts after them)."""
    count = 0
    for event, is_row in zip(events, _captured_rows(events, captured)):
        if count >= rows and event[1] in _GROUP_STARTS and event[0] > start:
            return event[0]
        count += is_row
    return None


def _captures(event: tuple[int, str, int, str], captured: set[str]) -> bool:
    """Whether a listed event is the table map of a captured table (``table_id: 35 (shop.orders)``)."""
    if event[1] != "Table_map":
        return False
    info = event[3]
    name = info[info.find("(") + 1:info.rfind(")")].replace("`", "").lower()
    return name in captured

