"""Polling until something holds: a deadline for failing, never a timed assertion."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

#: what a poll may raise while the thing waited for is not there yet (a server still starting, a file half written)
NOT_YET = (requests.RequestException, OSError, ValueError, KeyError)


def until(predicate: Callable[[], Any], *, what: str = "the condition", timeout: float = 120.0, interval: float = 0.3,
          explain: Callable[[], str] | None = None) -> Any:
    """Poll ``predicate`` until it returns a truthy value and return it; fail with the last value or error seen
    (and ``explain()``). An exception is never taken for success."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = predicate()
        except NOT_YET as e:
            last = e
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}; last value: {last!r}"
                                 + (f"\n{explain()}" if explain is not None else ""))
        time.sleep(interval)
