"""Avro decode throughput of both AvroConverter engines, native (Spark's from_avro, spark-avro) and fastavro (an
Arrow UDF), through apply_sink_converters (Confluent wire format, embedded registry), vs a raw fastavro
``schemaless_reader`` loop in one Python process, all in one run.

    .venv/bin/python bench/bench_avro_decode.py 1000000 [--partitions 2]

Prints records/s and CPU seconds of each (best of 2 runs), the native/fastavro ratio, and each engine against the
baseline (goal >= 0.7). The input is written once to a Parquet file and cached; an engine's figure is the wall
time of ``cached input -> decode -> noop sink`` (the same job without the decode is printed too). Wall time depends
on what else the machine runs (the engines use ``--partitions`` cores, the baseline one), so the CPU seconds are
printed too: the baseline process's, and an engine's = the driver, the local-mode JVM and its Python workers
(Linux ``/proc``), which is robust to other load. The session comes from ``configure_spark`` (spark-avro).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time

from _proctree import descendants, proc_table

SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "qty", "type": "int"},
    {"name": "paid", "type": "boolean"}, {"name": "note", "type": ["null", "string"], "default": None}]}


def _tree_cpu() -> float:
    """CPU seconds used so far by this process and its descendants (JVM, Python daemon and workers)."""
    procs = proc_table(reaped=True)
    below = descendants({os.getpid()}, procs) - {os.getpid()}
    return sum(procs[pid][2] for pid in below) + time.process_time()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("records", type=int, nargs="?", default=1_000_000)
    p.add_argument("--partitions", type=int, default=2)
    args = p.parse_args()
    n = args.records
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import fastavro
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_connect_bridge.converters.registry_server import serve
    from spark_connect_bridge.converters.schema_registry import SchemaRegistryClient

    tmp = tempfile.mkdtemp(prefix="bench_avro_")
    server = serve(port=0, db_path=os.path.join(tmp, "r.db"))
    try:
        sid = SchemaRegistryClient(server.url).register("orders-value", json.dumps(SCHEMA))
        parsed = fastavro.parse_schema(SCHEMA)
        header = b"\x00" + sid.to_bytes(4, "big")
        msgs = []
        for i in range(n):
            buf = io.BytesIO()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, {"id": i, "customer": f"customer-{i % 1000}", "amount": i * 0.5,
                                                     "qty": i % 7, "paid": i % 2 == 0,
                                                     "note": None if i % 3 else "rush"})
            msgs.append(buf.getvalue())

        # Baseline: the raw fastavro loop in this process.
        reader = fastavro.schemaless_reader

        def baseline(messages: list[bytes]) -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.process_time()
            for b in messages:
                fo = io.BytesIO(b)
                fo.seek(5)
                reader(fo, parsed)
            return time.perf_counter() - t0, time.process_time() - c0

        bases = [baseline(msgs), baseline(msgs)]
        base, base_cpu = min(b[0] for b in bases), min(b[1] for b in bases)

        path = os.path.join(tmp, "in.parquet")
        pq.write_table(pa.table({"key": pa.nulls(n, pa.binary()), "value": pa.array(msgs, pa.binary()),
                                 "topic": pa.array(["orders"] * n), "partition": pa.array([0] * n, pa.int32()),
                                 "offset": pa.array(range(n), pa.int64())}), path, row_group_size=max(n // 8, 1))
        del msgs

        from pyspark.sql import SparkSession

        from spark_connect_bridge.converters import apply_sink_converters
        from spark_connect_bridge.jvm import configure_spark

        builder = configure_spark(SparkSession.builder, delta=False)
        spark = (builder.master(f"local[{args.partitions}]").config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
                 .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "3g")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        cfg = {"topics": "orders", "value.converter": "io.confluent.connect.avro.AvroConverter",
               "value.converter.schema.registry.url": server.url}
        # The input is cached in memory first, so the figure is the decode, not the Parquet read.
        df = spark.read.parquet(path).repartition(args.partitions).cache()
        df.count()

        def run(frame) -> tuple[float, float]:
            t, c = time.perf_counter(), _tree_cpu()
            frame.write.format("noop").mode("overwrite").save()
            return time.perf_counter() - t, _tree_cpu() - c

        read_only = min(run(df), run(df))[0]
        results = {}
        for engine in ("native", "fastavro"):
            engine_cfg = {**cfg, "value.converter.avro.engine": engine}
            # Best of 2 (the first run also starts the Python workers and fills their registry caches).
            runs = [run(apply_sink_converters(df, engine_cfg)), run(apply_sink_converters(df, engine_cfg))]
            results[engine] = min(r[0] for r in runs), min(r[1] for r in runs)
        spark.stop()
    finally:
        server.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"records: {n:,}  partitions: {args.partitions}  (the same job without the decode: {read_only:.2f} s wall)")
    print(f"baseline raw fastavro loop (1 process): {base:8.2f} s  {n / base:12,.0f} rec/s  {base_cpu:6.2f} s CPU")
    for engine, (wall, cpu) in results.items():
        print(f"{engine + ' engine':<39} {wall:8.2f} s  {n / wall:12,.0f} rec/s  {cpu:6.2f} s CPU "
              f"(driver+JVM+Python workers)  vs baseline: {base / wall:.2f}x wall, {base_cpu / cpu:.2f}x CPU "
              f"(goal >= 0.7x)")
    (nat, nat_cpu), (fav, fav_cpu) = results["native"], results["fastavro"]
    print(f"native / fastavro: {fav / nat:.2f}x throughput (wall), {fav_cpu / nat_cpu:.2f}x CPU efficiency")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
