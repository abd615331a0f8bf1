"""The embedded Schema Registry: Confluent REST behaviour, compatibility rules (Avro and JSON Schema),
persistence; the client."""

from __future__ import annotations

import json

import pytest
import requests

from spark_connect_bridge.converters.avro_compat import can_read, check_compatibility
from spark_connect_bridge.converters.json_schema_compat import can_read as json_can_read
from spark_connect_bridge.converters.registry_server import serve
from spark_connect_bridge.converters.schema_registry import SchemaRegistryClient, SchemaRegistryError
from spark_connect_bridge.errors import RetriableError


def rec(*fields, name="R"):
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "string", "default": "x"}
B = {"name": "b", "type": "string"}


@pytest.fixture
def server(tmp_path):
    s = serve(port=0, db_path=str(tmp_path / "r.db"))
    yield s
    s.shutdown()


def call(server, method, path, body=None):
    r = requests.request(method, server.url + path, json=body, timeout=10)
    return r.status_code, r.json(), r.headers.get("Content-Type")


def test_register_lookup_and_versions(server):
    st, body, ctype = call(server, "POST", "/subjects/t-value/versions", {"schema": rec(A)})
    assert st == 200 and body["id"] == 1 and ctype == "application/vnd.schemaregistry.v1+json"
    assert call(server, "POST", "/subjects/t-value/versions", {"schema": rec(A)})[1]["id"] == 1  # idempotent
    assert call(server, "POST", "/subjects/other-value/versions", {"schema": rec(A)})[1]["id"] == 1  # shared id
    assert call(server, "POST", "/subjects/t-value/versions", {"schema": rec(A, B_DEFAULT)})[1]["id"] == 2
    assert call(server, "GET", "/subjects")[1] == ["other-value", "t-value"]
    assert call(server, "GET", "/subjects/t-value/versions")[1] == [1, 2]
    latest = call(server, "GET", "/subjects/t-value/versions/latest")[1]
    assert (latest["version"], latest["id"], latest["subject"]) == (2, 2, "t-value")
    assert json.loads(call(server, "GET", "/schemas/ids/1")[1]["schema"]) == json.loads(rec(A))
    found = call(server, "POST", "/subjects/t-value", {"schema": rec(A)})[1]
    assert (found["id"], found["version"]) == (1, 1)
    assert call(server, "GET", "/schemas/ids/1/versions")[1] == [{"subject": "other-value", "version": 1},
                                                                  {"subject": "t-value", "version": 1}]
    assert call(server, "GET", "/subjects/t-value/versions/1/schema")[1] == json.loads(rec(A))
    assert call(server, "GET", "/schemas/types")[1] == ["AVRO", "JSON"]


@pytest.mark.parametrize("method,path,body,status,code", [
    ("GET", "/subjects/nope/versions", None, 404, 40401),
    ("GET", "/subjects/s/versions/9", None, 404, 40402),
    ("GET", "/schemas/ids/99", None, 404, 40403),
    ("POST", "/subjects/s", {"schema": '"long"'}, 404, 40403),
    ("POST", "/subjects/s/versions", {"schema": "{not avro"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": '{"type": "record", "name": "X"}'}, 422, 42201),
    ("GET", "/subjects/s/versions/abc", None, 422, 42202),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("POST", "/subjects/s/versions", {"schema": '"long"'}, 409, 409),
])
def test_error_codes(server, method, path, body, status, code):
    call(server, "POST", "/subjects/s/versions", {"schema": '"string"'})
    st, out, _ = call(server, method, path, body)
    assert (st, out["error_code"]) == (status, code) and out["message"]


def test_soft_and_hard_delete(server):
    call(server, "POST", "/subjects/s/versions", {"schema": rec(A)})
    call(server, "POST", "/subjects/s/versions", {"schema": rec(A, B_DEFAULT)})
    assert call(server, "DELETE", "/subjects/s/versions/1")[1] == 1
    assert call(server, "GET", "/subjects/s/versions")[1] == [2]
    assert call(server, "DELETE", "/subjects/s?permanent=true")[1]["error_code"] == 40405
    assert call(server, "DELETE", "/subjects/s")[1] == [2]
    assert call(server, "GET", "/subjects")[1] == []
    assert call(server, "GET", "/subjects?deleted=true")[1] == ["s"]
    assert call(server, "DELETE", "/subjects/s?permanent=true")[1] == [1, 2]
    assert call(server, "GET", "/subjects?deleted=true")[1] == []
    assert call(server, "GET", "/schemas/ids/1")[0] == 200  # ids stay resolvable


def test_config_levels_and_compatibility_endpoint(server):
    assert call(server, "GET", "/config")[1] == {"compatibilityLevel": "BACKWARD"}
    assert call(server, "PUT", "/config/s", {"compatibility": "forward"})[1] == {"compatibility": "FORWARD"}
    assert call(server, "GET", "/config/s")[1] == {"compatibilityLevel": "FORWARD"}
    assert call(server, "GET", "/config/x")[1]["error_code"] == 40408
    assert call(server, "GET", "/config/x?defaultToGlobal=true")[1] == {"compatibilityLevel": "BACKWARD"}
    call(server, "POST", "/subjects/s/versions", {"schema": rec(A)})
    # FORWARD: the old schema must read new data; adding a field without default is fine, removing 'a' is not.
    ok = call(server, "POST", "/compatibility/subjects/s/versions/latest", {"schema": rec(A, B)})[1]
    assert ok == {"is_compatible": True}
    bad = call(server, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": rec(B)})[1]
    assert bad["is_compatible"] is False and "'a'" in bad["messages"][0]
    assert call(server, "DELETE", "/config/s")[1] == {"compatibilityLevel": "FORWARD"}


def test_ids_survive_a_restart(tmp_path):
    db = str(tmp_path / "keep.db")
    s = serve(port=0, db_path=db)
    sid = SchemaRegistryClient(s.url).register("k", rec(A))
    s.shutdown()
    s2 = serve(port=0, db_path=db)
    try:
        c = SchemaRegistryClient(s2.url)
        assert json.loads(c.get_schema(sid)) == json.loads(rec(A))
        assert c.register("k2", rec(A, B_DEFAULT)) == sid + 1
    finally:
        s2.shutdown()


# -- compatibility rules (Avro schema resolution) ------------------------------------------------------

RULES = [
    ("added field with default", rec(A, B_DEFAULT), rec(A), True),
    ("added field without default", rec(A, B), rec(A), False),
    ("removed field", rec(A), rec(A, B), True),
    ("int promoted to long", rec({"name": "a", "type": "long"}), rec(A), True),
    ("long narrowed to int", rec(A), rec({"name": "a", "type": "long"}), False),
    ("int to double", '"double"', '"int"', True),
    ("float to double", '"double"', '"float"', True),
    ("double to float", '"float"', '"double"', False),
    ("string to bytes", '"bytes"', '"string"', True),
    ("bytes to string", '"string"', '"bytes"', True),
    ("string to int", '"int"', '"string"', False),
    ("value into optional union", '["null", "int"]', '"int"', True),
    ("union into non-union", '"int"', '["null", "int"]', False),
    ("union subset", '["null", "int", "string"]', '["null", "int"]', True),
    ("union branch promoted", '["null", "long"]', '["null", "int"]', True),
    ("enum symbol added", '{"type":"enum","name":"E","symbols":["A","B","C"]}',
     '{"type":"enum","name":"E","symbols":["A","B"]}', True),
    ("enum symbol removed", '{"type":"enum","name":"E","symbols":["A"]}',
     '{"type":"enum","name":"E","symbols":["A","B"]}', False),
    ("enum symbol removed with default", '{"type":"enum","name":"E","symbols":["A"],"default":"A"}',
     '{"type":"enum","name":"E","symbols":["A","B"]}', True),
    ("record renamed", rec(A, name="S"), rec(A, name="R"), False),
    ("record renamed with alias", json.dumps({"type": "record", "name": "S", "aliases": ["R"], "fields": [A]}),
     rec(A, name="R"), True),
    ("namespace change", json.dumps({"type": "record", "name": "R", "namespace": "x", "fields": [A]}), rec(A), True),
    ("fixed size change", '{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"F","size":8}', False),
    ("array items promoted", '{"type":"array","items":"long"}', '{"type":"array","items":"int"}', True),
    ("map values narrowed", '{"type":"map","values":"int"}', '{"type":"map","values":"long"}', False),
    ("field alias", rec({"name": "c", "type": "int", "aliases": ["a"]}), rec(A), True),
    ("recursive record", json.dumps({"type": "record", "name": "L", "fields": [
        {"name": "next", "type": ["null", "L"]}, {"name": "v", "type": "long"}]}),
     json.dumps({"type": "record", "name": "L", "fields": [
         {"name": "next", "type": ["null", "L"]}, {"name": "v", "type": "int"}]}), True),
]


@pytest.mark.parametrize("name,reader,writer,ok", RULES, ids=[r[0] for r in RULES])
def test_schema_resolution_rules(name, reader, writer, ok):
    assert (can_read(reader, writer) == []) is ok


def test_compatibility_levels_and_transitivity():
    v1, v2, v3 = rec(A, B), rec(A, B_DEFAULT), rec(A)
    # v3 can read v2 data and v2 could read v1 data; v3 drops b, fine for BACKWARD against everything.
    assert check_compatibility(v3, [v1, v2], "BACKWARD") == []
    x1, x2, x3 = rec(A), rec(A, B_DEFAULT), rec(A, {"name": "b", "type": "int", "default": 0})
    assert check_compatibility(x3, [x1, x2], "BACKWARD") != []  # reading string b as int
    assert check_compatibility(x3, [x1], "BACKWARD") == []
    y1, y2, y3 = rec(A, B), rec(A, B_DEFAULT), rec(A, B_DEFAULT, {"name": "c", "type": "int"})
    assert check_compatibility(y3, [y1, y2], "BACKWARD") != []
    assert check_compatibility(y3, [y1, y2], "FORWARD") == []
    assert check_compatibility(y3, [y1, y2], "FULL") != []
    assert check_compatibility(rec(B_DEFAULT), [rec(A)], "FORWARD") != []  # old reader misses 'a'
    t1, t2, t3 = rec(A), rec(A, B_DEFAULT), rec(A, {"name": "b", "type": "string", "default": "y"})
    assert check_compatibility(t3, [t1, t2], "FULL_TRANSITIVE") == []
    u1, u2, u3 = rec({"name": "a", "type": "int"}), rec({"name": "a", "type": "long"}), \
        rec({"name": "a", "type": "float"})
    assert check_compatibility(u3, [u1, u2], "BACKWARD_TRANSITIVE") == []
    assert check_compatibility(u3, [u1, u2], "FORWARD_TRANSITIVE") != []
    assert check_compatibility(rec(B), [rec(A)], "NONE") == []


# -- the client -----------------------------------------------------------------------------------------

def test_client_caches_and_hides_the_password(server):
    c = SchemaRegistryClient(server.url, user_info="alice:s3cret")
    sid = c.register("c-value", rec(A))
    assert c.get_schema(sid) and c.get_latest("c-value").id == sid
    assert c.lookup("c-value", rec(A)).version == 1
    assert c.test_compatibility("c-value", rec(A, B_DEFAULT)) is True
    assert c.set_compatibility("NONE", "c-value") == "NONE" and c.get_compatibility("c-value") == "NONE"
    assert c.get_versions("c-value") == [1] and "c-value" in c.get_subjects()
    assert "s3cret" not in repr(c) and "[hidden]" in repr(c)
    with pytest.raises(SchemaRegistryError) as e:
        c.get_schema(12345)
    assert e.value.error_code == 40403 and "s3cret" not in str(e.value)


def test_client_retries_then_reports_an_unreachable_registry():
    c = SchemaRegistryClient("http://user:pw@127.0.0.1:9", max_retries=1, backoff_ms=10, timeout=1)
    with pytest.raises(RetriableError, match="unreachable") as e:
        c.get_schema(1)
    assert "pw" not in str(e.value).replace("http://127.0.0.1:9", "")


# -- JSON Schema (schemaType JSON) ----------------------------------------------------------------------

def obj(closed=False, required=(), **props):
    out = {"type": "object", "properties": props}
    if closed:
        out["additionalProperties"] = False
    if required:
        out["required"] = list(required)
    return json.dumps(out)


INT, STR = {"type": "integer"}, {"type": "string"}


def test_json_schemas_register_and_answer_with_their_type(server):
    body = {"schema": obj(id=INT), "schemaType": "JSON"}
    st, out, _ = call(server, "POST", "/subjects/j-value/versions", body)
    assert st == 200 and out["id"] == 1
    assert call(server, "POST", "/subjects/j-value/versions", body)[1]["id"] == 1  # idempotent
    assert call(server, "GET", "/schemas/ids/1")[1] == {"schema": obj(id=INT).replace(" ", ""), "schemaType": "JSON"}
    latest = call(server, "GET", "/subjects/j-value/versions/latest")[1]
    assert (latest["schemaType"], json.loads(latest["schema"])) == ("JSON", json.loads(obj(id=INT)))
    assert call(server, "POST", "/subjects/j-value", body)[1]["schemaType"] == "JSON"
    # The same text as Avro is another schema: a JSON Schema and an Avro schema never share an id.
    avro = call(server, "POST", "/subjects/a-value/versions", {"schema": '{"type": "string"}'})[1]
    as_json = call(server, "POST", "/subjects/b-value/versions", {"schema": '{"type": "string"}', "schemaType": "JSON"})
    assert avro["id"] != as_json[1]["id"]
    client = SchemaRegistryClient(server.url)
    assert client.get_schema_type(as_json[1]["id"]) == "JSON" and client.get_schema_type(avro["id"]) == "AVRO"
    assert client.register("j-value", obj(id=INT), schema_type="JSON") == 1
    assert client.lookup("j-value", obj(id=INT), schema_type="JSON").schema_type == "JSON"


@pytest.mark.parametrize("body,code", [
    ({"schema": "{not json", "schemaType": "JSON"}, 42201),
    ({"schema": '{"type": "decimal"}', "schemaType": "JSON"}, 42201),
    ({"schema": '{"properties": []}', "schemaType": "JSON"}, 42201),
    ({"schema": '{"$ref": "other.json"}', "schemaType": "JSON"}, 42201),
    ({"schema": '{"$ref": "#/definitions/X"}', "schemaType": "JSON"}, 42201),
    ({"schema": 'syntax = "proto3";', "schemaType": "PROTOBUF"}, 42201),
    ({"schema": obj(id=INT), "schemaType": "JSON", "references": [{"name": "x", "subject": "y", "version": 1}]},
     42201),
], ids=["not JSON", "unknown type", "properties not an object", "remote ref", "dangling ref", "protobuf",
        "references"])
def test_invalid_json_schemas_are_refused(server, body, code):
    st, out, _ = call(server, "POST", "/subjects/bad-value/versions", body)
    assert (st, out["error_code"]) == (422, code) and out["message"]


def test_json_schema_compatibility_follows_the_content_model(server):
    def register(subject, schema):
        return call(server, "POST", f"/subjects/{subject}/versions", {"schema": schema, "schemaType": "JSON"})

    assert register("open", obj(id=INT))[0] == 200
    refused = register("open", obj(id=INT, note=STR))  # BACKWARD: old data may hold "note" with any type
    assert refused[0] == 409 and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in refused[1]["message"]
    assert register("closed", obj(True, id=INT))[0] == 200
    assert register("closed", obj(True, id=INT, note=STR))[0] == 200
    required = register("closed", obj(True, ("extra",), id=INT, note=STR, extra=INT))
    assert required[0] == 409 and "REQUIRED_ATTRIBUTE_ADDED" in required[1]["message"]
    assert register("closed", '{"type": "string"}')[0] == 409
    call(server, "POST", "/subjects/mixed/versions", {"schema": '"string"'})
    mixed = register("mixed", '{"type": "string"}')
    assert mixed[0] == 409 and "latest schema is AVRO" in mixed[1]["message"]
    check = call(server, "POST", "/compatibility/subjects/open/versions/latest?verbose=true",
                 {"schema": obj(id={"type": "number"}), "schemaType": "JSON"})[1]
    assert check["is_compatible"] is True  # integer data reads as number


JSON_RULES = [
    ("integer read as number", '{"type": "number"}', '{"type": "integer"}', True),
    ("number read as integer", '{"type": "integer"}', '{"type": "number"}', False),
    ("value into nullable", '{"type": ["string", "null"]}', '{"type": "string"}', True),
    ("nullable into value", '{"type": "string"}', '{"oneOf": [{"type": "null"}, {"type": "string"}]}', False),
    ("any reads everything", "{}", '{"type": "string"}', True),
    ("typed reader of any", '{"type": "string"}', "{}", False),
    ("property removed from open reader", obj(id=INT), obj(id=INT, note=STR), True),
    ("property removed from closed reader", obj(True, id=INT), obj(True, id=INT, note=STR), False),
    ("property added to closed writer", obj(True, id=INT, note=STR), obj(True, id=INT), True),
    ("property added to open writer", obj(id=INT, note=STR), obj(id=INT), False),
    ("requirement added", obj(True, ("id",), id=INT), obj(True, id=INT), False),
    ("requirement dropped", obj(True, id=INT), obj(True, ("id",), id=INT), True),
    ("nested property type changed", obj(a=json.loads(obj(x=STR))), obj(a=json.loads(obj(x=INT))), False),
    ("array items widened", '{"type": "array", "items": {"type": "number"}}',
     '{"type": "array", "items": {"type": "integer"}}', True),
    ("enum extended", '{"enum": ["A", "B", "C"]}', '{"enum": ["A", "B"]}', True),
    ("enum narrowed", '{"enum": ["A"]}', '{"enum": ["A", "B"]}', False),
    ("local refs followed", '{"definitions": {"N": {"type": "number"}}, "$ref": "#/definitions/N"}',
     '{"type": "integer"}', True),
]


@pytest.mark.parametrize("name,reader,writer,ok", JSON_RULES, ids=[r[0] for r in JSON_RULES])
def test_json_schema_reading_rules(name, reader, writer, ok):
    problems = json_can_read(reader, writer)
    assert (problems == []) == ok, problems
