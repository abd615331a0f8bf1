"""Every docstring example in the package runs (those marked ``+SKIP`` need a server, a stream or a file system
that a docstring cannot set up). Examples that need Spark get the run's session as ``spark``."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import spark_connect_bridge

MODULES = sorted(m.name for m in pkgutil.walk_packages(spark_connect_bridge.__path__, "spark_connect_bridge."))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _examples(module: str) -> list[doctest.DocTest]:
    tests = doctest.DocTestFinder().find(importlib.import_module(module), module)
    return [t for t in tests if any(not e.options.get(doctest.SKIP) for e in t.examples)]


@pytest.mark.parametrize("module", [m for m in MODULES if _examples(m)])
def test_docstring_examples_run(module, spark):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    for test in _examples(module):
        test.globs["spark"] = spark
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
