"""Debezium's PostgreSQL connector over logical decoding (pgoutput), in small parts."""
