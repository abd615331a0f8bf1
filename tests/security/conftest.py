"""Attack test fixtures: the worker fixtures of tests/runtime and tests/rest."""

from rest.security_helpers import rest_only  # noqa: F401 - a fixture
from runtime.worker_helpers import start_worker  # noqa: F401 - a fixture
