"""``GET /`` and ``GET /health``."""

from __future__ import annotations

from .routing import Request, Response, Router

router = Router()


@router.route("GET", "/")
def server_info(svc, req: Request) -> Response:
    return Response(200, svc.server_info())


@router.route("GET", "/health")
def health(svc, req: Request) -> Response:
    status, body = svc.health()
    return Response(status, body)
