"""The example configs shipped in the package (the checkout's ``conf/``): what ``kconnect examples`` prints or
writes, so that the quick start runs from an installed wheel as it does from a checkout.

>>> "file-source.properties" in example_names()
True
>>> example_text("file-source").splitlines()[0].startswith("#")
True
"""

from __future__ import annotations

import importlib.resources
import os
from typing import Any

from ..errors import ConfigError

__all__ = ["example_names", "example_text", "write_examples"]


def _root() -> Any:  # an importlib.resources Traversable
    return importlib.resources.files("spark_connect_bridge").joinpath("examples")


def _walk(node: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    for child in node.iterdir():
        if child.is_dir():
            out.extend(_walk(child, f"{prefix}{child.name}/"))
        elif child.name.endswith((".properties", ".json", ".yml", ".py")):  # configs; pipelines/: a spec, its code
            out.append(prefix + child.name)
    return out


def example_names() -> list[str]:
    """Every example config, as its path under ``conf/`` (``file-source.properties``, ``demo/...``)."""
    return sorted(_walk(_root()))


def example_text(name: str) -> str:
    """The text of one example; ``name`` may leave out the extension (``file-source``)."""
    names = example_names()
    found = [n for n in names if n == name or n.rsplit(".", 1)[0] == name]
    if not found:
        raise ConfigError(f"No example config {name!r}; the examples are: {', '.join(names)}")
    return _root().joinpath(found[0]).read_text(encoding="utf-8")


def write_examples(directory: str) -> list[str]:
    """Write every example under ``directory`` (as ``conf/`` of a checkout holds them) and return the paths
    written; an existing file is left as it is (a user's edited copy wins)."""
    written = []
    for name in example_names():
        path = os.path.join(directory, name)
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(example_text(name))
        written.append(path)
    return written
