"""Retries with Kafka Connect's backoff for retriable system errors (``errors.retry.timeout``,
``errors.retry.delay.max.ms``).

Kafka's ``RetryWithToleranceOperator`` starts at 300 ms and doubles up to the cap; a timeout of 0 disables
retries and -1 retries forever. Only errors a classifier calls retriable (connection refused or reset, timeouts,
deadlocks, serialization failures) are retried; anything else propagates at once. When the time is up the last
error is raised as :class:`~spark_connect_bridge.errors.RetriableError` naming the operation.

>>> retry_call(lambda: 42, is_retriable=lambda e: False, timeout_ms=0, max_delay_ms=1000, what="ping")
42
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from ..errors import RetriableError

__all__ = ["retry_call", "is_transient_os_error", "INITIAL_DELAY_MS", "retries_so_far", "count_retry"]

log = logging.getLogger(__name__)

INITIAL_DELAY_MS = 300
_retries = 0  # in this process; the kconnect writers report the difference per micro-batch


def retries_so_far() -> int:
    """How many retries :func:`retry_call` made in this process (for per-batch counts)."""
    return _retries


def count_retry() -> None:
    """Count one retry made by a retry loop of its own (a connector's connection attempts)."""
    global _retries
    _retries += 1


def is_transient_os_error(e: BaseException) -> bool:
    """Connection refused/reset/aborted, timeouts and unreachable hosts: worth retrying for any client."""
    return isinstance(e, (ConnectionError, TimeoutError, socket.timeout)) or (
        isinstance(e, OSError) and e.errno in (104, 110, 111, 113))


def retry_call(fn: Callable[[], Any], *, is_retriable: Callable[[BaseException], bool], timeout_ms: int,
               max_delay_ms: int, what: str, describe: Callable[[BaseException], str] = lambda e: str(e),
               on_retry: Callable[[int, BaseException], None] | None = None,
               least_timeout_ms: Callable[[BaseException], int] | None = None) -> Any:
    """Call ``fn``; retry retriable failures with exponential backoff (300 ms doubling, capped at
    ``max_delay_ms``) until ``timeout_ms`` has passed (-1: forever; 0: no retry).

    ``describe`` renders an error for messages (strip secrets there); ``on_retry(attempt, error)`` is told of
    each retry (for counters); ``least_timeout_ms(error)`` is the least time to keep retrying that error
    whatever ``timeout_ms`` says (a resource a crashed client's session still holds for a while).
    """
    start = time.monotonic()
    delay = INITIAL_DELAY_MS / 1000.0
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as e:
            if not is_retriable(e):
                raise
            attempt += 1
            limit_ms = timeout_ms if timeout_ms < 0 or least_timeout_ms is None else \
                max(timeout_ms, least_timeout_ms(e))
            if limit_ms >= 0 and time.monotonic() - start + delay > limit_ms / 1000.0:
                raise RetriableError(f"{what} failed after {attempt} attempt(s): {type(e).__name__}: "
                                     f"{describe(e)}") from e
            count_retry()
            if on_retry is not None:
                on_retry(attempt, e)
            log.warning("%s failed (%s: %s); retry %d in %.2f s", what, type(e).__name__, describe(e), attempt, delay)
            time.sleep(delay)
            delay = min(delay * 2, max_delay_ms / 1000.0)
