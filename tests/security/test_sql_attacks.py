"""Issue 33, item 2: Spark SQL sent over REST reaches no file, table, JVM method, environment variable or UDF.

Each attack is the issue's, sent as a REST user would send it. Over REST the stages that take Spark SQL (the Sql
transform's ``filter``/``select``) are off unless the worker config says ``rest.sql.expressions.enable=true``;
enabled, every expression is checked on Spark's parsed tree against an allowlist of side-effect-free built-in
functions. Configs given to ``kconnect`` on the command line, and library calls, are the operator's own: not limited.
"""

from __future__ import annotations

import pytest
from rest import security_helpers
from runtime import worker_helpers
from runtime.worker_helpers import lines

from spark_connect_bridge.transforms.sql_allowlist import allowed_functions, expression_problem
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(300)
# The REST tests' fixtures (a conftest of this directory would be shared with the other attack files).
rest_only = security_helpers.rest_only
start_worker = worker_helpers.start_worker

SQL = "spark_connect_bridge.transforms.Sql"
# The attacks and their relatives: (select or filter, the expression, what the refusal names).
ATTACKS = [
    ("select", "raise_error((SELECT max(value) FROM text.`{key_file}`)) AS value", "raise_error"),
    ("select", "upper((SELECT max(value) FROM text.`{key_file}`)) AS value", "subquery"),
    ("select", "reflect('java.lang.System', 'getenv', 'HOME') AS topic", "reflect"),
    ("select", "java_method('java.lang.System', 'getProperty', 'user.home') AS topic", "java_method"),
    ("select", "try_reflect('java.lang.System', 'getenv', 'PATH') AS topic", "try_reflect"),
    ("filter", "java_method('java.lang.System', 'exit', 0) IS NULL", "java_method"),
    ("filter", "exists(SELECT 1 FROM parquet.`{key_file}`)", "subquery"),
    ("filter", "value IN (SELECT value FROM text.`{key_file}`)", "subquery"),
    ("select", "input_file_name() AS topic", "input_file_name"),
    ("select", "current_user AS topic", "current_user"),  # a bare name Spark resolves as the function
    ("filter", "assert_true(key IS NULL, value)", "assert_true"),
    ("select", "kc_attack_udf(value) AS value", "kc_attack_udf"),  # a Python UDF registered in the session
    ("select", "md5(value) AS topic", "a UDF registered under a built-in function's name"),
    ("select", "default.f(value) AS value", "default.f"),  # a catalog function
    ("select", "count(*) AS partition", "count"),
    ("select", "concat(topic, raise_error('x')) AS topic", "raise_error"),
]
# Ordinary transforms, as the README writes them: accepted when enabled.
ALLOWED = [
    "named_struct('id', value.id, 'name', upper(value.name)) AS value",
    "concat(topic, '-v2') AS topic",
    "value.amount > 10 AND value.name LIKE 'a%' OR value.kind IN ('x', 'y') AND value.n BETWEEN 1 AND 3",
    "CASE WHEN value.amount IS NULL THEN 0 ELSE cast(value.amount AS int) END > 1",
    "transform(value.items, x -> x + 1) IS NOT NULL",
    "date_format(current_timestamp, 'yyyy') AS topic",
    "coalesce(to_json(value), sha2(cast(key AS string), 256), regexp_replace(topic, 'a', 'b')) AS topic",
]


def _sql(where: str, expression: str, tmp_path) -> dict[str, str]:
    return {"name": "q", "connector.class": "FileStreamSource", "file": str(tmp_path / "data" / "in.txt"), "topic": "t",
            "transforms": "q", "transforms.q.type": SQL, f"transforms.q.{where}": expression}


@pytest.mark.parametrize("where, expression", [(w, e) for w, e, _ in ATTACKS[:4]] + [("select", ALLOWED[0])])
def test_sql_transforms_are_off_over_rest_unless_the_worker_enables_them(rest_only, tmp_path, where, expression):
    _, api = rest_only()
    config = _sql(where, expression.format(key_file=tmp_path / "state" / "_keys" / "state.key"), tmp_path)
    key = f"transforms.q.{where}"
    for method, path, body in (("POST", "/connectors", {"name": "q", "config": config}),
                               ("PUT", "/connectors/q/config", config)):
        r = api.call(method, path, body)
        assert r.status_code == 400, r.text
        assert key in r.json()["message"] and "rest.sql.expressions.enable" in r.json()["message"]
    infos = api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", config).json()
    errors = [e for c in infos["configs"] if c["value"]["name"] == key for e in c["value"]["errors"]]
    assert any("rest.sql.expressions.enable" in e for e in errors), infos
    assert api.get("/connectors") == []


@pytest.fixture
def attack_udf(spark):
    """Python UDFs in the worker's session: one of their own name, one under a built-in's (``md5``)."""
    spark.udf.register("kc_attack_udf", lambda v: v, "binary")
    spark.udf.register("md5", lambda v: v, "string")
    yield
    spark.sql("DROP TEMPORARY FUNCTION IF EXISTS kc_attack_udf")
    spark.sql("DROP TEMPORARY FUNCTION IF EXISTS md5")


def test_enabled_expressions_may_call_only_side_effect_free_functions(rest_only, spark, tmp_path, attack_udf):
    _, api = rest_only(**{"rest.sql.expressions.enable": "true"})
    key_file = tmp_path / "state" / "_keys" / "state.key"
    for where, expression, named in ATTACKS:
        config = _sql(where, expression.format(key_file=key_file), tmp_path)
        r = api.call("POST", "/connectors", {"name": "q", "config": config})
        assert r.status_code == 400, (expression, r.text)
        message = r.json()["message"]
        assert f"transforms.q.{where}" in message and named in message, (expression, message)
        infos = api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", config).json()
        assert any(named in e for c in infos["configs"] for e in c["value"]["errors"]), (expression, infos)
    for expression in ALLOWED:
        where = "select" if " AS " in expression else "filter"
        r = api.call("PUT", "/connector-plugins/FileStreamSource/config/validate", _sql(where, expression, tmp_path))
        assert r.json()["error_count"] == 0, (expression, [c for c in r.json()["configs"] if c["value"]["errors"]])
    assert api.get("/connectors") == []


def test_the_allowlist_is_built_from_sparks_registry(spark):
    functions = set(allowed_functions(spark))
    assert {"upper", "concat", "named_struct", "from_json", "transform", "cast", "coalesce"} <= functions
    assert not {"reflect", "java_method", "try_reflect", "raise_error", "assert_true", "input_file_name",
                "current_user", "count", "explode", "xpath", "from_protobuf"} & functions
    assert expression_problem(spark, "upper(") is not None and "parse" in expression_problem(spark, "upper(")


def test_an_allowed_sql_transform_runs_over_rest_when_enabled(start_worker, tmp_path):
    """The positive path: enabled, a REST user's Sql transform runs, record by record."""
    _, api = start_worker(**{"rest.sql.expressions.enable": "true"})
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("apple\nbanana\ncherry\n")
    r = api.call("POST", "/connectors", {"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(source), "topic": "fruit",
        "transforms": "q", "transforms.q.type": "Sql", "transforms.q.filter": "value NOT LIKE 'b%'",
        "transforms.q.select": "upper(value) AS value"}})
    assert r.status_code == 201, r.text
    r = api.call("POST", "/connectors", {"name": "dst", "config": {
        "connector.class": "FileStreamSink", "file": str(sink), "topics": "fruit"}})
    assert r.status_code == 201, r.text
    until(lambda: sorted(lines(sink)) == ["APPLE", "CHERRY"], timeout=180, what="the transformed lines")


def test_a_reflected_topic_name_is_never_read_back(start_worker, tmp_path):
    """The issue's attack: reflect(getenv) as the topic, read back through GET /connectors/{name}/topics."""
    _, api = start_worker(**{"rest.sql.expressions.enable": "true"})
    (tmp_path / "in.txt").write_text("x\n")
    config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "t",
              "transforms": "q", "transforms.q.type": "Sql",
              "transforms.q.select": "reflect('java.lang.System', 'getenv', 'PATH') AS topic"}
    r = api.call("POST", "/connectors", {"name": "leak", "config": config})
    assert r.status_code == 400 and "reflect" in r.json()["message"], r.text
    assert api.call("GET", "/connectors/leak/topics").status_code == 404
