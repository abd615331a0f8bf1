"""Stopping a process the tests started as a user stops it."""

from __future__ import annotations

import signal
import subprocess


def interrupt(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Ctrl-C (SIGINT, after SIGCONT in case a test paused it): the process stops its queries and exits; killed
    if it has not within ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGINT)
    wait_or_kill(proc, timeout)


def wait_or_kill(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait for a process that was asked to stop; killed if it has not within ``timeout`` seconds."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
