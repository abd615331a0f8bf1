"""An HTTP API for the HTTP sinks' tests, on 127.0.0.1 in this process: records every request and answers from a
script (status codes to give the next requests), with an OAuth2 client-credentials token endpoint at ``/token``."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpApi:
    """``requests``: what arrived (token requests apart, in ``token_requests``); ``script``: statuses for the next
    requests (then 200); ``client``: the (id, secret) the token endpoint accepts; ``token``: the token it gives."""

    requests: list[Received] = field(default_factory=list)
    token_requests: list[Received] = field(default_factory=list)
    script: list[int] = field(default_factory=list)
    client: tuple[str, str] = ("sink-client", "client-s3cret")
    token: str = "tok-1"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> HttpApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got = Received(self.command, self.path, dict(self.headers.items()), body)
                if self.path == "/token":
                    with api.lock:
                        api.token_requests.append(got)
                    self._answer(*api._token_answer(got))
                    return
                with api.lock:
                    status = api.script.pop(0) if api.script else 200
                    if status < 300:
                        api.requests.append(got)
                headers = {"Retry-After": "0"} if status == 429 else None
                self._answer(status, b'{"ok":true}' if status < 300 else b"upstream says no", headers)

            do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def _token_answer(self, got: Received) -> tuple[int, bytes]:
        form = {k: v[0] for k, v in parse_qs(got.body.decode()).items()}
        auth = got.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            client = tuple(base64.b64decode(auth[6:]).decode().split(":", 1))
        else:
            client = (form.get("client_id", ""), form.get("client_secret", ""))
        if form.get("grant_type") != "client_credentials" or client != self.client:
            return 401, b'{"error":"invalid_client"}'
        return 200, json.dumps({"access_token": self.token, "token_type": "Bearer"}).encode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
