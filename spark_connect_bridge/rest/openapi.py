"""``GET /openapi.json``: the OpenAPI 3.0 description of the REST API this worker serves.

Kafka Connect's paths, bodies and status codes; every error answer is Kafka's ``{"error_code", "message"}`` body.
The test suite runs schemathesis against it (no 5xx, answers that conform).
"""

from __future__ import annotations

from typing import Any

from ..version import __version__
from .routing import Request, Response, Router

__all__ = ["router", "spec"]

router = Router()

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ERROR = {"type": "object", "required": ["error_code", "message"],
          "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}}}
_MESSAGE = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
_TASK_ID = {"type": "object", "required": ["connector", "task"],
            "properties": {"connector": {"type": "string"}, "task": {"type": "integer"}}}
_INFO = {"type": "object", "required": ["name", "config", "tasks", "type"],
         "properties": {"name": {"type": "string"}, "config": _STR_MAP, "tasks": {"type": "array", "items": _TASK_ID},
                        "type": {"type": "string", "enum": ["source", "sink", "unknown"]}}}
_STATE = {"type": "string", "enum": ["UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"]}
_TASK_STATE = {"type": "object", "required": ["id", "state", "worker_id"],
               "properties": {"id": {"type": "integer"}, "state": _STATE, "worker_id": {"type": "string"},
                              "trace": {"type": "string"}}}
_STATUS = {"type": "object", "required": ["name", "connector", "tasks", "type"],
           "properties": {"name": {"type": "string"},
                          "connector": {"type": "object", "required": ["state", "worker_id"],
                                        "properties": {"state": _STATE, "worker_id": {"type": "string"},
                                                       "trace": {"type": "string"}}},
                          "tasks": {"type": "array", "items": _TASK_STATE},
                          "type": {"type": "string", "enum": ["source", "sink", "unknown"]},
                          "metrics": {"type": "object"}}}
_OFFSET_ENTRY = {"type": "object", "required": ["partition"],
                 "properties": {"partition": {"type": "object"}, "offset": {"type": "object", "nullable": True}}}
_OFFSETS = {"type": "object", "required": ["offsets"],
            "properties": {"offsets": {"type": "array", "items": _OFFSET_ENTRY}}}
_CONFIG_INFOS = {"type": "object", "required": ["name", "error_count", "groups", "configs"],
                 "properties": {"name": {"type": "string"}, "error_count": {"type": "integer"},
                                "groups": {"type": "array", "items": {"type": "string"}},
                                "configs": {"type": "array", "items": {
                                    "type": "object", "required": ["value"],
                                    "properties": {"definition": {"type": "object", "nullable": True},
                                                   "value": {"type": "object", "required": ["name", "errors"],
                                                             "properties": {"name": {"type": "string"},
                                                                            "errors": {"type": "array", "items": {
                                                                                "type": "string"}}}}}}}}}
_CREATE = {"type": "object", "required": ["config"],
           "properties": {"name": {"type": "string"}, "config": _STR_MAP,
                          "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]}}}
_LOGGER_LEVEL = {"type": "object", "required": ["level"],
                 "properties": {"level": {"type": "string"}, "last_modified": {"type": "integer", "nullable": True}}}

_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_TASK = {"name": "task", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
_PLUGIN = {"name": "plugin", "in": "path", "required": True, "schema": {"type": "string"}}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _op(summary: str, responses: dict[str, Any], *, params: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": summary, "parameters": params or [],
                           "responses": {**responses, "default": _json(_ERROR, "Kafka's error body")}}
    if body is not None:
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return out


_EMPTY = {"description": "No body"}


def spec() -> dict[str, Any]:
    """The OpenAPI document."""
    boolean = {"type": "boolean"}
    return {
        "openapi": "3.0.3",
        "info": {"title": "kconnect worker (Kafka Connect REST API)", "version": __version__},
        "paths": {
            "/": {"get": _op("Worker version and cluster id", {"200": _json({
                "type": "object", "required": ["version", "commit", "kafka_cluster_id"],
                "properties": {"version": {"type": "string"}, "commit": {"type": "string"},
                               "kafka_cluster_id": {"type": "string"}}})})},
            "/health": {"get": _op("Worker health", {
                "200": _json({"type": "object", "required": ["status", "message"]}),
                "503": _json({"type": "object", "required": ["status", "message"]}, "Starting")})},
            "/connectors": {
                "get": _op("Connector names, or their status/info with expand", {
                    "200": _json({"oneOf": [{"type": "array", "items": {"type": "string"}},
                                            {"type": "object"}]})},
                    params=[{"name": "expand", "in": "query", "required": False, "explode": True,
                             "schema": {"type": "array", "items": {"type": "string", "enum": ["status", "info"]}}}]),
                "post": _op("Create a connector", {"201": _json(_INFO, "Created")}, body=_CREATE)},
            "/connectors/{name}": {
                "get": _op("Connector info", {"200": _json(_INFO)}, params=[_NAME]),
                "delete": _op("Delete a connector", {"204": _EMPTY}, params=[_NAME])},
            "/connectors/{name}/config": {
                "get": _op("Connector config (secrets masked)", {"200": _json(_STR_MAP)}, params=[_NAME]),
                "put": _op("Create or replace a connector config", {"200": _json(_INFO), "201": _json(_INFO)},
                           params=[_NAME], body=_STR_MAP),
                "patch": _op("Merge into a connector config (null removes a key)", {"200": _json(_INFO)},
                             params=[_NAME], body={"type": "object",
                                                   "additionalProperties": {"type": "string", "nullable": True}})},
            "/connectors/{name}/status": {"get": _op("Connector status", {"200": _json(_STATUS)}, params=[_NAME])},
            "/connectors/{name}/restart": {"post": _op(
                "Restart a connector", {"202": _json(_STATUS), "204": _EMPTY},
                params=[_NAME, {"name": "includeTasks", "in": "query", "schema": boolean},
                        {"name": "onlyFailed", "in": "query", "schema": boolean}])},
            "/connectors/{name}/pause": {"put": _op("Pause", {"202": _EMPTY}, params=[_NAME])},
            "/connectors/{name}/resume": {"put": _op("Resume", {"202": _EMPTY}, params=[_NAME])},
            "/connectors/{name}/stop": {"put": _op("Stop", {"204": _EMPTY}, params=[_NAME])},
            "/connectors/{name}/tasks": {"get": _op("Task configs", {"200": _json({"type": "array", "items": {
                "type": "object", "required": ["id", "config"],
                "properties": {"id": _TASK_ID, "config": _STR_MAP}}})}, params=[_NAME])},
            "/connectors/{name}/tasks/{task}/status": {"get": _op("Task status", {"200": _json(_TASK_STATE)},
                                                                  params=[_NAME, _TASK])},
            "/connectors/{name}/tasks/{task}/restart": {"post": _op("Restart a task", {"204": _EMPTY},
                                                                    params=[_NAME, _TASK])},
            "/connectors/{name}/topics": {"get": _op("Active topics", {"200": _json({"type": "object"})},
                                                     params=[_NAME])},
            "/connectors/{name}/topics/reset": {"put": _op("Reset active topics", {"202": _EMPTY}, params=[_NAME])},
            "/connectors/{name}/offsets": {
                "get": _op("Committed offsets", {"200": _json(_OFFSETS)}, params=[_NAME]),
                "patch": _op("Alter offsets (connector STOPPED)", {"200": _json(_MESSAGE)}, params=[_NAME],
                             body=_OFFSETS),
                "delete": _op("Reset offsets (connector STOPPED)", {"200": _json(_MESSAGE)}, params=[_NAME])},
            "/connector-plugins": {"get": _op("Installed plugins", {"200": _json({"type": "array", "items": {
                "type": "object", "required": ["class", "type"],
                "properties": {"class": {"type": "string"}, "type": {"type": "string"},
                               "version": {"type": "string"}}}})},
                params=[{"name": "connectorsOnly", "in": "query", "schema": boolean}])},
            "/connector-plugins/{plugin}/config": {"get": _op("A plugin's config definition", {
                "200": _json({"type": "array", "items": {"type": "object"}})}, params=[_PLUGIN])},
            "/connector-plugins/{plugin}/config/validate": {"put": _op(
                "Validate a connector config", {"200": _json(_CONFIG_INFOS)}, params=[_PLUGIN], body=_STR_MAP)},
            "/admin/loggers": {"get": _op("Logger levels", {"200": _json({"type": "object", "additionalProperties":
                                                                             _LOGGER_LEVEL})})},
            "/admin/loggers/{logger}": {
                "get": _op("A logger's level", {"200": _json(_LOGGER_LEVEL)},
                           params=[{"name": "logger", "in": "path", "required": True, "schema": {"type": "string"}}]),
                "put": _op("Set a logger's level", {"200": _json({"type": "array", "items": {"type": "string"}})},
                           params=[{"name": "logger", "in": "path", "required": True, "schema": {"type": "string"}},
                                   {"name": "scope", "in": "query", "schema": {"type": "string",
                                                                               "enum": ["worker", "cluster"]}}],
                           body={"type": "object", "required": ["level"], "properties": {
                               "level": {"type": "string"}}})},
            "/openapi.json": {"get": _op("This document", {"200": _json({"type": "object"})})},
        },
    }


@router.route("GET", "/openapi.json")
def openapi(svc: Any, req: Request) -> Response:
    return Response(200, spec())
