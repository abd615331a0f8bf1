"""Worker test fixtures (see worker_helpers)."""

from .worker_helpers import start_worker  # noqa: F401 - a fixture
