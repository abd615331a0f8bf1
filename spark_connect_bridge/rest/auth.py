"""HTTP basic auth against a Jetty realm file, as Kafka's BasicAuthSecurityRestExtension reads it.

Each line is ``user: credential[,role...]``; a credential is a password in clear or as Jetty's ``Password`` tool
writes it: ``MD5:<hex digest>``, ``CRYPT:<Unix crypt>`` (the user name is the salt) or ``OBF:<obfuscated>``. Every
check costs the same whether the user exists or not, and compares in constant time.

>>> users = Realm({"admin": "MD5:5ebe2294ecd0e0f08eab7690d2a6ee69"})
>>> users.authenticate("admin", "secret"), users.authenticate("admin", "guess"), users.authenticate("x", "secret")
(True, False, False)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import warnings
from collections.abc import Mapping

__all__ = ["Realm", "deobfuscate"]

log = logging.getLogger(__name__)


def deobfuscate(text: str) -> str:
    """Jetty's ``Password.deobfuscate`` (``OBF:1yta1t331v8w1v9q1t331ytc`` is ``secret``)."""
    s = text[4:] if text.startswith("OBF:") else text
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] == "U":
            i += 1
            out.append((int(s[i:i + 4], 36) >> 8) & 0xFF)
        else:
            value = int(s[i:i + 4], 36)
            out.append(((value // 256 + value % 256 - 254) // 2) & 0xFF)
        i += 4
    return out.decode("utf-8")


def _unix_crypt(password: str, salt: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt  # the standard library's until Python 3.13; Jetty's UnixCrypt is the same DES crypt
        except ImportError:
            log.error("A CRYPT: credential cannot be checked on this Python (no crypt module): use MD5: or a "
                      "clear-text password in rest.basic.auth.file")
            return ""
    return crypt.crypt(password, salt) or ""


def _credential_bytes(credential: str, password: str) -> tuple[bytes, bytes]:
    """``(stored, offered)`` in the same form, to be compared in constant time."""
    if credential.startswith("MD5:"):
        digest = hashlib.md5(password.encode("utf-8")).hexdigest()
        return credential[4:].lower().encode(), digest.encode()
    if credential.startswith("CRYPT:"):
        stored = credential[6:]
        return stored.encode(), _unix_crypt(password, stored[:2]).encode()
    if credential.startswith("OBF:"):
        return deobfuscate(credential).encode("utf-8"), password.encode("utf-8")
    return credential.encode("utf-8"), password.encode("utf-8")


class Realm:
    """The users of a realm file: ``{user: credential}``."""

    def __init__(self, users: Mapping[str, str]):
        self._users = dict(users)
        # Checked when the user is unknown, so that an unknown user takes as long as a wrong password.
        self._decoy = "MD5:" + hashlib.sha256(b"kconnect-decoy").hexdigest()[:32]

    def authenticate(self, user: str, password: str) -> bool:
        credential = self._users.get(user)
        stored, offered = _credential_bytes(self._decoy if credential is None else credential, password)
        same = hmac.compare_digest(hashlib.sha256(stored).digest(), hashlib.sha256(offered).digest())
        return same and credential is not None

    def authenticate_header(self, header: str | None) -> bool:
        """Check an ``Authorization: Basic ...`` header."""
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return bool(sep) and self.authenticate(user, password)
