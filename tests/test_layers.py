"""The package's layers hold: no import circles (counting imports inside functions) and no import of a higher
layer from a lower one (see tests/support/import_graph.py and the README's Contributing section)."""

from __future__ import annotations

from tests.support.import_graph import against_layers, circles, graph


def test_no_module_imports_one_that_imports_it_back():
    assert circles(graph()) == []


def test_each_layer_imports_only_itself_and_those_below():
    assert against_layers(graph()) == []
