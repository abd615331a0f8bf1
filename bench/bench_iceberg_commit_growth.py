"""CPU of one Iceberg commit as the table's history grows: a micro-batch sink commits once per batch, so a table
holds one more snapshot per batch, and pyiceberg's ``Transaction`` deep-copies the whole table metadata (every
snapshot) at each read of ``table_metadata``, about 18 per append. Compares pyiceberg's ``Transaction.append`` with
the Iceberg sink's transaction (``connectors/iceberg.py``, ``_transaction_class``: the metadata made once per state
of the transaction), 100 rows a commit into a JDBC catalog on SQLite, at 10, 100, 200 and 400 snapshots; CPU seconds
of this process (``time.process_time``, the Parquet writer threads included), 5 commits each.

    .venv/bin/python bench/bench_iceberg_commit_growth.py
"""

from __future__ import annotations

import os
import tempfile
import time


def main() -> None:
    import pyarrow as pa

    from spark_connect_bridge.connectors.iceberg import _transaction_class, load_iceberg_catalog

    work = tempfile.mkdtemp(prefix="bench-iceberg-growth-")
    catalog = load_iceberg_catalog("iceberg", {"type": "jdbc", "uri": f"jdbc:sqlite:{work}/c.db",
                                               "warehouse": f"{work}/wh"})
    catalog.create_namespace_if_not_exists("b")
    table = catalog.create_table("b.t", pa.schema([("a", pa.int64())]))
    data = pa.table({"a": pa.array(range(100), pa.int64())})

    def ours() -> None:
        with _transaction_class()(table) as tx:
            tx.append(data, snapshot_properties={"kconnect.batch-id": "1"})

    def pyicebergs() -> None:
        with table.transaction() as tx:
            tx.append(data, snapshot_properties={"kconnect.batch-id": "1"})

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for snapshots in (10, 100, 200, 400):
        while len(table.metadata.snapshots) < snapshots:
            ours()
        cpu = []
        for commit in (pyicebergs, ours):
            t0 = time.process_time()
            for _ in range(5):
                commit()
            cpu.append((time.process_time() - t0) / 5 * 1000)
        print(f"{snapshots:4d} snapshots: pyiceberg's Transaction.append {cpu[0]:6.1f} ms CPU a commit; the sink's "
              f"{cpu[1]:6.1f} ms", flush=True)
    assert len(table.scan().to_arrow()) == 100 * len(table.metadata.snapshots)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
