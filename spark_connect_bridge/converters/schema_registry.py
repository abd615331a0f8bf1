"""A client for the Confluent Schema Registry REST API (``requests``; the ``avro`` extra).

Register, look up by id, latest version, compatibility checks, for Avro and JSON Schema (``schema_type``); ids
and schemas are cached (they never change for an id), connection errors are retried with exponential backoff
over every configured URL, basic auth comes from ``basic.auth.user.info`` (``user:password``) or from the URL's
user info. The password is never logged, shown in ``repr`` or put in an error message.

>>> client = SchemaRegistryClient("http://127.0.0.1:8081")                  # doctest: +SKIP
>>> sid = client.register("orders-value", '{"type": "string"}')             # doctest: +SKIP
>>> client.get_schema(sid)                                                  # doctest: +SKIP
'"string"'
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..errors import ConnectError, DataError, RetriableError

__all__ = ["SchemaRegistryClient", "SchemaRegistryError", "RegisteredSchema", "client_for", "STRATEGIES",
           "STRATEGY_NAMES", "strategy_of", "subject_name"]

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SUBJ = "io.confluent.kafka.serializers.subject."
#: Confluent's subject name strategies (``key.subject.name.strategy``), short name -> our name.
STRATEGIES = {"TopicNameStrategy": "topic", "RecordNameStrategy": "record", "TopicRecordNameStrategy": "topic_record"}
#: Every value the strategy keys accept (Confluent's class names, and the short names).
STRATEGY_NAMES = tuple([_SUBJ + s for s in STRATEGIES] + list(STRATEGIES))
DEFAULT_STRATEGY = _SUBJ + "TopicNameStrategy"


def strategy_of(name: str) -> str:
    """``topic``, ``record`` or ``topic_record`` for a strategy key's value."""
    return STRATEGIES[name.rsplit(".", 1)[-1]]


def subject_name(strategy: str, topic: str | None, is_key: bool, record: str | None) -> str:
    """Confluent's subject name strategies: ``<topic>-key``/``-value``, ``<record>``, ``<topic>-<record>``."""
    suffix = "key" if is_key else "value"
    if strategy == "topic":
        return f"{topic}-{suffix}"
    if record is None:
        raise DataError("RecordNameStrategy and TopicRecordNameStrategy need a named (record) schema")
    return record if strategy == "record" else f"{topic}-{record}"


class SchemaRegistryError(ConnectError):
    """The registry answered with an error: ``http_status``, Confluent ``error_code`` and message."""

    def __init__(self, http_status: int, error_code: int, message: str):
        self.http_status, self.error_code = http_status, error_code
        super().__init__(f"{message}; error code: {error_code}")


@dataclass(frozen=True)
class RegisteredSchema:
    subject: str
    id: int
    version: int
    schema: str
    schema_type: str = "AVRO"


class _LRU(OrderedDict):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def put(self, k: Any, v: Any) -> None:
        self[k] = v
        self.move_to_end(k)
        while len(self) > self.size:
            self.popitem(last=False)


def _split_auth(url: str) -> tuple[str, tuple[str, str] | None]:
    parts = urlsplit(url.strip())
    if parts.username is None:
        return url.strip().rstrip("/"), None
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)).rstrip("/")
    return clean, (parts.username, parts.password or "")


class SchemaRegistryClient:
    """Confluent Schema Registry client with caching and retries.

    ``urls``: one URL, a comma-separated string or a list (tried in order on connection errors).
    ``user_info``: ``"user:password"`` for basic auth (``basic.auth.credentials.source=USER_INFO``).
    """

    def __init__(self, urls: str | Sequence[str], *, user_info: str | None = None, timeout: float = 30.0,
                 max_retries: int = 3, backoff_ms: int = 200, cache_size: int = 1000):
        raw = [u for u in (urls.split(",") if isinstance(urls, str) else urls) if u.strip()]
        if not raw:
            raise ValueError("schema.registry.url is empty")
        self.urls: list[str] = []
        auth: tuple[str, str] | None = None
        for u in raw:
            clean, a = _split_auth(u)
            self.urls.append(clean)
            auth = auth or a
        if user_info:
            user, _, pw = user_info.partition(":")
            auth = (user, pw)
        self._auth = auth
        self.timeout, self.max_retries, self.backoff_ms = timeout, max_retries, backoff_ms
        self._by_id: _LRU = _LRU(cache_size)
        self._ids: _LRU = _LRU(cache_size)
        self._lock = threading.Lock()
        self._session: Any = None

    def __repr__(self) -> str:
        who = f", user={self._auth[0]!r}, password=[hidden]" if self._auth else ""
        return f"SchemaRegistryClient({','.join(self.urls)!r}{who})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_session"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- transport ----------------------------------------------------------------------------------
    def _http(self) -> Any:
        if self._session is None:
            try:
                import requests
            except ImportError as e:  # pragma: no cover - requests is in the avro extra
                raise ImportError("The Schema Registry client needs requests: pip install "
                                  "'spark_connect_bridge[avro]'") from e
            s = requests.Session()
            if self._auth:
                s.auth = self._auth
            s.headers.update({"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE})
            self._session = s
        return self._session

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call; retries connection errors with backoff over the URLs; raise
        :class:`SchemaRegistryError` for an error answer and :class:`RetriableError` when unreachable."""
        import requests

        data = json.dumps(body) if body is not None else None
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            for base in self.urls:
                try:
                    resp = self._http().request(method, base + path, data=data, timeout=self.timeout)
                except (requests.ConnectionError, requests.Timeout) as e:
                    last = e
                    log.debug("schema registry %s unreachable (attempt %d): %s", base, attempt + 1,
                              type(e).__name__)
                    continue
                if resp.status_code >= 500 and attempt < self.max_retries:
                    last = SchemaRegistryError(resp.status_code, resp.status_code * 100, resp.text[:200])
                    continue
                try:
                    payload = resp.json()
                except ValueError:
                    payload = None
                if resp.status_code >= 400:
                    code = payload.get("error_code", resp.status_code) if isinstance(payload, dict) \
                        else resp.status_code
                    msg = payload.get("message", resp.text[:200]) if isinstance(payload, dict) else resp.text[:200]
                    raise SchemaRegistryError(resp.status_code, int(code), str(msg))
                return payload
            if attempt < self.max_retries:
                time.sleep(self.backoff_ms / 1000.0 * (2 ** attempt))
        raise RetriableError(f"Schema Registry unreachable at {', '.join(self.urls)} after "
                             f"{self.max_retries + 1} attempts: {type(last).__name__}: {last}")

    # -- API ----------------------------------------------------------------------------------------
    @staticmethod
    def _s(subject: str) -> str:
        return quote(subject, safe="")

    @staticmethod
    def _body(schema: str, schema_type: str) -> dict[str, Any]:
        # Confluent omits schemaType for Avro (its default); registries that predate other types expect that.
        return {"schema": schema} if schema_type == "AVRO" else {"schema": schema, "schemaType": schema_type}

    def register(self, subject: str, schema: str, *, normalize: bool = False, schema_type: str = "AVRO") -> int:
        """Register ``schema`` (of ``schema_type``: ``AVRO``, ``JSON``) under ``subject`` (idempotent) and return its
        id (cached)."""
        key = ("register", subject, schema, schema_type)
        if key in self._ids:
            return self._ids[key]
        out = self.request("POST", f"/subjects/{self._s(subject)}/versions" + ("?normalize=true" if normalize else ""),
                           self._body(schema, schema_type))
        sid = int(out["id"])
        self._ids.put(key, sid)
        self._by_id.put(sid, schema)
        return sid

    def lookup(self, subject: str, schema: str, *, schema_type: str = "AVRO") -> RegisteredSchema:
        """The id and version of ``schema`` under ``subject`` without registering it."""
        out = self.request("POST", f"/subjects/{self._s(subject)}", self._body(schema, schema_type))
        return RegisteredSchema(out.get("subject", subject), int(out["id"]), int(out["version"]), out["schema"],
                                out.get("schemaType", "AVRO"))

    def get_schema(self, schema_id: int) -> str:
        """The schema text of an id (cached)."""
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        out = self.request("GET", f"/schemas/ids/{int(schema_id)}")
        self._by_id.put(schema_id, out["schema"])
        return out["schema"]

    def get_schema_type(self, schema_id: int) -> str:
        """The type of an id's schema (``AVRO``, ``JSON``, ``PROTOBUF``); not cached (plan time only)."""
        return str(self.request("GET", f"/schemas/ids/{int(schema_id)}").get("schemaType", "AVRO"))

    def get_version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        out = self.request("GET", f"/subjects/{self._s(subject)}/versions/{version}")
        self._by_id.put(int(out["id"]), out["schema"])
        return RegisteredSchema(out["subject"], int(out["id"]), int(out["version"]), out["schema"],
                                out.get("schemaType", "AVRO"))

    def get_latest(self, subject: str) -> RegisteredSchema:
        return self.get_version(subject, "latest")

    def get_versions(self, subject: str) -> list[int]:
        return list(self.request("GET", f"/subjects/{self._s(subject)}/versions"))

    def get_subjects(self) -> list[str]:
        return list(self.request("GET", "/subjects"))

    def test_compatibility(self, subject: str, schema: str, version: int | str = "latest", *,
                           schema_type: str = "AVRO") -> bool:
        out = self.request("POST", f"/compatibility/subjects/{self._s(subject)}/versions/{version}",
                           self._body(schema, schema_type))
        return bool(out["is_compatible"])

    def get_compatibility(self, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{self._s(subject)}?defaultToGlobal=true"
        return self.request("GET", path)["compatibilityLevel"]

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{self._s(subject)}"
        return self.request("PUT", path, {"compatibility": level})["compatibility"]

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        return list(self.request("DELETE", f"/subjects/{self._s(subject)}"
                                 + ("?permanent=true" if permanent else "")))


_CLIENTS: dict[tuple[Any, ...], SchemaRegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(urls: Sequence[str] | str, user_info: str | None = None,
               cache_size: int = 1000) -> SchemaRegistryClient:
    """One shared client per (urls, credentials) in this process (executors reuse it across batches)."""
    key = (tuple(urls) if not isinstance(urls, str) else (urls,), user_info, cache_size)
    with _CLIENTS_LOCK:
        c = _CLIENTS.get(key)
        if c is None:
            c = _CLIENTS[key] = SchemaRegistryClient(urls, user_info=user_info, cache_size=cache_size)
        return c
