import time, resource, os
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled","false").getOrCreate()
schema_text = '{"schema":{"type":"struct","fields":[' + ",".join('{"type":"int64","optional":false,"field":"f%d"}' % i for i in range(40)) + '],"optional":false,"name":"x.Envelope"},'
base = spark.range(200000).select(F.concat(F.lit(schema_text), F.lit('"payload":{"id":'), F.col("id").cast("string"), F.lit("}}")).alias("s")).cache()
base.count()
print("len", len(schema_text))
def cpu():
    t = os.times(); 
    return open(f"/proc/{spark.sparkContext._gateway.proc.pid}/stat").read().split()[13:15]
def jcpu():
    f = open(f"/proc/{spark.sparkContext._gateway.proc.pid}/stat").read().split()
    return (int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")
for name, expr in [("substring_index", F.substring_index("s", '"payload":', 1)),
                   ("prefix 64", F.substring("s", 1, 64)),
                   ("instr", F.instr("s", '"payload":')),
                   ("startswith known", F.col("s").startswith(schema_text + '"payload":'))]:
    for r in range(4):
        c0, t0 = jcpu(), time.monotonic()
        base.agg(F.count_distinct(expr)).collect()
        c1, t1 = jcpu(), time.monotonic()
    print(f"{name:18s} last of 4: {t1-t0:.2f} s wall, {(c1-c0)/200000*1e6:.1f} us JVM CPU per record", flush=True)
