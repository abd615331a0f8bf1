"""Debezium's PostgreSQL connector over logical decoding (pgoutput), in small parts.

:class:`PostgresConnector` (:mod:`.connector`) holds only the connector SPI; each part below it receives the
session and the settings, never the connector. What every CDC connector shares (signals and incremental
snapshots, the filter language, the envelope, batch ends, the union layout and :func:`table_events`) lives in
:mod:`spark_connect_bridge.connectors.cdc`.

>>> from spark_connect_bridge.connectors.postgres import PostgresConnector, table_events   # doctest: +SKIP
"""

from ..cdc.layout import table_events
from .connector import PostgresConnector
from .session import lsn_text, parse_lsn

__all__ = ["PostgresConnector", "lsn_text", "parse_lsn", "table_events"]
