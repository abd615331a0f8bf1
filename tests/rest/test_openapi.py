"""The worker serves an OpenAPI description of its REST API (``/openapi.json``), and the API keeps to it:
schemathesis generates requests for every operation and checks that none answers a 5xx and every answer
conforms (status code documented, body matching its schema, content type)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from rest.security_helpers import RestOnly
from spark_connect_bridge.rest import RestServer
from spark_connect_bridge.runtime.service import ConnectService
from spark_connect_bridge.runtime.worker_config import parse_worker_config

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def worker_api(tmp_path_factory):
    root = tmp_path_factory.mktemp("openapi")
    (root / "data").mkdir()
    config = parse_worker_config({"offset.storage.dir": str(root / "state"), "topics.dir": str(root / "topics"),
                                  "listeners": "http://127.0.0.1:0", "connector.allowed.paths": str(root / "data")})
    server = RestServer(ConnectService(config)).start()
    yield RestOnly(server.service, server)
    server.stop()


@pytest.fixture(scope="module")
def api_schema(worker_api):
    return schemathesis.openapi.from_url(worker_api.url + "/openapi.json")


def test_openapi_document_describes_every_route(worker_api):
    import requests

    from spark_connect_bridge.rest.server import ROUTERS

    doc = requests.get(worker_api.url + "/openapi.json", timeout=30).json()
    served = {(m.lower(), regex.pattern) for r in ROUTERS for m, regex, _ in r.routes}
    described = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert len(described) == len(served)
    assert doc["openapi"].startswith("3.") and "/connectors/{name}/offsets" in doc["paths"]


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_openapi_description(case):
    case.call_and_validate()
