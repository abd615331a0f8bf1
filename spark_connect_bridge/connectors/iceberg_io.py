"""The files an Iceberg catalog sends the sink and the source to, held to a worker's ``connector.allowed.paths``.

An Iceberg catalog, not the connector config, says where a table lives: its metadata file, its location (where
new data and metadata files go, or ``write.data.path``), the manifests and data files it lists. A REST user who
names a catalog (a SQLite file, a PostgreSQL database, a REST server) could otherwise have the worker read any
Parquet or metadata file, or write files anywhere it may. So when a worker runs the Iceberg connectors (it hands
them its allowed paths as ``kconnect.allowed.paths``), every file pyiceberg opens, creates or deletes goes through
:class:`GuardedFileIO`, which refuses a location outside the allowed paths or inside the worker's state, before
any byte moves; and the keys that make pyiceberg import a class (``py-io-impl``, a table's
``write.py-location-provider.impl``...) are taken only from the connector config (where the worker's
``plugin.allowed.modules`` bound them), never from a table's properties or a REST catalog's answers.

>>> io = GuardedFileIO({ALLOWED: '["/data"]', FORBIDDEN: '["/data/state"]'})
>>> io.new_input("/etc/passwd")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
PermissionError: Iceberg file /etc/passwd: not under the directories this worker allows connectors to use (/data)...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyiceberg.io import PY_IO_IMPL, FileIO, InputFile, OutputFile, load_file_io

from ..core.paths import location_problem

__all__ = ["ALLOWED", "FORBIDDEN", "GuardedFileIO", "guard_catalog", "guarded_properties", "loads_code"]

#: catalog properties that carry the worker's limits to :class:`GuardedFileIO` (pyiceberg hands a FileIO the
#: catalog's properties)
ALLOWED = "kconnect.io.allowed-paths"
FORBIDDEN = "kconnect.io.forbidden-paths"
_INNER = "kconnect.io.inner-py-io-impl"
_GUARD_KEYS = (ALLOWED, FORBIDDEN, _INNER)
#: table properties that make pyiceberg import a class
LOCATION_PROVIDER = "write.py-location-provider.impl"


def loads_code(key: str) -> bool:
    """Whether pyiceberg imports the class a property of this name names (``py-io-impl``, ``py-catalog-impl``,
    ``s3.retry-strategy-impl``, ``write.py-location-provider.impl``)."""
    low = key.lower()
    return low.endswith(("-impl", ".impl"))


def guarded_properties(props: Mapping[str, str], allowed: list[str], forbidden: list[str]) -> dict[str, str]:
    """pyiceberg catalog properties whose FileIO is a :class:`GuardedFileIO` (around the one ``props`` choose)."""
    out = dict(props)
    inner = out.pop(PY_IO_IMPL, None)
    if inner:
        out[_INNER] = inner
    out.update({PY_IO_IMPL: f"{__name__}.GuardedFileIO", ALLOWED: json.dumps(allowed),
                FORBIDDEN: json.dumps(forbidden)})
    return out


def guard_catalog(catalog: Any, properties: Mapping[str, str]) -> Any:
    """``catalog``, made with ``properties`` (:func:`guarded_properties`), with its guard kept: a REST catalog's
    config overrides (merged in at its start), a table's properties and a REST catalog's answers may not set a
    property that imports a class, or the guard's own; pyiceberg would let them override the catalog's."""
    for key in [k for k in catalog.properties if (loads_code(k) or k in _GUARD_KEYS) and k not in properties]:
        del catalog.properties[key]
    catalog.properties.update({k: v for k, v in properties.items() if loads_code(k) or k in _GUARD_KEYS})
    make_io = catalog._load_file_io  # pyiceberg's one hook for a table's FileIO

    def load_file_io_guarded(properties: Mapping[str, str] | None = None, location: str | None = None) -> FileIO:
        kept = {k: v for k, v in (properties or {}).items() if not loads_code(k) and k not in _GUARD_KEYS}
        return make_io(kept, location)

    catalog._load_file_io = load_file_io_guarded
    return catalog


class GuardedFileIO(FileIO):
    """A pyiceberg FileIO that checks every location against the worker's allowed paths, then hands it to the
    FileIO pyiceberg would have chosen (by the location's scheme, or the config's own ``py-io-impl``)."""

    def __init__(self, properties: Mapping[str, str] | None = None):
        properties = dict(properties or {})
        super().__init__(properties)
        self.allowed = tuple(json.loads(properties.get(ALLOWED) or "[]"))
        self.forbidden = tuple(json.loads(properties.get(FORBIDDEN) or "[]"))
        self._inner_properties = {k: v for k, v in properties.items() if k not in _GUARD_KEYS and k != PY_IO_IMPL}
        if properties.get(_INNER):
            self._inner_properties[PY_IO_IMPL] = properties[_INNER]
        self._inner: dict[str, FileIO] = {}

    def check(self, location: str) -> None:
        """Raise PermissionError when ``location`` is out of bounds."""
        problem = location_problem(location, allowed=self.allowed, forbidden=self.forbidden)
        if problem is not None:
            raise PermissionError(f"Iceberg file {location}: {problem} (worker config connector.allowed.paths)")

    def _io(self, location: str) -> FileIO:
        scheme = location.split("://", 1)[0].lower() if "://" in location else "file"
        if scheme not in self._inner:
            self._inner[scheme] = load_file_io(self._inner_properties, location)
        return self._inner[scheme]

    def new_input(self, location: str) -> InputFile:
        self.check(location)
        return self._io(location).new_input(location)

    def new_output(self, location: str) -> OutputFile:
        self.check(location)
        return self._io(location).new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        self.check(path)
        self._io(path).delete(location)
