"""tests/compat: the checks that only mean something through Spark Connect are collected only in the Connect
job (``KCONNECT_TEST_SPARK=connect``, see run_compat.py); the classic run leaves them out rather than skip them."""

from tests.compat.connect_server import session_mode

collect_ignore_glob = [] if session_mode() == "connect" else ["test_connect*.py"]
