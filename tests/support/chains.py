"""Kafka Connect ``transforms``/``predicates`` keys of a chain, as the differential tests write their configs."""

from __future__ import annotations

KAFKA_TRANSFORMS = "org.apache.kafka.connect.transforms."
KAFKA_PREDICATES = "org.apache.kafka.connect.transforms.predicates."


def chain_config(*stages: tuple[str, dict[str, str]], prefix: str = KAFKA_TRANSFORMS, alias: str = "s",
                 predicates: dict[str, tuple[str, dict[str, str]]] | None = None) -> dict[str, str]:
    """The config keys of a chain of ``stages`` (``(kind, settings)``, ``prefix`` + kind the class), named
    ``<alias>0``, ``<alias>1``, ...; ``predicates`` by name (``(kind, settings)`` of Kafka's predicates).

    >>> chain_config(("HoistField$Value", {"field": "v"}))["transforms.s0.type"]
    'org.apache.kafka.connect.transforms.HoistField$Value'
    """
    config = {"transforms": ",".join(f"{alias}{i}" for i in range(len(stages)))}
    for i, (kind, settings) in enumerate(stages):
        config[f"transforms.{alias}{i}.type"] = prefix + kind
        config.update({f"transforms.{alias}{i}.{k}": v for k, v in settings.items()})
    if predicates:
        config["predicates"] = ",".join(predicates)
        for name, (kind, settings) in predicates.items():
            config[f"predicates.{name}.type"] = KAFKA_PREDICATES + kind
            config.update({f"predicates.{name}.{k}": v for k, v in settings.items()})
    return config
