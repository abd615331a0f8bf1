"""What change-data-capture connectors share, whatever the database: Debezium's events and signals.

:mod:`.types` (a captured column's Connect/Spark type), :mod:`.layout` (the captured tables as one union
DataFrame, and :func:`~.layout.table_events` to narrow it to one table), :mod:`.envelope` (the change event
envelope, built in bulk as Arrow), :mod:`.batch_end` (where a micro-batch ends, heartbeats), :mod:`.signals`
(Debezium's signals and the incremental snapshot state machine), :mod:`.filters` (the ``additional-conditions``
language). The PostgreSQL connector (:mod:`spark_connect_bridge.connectors.postgres`) is built on them.
"""
