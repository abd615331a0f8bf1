"""The Schema Registry keys the Avro and JSON Schema converters accept without implementing them.

Confluent's ``AvroConverter`` and ``JsonSchemaConverter`` read their config with ``AbstractKafkaSchemaSerDeConfig``
(the registry client and the serializer) and their data config (``AvroDataConfig`` / ``JsonSchemaDataConfig``):
``config/declared/`` holds every key, read from the schema-registry sources. The keys the converters implement are
declared in ``avro.py`` / ``json_schema.py``; :func:`accept_registry` accepts every other one with a disposition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..config import ConfigDef
from ..config.declared_keys import declared

__all__ = ["accept_registry"]


def _each(keys: Iterable[str], note: str) -> dict[str, str]:
    return {k: note for k in keys}


_SCHEMA_SHAPE = "it changes the Connect schema or the data converted, and is not implemented here"

REFUSED: Mapping[str, str] = {
    **_each(("enhanced.avro.schema.support", "scrub.invalid.names", "discard.type.doc.default",
             "allow.optional.map.keys", "generalized.sum.type.support", "ignore.default.for.nullables",
             "object.additional.properties", "use.optional.for.nonrequired", "ignore.modern.dialects",
             "preserve.additional.properties", "normalize.schemas", "propagate.schema.tags", "schema.reflection",
             "schema.format"), _SCHEMA_SHAPE),
    "connect.meta.data": "the Connect metadata (connect.name, connect.version, ...) is always kept in the Avro "
                         "schema here (the default true)",
    "flatten.singleton.unions": "a union of one type is read as that type here (the default true)",
    **_each(("context.name.strategy", "key.schema.id.serializer", "key.schema.id.deserializer",
             "value.schema.id.serializer", "value.schema.id.deserializer"),
            "records are framed with Confluent's magic byte and 4-byte schema id in the value (the defaults' wire "
            "format); schema ids in headers, GUIDs and registry contexts are not implemented"),
    "use.schema.guid": "schemas are found by numeric id; GUIDs are not implemented",
    "use.latest.with.metadata": "the latest version is the subject's latest; metadata-matched versions are not "
                                "implemented",
    **_each(("rule.executors", "rule.actions", "execution.environment"),
            "data contract rules (CEL, encryption, migration) are not run here"),
}

NOT_SUPPORTED: Mapping[str, str] = {
    **_each(("bearer.auth.credentials.source", "bearer.auth.token", "bearer.auth.issuer.endpoint.url",
             "bearer.auth.client.id", "bearer.auth.client.secret", "bearer.auth.scope",
             "bearer.auth.scope.claim.name", "bearer.auth.sub.claim.name", "bearer.auth.identity.pool.id",
             "bearer.auth.logical.cluster", "bearer.auth.cache.expiry.buffer.seconds",
             "bearer.auth.custom.provider.class"),
            "OAuth bearer authentication to the registry is not implemented; basic auth "
            "(basic.auth.user.info) is"),
    **_each(("proxy.host", "proxy.port"), "the registry is reached directly; an HTTP proxy is not implemented"),
}

NO_EFFECT: Mapping[str, str] = {
    **_each(("http.connect.timeout.ms", "http.read.timeout.ms", "max.retries", "retries.wait.ms",
             "retries.max.wait.ms"),
            "registry requests use the client's own timeouts and retries; a failing request fails the micro-batch, "
            "which errors.retry.timeout retries"),
    **_each(("max.schemas.per.subject", "latest.cache.size", "latest.cache.ttl.sec", "schemas.cache.config",
             "id.compatibility.strict", "schema.registry.url.randomize"),
            "schemas are fetched once per id for each micro-batch's conversion and cached by the converter; "
            "the registry client's own caches and URL order do not apply"),
    **_each(("rule.service.loader.enable", "rule.metrics.enable", "validation.rules.executor.class",
             "validation.rules.fail.fast"),
            "no data contract rules run here (rule.executors is refused), so their loading and metrics do not "
            "apply"),
    "latest.compatibility.strict": "use.latest.version frames the records with the latest schema id; the "
                                   "compatibility of the records' schema with it is not checked here",
}


def accept_registry(definition: ConfigDef, original: str) -> ConfigDef:
    """Accept, on ``definition``, every key of Confluent's ``original`` converter it does not define itself."""
    keys = declared(original)

    def mine(table: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in table.items() if k in keys and k not in definition}

    definition.accept(original, refused=mine(REFUSED), not_supported=mine(NOT_SUPPORTED), no_effect=mine(NO_EFFECT),
                      group="Accepted (Confluent)")
    # Confluent's serializers read the older name when the newer is not set
    return definition.renamed("schema.registry.basic.auth.user.info", "basic.auth.user.info",
                              "Confluent's serializers")
