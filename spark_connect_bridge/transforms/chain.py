"""The transformation chain: Kafka Connect's ``transforms``/``predicates`` grammar over DataFrames.

>>> chain = build_chain({"transforms": "drop", "transforms.drop.type": "ReplaceField$Value",
...                      "transforms.drop.exclude": "secret"})            # doctest: +SKIP
>>> out = chain(df)                                                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..config.definition import ConfigKey, Type, parse_value
from ..core.plugins import resolve_class
from ..errors import ConfigError, ConfigProblem
from ..version import __version__
from .base import Predicate, Transformation, null_flag, prefix_problems
from .plugin_version import KEY as PLUGIN_VERSION
from .plugin_version import available_versions, version_problem

__all__ = ["Chain", "Stage", "apply_transforms", "build_chain"]

_RESERVED = ("type", "predicate", "negate", PLUGIN_VERSION)


@dataclass(frozen=True)
class Stage:
    """One configured transform: its alias, the transform, and an optional predicate (with negate)."""

    alias: str
    transform: Transformation
    predicate: Predicate | None = None
    predicate_alias: str | None = None
    negate: bool = False

    def lift_safe(self, column: str) -> bool:
        return self.transform.lift_safe(column) and (self.predicate is None or self.predicate.lift_safe(column))

    def apply(self, df: DataFrame) -> DataFrame:
        if self.predicate is None:
            return self.transform.apply(df, alias=self.alias)
        condition = self.predicate.test(df)
        if self.negate:
            condition = ~condition
        return self.transform.apply(df, alias=self.alias, condition=condition,
                                    unchanged_nulls=self.predicate.null_columns(self.negate))


class Chain:
    """An ordered list of stages; ``chain(df)`` / ``df.transform(chain)`` applies them in order.

    Also accepts bare transforms: ``Chain([ReplaceField.Value(exclude=["a"]), Filter(...)])``.
    """

    def __init__(self, stages: Iterable[Stage | Transformation]):
        out: list[Stage] = []
        for i, s in enumerate(stages):
            if isinstance(s, Stage):
                out.append(s)
            else:
                alias = s.alias or f"{type(s).__qualname__}#{i}"
                out.append(Stage(alias, s, s.predicate, None, s.negate))
        self.stages: tuple[Stage, ...] = tuple(out)

    def apply(self, df: DataFrame) -> DataFrame:
        """Run the stages in order. A nullable struct ``key``/``value`` is *lifted* over each run of stages that
        allow it (:meth:`Transformation.lift_safe`) and rewrite it at least twice: its nulls become structs of
        nulls and a hidden flag column keeps which records were null, restored after the run. Catalyst cannot
        merge the struct updates of successive stages through the ``if (isnull(v)) null else named_struct(...)``
        each builds for a nullable struct, so without lifting every stage materialises an intermediate struct per
        record; over a non-null struct the whole run becomes one struct expression, as when written by hand."""
        lifted: set[str] = set()
        for i, stage in enumerate(self.stages):
            for column in _LIFTABLE:
                if column in lifted and not stage.lift_safe(column):
                    df = _unlift(df, column)
                    lifted.discard(column)
                elif column not in lifted and _rewrites_in_run(self.stages[i:], column) >= 2 \
                        and _can_lift(df, column):
                    df = _lift(df, column)
                    lifted.add(column)
            df = stage.apply(df)
        for column in sorted(lifted):
            df = _unlift(df, column)
        return df

    __call__ = apply

    @property
    def aliases(self) -> list[str]:
        return [s.alias for s in self.stages]

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return f"Chain({', '.join(f'{s.alias}={type(s.transform).__qualname__}' for s in self.stages)})"


_LIFTABLE = ("key", "value")


def _rewrites_in_run(stages: Sequence[Stage], column: str) -> int:
    """How many stages of the run that can go on with ``column`` lifted, from the first one on, rewrite it (a
    ``$Key``/``$Value`` SMT on it): only two or more of them have struct updates to merge."""
    n = 0
    for stage in stages:
        if not stage.lift_safe(column):
            break
        n += getattr(stage.transform, "target", None) == column
    return n


def _can_lift(df: DataFrame, column: str) -> bool:
    """A nullable struct whose top-level fields are all nullable (a struct of nulls then has the same type)."""
    if column not in df.columns or null_flag(column) in df.columns:
        return False
    sf = df.schema[column]
    dt = sf.dataType
    return isinstance(dt, StructType) and sf.nullable and bool(dt.fields) and all(f.nullable for f in dt.fields)


def _lift(df: DataFrame, column: str) -> DataFrame:
    sf = df.schema[column]
    assert isinstance(sf.dataType, StructType)
    nulls = F.struct(*[F.lit(None).cast(f.dataType).alias(f.name, metadata=f.metadata) for f in sf.dataType.fields])
    df = df.withColumns({null_flag(column): F.col(column).isNull(), column: F.coalesce(F.col(column), nulls)})
    return df.withMetadata(column, dict(sf.metadata))


def _unlift(df: DataFrame, column: str) -> DataFrame:
    sf = df.schema[column]
    restored = F.when(F.col(null_flag(column)), F.lit(None).cast(sf.dataType)).otherwise(F.col(column))
    return df.withColumn(column, restored).drop(null_flag(column)).withMetadata(column, dict(sf.metadata))


def _aliases(config: Mapping[str, Any], key: str, problems: list[ConfigProblem]) -> list[str]:
    raw = config.get(key)
    if raw is None:
        return []
    try:
        names = parse_value(ConfigKey(key, Type.LIST), raw)
    except ValueError as e:
        problems.append(ConfigProblem(key, f"Invalid value {raw} for configuration {key}: {e}"))
        return []
    names = [n for n in names if n]
    if len(set(names)) != len(names):
        dups = sorted({n for n in names if names.count(n) > 1})
        problems.append(ConfigProblem(key, f"Invalid value {','.join(names)} for configuration {key}: "
                                           f"Duplicate alias provided ({', '.join(dups)})."))
        names = list(dict.fromkeys(names))
    return names


def _sub(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def _build(family: str, prefix: str, sub: Mapping[str, Any], problems: list[ConfigProblem],
           **extra: Any) -> Any:
    type_key = f"{prefix}type"
    if sub.get("type") in (None, ""):
        problems.append(ConfigProblem(type_key, f'Missing required configuration "{type_key}" which has no '
                                                f"default value."))
        return None
    try:
        cls = resolve_class(family, str(sub["type"]), key=type_key)
    except ConfigError as e:
        problems.extend(e.problems)
        return None
    version_key = f"{prefix}{PLUGIN_VERSION}"
    name = getattr(cls, "kafka_class", "") or f"{cls.__module__}.{cls.__qualname__}"
    why = version_problem(sub.get(PLUGIN_VERSION), version_key, name, available_versions(name, __version__))
    if why:
        problems.append(ConfigProblem(version_key, why))
    props = {k: v for k, v in sub.items() if k not in _RESERVED}
    try:
        return cls(props, **extra)
    except ConfigError as e:
        problems.extend(prefix_problems(list(e.problems), prefix, cls.config_def.names()))
    except TypeError as e:
        problems.append(ConfigProblem(type_key, f"Invalid value {sub['type']} for configuration {type_key}: {e}"))
    return None


def build_chain(config: Mapping[str, Any]) -> Chain:
    """Parse and validate the ``transforms``/``predicates`` keys of a connector config into a :class:`Chain`.

    Every problem is collected and raised as one :class:`~spark_connect_bridge.errors.ConfigError`, keyed by
    the full config key (``transforms.mask.fields``). Keys outside ``transforms``/``predicates`` are ignored.
    The caller's mapping is never modified.

    >>> build_chain({"transforms": "route", "transforms.route.type": "RegexRouter",
    ...              "transforms.route.regex": "(.*)", "transforms.route.replacement": "x-$1"}).aliases
    ['route']
    """
    config = dict(config)
    problems: list[ConfigProblem] = []
    t_aliases = _aliases(config, "transforms", problems)
    p_aliases = _aliases(config, "predicates", problems)

    predicates: dict[str, Predicate | None] = {}
    for pa in p_aliases:
        predicates[pa] = _build("predicate", f"predicates.{pa}.", _sub(config, f"predicates.{pa}."), problems)

    stages: list[Stage] = []
    for alias in t_aliases:
        prefix = f"transforms.{alias}."
        sub = _sub(config, prefix)
        pred_alias = sub.get("predicate")
        pred_alias = str(pred_alias).strip() if pred_alias not in (None, "") else None
        negate = False
        if "negate" in sub:
            try:
                negate = bool(parse_value(ConfigKey("negate", Type.BOOLEAN), sub["negate"]))
            except ValueError as e:
                problems.append(ConfigProblem(f"{prefix}negate", f"Invalid value {sub['negate']} for "
                                                                 f"configuration {prefix}negate: {e}"))
        predicate = None
        if pred_alias is not None:
            if pred_alias not in predicates:
                known = ", ".join(p_aliases) or "(none)"
                problems.append(ConfigProblem(f"{prefix}predicate", (
                    f"Invalid value {pred_alias} for configuration {prefix}predicate: no predicate with alias "
                    f"{pred_alias!r} is listed in 'predicates' (listed: {known})")))
            else:
                predicate = predicates[pred_alias]
        elif negate:
            problems.append(ConfigProblem(f"{prefix}negate", (
                f"Invalid value true for configuration {prefix}negate: negate is only allowed together with "
                f"{prefix}predicate")))
        transform = _build("transformation", prefix, sub, problems, alias=alias)
        if transform is not None and pred_alias is not None and transform.predicate_problem:
            problems.append(ConfigProblem(f"{prefix}predicate", (
                f"Invalid value {pred_alias} for configuration {prefix}predicate: {transform.predicate_problem}")))
        if transform is not None:
            stages.append(Stage(alias, transform, predicate, pred_alias, negate))
    if problems:
        raise ConfigError(problems, context="transforms")
    return Chain(stages)


def apply_transforms(df: DataFrame, config: Mapping[str, Any] | Sequence[Transformation] | Chain) -> DataFrame:
    """Apply the SMT chain of a Kafka Connect connector config (or a list of transforms) to ``df``.

    >>> out = apply_transforms(df, {"transforms": "unwrap",
    ...                             "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"})
    ... # doctest: +SKIP
    """
    if isinstance(config, Chain):
        chain = config
    elif isinstance(config, Mapping):
        chain = build_chain(config)
    else:
        chain = Chain(config)
    return chain.apply(df)
