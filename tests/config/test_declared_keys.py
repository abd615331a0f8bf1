"""Every key an original class declares is known here: implemented, or accepted with a disposition (no effect,
not supported, refused unless default) and a note saying how or why. The originals' keys are the checked-in data
files of ``spark_connect_bridge/config/declared/`` (``python -m tests.support.dump_configdefs`` regenerates them)."""

from __future__ import annotations

import pytest

from spark_connect_bridge.config import ConfigDef
from spark_connect_bridge.config.declared_keys import declared, declared_classes, source_of
from spark_connect_bridge.config.definition import Support
from spark_connect_bridge.connectors.base import connector_config_def
from spark_connect_bridge.converters.base import converter_config_def
from spark_connect_bridge.core.plugins import all_specs, resolve_class
from spark_connect_bridge.runtime.worker_config import (
    _CONVERTER_PREFIXES,
    KAFKA_ONLY_KEYS,
    KAFKA_ONLY_PREFIXES,
    WORKER_CONFIG,
)

_CONNECT = "org.apache.kafka.connect.runtime."
#: declared-key files that are a part of another class's keys, not a plugin of their own
_PARTS = {_CONNECT + "ConnectorConfig", _CONNECT + "SinkConnectorConfig", _CONNECT + "SourceConnectorConfig",
          _CONNECT + "standalone.StandaloneConfig", _CONNECT + "distributed.DistributedConfig"}


def _ours(original: str) -> ConfigDef:
    """Our declaration of what ``original`` declares."""
    if original in (_CONNECT + "standalone.StandaloneConfig", _CONNECT + "distributed.DistributedConfig"):
        return WORKER_CONFIG
    spec = next(s for s in all_specs() if original in s.names or f"{original}$Value" in s.names)
    cls = resolve_class(spec.family, spec.class_name)  # type: ignore[arg-type]
    if spec.family == "connector":
        return connector_config_def(cls)
    return converter_config_def(cls) if spec.family == "converter" else cls.config_def


#: what the worker config reads besides WORKER_CONFIG: keys owned by the converters and config providers, the
#: REST listener's TLS keys, and the Kafka-only keys it logs as having no effect
_WORKER_PREFIXES = KAFKA_ONLY_PREFIXES + _CONVERTER_PREFIXES + ("config.providers", "listeners.https.ssl.",
                                                                 "listeners.http.ssl.", "ssl.")


def _known(key: str, ours: ConfigDef) -> bool:
    """Declared here, or (a Debezium pattern-named key such as ``column.mask.with.(d+).chars``) implemented or
    refused by a pattern of that name, or a worker key the worker config accepts as Kafka-only."""
    if ours is WORKER_CONFIG and (key in KAFKA_ONLY_KEYS or key.startswith(_WORKER_PREFIXES)):
        return True
    if key in ours or ours.new_spelling(key) in ours:
        return True
    patterns = [*ours.refused_patterns, *ours.patterns]
    return any(p.replace("\\", "").replace("(d+)", "d+") == key.replace("(d+)", "d+") for p in patterns)


#: Classes whose declared keys are checked in but that no plugin here runs yet (issue #34: "the plugins real configs
#: name beside the connector"). test_classes_not_run_yet fails when one of them gets a plugin: then it leaves this
#: set and its keys are checked like the others'.
NOT_RUN_YET: set[str] = set()
#: Keys being implemented elsewhere at the time of writing: JsonConverter's KIP-1054 schema.content (the schemaless
#: JSON work of issue #34). test_pending_keys_are_still_missing fails once the key exists, to remove it here.
PENDING: dict[str, set[str]] = {}


def _originals() -> list[tuple[str, tuple[str, ...]]]:
    """(plugin class, the declared-key files it must know)."""
    out = []
    for cls in declared_classes():
        if cls in _PARTS or cls in NOT_RUN_YET:
            continue
        parts: tuple[str, ...] = (cls,)
        spec = next((s for s in all_specs() if cls in s.names or f"{cls}$Value" in s.names), None)
        if spec is not None and spec.family == "connector":
            kind = "SinkConnectorConfig" if spec.type == "sink" else "SourceConnectorConfig"
            parts += (_CONNECT + kind,)
        out.append((cls, parts))
    out.append((_CONNECT + "distributed.DistributedConfig",
                (_CONNECT + "standalone.StandaloneConfig", _CONNECT + "distributed.DistributedConfig")))
    return out


@pytest.mark.parametrize("original, parts", _originals(), ids=[o for o, _ in _originals()])
def test_every_declared_key_is_known(original, parts):
    try:
        ours = _ours(original)
    except StopIteration:
        pytest.fail(f"{original}: declared keys checked in, but no plugin here answers to that class")
    missing = sorted({k for part in parts for k in declared(part)
                      if not _known(k, ours) and k not in PENDING.get(original, ())})
    assert not missing, f"{original} ({source_of(parts[0])}) declares keys unknown here: {missing}"


def test_accepted_keys_say_how_or_why():
    for original, _ in _originals():
        try:
            ours = _ours(original)
        except StopIteration:
            continue
        vague = [k.name for k in ours if k.support is not Support.IMPLEMENTED and len(k.note) < 20]
        assert not vague, f"{original}: keys accepted without a note: {vague}"


def test_classes_not_run_yet():
    have_plugin = {cls for cls in NOT_RUN_YET
                   if any(cls in s.names or f"{cls}$Value" in s.names for s in all_specs())}
    assert not have_plugin, f"{have_plugin} run here now: remove them from NOT_RUN_YET"
    assert set(declared_classes()) >= NOT_RUN_YET


def test_pending_keys_are_still_missing():
    for original, keys in PENDING.items():
        done = {k for k in keys if k in _ours(original)}
        assert not done, f"{original}: {done} are declared now: remove them from PENDING"
