"""One call per side: a whole Kafka Connect config, connector, transforms and converters included.

* source side: connector → transforms → converters (Kafka Connect's order):
  :func:`read_stream` / :func:`read_batch` return the record DataFrame;
* sink side: converters → transforms → connector: :func:`write_stream` starts the streaming query,
  :func:`write_batch` writes a batch DataFrame.

Every key of the config is applied or rejected: the whole config is parsed and validated on the driver
before any data moves, and every problem is reported at once.

>>> df = read_stream(spark, "conf/file-source.properties")                 # doctest: +SKIP
>>> q = write_stream(df, {"connector.class": "FileStreamSink", "file": "/tmp/out.txt"},
...                  checkpoint="/tmp/ckpt")                                  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .config import load_config_file
from .config.common import PLUGIN_PREFIXES
from .connectors.factory import parse_connector_config, stage_keys
from .errors import ConfigError

__all__ = ["read_stream", "read_batch", "write_stream", "write_batch", "PreparedConfig", "prepare"]


def _as_mapping(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    if isinstance(config, (str, os.PathLike)):
        return dict(load_config_file(config))
    return dict(config)  # never mutate the caller's mapping


def _has(props: Mapping[str, Any], *keys: str) -> bool:
    return any(k in props and str(props[k]).strip() for k in keys)


@dataclass(frozen=True)
class PreparedConfig:
    """A config checked as a whole: the connector's own options, and the DataFrame stages around it."""

    kind: str
    connector_class: type
    connector_options: dict[str, str]
    transforms: Callable[[Any], Any] | None
    converters: Callable[[Any], Any] | None
    name: str


def prepare(config: Mapping[str, Any] | str | os.PathLike[str], *, kind: str) -> PreparedConfig:
    """Validate a whole config (connector, transforms, converters) and split it into its stages.

    Raises one :class:`~spark_connect_bridge.errors.ConfigError` with every problem of every part.
    """
    props = _as_mapping(config)
    errors: list[ConfigError] = []
    cls = None
    name = str(props.get("name") or "")
    try:
        cls, parsed = parse_connector_config(props, kind=kind, stages_applied=True)
        name = parsed["name"]
    except ConfigError as e:
        errors.append(e)
    transforms = None
    if _has(props, "transforms"):
        try:
            from .transforms import build_chain

            chain = build_chain(props)
            transforms = chain.apply if hasattr(chain, "apply") else chain
        except ConfigError as e:
            errors.append(e)
    converters = None
    if any(k.lower() in ("key.converter", "value.converter", "header.converter") for k in props):
        from . import converters as conv

        # The converters check their config when applied to the DataFrame (before any action).
        if kind == "source":
            converters = lambda df: conv.apply_source_converters(df, props)  # noqa: E731
        else:
            converters = lambda df: conv.apply_sink_converters(df, props)  # noqa: E731
    if errors:
        raise ConfigError.merge(errors, context=f"connector {name!r}" if name else None)
    stage = set(stage_keys(props))
    options = {k: str(v) for k, v in props.items()
               if k not in stage and not k.lower().startswith(PLUGIN_PREFIXES) and v is not None}
    options.setdefault("name", name)
    assert cls is not None
    return PreparedConfig(kind, cls, options, transforms, converters, name)


def _source_df(spark: Any, config: Mapping[str, Any] | str, streaming: bool) -> Any:
    prepared = prepare(config, kind="source")
    reader = spark.readStream if streaming else spark.read
    df = reader.format("kconnect").options(**prepared.connector_options).load()
    if prepared.transforms is not None:
        df = prepared.transforms(df)
    if prepared.converters is not None:
        df = prepared.converters(df)
    return df


def read_stream(spark: Any, config: Mapping[str, Any] | str) -> Any:
    """A streaming record DataFrame from a source connector config (connector → transforms → converters)."""
    return _source_df(spark, config, streaming=True)


def read_batch(spark: Any, config: Mapping[str, Any] | str) -> Any:
    """The same as :func:`read_stream`, as a batch DataFrame of everything available now."""
    return _source_df(spark, config, streaming=False)


def _sink_df(df: Any, prepared: PreparedConfig) -> Any:
    if prepared.converters is not None:
        df = prepared.converters(df)
    if prepared.transforms is not None:
        df = prepared.transforms(df)
    return df


def write_stream(df: Any, config: Mapping[str, Any] | str, *, checkpoint: str, trigger: Mapping[str, Any] | None = None,
                 query_name: str | None = None) -> Any:
    """Start a streaming query that runs a sink connector config over ``df`` (converters → transforms → sink).

    ``trigger`` takes ``DataStreamWriter.trigger`` keywords, e.g. ``{"availableNow": True}`` or
    ``{"processingTime": "5 seconds"}``.
    """
    prepared = prepare(config, kind="sink")
    out = _sink_df(df, prepared)
    writer = out.writeStream.format("kconnect").options(**prepared.connector_options) \
        .option("checkpointLocation", checkpoint).queryName(query_name or prepared.name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def write_batch(df: Any, config: Mapping[str, Any] | str, *, mode: str = "append") -> None:
    """Write a batch DataFrame with a sink connector config (converters → transforms → sink)."""
    prepared = prepare(config, kind="sink")
    _sink_df(df, prepared).write.format("kconnect").options(**prepared.connector_options).mode(mode).save()
