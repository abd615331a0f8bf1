"""Confluent's JDBC source and sink connectors over PostgreSQL, MariaDB/MySQL and SQLite.

See :mod:`.source` (``JdbcSourceConnector``) and :mod:`.sink` (``JdbcSinkConnector``); database specifics live
in :mod:`.dialects`.
"""

from .sink import JdbcSinkConnector
from .source import JdbcSourceConnector

__all__ = ["JdbcSinkConnector", "JdbcSourceConnector"]
