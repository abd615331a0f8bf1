"""Built-in plugins of this family: every name each one answers to. Kept import-free."""

from ..plugins import PluginSpec

CATALOG: list[PluginSpec] = []
