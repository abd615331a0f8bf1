"""Reference docs generated from the plugins' config declarations (README, ``kconnect plugins describe``)."""

from __future__ import annotations

from typing import Any

from .config.common import COMMON, SINK, SOURCE
from .config.definition import ConfigDef
from .core import plugins
from .errors import PluginNotFoundError

__all__ = ["plugin_markdown", "common_reference", "reference", "update_readme"]


def _definition(cls: type[Any]) -> ConfigDef | None:
    if plugins.plugin_type_of(cls) in ("source", "sink"):
        return cls.config_def
    return getattr(cls, "config_def", None)


def plugin_markdown(name: str, *, level: int = 3) -> str:
    """The generated reference of one plugin: its names, its docstring summary and its keys."""
    for family in plugins.FAMILIES:
        spec = plugins.resolve_spec(family, name)
        if spec is not None:
            break
    else:
        for family in plugins.FAMILIES:
            try:
                cls = plugins.resolve_class(family, name)
                spec = plugins.PluginSpec(plugins.plugin_type_of(cls) or family, f"{cls.__module__}:{cls.__qualname__}",
                                          (f"{cls.__module__}.{cls.__qualname__}",))
                break
            except PluginNotFoundError:
                continue
        else:
            raise PluginNotFoundError(f"No plugin named {name!r}; `kconnect plugins list` shows them all")
    cls = spec.load()
    definition = _definition(cls)
    doc = (cls.__doc__ or spec.doc or "").strip().split("\n\n")[0]
    aliases = ", ".join(f"`{n}`" for n in spec.names)
    body = definition.to_markdown() if definition is not None and len(definition) else "_No configuration keys._"
    # The heading is the name `kconnect plugins list` and GET /connector-plugins report (names[0]).
    return f"{'#' * level} {spec.names[0]} ({spec.type})\n\n" \
           f"{' '.join(doc.split())}\n\nNames: {aliases}\n\n{body}\n"


def _loadable(spec: plugins.PluginSpec) -> bool:
    try:
        spec.load()
    except (ImportError, AttributeError):
        return False
    return True


def common_reference() -> str:
    return (f"#### Every connector\n\n{COMMON.to_markdown()}\n\n#### Source connectors\n\n{SOURCE.to_markdown()}\n\n"
            f"#### Sink connectors\n\n{SINK.to_markdown()}\n")


BEGIN, END = "<!-- BEGIN GENERATED REFERENCE -->", "<!-- END GENERATED REFERENCE -->"


def reference() -> str:
    """The whole generated reference: common keys, then every plugin of every family."""
    parts = ["### Common connector keys\n", common_reference()]
    titles = {"connector": "Connectors", "transformation": "Transforms (SMTs)", "predicate": "Predicates",
              "converter": "Converters"}
    for family, title in titles.items():
        specs = [s for s in plugins.all_specs(family) if _loadable(s)]
        if not specs:
            continue
        parts.append(f"### {title}\n")
        seen: set[str] = set()
        for s in specs:
            if s.target in seen:
                continue
            seen.add(s.target)
            parts.append(plugin_markdown(s.names[0], level=4))
    return "\n".join(parts)


def update_readme(path: str = "README.md") -> bool:
    """Rewrite the generated block of the README; returns True when it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n\n{reference()}\n{END}{tail}"
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


if __name__ == "__main__":  # python -m spark_connect_bridge.docs [README.md]
    import sys

    changed = update_readme(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    print("README reference updated" if changed else "README reference already up to date")
