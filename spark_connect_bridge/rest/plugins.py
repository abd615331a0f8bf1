"""``/connector-plugins``: plugin listing, config definitions, config validation."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigProblem
from .connectors import config_values
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
    props = config_values(req.body)
    infos = svc.validate(req.args["plugin"], props)
    policy = getattr(svc.config, "policy", None)
    if policy is not None:
        _add_problems(infos, policy.check({k: str(v) for k, v in props.items()}))
    return Response(200, infos)


def _add_problems(infos: dict[str, Any], problems: list[ConfigProblem]) -> None:
    """Report the worker policy's refusals in Kafka's ConfigInfos, under their keys."""
    by_name = {c["value"]["name"]: c for c in infos["configs"]}
    for p in problems:
        entry = by_name.get(p.key)
        if entry is None:
            entry = {"definition": None, "value": {"name": p.key, "value": None, "recommended_values": [],
                                                   "errors": [], "visible": True}}
            infos["configs"].append(entry)
            by_name[p.key] = entry
        if p.message not in entry["value"]["errors"]:
            entry["value"]["errors"].append(p.message)
    infos["error_count"] = sum(len(c["value"]["errors"]) for c in infos["configs"])
