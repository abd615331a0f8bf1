"""The worker serves an OpenAPI description of its REST API (``/openapi.json``), and the API keeps to it:
schemathesis generates requests for every operation and checks that none answers a 5xx and every answer
conforms (status code documented, body matching its schema, content type)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from spark_connect_bridge.runtime.standalone import RunningWorker

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def worker_api(spark, tmp_path_factory):
    """A running worker (its herder on the test run's Spark session), as clients meet it."""
    root = tmp_path_factory.mktemp("openapi")
    (root / "data").mkdir()
    worker = RunningWorker.start({"offset.storage.dir": str(root / "state"), "topics.dir": str(root / "topics"),
                                  "listeners": "http://127.0.0.1:0", "connector.allowed.paths": str(root / "data"),
                                  "status.interval.ms": "200"}, spark=spark)
    assert worker.service.wait_ready(60)
    yield worker
    worker.close()


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


# No 5xx, and answers that conform. Not "schema-valid requests are accepted": a connector config can be
# schema-valid (a map of strings) and still invalid, and Kafka answers it with a 400 too.
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance, checks.response_headers_conformance]


@pytest.mark.slow
def test_api_conforms_to_its_openapi_description(api_schema):
    # schemathesis' pytest plugin does not run on pytest 9 yet: drive its hypothesis strategies directly.
    failures: dict[str, str] = {}
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS)

        try:
            check()
        except Exception as e:  # noqa: BLE001 - collected, reported together below
            failures[operation.label] = f"{type(e).__name__}: {e}"[:2000]
    assert not failures, "\n\n".join(f"{op}:\n{msg}" for op, msg in failures.items())
