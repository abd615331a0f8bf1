"""The service layer's errors, each one HTTP status (mapped in one place: :mod:`spark_connect_bridge.rest.errors`)."""

from __future__ import annotations

from ..errors import ConnectError

__all__ = ["NotFoundError", "AlreadyExistsError", "ConflictError", "BadRequestError", "ForbiddenError"]


class NotFoundError(ConnectError):
    """Unknown connector, task or plugin (HTTP 404)."""


class AlreadyExistsError(ConnectError):
    """A connector with that name exists (HTTP 409)."""


class ConflictError(ConnectError):
    """The request cannot be completed now (HTTP 409)."""


class BadRequestError(ConnectError):
    """An invalid request (HTTP 400)."""


class ForbiddenError(ConnectError):
    """Disabled by the worker config (HTTP 403)."""
