"""A TCP forwarder on 127.0.0.1 that can be cut and restored, to play an outage of a server (an object store) that
keeps its state: while cut, connections are refused; restored, on the same port, it forwards again.

>>> with TcpProxy(9000) as proxy:                   # doctest: +SKIP
...     proxy.cut(); proxy.restore()
"""

from __future__ import annotations

import socket
import threading

from tests.support.postgres import free_port

__all__ = ["TcpProxy"]


class TcpProxy:
    def __init__(self, target_port: int, port: int | None = None):
        self.target_port = target_port
        self.port = port or free_port()
        self._server: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> TcpProxy:
        return self.restore()

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def restore(self) -> TcpProxy:
        """Listen (again) on :attr:`port` and forward every connection to the target."""
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        return self

    def cut(self) -> None:
        """Stop listening and close every forwarded connection: the server looks down."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._open.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
