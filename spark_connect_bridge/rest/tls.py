"""The TLS context of an ``https://`` listener, from Kafka's ``listeners.https.ssl.*`` (or ``ssl.*``) keys.

Key stores: ``PEM`` (a file holding the private key and the certificate chain, or the inline
``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``) and ``PKCS12``; a ``JKS`` store must be converted first
(``keytool -importkeystore -deststoretype PKCS12``). Trust stores (for ``ssl.client.auth=required|requested``): PEM
or PKCS12. TLS 1.2 is the oldest version served.

>>> ctx = server_context({"keystore.location": "/etc/kconnect/rest.pem", "keystore.type": "PEM"})  # doctest: +SKIP
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping

from ..errors import ConfigError, ConfigProblem

__all__ = ["server_context"]


def _store_type(settings: Mapping[str, str], which: str) -> str:
    declared = settings.get(f"{which}.type")
    if declared:
        return declared.upper()
    location = settings.get(f"{which}.location", "").lower()
    return "PKCS12" if location.endswith((".p12", ".pfx", ".pkcs12")) else "PEM"


def _pkcs12(path: str, password: str | None, key: str) -> tuple[bytes, bytes, list[bytes]]:
    """``(private key PEM, certificate PEM, extra certificates PEM)`` of a PKCS12 store."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    with open(path, "rb") as f:
        data = f.read()
    try:
        private, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as e:
        raise ConfigError([ConfigProblem(key, f"Cannot open the PKCS12 store {path}: {e}")]) from None
    key_pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if private else b""
    cert_pem = cert.public_bytes(Encoding.PEM) if cert else b""
    return key_pem, cert_pem, [c.public_bytes(Encoding.PEM) for c in extra or ()]


def _load_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    # load_cert_chain reads files only: hand it a private temporary file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """A server-side SSLContext from the listener's ssl settings (names without the ``ssl.`` prefix)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    store = _store_type(settings, "keystore")
    key_password = settings.get("key.password") or settings.get("keystore.password")
    location = settings.get("keystore.location")
    key = "listeners.https.ssl.keystore.location"
    try:
        if settings.get("keystore.certificate.chain"):
            pem = (settings.get("keystore.key", "") + "\n" + settings["keystore.certificate.chain"]).encode()
            _load_chain(ctx, pem, settings.get("key.password"))
        elif store == "PEM":
            ctx.load_cert_chain(str(location), password=key_password)
        elif store == "PKCS12":
            key_pem, cert_pem, extra = _pkcs12(str(location), settings.get("keystore.password"), key)
            _load_chain(ctx, key_pem + cert_pem + b"".join(extra), None)
        else:
            raise ConfigError([ConfigProblem("listeners.https.ssl.keystore.type",
                                             f"Invalid value {store} for configuration ssl.keystore.type: PEM or "
                                             f"PKCS12 (convert a JKS store with keytool -importkeystore "
                                             f"-deststoretype PKCS12)")])
    except (OSError, ssl.SSLError) as e:
        raise ConfigError([ConfigProblem(key, f"Cannot load the REST listener's key store {location or '(inline)'}: "
                                              f"{getattr(e, 'strerror', None) or e}")]) from None
    auth = settings.get("client.auth", "none").lower()
    if auth != "none":
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
        trust = settings.get("truststore.location")
        try:
            if settings.get("truststore.certificates"):
                ctx.load_verify_locations(cadata=settings["truststore.certificates"])
            elif trust and _store_type(settings, "truststore") == "PKCS12":
                _, cert_pem, extra = _pkcs12(trust, settings.get("truststore.password"),
                                             "listeners.https.ssl.truststore.location")
                ctx.load_verify_locations(cadata=(cert_pem + b"".join(extra)).decode())
            elif trust:
                ctx.load_verify_locations(cafile=trust)
            else:
                raise ConfigError([ConfigProblem("listeners.https.ssl.truststore.location",
                                                 f"ssl.client.auth={auth} needs a trust store")])
        except (OSError, ssl.SSLError) as e:
            raise ConfigError([ConfigProblem("listeners.https.ssl.truststore.location",
                                             f"Cannot load the trust store {trust}: "
                                             f"{getattr(e, 'strerror', None) or e}")]) from None
    if settings.get("cipher.suites"):
        ctx.set_ciphers(":".join(c.strip() for c in settings["cipher.suites"].split(",")))
    return ctx
