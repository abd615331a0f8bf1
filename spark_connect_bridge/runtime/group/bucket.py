"""The :class:`~.store.GroupStore` in an S3 bucket: one JSON object per group, changed by compare-and-swap.

``group.store.url=s3a://bucket/prefix`` keeps the group's members, connector states, assignments and statuses in
the object ``prefix/<group.id>/group.json``, reached with the worker's S3A settings
(``spark.hadoop.fs.s3a.endpoint``, ``...path.style.access``, ``...access.key``/``secret.key``, per bucket too, as
:class:`~spark_connect_bridge.core.locations.Locations` reads them). S3's conditional writes make it a store a
group can fence on:

* every change reads the object (its bytes and ETag), changes the document and PUTs it back with
  ``If-Match: <etag>`` (the first with ``If-None-Match: *``); a PUT that another worker's change beat is refused
  (412) and the change is decided again on what that worker wrote. So every change is atomic across the group:
  of workers creating one name at once exactly one stores it, rebalances run one at a time, and every new owner's
  epoch (a counter in the document) is larger than any before it.
* the document carries a version counter bumped by every change, so its bytes, and its ETag (an MD5 on S3), never
  repeat: a compare-and-swap cannot mistake a later document for the one it read; and the tokens of its last
  changes, so a worker whose PUT landed but whose answer was lost (a retried request then gets 412) knows it won.
* time is the bucket's: a lease's expiry is counted on the ``Date`` of the server's response to the read the
  change decides on. HTTP dates are cut to the second, so a lease is counted from the end of the renewal's second:
  it lasts ``session.timeout.ms`` to a second more, never less (a live worker is not dropped early).

A commit's fence check (:func:`check`) is one GET of the object. Every worker of the group PUTs the one object
(each heartbeat, each status report): fine for a group of a few workers; S3 allows thousands of writes a second
per prefix.

>>> store = BucketGroupStore("s3a://lake/kconnect", "connect-cluster",             # doctest: +SKIP
...                          {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000"})
>>> store.join("10.0.0.5:8083", "http://10.0.0.5:8083", 10_000)                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from ...core.locations import Locations
from ...errors import ConnectError
from .fencing import refuse_unless_held
from .store import Assignment, GroupView, Member, Move, StoredConnector

__all__ = ["BucketGroupStore", "BUCKET_CHECK", "check", "object_name"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A change beaten this many times in a row by other workers' changes fails (the heartbeat tries again).
_ATTEMPTS = 50
#: The tokens of the last changes the group's document keeps (see ``BucketGroupStore._change``).
_TOKENS = 64


def object_name(url: str, group_id: str) -> tuple[str, str]:
    """The bucket and the key of ``group_id``'s document under ``url`` (``s3a://bucket/prefix``).

    >>> object_name("s3a://lake/kconnect/", "connect-cluster")
    ('lake', 'kconnect/connect-cluster/group.json')
    """
    parts = urlsplit(url.strip())
    prefix = parts.path.strip("/")
    key = f"{quote(group_id, safe='')}/group.json"
    return parts.netloc, f"{prefix}/{key}" if prefix else key


def _client(url: str, hadoop: Mapping[str, Any]) -> Any:
    """A boto3 S3 client for ``url``'s bucket with the worker's S3A settings (else the AWS default chain)."""
    try:
        return Locations(hadoop).s3_client(url)
    except ImportError as e:  # pragma: no cover - boto3 is the s3 extra's
        raise ConnectError("A worker group in a bucket (group.store.url=s3a://...) needs boto3: "
                           "pip install 'spark_connect_bridge[s3]'") from e


def _code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _reason(error: Exception) -> str:
    """What the bucket (or the connection) said, without the request's credentials."""
    code = _code(error)
    if code:
        message = (getattr(error, "response", None) or {}).get("Error", {}).get("Message", "")
        return f"{code}: {message}" if message else code
    return type(error).__name__


def _server_ms(response: Mapping[str, Any]) -> int:
    """The bucket's clock: the ``Date`` of its response, in epoch milliseconds."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        raise ConnectError("The group's bucket sent no Date header: the group's leases are counted on its clock")
    return int(parsedate_to_datetime(date).timestamp() * 1000)


def _lease_end(now: int, session_timeout_ms: int) -> int:
    """When a lease renewed at the bucket's ``now`` runs out: ``now`` is the ``Date`` cut to the second, so the renewal
    happened up to a second later; a lease is never shorter than ``session.timeout.ms`` (up to a second longer)."""
    return now + 999 + int(session_timeout_ms)


def _empty() -> dict[str, Any]:
    return {"version": 0, "epoch": 0, "members": {}, "connectors": {}, "assignments": {}}


def _read(client: Any, bucket: str, key: str) -> tuple[dict[str, Any], str | None, int]:
    """The group's document, its ETag (None: no document yet) and the bucket's time of the read."""
    try:
        got = client.get_object(Bucket=bucket, Key=key)
    except Exception as e:
        if _code(e) in ("NoSuchKey", "404"):
            return _empty(), None, _server_ms(getattr(e, "response", {}))
        raise
    return json.loads(got["Body"].read()), got["ETag"], _server_ms(got)


class BucketGroupStore:
    """A group's shared state in a bucket (see the module docstring). ``hadoop``: the worker's Spark settings,
    of which the ``spark.hadoop.fs.s3a.*`` keys count. Thread-safe (one client; each change is its own CAS)."""

    def __init__(self, url: str, group_id: str, hadoop: Mapping[str, Any] | None = None, *,
                 rebalance_delay_ms: int = 0):
        self.url, self.group_id = url, group_id
        self.rebalance_delay_ms = int(rebalance_delay_ms)
        self.bucket, self.key = object_name(url, group_id)
        self._client = _client(url, hadoop or {})
        self._lock = threading.Lock()  # one change of this worker at a time (others' are refused by the CAS)
        from botocore.exceptions import BotoCoreError, ClientError

        try:  # as the PostgreSQL store connects: a worker that cannot reach its group does not start
            _read(self._client, self.bucket, self.key)
        except (BotoCoreError, ClientError) as e:
            self._client.close()
            raise ConnectError(f"Cannot reach the worker group's store at s3a://{self.bucket}/{self.key} "
                               f"(group.store.url): {_reason(e)}") from None

    def __repr__(self) -> str:  # the location, never a key
        return f"BucketGroupStore(s3a://{self.bucket}/{self.key}, group_id={self.group_id!r})"

    def close(self) -> None:
        self._client.close()

    # -- the document -------------------------------------------------------------------------------
    def _view(self) -> tuple[dict[str, Any], int]:
        doc, _, now = _read(self._client, self.bucket, self.key)
        return doc, now

    def _change(self, change: Callable[[dict[str, Any], int], tuple[T, bool]]) -> T:
        """Apply ``change(doc, now) -> (result, changed)`` atomically: read, change, PUT on the ETag read; decided
        again on the new document when another worker's PUT came first.

        Each PUT carries a token the document keeps among its last :data:`_TOKENS`: a PUT that landed but whose answer
        was lost (the client's retry of it then finds the object changed, by itself, and gets 412) is recognised on
        the next read and its result returned, rather than the change decided again on its own outcome (a create
        would then answer "exists")."""
        with self._lock:
            sent: list[tuple[str, T]] = []
            for attempt in range(_ATTEMPTS):
                doc, etag, now = _read(self._client, self.bucket, self.key)
                kept = doc.get("changes", [])
                for token, result in sent:
                    if token in kept:
                        return result
                result, changed = change(doc, now)
                if not changed:
                    return result
                token = uuid.uuid4().hex
                doc["version"] = int(doc.get("version", 0)) + 1
                doc["changes"] = [*kept, token][-_TOKENS:]
                condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
                try:
                    self._client.put_object(Bucket=self.bucket, Key=self.key, Body=json.dumps(doc).encode("utf-8"),
                                            ContentType="application/json", **condition)
                    return result
                except Exception as e:
                    # 412: another worker's change came first; 409: one is under way (S3 asks to retry)
                    if _code(e) not in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
                        raise
                    sent.append((token, result))
                time.sleep(random.uniform(0, min(0.5, 0.01 * 2 ** attempt)))
        raise ConnectError(f"Group {self.group_id}: {_ATTEMPTS} changes of s3a://{self.bucket}/{self.key} in a row "
                           f"were beaten by other workers' changes")

    # -- membership ---------------------------------------------------------------------------------
    def join(self, worker_id: str, url: str, session_timeout_ms: int) -> None:
        def change(doc: dict[str, Any], now: int) -> tuple[None, bool]:
            doc["members"][worker_id] = {"url": url, "expires": _lease_end(now, session_timeout_ms)}
            return None, True

        self._change(change)

    def heartbeat(self, worker_id: str, session_timeout_ms: int) -> bool:
        def change(doc: dict[str, Any], now: int) -> tuple[bool, bool]:
            member = doc["members"].get(worker_id)
            if member is None or member["expires"] <= now:
                return False, False
            member["expires"] = _lease_end(now, session_timeout_ms)
            return True, True

        return self._change(change)

    def leave(self, worker_id: str) -> None:
        self._change(lambda doc, now: (None, doc["members"].pop(worker_id, None) is not None))

    def members(self) -> list[Member]:
        doc, now = self._view()
        return [m for m in self._members(doc, now) if m.live]

    def _members(self, doc: dict[str, Any], now: int) -> list[Member]:
        return [Member(w, m["url"], m["expires"] > now, m["expires"] + self.rebalance_delay_ms <= now)
                for w, m in sorted(doc["members"].items())]

    # -- connector states ---------------------------------------------------------------------------
    def put_connector(self, name: str, doc: dict[str, Any], *, create: bool = False) -> bool:
        def change(group: dict[str, Any], now: int) -> tuple[bool, bool]:
            stored = group["connectors"].get(name)
            if (stored is not None) == create:  # create: only a new name; replace: only one that exists
                return False, False
            if stored is None:
                group["connectors"][name] = {"doc": doc, "restarts": 0, "only_failed": False}
            else:
                stored["doc"] = doc
            return True, True

        return self._change(change)

    def get_connector(self, name: str) -> StoredConnector | None:
        stored = self._view()[0]["connectors"].get(name)
        return _stored(name, stored) if stored else None

    def connectors(self) -> list[StoredConnector]:
        return [_stored(n, s) for n, s in sorted(self._view()[0]["connectors"].items())]

    def delete_connector(self, name: str) -> bool:
        def change(doc: dict[str, Any], now: int) -> tuple[bool, bool]:
            deleted = doc["connectors"].pop(name, None) is not None
            return deleted, deleted

        return self._change(change)

    def request_restart(self, name: str, *, only_failed: bool = False) -> None:
        def change(doc: dict[str, Any], now: int) -> tuple[None, bool]:
            stored = doc["connectors"].get(name)
            if stored is None:
                return None, False
            stored["restarts"] += 1
            stored["only_failed"] = bool(only_failed)
            return None, True

        self._change(change)

    # -- assignments --------------------------------------------------------------------------------
    def rebalance(self, decide: Callable[[GroupView], list[Move]]) -> list[Move]:
        """See :meth:`GroupStore.rebalance`; ``decide`` may run more than once (again on the newer document when
        another worker's change came first): only the decision that is stored counts."""
        def change(doc: dict[str, Any], now: int) -> tuple[list[Move], bool]:
            members = self._members(doc, now)
            view = GroupView(tuple(members), tuple(sorted(doc["connectors"])), _assignments(doc))
            moves = decide(view)
            for move in moves:
                assigned = doc["assignments"]
                if move.worker_id is None:
                    assigned.pop(move.connector, None)
                elif move.pending:
                    if move.connector in assigned:
                        assigned[move.connector]["pending_worker"] = move.worker_id
                else:
                    doc["epoch"] += 1
                    assigned[move.connector] = {"worker_id": move.worker_id, "epoch": doc["epoch"],
                                                "pending_worker": None, "state": "UNASSIGNED", "trace": None,
                                                "metrics": {}}
            owners = {a["worker_id"] for a in doc["assignments"].values()}
            forgotten = [m.worker_id for m in members if m.gone and m.worker_id not in owners]
            for worker in forgotten:  # gone for good and owning nothing any more
                del doc["members"][worker]
            return moves, bool(moves or forgotten)

        return self._change(change)

    def assignments(self) -> dict[str, Assignment]:
        return _assignments(self._view()[0])

    def release(self, connector: str, worker_id: str, epoch: int) -> bool:
        def change(doc: dict[str, Any], now: int) -> tuple[bool, bool]:
            a = doc["assignments"].get(connector)
            if a is None or a["worker_id"] != worker_id or a["epoch"] != epoch or not a["pending_worker"]:
                return False, False
            doc["epoch"] += 1
            doc["assignments"][connector] = {"worker_id": a["pending_worker"], "epoch": doc["epoch"],
                                             "pending_worker": None, "state": "UNASSIGNED", "trace": None,
                                             "metrics": {}}
            return True, True

        return self._change(change)

    def report(self, connector: str, worker_id: str, epoch: int, state: str, trace: str | None,
               metrics: dict[str, Any]) -> bool:
        def change(doc: dict[str, Any], now: int) -> tuple[bool, bool]:
            a = doc["assignments"].get(connector)
            if a is None or a["worker_id"] != worker_id or a["epoch"] != epoch:
                return False, False
            a.update(state=state, trace=trace, metrics=metrics)
            return True, True

        return self._change(change)

    def current_epoch(self, connector: str) -> tuple[str | None, int] | None:
        a = self._view()[0]["assignments"].get(connector)
        return (a["worker_id"], int(a["epoch"])) if a else None


def _stored(name: str, stored: dict[str, Any]) -> StoredConnector:
    return StoredConnector(name, stored["doc"], int(stored["restarts"]), bool(stored["only_failed"]))


def _assignments(doc: dict[str, Any]) -> dict[str, Assignment]:
    return {c: Assignment(c, a["worker_id"], int(a["epoch"]), a["pending_worker"], a["state"], a["trace"],
                          a["metrics"] or {})
            for c, a in doc["assignments"].items()}


def check(doc: dict[str, Any], connector: str, epoch: int) -> None:
    """The bucket store's check: raise :class:`~spark_connect_bridge.errors.FencedError` unless ``doc``'s worker
    still holds ``connector`` under ``epoch`` (one GET of the group's object)."""
    bucket, key = object_name(doc["url"], doc["group"])
    client = _client(doc["url"], doc.get("hadoop") or {})
    try:
        group, _, _ = _read(client, bucket, key)
    finally:
        client.close()
    held = group["assignments"].get(connector)
    refuse_unless_held(doc, connector, epoch, (held["worker_id"], int(held["epoch"])) if held else None)


#: The checker of a fence file of a group in a bucket.
BUCKET_CHECK = f"{__name__}:check"
