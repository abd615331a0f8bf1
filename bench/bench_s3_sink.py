"""S3 sink throughput: our Confluent S3 sink (JsonFormat, ParquetFormat, AvroFormat) against a bare write of the
same records to the same S3 server, in the same run.

    .venv/bin/python bench/bench_s3_sink.py [records] [--reps 2]

The S3 server is moto's (``moto_server``, started here on 127.0.0.1, as the tests do). The records are Datagen
``orders`` in 2 Spark partitions, cached before the runs so that every line writes the same in-memory records:

* ``ours json`` / ``ours parquet`` / ``ours avro``: the connector config run as the worker and ``kconnect run`` run
  it, ``spark_connect_bridge.write_batch(df, config)`` with ``io.confluent.connect.s3.S3SinkConnector``
  (``flush.size`` above the records per partition: one object per Kafka partition, as the bare write): JsonFormat's
  lines are made in the JVM (the JsonConverter's expressions), the Python writer joins and uploads them;
* ``direct json``: the same config as ``df.write.format("kconnect").options(...)``: the lines made in the Python
  writer (Arrow kernels), as a Python data source receives the struct values;
* ``spark json`` / ``spark parquet``: Spark's own ``df.select("value.*").write.json/parquet("s3a://...")`` through
  Hadoop's S3A connector (hadoop-aws from the project's pom, the default FileOutputCommitter: its task and job
  commits copy each object once more, as S3A's renames do) - the issue's "bare Spark write";
* ``bare json``: Spark's ``to_json(value)`` in the JVM, then each task PUTs its lines as one object with
  ``pyarrow.fs.S3FileSystem`` (``mapInArrow``); ``bare parquet``: ``select("value.*")`` and each task writes its
  Arrow batches as one Parquet object (snappy) the same way; ``bare avro``: ``select("value.*")`` and each task
  writes its rows with fastavro (``to_pylist``, the schema AvroData gives the value, no codec) as one object.

Wall and CPU seconds of this process's tree (the Spark JVM, its Python workers; not the S3 server's). "cold" is a
line's first run in the session (its Python workers start), the best of the next ``--reps`` runs is "warm".
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from _proctree import descendants, proc_table

from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server


def _tree_cpu(exclude: set[int]) -> dict[int, tuple[str, float]]:
    procs = proc_table(reaped=True)
    return {p: (procs[p][1], procs[p][2]) for p in descendants({os.getpid()}, procs) - descendants(exclude, procs)
            if p in procs}


#: CPU seconds of each line's runs by process kind (java: the Spark JVM; python: this driver process, the pyspark
#: daemon and its forked workers, reaped into the daemon), appended by :func:`measure`
SPLITS: list[dict[str, float]] = []


def measure(fn: Callable[[], None], exclude: set[int]) -> tuple[float, float]:
    before, t = _tree_cpu(exclude), time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    after = _tree_cpu(exclude)
    split: dict[str, float] = {}
    for p, (name, cpu) in after.items():
        kind = "java" if "java" in name else "python" if "python" in name else "other"
        split[kind] = split.get(kind, 0.0) + max(0.0, cpu - before.get(p, (name, 0.0))[1])
    SPLITS.append(split)
    return wall, sum(split.values())


def _bare_writer(endpoint_port: int, bucket: str, prefix: str, kind: str,
                 avro_schema: str = "") -> Callable[[Iterator[Any]], Iterator[Any]]:
    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import uuid

        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyarrow import fs

        s3 = fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, scheme="http",
                             endpoint_override=f"127.0.0.1:{endpoint_port}")
        table = pa.Table.from_batches(list(batches))
        out = io.BytesIO()
        if kind == "json":
            lines = pc.binary_join_element_wise(table.column(0), "\n", "").cast(pa.large_string()).combine_chunks()
            if len(lines):
                bounds = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
                out.write(lines.buffers()[2].to_pybytes()[bounds[0]:bounds[-1]])
        elif kind == "avro":
            import json

            import fastavro

            fastavro.writer(out, fastavro.parse_schema(json.loads(avro_schema)), table.to_pylist())
        else:
            pq.write_table(table, out, compression="snappy")
        with s3.open_output_stream(f"{bucket}/{prefix}/{uuid.uuid4().hex}.{kind}") as stream:
            stream.write(out.getvalue())
        yield pa.RecordBatch.from_pydict({"rows": [table.num_rows]})

    return write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--formats", default="json,parquet,avro", help="the formats whose lines run (comma-separated)")
    parser.add_argument("--lines", default="", help="only these lines (comma-separated names: 'spark json,ours json')")
    parser.add_argument("--arrow-max-bytes", help="spark.sql.execution.arrow.maxBytesPerBatch (default Spark's 64 MB: "
                                                  "Spark checks a Python writer's Arrow batch size after every row; "
                                                  "2147483647 turns the check off)")
    args = parser.parse_args()

    import json

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_connect_bridge import write_batch
    from spark_connect_bridge.converters.avro_data import spark_to_avro

    server = MotoS3Server().start()
    try:
        bucket = "bench"
        server.create_bucket(bucket)
        from spark_connect_bridge.jvm import configure_spark

        builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   # Spark's own writer reaches the bucket through Hadoop's S3A connector (hadoop-aws)
                   .config("spark.hadoop.fs.s3a.endpoint", server.endpoint)
                   .config("spark.hadoop.fs.s3a.path.style.access", "true")
                   .config("spark.hadoop.fs.s3a.endpoint.region", REGION)
                   .config("spark.hadoop.fs.s3a.access.key", ACCESS_KEY)
                   .config("spark.hadoop.fs.s3a.secret.key", SECRET_KEY))
        spark = configure_spark(builder, delta=False, object_stores=True).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if args.arrow_max_bytes:
            spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", args.arrow_max_bytes)
        src = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders",
               "iterations": str(args.records // 2), "max.interval": "0", "tasks.max": "2"}
        records = spark.read.format("kconnect").options(**src).load().cache()
        assert records.count() == args.records
        sink = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "s3.bucket.name": bucket,
                "s3.region": REGION, "store.url": server.endpoint, "aws.access.key.id": ACCESS_KEY,
                "aws.secret.access.key": SECRET_KEY, "flush.size": str(args.records)}
        runs = {"n": 0}

        def ours(kind: str) -> Callable[[], None]:
            fmt = {"json": "io.confluent.connect.s3.format.json.JsonFormat",
                   "parquet": "io.confluent.connect.s3.format.parquet.ParquetFormat",
                   "avro": "io.confluent.connect.s3.format.avro.AvroFormat"}[kind]

            def run() -> None:
                runs["n"] += 1
                runs[f"ours {kind}"] = runs["n"]
                write_batch(records, {**sink, "format.class": fmt, "topics.dir": f"ours-{kind}-{runs['n']}"})
            return run

        def ours_direct(kind: str) -> Callable[[], None]:
            fmt = {"json": "io.confluent.connect.s3.format.json.JsonFormat"}[kind]

            def run() -> None:
                runs["n"] += 1
                records.write.format("kconnect").options(**sink).option("format.class", fmt) \
                    .option("topics.dir", f"direct-{kind}-{runs['n']}").mode("append").save()
            return run

        def bare(kind: str) -> Callable[[], None]:
            def run() -> None:
                runs["n"] += 1
                frame = records.select(F.to_json("value").alias("line")) if kind == "json" else \
                    records.select("value.*")
                writer = _bare_writer(server.port, bucket, f"bare-{kind}-{runs['n']}", kind, avro_schema)
                written = frame.mapInArrow(writer, "rows long").agg(F.sum("rows")).first()[0]
                assert written == args.records
            return run

        def spark_write(kind: str) -> Callable[[], None]:
            def run() -> None:
                runs["n"] += 1
                writer = records.select("value.*").write.mode("overwrite")
                uri = f"s3a://{bucket}/spark-{kind}-{runs['n']}"
                writer.json(uri) if kind == "json" else writer.parquet(uri)  # parquet: snappy, Spark's default
            return run

        value = records.schema["value"]
        avro_schema = json.dumps(spark_to_avro(value.dataType, value.metadata, False))
        lines = {"spark json": spark_write("json"), "bare json": bare("json"), "ours json": ours("json"),
                 "direct json": ours_direct("json"),
                 "spark parquet": spark_write("parquet"), "bare parquet": bare("parquet"),
                 "ours parquet": ours("parquet"), "bare avro": bare("avro"), "ours avro": ours("avro")}
        formats = set(args.formats.split(","))
        lines = {name: fn for name, fn in lines.items() if name.split()[1] in formats}
        if args.lines:
            lines = {name: fn for name, fn in lines.items() if name in set(args.lines.split(","))}
        exclude = {server.process.pid} if server.process else set()
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in lines}
        splits: dict[str, list[dict[str, float]]] = {k: [] for k in lines}
        for _ in range(args.reps + 1):
            for name, fn in lines.items():
                results[name].append(measure(fn, exclude))
                splits[name].append(SPLITS[-1])
        # every line wrote every record: our objects hold args.records lines / rows per run
        objects = len(server.objects(bucket, f"ours-json-{runs['ours json']}")) if "ours json" in lines else "-"
        print(f"records={args.records} reps={args.reps} load_avg={os.getloadavg()[0]:.1f} "
              f"arrow.maxBytesPerBatch={spark.conf.get('spark.sql.execution.arrow.maxBytesPerBatch')} "
              f"objects={objects} in ours' last json run")
        for name, measured in results.items():
            cold, warm = measured[0], min(measured[1:], key=lambda r: r[1])
            split = splits[name][measured.index(warm)]
            print(f"{name:14s} cold {cold[0]:6.2f} s wall {cold[1]:6.2f} s CPU | warm {warm[0]:6.2f} s wall "
                  f"{warm[1]:6.2f} s CPU  {args.records / warm[0] / 1000:7.1f} k rec/s  "
                  f"{warm[1] / args.records * 1e6:6.2f} us CPU/rec  (warm CPU: "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(split.items())) + ")")
        for kind in sorted(formats):
            if f"ours {kind}" not in results:
                continue
            o = min(results[f"ours {kind}"][1:], key=lambda r: r[1])
            if "direct json" in results and kind == "json":
                d = min(results["direct json"][1:], key=lambda r: r[1])
                print(f"json: ours vs direct (warm): {d[0] / o[0]:.2f}x wall, {d[1] / o[1]:.2f}x CPU")
            for base in ("spark", "bare"):
                if f"{base} {kind}" in results:
                    b = min(results[f"{base} {kind}"][1:], key=lambda r: r[1])
                    print(f"{kind}: ours vs {base} (warm): {b[0] / o[0]:.2f}x wall, {b[1] / o[1]:.2f}x CPU")
        spark.stop()
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
