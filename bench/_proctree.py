"""CPU seconds of processes from /proc, for the benchmarks: a table of every process and the descendants of
some of them (the Spark JVM, Python workers, psql, a throwaway PostgreSQL server). Wall-clock rates on a
shared machine move with its load; CPU seconds much less."""

from __future__ import annotations

import os
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
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(d)] = ProcStat(int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")], fields[19],
                                 (int(fields[11]) + int(fields[12])) / _TICK,
                                 (int(fields[13]) + int(fields[14])) / _TICK)
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
