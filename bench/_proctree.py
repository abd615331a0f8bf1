"""CPU seconds of processes from /proc, for the benchmarks: a table of every process and the descendants of
some of them (the Spark JVM, Python workers, psql, a throwaway PostgreSQL server). Wall-clock rates on a
shared machine move with its load; CPU seconds much less."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

_TICK = os.sysconf("SC_CLK_TCK")


class ProcStat(NamedTuple):
    ppid: int
    name: str
    start: str  # clock ticks after boot: tells a pid Linux reused apart
    cpu: float  # user + system seconds
    children_cpu: float  # that of exited children the process waited for


def proc_stats() -> dict[int, ProcStat]:
    """Every live process's :class:`ProcStat`, from ``/proc/<pid>/stat``."""
    procs: dict[int, ProcStat] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (p := _one_stat(int(d))) is not None:
            procs[int(d)] = p
    return procs


def proc_table(*, reaped: bool = False) -> dict[int, tuple[int, str, float]]:
    """``{pid: (ppid, command name, CPU seconds)}`` of every live process; with ``reaped`` the CPU includes
    that of exited children the process waited for (short-lived backends, Python workers)."""
    return {pid: (p.ppid, p.name, p.cpu + (p.children_cpu if reaped else 0.0)) for pid, p in proc_stats().items()}


def descendants(roots: set[int], procs: dict[int, tuple[int, str, float]]) -> set[int]:
    """``roots`` and every process below them in ``procs``."""
    mine, changed = set(roots), True
    while changed:
        changed = False
        for pid, (ppid, _, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    return mine


def tree_split(roots: set[int]) -> dict[str, float]:
    """CPU seconds the process trees under ``roots`` have used so far, by kind, from one look at ``/proc``: ``jvm``
    (the ``java`` processes' own), ``python`` (every other process, and the children a JVM waited for). Children
    reaped by a process that ignores SIGCHLD are missing (see :class:`TreeSampler`)."""
    stats = proc_stats()
    procs = {pid: (p.ppid, p.name, 0.0) for pid, p in stats.items()}
    out = {"jvm": 0.0, "python": 0.0}
    for pid in descendants(roots, procs):
        if pid in stats:
            p = stats[pid]
            if p.name == "java":
                out["jvm"] += p.cpu
                out["python"] += p.children_cpu
            else:
                out["python"] += p.cpu + p.children_cpu
    return out


_SIGCHLD_BIT = 1 << (17 - 1)  # SIGCHLD is signal 17 on Linux; /proc/<pid>/status SigIgn is a mask of 1 << (n - 1)


def _ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD: the kernel then reaps its children, and their CPU lands in no process's
    children time (pyspark's daemon does this for the workers it forks)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    except OSError:
        pass
    return False


class TreeSampler:
    """CPU seconds of the process trees under ``roots`` since the sampler started, by polling ``/proc``: each
    process's own and reaped-children CPU as last seen, so a process that exits keeps what it used.

    A process whose parent waits for it moves its CPU into the parent's children time when it exits, which is
    counted there (and not again here); one whose parent ignores SIGCHLD (pyspark's daemon and the workers it
    forks) would lose it, so its last-seen figure is kept: at most ``interval`` seconds of its last CPU are
    missed, and a child that lives and dies unseen between two scans (``scan`` seconds) is missed whole. Its own
    polling CPU (it runs in the caller's process, often a root) is subtracted.

    >>> s = TreeSampler({os.getpid()}).start(); ...; used = s.total(); s.stop()   # doctest: +SKIP
    """

    def __init__(self, roots: set[int], interval: float = 0.02, scan: float = 0.2):
        import threading

        self.roots, self.interval, self.scan = set(roots), interval, scan
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._seen: dict[tuple[int, str], _Seen] = {}
        self._own_cpu = 0.0
        self._started_ticks = 0
        self.base = {"jvm": 0.0, "python": 0.0}

    def start(self) -> TreeSampler:
        self.base = tree_split(self.roots)
        with open("/proc/uptime") as f:
            self._started_ticks = int(float(f.read().split()[0]) * _TICK)
        self._poll(full=True, first=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def split(self) -> dict[str, float]:
        """CPU seconds since :meth:`start` by kind: ``jvm`` (the ``java`` processes' own), ``python`` (every other
        process, and the children a JVM waited for: Spark's Python processes)."""
        self._poll(full=True)
        out = {"jvm": 0.0, "python": 0.0}
        with self._lock:
            for e in self._seen.values():
                if e.alive or e.orphaned:
                    own, children = e.own - e.base_own, e.children - e.base_children
                    out["jvm" if e.name == "java" else "python"] += own
                    out["python"] += children
                else:  # its parent's children time took its whole life's CPU, the part before start included
                    out["python"] -= e.base_own + e.base_children
            out["python"] -= self._own_cpu
        return out

    def total(self) -> float:
        """CPU seconds used under ``roots`` since :meth:`start` (after a fresh poll)."""
        return sum(self.split().values())

    def absolute_split(self) -> dict[str, float]:
        """:meth:`split` plus what the trees had used when the sampler started (:func:`tree_split`): comparable with
        another sampler's over the same processes, e.g. one started before some of them existed."""
        now = self.split()
        return {k: now[k] + self.base[k] for k in now}

    def _run(self) -> None:
        import time

        last_scan = 0.0
        while not self._stop.wait(self.interval):
            t0 = time.thread_time()
            now = time.monotonic()
            full = now - last_scan >= self.scan
            if full:
                last_scan = now
            self._poll(full=full)
            with self._lock:
                self._own_cpu += time.thread_time() - t0

    def _poll(self, *, full: bool, first: bool = False) -> None:
        with self._lock:
            if full:
                stats = proc_stats()
                procs = {pid: (p.ppid, p.name, 0.0) for pid, p in stats.items()}
                current = {(pid, stats[pid].start): stats[pid] for pid in descendants(self.roots, procs)
                           if pid in stats}
            else:
                current = {}
                for pid, start in [k for k, e in self._seen.items() if e.alive]:
                    p = _one_stat(pid)
                    if p is not None and p.start == start:
                        current[(pid, start)] = p
            for key, p in current.items():
                e = self._seen.get(key)
                if e is None:
                    before = first or int(p.start) < self._started_ticks
                    self._seen[key] = _Seen(p.name, p.cpu if before else 0.0, p.children_cpu if before else 0.0,
                                            p.cpu, p.children_cpu, _ignores_sigchld(p.ppid))
                else:
                    e.own, e.children = max(e.own, p.cpu), max(e.children, p.children_cpu)
            for key, e in self._seen.items():
                if e.alive and key not in current:  # exited (or its pid was reused)
                    e.alive = False


@dataclass
class _Seen:
    name: str
    base_own: float  # at start (0 for a process born after it)
    base_children: float
    own: float  # as last seen
    children: float
    orphaned: bool  # its parent ignores SIGCHLD: its CPU is lost when it exits, so the last-seen figure counts
    alive: bool = True


def _one_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return ProcStat(int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")], fields[19],
                    (int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK)
