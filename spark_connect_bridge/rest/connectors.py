"""``/connectors``: configs, lifecycle, status, tasks, topics and offsets of connectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError
from ..runtime.errors import NotFoundError
from ..runtime.secrets import restore_masked, scrub_text
from .errors import HttpError
from .routing import Request, Response, Router

router = Router()


def _object(req: Request) -> dict:
    if not isinstance(req.body, dict):
        raise HttpError(400, "The request body must be a JSON object")
    return req.body


def config_values(config: Mapping[str, Any], *, nulls: bool = False) -> dict[str, Any]:
    """Connector config values as Kafka takes them: strings (numbers and booleans as their JSON text)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, bool):
            out[k] = str(v).lower()
        elif isinstance(v, (str, int, float)):
            out[k] = v if isinstance(v, str) else str(v)
        elif v is None and nulls:
            out[k] = None
        elif v is None:
            continue
        else:
            raise HttpError(400, f"Configuration {k} must be a string, a number or a boolean, not a JSON "
                                 f"{type(v).__name__}")
    return out


def _admit(svc: Any, name: str, config: Mapping[str, Any], *, patch: bool = False) -> dict[str, Any]:
    """The config as it may be stored: masked values sent back restored to the stored secrets, then checked
    against the worker's policy (plugins, paths, config providers); a ConfigError (400) otherwise."""
    try:
        stored = svc.raw_config(name)
    except NotFoundError:  # a new connector: nothing stored
        stored = None
    try:
        restored = restore_masked(config, stored, patch=patch)
    except ConfigError as e:
        raise HttpError(400, invalid_config_message(e.problems)) from None
    merged = dict(stored or {}, **restored) if patch else restored
    policy = getattr(svc.config, "policy", None)
    if policy is not None:
        problems = policy.check({k: str(v) for k, v in merged.items() if v is not None})
        if problems:
            raise HttpError(400, invalid_config_message(problems))
    return restored


def invalid_config_message(problems: Any) -> str:
    """Kafka's message for a connector config that cannot be stored."""
    lines = [str(p) for p in problems]
    return (f"Connector configuration is invalid and contains the following {len(lines)} error(s):\n"
            + "\n".join(lines) + "\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`")


def _task(req: Request) -> int:
    try:
        return int(req.args["task"])
    except ValueError:
        raise HttpError(404, f"Task {req.args['name']}-{req.args['task']} not found") from None


def _scrubbed(svc: Any, name: str, status: dict[str, Any]) -> dict[str, Any]:
    """A status whose traces (error messages of the connector, its database, Spark) hide the config's secrets."""
    try:
        config = svc.raw_config(name)
    except NotFoundError:
        return status
    out = dict(status)
    if isinstance(out.get("connector"), dict) and out["connector"].get("trace"):
        out["connector"] = dict(out["connector"], trace=scrub_text(out["connector"]["trace"], config))
    if isinstance(out.get("tasks"), list):
        out["tasks"] = [dict(t, trace=scrub_text(t["trace"], config)) if t.get("trace") else t for t in out["tasks"]]
    if out.get("trace"):  # a task status
        out["trace"] = scrub_text(out["trace"], config)
    return out


@router.route("GET", "/connectors")
def list_connectors(svc, req: Request) -> Response:
    expand = [e for v in req.params.get("expand", []) for e in v.split(",")]
    if any(e in ("status", "info") for e in expand):
        out = svc.expanded(expand)
        for name, entry in out.items():
            if "status" in entry:
                entry["status"] = _scrubbed(svc, name, entry["status"])
        return Response(200, out)
    return Response(200, svc.list_connectors())


@router.route("POST", "/connectors")
def create(svc, req: Request) -> Response:
    body = _object(req)
    config = body.get("config")
    if not isinstance(config, dict):
        raise HttpError(400, "Connector create request needs a 'config' object")
    config = config_values(config)
    name = body.get("name")
    if name is None:
        name = config.get("name")
    if not isinstance(name, str):
        raise HttpError(400, "Connector name must be a string" if name is not None else
                        "Connector name is null or empty")
    name = name.strip()  # as Kafka: the name is trimmed, and the config's name must equal it
    if config.get("name", name) != name:
        raise HttpError(400, f"Connector name configuration ({config.get('name')}) doesn't match connector name in "
                             f"the URL ({name})")
    config["name"] = name
    initial_state = body.get("initial_state")
    if initial_state is not None and not isinstance(initial_state, str):
        raise HttpError(400, "initial_state must be one of RUNNING, PAUSED, STOPPED")
    info = svc.create(_admit(svc, name, config), initial_state=initial_state)
    return Response(201, info, {"Location": f"/connectors/{quote(name, safe='')}"})


@router.route("GET", "/connectors/{name}")
def info(svc, req: Request) -> Response:
    return Response(200, svc.info(req.args["name"]))


@router.route("DELETE", "/connectors/{name}")
def delete(svc, req: Request) -> Response:
    svc.delete(req.args["name"])
    return Response(204)


@router.route("GET", "/connectors/{name}/config")
def get_config(svc, req: Request) -> Response:
    return Response(200, svc.get_config(req.args["name"]))


@router.route("PUT", "/connectors/{name}/config")
def put_config(svc, req: Request) -> Response:
    body = _admit(svc, req.args["name"], config_values(_object(req)))
    created, info = svc.put_config(req.args["name"], body)
    headers = {"Location": f"/connectors/{quote(req.args['name'], safe='')}"} if created else {}
    return Response(201 if created else 200, info, headers)


@router.route("PATCH", "/connectors/{name}/config")
def patch_config(svc, req: Request) -> Response:
    patch = config_values(_object(req), nulls=True)
    return Response(200, svc.patch_config(req.args["name"], _admit(svc, req.args["name"], patch, patch=True)))


@router.route("GET", "/connectors/{name}/status")
def status(svc, req: Request) -> Response:
    return Response(200, _scrubbed(svc, req.args["name"], svc.status(req.args["name"])))


@router.route("POST", "/connectors/{name}/restart")
def restart(svc, req: Request) -> Response:
    result = svc.restart(req.args["name"], include_tasks=req.flag("includeTasks"),
                         only_failed=req.flag("onlyFailed"))
    return Response(204) if result is None else Response(202, _scrubbed(svc, req.args["name"], result))


@router.route("PUT", "/connectors/{name}/pause")
def pause(svc, req: Request) -> Response:
    svc.pause(req.args["name"])
    return Response(202)


@router.route("PUT", "/connectors/{name}/resume")
def resume(svc, req: Request) -> Response:
    svc.resume(req.args["name"])
    return Response(202)


@router.route("PUT", "/connectors/{name}/stop")
def stop(svc, req: Request) -> Response:
    svc.stop(req.args["name"])
    return Response(204)


@router.route("GET", "/connectors/{name}/tasks")
def tasks(svc, req: Request) -> Response:
    return Response(200, svc.tasks(req.args["name"]))


@router.route("GET", "/connectors/{name}/tasks/{task}/status")
def task_status(svc, req: Request) -> Response:
    return Response(200, _scrubbed(svc, req.args["name"], svc.task_status(req.args["name"], _task(req))))


@router.route("POST", "/connectors/{name}/tasks/{task}/restart")
def task_restart(svc, req: Request) -> Response:
    svc.restart_task(req.args["name"], _task(req))
    return Response(204)


@router.route("GET", "/connectors/{name}/topics")
def topics(svc, req: Request) -> Response:
    return Response(200, svc.topics(req.args["name"]))


@router.route("PUT", "/connectors/{name}/topics/reset")
def reset_topics(svc, req: Request) -> Response:
    svc.reset_topics(req.args["name"])
    return Response(202)


@router.route("GET", "/connectors/{name}/offsets")
def get_offsets(svc, req: Request) -> Response:
    return Response(200, svc.get_offsets(req.args["name"]))


@router.route("PATCH", "/connectors/{name}/offsets")
def alter_offsets(svc, req: Request) -> Response:
    return Response(200, svc.alter_offsets(req.args["name"], _object(req)))


@router.route("DELETE", "/connectors/{name}/offsets")
def reset_offsets(svc, req: Request) -> Response:
    return Response(200, svc.reset_offsets(req.args["name"]))
