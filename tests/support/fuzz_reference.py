"""The differential fuzzer's two sides: Kafka's own classes (``tests/support/fuzz/FuzzTransforms.java``, one JVM per
test run) and ours (the sink side of :mod:`spark_connect_bridge.engine.pipeline`: converters, then the chain), over
the same records and the same connector config, each result in one comparable shape.

A record in: ``{"key": bytes | None, "value": bytes | None, "topic", "partition", "offset", "timestamp" (ms),
"headers": [(name, bytes | None)]}``; ``offset`` is unique within a case and identifies the record on both sides.
A result out, per record: ``{"key": <JsonConverter envelope>, "value": ..., "topic", "partition", "timestamp",
"headers": [[name, <base64 of the header's bytes>]]}``
(Kafka's side: SimpleHeaderConverter, Kafka's default ``header.converter``), ``{"dropped": True}``, or ``{"error": <kind>, "stage", "message"}``.
Both sides write their key, value and headers with JsonConverter ``schemas.enable=true``, so a schema
difference (names, optional flags, logical types) is a difference of results.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from spark_connect_bridge.converters.wiring import apply_sink_converters, apply_source_converters
from spark_connect_bridge.core.record_errors import ERROR_COL, enable_error_column
from spark_connect_bridge.core.records import HEADERS_TYPE
from spark_connect_bridge.errors import ConfigError
from spark_connect_bridge.jvm import classpath
from spark_connect_bridge.transforms.chain import build_chain

_JAVA_SOURCE = Path(__file__).parent / "fuzz" / "FuzzTransforms.java"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_ENVELOPE_OUT = {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
                 "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
RECORD_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                            StructField("headers", HEADERS_TYPE)])


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


class KafkaReference:
    """One JVM running Kafka's (and Debezium's) classes; :meth:`run` sends one case and reads its results."""

    def __init__(self) -> None:
        jars = classpath("kafka-connect") + classpath("debezium")
        java = os.environ.get("JAVA", shutil.which("java") or "java")
        self._proc = subprocess.Popen([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join(jars),
                                       str(_JAVA_SOURCE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def run(self, config: Mapping[str, str], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        case = {"config": dict(config), "records": [
            {**r, "key": _b64(r["key"]), "value": _b64(r["value"]),
             "headers": [[k, _b64(v)] for k, v in r.get("headers", ())]} for r in records]}
        self._proc.stdin.write(json.dumps(case) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("FuzzTransforms.java exited:\n" + "".join(self._stderr[-40:]))
        results = json.loads(line)
        if results and "config_error" in results[0]:
            return [{"config_error": results[0]["config_error"], "message": results[0]["message"]}]
        return results

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()


def _envelope(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def ours(spark: Any, config: Mapping[str, str], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The same records through ours: a batch DataFrame of binary records, ``errors.tolerance=all``'s error column,
    the sink-side converters and the chain of ``config``, then JsonConverter envelopes of key, value and headers.
    A config ours refuses at plan time gives ``[{"config_error": ..., "message": ...}]``."""
    rows = [(r["key"], r["value"], r["topic"], r["partition"], r["offset"],
             dt.datetime.fromtimestamp(r["timestamp"] / 1000, dt.timezone.utc),
             [(k, v) for k, v in r.get("headers", ())]) for r in records]
    df = enable_error_column(spark.createDataFrame(rows, RECORD_SCHEMA))
    try:
        df = build_chain(config).apply(apply_sink_converters(df, config)) if str(config.get("transforms", "")) \
            else apply_sink_converters(df, config)
        good = F.col(ERROR_COL).isNull()
        typed = df
        out = apply_source_converters(df.filter(good), _ENVELOPE_OUT)
        errors = typed.filter(~good).select("offset", ERROR_COL)
        rows_out = out.select("key", "value", "topic", "partition", "offset",
                              F.unix_millis("timestamp").alias("timestamp"), "headers", ERROR_COL).collect()
        failed = errors.collect()
    except ConfigError as e:
        return [{"config_error": type(e).__name__, "message": str(e)}]
    by_offset: dict[int, dict[str, Any]] = {}
    for row in failed:
        err = row[ERROR_COL]
        by_offset[row["offset"]] = {"stage": err["stage"], "error": err["exception_class"], "message": err["message"]}
    for row in rows_out:
        if row[ERROR_COL] is not None:
            err = row[ERROR_COL]
            by_offset[row["offset"]] = {"stage": err["stage"], "error": err["exception_class"],
                                        "message": err["message"]}
            continue
        by_offset[row["offset"]] = {
            "key": _envelope(row["key"]), "value": _envelope(row["value"]), "topic": row["topic"],
            "partition": row["partition"], "timestamp": row["timestamp"],
            "headers": [[h["key"], _b64(h["value"])] for h in row["headers"] or ()]}
    return [by_offset.get(r["offset"], {"dropped": True}) for r in records]
