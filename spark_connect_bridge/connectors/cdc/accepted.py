"""The Debezium keys the CDC connectors accept without implementing them, and what each means here.

Debezium's PostgreSQL, MySQL and MariaDB connectors declare ~120 keys each (``config/declared/``): the ones this
project implements are declared in ``postgres/config.py`` and ``mysql/config.py``; every other one is accepted here
with a disposition. Keys that would change the delivered records if ignored are ``refused`` at any value but their
default, with the reason; keys whose job Spark does another way have ``no effect`` (the note says how); the rest
are ``not supported``: accepted, with a warning naming the key when it is set to anything but its default.
:func:`accept_debezium` adds the ones the given original declares and the connector does not define itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...config import ConfigDef
from ...config.declared_keys import declared

__all__ = ["accept_debezium"]

_CHANGES_DATA = "it changes the records Debezium delivers, and is not implemented here"


def _each(keys: Iterable[str], note: str) -> dict[str, str]:
    return {k: note for k in keys}


REFUSED: Mapping[str, str] = {
    "converters": "Debezium's custom converters (CustomConverter classes) are Java code; no Python equivalent is "
                  "loaded here",
    "binary.handling.mode": "binary columns are delivered as bytes (the default); base64/hex are not implemented "
                            "for this connector",
    "hstore.handling.mode": "hstore columns are delivered as PostgreSQL's text form; the map mode is not "
                            "implemented",
    "schema.name.adjustment.mode": "schema names are delivered unadjusted (the default 'none'); avro adjustment "
                                   "is not implemented",
    "include.unknown.datatypes": "columns of types Debezium does not know are delivered as their text form only "
                                 "when that is the default behaviour; the 'true' mode is not implemented",
    "provide.transaction.metadata": "transaction boundary events and the envelope's transaction block are not "
                                    "produced here",
    "event.processing.failure.handling.mode": "an event that cannot be processed fails the query (the default "
                                              "'fail'); skipping or warning would drop it silently",
    "event.deserialization.failure.handling.mode": "an event that cannot be read fails the query (the default "
                                                   "'fail'); skipping would drop it silently",
    "inconsistent.schema.handling.mode": "an event of a table with unknown schema fails the query (the default "
                                         "'fail')",
    "post.processors": "Debezium's post processors (e.g. reselect columns) are Java code; none is run here",
    "snapshot.select.statement.overrides": _CHANGES_DATA,
    "snapshot.query.mode": "snapshots read every column with SELECT * (select_all, the default)",
    "snapshot.query.mode.custom.name": "snapshots read every column with SELECT * (select_all, the default)",
    "snapshot.mode.custom.name": "custom snapshotter classes are Java code; use a built-in snapshot.mode",
    "table.ignore.builtin": "system tables are never captured here (the default true)",
    "sourceinfo.struct.maker": "the envelope's source block is Debezium's default one",
    "topic.naming.strategy": "topics are named <topic.prefix>.<schema>.<table> (Debezium's default strategy)",
    "transaction.metadata.factory": "transaction metadata is not produced here",
    "custom.sanitize.pattern": "secrets are masked by key name in logs and REST answers (the default pattern)",
    "replica.identity.autoset.values": "replica identities are left as the tables have them; set them with "
                                       "ALTER TABLE ... REPLICA IDENTITY",
    "message.prefix.include.list": "logical decoding messages (pg_logical_emit_message) are not delivered here",
    "message.prefix.exclude.list": "logical decoding messages (pg_logical_emit_message) are not delivered here",
    "gtid.source.filter.dml.events": "every DML event of a captured table is delivered (the default true)",
    "enable.time.adjuster": "two-digit years are read as MySQL reads them (the default true)",
    "ddl.parser.type": "the table layout is read from the server, not parsed from DDL",
    "snapshot.include.collection.list": "every captured table is snapshotted; a narrower snapshot is not "
                                        "implemented",
}

NOT_SUPPORTED: Mapping[str, str] = {
    "signal.enabled.channels": "only the source channel (signal.data.collection) is read here; Kafka, file and "
                               "JMX signals are not",
    "notification.enabled.channels": "Debezium's notifications are not emitted here; the query's progress "
                                     "(kconnect status, the REST status) tells where a snapshot is",
    "notification.sink.topic.name": "Debezium's notifications are not emitted here",
    "heartbeat.action.query": "no heartbeat query is run; the replication slot advances with each micro-batch",
    "heartbeat.topics.prefix": "heartbeat records are not emitted here: progress is the Spark checkpoint",
    "snapshot.delay.ms": "a snapshot starts with the query",
    "snapshot.lock.timeout.ms": "the snapshot takes no table locks: it reads the slot's exported snapshot",
    "streaming.delay.ms": "streaming starts as soon as the snapshot ends",
    "snapshot.locking.mode": "the snapshot reads one consistent exported snapshot without table locks",
    "snapshot.locking.mode.custom.name": "the snapshot reads one consistent exported snapshot without table locks",
    "snapshot.isolation.mode": "the snapshot runs in one repeatable-read transaction on the slot's snapshot",
    "snapshot.tables.order.by.row.count": "tables are snapshotted in table.include.list order",
    "snapshot.mode.configuration.based.snapshot.data": "the configuration_based snapshot mode is not implemented",
    "snapshot.mode.configuration.based.snapshot.schema": "the configuration_based snapshot mode is not "
                                                         "implemented",
    "snapshot.mode.configuration.based.start.stream": "the configuration_based snapshot mode is not implemented",
    "snapshot.mode.configuration.based.snapshot.on.schema.error": "the configuration_based snapshot mode is not "
                                                                  "implemented",
    "snapshot.mode.configuration.based.snapshot.on.data.error": "the configuration_based snapshot mode is not "
                                                                "implemented",
    "incremental.snapshot.watermarking.strategy": "incremental snapshot windows are kept in the Spark checkpoint, "
                                                  "not as watermarks in the signal table",
    "incremental.snapshot.allow.schema.changes": "a schema change during an incremental snapshot fails the chunk",
    "database.initial.statements": "no statements are run on connect besides the session settings the reader "
                                   "needs",
    "database.sslcert": "TLS client certificates are not passed to the connection here",
    "database.sslkey": "TLS client certificates are not passed to the connection here",
    "database.sslpassword": "TLS client certificates are not passed to the connection here",
    "database.sslrootcert": "TLS client certificates are not passed to the connection here",
    "database.sslfactory": "TLS client certificates are not passed to the connection here",
    "database.ssl.keystore": "TLS client certificates are not passed to the connection here",
    "database.ssl.keystore.password": "TLS client certificates are not passed to the connection here",
    "database.ssl.truststore": "TLS trust stores are not passed to the connection here",
    "database.ssl.truststore.password": "TLS trust stores are not passed to the connection here",
    "slot.failover": "failover slots (PostgreSQL 17) are not created here",
    "slot.stream.params": "pgoutput is started with the parameters the reader needs only",
    "publish.via.partition.root": "the publication is created without publish_via_partition_root",
    "schema.history.internal.skip.unparseable.ddl": "the table layout is read from the server, not parsed from "
                                                    "DDL, so no DDL is skipped",
    "schema.history.internal.store.only.captured.databases.ddl": "no schema history is stored: the table layout "
                                                                 "is read from the server",
    "gtid.ignore.on.recovery": "positions are binlog file and offset kept in the Spark checkpoint",
    "guardrail.collections.max": "no limit on the number of captured tables is enforced",
    "guardrail.collections.limit.action": "no limit on the number of captured tables is enforced",
    "openlineage.integration.enabled": "OpenLineage events are not emitted here",
    "openlineage.integration.config.file.path": "OpenLineage events are not emitted here",
    "openlineage.integration.dataset.kafka.bootstrap.servers": "OpenLineage events are not emitted here",
    "openlineage.integration.job.description": "OpenLineage events are not emitted here",
    "openlineage.integration.job.namespace": "OpenLineage events are not emitted here",
    "openlineage.integration.job.owners": "OpenLineage events are not emitted here",
    "openlineage.integration.job.tags": "OpenLineage events are not emitted here",
    "extended.headers.enabled": "the __debezium.context.* headers are not added here",
    "include.schema.comments": "column comments are not carried into the schema's doc here",
}

NO_EFFECT: Mapping[str, str] = {
    **_each(("connection.validation.timeout.ms", "database.query.timeout.ms", "connect.keep.alive.interval.ms",
             "retriable.restart.connector.wait.ms", "errors.max.retries", "executor.shutdown.timeout.ms",
             "slot.max.retries", "slot.retry.delay.ms", "use.nongraceful.disconnect", "database.tcpKeepAlive"),
            "connections and retries are the reader's: a failed micro-batch fails the query, and restarting it "
            "resumes from the Spark checkpoint"),
    **_each(("max.queue.size.in.bytes", "query.fetch.size", "min.row.count.to.stream.results", "binlog.buffer.size",
             "snapshot.max.threads", "snapshot.max.threads.multiplier", "legacy.snapshot.max.threads",
             "internal.legacy.snapshot.max.threads", "internal.snapshot.scan.all.columns.force",
             "memory.management.schemas.class", "memory.management.tables.class"),
            "memory and parallelism are Spark's: a micro-batch's size is max.records.per.trigger, and "
            "tasks.max input partitions read it"),
    **_each(("binlog.net.read.timeout", "binlog.net.write.timeout"),
            "the binlog reader uses the server's net timeouts; a stalled read fails the micro-batch"),
    **_each(("custom.metric.tags", "statistics.metrics.enabled", "internal.advanced.metrics.enable"),
            "metrics are Spark's streaming query progress (kconnect status, the REST status), not JMX beans"),
    "internal.log.position.check.enable": "the position to resume from is the Spark checkpoint's",
    "database.server.id.offset": "the binlog reader registers with database.server.id itself",
    "database.jdbc.driver": "the reader speaks the MySQL protocol itself; no JDBC driver is loaded",
    "database.protocol": "the reader speaks the MySQL protocol itself; no JDBC URL is built",
    "signal.poll.interval.ms": "the signal table is read with each micro-batch",
    "schema.refresh.mode": "a table's layout is refreshed from each Relation message pgoutput sends",
    "lsn.flush.mode": "the slot's confirmed LSN is flushed by the reader after each micro-batch commits (as "
                      "Debezium's 'connector' mode), so the slot never passes what the checkpoint holds",
    "flush.lsn.source": "the slot's confirmed LSN is flushed by the reader after each micro-batch commits (as "
                        "Debezium's 'connector' mode)",
    "lsn.flush.timeout.ms": "the LSN is flushed after each micro-batch commits; a failing flush fails the query",
    "lsn.flush.timeout.action": "the LSN is flushed after each micro-batch commits; a failing flush fails the "
                                "query",
    "status.update.interval.ms": "standby status updates are sent by the reader as it reads and after each "
                                 "micro-batch commits",
    "xmin.fetch.interval.ms": "the slot's xmin is not tracked in offsets: the checkpoint holds the LSN",
}

#: Debezium's pattern-named keys that change column values, refused (every CDC connector implements
#: ``column.mask.with.<n>.chars`` and ``column.truncate.to.<n>.chars``: cdc/columns.py).
PATTERNS: Mapping[str, str] = {
    r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)": "column hashing is not implemented here (the salt is "
                                                      "part of the key's name, which Spark's options lower-case); "
                                                      "mask with a MaskField transform",
}


def accept_debezium(definition: ConfigDef, original: str) -> ConfigDef:
    """Accept, on ``definition``, every key of Debezium's ``original`` it does not define itself, with the
    dispositions above. Returns ``definition``."""
    keys = declared(original)

    def mine(table: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in table.items() if k in keys and k not in definition}

    definition.accept(original, refused=mine(REFUSED), not_supported=mine(NOT_SUPPORTED), no_effect=mine(NO_EFFECT),
                      group="Accepted (Debezium)")
    for pattern, note in PATTERNS.items():
        definition.refuse_pattern(pattern, note)
    return definition


def old_spellings(definition: ConfigDef, level: str) -> ConfigDef:
    """Debezium 1.x's spellings, read as 2.x+ reads them, with a deprecation warning: ``database.server.name``
    (``topic.prefix``), ``database.history.*`` (``schema.history.internal.*``) and the white/blacklists of
    ``level`` (``schema`` or ``database``), tables and columns (``*.include.list``/``*.exclude.list``)."""
    version = "Debezium 1.x"
    definition.renamed("database.server.name", "topic.prefix", version)
    definition.renamed("database.history.", "schema.history.internal.", version)
    for what in (level, "table", "column"):
        definition.renamed(f"{what}.whitelist", f"{what}.include.list", version)
        definition.renamed(f"{what}.blacklist", f"{what}.exclude.list", version)
    return definition
