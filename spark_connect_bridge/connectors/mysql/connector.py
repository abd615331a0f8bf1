"""Debezium's MySQL and MariaDB connectors (``io.debezium.connector.mysql.MySqlConnector``,
``io.debezium.connector.mariadb.MariaDbConnector``): the SPI methods, over the parts of this package.

One connector, one binlog reader, many tables; the records are Debezium's change events (:mod:`.events`), the
offsets Debezium's binlog positions (:mod:`.positions`). A micro-batch is a range of whole transactions that
replays exactly (the binlog keeps it; nothing upstream moves when it is read), so :meth:`commit` has nothing to
acknowledge: the position is committed by Spark's checkpoint, after Spark's commit. A binlog purged past the
checkpoint's position fails with a clear error, or takes a new snapshot under ``snapshot.mode=when_needed``.
Debezium runs one task; so does this connector (``tasks.max`` is accepted).

Debezium's signals and incremental snapshots (``signal.data.collection``) run through the shared state machine
(:mod:`..cdc.signals`), with chunks read between binlog watermarks (:mod:`.incremental`); the DDL of the
captured databases becomes Debezium's schema change events (:mod:`.schema_changes`; the tables they describe are
read from the server's catalog, :mod:`.table_changes`, not from a parsed schema history). Not implemented:
transaction metadata topics.

>>> df = (spark.readStream.format("kconnect")                                          # doctest: +SKIP
...       .options(**{"connector.class": "io.debezium.connector.mysql.MySqlConnector",
...                   "database.hostname": "127.0.0.1", "database.port": "3306", "database.user": "debezium",
...                   "database.password": "dbz", "database.server.id": "184054", "topic.prefix": "shop",
...                   "database.include.list": "inventory"})
...       .load())
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from ...version import __version__
from ..base import ReadRange, ReadTask, SourceConnector
from ..cdc.layout import Layout
from ..cdc.signals import state_of
from ..offsets import Offsets, partition_key
from .binlog import BinlogGone, checksum_size, file_number
from .config import CONFIG_DEF, SNAPSHOTTING, Settings
from .events import EventBuilder
from .incremental import IncrementalSnapshots
from .layout import record_type
from .positions import check_available, stream_end, stream_position
from .session import BinlogPosition, Session
from .snapshot import SnapshotReader, snapshot_end
from .stream import StreamReader

__all__ = ["MySqlConnector", "MariaDbConnector"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BinlogRange(ReadRange):
    """A micro-batch of the binlog plus what the executor needs to decode it (no catalog lookups there)."""

    layout: Layout | None = None
    settings: Settings | None = None


class MySqlConnector(SourceConnector):
    """Debezium's MySQL connector over the binlog (ROW format, full row images and metadata)."""

    kafka_class = "io.debezium.connector.mysql.MySqlConnector"
    flavor: ClassVar[str] = "mysql"
    default_max_records_per_trigger = 100_000
    config_def = CONFIG_DEF
    partition_fields: ClassVar[dict[str, type] | None] = {"server": str}

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._settings = Settings.of(config, name=name, flavor=self.flavor)
        self._session: Session | None = None
        self._layout: Layout | None = None
        self._initial: Offsets | None = None
        self._started = False
        self._last_heartbeat = time.monotonic()
        self._incremental: IncrementalSnapshots | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None, "_incremental": None}

    @property
    def _key(self) -> str:
        return partition_key({"server": self._settings.prefix})

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = Session(self._settings)
        return self._session

    @property
    def incremental(self) -> IncrementalSnapshots:
        """The driver's half of incremental snapshots (with a signal table)."""
        if self._incremental is None:
            def signal_rows(start: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
                nothing = Layout(self._settings.prefix, (), (), ())  # only the signal table is decoded
                reader = StreamReader(self.session, nothing, None, checksum_size(self.session))
                return reader.signal_rows(start, end)

            self._incremental = IncrementalSnapshots(self.session, self._settings, signal_rows)
        return self._incremental

    def layout(self) -> Layout:
        """The captured tables and their fields (read once per process)."""
        if self._layout is None:
            self._layout = self.session.layout()
        return self._layout

    # ---------------------------------------------------------------------------------- driver
    def schema(self) -> Any:
        return record_type(self.layout(), self.flavor, self._settings.include_schema_changes)

    def _snapshot_start(self) -> dict[str, Any]:
        at = self.session.snapshot_position()
        pos = stream_position(at)
        tables = [t.id for t in self.layout().tables]
        if not tables:
            return pos
        log.info("%s: snapshot of %d table(s) at binlog position %s:%d", self.name, len(tables), at.file, at.pos)
        return {**pos, "snapshot": True, "snapshot_table": tables[0], "snapshot_key": ""}

    def initial_offsets(self) -> Offsets:
        if self._initial is None:
            self.session.check_binlog()
            if self._settings.signal_table is not None:
                self.incremental.check_table()
            mode = self._settings.snapshot_mode
            if mode in SNAPSHOTTING:
                pos = self._snapshot_start()
            elif mode == "never":  # Debezium: stream from the oldest binlog file the server has
                oldest = self.session.binlog_files()[0][0]
                pos = stream_position(BinlogPosition(oldest, 4, self.session.gtids_at(oldest, 4)))
            else:  # no_data, recovery: from the current position
                pos = stream_position(self.session.binlog_position())
            self._initial = {self._key: pos}
            self._started = True
        return self._initial

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        pos = dict(start.get(self._key) or self.initial_offsets()[self._key])
        pos.pop("chunk", None)  # a chunk belongs to the batch that ended here
        mode = self._settings.snapshot_mode
        if mode == "always" and not self._started:
            self._started = True
            if not pos.get("snapshot"):
                log.info("%s: snapshot.mode=always: taking a new snapshot at query start", self.name)
                return {self._key: self._snapshot_start()}
        self._started = True
        if pos.get("snapshot"):
            end = snapshot_end(self.session, self.layout(), pos, max_records)
            if max_records is not None or mode == "initial_only":
                return {self._key: end}
            pos = end  # everything: the rest of the snapshot and the stream available now, in one range
        elif mode == "initial_only":
            return {self._key: pos}
        now = time.monotonic()
        due = self._settings.heartbeat_ms > 0 and (now - self._last_heartbeat) * 1000 >= self._settings.heartbeat_ms
        try:
            end = stream_end(self.session, self._settings, pos, max_records,
                             (until or {}).get(self._key), self.layout(), due)
        except BinlogGone:
            if mode != "when_needed":
                raise
            log.warning("%s: binlog file %s is gone: snapshot.mode=when_needed takes a new snapshot", self.name,
                        pos["file"])
            return {self._key: self._snapshot_start()}
        if due and end != pos:
            self._last_heartbeat = now
        if self._settings.signal_table is not None and not end.get("snapshot"):
            end = self.incremental.end(pos, end, self.layout(), stream_position)
        return {self._key: end}

    def lag(self, current: Offsets) -> int | None:
        """Binlog bytes between the offset and the server's binlog end (same file; else the files between)."""
        pos = current.get(self._key)
        if not pos:
            return None
        files = self.session.binlog_files()
        behind, counting = 0, False
        for name, size in files:
            if name == pos["file"]:
                counting = True
                behind += max(0, size - int(pos["pos"]))
            elif counting:
                behind += size
        return behind

    def commit(self, end: Offsets) -> None:
        # Nothing upstream to acknowledge: the binlog keeps the range until the server purges it; the position
        # is the checkpoint's. Check that the server still has it, so that a purge is reported early.
        pos = end.get(self._key)
        if pos and not pos.get("snapshot"):
            try:
                check_available(self.session, self._settings, pos)
            except BinlogGone as e:
                log.warning("%s", e)

    def stop(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def plan(self, start: Offsets, end: Offsets) -> list[ReadTask]:
        s, e = start.get(self._key), end.get(self._key)
        if s == e or e is None:
            return []
        return [ReadTask(0, (BinlogRange({"server": self._settings.prefix}, s, e, self.layout(), self._settings),))]

    # ---------------------------------------------------------------------------------- executor
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        layout = getattr(rng, "layout", None) or self.layout()
        settings = getattr(rng, "settings", None) or self._settings
        start = dict(rng.start) if rng.start else self.initial_offsets()[self._key]
        end = dict(rng.end)
        with Session(settings) as session:
            builder = EventBuilder(settings, layout, connector=self.flavor, version=__version__)
            if start.get("snapshot"):
                yield from SnapshotReader(session, layout, builder).read(start, end)
            if end.get("snapshot") or settings.snapshot_mode == "initial_only":
                return
            if (file_number(start["file"]), int(start["pos"])) >= (file_number(end["file"]), int(end["pos"])) \
                    and "chunk" not in end:
                return
            reader = StreamReader(session, layout, builder, checksum_size(session), incremental=state_of(start),
                                  chunk=end.get("chunk"))
            yield from reader.read(start, end)


class MariaDbConnector(MySqlConnector):
    """Debezium's MariaDB connector: the MySQL connector's behaviour, MariaDB's GTIDs and ``source`` name."""

    kafka_class = "io.debezium.connector.mariadb.MariaDbConnector"
    flavor: ClassVar[str] = "mariadb"
