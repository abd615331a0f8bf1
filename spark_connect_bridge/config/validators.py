"""Validators for :class:`~spark_connect_bridge.config.ConfigKey` values.

A validator is a callable ``validator(value) -> str | None`` returning the reason a parsed value is
invalid (``None`` when it is fine) plus ``describe()`` for the generated docs. Messages follow Kafka's
(``Value must be at least 1``, ``String must be one of: ...``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["Validator", "Range", "Choice", "ValidString", "ValidList", "NonEmptyString", "Regex",
           "CaseInsensitiveValidString", "Lambda", "all_of"]


class Validator(Protocol):
    def __call__(self, value: Any) -> str | None: ...

    def describe(self) -> str: ...


class Range:
    """Numeric bounds, inclusive."""

    def __init__(self, lo: float | None = None, hi: float | None = None):
        self.lo, self.hi = lo, hi

    @classmethod
    def at_least(cls, lo: float) -> Range:
        return cls(lo, None)

    @classmethod
    def between(cls, lo: float, hi: float) -> Range:
        return cls(lo, hi)

    def __call__(self, value: Any) -> str | None:
        if self.lo is not None and value < self.lo:
            return f"Value must be at least {self.lo}"
        if self.hi is not None and value > self.hi:
            return f"Value must be no more than {self.hi}"
        return None

    def describe(self) -> str:
        if self.hi is None:
            return f"[{self.lo},...]"
        return f"[{self.lo},...,{self.hi}]"


class Choice(str, enum.Enum):
    """The parsed value of a key with a fixed set of values: an enum member that is also its declared string
    (``policy == "all"`` holds, ``f"{policy}"`` is ``all``). Each :class:`ValidString` makes its own subclass.
    Pickled as the plain string (the subclass is made at run time, so an executor could not import it)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return str, (self.value,)


def _choice_enum(allowed: Sequence[str]) -> type[Choice]:
    members: dict[str, str] = {}
    for value in allowed:
        name = re.sub(r"\W", "_", value).upper() or "EMPTY"
        name = "_" + name if name[0].isdigit() else name
        while name in members:
            name += "_"
        members[name] = value
    return Choice("Choice", members)  # type: ignore[call-overload]  # the functional API, made per validator


class ValidString:
    """One of a fixed set of strings (case-sensitive, as Kafka's ``ValidString``). Parsed values become members of
    :attr:`choices`, a :class:`Choice` enum of the allowed spellings."""

    def __init__(self, *allowed: str, case_sensitive: bool = True):
        self.allowed = tuple(allowed)
        self.case_sensitive = case_sensitive
        self.choices = _choice_enum(self.allowed)

    def __getstate__(self) -> dict[str, Any]:  # the enum class is made again where unpickled
        return {k: v for k, v in self.__dict__.items() if k != "choices"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.choices = _choice_enum(self.allowed)

    @classmethod
    def in_(cls, *allowed: str) -> ValidString:
        return cls(*allowed)

    def __call__(self, value: Any) -> str | None:
        ok = value in self.allowed if self.case_sensitive else \
            str(value).lower() in {a.lower() for a in self.allowed}
        return None if ok else f"String must be one of: {', '.join(self.allowed)}"

    def describe(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"

    def normalize(self, value: Any) -> Any:
        """The :attr:`choices` member of a valid value, in its allowed spelling (``ALL`` -> ``all``), so code
        compares without ``.lower()``."""
        spelling = value if self.case_sensitive else \
            {a.lower(): a for a in self.allowed}.get(str(value).lower(), value)
        return self.choices(spelling) if spelling in self.allowed else value


def CaseInsensitiveValidString(*allowed: str) -> ValidString:
    return ValidString(*allowed, case_sensitive=False)


class ValidList:
    """Every list item valid (and optionally the list non-empty)."""

    def __init__(self, item: Validator | None = None, *, non_empty: bool = False):
        self.item, self.non_empty = item, non_empty

    @classmethod
    def non_empty_list(cls) -> ValidList:
        return cls(non_empty=True)

    @classmethod
    def in_(cls, *allowed: str) -> ValidList:
        return cls(ValidString(*allowed))

    def __call__(self, value: Sequence[Any]) -> str | None:
        if self.non_empty and not value:
            return "Empty list"
        if self.item is not None:
            for v in value:
                reason = self.item(v)
                if reason:
                    return f"Invalid item {v!r}: {reason}"
        return None

    def normalize(self, value: Sequence[Any]) -> tuple[Any, ...]:
        normalize = getattr(self.item, "normalize", None)
        return tuple(normalize(v) for v in value) if normalize is not None else tuple(value)

    def describe(self) -> str:
        d = self.item.describe() if self.item is not None else ""
        return ("non-empty list" + (f" of {d}" if d else "")) if self.non_empty else d


class NonEmptyString:
    def __call__(self, value: Any) -> str | None:
        return "String may not be empty" if not str(value).strip() else None

    def describe(self) -> str:
        return "non-empty string"


class Regex:
    """The value itself must be a valid regular expression."""

    def __call__(self, value: Any) -> str | None:
        try:
            re.compile(value)
        except re.error as e:
            return f"Invalid regex: {e}"
        return None

    def describe(self) -> str:
        return "valid regex"


class Lambda:
    """Ad-hoc validator: ``Lambda(fn, "description")`` where ``fn(value) -> str | None``."""

    def __init__(self, fn: Callable[[Any], str | None], description: str = ""):
        self.fn, self.description = fn, description

    def __call__(self, value: Any) -> str | None:
        return self.fn(value)

    def describe(self) -> str:
        return self.description


def all_of(*validators: Validator) -> Lambda:
    def check(v: Any) -> str | None:
        for val in validators:
            r = val(v)
            if r:
                return r
        return None

    return Lambda(check, ", ".join(v.describe() for v in validators if v.describe()))
