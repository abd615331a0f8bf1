import os, sys, time, tempfile
sys.path.insert(0, "/work/wt-speed10/bench"); sys.path.insert(0, "/work/wt-speed10")
from bench_vs_debezium import _cpu, _ours_roots, _spark
import spark_connect_bridge as scb
spark = _spark()
roots = _ours_roots(spark)
print("pythonExec", spark.sparkContext.pythonExec, spark.conf.get("spark.pyspark.python", None), os.environ.get("PYSPARK_PYTHON"), flush=True)
d = tempfile.mkdtemp()
open(f"{d}/in.txt", "w").write("a\nb\n")
for i in range(1, 4):
    c0, t0 = _cpu(roots), time.monotonic()
    df = scb.read_stream(spark, {"connector.class": "FileStreamSource", "file": f"{d}/in.txt", "topic": "t",
                                 "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                 "value.converter.schemas.enable": "false"})
    q = df.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", f"{d}/cp{i}").start()
    q.awaitTermination()
    print(f"{os.environ.get('PYSPARK_PYTHON')}: query {i}: wall {time.monotonic()-t0:.2f} s, CPU {_cpu(roots)-c0:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)
