"""``/admin/loggers`` (KIP-495, KIP-976): read and set the worker's Python log levels with Log4j's level names.

``PUT /admin/loggers/{logger}`` sets the logger and every logger below it (as Kafka does) and answers the names
it changed; ``root`` is the root logger. One worker: ``?scope=cluster`` acts as ``worker`` does.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .errors import HttpError
from .routing import Request, Response, Router

__all__ = ["router"]

router = Router()

# Log4j's level names (what Kafka's API speaks) and Python's levels.
_TO_PY = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": 5, "ALL": 1}
_FROM_PY = {v: k for k, v in _TO_PY.items()}
_modified: dict[str, int] = {}
_lock = threading.Lock()


def _level_name(level: int) -> str:
    if level in _FROM_PY:
        return _FROM_PY[level]
    return next((name for name, value in sorted(_TO_PY.items(), key=lambda kv: kv[1]) if value >= level), "ALL")


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == "root" else logging.getLogger(name)


def _entry(name: str, logger: logging.Logger) -> dict[str, Any]:
    return {"level": _level_name(logger.getEffectiveLevel()), "last_modified": _modified.get(name)}


@router.route("GET", "/admin/loggers")
def list_loggers(svc: Any, req: Request) -> Response:
    out = {"root": _entry("root", logging.getLogger())}
    for name, logger in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET:
            out[name] = _entry(name, logger)
    return Response(200, out)


@router.route("GET", "/admin/loggers/{logger}")
def get_logger(svc: Any, req: Request) -> Response:
    name = req.args["logger"]
    if name != "root" and name not in logging.root.manager.loggerDict:
        raise HttpError(404, f"Logger {name} not found.")
    return Response(200, _entry(name, _logger(name)))


@router.route("PUT", "/admin/loggers/{logger}")
def set_logger(svc: Any, req: Request) -> Response:
    name = req.args["logger"]
    body = req.body
    if not isinstance(body, dict) or body.get("level") is None:
        raise HttpError(400, "Desired 'level' parameter was not specified in request.")
    level = str(body["level"]).strip().upper()
    if level not in _TO_PY:
        raise HttpError(400, f"Invalid log level '{body['level']}'.")
    now = int(time.time() * 1000)
    with _lock:
        changed = [name]
        if name == "root":
            changed += [n for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)]
        else:
            changed += [n for n, lg in logging.root.manager.loggerDict.items()
                        if isinstance(lg, logging.Logger) and n.startswith(name + ".")]
        for n in changed:
            _logger(n).setLevel(_TO_PY[level])
            _modified[n] = now
    return Response(200, sorted(changed))
