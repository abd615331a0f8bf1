"""Fixtures for the REST security tests: a worker's REST API without Spark, raw HTTP requests, TLS material."""

from __future__ import annotations

import datetime
import ipaddress
import socket
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from runtime.worker_helpers import Api

from spark_connect_bridge.rest import RestServer
from spark_connect_bridge.runtime.service import ConnectService
from spark_connect_bridge.runtime.worker_config import basic_auth_users, parse_worker_config


class RestOnly:
    """A worker's service and REST API, its herder (and so Spark) not started: requests that only store and
    validate configs are served exactly as by a running worker."""

    def __init__(self, service: ConnectService, server: RestServer):
        self.service, self.server = service, server

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port


@pytest.fixture
def rest_only(tmp_path):
    """``rest_only(**worker_config_overrides) -> (RestOnly, Api)``; stopped at the end of the test."""
    started: list[RestServer] = []

    def start(**overrides: str) -> tuple[RestOnly, Api]:
        cfg = {"offset.storage.dir": str(tmp_path / "state"), "topics.dir": str(tmp_path / "topics"),
               "listeners": "http://127.0.0.1:0", "connector.allowed.paths": str(tmp_path / "data")}
        cfg.update(overrides)
        config = parse_worker_config(cfg)
        service = ConnectService(config)
        server = RestServer(service, users=basic_auth_users(config)).start()
        started.append(server)
        return RestOnly(service, server), Api(server.url)

    (tmp_path / "data").mkdir()
    yield start
    for s in started:
        s.stop()


def raw_request(port: int, head: str, body: bytes = b"", *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, no final blank line) and ``body`` over a plain socket; return
    the status code and the raw answer. Raises ``socket.timeout`` when the worker does not answer in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        header, _, rest = answer.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in header.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    status = int(answer.split(b" ", 2)[1]) if answer else 0
    return status, header + b"\r\n\r\n" + rest


def self_signed(tmp_path: Any, name: str = "localhost") -> tuple[str, str, str]:
    """A self-signed certificate for ``name`` and 127.0.0.1: ``(pem with key and chain, cert pem, pkcs12 path)``
    (the PKCS12 store's password is ``changeit``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    both, only_cert, p12 = tmp_path / "rest.pem", tmp_path / "rest-cert.pem", tmp_path / "rest.p12"
    both.write_bytes(key_pem + cert_pem)
    only_cert.write_bytes(cert_pem)
    p12.write_bytes(pkcs12.serialize_key_and_certificates(b"rest", key, cert, None,
                                                          serialization.BestAvailableEncryption(b"changeit")))
    return str(both), str(only_cert), str(p12)
