"""Loading connector and worker configs from files, and config providers.

Kafka Connect ``.properties`` files, the JSON body of ``POST /connectors`` (``{"name": ..., "config": {...}}``)
and a bare JSON map all load to the same flat ``dict[str, str]``. Values may reference config providers
(``${env:VAR}``, ``${file:/path:key}``, ``${directory:/dir:file}``), resolved by
:func:`~spark_connect_bridge.config.providers.resolve_providers`.

>>> load_config_text('name=demo\\nconnector.class=FileStreamSource\\n')["connector.class"]
'FileStreamSource'
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ConfigProblem

__all__ = ["load_config_file", "load_config_text", "parse_properties", "ConnectorRequest"]


class ConnectorRequest(dict):
    """A flat connector config that also remembers ``initial_state`` from a create request, if any."""

    initial_state: str | None = None


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``=``, ``:`` or white space separators, ``#``/``!`` comments,
    backslash line continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``, ``\\=``...)."""
    out: dict[str, str] = {}
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not buf and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    for line in logical:
        key_chars: list[str] = []
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\" and i + 1 < n:
                key_chars.append(line[i:i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        # Skip white space, then one separator, then white space.
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        out[_unescape("".join(key_chars))] = _unescape(line[i:])
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6] or ""):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _stringify(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return ",".join(map(_stringify, v))
    return str(v)


def load_config_text(text: str, *, source: str = "<config>") -> ConnectorRequest:
    """Load a config from text: a JSON create request, a bare JSON map, or ``.properties``."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{source} is not valid JSON: {e}") from e
        if not isinstance(doc, dict):
            raise ConfigError(f"{source}: expected a JSON object")
        req = ConnectorRequest()
        if isinstance(doc.get("config"), dict):
            cfg = {k: _stringify(v) for k, v in doc["config"].items() if v is not None}
            name = doc.get("name")
            if name is not None and cfg.get("name", name) != name:
                raise ConfigError([ConfigProblem("name", f"{source}: connector name {name!r} does not match "
                                                         f"config.name {cfg['name']!r}")])
            if name is not None:
                cfg["name"] = str(name)
            req.update(cfg)
            req.initial_state = doc.get("initial_state")
            return req
        req.update({k: _stringify(v) for k, v in doc.items() if v is not None})
        return req
    req = ConnectorRequest()
    req.update(parse_properties(text))
    return req


def load_config_file(path: str | os.PathLike[str]) -> ConnectorRequest:
    """Load a ``.properties`` or JSON config file into a flat string map (providers not yet resolved)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"Cannot read config file {p}: {e.strerror}") from e
    return load_config_text(text, source=str(p))
