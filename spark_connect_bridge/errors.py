"""One exception hierarchy for spark_connect_bridge.

Every error the library raises on purpose derives from :class:`ConnectError`. Config problems are
:class:`ConfigError` (also a ``ValueError``, so callers that validate input generically still catch it);
record-level problems are :class:`RecordError`; retriable system problems are :class:`RetriableError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ConnectError",
    "ConfigError",
    "ConfigProblem",
    "PluginNotFoundError",
    "RecordError",
    "RetriableError",
    "DataError",
    "FencedError",
    "headline",
]


class ConnectError(Exception):
    """Base class of every error raised by spark_connect_bridge."""


@dataclass(frozen=True)
class ConfigProblem:
    """One problem with one configuration key (the value is never kept: it may be a secret)."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


class ConfigError(ConnectError, ValueError):
    """A configuration is invalid. Lists every problem at once, never the value of a password.

    >>> raise ConfigError([ConfigProblem("tasks.max", "Invalid value 0 ...")])  # doctest: +SKIP
    """

    def __init__(self, problems: Sequence[ConfigProblem] | str, *, context: str | None = None):
        if isinstance(problems, str):
            problems = [ConfigProblem("", problems)]
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        self.context = context
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"Invalid configuration for {self.context}" if self.context else "Invalid configuration"
        if len(self.problems) == 1:
            return f"{head}: {self.problems[0]}"
        lines = [f"{head}: {len(self.problems)} problems"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.problems]

    @classmethod
    def merge(cls, errors: Iterable[ConfigError], *, context: str | None = None) -> ConfigError:
        problems = [p for e in errors for p in e.problems]
        return cls(problems, context=context)


class PluginNotFoundError(ConfigError):
    """A connector, transform, predicate or converter class could not be resolved."""


class FencedError(ConnectError):
    """A worker of a distributed group tried to commit for a connector whose lease it lost: another worker owns
    the connector under a newer epoch, so this commit must not happen."""


class DataError(ConnectError):
    """A record cannot be converted or transformed (Kafka's DataException)."""


class RecordError(ConnectError):
    """A record failed at a stage; carries the record's coordinates for the error message and the DLQ."""

    def __init__(self, message: str, *, stage: str | None = None, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None):
        self.stage, self.topic, self.partition, self.offset = stage, topic, partition, offset
        where = ", ".join(
            f"{k}={v}" for k, v in (("stage", stage), ("topic", topic), ("partition", partition),
                                    ("offset", offset)) if v is not None)
        super().__init__(f"{message} ({where})" if where else message)


class RetriableError(ConnectError):
    """A transient failure (connection refused or reset, timeout, deadlock); the operation may succeed later."""


# "spark_connect_bridge.errors.ConfigError: Invalid configuration ..." as a Python traceback ends, wherever Spark
# put it (a Python worker's traceback inside a Java exception inside a Py4J or streaming query exception).
_OURS = re.compile(r"(?:^|[\s:])spark_connect_bridge\.(?:\w+\.)*(\w+(?:Error|Exception)): (.*)$")


def headline(error: BaseException | str) -> str | None:
    """Our own message inside a failure Spark wrapped in stack traces, once; ``None`` when there is none.

    A config or record error raised in a Spark task reaches the driver as the text of a Java exception that holds
    the Python worker's traceback, often twice (the task's failure and the job's). The last error of ours in that
    text is the one raised first, at the cause; its message lines follow it (``  - key: ...`` for several
    problems). An error of ours raised on the driver is its own message.
    """
    text = str(error)
    if isinstance(error, ConnectError) and "Traceback (most recent call last)" not in text:
        return text
    lines = text.splitlines()
    found: str | None = None
    for i, line in enumerate(lines):
        m = _OURS.search(line)
        if not m:
            continue
        message = [m.group(2)]
        for more in lines[i + 1:]:
            if not more.startswith("  - "):
                break
            message.append(more)
        found = "\n".join(message)
    return found
