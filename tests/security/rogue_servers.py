"""Rogue database servers for the attack tests: each speaks just enough of its wire protocol to get a client to
hand over what it should not (a password in clear text, a local file) and records every byte it receives."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any


class _Server:
    """A one-thread TCP server on 127.0.0.1 (a free port); ``received`` holds every byte of every connection."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(10)
                try:
                    self.talk(conn)
                except OSError:
                    pass

    def read(self, conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("client closed")
            data += chunk
        self.received += data
        return data

    def talk(self, conn: socket.socket) -> None:
        raise NotImplementedError


class FakePostgres(_Server):
    """Answers SSL/GSS requests with "N", then asks for the password in clear text (AuthenticationCleartextPassword)
    and records it in ``passwords`` before refusing the login."""

    def __init__(self) -> None:
        super().__init__()
        self.passwords: list[str] = []

    def talk(self, conn: socket.socket) -> None:
        while True:
            length, code = struct.unpack("!ii", self.read(conn, 8))
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not here
                conn.sendall(b"N")
                continue
            self.read(conn, length - 8)  # the startup message's parameters
            break
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))
        tag, length = struct.unpack("!ci", self.read(conn, 5))
        if tag == b"p":
            self.passwords.append(self.read(conn, length - 4).rstrip(b"\0").decode(errors="replace"))
        fields = b"SFATAL\0C28P01\0Mpassword authentication failed\0\0"
        conn.sendall(b"E" + struct.pack("!i", 4 + len(fields)) + fields)


class FakeMySQL(_Server):
    """A MySQL server that logs anyone in, then answers a query with a LOAD DATA LOCAL INFILE request for
    ``wanted`` (every query, or with ``on_load_data_only`` only the client's own LOAD DATA statements) and
    records whatever comes back."""

    def __init__(self, wanted: str, *, on_load_data_only: bool = False) -> None:
        super().__init__()
        self.wanted, self.on_load_data_only = wanted, on_load_data_only
        self.file_requests = 0

    def _packet(self, conn: socket.socket, seq: int, payload: bytes) -> None:
        conn.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload)

    def _receive(self, conn: socket.socket) -> tuple[int, bytes]:
        head = self.read(conn, 4)
        length = int.from_bytes(head[:3], "little")
        return head[3], self.read(conn, length)

    def talk(self, conn: socket.socket) -> None:
        caps = 0x1 | 0x4 | 0x8 | 0x80 | 0x200 | 0x2000 | 0x8000 | 0x80000  # no SSL: the client stays in clear
        salt = b"abcdefgh" + b"ijklmnopqrst"
        greeting = (b"\x0a" + b"8.0.99-fake\0" + struct.pack("<I", 7) + salt[:8] + b"\0"
                    + struct.pack("<H", caps & 0xFFFF) + b"\x2d" + struct.pack("<H", 2)
                    + struct.pack("<H", caps >> 16) + bytes([21]) + b"\0" * 10 + salt[8:] + b"\0"
                    + b"mysql_native_password\0")
        self._packet(conn, 0, greeting)
        seq, _ = self._receive(conn)  # the login: whatever it is, it is welcome
        ok = b"\x00\x00\x00" + struct.pack("<HH", 2, 0)
        self._packet(conn, seq + 1, ok)
        while True:
            seq, payload = self._receive(conn)
            if not payload or payload[0] == 0x01:  # COM_QUIT
                return
            query = payload[1:].upper()
            if self.on_load_data_only and b"LOAD DATA" not in query:
                self._packet(conn, seq + 1, ok)
                continue
            self.file_requests += 1
            self._packet(conn, seq + 1, b"\xfb" + self.wanted.encode())
            # A client that complies sends the file's packets, then an empty one; one that refuses sends nothing
            # (or hangs up). Either way: answer OK to what comes and keep listening.
            while True:
                seq, payload = self._receive(conn)
                if not payload:
                    break
                if seq == 0 and payload == b"\x01":  # COM_QUIT of a client that refused
                    return
            self._packet(conn, seq + 1, ok)
