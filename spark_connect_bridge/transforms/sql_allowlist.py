"""Which Spark SQL a connector config sent over REST may run: side-effect-free built-in functions only.

An expression is parsed by the session's own parser (``sessionState().sqlParser().parseExpression``) and its
unresolved tree is walked node by node over py4j. Every node must be

* a name, a literal, an alias, a field or element access, a lambda (:data:`STRUCTURAL`), or
* the expression of a built-in function of one of the :data:`ALLOWED_GROUPS` of Spark's function registry (Spark's
  own grouping: ``string_funcs``, ``math_funcs``, ...), not one of :data:`EXCLUDED_FUNCTIONS`, called by its plain
  name and not overridden in the session by a UDF of the same name.

So subqueries (and through them tables and files: ``SELECT ... FROM text.`/path```), ``reflect``/``java_method``/
``try_reflect``, ``raise_error``/``assert_true``, ``input_file_name``, ``current_user``, aggregates, generators,
Python and JVM UDFs, catalog functions (``db.f(x)``), parameter markers and anything this module does not know are
refused. A bare name that Spark would resolve as a function (``current_user`` without parentheses) counts as that
function.

>>> expression_problem(spark, "upper(value.name)") is None                   # doctest: +SKIP
True
>>> expression_problem(spark, "reflect('java.lang.System', 'getenv', 'HOME')")  # doctest: +SKIP
"it calls reflect, which is not one of the side-effect-free built-in functions allowed in connector configs..."
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["ALLOWED_GROUPS", "EXCLUDED_FUNCTIONS", "STRUCTURAL", "allowed_functions", "expression_problem"]

#: Groups of Spark's function registry whose functions compute a value from their arguments and nothing else.
#: Left out: misc_funcs (reflect, java_method, raise_error, assert_true, input_file_name, current_user, uuid, ...),
#: agg_funcs, window_funcs, generator_funcs (not per-record), xml_funcs (XPath), avro_funcs and protobuf_funcs
#: (schemas and descriptor files), and the sketch, vector and spatial families (not needed on records).
ALLOWED_GROUPS = frozenset({
    "array_funcs", "bitwise_funcs", "collection_funcs", "conditional_funcs", "conversion_funcs", "csv_funcs",
    "datetime_funcs", "hash_funcs", "json_funcs", "lambda_funcs", "map_funcs", "math_funcs", "predicate_funcs",
    "string_funcs", "struct_funcs", "url_funcs", "variant_funcs"})
#: Functions of the allowed groups that are still refused: streaming windows and aggregates (not per-record).
EXCLUDED_FUNCTIONS = frozenset({"window", "session_window", "window_time", "schema_of_variant_agg"})

_CATALYST = "org.apache.spark.sql.catalyst"
#: Tree nodes that are not function calls: names, literals, aliases, field/element access, lambdas, and the
#: parser's own spellings of pure operators that the registry does not list (``x LIKE ANY (...)``).
STRUCTURAL = frozenset({
    f"{_CATALYST}.analysis.UnresolvedAttribute", f"{_CATALYST}.analysis.UnresolvedExtractValue",
    f"{_CATALYST}.analysis.UnresolvedStar", f"{_CATALYST}.analysis.UnresolvedAlias",
    f"{_CATALYST}.analysis.UnresolvedCollation", f"{_CATALYST}.expressions.Alias",
    f"{_CATALYST}.expressions.Literal", f"{_CATALYST}.expressions.LambdaFunction",
    f"{_CATALYST}.expressions.UnresolvedNamedLambdaVariable", f"{_CATALYST}.expressions.SemiStructuredExtract",
    f"{_CATALYST}.expressions.LikeAny", f"{_CATALYST}.expressions.LikeAll", f"{_CATALYST}.expressions.NotLikeAny",
    f"{_CATALYST}.expressions.NotLikeAll"})
_FUNCTION = f"{_CATALYST}.analysis.UnresolvedFunction"
_ATTRIBUTE = f"{_CATALYST}.analysis.UnresolvedAttribute"

# Per JVM (SparkContext): {function name: expression class} of the built-in functions allowed, the expression
# classes they stand for, and every built-in function name (to recognise one used as a bare name).
_cache: dict[str, tuple[dict[str, str], frozenset[str], frozenset[str]]] = {}
_lock = threading.Lock()


def _iterate(seq: Any) -> Iterator[Any]:
    it = seq.iterator()
    while it.hasNext():
        yield it.next()


def _registry(spark: Any) -> tuple[dict[str, str], frozenset[str], frozenset[str]]:
    key = spark.sparkContext.applicationId
    with _lock:
        if key not in _cache:
            builtin = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
            allowed: dict[str, str] = {}
            every: set[str] = set()
            for ident in _iterate(builtin.listFunction()):
                name = ident.funcName().lower()
                every.add(name)
                info = builtin.lookupFunction(ident)
                if info.isEmpty():
                    continue
                info = info.get()
                if info.getGroup() in ALLOWED_GROUPS and name not in EXCLUDED_FUNCTIONS:
                    allowed[name] = info.getClassName()
            _cache[key] = (allowed, frozenset(allowed.values()), frozenset(every))
        return _cache[key]


def allowed_functions(spark: Any) -> list[str]:
    """The names of the built-in functions an expression may call (this session's Spark release)."""
    return sorted(_registry(spark)[0])


def _temporary(spark: Any, name: str) -> bool:
    """Whether the session has a temporary function (a Python or JVM UDF) named ``name``: one under a built-in's
    name may take its place, depending on the SQL path."""
    ident = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(name)
    return bool(spark._jsparkSession.sessionState().catalog().isTemporaryFunction(ident))


def _refused(name: str) -> str:
    return (f"it calls {name}, which is not one of the side-effect-free built-in functions allowed in connector "
            f"configs sent over REST (no subqueries, tables or files, reflection, UDFs, raise_error or "
            f"environment functions)")


def _node_problem(spark: Any, node: Any, registry: tuple[dict[str, str], frozenset[str], frozenset[str]]) -> \
        str | None:
    allowed, classes, every = registry
    cls = node.getClass().getName()
    if cls == _FUNCTION:
        parts = [str(p) for p in _iterate(node.nameParts())]
        name = ".".join(parts)
        if len(parts) != 1 or parts[0].lower() not in allowed:
            return _refused(name)
        if _temporary(spark, parts[0].lower()):
            return _refused(f"{name} (a UDF registered under a built-in function's name)")
        return None
    if cls == _ATTRIBUTE:
        first = str(node.nameParts().head()).lower()
        if first in every and first not in allowed:  # Spark resolves current_user, user, ... as functions
            return _refused(first)
        return None
    if cls in STRUCTURAL or cls in classes:
        return None
    what = cls.rsplit(".", 1)[-1]
    if "Subquery" in what or what in ("Exists", "ListQuery"):
        return (f"it holds a subquery ({what}); subqueries (and with them tables and files) are not allowed in "
                f"connector configs sent over REST")
    return f"it uses {what}, which is not among the side-effect-free expressions allowed in connector configs " \
           f"sent over REST"


def expression_problem(spark: Any, text: str) -> str | None:
    """Why the Spark SQL expression ``text`` may not run for a REST user (``None``: allowed). ``spark`` is a
    classic SparkSession (its parser, function registry and JVM are used; nothing is analysed or run)."""
    try:
        root = spark._jsparkSession.sessionState().sqlParser().parseExpression(text)
    except Exception as e:  # noqa: BLE001 - py4j-wrapped ParseException
        lines = str(e).split("ParseException:")[-1].strip().splitlines()
        return f"it does not parse: {lines[0] if lines else 'syntax error'}"
    registry = _registry(spark)
    pending = [root]
    while pending:
        node = pending.pop()
        problem = _node_problem(spark, node, registry)
        if problem is not None:
            return problem
        pending.extend(_iterate(node.children()))
    return None
