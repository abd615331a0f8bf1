"""CPU seconds of processes from /proc, for the benchmarks: a table of every process and the descendants of
some of them (the Spark JVM, Python workers, psql, a throwaway PostgreSQL server). Wall-clock rates on a
shared machine move with its load; CPU seconds much less."""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def proc_table(*, reaped: bool = False) -> dict[int, tuple[int, str, float]]:
    """``{pid: (ppid, command name, CPU seconds)}`` of every live process; with ``reaped`` the CPU includes
    that of exited children the process waited for (short-lived backends, Python workers)."""
    procs: dict[int, tuple[int, str, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ticks = sum(int(x) for x in fields[11:15 if reaped else 13])
        procs[int(d)] = (int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")], ticks / _TICK)
    return procs


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
