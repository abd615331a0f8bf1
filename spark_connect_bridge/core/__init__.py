"""The bottom layer, used by every other: records and their Spark/Arrow schemas, per-record errors, retries, the
plugin registry, allowed paths and per-topic schemas. Nothing here imports another layer of the package."""
