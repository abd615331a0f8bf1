"""CPU seconds (user + system) of a command and of every process it starts, orphans included.

``python bench/cpu_of.py -- python -m pytest tests/runtime/test_standalone_restart.py -q``

``/usr/bin/time`` counts only children their parents waited for: a test that kill -9s a ``kconnect`` worker
orphans its Spark JVM, whose CPU is then lost. Here this process is a child subreaper (Linux ``prctl``), so
orphans are re-parented to it and reaped, and ``RUSAGE_CHILDREN`` holds the whole tree's CPU. It waits at most
``--linger`` seconds for orphans once the command has exited, then kills those left (their CPU is then counted
too)."""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--linger", type=float, default=30.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    t0 = time.monotonic()
    rc = subprocess.call(command)
    wall = time.monotonic() - t0
    deadline = time.monotonic() + a.linger
    while True:  # reap the orphans re-parented to us
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if time.monotonic() > deadline:
                _kill_children()
                deadline = float("inf")
            time.sleep(0.2)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"cpu_of: user {ru.ru_utime:.1f} s sys {ru.ru_stime:.1f} s total {ru.ru_utime + ru.ru_stime:.1f} s, "
          f"wall {wall:.1f} s, load {os.getloadavg()[0]:.2f} (1 min) rc {rc}", file=sys.stderr)
    return rc


def _kill_children() -> None:
    """SIGKILL the processes still re-parented to us (by their parent id in /proc)."""
    me = str(os.getpid())
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2:].split()[1] == me:
                os.kill(int(d), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
