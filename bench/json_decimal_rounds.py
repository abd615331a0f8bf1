"""The JsonConverter's Decimal decode alone: N Debezium-style messages (JSON with schemas, a Connect Decimal as
base64 text, as Debezium's ``decimal.handling.mode=precise`` writes it) parsed by ``parse_checked`` into the
``noop`` sink, ROUNDS times in one Spark session, each round printing the Spark JVM's CPU per record. A
before/after pair: run it from each tree in turn (``PYTHONPATH=<tree>``), alternating. ``--explain`` prints the
generated code's count of ``VariantGet`` calls instead (how many times a value's VARIANT is read per row).

    PYTHONPATH=. .venv/bin/python bench/json_decimal_rounds.py 1000000 4
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench_vs_debezium import _cpu, _ours_roots, _spark

_SCHEMA = ('{"type":"struct","optional":false,"fields":[{"type":"int64","optional":false,"field":"id"},'
           '{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
           '"parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"amount"},'
           '{"type":"string","optional":true,"field":"note"}]}')


def main() -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

    from spark_connect_bridge.converters import JsonConverter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    spark = _spark()
    # amount = id * 7 cents, as Connect's base64 of its unscaled big-endian two's complement (8 bytes, unhex'd)
    unscaled = F.unhex(F.lpad(F.hex(F.col("id") * 7), 16, "0"))
    text = F.concat(F.lit(f'{{"schema":{_SCHEMA},"payload":{{"id":'), F.col("id").cast("string"),
                    F.lit(',"amount":"'), F.base64(unscaled), F.lit('","note":"x"}}'))
    src = spark.range(args.records).select(text.cast("binary").alias("value")).cache()
    src.count()
    dt = StructType([StructField("id", LongType(), False), StructField("amount", DecimalType(12, 2)),
                     StructField("note", StringType())])
    conv = JsonConverter({"schemas.enable": "true"}).parse_checked(F.col("value"), dt)
    out = src.select(conv.strict().alias("v"))
    if args.explain:
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        out = src.select(conv.strict().alias("v"))
        code = spark._jvm.org.apache.spark.sql.execution.debug.package.codegenString(out._jdf.queryExecution()
                                                                                   .executedPlan())
        print("VariantGet calls in the generated code:", code.count("VariantGet"))
        print(code if os.environ.get("SHOW_CODE") else "")
        return
    row = out.where(F.col("v.id") == 3).first()
    assert row is not None and str(row.v.amount) == "0.21", row
    roots = _ours_roots(spark)
    for round_ in range(1, args.rounds + 1):
        cpu0 = _cpu(roots)
        out.write.format("noop").mode("overwrite").save()
        cpu = _cpu(roots) - cpu0
        print(f"round {round_}: CPU {cpu / args.records * 1e6:.3g} us/record, load {os.getloadavg()[0]:.1f}",
              flush=True)


if __name__ == "__main__":
    main()
