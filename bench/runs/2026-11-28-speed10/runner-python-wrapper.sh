#!/bin/sh
# Prototype: Spark's per-query Python processes (streaming source runner, planner workers) on the installed
# pyspark (bytecode cache) instead of $SPARK_HOME/python/lib/pyspark.zip; the daemon and its forked workers unchanged.
case "$2" in
  pyspark.sql.streaming.*|pyspark.sql.worker.*)
    PYTHONPATH=$(printf '%s' "$PYTHONPATH" | tr ':' '\n' | grep -v -e '/python/lib/pyspark.zip$' -e '/py4j-[^/]*-src.zip$' | paste -sd: -)
    export PYTHONPATH;;
esac
echo "$(date +%T.%N) $*" >> /tmp/sp10/pyw.log
exec /work/main/.venv/bin/python "$@"
