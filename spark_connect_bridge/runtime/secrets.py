"""Secrets in connector configs: masked in every answer, restored when a masked value comes back, encrypted at rest.

* :func:`mask_config` is what the REST API shows of a config (``GET /connectors/{c}/config``, ``/tasks``,
  ``?expand=info``, create/update answers): values of PASSWORD keys (declared by the connector, its converters,
  transforms and predicates, or named ``*password``/``*.secret``) become ``[hidden]``, and so do credentials
  inside URLs (``jdbc:...?password=x``, ``https://user:x@host``). Config provider references (``${file:...}``)
  are shown as they are, as Kafka does: they are not secrets.
* :func:`restore_masked` makes GET → edit → PUT safe: a value sent back exactly as the API showed it keeps the
  stored secret; a ``[hidden]`` anywhere else is refused (it is not a secret, and storing it would destroy one).
* :class:`ConfigCipher` encrypts the stored configs (``<offset.storage.dir>/_connectors/*.json``) with Fernet
  (AES-128-CBC + HMAC-SHA256) under a key kept in ``state.encryption.key.file``.

>>> mask_url_secrets("jdbc:postgresql://db/app?user=app&password=s3cret")
'jdbc:postgresql://db/app?user=app&password=[hidden]'
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Collection, Mapping
from typing import Any

from ..config import HIDDEN, ConfigDef, Type
from ..connectors.base import connector_config_def
from ..core import plugins
from ..core.locations import Locations, is_remote
from ..errors import ConfigError, ConfigProblem

__all__ = ["mask_config", "mask_url_secrets", "restore_masked", "password_keys", "ConfigCipher", "is_secret_key",
           "scrub_text"]

log = logging.getLogger(__name__)

# A credential inside a URL: a password-like query/property parameter, or the password of user:password@.
# Provider references (${...}) are not secrets and are shown as they are.
_URL_SECRET = re.compile(r"(?i)(?P<param>(?:^|[?&;])(?:password|passwd|pwd|secret|token|access_token|api_key)=)"
                         r"(?!\$\{)(?P<pv>[^&;\s]+)"
                         r"|(?P<auth>//[^/:@\s?#]+:)(?!\$\{)(?P<av>[^@/\s?#]+)@")


def mask_url_secrets(text: str) -> str:
    """``text`` with credentials embedded in URLs replaced by ``[hidden]``."""
    return _URL_SECRET.sub(lambda m: m.group("param") + HIDDEN if m.group("param") else m.group("auth") + HIDDEN + "@",
                           text)


def _definition_of(cls: Any) -> Any:
    if getattr(cls, "plugin_type", None) in ("source", "sink"):
        return connector_config_def(cls)
    return getattr(cls, "config_def", None) or ConfigDef()


def password_keys(config: Mapping[str, str]) -> set[str]:
    """Keys of ``config`` declared PASSWORD by the connector or by its converters/transforms/predicates."""
    out: set[str] = set()

    def add(family: str, class_name: str, prefix: str) -> None:
        try:
            cls = plugins.resolve_class(family, class_name, key=prefix or "connector.class")
        except (ConfigError, ImportError):
            return
        for k in _definition_of(cls):
            if k.type is Type.PASSWORD:
                out.add(prefix + k.name)

    if config.get("connector.class"):
        add("connector", config["connector.class"], "")
    for conv in ("key.converter", "value.converter", "header.converter"):
        if config.get(conv):
            add("converter", config[conv], conv + ".")
    for fam, list_key in (("transformation", "transforms"), ("predicate", "predicates")):
        for alias in [a.strip() for a in config.get(list_key, "").split(",") if a.strip()]:
            t = config.get(f"{list_key}.{alias}.type")
            if t:
                add(fam, t, f"{list_key}.{alias}.")
    return out


def is_secret_key(key: str) -> bool:
    """A key whose value is a secret by its name alone (``connection.password``, ``sasl.jaas.config``...)."""
    low = key.lower()
    # Object stores' Hadoop keys (as spark.hadoop.<key> in a worker config too): fs.s3a.secret.key and
    # fs.s3a.session.token by the endings above; Azure's fs.azure.account.key.<account> and SAS tokens, GCS's
    # service-account private key, S3A's encryption key; Iceberg catalogs' credential and s3.secret-access-key;
    # Aiven's old aws_secret_access_key / aws_access_key_id (refused by its S3 sink, still never shown)
    return low.endswith(("password", ".secret", "jaas.config", ".token", "secret.key", "api.key", "user.info",
                         "private.key", "encryption.key", ".sas", ".credential", "secret-access-key",
                         "secret_access_key", "access_key_id")) \
        or ".account.key." in low or "fs.azure.sas." in low


def _mask_value(key: str, value: str, secret: set[str]) -> str:
    if key in secret or is_secret_key(key):
        return value if value.startswith("${") or value == "" else HIDDEN
    return mask_url_secrets(value)


def mask_config(config: Mapping[str, str]) -> dict[str, str]:
    """The config as the REST API shows it (see the module doc)."""
    secret = password_keys(config)
    return {k: _mask_value(k, str(v), secret) for k, v in config.items()}


def secret_values(config: Mapping[str, str]) -> list[str]:
    """Every secret held by ``config``: values of secret keys and credentials inside URLs."""
    secret = password_keys(config)
    out: list[str] = []
    for k, v in config.items():
        v = str(v)
        if (k in secret or is_secret_key(k)) and v and not v.startswith("${"):
            out.append(v)
        out.extend(m.group("pv") or m.group("av") for m in _URL_SECRET.finditer(v))
    return sorted({s for s in out if s}, key=len, reverse=True)


def scrub_text(text: str, config: Mapping[str, str]) -> str:
    """``text`` (an error trace, say) with every secret of ``config`` and any URL credential replaced."""
    for s in secret_values(config):
        text = text.replace(s, HIDDEN)
    return mask_url_secrets(text)


# Keys that say where a secret goes (which server, which account, which plugin sends it): a masked value stands
# for the stored secret only while every one of them in the secret's plugin is unchanged.
_DESTINATION = re.compile(r"(?i)(?:^|\.)(?:url|urls|uri|uris|host|hosts|hostname|hostnames|port|ports|user|username"
                          r"|user\.name|database|db|dbname|database\.name|server|servers|endpoint|endpoints|address"
                          r"|addresses|dsn|connection\.string|bootstrap\.servers|security\.protocol|sasl\.mechanism"
                          r"|region|account|tenant\.id|project|project\.id|instance|domain)$")
_CONVERTERS = ("key.converter", "value.converter", "header.converter")


def _plugin_scope(key: str) -> tuple[str, str]:
    """``(prefix, class key)`` of the plugin that ``key`` configures: a converter, a transform or predicate alias,
    or the connector itself (prefix ``""``, every other key, ``producer.override.*`` included)."""
    for conv in _CONVERTERS:
        if key == conv or key.startswith(conv + "."):
            return conv + ".", conv
    for family in ("transforms", "predicates"):
        if key.startswith(family + "."):
            alias = key[len(family) + 1:].split(".", 1)[0]
            return f"{family}.{alias}.", f"{family}.{alias}.type"
    return "", "connector.class"


def _declared_destinations(scope: tuple[str, str], stored: Mapping[str, str]) -> set[str]:
    """The keys a connector class itself declares as destinations (``destination_keys``: the object-store sinks'
    bucket, container and account keys, which the name pattern does not catch)."""
    if scope[0] or not stored.get("connector.class"):
        return set()
    try:
        cls = plugins.resolve_class("connector", stored["connector.class"], key="connector.class")
    except (ConfigError, ImportError):
        return set()
    return set(getattr(cls, "destination_keys", ()))


def _destination_keys(scope: tuple[str, str], keys: Any, declared: Collection[str] = ()) -> list[str]:
    prefix, class_key = scope
    return sorted({class_key} | set(declared) | {k for k in keys if _plugin_scope(k) == scope and k != class_key
                                            and _DESTINATION.search(k[len(prefix):]) and not is_secret_key(k)})


def restore_masked(new: Mapping[str, Any], stored: Mapping[str, str] | None, *,
                   patch: bool = False) -> dict[str, Any]:
    """``new`` with every value that is the stored one as :func:`mask_config` showed it replaced by the stored
    value; raise a ConfigError for any other value holding ``[hidden]`` (naming the key, never a value).

    A stored secret is kept this way (or, with ``patch``, by leaving its key out) only while every key that says
    where it goes is unchanged: the plugin's class and its URL, host, port, user, database, servers... keys
    (:data:`_DESTINATION`). Otherwise the stored password would be sent to whatever server the request names."""
    masked = mask_config(stored) if stored else {}
    out: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    kept: list[str] = []  # stored secrets the request does not send itself
    for k, v in new.items():
        if isinstance(v, str) and HIDDEN in v:
            if stored is not None and k in stored and masked.get(k) == v:
                out[k] = stored[k]
                kept.append(k)
                continue
            problems.append(ConfigProblem(k, f"Configuration {k} holds the masked value {HIDDEN}, which the API "
                                             f"shows in place of a secret: send the secret itself (or a config "
                                             f"provider reference), or the value exactly as GET returned it to keep "
                                             f"the stored secret"))
            continue
        out[k] = v
    if stored and patch:
        kept += [k for k, v in stored.items() if k not in new and masked.get(k) != v]
    if stored and kept:
        final = dict(stored, **out) if patch else out
        for k in sorted(kept):
            scope = _plugin_scope(k)
            changed = [d for d in _destination_keys(scope, set(stored) | set(final),
                                                    _declared_destinations(scope, stored))
                       if final.get(d) != stored.get(d)]
            if changed:
                problems.append(ConfigProblem(k, f"Configuration {k} keeps the stored secret, but "
                                                 f"{', '.join(changed)} changed: the stored secret stays with the "
                                                 f"server it was given for; send {k} itself"))
    if problems:
        raise ConfigError(problems)
    return out


class ConfigCipher:
    """Fernet encryption of stored connector configs under a key file (created, mode 0600, when missing)."""

    def __init__(self, key_file: str, locations: Locations | None = None):
        from cryptography.fernet import Fernet

        self.key_file = key_file if is_remote(key_file) else os.path.abspath(key_file)
        self._locations = locations or Locations()
        self._fernet = Fernet(self._load_or_create_key())

    def _load_or_create_key(self) -> bytes:
        """The key in ``key_file``; created when missing (in a bucket: beside the state it encrypts,
        ``offset.storage.dir``'s default). Workers starting at the same moment all take the one key that was created
        first (a conditional create: a key one of them wrote over another's would leave configs encrypted under a
        key no other worker has)."""
        from cryptography.fernet import Fernet

        for attempt in range(20):
            try:
                return self._locations.read_bytes(self.key_file).strip()
            except FileNotFoundError:
                if attempt:  # another worker's create won and is still landing
                    time.sleep(0.1)
                    continue
            key = Fernet.generate_key()
            if self._locations.create_bytes(self.key_file, key, private=True):
                log.info("Created the key that encrypts stored connector configs: %s", self.key_file)
                return key
        raise FileNotFoundError(f"{self.key_file}: created by another worker, and still not readable")

    def encrypt(self, config: Mapping[str, str]) -> str:
        return self._fernet.encrypt(json.dumps(dict(config), sort_keys=True).encode()).decode("ascii")

    def decrypt(self, token: str) -> dict[str, str]:
        from cryptography.fernet import InvalidToken

        try:
            doc = json.loads(self._fernet.decrypt(token.encode("ascii")))
        except InvalidToken:
            raise ValueError(f"the stored config cannot be decrypted with the key in {self.key_file}") from None
        return {str(k): str(v) for k, v in doc.items()}
