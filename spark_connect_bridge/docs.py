"""Reference docs generated from the plugins' config declarations (the docs site's ``docs/reference`` pages,
``kconnect plugins describe``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config.common import COMMON, SINK, SOURCE
from .config.definition import ConfigDef
from .core import plugins
from .errors import PluginNotFoundError

__all__ = ["plugin_markdown", "common_reference", "reference_pages", "update_reference"]


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


def common_reference(*, level: int = 2) -> str:
    """The keys every connector, every source and every sink takes, under headings of ``level``."""
    heading = "#" * level
    return (f"{heading} Every connector\n\n{COMMON.to_markdown()}\n\n{heading} Source connectors\n\n"
            f"{SOURCE.to_markdown()}\n\n{heading} Sink connectors\n\n{SINK.to_markdown()}\n")


REFERENCE_DIR = "docs/reference"

#: The generated pages of the docs site: file name -> (title, plugin family or None for the common keys).
PAGES = {"common.md": ("Common connector keys", None), "connectors.md": ("Connectors", "connector"),
         "transforms.md": ("Transforms (SMTs)", "transformation"), "predicates.md": ("Predicates", "predicate"),
         "converters.md": ("Converters", "converter")}

_GENERATED = "<!-- Generated from the config declarations by `python -m spark_connect_bridge.docs`: do not edit. -->\n"


def _family_reference(family: str) -> str:
    parts = []
    seen: set[str] = set()
    for s in plugins.all_specs(family):
        if s.target in seen or not _loadable(s):
            continue
        seen.add(s.target)
        parts.append(plugin_markdown(s.names[0], level=2))
    return "\n".join(parts)


def reference_pages() -> dict[str, str]:
    """The generated reference, one Markdown page per family (file name -> text), for ``docs/reference``.

    >>> sorted(reference_pages())
    ['common.md', 'connectors.md', 'converters.md', 'predicates.md', 'transforms.md']
    """
    pages = {}
    for name, (title, family) in PAGES.items():
        body = common_reference() if family is None else _family_reference(family)
        pages[name] = f"# {title}\n\n{_GENERATED}\n{body.rstrip()}\n"
    return pages


def update_reference(directory: str = REFERENCE_DIR) -> list[str]:
    """Write the generated reference pages into ``directory``; returns the names of the pages that changed."""
    changed = []
    for name, text in reference_pages().items():
        path = Path(directory) / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def main(argv: list[str]) -> int:
    """``python -m spark_connect_bridge.docs [DIRECTORY]``: regenerate the reference pages of the docs site."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m spark_connect_bridge.docs",
        description="Regenerate the generated reference pages of the docs site (one page per plugin family and "
                    "the common keys) from the plugins' config declarations; prints the pages that changed.")
    parser.add_argument("directory", nargs="?", default=REFERENCE_DIR,
                        help="where the pages go (default: %(default)s, relative to the working directory)")
    args = parser.parse_args(argv)
    written = update_reference(args.directory)
    print(f"reference pages updated: {', '.join(written)}" if written else "reference pages already up to date")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
