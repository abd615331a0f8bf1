"""What change-data-capture connectors share, whatever the database (Debezium's events and signals)."""
