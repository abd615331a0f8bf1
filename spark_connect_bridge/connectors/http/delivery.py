"""What both HTTP sinks share: the parsed endpoint, request bodies as Column expressions, and one task's
requests with their batches, retries, authentication and failures."""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ...config import Lambda, Password
from ...errors import ConfigError, ConfigProblem, ConnectError
from ..base import CommitContext, SinkConnector, WriteContext
from ..jdbc.sink import RejectedRecord

log = logging.getLogger(__name__)


def url_problem(url: str) -> str | None:
    parts = urlsplit(str(url).replace("${topic}", "t").replace("${key}", "k"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http:// or https:// URL"
    return None


URL = Lambda(url_problem, "an http:// or https:// URL")


def secret(value: Any) -> str | None:
    return (value.value() if isinstance(value, Password) else value) or None


@dataclass(frozen=True)
class StatusCodes:
    """Confluent's ``retry.on.status.codes``: codes and ranges, ``400-`` open-ended (``"400-500,503"``)."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def parse(cls, text: str) -> StatusCodes:
        ranges = []
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            low, dash, high = part.partition("-")
            ranges.append((int(low), int(high) if high else (999 if dash else int(low))))
        return cls(tuple(ranges))

    def __contains__(self, code: object) -> bool:
        return isinstance(code, int) and any(low <= code <= high for low, high in self.ranges)


def codes_problem(text: str) -> str | None:
    try:
        StatusCodes.parse(text)
    except ValueError:
        return "HTTP status codes and ranges separated by commas, e.g. 400- or 429,500-599"
    return None


@dataclass(frozen=True)
class Endpoint:
    """Where and how the requests go, parsed once on the driver from either original's keys (pickled to tasks)."""

    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    secret_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    basic: tuple[str, str] | None = field(default=None, repr=False)
    oauth2: OAuth2 | None = None
    batch_max: int = 1
    prefix: str = ""
    separator: str = ","
    suffix: str = ""
    json_array: bool = False
    batch_key: str = ""
    json_body: bool = False
    max_retries: int = 10
    backoff_ms: int = 3000
    exponential: bool = True
    retry_codes: StatusCodes = StatusCodes(((400, 999),))
    connect_timeout: float = 30.0
    read_timeout: float = 30.0
    on_error: str = "fail"
    on_null: str = "ignore"
    replacements: tuple[tuple[str, str], ...] = ()
    verify: str | bool = True
    proxy: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class OAuth2:
    """OAuth2 client credentials: a token fetched from ``token_url`` before the first request and on a 401."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    in_header: bool = True
    scope: str | None = None
    token_property: str = "access_token"


def pairs(text: str, separator: str, key: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in (i.strip() for i in str(text or "").split(separator)):
        if not item:
            continue
        name, colon, value = item.partition(":")
        if not colon or not name.strip():
            raise ConfigError([ConfigProblem(key, f"Invalid value for configuration {key}: each header is "
                                                  f"name:value, separated by {separator!r}")])
        out.append((name.strip(), value.strip()))
    return tuple(out)


# -- bodies and requests -----------------------------------------------------------------------------------------------

def require_value(schema: Any, sink: str) -> None:
    if "value" not in schema.fieldNames():
        raise ConfigError(f"{sink} needs a 'value' column (the request body); the input has {schema.fieldNames()}")


#: The column :func:`bodies` adds: each record's request body as text (the pipeline's path). Without it (a DataFrame
#: written with format("kconnect") directly), :func:`_records` makes the same text from ``value`` row by row.
BODY = "kconnect_http_body"


def bodies(df: Any, json_body: bool) -> Any:
    """``df`` with :data:`BODY`, the text of each record's request body, and ``key`` as text (for ``${key}``), as
    Column expressions: a string as it is (JSON-quoted for a JSON body), bytes as UTF-8, anything else as JSON."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    def text(column: Any, data_type: Any, quote_strings: bool) -> Any:
        if isinstance(data_type, StringType) and not quote_strings:
            return column
        if isinstance(data_type, BinaryType) and not quote_strings:
            return column.cast("string")
        # to_json takes structs, maps and arrays only: wrap as {"v":...}, then cut the wrapper off again
        wrapped = F.to_json(F.struct(column.alias("v")))
        return F.when(column.isNull(), F.lit(None).cast("string")).otherwise(
            wrapped.substr(F.lit(6), F.length(wrapped) - F.lit(6)))

    fields = {f.name: f.dataType for f in df.schema.fields}
    out = df.withColumn(BODY, text(F.col("value"), fields["value"], json_body))
    if "key" in fields:
        out = out.withColumn("key", text(F.col("key"), fields["key"], False))
    return out


def _text(value: Any, json_body: bool) -> str | None:
    """One value as :func:`bodies` writes it (a DataFrame written without the pipeline)."""
    if value is None:
        return None
    if isinstance(value, bytes) and not json_body:
        return value.decode("utf-8", "replace")
    if isinstance(value, str) and not json_body:
        return value
    if isinstance(value, bytes):
        value = base64.b64encode(value).decode()
    return json.dumps(value, separators=(",", ":"), default=str)


_TEMPLATE = re.compile(r"\$\{(topic|key)\}")


def _fill(template: str, topic: str | None, key: str | None) -> str:
    if "${" not in template:
        return template
    return _TEMPLATE.sub(lambda m: (topic if m.group(1) == "topic" else key) or "", template)


class Sender:
    """One task's requests: records grouped into bodies, each sent with retries; returns the rejected records."""

    def __init__(self, endpoint: Endpoint, name: str):
        import requests

        self.endpoint, self.name = endpoint, name
        self.session = requests.Session()
        self.session.headers.update(dict(endpoint.headers))
        self.session.headers.update(dict(endpoint.secret_headers))
        if endpoint.basic is not None:
            self.session.auth = endpoint.basic
        if endpoint.proxy:
            self.session.proxies = {"http": endpoint.proxy, "https": endpoint.proxy}
        self.session.verify = endpoint.verify
        self.token: str | None = None
        self.rejected: list[RejectedRecord] = []
        self.sent = 0

    def send_all(self, batches: Iterator[Any]) -> list[RejectedRecord]:
        try:
            group: list[tuple[str, Any, Any, Any]] = []  # (body, topic, partition, offset)
            group_target: tuple[str, str] | None = None
            for batch in batches:
                for record in _records(batch, self.endpoint.json_body):
                    body, topic, key = record[0], record[1], record[2]
                    url = _fill(self.endpoint.url, topic, key)
                    if body is None:
                        if group and self.endpoint.on_null == "delete":  # the DELETE after what came before
                            self._send(group_target[0], group)  # type: ignore[index]
                            group = []
                        self._tombstone(url, record)
                        continue
                    target = (url, _fill(self.endpoint.batch_key, topic, key))
                    if group and (target != group_target or len(group) >= self.endpoint.batch_max):
                        self._send(group_target[0], group)  # type: ignore[index]
                        group = []
                    group_target = target
                    group.append((self._replace(body), topic, record[3], record[4]))
            if group:
                self._send(group_target[0], group)  # type: ignore[index]
        finally:
            self.session.close()
        return self.rejected

    def _replace(self, body: str) -> str:
        for pattern, replacement in self.endpoint.replacements:
            body = re.sub(pattern, replacement, body)
        return body

    def _body(self, group: list[tuple[str, Any, Any, Any]]) -> str:
        e = self.endpoint
        values = [g[0] for g in group]
        if e.json_array:
            return "[" + ",".join(values) + "]"
        return e.prefix + e.separator.join(values) + e.suffix

    def _tombstone(self, url: str, record: tuple[Any, ...]) -> None:
        on_null = self.endpoint.on_null
        where = _coordinates(record[1], record[3], record[4])
        if on_null == "fail":
            raise ConnectError(f"{self.name}: the record at {where} has a null value "
                               f"(behavior.on.null.values=fail)")
        if on_null == "log":
            log.warning("%s: skipped the record at %s with a null value (behavior.on.null.values=log)",
                        self.name, where)
        elif on_null == "delete":
            self._send(url, [("", record[1], record[3], record[4])], method="DELETE")

    def _send(self, url: str, group: list[tuple[str, Any, Any, Any]], method: str | None = None) -> None:
        import requests

        e = self.endpoint
        body = None if method == "DELETE" else self._body(group).encode()
        problem = ""
        response: Any = None
        for attempt in range(e.max_retries + 1):
            if attempt:
                time.sleep(self._delay(attempt, response))
            response = None
            try:
                response = self.session.request(method or e.method, url, data=body, headers=self._auth(),
                                                timeout=(e.connect_timeout, e.read_timeout))
            except requests.RequestException as error:
                problem = f"no answer ({type(error).__name__})"
                continue
            if response.status_code == 401 and e.oauth2 is not None and attempt == 0:
                self.token = None  # expired: fetch a new one and send again
            if response.status_code < 300:
                self.sent += len(group)
                return
            problem = f"HTTP {response.status_code} {response.reason}"
            log.debug("%s: %s answered %s: %.500s", self.name, _safe(url), problem, response.text)
            if response.status_code not in e.retry_codes and response.status_code != 401:
                break
        self._failed(url, group, problem)

    def _delay(self, attempt: int, response: Any) -> float:
        if response is not None and response.status_code == 429:
            after = response.headers.get("Retry-After", "")
            if after.isdigit():
                return float(after)
        base = self.endpoint.backoff_ms / 1000
        if self.endpoint.exponential:
            return random.uniform(0, base * 2 ** (attempt - 1))
        return base

    def _auth(self) -> dict[str, str]:
        oauth2 = self.endpoint.oauth2
        if oauth2 is None:
            return {}
        if self.token is None:
            self.token = _fetch_token(self.session, oauth2, self.endpoint, self.name)
        return {"Authorization": f"Bearer {self.token}"}

    def _failed(self, url: str, group: list[tuple[str, Any, Any, Any]], problem: str) -> None:
        e = self.endpoint
        first, last = group[0], group[-1]
        what = (f"{len(group)} record(s) from {_coordinates(first[1], first[2], first[3])} to "
                f"{_coordinates(last[1], last[2], last[3])}")
        message = f"{self.name}: {e.method} {_safe(url)} failed after {e.max_retries} retries: {problem} ({what})"
        if e.on_error == "fail":
            raise ConnectError(message + "; behavior.on.error=fail")
        if e.on_error == "log":
            log.warning("%s; behavior.on.error=log, going on", message)
        self.rejected.extend(RejectedRecord(g[1], g[2], g[3], message) for g in group)


def _fetch_token(session: Any, oauth2: OAuth2, endpoint: Endpoint, name: str) -> str:
    import requests

    form = {"grant_type": "client_credentials"}
    if oauth2.scope:
        form["scope"] = oauth2.scope
    headers = {}
    if oauth2.in_header:
        pair = f"{oauth2.client_id}:{oauth2.client_secret}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    else:
        form.update(client_id=oauth2.client_id, client_secret=oauth2.client_secret)
    try:
        answer = requests.post(oauth2.token_url, data=form, headers=headers, verify=endpoint.verify,
                               proxies=session.proxies, timeout=(endpoint.connect_timeout, endpoint.read_timeout))
    except requests.RequestException as error:
        raise ConnectError(f"{name}: no answer from the OAuth2 token URL {_safe(oauth2.token_url)} "
                           f"({type(error).__name__})") from None
    if answer.status_code >= 300:
        raise ConnectError(f"{name}: the OAuth2 token URL {_safe(oauth2.token_url)} refused the client "
                           f"credentials: HTTP {answer.status_code} {answer.reason}")
    try:
        return str(answer.json()[oauth2.token_property])
    except (ValueError, KeyError, TypeError):
        raise ConnectError(f"{name}: the answer of the OAuth2 token URL {_safe(oauth2.token_url)} has no "
                           f"{oauth2.token_property!r} property") from None


def _safe(url: str) -> str:
    """A URL for a message: without user info or query (a token in a query string stays out of logs)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _coordinates(topic: Any, partition: Any, offset: Any) -> str:
    return f"topic {topic!r} partition {partition} offset {offset}"


def _records(batch: Any, json_body: bool) -> Iterator[tuple[Any, ...]]:
    """(body, topic, key, partition, offset) of each row of an Arrow batch (missing columns as None)."""
    names = batch.schema.names
    rows = batch.num_rows

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * rows

    bodies = column(BODY) if BODY in names else [_text(v, json_body) for v in column("value")]
    keys = column("key")
    if keys and not all(k is None or isinstance(k, str) for k in keys):
        keys = [_text(k, False) for k in keys]
    yield from zip(bodies, column("topic"), keys, column("partition"), column("offset"))


class HttpSink(SinkConnector):
    """What both HTTP sinks do with their :class:`Endpoint`: check the input, send each task's records, hand the
    records of failed requests to the dead letter queue."""

    def endpoint(self) -> Endpoint:
        raise NotImplementedError

    @classmethod
    def json_body(cls, settings: Any) -> bool:
        """Whether a string value is sent as a JSON string (quoted)."""
        return False

    def validate_input(self, schema: Any) -> None:
        require_value(schema, type(self).__name__)
        self.endpoint()

    @classmethod
    def input_frame(cls, df: Any, settings: Any) -> Any:
        return bodies(df, cls.json_body(settings))

    def write(self, batches: Iterator[Any], ctx: WriteContext) -> Any:
        return Sender(self.endpoint(), self.name).send_all(batches)

    def commit(self, messages: Sequence[Any], ctx: CommitContext) -> None:
        self.last_rejected = [r for m in messages for r in m]
