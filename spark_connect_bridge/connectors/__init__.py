"""Connectors: one module (or package) per external system, each over :mod:`spark_connect_bridge.connectors.base`.

File (``file``), Confluent's datagen (``datagen``), Confluent's JDBC source and sink (``jdbc``), Debezium's
PostgreSQL CDC (``postgres``, over the parts CDC connectors share in ``cdc``), Delta (``delta``). Submodules are
imported on use (through ``connector.class``), so importing this package stays cheap.
"""
