"""Kafka Connect's REST API over the worker's service layer
(:class:`~spark_connect_bridge.runtime.service.ConnectService`).

One router per resource (``root``, ``connectors``, ``plugins``); domain errors are mapped to HTTP statuses in one
place (:mod:`.errors`); error bodies are Kafka's ``{"error_code": ..., "message": ...}``.

>>> server = RestServer(service)          # doctest: +SKIP
>>> server.start(); server.url            # doctest: +SKIP
'http://127.0.0.1:8083'
"""

from .server import RestServer

__all__ = ["RestServer"]
