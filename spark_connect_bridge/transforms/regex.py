"""Java regular expressions, evaluated by Spark (``rlike``/``regexp_replace`` use ``java.util.regex``).

Kafka matches the whole topic (``Matcher.matches()``); Spark's ``rlike`` searches, so patterns are anchored
as ``^(?:pattern)\\z`` (a non-capturing group keeps group numbers). Patterns are validated, and their group
count read, with the JVM's own ``java.util.regex.Pattern`` when a classic Spark session is active, so what
is accepted is exactly what Spark will run; without one, Python's ``re`` catches the obvious mistakes only.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["anchored", "java_regex_problem", "group_count", "replacement_problem"]


def anchored(pattern: str) -> str:
    return f"^(?:{pattern})\\z"


def active_session() -> SparkSession | None:
    """The classic (JVM) SparkSession of this process, if any; None under Spark Connect or before start."""
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
        if spark is None or not hasattr(spark, "_jsparkSession"):
            return None
        return spark
    except Exception:  # noqa: BLE001 - no JVM available: callers fall back
        return None


def _jvm() -> Any:
    spark = active_session()
    return None if spark is None else spark.sparkContext._jvm


def java_regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid Java regex, or None."""
    jvm = _jvm()
    if jvm is not None:
        try:
            jvm.java.util.regex.Pattern.compile(pattern)
        except Exception as e:  # noqa: BLE001 - py4j wraps PatternSyntaxException
            text = str(e).split("PatternSyntaxException:")[-1].strip().splitlines()
            return "Invalid regex: " + (text[0] if text else "syntax error")
        return None
    try:
        re.compile(pattern)
    except re.error as e:
        if "\\p" in pattern or "\\P" in pattern or "++" in pattern:
            return None  # Java-only syntax Python cannot judge
        return f"Invalid regex: {e}"
    return None


def group_count(pattern: str) -> int | None:
    jvm = _jvm()
    if jvm is not None:
        try:
            return int(jvm.java.util.regex.Pattern.compile(pattern).matcher("").groupCount())
        except Exception:  # noqa: BLE001
            return None
    try:
        return re.compile(pattern).groups
    except re.error:
        return None


def replacement_problem(replacement: str, groups: int | None) -> str | None:
    """Check a Java replacement string (``$1``, ``${name}``, ``\\$``) against the pattern's group count."""
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 == len(replacement):
                return "character to be escaped is missing"
            i += 2
            continue
        if c == "$":
            if i + 1 == len(replacement):
                return "Illegal group reference: group index is missing"
            if replacement[i + 1] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    return "named capturing group is missing trailing '}'"
                i = end + 1
                continue
            if not replacement[i + 1].isdigit():
                return "Illegal group reference"
            j = i + 1
            # Java takes as many digits as still name an existing group.
            num = int(replacement[j])
            j += 1
            while j < len(replacement) and replacement[j].isdigit() and groups is not None \
                    and num * 10 + int(replacement[j]) <= groups:
                num = num * 10 + int(replacement[j])
                j += 1
            if groups is not None and num > groups:
                return f"No group {num}: the regex has {groups} group(s)"
            i = j
            continue
        i += 1
    return None


_META = set(".[]{}()*+?^$|\\")
# Java's '.' does not match these (without DOTALL).
LINE_TERMINATORS = ("\n", "\r", "\u0085", "\u2028", "\u2029")


def _literal(text: str) -> str | None:
    """The literal string a regex fragment matches, or None if it has any regex construct."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 < len(text) and not text[i + 1].isalnum():
                out.append(text[i + 1])
                i += 2
                continue
            return None
        if c in _META:
            return None
        out.append(c)
        i += 1
    return "".join(out)


def simple_shape(pattern: str) -> tuple[str, str, bool] | None:
    """``(prefix, suffix, has_group)`` when ``pattern`` is ``literal`` or ``literal(.*)literal``: such
    patterns are evaluated with plain string functions instead of a regex per record."""
    if "(.*)" in pattern:
        pre, _, suf = pattern.partition("(.*)")
        p, s = _literal(pre), _literal(suf)
        return (p, s, True) if p is not None and s is not None else None
    lit = _literal(pattern)
    return (lit, "", False) if lit is not None else None


def replacement_parts(replacement: str) -> list[str | int] | None:
    """A Java replacement as literal strings and group numbers (``$1``), or None for named groups."""
    parts: list[str | int] = []
    buf: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            buf.append(replacement[i + 1])
            i += 2
            continue
        if c == "$":
            if i + 1 < len(replacement) and replacement[i + 1].isdigit():
                if buf:
                    parts.append("".join(buf))
                    buf = []
                # Groups are at most 1 here, so a group number is one digit (Java stops at existing groups).
                parts.append(int(replacement[i + 1]))
                i += 2
                continue
            return None
        buf.append(c)
        i += 1
    if buf:
        parts.append("".join(buf))
    return parts


def rename_on_driver(regex: str, replacement: str, name: str) -> str | None:
    """What a router's ``regex`` + Java ``replacement`` make of ``name`` (a topic), worked out on the driver with
    Python's regex, which agrees with Java's on the patterns routers use: ``name`` itself when the regex does not
    match the whole of it, None where Python cannot tell (named groups, a bad pattern, a missing group)."""
    parts = replacement_parts(replacement)
    try:
        match = re.fullmatch(regex, name)
    except re.error:
        return None
    if match is None:
        return name
    if parts is None or any(isinstance(p, int) and p > (match.re.groups or 0) for p in parts):
        return None
    return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)
