"""A small router: ``@router.route("GET", "/connectors/{name}/status")`` handlers over the service layer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

__all__ = ["Request", "Response", "Router"]


@dataclass
class Request:
    method: str
    path: str
    params: Mapping[str, list[str]] = field(default_factory=dict)
    body: Any = None
    args: dict[str, str] = field(default_factory=dict)

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean query parameter (``?includeTasks=true``)."""
        values = self.params.get(name)
        if not values:
            return default
        return values[-1].strip().lower() == "true"


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Any, Request], Response]


class Router:
    """Routes of one REST resource."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def route(self, method: str, pattern: str) -> Callable[[Handler], Handler]:
        regex = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern.rstrip("/") or "/") + "/?$")

        def deco(fn: Handler) -> Handler:
            self.routes.append((method, regex, fn))
            return fn

        return deco

    def match(self, method: str, path: str) -> tuple[Handler | None, dict[str, str], bool]:
        """``(handler, args, path_known)``: ``path_known`` tells 405 from 404 when no handler matches."""
        known = False
        for m, regex, fn in self.routes:
            hit = regex.match(path)
            if hit:
                known = True
                if m == method:
                    return fn, {k: unquote(v) for k, v in hit.groupdict().items()}, True
        return None, {}, known
