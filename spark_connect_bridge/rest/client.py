"""A small client of a worker's REST API (standard library only), used by the ``kconnect`` CLI.

>>> Client("http://127.0.0.1:8083").call("GET", "/connectors")       # doctest: +SKIP
['orders']
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

from ..errors import ConnectError

__all__ = ["Client", "RestError"]


class RestError(ConnectError):
    """The worker answered with an error body (``status`` and Kafka's ``message``)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Client:
    def __init__(self, url: str, *, user: str | None = None, password: str | None = None, timeout: float = 130):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._auth = None
        if user:
            self._auth = "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """Send one request; returns the decoded JSON body (None for an empty one); raises RestError."""
        query = f"?{urlencode(params, doseq=True)}" if params else ""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path + query, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw)["message"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace") or e.reason
            raise RestError(e.code, message) from None
        except urllib.error.URLError as e:
            raise ConnectError(f"Cannot reach the worker at {self.url}: {e.reason}") from None
        return json.loads(raw) if raw else None
