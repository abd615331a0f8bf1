"""The quickstart notebook runs top to bottom (in its own kernel, with its own Spark session), and shows what it says.

Its cells' printed tables (``DataFrame.show()``) are checked row by row.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"


def _shown_tables(text: str) -> list[list[list[str]]]:
    """The tables ``DataFrame.show()`` printed in ``text``: header row first, each cell stripped."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("+-"):
            if current is None:
                current = []
                tables.append(current)
            continue
        if line.startswith("|") and current is not None:
            current.append([cell.strip() for cell in line.strip("|").split("|")])
        else:
            current = None
    return tables


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "error" not in [o.get("output_type") for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    lines, orders = _shown_tables(outputs)
    assert lines == [["topic", "offset", "value"],
                     ["connect-test", "0", "hello"],
                     ["connect-test", "6", "kafka connect"],
                     ["connect-test", "20", "on spark"]]
    assert orders[0] == ["key", "itemid", "orderunits"]
    assert [row[0] for row in orders[1:]] == ["0", "1", "2", "3", "4"]  # the key is orderid
    assert all(row[1].startswith("Item_") and float(row[2]) >= 0 for row in orders[1:])
