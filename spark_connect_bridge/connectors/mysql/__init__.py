"""Debezium's MySQL and MariaDB connectors: binlog change data capture with Debezium's configs, events and offsets.

Parts: :mod:`.config` (keys and typed settings), :mod:`.session` (connections and the SQL they run),
:mod:`.types` (Debezium's type mapping), :mod:`.layout` (captured tables, record schema), :mod:`.positions`
(offsets, batch ends), :mod:`.snapshot`, :mod:`.binlog` (the replication stream), :mod:`.rows` (row images
decoded in bulk), :mod:`.stream` (a binlog range's events), :mod:`.events` (Debezium's envelope in Arrow),
:mod:`.incremental` (signals and incremental snapshot chunks), :mod:`.schema_changes` (Debezium's schema change
events), :mod:`.connector` (the SPI methods only). What every CDC connector shares is in :mod:`..cdc`.
"""

from .connector import MariaDbConnector, MySqlConnector

__all__ = ["MySqlConnector", "MariaDbConnector"]
