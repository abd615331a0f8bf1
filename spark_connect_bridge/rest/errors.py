"""Domain errors to HTTP statuses, in one place, with Kafka's error body."""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigError
from ..runtime.errors import AlreadyExistsError, BadRequestError, ConflictError, ForbiddenError, NotFoundError

__all__ = ["HttpError", "status_of", "error_body"]

log = logging.getLogger(__name__)

_STATUS = ((NotFoundError, 404), (AlreadyExistsError, 409), (ConflictError, 409), (BadRequestError, 400),
           (ForbiddenError, 403), (ConfigError, 400))


class HttpError(Exception):
    """A protocol-level error raised by the REST layer itself (bad JSON, unknown path, bad method)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def status_of(e: BaseException) -> int:
    if isinstance(e, HttpError):
        return e.status
    for cls, status in _STATUS:
        if isinstance(e, cls):
            return status
    if isinstance(e, TimeoutError):
        return 500
    return 500


def error_body(e: BaseException) -> tuple[int, dict[str, Any]]:
    """``(status, {"error_code", "message"})`` for an exception raised while serving a request."""
    status = status_of(e)
    if status == 500 and not isinstance(e, HttpError):
        log.error("Unhandled error serving a REST request", exc_info=e)
        message = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    else:
        message = str(e)
    return status, {"error_code": status, "message": message}
