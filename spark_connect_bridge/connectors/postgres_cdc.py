"""The PostgreSQL CDC connector's former module: its public names, kept for configs and imports that use them.

The connector lives in :mod:`spark_connect_bridge.connectors.postgres` (its parts) and
:mod:`spark_connect_bridge.connectors.cdc` (what CDC connectors share). A ``connector.class`` of
``spark_connect_bridge.connectors.postgres_cdc.PostgresConnector`` and
``from spark_connect_bridge.connectors.postgres_cdc import table_events`` keep working.
"""

from .postgres import PostgresConnector, lsn_text, parse_lsn, table_events

__all__ = ["PostgresConnector", "lsn_text", "parse_lsn", "table_events"]
