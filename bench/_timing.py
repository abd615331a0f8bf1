"""Wall-time helper shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best(fn: Callable[[], Any], reps: int = 3) -> float:
    """The fastest of ``reps`` runs of ``fn``, in seconds."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
