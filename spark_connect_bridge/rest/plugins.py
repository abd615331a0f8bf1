"""``/connector-plugins``: plugin listing, config definitions, config validation."""

from __future__ import annotations

from .errors import HttpError
from .routing import Request, Response, Router

router = Router()


@router.route("GET", "/connector-plugins")
def list_plugins(svc, req: Request) -> Response:
    return Response(200, svc.plugins(connectors_only=req.flag("connectorsOnly", True)))


@router.route("GET", "/connector-plugins/{plugin}/config")
def plugin_config(svc, req: Request) -> Response:
    return Response(200, svc.plugin_config(req.args["plugin"]))


@router.route("PUT", "/connector-plugins/{plugin}/config/validate")
def validate(svc, req: Request) -> Response:
    if not isinstance(req.body, dict):
        raise HttpError(400, "The request body must be a JSON object of connector configs")
    return Response(200, svc.validate(req.args["plugin"], req.body))
