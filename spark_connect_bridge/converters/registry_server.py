"""A small embedded Schema Registry with Confluent's REST API, persisted to SQLite.

For development, tests and machines without a Confluent registry: Avro and JSON Schema (``"schemaType":
"JSON"``, Confluent's REST shape), no Protobuf, no auth, no references to other subjects, one process. Ids
survive a restart (they live in the SQLite file). Binds 127.0.0.1 by default.

| Call | |
|---|---|
| ``GET /subjects`` (``?deleted=true``) | subject names |
| ``GET /subjects/{s}/versions`` | version numbers |
| ``GET /subjects/{s}/versions/{v or latest}`` (and ``/schema``) | ``{"subject","id","version","schema"}`` |
| ``POST /subjects/{s}/versions`` ``{"schema": ...}`` | register (idempotent; compatibility checked) -> ``{"id"}`` |
| ``POST /subjects/{s}`` | look up a schema under a subject |
| ``DELETE /subjects/{s}`` / ``/versions/{v}`` (``?permanent=true``) | soft (then hard) delete |
| ``GET /schemas/ids/{id}`` (``/versions``, ``/subjects``, ``/schema``) | a schema by id |
| ``GET /schemas/types`` | ``["AVRO", "JSON"]`` |
| ``GET|PUT /config``, ``GET|PUT|DELETE /config/{s}`` | compatibility level (default BACKWARD) |
| ``POST /compatibility/subjects/{s}/versions/{v or latest}`` (``?verbose=true``) | ``{"is_compatible"}`` |
| ``GET /mode`` | ``{"mode": "READWRITE"}`` |

A request's ``schemaType`` (``AVRO`` when absent) is kept with the schema and answered wherever Confluent's
registry answers it (by id, by version, on lookup), for types other than AVRO. Compatibility is checked within a
type (:mod:`.avro_compat`, :mod:`.json_schema_compat`); a new version of another type than the subject's latest
is incompatible unless the level is NONE.

Errors use Confluent's body ``{"error_code": 40401, "message": ...}``: 40401 subject not found, 40402
version not found, 40403 schema not found, 40404/40405 (soft-deleted / not soft-deleted), 409 incompatible
schema, 42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level.

>>> server = serve(port=0, db_path="/tmp/registry.db")    # doctest: +SKIP
>>> server.url                                            # doctest: +SKIP
'http://127.0.0.1:40123'
>>> server.shutdown()                                     # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, overload
from urllib.parse import parse_qs, unquote, urlsplit

from .avro_compat import LEVELS, AvroSchemaError, canonical, parse_avro
from .avro_compat import check_compatibility as check_avro
from .json_schema_compat import JsonSchemaError, parse_json_schema
from .json_schema_compat import check_compatibility as check_json

__all__ = ["RegistryStore", "RegistryServer", "RegistryHTTPError", "serve", "main"]

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_GLOBAL = "__GLOBAL__"
SCHEMA_TYPES = ("AVRO", "JSON")


class RegistryHTTPError(Exception):
    """A Confluent error: ``error_code`` (e.g. 40401) and message; HTTP status = the first three digits."""

    def __init__(self, error_code: int, message: str):
        super().__init__(message)
        self.error_code, self.message = error_code, message

    @property
    def status(self) -> int:
        return self.error_code if self.error_code < 1000 else int(str(self.error_code)[:3])


def _subject_not_found(s: str) -> RegistryHTTPError:
    return RegistryHTTPError(40401, f"Subject '{s}' not found.")


class RegistryStore:
    """The registry's state in SQLite (thread-safe through one lock)."""

    def __init__(self, db_path: str = ":memory:"):
        self._db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        with self._lock:
            self._db.executescript("""
                PRAGMA journal_mode=WAL;
                CREATE TABLE IF NOT EXISTS schemas (id INTEGER PRIMARY KEY AUTOINCREMENT, schema TEXT NOT NULL,
                    schema_type TEXT NOT NULL, fingerprint TEXT NOT NULL UNIQUE);
                CREATE TABLE IF NOT EXISTS versions (subject TEXT NOT NULL, version INTEGER NOT NULL,
                    schema_id INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (subject, version));
                CREATE TABLE IF NOT EXISTS config (subject TEXT PRIMARY KEY, compatibility TEXT NOT NULL);
            """)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _q(self, sql: str, *args: Any) -> list[tuple]:
        return self._db.execute(sql, args).fetchall()

    # -- reads --------------------------------------------------------------------------------------
    def subjects(self, deleted: bool = False) -> list[str]:
        with self._lock:
            sql = "SELECT DISTINCT subject FROM versions" + ("" if deleted else " WHERE deleted = 0")
            return sorted(r[0] for r in self._q(sql))

    def _versions(self, subject: str, deleted: bool = False) -> list[tuple[int, int]]:
        sql = "SELECT version, schema_id FROM versions WHERE subject = ?" + ("" if deleted else " AND deleted = 0")
        return sorted(self._q(sql + " ORDER BY version", subject))

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        with self._lock:
            vs = self._versions(subject, deleted)
            if not vs:
                raise _subject_not_found(subject)
            return [v for v, _ in vs]

    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        with self._lock:
            rows = self._q("SELECT schema, schema_type FROM schemas WHERE id = ?", schema_id)
            if not rows:
                raise RegistryHTTPError(40403, "Schema not found")
            return rows[0]

    def version(self, subject: str, version: str, deleted: bool = False) -> dict[str, Any]:
        with self._lock:
            vs = self._versions(subject, deleted)
            if not vs:
                raise _subject_not_found(subject)
            if version == "latest" or version == "-1":
                v, sid = vs[-1]
            else:
                try:
                    n = int(version)
                except ValueError:
                    raise RegistryHTTPError(42202, f"The specified version '{version}' is not a valid version id. "
                                                   f"Allowed values are between [1, 2^31-1] and the string "
                                                   f"\"latest\"") from None
                if n < 1:
                    raise RegistryHTTPError(42202, f"The specified version '{version}' is not a valid version id.")
                match = [x for x in vs if x[0] == n]
                if not match:
                    raise RegistryHTTPError(40402, f"Version {version} not found.")
                v, sid = match[0]
            schema, stype = self.schema_by_id(sid)
            out = {"subject": subject, "version": v, "id": sid, "schema": schema}
            if stype != "AVRO":
                out["schemaType"] = stype
            return out

    def ids_versions(self, schema_id: int) -> list[dict[str, Any]]:
        with self._lock:
            self.schema_by_id(schema_id)
            rows = self._q("SELECT subject, version FROM versions WHERE schema_id = ? AND deleted = 0 "
                           "ORDER BY subject, version", schema_id)
            return [{"subject": s, "version": v} for s, v in rows]

    @overload
    def compatibility(self, subject: str | None = None, *, default_to_global: Literal[True] = True) -> str: ...
    @overload
    def compatibility(self, subject: str | None = None, *, default_to_global: bool) -> str | None: ...

    def compatibility(self, subject: str | None = None, *, default_to_global: bool = True) -> str | None:
        """The subject's level; without one of its own, the global level (or None if not ``default_to_global``)."""
        with self._lock:
            if subject is not None:
                rows = self._q("SELECT compatibility FROM config WHERE subject = ?", subject)
                if rows:
                    return rows[0][0]
                if not default_to_global:
                    return None
            rows = self._q("SELECT compatibility FROM config WHERE subject = ?", _GLOBAL)
            return rows[0][0] if rows else "BACKWARD"

    # -- writes -------------------------------------------------------------------------------------
    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        level = str(level).upper()
        if level not in LEVELS:
            raise RegistryHTTPError(42203, "Invalid compatibility level. Valid values are none, backward, "
                                           "forward, full, backward_transitive, forward_transitive, and "
                                           "full_transitive")
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO config (subject, compatibility) VALUES (?, ?)",
                             (subject or _GLOBAL, level))
        return level

    def delete_compatibility(self, subject: str) -> str:
        with self._lock:
            prev = self.compatibility(subject, default_to_global=False)
            if prev is None:
                raise _subject_not_found(subject)
            self._db.execute("DELETE FROM config WHERE subject = ?", (subject,))
            return prev

    @staticmethod
    def _parse(schema: Any, schema_type: str | None) -> tuple[str, str, str]:
        stype = (schema_type or "AVRO").upper()
        if stype not in SCHEMA_TYPES:
            raise RegistryHTTPError(42201, f"Invalid schema: schema type {stype} is not supported by this "
                                           f"registry ({', '.join(SCHEMA_TYPES)})")
        if not isinstance(schema, str):
            raise RegistryHTTPError(42201, "Invalid schema: \"schema\" must be a string")
        try:
            obj = parse_avro(schema).obj if stype == "AVRO" else parse_json_schema(schema)
        except (AvroSchemaError, JsonSchemaError) as e:
            raise RegistryHTTPError(42201, str(e)) from e
        text = json.dumps(obj, separators=(",", ":"))
        return text, stype, stype + ":" + canonical(obj)

    def _problems(self, text: str, stype: str, existing_ids: list[int], level: str) -> list[str]:
        """Compatibility problems of ``text`` (of ``stype``) against the schemas of ``existing_ids``."""
        existing = [self.schema_by_id(i) for i in existing_ids]
        if level != "NONE" and existing and existing[-1][1] != stype:
            return [f"the subject's latest schema is {existing[-1][1]}, the new one {stype}"]
        same = [s for s, t in existing if t == stype]
        check = check_avro if stype == "AVRO" else check_json
        return check(text, same, level)

    def lookup(self, subject: str, schema: Any, schema_type: str | None = None,
               deleted: bool = False) -> dict[str, Any]:
        text, stype, fp = self._parse(schema, schema_type)
        with self._lock:
            vs = self._versions(subject, deleted)
            if not vs:
                raise _subject_not_found(subject)
            rows = self._q("SELECT id FROM schemas WHERE fingerprint = ?", fp)
            sid = rows[0][0] if rows else None
            for v, vid in vs:
                if vid == sid:
                    out = {"subject": subject, "id": sid, "version": v, "schema": text}
                    return out if stype == "AVRO" else {**out, "schemaType": stype}
            raise RegistryHTTPError(40403, "Schema not found")

    def register(self, subject: str, schema: Any, schema_type: str | None = None) -> dict[str, Any]:
        text, stype, fp = self._parse(schema, schema_type)
        with self._lock:
            vs = self._versions(subject)
            rows = self._q("SELECT id FROM schemas WHERE fingerprint = ?", fp)
            sid = rows[0][0] if rows else None
            for v, vid in vs:
                if vid == sid:
                    return {"id": sid, "subject": subject, "version": v, "schema": text}
            if vs:
                problems = self._problems(text, stype, [vid for _, vid in vs], self.compatibility(subject))
                if problems:
                    raise RegistryHTTPError(409, "Schema being registered is incompatible with an earlier schema "
                                                 f"for subject \"{subject}\", details: " + "; ".join(problems))
            if sid is None:
                cur = self._db.execute("INSERT INTO schemas (schema, schema_type, fingerprint) VALUES (?, ?, ?)",
                                       (text, stype, fp))
                sid = cur.lastrowid
            all_vs = self._q("SELECT MAX(version) FROM versions WHERE subject = ?", subject)
            version = (all_vs[0][0] or 0) + 1
            self._db.execute("INSERT INTO versions (subject, version, schema_id) VALUES (?, ?, ?)",
                             (subject, version, sid))
            return {"id": sid, "subject": subject, "version": version, "schema": text}

    def test_compatibility(self, subject: str, schema: Any, version: str | None,
                           schema_type: str | None = None) -> list[str]:
        text, stype, _ = self._parse(schema, schema_type)
        with self._lock:
            vs = self._versions(subject)
            if not vs:
                if version in (None, "latest"):
                    return []
                raise _subject_not_found(subject)
            level = self.compatibility(subject)
            if version is None:  # against every version the level looks at
                return self._problems(text, stype, [vid for _, vid in vs], level)
            one = self.version(subject, version)["id"]
            return self._problems(text, stype, [one], level.removesuffix("_TRANSITIVE"))

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        with self._lock:
            all_vs = self._versions(subject, deleted=True)
            if not all_vs:
                raise _subject_not_found(subject)
            live = self._versions(subject)
            if permanent:
                if live:
                    raise RegistryHTTPError(40405, f"Subject '{subject}' was not deleted first before being "
                                                   f"permanently deleted")
                self._db.execute("DELETE FROM versions WHERE subject = ?", (subject,))
                self._db.execute("DELETE FROM config WHERE subject = ?", (subject,))
                return [v for v, _ in all_vs]
            if not live:
                raise RegistryHTTPError(40404, f"Subject '{subject}' was soft deleted.Set permanent=true to "
                                               f"delete permanently")
            self._db.execute("UPDATE versions SET deleted = 1 WHERE subject = ?", (subject,))
            return [v for v, _ in live]

    def delete_version(self, subject: str, version: str, permanent: bool = False) -> int:
        with self._lock:
            info = self.version(subject, version, deleted=permanent)
            v = info["version"]
            if permanent:
                row = self._q("SELECT deleted FROM versions WHERE subject = ? AND version = ?", subject, v)
                if row and not row[0][0]:
                    raise RegistryHTTPError(40407, f"Subject '{subject}' Version {v} was not deleted first before "
                                                   f"being permanently deleted")
                self._db.execute("DELETE FROM versions WHERE subject = ? AND version = ?", (subject, v))
            else:
                self._db.execute("UPDATE versions SET deleted = 1 WHERE subject = ? AND version = ?", (subject, v))
            return v


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [(m, re.compile("^" + p + "$"), h) for m, p, h in [
    ("GET", r"/?", "root"),
    ("GET", r"/subjects", "subjects"),
    ("GET", r"/subjects/(?P<s>[^/]+)/versions", "versions"),
    ("POST", r"/subjects/(?P<s>[^/]+)/versions", "register"),
    ("GET", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", "version"),
    ("GET", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)/schema", "version_schema"),
    ("DELETE", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", "delete_version"),
    ("POST", r"/subjects/(?P<s>[^/]+)", "lookup"),
    ("DELETE", r"/subjects/(?P<s>[^/]+)", "delete_subject"),
    ("GET", r"/schemas/types", "types"),
    ("GET", r"/schemas/ids/(?P<id>-?\d+)", "schema_by_id"),
    ("GET", r"/schemas/ids/(?P<id>-?\d+)/schema", "schema_text_by_id"),
    ("GET", r"/schemas/ids/(?P<id>-?\d+)/versions", "id_versions"),
    ("GET", r"/schemas/ids/(?P<id>-?\d+)/subjects", "id_subjects"),
    ("GET", r"/config", "get_config"),
    ("PUT", r"/config", "put_config"),
    ("GET", r"/config/(?P<s>[^/]+)", "get_config"),
    ("PUT", r"/config/(?P<s>[^/]+)", "put_config"),
    ("DELETE", r"/config/(?P<s>[^/]+)", "delete_config"),
    ("POST", r"/compatibility/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", "compatibility"),
    ("POST", r"/compatibility/subjects/(?P<s>[^/]+)/versions", "compatibility"),
    ("GET", r"/mode", "mode"),
    ("GET", r"/mode/(?P<s>[^/]+)", "mode"),
]]


def _flag(q: dict[str, list[str]], name: str) -> bool:
    return q.get(name, ["false"])[-1].lower() == "true"


class _Handler(BaseHTTPRequestHandler):
    server: RegistryServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("registry %s - %s", self.address_string(), format % args)

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            raise RegistryHTTPError(42201, "Invalid schema: the request body is not JSON") from None
        if not isinstance(body, dict):
            raise RegistryHTTPError(42201, "Invalid schema: the request body must be a JSON object")
        return body

    def _schema_body(self) -> dict[str, Any]:
        """A register/lookup/compatibility body; schema references are refused (this registry has none)."""
        b = self._body()
        if b.get("references"):
            raise RegistryHTTPError(42201, "Invalid schema: schema references are not supported by this registry")
        return b

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        q = parse_qs(parts.query)
        path = parts.path.rstrip("/") or "/"
        try:
            for m, pattern, handler in _ROUTES:
                match = pattern.match(path)
                if m == method and match:
                    args = {k: unquote(v) for k, v in match.groupdict().items()}
                    status, body = getattr(self, "h_" + handler)(q, **args)
                    self._send(status, body)
                    return
            self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
        except RegistryHTTPError as e:
            self._send(e.status, {"error_code": e.error_code, "message": e.message})
        except Exception as e:
            log.exception("registry request failed: %s %s", method, path)
            self._send(500, {"error_code": 50001, "message": f"Error in the backend data store: {e}"})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- handlers -----------------------------------------------------------------------------------
    @property
    def store(self) -> RegistryStore:
        return self.server.store

    def h_root(self, q):
        return 200, {}

    def h_subjects(self, q):
        return 200, self.store.subjects(_flag(q, "deleted"))

    def h_versions(self, q, s):
        return 200, self.store.versions(s, _flag(q, "deleted"))

    def h_register(self, q, s):
        b = self._schema_body()
        return 200, self.store.register(s, b.get("schema"), b.get("schemaType"))

    def h_version(self, q, s, v):
        return 200, self.store.version(s, v, _flag(q, "deleted"))

    def h_version_schema(self, q, s, v):
        return 200, json.loads(self.store.version(s, v)["schema"])

    def h_delete_version(self, q, s, v):
        return 200, self.store.delete_version(s, v, _flag(q, "permanent"))

    def h_lookup(self, q, s):
        b = self._schema_body()
        return 200, self.store.lookup(s, b.get("schema"), b.get("schemaType"), _flag(q, "deleted"))

    def h_delete_subject(self, q, s):
        return 200, self.store.delete_subject(s, _flag(q, "permanent"))

    def h_types(self, q):
        return 200, list(SCHEMA_TYPES)

    def h_schema_by_id(self, q, id):
        schema, stype = self.store.schema_by_id(int(id))
        return 200, ({"schema": schema} if stype == "AVRO" else {"schema": schema, "schemaType": stype})

    def h_schema_text_by_id(self, q, id):
        return 200, json.loads(self.store.schema_by_id(int(id))[0])

    def h_id_versions(self, q, id):
        return 200, self.store.ids_versions(int(id))

    def h_id_subjects(self, q, id):
        return 200, sorted({x["subject"] for x in self.store.ids_versions(int(id))})

    def h_get_config(self, q, s=None):
        level = self.store.compatibility(s, default_to_global=s is None or _flag(q, "defaultToGlobal"))
        if level is None:
            raise RegistryHTTPError(40408, f"Subject '{s}' does not have subject-level compatibility configured")
        return 200, {"compatibilityLevel": level}

    def h_put_config(self, q, s=None):
        b = self._body()
        return 200, {"compatibility": self.store.set_compatibility(b.get("compatibility", ""), s)}

    def h_delete_config(self, q, s):
        return 200, {"compatibilityLevel": self.store.delete_compatibility(s)}

    def h_compatibility(self, q, s, v=None):
        b = self._schema_body()
        problems = self.store.test_compatibility(s, b.get("schema"), v, b.get("schemaType"))
        body: dict[str, Any] = {"is_compatible": not problems}
        if _flag(q, "verbose"):
            body["messages"] = problems
        return 200, body

    def h_mode(self, q, s=None):
        return 200, {"mode": "READWRITE"}


class RegistryServer(ThreadingHTTPServer):
    """The running registry: ``url``, ``store`` and ``shutdown()`` (stops serving and closes the store)."""

    daemon_threads = True

    def __init__(self, host: str, port: int, store: RegistryStore):
        super().__init__((host, port), _Handler)
        self.store = store
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.socket.getsockname()[:2]  # what server_address holds, typed for any socket family
        return f"http://{host}:{port}"

    def start(self) -> RegistryServer:
        self._thread = threading.Thread(target=self.serve_forever, name="schema-registry", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        super().shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.store.close()


def serve(host: str = "127.0.0.1", port: int = 8081, db_path: str = "schema-registry.db") -> RegistryServer:
    """Start the registry in a background thread; ``port=0`` picks a free port. Returns the server
    (``.url``, ``.shutdown()``)."""
    server = RegistryServer(host, port, RegistryStore(db_path))
    return server.start()


def main(argv: list[str] | None = None) -> int:
    """``kconnect schema-registry [--host 127.0.0.1] [--port 8081] [--db schema-registry.db]``: serve until
    interrupted."""
    p = argparse.ArgumentParser(prog="kconnect schema-registry",
                                description="An embedded Confluent-compatible Schema Registry (Avro, JSON Schema; "
                                            "SQLite).")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8081, help="port (default 8081; 0 = any free port)")
    p.add_argument("--db", default="schema-registry.db", help="SQLite file (default ./schema-registry.db)")
    args = p.parse_args(argv)
    server = RegistryServer(args.host, args.port, RegistryStore(args.db))
    print(f"Schema Registry listening on {server.url} (db {args.db})", flush=True)  # CLI output, not library
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.store.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
