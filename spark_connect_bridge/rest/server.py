"""The HTTP server: standard library ``ThreadingHTTPServer``, JSON in and out, basic auth, TLS.

Binds 127.0.0.1 unless the worker config names another host; ``port`` 0 picks a free port (see :attr:`url`).
Every request passes, in this order, before its body is read: the Host check (DNS rebinding), the Origin check
(cross-site requests), authentication, and the body's framing (``Content-Length`` required, at most
``rest.request.max.bytes``; ``application/json`` only). Handlers then run inside the worker's
:class:`~spark_connect_bridge.runtime.policy.ConnectorPolicy`, and config provider values resolved meanwhile are
kept out of every error message.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..config import HIDDEN
from ..runtime.policy import ConnectorPolicy
from . import admin, connectors, openapi, plugins, root
from .auth import Realm
from .errors import HttpError, error_body
from .routing import Request, Response
from .tls import server_context

__all__ = ["RestServer"]

log = logging.getLogger(__name__)

ROUTERS = (root.router, connectors.router, plugins.router, admin.router, openapi.router)
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_BODY_METHODS = ("POST", "PUT", "PATCH")
_MAX_CONCURRENT = 64
_SOCKET_TIMEOUT = 30.0
_DRAIN_BYTES = 16 * 1024 * 1024


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise HttpError(400, "Cannot parse the request body as JSON: it is nested too deeply") from None
    except ValueError as e:
        raise HttpError(400, f"Cannot parse the request body as JSON: {e}") from None


def _allowed_methods(path: str) -> list[str]:
    return [m for m in _METHODS if any(r.match(m, path)[0] is not None for r in ROUTERS)]


def _dispatch(service: Any, method: str, raw_path: str, body: bytes | None) -> Response:
    parts = urlsplit(raw_path)
    path = parts.path.rstrip("/") or "/"
    for router in ROUTERS:
        handler, args, _ = router.match(method, path)
        if handler is not None:
            break
    else:
        allowed = _allowed_methods(path)
        if allowed:
            raise HttpError(405, f"HTTP {method} {path} is not supported; allowed: {', '.join(allowed)}")
        raise HttpError(404, f"No such resource: {path}")
    payload = _parse_json(body) if body else None
    req = Request(method, path, parse_qs(parts.query), payload, args)
    return handler(service, req)


def _scrub(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret (a resolved config provider value) replaced by ``[hidden]``."""
    if isinstance(value, str):
        for s in sorted(set(secrets), key=len, reverse=True):
            value = value.replace(s, HIDDEN)
        return value
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    return value


def _host_name(header: str) -> str:
    host = header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Settings:
    """What the handler needs from the worker config."""

    def __init__(self, config: Any, scheme: str):
        self.scheme = scheme
        self.max_body = int(config.rest_request_max_bytes) if config is not None else 1024 * 1024
        self.allowed_hosts = config.allowed_host_names if config is not None else None
        self.allowed_origins = config.allowed_origins if config is not None else ()
        self.allowed_methods = config.allowed_methods if config is not None else ("GET", "POST", "HEAD")
        self.policy: ConnectorPolicy = config.policy if config is not None else ConnectorPolicy()


class _Handler(BaseHTTPRequestHandler):
    server_version = "kconnect"
    protocol_version = "HTTP/1.1"
    timeout = _SOCKET_TIMEOUT
    service: Any = None
    realm: Realm | None = None
    settings: _Settings

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()  # here, on the request's thread, not in the accept loop

    # -- answers ------------------------------------------------------------------------------------
    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None, *,
              close: bool = False, head: bool = False) -> None:
        data = b"" if payload is None and status in (202, 204) else json.dumps(payload).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for k, v in self._cors_headers().items():
            self.send_header(k, v)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if data and not head:
            self.wfile.write(data)

    def _fail(self, status: int, message: str, headers: Mapping[str, str] | None = None, *,
              close: bool = False) -> None:
        self._send(status, {"error_code": status, "message": message}, headers, close=close)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (request line over 64 KiB: 414; a header line over 64 KiB or over 100 headers:
        431; a malformed request line: 400): Kafka's JSON body, then close. The request's headers may not have
        been read (or be a previous request's), so no CORS headers; the unread rest of the request is drained
        first so that closing does not reset the connection before the client reads the answer."""
        self.close_connection = True
        text = message or self.responses.get(code, ("Error",))[0]
        data = json.dumps({"error_code": code, "message": text}).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self._drain()
        except OSError:
            pass

    def _drain(self) -> None:
        """Read and drop what the client still sends (at most _DRAIN_BYTES, for at most a second)."""
        self.connection.settimeout(1.0)
        left = _DRAIN_BYTES
        while left > 0:
            chunk = self.connection.recv(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)

    # -- checks done before the body is read --------------------------------------------------------
    def _origin(self) -> str | None:
        return self.headers.get("Origin")

    def _cross_origin_allowed(self, origin: str) -> bool:
        allowed = self.settings.allowed_origins
        return "*" in allowed or origin.rstrip("/") in allowed

    def _same_origin(self, origin: str) -> bool:
        host = self.headers.get("Host", "")
        return origin.rstrip("/").lower() == f"{self.settings.scheme}://{host}".lower()

    def _cors_headers(self) -> dict[str, str]:
        origin = self._origin()
        if origin and not self._same_origin(origin) and self._cross_origin_allowed(origin):
            return {"Access-Control-Allow-Origin": "*" if "*" in self.settings.allowed_origins else origin,
                    "Vary": "Origin"}
        return {}

    def _gate(self) -> bool:
        """Host, Origin and auth checks; answers and returns False when the request may not go on."""
        allowed_hosts = self.settings.allowed_hosts
        host = self.headers.get("Host")
        if allowed_hosts is not None and host is not None and _host_name(host) not in allowed_hosts:
            self._fail(403, f"Host {host} is not served by this worker (worker config: rest.allowed.host.names)",
                       close=True)
            return False
        origin = self._origin()
        if origin is not None and not self._same_origin(origin) and not self._cross_origin_allowed(origin):
            self._fail(403, f"Cross-origin requests from {origin} are not allowed (worker config: "
                            f"access.control.allow.origin)", close=True)
            return False
        if self.realm is not None and not self.realm.authenticate_header(self.headers.get("Authorization")):
            self._fail(401, "User cannot access the resource.", {"WWW-Authenticate": 'Basic realm="kconnect"'},
                       close=True)
            return False
        return True

    def _read_body(self, method: str) -> tuple[bool, bytes | None]:
        """``(ok, body)``: the framing and content-type checks, then the body (at most rest.request.max.bytes)."""
        if self.headers.get("Transfer-Encoding"):
            self._fail(411, "Send the request body with a Content-Length header (chunked bodies are not accepted)",
                       close=True)
            return False, None
        lengths = self.headers.get_all("Content-Length") or []
        if len({v.strip() for v in lengths}) > 1:  # request smuggling: which one would a proxy have used?
            self._fail(400, "The request has differing Content-Length headers", close=True)
            return False, None
        raw = lengths[0] if lengths else None
        if raw is None:
            return True, None
        raw = raw.strip()
        if not raw.isdigit() or not raw.isascii():
            self._fail(400, f"Invalid Content-Length header: {raw[:40]!r}", close=True)
            return False, None
        length = int(raw)
        if length > self.settings.max_body:
            self._fail(413, f"The request body ({length} bytes) is larger than this worker accepts "
                            f"({self.settings.max_body} bytes, worker config rest.request.max.bytes)", close=True)
            return False, None
        if length == 0:
            return True, None
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            self._fail(415, f"HTTP {method} with a body needs Content-Type: application/json (got "
                            f"{ctype or 'none'})", close=True)
            return False, None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return False, None
        return True, body

    def handle_expect_100(self) -> bool:
        # "Expect: 100-continue": ask for the body only from a client that passed the checks.
        if not self._gate():
            return False
        return super().handle_expect_100()

    # -- requests -----------------------------------------------------------------------------------
    def _handle(self, method: str) -> None:
        if not self._gate():
            return
        ok, body = self._read_body(method)
        if not ok:
            return
        path = urlsplit(self.path).path
        with self.settings.policy.restricted() as resolved:
            try:
                resp = _dispatch(self.service, method, self.path, body)
                status, payload, headers = resp.status, resp.body, dict(resp.headers)
            except Exception as e:  # noqa: BLE001 - every failure becomes Kafka's error body
                status, payload = error_body(e)
                headers = {"Allow": ", ".join(_allowed_methods(path.rstrip("/") or "/"))} if status == 405 else {}
        if resolved and (status >= 400 or path.endswith("/validate")):
            payload = _scrub(payload, resolved)
        self._send(status, payload, headers)

    def _not_allowed(self, method: str) -> None:
        if not self._gate():
            return
        path = urlsplit(self.path).path.rstrip("/") or "/"
        allowed = _allowed_methods(path)
        if not allowed:
            self._fail(404, f"No such resource: {path}", close=True)
            return
        self._fail(405, f"HTTP {method} {path} is not supported; allowed: {', '.join(allowed)}",
                   {"Allow": ", ".join(allowed)}, close=True)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._not_allowed("HEAD")

    def do_TRACE(self) -> None:
        self._not_allowed("TRACE")

    def do_OPTIONS(self) -> None:
        origin = self._origin()
        wanted = self.headers.get("Access-Control-Request-Method")
        if origin and wanted and not self._same_origin(origin) and self._cross_origin_allowed(origin):
            # A CORS preflight from an allowed origin (Kafka's access.control.allow.* settings).
            self._send(204, None, {"Access-Control-Allow-Methods": ",".join(self.settings.allowed_methods),
                                   "Access-Control-Allow-Headers": "Content-Type, Authorization",
                                   "Access-Control-Max-Age": "1800"})
            return
        self._not_allowed("OPTIONS")

    def log_message(self, format: str, *args: Any) -> None:
        # The request line only (never headers: they may carry credentials).
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts of clients wait instead of being refused

    def __init__(self, address: tuple[str, int], handler: type, tls: ssl.SSLContext | None):
        self._slots = threading.BoundedSemaphore(_MAX_CONCURRENT)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def process_request(self, request: Any, client_address: Any) -> None:
        # At most _MAX_CONCURRENT requests at once; the others wait in the backlog.
        if not self._slots.acquire(timeout=_SOCKET_TIMEOUT):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up, times out or fails the TLS handshake is not the worker's error.
        log.debug("REST connection from %s failed", client_address, exc_info=True)  # noqa: LOG014 - socketserver calls this inside its except block


class RestServer:
    """Serve ``service`` (a :class:`~spark_connect_bridge.runtime.service.ConnectService`) over HTTP or HTTPS."""

    def __init__(self, service: Any, host: str | None = None, port: int | None = None,
                 users: Mapping[str, str] | Realm | None = None):
        self.service = service
        config = getattr(service, "config", None)
        self.scheme = getattr(config, "scheme", "http")
        realm = users if isinstance(users, Realm) or users is None else Realm(users)
        # An empty users file lets nobody in (it does not turn authentication off).
        handler = type("Handler", (_Handler,), {"service": service, "realm": realm,
                                                "settings": _Settings(config, self.scheme)})
        tls = None
        if config is not None:
            host, port = host or config.host, config.port if port is None else port
            tls = server_context(config.ssl) if self.scheme == "https" else None
        if host is None or port is None:
            raise ValueError("RestServer: a service without a worker config needs host and port")
        self._httpd = _Server((host, port), handler, tls)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self._httpd.socket.getsockname()[0]  # what server_address holds, typed for any socket family
        return f"{self.scheme}://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def start(self) -> RestServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kconnect-rest", daemon=True)
        self._thread.start()
        log.info("REST API listening on %s", self.url)
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
