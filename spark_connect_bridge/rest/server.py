"""The HTTP server: standard library ``ThreadingHTTPServer``, JSON in and out, optional basic auth.

Binds 127.0.0.1 unless the worker config names another host; ``port`` 0 picks a free port (see :attr:`url`).
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import connectors, plugins, root
from .errors import HttpError, error_body
from .routing import Request, Response

__all__ = ["RestServer"]

log = logging.getLogger(__name__)

ROUTERS = (root.router, connectors.router, plugins.router)


def _dispatch(service: Any, method: str, raw_path: str, body: bytes | None) -> Response:
    parts = urlsplit(raw_path)
    path = parts.path.rstrip("/") or "/"
    for router in ROUTERS:
        handler, args, _ = router.match(method, path)
        if handler is not None:
            break
    else:
        known = any(r.match(method, path)[2] for r in ROUTERS)
        raise HttpError(405 if known else 404, f"HTTP {method} {path} is not supported" if known else
                        f"No such resource: {path}")
    payload = None
    if body:
        try:
            payload = json.loads(body)
        except ValueError as e:
            raise HttpError(400, f"Cannot parse the request body as JSON: {e}") from None
    req = Request(method, path, parse_qs(parts.query), payload, args)
    return handler(service, req)


class _Handler(BaseHTTPRequestHandler):
    server_version = "kconnect"
    protocol_version = "HTTP/1.1"
    service: Any = None
    users: dict[str, str] | None = None

    def _authorized(self) -> bool:
        if not self.users:
            return True
        header = self.headers.get("Authorization", "")
        if not header.lower().startswith("basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers: dict[str, str] = {}
        if not self._authorized():
            status, payload = 401, {"error_code": 401, "message": "User cannot access the resource."}
            headers["WWW-Authenticate"] = 'Basic realm="kconnect"'
        else:
            try:
                resp = _dispatch(self.service, method, self.path, body)
                status, payload, headers = resp.status, resp.body, dict(resp.headers)
            except Exception as e:  # every failure becomes Kafka's error body
                status, payload = error_body(e)
        data = b"" if payload is None and status in (202, 204) else json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and method != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        # The request line only (never headers: they may carry credentials).
        log.debug("%s %s", self.address_string(), format % args)


class RestServer:
    """Serve ``service`` (a :class:`~spark_connect_bridge.runtime.service.ConnectService`) over HTTP."""

    def __init__(self, service: Any, host: str | None = None, port: int | None = None,
                 users: dict[str, str] | None = None):
        self.service = service
        handler = type("Handler", (_Handler,), {"service": service, "users": users})
        self._httpd = ThreadingHTTPServer((host or service.config.host,
                                           service.config.port if port is None else port), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self._httpd.server_address[0]
        return f"http://{host}:{self.port}"

    def start(self) -> "RestServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kconnect-rest", daemon=True)
        self._thread.start()
        log.info("REST API listening on %s", self.url)
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
