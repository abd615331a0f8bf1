"""ConfigDef: declared configuration keys, parsed once into typed values.

Modelled on Kafka's ``org.apache.kafka.common.config.ConfigDef``: every plugin declares its keys once
(type, default, validator, importance, doc); parsing checks every key and reports every problem at once;
docs, ``kconnect plugins describe`` and the REST validate endpoint are generated from the declaration.

>>> from spark_connect_bridge.config import ConfigDef, Range, Type
>>> cd = (ConfigDef()
...       .define("file", Type.STRING, doc="Source file.")
...       .define("batch.size", Type.INT, 2000, Range.at_least(1), doc="Lines per poll."))
>>> cfg = cd.parse({"file": "/tmp/in.txt"})
>>> cfg.batch_size
2000
"""

from __future__ import annotations

import difflib
import enum
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError, ConfigProblem
from .declared_keys import declared
from .validators import Validator

__all__ = [
    "Type", "Importance", "Support", "ConfigKey", "ConfigDef", "Config", "Password", "attribute_name", "NO_DEFAULT",
    "HIDDEN", "mask_secrets", "is_misspelling",
]

log = logging.getLogger(__name__)

HIDDEN = "[hidden]"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class Type(enum.Enum):
    """Kafka's config types (``ConfigDef.Type``)."""

    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Support(enum.Enum):
    """What a declared key does here. Every key the original class declares is one of these (see
    :meth:`ConfigDef.accept`); ``note`` on the key says how or why."""

    #: the key does what the original's does
    IMPLEMENTED = "implemented"
    #: accepted; it has no effect because Spark does the job another way (the note says how)
    NO_EFFECT = "no effect"
    #: accepted; set to a value other than its default it has no effect here, with a warning naming the key and why
    NOT_SUPPORTED = "not supported"
    #: accepted at its default value only: any other value would change the delivered data, so it fails with why
    REFUSED = "refused"


class Password:
    """A secret value. Its ``str``/``repr`` is ``[hidden]``; call :meth:`value` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value

    def value(self) -> str | None:
        return self._value

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self):  # picklable: executors need credentials
        return (Password, (self._value,))


_INT_RANGE = {Type.SHORT: (-(2**15), 2**15 - 1), Type.INT: (-(2**31), 2**31 - 1),
              Type.LONG: (-(2**63), 2**63 - 1)}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """Parse one raw value (string from a file, or a Python value) into the key's type; raise ValueError."""
    t = key.type
    if raw is None:
        return None
    if t in (Type.STRING, Type.CLASS):
        if isinstance(raw, type):
            return f"{raw.__module__}.{raw.__qualname__}"
        if not isinstance(raw, str):
            raise ValueError("Expected value to be a string, but it was a " + type(raw).__name__)
        return raw.strip() if t is Type.CLASS else raw
    if t is Type.PASSWORD:
        if isinstance(raw, Password):
            return raw
        if not isinstance(raw, str):
            raise ValueError("Expected value to be a string")
        return Password(raw)
    if t is Type.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError("Expected value to be either true or false")
    if t in _INT_RANGE:
        if isinstance(raw, bool):
            raise ValueError("Not a number of type " + t.value)
        try:
            v = int(raw.strip()) if isinstance(raw, str) else raw
        except ValueError:
            raise ValueError("Not a number of type " + t.value) from None
        if not isinstance(v, int):
            raise ValueError("Not a number of type " + t.value)
        lo, hi = _INT_RANGE[t]
        if not lo <= v <= hi:
            raise ValueError(f"Not a number of type {t.value} (out of range)")
        return v
    if t is Type.DOUBLE:
        try:
            return float(raw.strip()) if isinstance(raw, str) else float(raw)
        except (TypeError, ValueError):
            raise ValueError("Not a number of type DOUBLE") from None
    if t is Type.LIST:
        if isinstance(raw, str):
            return () if not raw.strip() else tuple(item.strip() for item in raw.split(","))
        if isinstance(raw, (list, tuple)):
            return tuple(str(item).strip() for item in raw)
        raise ValueError("Expected a comma-separated list")
    raise AssertionError(t)


_URL_SECRETS = re.compile(r"(?i)((?:password|passwd|pwd|secret|token)=)[^&;\s]*|(//[^/:@\s]+:)[^@/\s]*@")


def mask_secrets(text: str) -> str:
    """``text`` with credentials embedded in URLs hidden (``?password=x``, ``//user:x@host``)."""
    return _URL_SECRETS.sub(lambda m: (m.group(1) + HIDDEN) if m.group(1) else (m.group(2) + HIDDEN + "@"), text)


def _render(key: ConfigKey, value: Any) -> str:
    """The value as it may appear in a message or a listing: passwords are never shown, nor credentials
    embedded in a URL."""
    if key.type is Type.PASSWORD:
        return HIDDEN
    if isinstance(value, (list, tuple)):
        return mask_secrets(",".join(map(str, value)))
    return mask_secrets(str(value))


@dataclass(frozen=True)
class ConfigKey:
    """One declared key."""

    name: str
    type: Type
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    doc: str = ""
    group: str | None = None
    display_name: str | None = None
    dependents: tuple[str, ...] = ()
    internal: bool = False
    support: Support = Support.IMPLEMENTED
    #: how a NO_EFFECT key's job is done here, or why a NOT_SUPPORTED/REFUSED key is not
    note: str = ""

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def default_text(self) -> str | None:
        """The default as Kafka's REST API and docs show it (``None`` when required)."""
        if self.required or self.default is None:
            return None if self.required else ""
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, (list, tuple)):
            return ",".join(map(str, self.default))
        return str(self.default)

    def parse(self, raw: Any) -> Any:
        """Parse and validate ``raw``; raise :class:`ConfigError` naming this key."""
        try:
            value = parse_value(self, raw)
        except ValueError as e:
            raise ConfigError([ConfigProblem(self.name, f"Invalid value {_render(self, raw)} for "
                                                        f"configuration {self.name}: {e}")]) from None
        if self.validator is not None and value is not None:
            check_value = value.value() if isinstance(value, Password) else value
            reason = self.validator(check_value)
            if reason:
                raise ConfigError([ConfigProblem(
                    self.name, f"Invalid value {_render(self, value)} for configuration {self.name}: {reason}")])
            normalize = getattr(self.validator, "normalize", None)
            if normalize is not None:
                value = normalize(value)
        return value


Check = Callable[["Config"], Iterable[ConfigProblem]]


class ConfigDef:
    """An ordered set of :class:`ConfigKey` declarations plus cross-key checks."""

    def __init__(self, keys: Iterable[ConfigKey] = (), checks: Iterable[Check] = (),
                 renamed: Mapping[str, tuple[str, str]] = MappingProxyType({}),
                 refused_patterns: Mapping[str, str] = MappingProxyType({}),
                 patterns: Mapping[str, str] = MappingProxyType({})):
        self._keys: dict[str, ConfigKey] = {}
        self._attributes: dict[str, str] = {}
        self._checks: list[Check] = list(checks)
        # old spelling (lower case; a key or, ending in ".", a prefix) -> (new spelling, who accepts the old one)
        self._renamed: dict[str, tuple[str, str]] = dict(renamed)
        # regular expression of pattern-named keys (Debezium's column.mask.with.<n>.chars) -> why refused
        self._refused_patterns: dict[str, str] = dict(refused_patterns)
        # regular expression of implemented pattern-named keys -> their doc; the plugin reads them from originals
        self._patterns: dict[str, str] = dict(patterns)
        for k in keys:
            self._add(k)

    def renamed(self, old: str, new: str, accepted_by: str) -> ConfigDef:
        """Accept ``old``, an earlier spelling of key ``new`` (or, both ending in ``.``, of a prefix), as
        ``accepted_by`` (the version that still runs it) does: read as ``new``, with a deprecation warning.
        Setting both fails. Returns ``self``.

        >>> cd = ConfigDef().define("include", Type.LIST, []).renamed("whitelist", "include", "Kafka 3.x")
        >>> cd.parse({"whitelist": "a"}).include
        ('a',)
        """
        self._renamed[old.lower()] = (new, accepted_by)
        return self

    def refuse_pattern(self, pattern: str, note: str) -> ConfigDef:
        """Refuse keys whose whole name matches ``pattern`` (an original's pattern-named keys, such as Debezium's
        ``column.mask.with.<n>.chars``), saying why. A pattern implemented already (:meth:`pattern`) stays
        implemented. Returns ``self``."""
        if pattern not in self._patterns:
            self._refused_patterns[pattern] = note
        return self

    def pattern(self, pattern: str, doc: str) -> ConfigDef:
        """Accept keys whose whole name matches ``pattern`` (pattern-named keys the plugin implements, such as
        Debezium's ``column.truncate.to.<n>.chars``): they are kept in ``Config.originals`` for the plugin to read
        (and check, with :meth:`check`). Returns ``self``."""
        self._refused_patterns.pop(pattern, None)
        self._patterns[pattern] = doc
        return self

    @property
    def patterns(self) -> Mapping[str, str]:
        """The implemented pattern-named keys: regular expression -> doc (see :meth:`pattern`)."""
        return dict(self._patterns)

    @property
    def refused_patterns(self) -> Mapping[str, str]:
        return dict(self._refused_patterns)

    @property
    def renames(self) -> Mapping[str, tuple[str, str]]:
        """Old spelling (lower case) -> (new spelling, who accepts the old one); see :meth:`renamed`."""
        return dict(self._renamed)

    def new_spelling(self, key: str) -> str | None:
        """The key ``key`` is an old spelling of (:meth:`renamed`), if any."""
        spelling = self._new_spelling(key)
        return spelling[0] if spelling else None

    def _new_spelling(self, key: str) -> tuple[str, str] | None:
        low = key.lower()
        if low in self._renamed:
            return self._renamed[low]
        for old, (new, accepted_by) in self._renamed.items():
            if old.endswith(".") and low.startswith(old):
                return new + key[len(old):], accepted_by
        return None

    # -- declaration ------------------------------------------------------------------------------
    def define(self, name: str, type: Type, default: Any = NO_DEFAULT, validator: Validator | None = None,
               importance: Importance = Importance.MEDIUM, doc: str = "", *, group: str | None = None,
               display_name: str | None = None, dependents: Sequence[str] = (),
               internal: bool = False, support: Support = Support.IMPLEMENTED, note: str = "") -> ConfigDef:
        """Declare a key; returns ``self`` so definitions chain."""
        if default is not NO_DEFAULT and default is not None and type is not Type.PASSWORD:
            # Defaults are written as Python values; normalise them through the parser once.
            default = parse_value(ConfigKey(name, type), default)
            normalize = getattr(validator, "normalize", None)
            if normalize is not None and validator is not None and not validator(default):
                default = normalize(default)
        self._add(ConfigKey(name, type, default, validator, importance, doc, group, display_name,
                            tuple(dependents), internal, support, note))
        return self

    def accept(self, original: str, *, no_effect: Mapping[str, str] = MappingProxyType({}),
               not_supported: Mapping[str, str] = MappingProxyType({}),
               refused: Mapping[str, str] = MappingProxyType({}), group: str | None = None) -> ConfigDef:
        """Declare keys of ``original`` (a class with a data file, see :mod:`.declared_keys`) that this plugin
        accepts without implementing them: each mapping is key -> note (how Spark does the job instead, or why
        not). The key's type, default, importance and doc are the original's. Returns ``self``.

        >>> cd = ConfigDef().accept("org.apache.kafka.connect.file.FileStreamSinkConnector",
        ...                         no_effect={"file": "example"})
        >>> cd.keys["file"].support.value
        'no effect'
        """
        keys = declared(original)
        tables = ((no_effect, Support.NO_EFFECT), (not_supported, Support.NOT_SUPPORTED), (refused, Support.REFUSED))
        for table, support in tables:
            for name, note in table.items():
                if name not in keys:
                    raise ValueError(f"{original} declares no configuration {name!r}")
                k = keys[name]
                default = None if k.required else k.default
                if Type[k.type] is Type.PASSWORD:
                    default = None
                self.define(name, Type[k.type], default, importance=Importance[k.importance or "LOW"],
                            doc=k.doc, group=group, support=support, note=note)
        return self

    def check(self, fn: Check) -> ConfigDef:
        """Add a cross-key check run after every key parsed: ``fn(config) -> iterable of ConfigProblem``."""
        self._checks.append(fn)
        return self

    def _add(self, key: ConfigKey) -> None:
        if key.name in self._keys:
            raise ValueError(f"Configuration {key.name!r} is defined twice")
        attribute = attribute_name(key.name)
        if attribute in self._attributes:
            raise ValueError(f"Configurations {self._attributes[attribute]!r} and {key.name!r} would both be read "
                             f"as {attribute}")
        self._keys[key.name] = key
        self._attributes[attribute] = key.name

    def key_of(self, attribute: str) -> str | None:
        """The key read as ``attribute`` on a parsed :class:`Config` (``batch_size`` -> ``batch.size``)."""
        return self._attributes.get(attribute)

    def merge(self, *others: ConfigDef) -> ConfigDef:
        """A new ConfigDef with this one's keys followed by the others' (later definitions must be new)."""
        out = ConfigDef(self._keys.values(), self._checks, self._renamed, self._refused_patterns, self._patterns)
        for o in others:
            for k in o._keys.values():
                if k.name not in out._keys:
                    out._add(k)
            out._checks.extend(c for c in o._checks if c not in out._checks)
            for old, spelling in o._renamed.items():
                out._renamed.setdefault(old, spelling)
            for pattern, doc in o._patterns.items():
                out._patterns.setdefault(pattern, doc)
            for pattern, note in o._refused_patterns.items():
                if pattern not in out._patterns:
                    out._refused_patterns.setdefault(pattern, note)
        return out

    def without(self, *names: str) -> ConfigDef:
        return ConfigDef((k for k in self._keys.values() if k.name not in names), self._checks, self._renamed,
                         self._refused_patterns, self._patterns)

    # -- introspection ----------------------------------------------------------------------------
    @property
    def keys(self) -> Mapping[str, ConfigKey]:
        return dict(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    # -- parsing ----------------------------------------------------------------------------------
    def parse(self, props: Mapping[str, Any], *, context: str | None = None,
              allowed_prefixes: Sequence[str] = (), allowed_keys: Iterable[str] = (),
              ignore_unknown: bool = False) -> Config:
        """Parse ``props`` into a :class:`Config`; raise one :class:`ConfigError` listing every problem.

        Keys are matched case-insensitively when no exact match exists (Spark lower-cases option keys).
        Keys under ``allowed_prefixes`` or in ``allowed_keys`` are left to their owner (kept in
        ``Config.originals``). Any other unknown key that looks like a misspelling of a declared key fails with a
        "did you mean" suggestion; the rest are accepted with a warning, as Kafka Connect accepts keys a plugin
        does not declare (``ignore_unknown`` accepts them all silently). A key accepted as ``NOT_SUPPORTED`` warns
        when set to a value other than its default; a ``REFUSED`` key with such a value fails with the reason.
        Warnings are logged (once per parse) and kept in ``Config.warnings``.
        """
        problems: list[ConfigProblem] = []
        warnings: list[ConfigProblem] = []
        lower = {n.lower(): n for n in self._keys}
        given: dict[str, Any] = {}
        allowed = {k.lower() for k in allowed_keys}
        prefixes = tuple(p.lower() for p in allowed_prefixes)
        props = self._rename(props, problems, warnings)
        for raw_key, raw in props.items():
            name = raw_key if raw_key in self._keys else lower.get(raw_key.lower())
            if name is not None:
                given[name] = raw
            elif ignore_unknown or raw_key.lower() in allowed or raw_key.lower().startswith(prefixes):
                continue
            elif any(re.fullmatch(p, raw_key, re.IGNORECASE) for p in self._patterns):
                continue  # read by the plugin from the originals
            elif any(re.fullmatch(p, raw_key) for p in self._refused_patterns):
                note = next(n for p, n in self._refused_patterns.items() if re.fullmatch(p, raw_key))
                problems.append(ConfigProblem(raw_key, f"Configuration {raw_key} is not supported here: {note}"))
            elif close_key(raw_key, self._keys) is not None:
                problems.append(ConfigProblem(raw_key, unknown_key_message(raw_key, self._keys)))
            else:
                # the key is the user's text (a REST body): control characters escaped, so it cannot forge log lines
                shown = raw_key[:200].encode("unicode_escape").decode("ascii") + ("..." if len(raw_key) > 200 else "")
                warnings.append(ConfigProblem(raw_key, f'Unknown configuration "{shown}" is ignored: no plugin '
                                                       "here declares it (Kafka Connect passes such keys on unread)"))
        values: dict[str, Any] = {}
        for key in self._keys.values():
            if key.name in given:
                try:
                    values[key.name] = key.parse(given[key.name])
                except ConfigError as e:
                    problems.extend(e.problems)
                    continue
                if key.support in (Support.IMPLEMENTED, Support.NO_EFFECT) or _is_default(key, values[key.name]):
                    continue
                shown = _render(key, values[key.name])
                if key.support is Support.REFUSED:
                    problems.append(ConfigProblem(key.name, f"Invalid value {shown} for configuration {key.name}: "
                                                            f"only its default ({key.default_text()}) is supported "
                                                            f"here: {key.note}"))
                else:
                    warnings.append(ConfigProblem(key.name, f"Configuration {key.name}={shown} is not supported "
                                                            f"here and has no effect: {key.note}"))
            elif key.required:
                problems.append(ConfigProblem(
                    key.name, f'Missing required configuration "{key.name}" which has no default value.'))
            else:
                values[key.name] = key.default
        cfg = Config(self, values, props, tuple(warnings))
        if not problems:
            for chk in self._checks:
                problems.extend(chk(cfg))
        if problems:
            raise ConfigError(problems, context=context)
        for w in warnings:
            log.warning("%s%s", f"{context}: " if context else "", w.message)
        return cfg

    def _rename(self, props: Mapping[str, Any], problems: list[ConfigProblem],
                warnings: list[ConfigProblem]) -> Mapping[str, Any]:
        """``props`` with old spellings (:meth:`renamed`) read as the new ones."""
        if not self._renamed:
            return props
        out: dict[str, Any] = {}
        given = {k.lower() for k in props}
        for key, value in props.items():
            spelling = self._new_spelling(key)
            if spelling is None:
                out.setdefault(key, value)
                continue
            new, accepted_by = spelling
            if new.lower() in given:
                problems.append(ConfigProblem(key, f"Configuration {key} is the old spelling of {new}, which is set "
                                                   "too: remove one"))
                continue
            warnings.append(ConfigProblem(key, f"Configuration {key} is deprecated (an old spelling {accepted_by} "
                                               f"accepts): read as {new}"))
            out[new] = value
        return out

    def validate(self, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """Per-key error messages (empty lists for good keys), as Kafka's REST validate reports them."""
        errors: dict[str, list[str]] = {k: [] for k in self._keys}
        try:
            self.parse(props, ignore_unknown=True)
        except ConfigError as e:
            for p in e.problems:
                errors.setdefault(p.key, []).append(p.message)
        return errors

    # -- documentation ----------------------------------------------------------------------------
    def to_rest(self) -> list[dict[str, Any]]:
        """Kafka's ``ConfigKeyInfo`` list (``GET /connector-plugins/{plugin}/config``)."""
        out = []
        for order, k in enumerate(k for k in self._keys.values() if not k.internal):
            out.append({
                "name": k.name, "type": k.type.value, "required": k.required,
                "default_value": k.default_text(), "importance": k.importance.value,
                "documentation": k.doc, "group": k.group, "order": order if k.group else -1,
                "width": "NONE", "display_name": k.display_name or k.name,
                "dependents": list(k.dependents),
            })
        return out

    def to_markdown(self) -> str:
        """A reference table of every key, generated from the declaration."""
        rows = ["| Key | Type | Default | Valid values | Importance | Description |",
                "|---|---|---|---|---|---|"]
        accepted = [k for k in self._keys.values() if k.support is not Support.IMPLEMENTED and not k.internal]
        for k in self._keys.values():
            if k.internal or k.support is not Support.IMPLEMENTED:
                continue
            if k.required:
                default = "*required*"
            elif k.default is None:
                default = "null"
            else:
                default = f"`{k.default_text()}`" if k.default_text() else '`""`'
            valid = k.validator.describe() if k.validator else ""
            doc = " ".join(k.doc.split()).replace("|", "\\|")
            rows.append(f"| `{k.name}` | {k.type.value.lower()} | {default} | {valid} | "
                        f"{k.importance.value.lower()} | {doc} |")
        for pattern, doc in self._patterns.items():
            doc = " ".join(doc.split()).replace("|", "\\|")
            rows.append(f"| `{pattern}` (pattern) | list | `\"\"` | | medium | {doc} |")
        if accepted or self._refused_patterns:
            rows += ["", "Keys of the original accepted without being implemented: *no effect* (Spark does the job "
                         "as said), *not supported* (a warning when set), *refused* (any value but the default "
                         "fails, as it would change the records).", "",
                     "| Key | Default | Here | How or why |", "|---|---|---|---|"]
            for k in accepted:
                default = "null" if k.default is None else f"`{k.default_text()}`" if k.default_text() else '`""`'
                note = " ".join(k.note.split()).replace("|", "\\|")
                rows.append(f"| `{k.name}` | {default.replace('|', chr(92) + '|')} | {k.support.value} | {note} |")
            for pattern, note in self._refused_patterns.items():
                rows.append(f"| `{pattern}` (pattern) | | refused | {note.replace('|', chr(92) + '|')} |")
        return "\n".join(rows)


def _is_default(key: ConfigKey, value: Any) -> bool:
    """Whether ``value`` is the key's default (an empty value counts as a null default)."""
    if key.default is None or key.default in ("", ()):
        return value in (None, "", ())
    return bool(value == key.default)


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def is_misspelling(key: str, known: str) -> bool:
    """Whether ``key`` reads as a typo of ``known``: at most two edits (one for keys of up to six characters),
    case ignored. ``batch.sise`` and ``fiel`` are; ``topic.heartbeat.prefix`` (another key's words reordered)
    is not.

    >>> is_misspelling("delimeter", "delimiter"), is_misspelling("x", "field")
    (True, False)
    """
    a, b = key.lower(), known.lower()
    # lengths that differ by more than two cannot be two edits apart: a REST user's megabyte key costs nothing
    if a == b or abs(len(a) - len(b)) > 2:
        return False
    return _edit_distance(a, b) <= (1 if min(len(a), len(b)) <= 6 else 2)


def close_key(key: str, known: Iterable[str]) -> str | None:
    """The declared key ``key`` is a likely misspelling of, if any."""
    return next((k for k in known if is_misspelling(key, k)), None)


def unknown_key_message(key: str, known: Iterable[str]) -> str:
    known = list(known)
    typo = close_key(key, known)
    close = [typo.lower()] if typo else difflib.get_close_matches(key.lower(), [k.lower() for k in known], n=1,
                                                                  cutoff=0.6)
    hint = ""
    if close:
        original = next(k for k in known if k.lower() == close[0])
        hint = f'; did you mean "{original}"?'
    return f'Unknown configuration "{key}"{hint}'


def attribute_name(key: str) -> str:
    """The Python attribute a key is read by on a parsed :class:`Config`: ``batch.size`` -> ``batch_size``."""
    name = re.sub(r"\W", "_", key)
    return "_" + name if name[:1].isdigit() else name


@dataclass(frozen=True)
class Config(Mapping[str, Any]):
    """Typed, parsed, read-only configuration values: made once from a plugin's :class:`ConfigDef`, then passed.

    Values have their declared type (``int``, ``bool``, ``float``, ``str``; a tuple for a list; a
    :class:`~spark_connect_bridge.config.validators.Choice` enum member for a key with fixed values; a
    :class:`Password` for a secret). Read them as attributes named after the key (``config.batch_size`` for
    ``batch.size``, see :func:`attribute_name`) or by key (``config.batch_size``, as Kafka's
    ``AbstractConfig`` getters); ``repr`` and :meth:`masked` never show passwords.

    >>> from spark_connect_bridge.config import ConfigDef, Type, ValidString
    >>> cfg = (ConfigDef().define("insert.mode", Type.STRING, "insert", ValidString("insert", "upsert"))
    ...        .define("topics", Type.LIST, "")).parse({"insert.mode": "upsert", "topics": "a, b"})
    >>> cfg.insert_mode == "upsert", cfg.insert_mode.name, cfg.topics
    (True, 'UPSERT', ('a', 'b'))
    >>> cfg.batch_size
    Traceback (most recent call last):
    ...
    AttributeError: no configuration key is read as batch_size (keys: insert.mode, topics)
    """

    definition: ConfigDef = field(repr=False)
    # Not ``values``: that name is Mapping's ``values()`` method, which a field of that name would hide.
    parsed: Mapping[str, Any]
    originals: Mapping[str, Any] = field(repr=False, default_factory=dict)
    #: keys accepted with a warning: unknown to every declaration here, or set though not supported
    warnings: tuple[ConfigProblem, ...] = field(repr=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "parsed", MappingProxyType(dict(self.parsed)))
        object.__setattr__(self, "originals", MappingProxyType(dict(self.originals)))

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or "parsed" not in self.__dict__:
            raise AttributeError(attribute)
        key = self.definition.key_of(attribute)
        if key is None or key not in self.parsed:
            raise AttributeError(f"no configuration key is read as {attribute} (keys: {', '.join(self.parsed)})")
        return self.parsed[key]

    def __reduce__(self) -> Any:  # picklable (executors need the config); MappingProxyType is not
        return Config, (self.definition, dict(self.parsed), dict(self.originals), self.warnings)

    def __getitem__(self, key: str) -> Any:
        return self.parsed[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.parsed)

    def __len__(self) -> int:
        return len(self.parsed)

    def password(self, key: str) -> str | None:
        v = self.parsed[key]
        return v.value() if isinstance(v, Password) else v

    def with_prefix(self, prefix: str, *, strip: bool = True) -> dict[str, Any]:
        """The original (raw) entries under ``prefix`` (matched case-insensitively)."""
        p = prefix.lower()
        return {(k[len(prefix):] if strip else k): v for k, v in self.originals.items()
                if k.lower().startswith(p)}

    def masked(self) -> dict[str, str]:
        """String form of every value with passwords replaced by ``[hidden]``."""
        return {k: (HIDDEN if isinstance(v, Password) else _render(self.definition.keys[k], v))
                for k, v in self.parsed.items() if v is not None}

    def __repr__(self) -> str:
        return f"Config({self.masked()!r})"
