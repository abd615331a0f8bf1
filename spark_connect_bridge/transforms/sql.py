"""SqlTransform (beyond Kafka Connect): filter and project records with Spark SQL expressions."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..config import Config, ConfigDef, Importance, Type
from ..core.records import RECORD_COLUMNS
from ..errors import ConfigError, ConfigProblem
from .base import Step, Transformation
from .regex import active_session

__all__ = ["SqlTransform", "split_select"]


def split_select(text: str) -> list[str]:
    """Split a SQL select list at top-level commas (not inside parentheses, brackets or quotes)."""
    items, depth, buf, quote = [], 0, [], None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif c in "([{":
            depth += 1
            buf.append(c)
        elif c in ")]}":
            depth -= 1
            buf.append(c)
        elif c == "," and depth == 0:
            items.append("".join(buf).strip())
            buf = []
        else:
            buf.append(c)
        i += 1
    if "".join(buf).strip():
        items.append("".join(buf).strip())
    return items


def _parse_problem(expr: str) -> str | None:
    """Why ``expr`` does not parse as a Spark SQL expression (checked when a classic session is running;
    otherwise the first use reports it)."""
    spark = active_session()
    if spark is None:
        return None
    try:
        spark._jsparkSession.sessionState().sqlParser().parseExpression(expr)
    except Exception as e:  # noqa: BLE001 - py4j-wrapped ParseException
        text = str(e).split("ParseException:")[-1].strip().splitlines()
        return text[0] if text else "syntax error"
    return None


class SqlTransform(Transformation):
    """Filter and project records with Spark SQL expressions. ``filter`` keeps the records for which the
    boolean expression is true (false or null drops them, stopping the chain for them). ``select`` is a
    select list whose items are each named after a record column they replace (``key``, ``value``, ``topic``,
    ``partition``, ``offset``, ``timestamp``, ``headers``); other columns are kept. Both see the record
    columns of the stage's input, e.g. ``select=named_struct('id', value.id, 'name', upper(value.name)) AS
    value, concat(topic, '-v2') AS topic``.
    """

    kafka_class = "spark_connect_bridge.transforms.Sql"
    config_def = (
        ConfigDef()
        .define("filter", Type.STRING, "", importance=Importance.HIGH,
                doc="A Spark SQL boolean expression; records for which it is not true are dropped.")
        .define("select", Type.STRING, "", importance=Importance.HIGH,
                doc="A Spark SQL select list; each item must be named (AS) after the record column it replaces.")
    )

    expression_keys = ("filter", "select")

    @classmethod
    def expressions(cls, key: str, value: str) -> list[str]:
        return split_select(value) if key == "select" else super().expressions(key, value)

    def validate(self, config: Config) -> list[ConfigProblem]:
        problems = []
        if not config.filter.strip() and not config.select.strip():
            problems.append(ConfigProblem("", "Nothing to do: set filter and/or select"))
        if config.filter.strip():
            reason = _parse_problem(config.filter)
            if reason:
                problems.append(ConfigProblem("filter", f"Invalid value {config['filter']} for configuration "
                                                        f"filter: {reason}"))
        for item in split_select(config.select):
            reason = _parse_problem(item)
            if reason:
                problems.append(ConfigProblem("select", f"Invalid value {config['select']} for configuration "
                                                        f"select: item {item!r}: {reason}"))
        return problems

    def configure(self, config: Config) -> None:
        self.filter = config.filter.strip()
        self.items = split_select(config.select)

    def _key(self, name: str) -> str:
        return f"transforms.{self.alias}.{name}" if self.alias else name

    def plan(self, df: DataFrame) -> Step:
        step = Step()
        try:
            if self.filter:
                cond: Column = F.expr(self.filter)
                df.select(cond)  # analysis only: unknown columns and type errors surface here
                step.drop = ~F.coalesce(cond.cast("boolean"), F.lit(False))
        except Exception as e:  # noqa: BLE001 - AnalysisException / ParseException
            raise ConfigError([ConfigProblem(self._key("filter"), f"Invalid value {self.filter} for configuration "
                                                                  f"{self._key('filter')}: {_first(e)}")]) from None
        for item in self.items:
            try:
                expr = F.expr(item)
                name = df.select(expr).columns[0]
            except Exception as e:  # noqa: BLE001
                raise ConfigError([ConfigProblem(self._key("select"), (
                    f"Invalid value {item} for configuration {self._key('select')}: {_first(e)}"))]) from None
            if name not in RECORD_COLUMNS:
                raise ConfigError([ConfigProblem(self._key("select"), (
                    f"Invalid value {item} for configuration {self._key('select')}: it produces column {name!r}, "
                    f"which is not a record column; name it after the column it replaces "
                    f"({', '.join(RECORD_COLUMNS)}) with AS"))])
            step.updates[name] = expr
            step.metadata[name] = {}
        return step


def _first(e: Exception) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
