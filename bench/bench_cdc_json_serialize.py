"""CPU per record of a CDC connector's JsonConverter serialization (schemas.enable=true, as Debezium's docs configure
it): Debezium envelopes of four tables in one union envelope (tests/differential/test_debezium_postgres.py's tables,
the 26-column customers among them), serialized per topic by ``apply_source_converters``, key and value, into a
noop sink. Compared in one run, alternated, cold (each side's first query: planning and code generation included)
and warm:

* ``codegen``: the session's defaults (whole-stage code generation);
* ``interpreted``: ``spark.sql.codegen.factoryMode=NO_CODEGEN`` and whole-stage code generation off (what
  test_debezium_postgres.py ran with while the projection did not compile);
* ``no wholestage``: ``spark.sql.codegen.wholeStage=false``: each expression compiled into methods of ~1 KB
  (Spark splits them outside whole-stage code), which HotSpot JIT-compiles; a whole-stage method over 8,000
  bytes it never does (``-XX:-DontCompileHugeMethods`` makes it);
* ``worker's``: the settings of the sessions ``configure_spark`` makes (the worker's, the CLI's):
  ``spark.sql.codegen.hugeMethodLimit=8000``, with which Spark runs a stage whose whole-stage method is over
  8,000 bytes as separate compiled operators (after compiling it);
* ``bare to_json``: a ``to_json`` of the typed key and value structs as they are (no per-topic schema, no
  envelope, no Decimal bytes): a floor, not an equivalent.

    PYTHONPATH=. .venv/bin/python bench/bench_cdc_json_serialize.py 400000 [--java-options=-XX:-DontCompileHugeMethods]

``codegen`` is a session of a user's own (a notebook). CPU is the Spark JVM's (the serialization runs there
only), from /proc, with the load average beside it.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("records", type=int, nargs="?", default=400_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--java-options", default="", help="the JVM's, e.g. -XX:-DontCompileHugeMethods")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from bench._proctree import proc_stats
    from spark_connect_bridge.converters import apply_source_converters
    from spark_connect_bridge.jvm import SESSION_DEFAULTS
    from tests.converters.test_json_cdc_codegen import JSON, cdc_records

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "3g")
             .config("spark.driver.extraJavaOptions", args.java_options).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    changes_df, changes = cdc_records(spark)
    copies = max(1, args.records // len(changes))
    records = changes_df.crossJoin(spark.range(copies).select(F.col("id").alias("_copy"))) \
        .select(*changes_df.columns).repartition(2).cache()
    n = records.count()
    cfg = {"key.converter": JSON, "value.converter": JSON}
    interpreted = {"spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.sql.codegen.wholeStage": "false"}

    def frames():
        return {"codegen": (apply_source_converters(records, cfg), {}),
                "interpreted": (apply_source_converters(records, cfg), interpreted),
                "no wholestage": (apply_source_converters(records, cfg), {"spark.sql.codegen.wholeStage": "false"}),
                "worker's": (apply_source_converters(records, cfg), SESSION_DEFAULTS),
                "bare to_json": (records.select(F.to_json("key").alias("key"), F.to_json("value").alias("value")), {})}

    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, (frame, confs) in frames().items():  # new DataFrames: each round plans and compiles again
            for k, v in confs.items():
                spark.conf.set(k, v)
            cpu = proc_stats()[jvm].cpu
            frame.write.format("noop").mode("overwrite").save()
            results.setdefault(name, []).append(proc_stats()[jvm].cpu - cpu)
            for k in confs:
                spark.conf.unset(k)
    spark.stop()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{n:,} records (4 topics' Debezium envelopes, key and value), local[2]; load {load}")
    for name, cpus in results.items():
        rounds = "  ".join(f"{c / n * 1e6:7.2f}" for c in cpus)
        print(f"  {name:<13} JVM CPU-us per record, round 1 (cold) .. {args.rounds}: {rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
