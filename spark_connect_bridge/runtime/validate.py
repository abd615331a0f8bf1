"""One check of a connector config, as it will run (:func:`check_config`), and its REST form.

:func:`check_config` is the one validation function: ``kconnect plugins validate``, ``PUT
/connector-plugins/{plugin}/config/validate``, ``POST/PUT /connectors`` and the worker's query start all call it,
with the worker's config when a worker runs the connector (its converter defaults, its topic store or Kafka bus),
so a config that validates is one that starts. Its result carries the typed settings on to the query.

``PUT /connector-plugins/{plugin}/config/validate`` (:func:`validate_connector_config`): Kafka's ConfigInfos,
generated from the declarations.

Every declared key of the connector (its own and the common ones) gets a ``{"definition", "value"}`` entry;
each transform and predicate alias gets its ``type`` entry and its own keys under group ``Transforms: <alias>``
/ ``Predicates: <alias>``, as Kafka does. Problems the whole-config check finds on other keys (an unknown key,
with its "did you mean" suggestion; a converter sub-key) are reported too, with ``"definition": null``, so a
config this endpoint accepts is one the worker accepts.

>>> infos = validate_connector_config("FileStreamSource", {"connector.class": "FileStreamSource"})  # doctest: +SKIP
>>> infos["error_count"]                                                                             # doctest: +SKIP
2
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..bus.kafka import KafkaSinkPlan, KafkaSourcePlan, plan_sink, plan_source
from ..config import HIDDEN, Type
from ..config.common import ALLOWED_PATHS_OPTION, FORBIDDEN_PATHS_OPTION
from ..config.providers import resolve_providers
from ..connectors.base import connector_config_def
from ..connectors.factory import connector_class
from ..core import plugins
from ..engine.pipeline import PreparedConfig, prepare
from ..errors import ConfigError, ConfigProblem
from .errors import BadRequestError
from .secrets import mask_config
from .worker_config import WorkerConfig

__all__ = ["CheckedConfig", "check_config", "effective_config", "validate_connector_config"]


@dataclass(frozen=True)
class CheckedConfig:
    """A connector config checked as it will run: made once by :func:`check_config`, then run without parsing
    again (the worker hands ``prepared`` or the Kafka plan to the query)."""

    kind: str
    #: the config as it runs: the worker's converter defaults and dead-letter directory applied
    config: Mapping[str, str]
    prepared: PreparedConfig
    #: the Kafka bus's plan when the worker has ``bootstrap.servers``
    kafka: KafkaSinkPlan | KafkaSourcePlan | None = None

    @property
    def topics(self) -> tuple[str, ...]:
        """A sink's ``topics``."""
        return tuple(self.prepared.settings.get("topics") or ())

    @property
    def topics_regex(self) -> str:
        """A sink's ``topics.regex``."""
        return str(self.prepared.settings.get("topics.regex") or "")


def effective_config(config: Mapping[str, str], worker: WorkerConfig | None) -> dict[str, str]:
    """The connector config as a worker runs it: its converter defaults for converters the connector does not
    set, and its topic store as the dead-letter queue's directory."""
    cfg = dict(config)
    if worker is None:
        return cfg
    cls = _named_class(cfg)
    # always the worker's own limits: a config that carries these keys cannot widen them
    if cls is not None and cls.path_policy_at_run_time:
        cfg[ALLOWED_PATHS_OPTION] = json.dumps(list(worker.policy.allowed_paths))
        cfg[FORBIDDEN_PATHS_OPTION] = json.dumps(list(worker.policy.forbidden_paths))
    if cfg.get("errors.deadletterqueue.topic.name") and not cfg.get("errors.deadletterqueue.topics.dir"):
        cfg["errors.deadletterqueue.topics.dir"] = worker.topics_dir  # dead letters live in the topic store
    for conv in ("key.converter", "value.converter", "header.converter"):
        if conv in cfg or conv not in worker.converter_defaults:
            continue
        for k, v in worker.converter_defaults.items():
            if k == conv or k.startswith(conv + "."):
                cfg.setdefault(k, v)
    return cfg


def with_worker_object_store(cfg: dict[str, str], worker: WorkerConfig) -> dict[str, str]:
    """``cfg`` as the worker runs it against a bucket: a connector that reaches its tables through Hadoop's S3A keys
    of its own (the Delta sink and source with the deltalake engine) and sets none of them - a config received over
    REST cannot: the policy refuses them - gets the worker's ``spark.hadoop.fs.s3a.*`` settings, those with which
    the worker reaches its own state and delta-spark reaches tables through the session's Hadoop configuration.
    Only at run time: never in what the REST API shows of the config."""
    settings = {k[len("spark.hadoop."):]: v for k, v in worker.spark_conf.items()
                if k.startswith("spark.hadoop.fs.s3a.")}
    cls = _named_class(cfg)
    if not settings or cls is None or any(k.lower().startswith("fs.s3a.") for k in cfg):
        return cfg
    declared = set(connector_config_def(cls).names())
    return {**cfg, **{k: v for k, v in settings.items() if k in declared}}


def _named_class(cfg: Mapping[str, Any]) -> Any:
    """The connector class ``cfg`` names (a provider reference counts too), or None for an unknown one: reported by
    the config's own validation."""
    try:
        return connector_class(resolve_providers({k: v for k, v in cfg.items() if k.lower() == "connector.class"}))
    except ConfigError:
        return None


def check_config(config: Mapping[str, Any], worker: WorkerConfig | None = None, *,
                 kind: str | None = None) -> CheckedConfig:
    """Check a whole connector config (connector, transforms, predicates, converters, errors.*) as it will run:
    by ``worker`` (with its converter defaults, topic store or Kafka bus; a sink there must name its topics), or,
    without one, by ``kconnect run`` and the one-call API. Raises one :class:`ConfigError` with every problem."""
    props = {str(k): v for k, v in config.items()}
    if kind is None:
        kind = connector_class(props).plugin_type
    cfg = effective_config(props, worker)
    if worker is not None:
        cfg = with_worker_object_store(cfg, worker)
    kafka: KafkaSinkPlan | KafkaSourcePlan | None = None
    if worker is not None and worker.bootstrap_servers:
        plan = plan_sink if kind == "sink" else plan_source
        kafka = plan(cfg, worker.bootstrap_servers)
        prepared = kafka.prepared
    else:
        problems = []
        if worker is not None and kind == "sink" and not any(
                str(v).strip() for k, v in cfg.items() if k.lower() in ("topics", "topics.regex")):
            problems.append(ConfigProblem("topics", "Must configure one of topics or topics.regex"))
        try:
            prepared = prepare(cfg, kind=kind)
        except ConfigError as e:
            raise ConfigError([*problems, *e.problems], context=e.context) from None
        if problems:
            raise ConfigError(problems, context=f"connector {prepared.name!r}")
    return CheckedConfig(kind, cfg, prepared, kafka)


def _norm(name: str) -> str:
    simple = name.rsplit(".", 1)[-1]
    return name[: -len("Connector")] if simple.endswith("Connector") and simple != "Connector" else name


def _value(key: Any, name: str, props: Mapping[str, str], errors: list[str]) -> dict[str, Any]:
    if name in props:
        v: Any = props[name]
    else:
        v = key.default_text() if key is not None else None
    if key is not None and key.type is Type.PASSWORD and v not in (None, "") and not str(v).startswith("${"):
        v = HIDDEN
    elif isinstance(v, str):
        v = mask_config({name: v})[name]
    return {"name": name, "value": v, "recommended_values": [], "errors": list(errors), "visible": True}


def _entries(definition: Any, props: Mapping[str, str], prefix: str = "", group: str | None = None,
             order_base: int = 0) -> list[dict[str, Any]]:
    sub = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)} if prefix else dict(props)
    errors = definition.validate(sub)
    out: list[dict[str, Any]] = []
    keys = {k.name: k for k in definition}
    for i, info in enumerate(definition.to_rest()):
        key = keys[info["name"]]
        name = prefix + info["name"]
        d = dict(info, name=name)
        if group is not None:
            d["group"], d["order"] = group, order_base + i
        out.append({"definition": d, "value": _value(key, info["name"], sub, errors.get(info["name"], []))
                    | {"name": name}})
    # cross-key problems reported under keys the definition does not hold
    for k, msgs in errors.items():
        if k not in keys and msgs:
            out.append({"definition": None, "value": {"name": prefix + k, "value": sub.get(k), "recommended_values":
                                                      [], "errors": list(msgs), "visible": True}})
    return out


def _type_entry(list_key: str, alias: str, group: str, props: Mapping[str, str], errors: list[str]) -> dict[str, Any]:
    name = f"{list_key}.{alias}.type"
    what = "transformation" if list_key == "transforms" else "predicate"
    d = {"name": name, "type": "CLASS", "required": True, "default_value": None, "importance": "HIGH",
         "documentation": f"Class for the '{alias}' {what}.", "group": group, "order": 0, "width": "LONG",
         "display_name": f"{what.capitalize()} type for {alias}", "dependents": []}
    return {"definition": d, "value": {"name": name, "value": props.get(name), "recommended_values": [],
                                       "errors": errors, "visible": True}}


def validate_connector_config(plugin: str, props: Mapping[str, str],
                              check: Callable[[Mapping[str, str]], Any] = check_config) -> dict[str, Any]:
    """Kafka's ConfigInfos for ``props``; raises BadRequestError when ``connector.class`` is missing or does not
    name ``plugin``. ``check`` is the whole-config check (:func:`check_config` with the worker's config)."""

    cc = props.get("connector.class")
    if not cc:
        raise BadRequestError("Connector config contains no connector type")
    if not _norm(cc).endswith(_norm(plugin)) and not _norm(plugin).endswith(_norm(cc).rsplit(".", 1)[-1]):
        raise BadRequestError(f"Included connector type {cc} does not match request type {plugin}")
    try:
        cls = connector_class(props)
    except ConfigError as e:
        raise BadRequestError(str(e.problems[0].message if e.problems else e)) from e
    configs = _entries(connector_config_def(cls), props)
    for list_key, family, label in (("transforms", "transformation", "Transforms"),
                                    ("predicates", "predicate", "Predicates")):
        for alias in [a.strip() for a in props.get(list_key, "").split(",") if a.strip()]:
            group = f"{label}: {alias}"
            type_name = props.get(f"{list_key}.{alias}.type", "")
            type_errors: list[str] = []
            pcls = None
            if not type_name:
                type_errors.append(f'Missing required configuration "{list_key}.{alias}.type" which has no '
                                   f'default value.')
            else:
                try:
                    pcls = plugins.resolve_class(family, type_name, key=f"{list_key}.{alias}.type")
                except ConfigError as e:
                    type_errors.extend(p.message for p in e.problems)
            configs.append(_type_entry(list_key, alias, group, props, type_errors))
            if pcls is not None and getattr(pcls, "config_def", None) is not None:
                prefix = f"{list_key}.{alias}."
                sub = {k: v for k, v in props.items() if k.startswith(prefix)
                       and k[len(prefix):] not in ("type", "predicate", "negate")}
                configs.extend(_entries(pcls.config_def, sub, prefix, group, 1))
    # Whatever else the whole-config check finds (unknown keys, converters, ...), under its key.
    by_name = {c["value"]["name"]: c for c in configs}
    try:
        check(props)
    except ConfigError as e:
        for p in e.problems:
            entry = by_name.get(p.key)
            if entry is None:
                entry = {"definition": None, "value": {"name": p.key, "value": None if p.key not in props else
                                                       mask_config({p.key: props[p.key]})[p.key],
                                                       "recommended_values": [], "errors": [], "visible": True}}
                configs.append(entry)
                by_name[p.key] = entry
            if p.message not in entry["value"]["errors"] and not any(p.message.endswith(m) or m.endswith(p.message)
                                                                    for m in entry["value"]["errors"]):
                entry["value"]["errors"].append(p.message)
    groups: list[str] = []
    for c in configs:
        g = (c["definition"] or {}).get("group")
        if g and g not in groups:
            groups.append(g)
    return {"name": cc, "error_count": sum(len(c["value"]["errors"]) for c in configs), "groups": groups,
            "configs": configs}
