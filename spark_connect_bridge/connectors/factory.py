"""Build a connector from a Kafka Connect config: resolve ``connector.class``, parse every key once on the
driver, and refuse keys the caller does not apply."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..config import Config, load_config_file, resolve_providers
from ..config.common import KAFKA_ONLY_PREFIXES, PLUGIN_PREFIXES, SPARK_OPTION_KEYS, warn_kafka_only
from ..core.plugins import resolve_class
from ..errors import ConfigError, ConfigProblem
from .base import SinkConnector, SourceConnector, connector_config_def

__all__ = ["build_connector", "connector_class", "parse_connector_config", "stage_keys"]

log = logging.getLogger(__name__)

# Keys that configure the DataFrame stages around a connector (transforms, converters, record-error routing).
_STAGE_KEYS = ("transforms", "predicates", "key.converter", "value.converter", "header.converter")


def stage_keys(props: Mapping[str, Any]) -> list[str]:
    """The keys of ``props`` that configure stages around the connector rather than the connector itself."""
    out = []
    for k, v in props.items():
        low = k.lower()
        if low in _STAGE_KEYS or low.startswith(PLUGIN_PREFIXES):
            if low in ("transforms", "predicates") and not str(v).strip():
                continue
            out.append(k)
        elif _sets_error_handling(low, str(v).strip()):
            out.append(k)
    return out


def _sets_error_handling(key: str, value: str) -> bool:
    """Whether an ``errors.*`` key asks for more than the default (fail on the first bad record)."""
    if key == "errors.tolerance":
        return value.lower() != "none"
    if key.startswith("errors.deadletterqueue.") and key.endswith("topic.name"):
        return bool(value)
    return key == "errors.deadletterqueue.context.headers.enable" and value.lower() == "true"


def connector_class(props: Mapping[str, Any]) -> type[Any]:
    """Resolve ``connector.class`` (raises ConfigError listing known connectors and the nearest match)."""
    cls_name = next((v for k, v in props.items() if k.lower() == "connector.class"), None)
    if cls_name is None or not str(cls_name).strip():
        raise ConfigError([ConfigProblem("connector.class",
                                         'Missing required configuration "connector.class" which has no default '
                                         'value.')])
    return resolve_class("connector", str(cls_name).strip(), key="connector.class")


def parse_connector_config(props: Mapping[str, Any], *, kind: str | None = None, context: str | None = None,
                           stages_applied: bool = True, caller: str = "this call") -> tuple[type[Any], Config]:
    """Resolve and parse a connector config; every problem is reported at once.

    ``stages_applied=False`` (the bare ``format("kconnect")`` data source) makes transform/converter/
    errors-routing keys an error that names the call that applies them.
    """
    props = dict(props)
    if not any(k.lower() == "name" for k in props):
        props["name"] = "kconnect-" + str(props.get("connector.class", "connector")).rsplit(".", 1)[-1]
    props = resolve_providers(props)
    problems: list[ConfigProblem] = []
    cls = connector_class(props)
    ctx = context or f"connector {props.get('name')!r} ({cls.__name__})"
    if kind is not None and cls.plugin_type != kind:
        other = "writeStream/write" if cls.plugin_type == "sink" else "readStream/read"
        problems.append(ConfigProblem("connector.class", f"Invalid value {props.get('connector.class')} for "
                                                         f"configuration connector.class: {cls.__name__} is a "
                                                         f"{cls.plugin_type} connector; use it with "
                                                         f"{other}.format(\"kconnect\")"))
    # Our router dead-letters a sink's rejected records itself: the connector may apply errors.tolerance.
    routed = bool(props.get("kconnect.rejects.dir"))
    if not stages_applied:
        fn = "spark_connect_bridge.read_stream(spark, config)" if cls.plugin_type == "source" else \
            "spark_connect_bridge.write_stream(df, config)"
        for k in stage_keys(props):
            if routed and k.lower() == "errors.tolerance":
                continue
            problems.append(ConfigProblem(k, f"Configuration {k} is not applied by {caller}: transforms, "
                                             f"converters and errors.tolerance run as DataFrame stages around the "
                                             f"connector. Run the whole config with {fn} (or read_batch / "
                                             f"write_batch)."))
    definition = connector_config_def(cls)
    try:
        config = definition.parse(props, context=ctx, allowed_prefixes=PLUGIN_PREFIXES + KAFKA_ONLY_PREFIXES
                                                                     + tuple(cls.key_prefixes),
                                  allowed_keys=SPARK_OPTION_KEYS)
    except ConfigError as e:
        problems.extend(e.problems)
        config = None
    if problems:
        raise ConfigError(problems, context=ctx)
    warn_kafka_only(props, ctx)
    assert config is not None
    return cls, config


def build_connector(props: Mapping[str, Any] | str, *, kind: str | None = None, stages_applied: bool = True,
                    caller: str = "this call") -> SourceConnector | SinkConnector:
    """A ready connector object from a config mapping (or a ``.properties``/JSON file path).

    >>> src = build_connector({"connector.class": "FileStreamSource", "file": "/tmp/in.txt",
    ...                        "topic": "lines"})   # doctest: +SKIP
    """
    if isinstance(props, str):
        props = load_config_file(props)
    cls, config = parse_connector_config(props, kind=kind, stages_applied=stages_applied, caller=caller)
    return cls(config, name=config.name)
