"""A TCP proxy in front of a MySQL/MariaDB server that breaks the first binlog dump passing through it: after
``after`` bytes from the server it stops forwarding (``stall``: the connection stays open, silent) or closes
both sides (``drop``). Every other connection, and every later dump, passes untouched.

>>> with BinlogProxy(("127.0.0.1", 3306), "stall", after=8000) as proxy:     # doctest: +SKIP
...     connect_to(proxy.port)
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

__all__ = ["BinlogProxy"]

_COM_BINLOG_DUMP = 0x12


class BinlogProxy:
    def __init__(self, upstream: tuple[str, int], fault: str, *, after: int):
        assert fault in ("stall", "drop"), fault
        self.upstream, self.fault, self.after = upstream, fault, after
        self.dumps = 0  # binlog dumps seen
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self) -> BinlogProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            state = {"dump": False, "faulty": False}
            threading.Thread(target=self._pump_up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(server, client, state), daemon=True).start()

    def _pump_up(self, client: socket.socket, server: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if len(data) > 4 and data[4] == _COM_BINLOG_DUMP and data[3] == 0:
                    with self._lock:
                        self.dumps += 1
                        state["faulty"] = self.dumps == 1
                    state["dump"] = True
                server.sendall(data)

    def _pump_down(self, server: socket.socket, client: socket.socket, state: dict[str, bool]) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if state["faulty"]:
                    room = self.after - sent
                    if room <= 0 or len(data) > room:
                        client.sendall(data[:max(room, 0)])
                        if self.fault == "drop":
                            client.close()
                            server.close()
                        else:  # silent: the client's read times out
                            self._closed.wait()
                        return
                    sent += len(data)
                client.sendall(data)
