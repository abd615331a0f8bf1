"""Run a worker: the service, its REST API, connectors from files, and the live status table.

``kconnect standalone worker.properties connector1.properties [connector2.json ...]`` and ``kconnect worker
worker.properties`` are thin wrappers around :class:`RunningWorker`; notebooks and tests use it directly:

>>> w = RunningWorker.start({"offset.storage.dir": "/tmp/w", "topics.dir": "/tmp/topics",
...                          "listeners": "http://127.0.0.1:0"}, spark=spark)           # doctest: +SKIP
>>> w.url                                                                                # doctest: +SKIP
'http://127.0.0.1:40123'
>>> w.close()                                                                            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..config import load_config_file
from ..errors import ConfigError, ConfigProblem, ConnectError, headline
from ..rest import RestServer
from .errors import NotFoundError
from .service import ConnectService
from .worker_config import WorkerConfig, basic_auth_users, load_worker_config, parse_worker_config

__all__ = ["RunningWorker", "apply_connector_file", "status_lines", "status_rows", "status_table"]

log = logging.getLogger(__name__)


class RunningWorker:
    """A started :class:`ConnectService` plus its :class:`~spark_connect_bridge.rest.RestServer`."""

    def __init__(self, service: ConnectService, server: Any):
        self.service, self.server = service, server

    @classmethod
    def start(cls, config: WorkerConfig | Mapping[str, Any] | str, *, spark: Any = None,
              service_class: type[ConnectService] = ConnectService) -> RunningWorker:
        """Start the REST API first (so clients can poll ``/health`` while Spark starts), then the worker
        (``service_class``: a group worker's service, see :mod:`spark_connect_bridge.runtime.group`)."""

        if isinstance(config, str):
            config = load_worker_config(config)
        elif not isinstance(config, WorkerConfig):
            config = parse_worker_config(config)
        service = service_class(config, spark=spark)
        server = RestServer(service, users=basic_auth_users(config)).start()
        service.worker_id = f"{config.host}:{server.port}"
        service.start()
        return cls(service, server)

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        """Stop the REST API and every query; stored target states are kept."""
        self.server.stop()
        self.service.shutdown()


def apply_connector_file(service: ConnectService, path: str) -> str:
    """Create the connector of a config file, or update it when its stored config differs (Kafka standalone
    re-submits its connector files on every start). A stored target state (paused, stopped) is kept."""
    req = load_config_file(path)
    name = req.get("name")
    if not name:
        raise ConfigError([ConfigProblem("name", f"{path}: a connector config needs a 'name'")])
    if name in service.list_connectors():
        if service.raw_config(name) != dict(req):
            service.put_config(name, dict(req))
            log.info("Connector %s: config updated from %s", name, path)
    else:
        service.create(req, initial_state=req.initial_state)
    return name


def status_rows(service: ConnectService) -> list[dict[str, Any]]:
    """One row per connector: the figures of the live status table."""
    rows = []
    for name in service.list_connectors():
        try:
            st = service.status(name)
        except NotFoundError:  # deleted meanwhile
            continue
        m = st["metrics"]
        rows.append({"connector": name, "type": st["type"], "state": st["connector"]["state"],
                     "tasks": len(st["tasks"]), "in": m["records_in_per_sec"], "out": m["records_out_per_sec"],
                     "batch_ms": m["batch_duration_ms"], "lag": m["lag"], "dead_lettered": m["dead_lettered"],
                     "total_in": m["records_in_total"], "total_out": m["records_out_total"],
                     "batches": m["batches"], "trace": st["connector"].get("trace")})
    return rows


def status_lines(service: ConnectService, seen: dict[str, dict[str, Any]]) -> list[str]:
    """Lines for what changed since ``seen`` (updated): a connector's new state (a failure with its message, not its
    stack trace), its new batches with their records, a connector deleted. What the worker prints when stdout is
    not a terminal (a log file, ``docker logs``, systemd), where the live table cannot be drawn."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    lines, rows = [], {r["connector"]: r for r in status_rows(service)}
    for name, r in rows.items():
        before = seen.get(name)
        if before is None or before["state"] != r["state"]:
            why = ""
            if r["state"] == "FAILED" and r["trace"]:
                why = f": {headline(r['trace']) or r['trace'].strip().splitlines()[0]}"
            lines.append(f"{stamp} connector {name} ({r['type']}, {r['tasks']} tasks): {r['state']}{why}")
        if r["batches"] > (before["batches"] if before else 0) and r["total_in"] != (before or {}).get("total_in"):
            new_in = r["total_in"] - (before["total_in"] if before else 0)
            done = r["batches"] - (before["batches"] if before else 0)
            lines.append(f"{stamp} connector {name}: {done} batch{'es' if done > 1 else ''}, {new_in:,} records in "
                         f"({r['total_in']:,} in, {r['total_out']:,} out in all"
                         + (f", lag {r['lag']:,}" if r["lag"] is not None else "") + ")")
    lines += [f"{stamp} connector {name}: deleted" for name in seen if name not in rows]
    seen.clear()
    seen.update(rows)
    return lines


_STYLES = {"RUNNING": "green", "FAILED": "bold red", "PAUSED": "yellow", "STOPPED": "dim", "RESTARTING": "cyan",
           "UNASSIGNED": "dim"}


#: The live table's columns, and the order in which a terminal too narrow for all of them drops them (the name,
#: state and records in are always shown, whole).
_COLUMNS = (("connector", "left"), ("type", "left"), ("state", "left"), ("tasks", "right"), ("records/s in", "right"),
            ("records/s out", "right"), ("batch ms", "right"), ("lag", "right"), ("dead-lettered", "right"),
            ("records in", "right"))
_DROPPED_FIRST = ("dead-lettered", "batch ms", "records/s out", "tasks", "type", "lag", "records/s in")


def status_table(service: ConnectService, url: str = "", width: int | None = None) -> Any:
    """A rich Table of :func:`status_rows`, as wide as ``width`` (the terminal's; default: no limit). Nothing is
    cut: where the columns do not fit whole, the least needed ones are left out, and the caption says so."""
    from rich.table import Table

    rows = status_rows(service)
    dash = "-"
    cells = [{"connector": r["connector"], "type": r["type"], "state": r["state"], "tasks": str(r["tasks"]),
              "records/s in": f"{r['in']:,.0f}", "records/s out": f"{r['out']:,.0f}",
              "batch ms": dash if r["batch_ms"] is None else f"{r['batch_ms']:,}",
              "lag": dash if r["lag"] is None else f"{r['lag']:,}",
              "dead-lettered": dash if r["dead_lettered"] is None else f"{r['dead_lettered']:,}",
              "records in": f"{r['total_in']:,}"} for r in rows]

    def need(col: str, header_lines: int) -> int:  # a value is never cut; a header takes one line or one per word
        return max([len(col) if header_lines == 1 else max(len(w) for w in col.split()), *(len(c[col]) for c in cells)])

    def fits(columns: list[str], header_lines: int) -> bool:
        return width is None or sum(need(c, header_lines) + 3 for c in columns) + 1 <= width

    shown = [col for col, _ in _COLUMNS]
    for col in _DROPPED_FIRST:
        if fits(shown, 2):
            break
        shown.remove(col)
    header_lines = 1 if fits(shown, 1) else 2
    t = Table(title=f"kconnect worker {url}  ({time.strftime('%H:%M:%S')})", title_justify="left")
    for col, just in _COLUMNS:
        if col in shown:
            t.add_column(col if header_lines == 1 else col.replace(" ", "\n"), justify=just,  # type: ignore[arg-type]
                         min_width=need(col, header_lines), no_wrap=True)
    captions = [] if service.ready else ["starting Spark ..."]
    if len(shown) < len(_COLUMNS):
        captions.append(f"{len(_COLUMNS) - len(shown)} columns left out to fit the terminal: widen it, or see "
                        f"GET /connectors?expand=status")
    if captions:
        t.caption = "; ".join(captions)
    for c in cells:
        t.add_row(*(f"[{_STYLES.get(c['state'], '')}]{c['state']}[/]" if col == "state" else c[col]
                    for col in shown))
    return t


#: How long a worker whose Spark session is gone keeps answering (every connector FAILED with the cause, /health
#: 503) before it exits, so that clients and monitors read why; a supervisor (systemd, Kubernetes) then restarts it,
#: as it restarts a Kafka Connect worker that died. Each connector resumes from its checkpoint.
SPARK_LOST_EXIT_S = 10.0


def _spark_lost_long_enough(worker: RunningWorker, since: list[float]) -> bool:
    if worker.service.worker.spark_lost is None:
        return False
    if not since:
        since.append(time.monotonic())
        print(f"error: {worker.service.worker.spark_lost}; exiting in {SPARK_LOST_EXIT_S:g} s", flush=True)
    return time.monotonic() - since[0] >= SPARK_LOST_EXIT_S


def watch(worker: RunningWorker, *, live: bool = True, interval: float = 1.0) -> bool:
    """Show the live status table until interrupted (Ctrl-C) or the process is terminated; returns True when the
    worker's Spark session is gone (after :data:`SPARK_LOST_EXIT_S`)."""

    def _first(signum: int, frame: Any) -> None:
        _second_signal_stops_now()  # from the first signal on: one more, however soon, ends the process at once
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, _first)
        signal.signal(signal.SIGTERM, _first)
    lost: list[float] = []
    if live:
        from rich.console import Console
        from rich.live import Live

        console = Console()  # as wide as the terminal, read again at each refresh (a resized window)
        with Live(status_table(worker.service, worker.url, console.width), console=console,
                  refresh_per_second=2) as lv:
            while not _spark_lost_long_enough(worker, lost):
                time.sleep(interval)
                lv.update(status_table(worker.service, worker.url, console.width))
    else:
        seen: dict[str, dict[str, Any]] = {}
        while not _spark_lost_long_enough(worker, lost):
            if worker.service.ready:
                for line in status_lines(worker.service, seen):
                    print(line, flush=True)
            time.sleep(interval)
    return True


def run(worker_properties: str, connector_files: Sequence[str] = (), *, live: bool = True,
        service_class: type[ConnectService] = ConnectService) -> int:
    """``kconnect standalone``: exit codes as connect-standalone (2 startup failure, 3 connector creation), and 1
    when the worker's Spark session is gone (see :data:`SPARK_LOST_EXIT_S`)."""

    try:
        config = load_worker_config(worker_properties)
    except (ConnectError, OSError) as e:
        print(f"error: {e}", flush=True)
        return 2
    if config.group_id and service_class is ConnectService:
        log.warning("worker config: group.id and the group keys have no effect on a standalone worker: run "
                    "`kconnect distributed %s` to join group %s", worker_properties, config.group_id)
    try:
        worker = RunningWorker.start(config, service_class=service_class)
    except OSError as e:
        print(f"error: cannot serve the REST API on {config.host}:{config.port}: {e}", flush=True)
        return 2
    except ConnectError as e:  # a group worker that cannot reach its group store
        print(f"error: {e}", flush=True)
        return 2
    print(f"kconnect worker: REST API on {worker.url}, state in {config.state_dir}, topics in {config.topics_dir}",
          flush=True)
    try:
        for path in connector_files:
            try:
                apply_connector_file(worker.service, path)
            except ConnectError as e:
                print(f"error: connector {path}: {e}", flush=True)
                worker.close()
                return 3
        if watch(worker, live=live and os.isatty(1)):
            worker.close()  # the REST API; the worker stops no query (nothing runs in a Spark that is gone)
            return 1
    except KeyboardInterrupt:
        _second_signal_stops_now()  # before the message: a second Ctrl-C right after it must find the handler
        print("stopping ... (Ctrl-C again stops now)", flush=True)
    _second_signal_stops_now()
    worker.close()
    return 0


def _second_signal_stops_now() -> None:
    """While the worker stops its queries and leaves its group, a second Ctrl-C (or SIGTERM) ends the process at
    once, as ``kill -9`` would: each query resumes from its checkpoint, a group's lease runs out. (Raised as
    ``KeyboardInterrupt`` inside ``close()`` instead, it would leave the worker's threads running on: a process
    that keeps its connectors and never exits.)"""

    def _now(signum: int, frame: Any) -> None:
        # No logging.shutdown(): it takes every handler's lock, which a thread stopped mid-write may hold; the
        # handlers flush after each record anyway.
        print("stopping now: queries not stopped cleanly, each resumes from its checkpoint", flush=True)
        os._exit(128 + signum)

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, _now)
        signal.signal(signal.SIGTERM, _now)
