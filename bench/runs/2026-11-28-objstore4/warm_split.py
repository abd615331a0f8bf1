"""Warm runs of 'ours' lines with per-process CPU: driver python vs worker pythons vs JVM. Signals a file when warm."""
import os, sys, time, json
sys.path.insert(0, "/work/wt-objstore4"); sys.path.insert(0, "/work/wt-objstore4/bench")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable); os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
from _proctree import descendants, proc_table
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3Server
from pyspark.sql import SparkSession
from spark_connect_bridge import write_batch
from spark_connect_bridge.jvm import configure_spark
N = int(sys.argv[1]); kind = sys.argv[2]; reps = int(sys.argv[3]); flag = sys.argv[4] if len(sys.argv) > 4 else ""
server = MotoS3Server().start(); server.create_bucket("bench")
b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
     .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1"))
for k, v in [(k, v) for k, v in os.environ.items() if k.startswith("SPARKCONF_")]:
    b = b.config(k[10:].replace("__", "."), v)
spark = configure_spark(b, delta=False).getOrCreate(); spark.sparkContext.setLogLevel("ERROR")
src = {"connector.class": "DatagenConnector", "kafka.topic": "orders", "quickstart": "orders", "iterations": str(N // 2), "max.interval": "0", "tasks.max": "2"}
records = spark.read.format("kconnect").options(**src).load().cache(); assert records.count() == N
fmt = {"json": "io.confluent.connect.s3.format.json.JsonFormat", "parquet": "io.confluent.connect.s3.format.parquet.ParquetFormat"}[kind]
sink = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "s3.bucket.name": "bench", "s3.region": REGION, "store.url": server.endpoint,
        "aws.access.key.id": ACCESS_KEY, "aws.secret.access.key": SECRET_KEY, "flush.size": str(N), "format.class": fmt}
excl = {server.process.pid}
def snap():
    procs = proc_table(reaped=True)
    return {p: procs[p] for p in descendants({os.getpid()}, procs) - descendants(excl, procs)}
n = [0]
def run():
    n[0] += 1; write_batch(records, {**sink, "topics.dir": f"o-{n[0]}"})
run(); run()
if flag: open(flag, "w").write(str(os.getpid())); time.sleep(2)
for _ in range(reps):
    a = snap(); t = time.perf_counter(); run(); wall = time.perf_counter() - t; z = snap()
    split = {}
    for p, (pp, name, cpu) in z.items():
        k = "driver" if p == os.getpid() else ("java" if "java" in name else ("pyworkers" if "python" in name else name))
        split[k] = split.get(k, 0) + cpu - a.get(p, (0, "", 0.0))[2]
    print(kind, N, f"wall {wall:.2f}", {k: round(v, 2) for k, v in split.items()}, f"total {sum(split.values())/N*1e6:.2f} us/rec", f"load {os.getloadavg()[0]:.1f}", flush=True)
spark.stop(); server.destroy()
