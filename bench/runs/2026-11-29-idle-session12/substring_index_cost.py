"""The JDBC sink's schema discovery alone: 200,000 cached messages whose text before ``"payload":`` is a 1,986-byte
Connect schema, the distinct of an expression over them, JVM CPU per record of the fourth run of each (the run of
2026-11-29 07:44 UTC is in docs/benchmarks.md, "Idle re-measure").

    .venv/bin/python bench/runs/2026-11-29-idle-session12/substring_index_cost.py
"""

from __future__ import annotations

import os
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

RECORDS = 200_000


def main() -> None:
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    fields = ",".join(f'{{"type":"int64","optional":false,"field":"f{i}"}}' for i in range(40))
    schema_text = f'{{"schema":{{"type":"struct","fields":[{fields}],"optional":false,"name":"x.Envelope"}},'
    base = spark.range(RECORDS).select(F.concat(F.lit(schema_text), F.lit('"payload":{"id":'),
                                                F.col("id").cast("string"), F.lit("}}")).alias("s")).cache()
    base.count()
    stat = f"/proc/{spark.sparkContext._gateway.proc.pid}/stat"

    def jvm_cpu() -> float:
        with open(stat) as f:
            parts = f.read().split()
        return (int(parts[13]) + int(parts[14])) / os.sysconf("SC_CLK_TCK")

    print("schema text", len(schema_text), "bytes")
    for name, expr in [("substring_index", F.substring_index("s", '"payload":', 1)),
                       ("prefix 64", F.substring("s", 1, 64)),
                       ("instr", F.instr("s", '"payload":')),
                       ("startswith known", F.col("s").startswith(schema_text + '"payload":'))]:
        for _ in range(4):
            c0, t0 = jvm_cpu(), time.monotonic()
            base.agg(F.count_distinct(expr)).collect()
            c1, t1 = jvm_cpu(), time.monotonic()
        print(f"{name:18s} last of 4: {t1 - t0:.2f} s wall, {(c1 - c0) / RECORDS * 1e6:.1f} us JVM CPU per record",
              flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
