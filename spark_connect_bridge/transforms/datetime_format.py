"""Java ``SimpleDateFormat`` patterns translated to Spark datetime patterns (always UTC here).

Spark's patterns follow ``DateTimeFormatter``, close to ``SimpleDateFormat`` but not identical. Letters that
mean the same in both are kept; those whose meaning differs or that Spark does not support are rejected with
a clear message instead of silently producing other text:

* kept: ``G y M d H m s a h k K z Z X E D`` and quoted text (``'T'``, ``''``); ``L`` becomes ``M``;
* ``S`` (milliseconds in SimpleDateFormat, fraction of second in Spark) is accepted as ``S``, ``SS``-less
  ``SSS`` only (the only form both read the same);
* rejected: ``Y`` (week year), ``w``/``W`` (week of year/month), ``F``, ``u`` (day number of week in
  SimpleDateFormat, year in Spark), any other letter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["translate", "FormatError", "format_utc", "parse_utc", "has_zone"]

_SAME = set("GyMdHmsahkKzZXED")
_REJECT = {
    "Y": "week-based year 'Y' is not supported by Spark's formatter",
    "w": "week-of-year 'w' is not supported by Spark's formatter",
    "W": "week-of-month 'W' is not supported by Spark's formatter",
    "F": "day-of-week-in-month 'F' is not supported by Spark's formatter",
    "u": "'u' means day-number-of-week in SimpleDateFormat but year in Spark",
}


class FormatError(ValueError):
    pass


def translate(pattern: str) -> str:
    """The Spark pattern for a SimpleDateFormat ``pattern``; ``FormatError`` when it cannot be translated."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            j = i + 1
            while j < n:
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            if j >= n:
                raise FormatError(f"Unterminated quote at position {i}")
            out.append(pattern[i:j + 1])
            i = j + 1
            continue
        if c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            run = j - i
            if c in _REJECT:
                raise FormatError(f"Illegal pattern character '{c}': {_REJECT[c]}")
            if c == "S":
                if run != 3:
                    raise FormatError("'S' must be written SSS (milliseconds): SimpleDateFormat and Spark read "
                                      "other widths differently")
                out.append("SSS")
            elif c == "L":
                out.append("M" * run)
            elif c in _SAME:
                if c == "E" and run > 4:
                    run = 4
                if c == "y" and run == 1:
                    run = 4
                out.append(c * run)
            else:
                raise FormatError(f"Illegal pattern character '{c}'")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def has_zone(spark_pattern: str) -> bool:
    unquoted = "".join(part for i, part in enumerate(spark_pattern.split("'")) if i % 2 == 0)
    return any(c in unquoted for c in "zZX")


def format_utc(ts: Column | str, spark_pattern: str) -> Column:
    """``date_format`` rendering the wall clock in UTC whatever the session time zone."""
    from pyspark.sql import functions as F

    return F.date_format(F.to_utc_timestamp(ts, F.current_timezone()), spark_pattern)


def parse_utc(text: Column | str, spark_pattern: str) -> Column:
    """``try_to_timestamp`` reading the text as UTC wall-clock time (unless the pattern has a zone)."""
    from pyspark.sql import functions as F

    parsed = F.try_to_timestamp(text, F.lit(spark_pattern))
    return parsed if has_zone(spark_pattern) else F.from_utc_timestamp(parsed, F.current_timezone())
