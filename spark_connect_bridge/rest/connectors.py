"""``/connectors``: configs, lifecycle, status, tasks, topics and offsets of connectors."""

from __future__ import annotations

from urllib.parse import quote

from .errors import HttpError
from .routing import Request, Response, Router

router = Router()


def _object(req: Request) -> dict:
    if not isinstance(req.body, dict):
        raise HttpError(400, "The request body must be a JSON object")
    return req.body


def _task(req: Request) -> int:
    try:
        return int(req.args["task"])
    except ValueError:
        raise HttpError(404, f"Task {req.args['name']}-{req.args['task']} not found") from None


@router.route("GET", "/connectors")
def list_connectors(svc, req: Request) -> Response:
    expand = [e for v in req.params.get("expand", []) for e in v.split(",")]
    if any(e in ("status", "info") for e in expand):
        return Response(200, svc.expanded(expand))
    return Response(200, svc.list_connectors())


@router.route("POST", "/connectors")
def create(svc, req: Request) -> Response:
    body = _object(req)
    config = body.get("config")
    if not isinstance(config, dict):
        raise HttpError(400, "Connector create request needs a 'config' object")
    name = body.get("name")
    config = {k: v for k, v in config.items()}
    if name is None:
        name = config.get("name")
    if config.get("name", name) != name:
        raise HttpError(400, f"Connector name configuration ({config.get('name')}) doesn't match connector name in "
                             f"the URL ({name})")
    config["name"] = name
    info = svc.create({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in config.items()},
                      initial_state=body.get("initial_state"))
    return Response(201, info, {"Location": f"/connectors/{quote(str(name), safe='')}"})


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
    body = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in _object(req).items()}
    created, info = svc.put_config(req.args["name"], body)
    headers = {"Location": f"/connectors/{quote(req.args['name'], safe='')}"} if created else {}
    return Response(201 if created else 200, info, headers)


@router.route("PATCH", "/connectors/{name}/config")
def patch_config(svc, req: Request) -> Response:
    return Response(200, svc.patch_config(req.args["name"], _object(req)))


@router.route("GET", "/connectors/{name}/status")
def status(svc, req: Request) -> Response:
    return Response(200, svc.status(req.args["name"]))


@router.route("POST", "/connectors/{name}/restart")
def restart(svc, req: Request) -> Response:
    result = svc.restart(req.args["name"], include_tasks=req.flag("includeTasks"),
                         only_failed=req.flag("onlyFailed"))
    return Response(204) if result is None else Response(202, result)


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
    return Response(200, svc.task_status(req.args["name"], _task(req)))


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
