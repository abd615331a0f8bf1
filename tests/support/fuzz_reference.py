"""The differential fuzzer's two sides: Kafka's own classes (``tests/support/fuzz/FuzzTransforms.java``, one JVM per
test run) and ours (the sink side of :mod:`spark_connect_bridge.engine.pipeline`: converters, then the chain), over
the same records and the same connector config, each result in one comparable shape.

A record in: ``{"key": bytes | None, "value": bytes | None, "topic", "partition", "offset", "timestamp" (ms),
"headers": [(name, bytes | None)]}``; ``offset`` is unique within a case and identifies the record on both sides.
A result out, per record: ``{"key": <JsonConverter's JSON>, "value": ..., "topic", "partition", "timestamp",
"headers": [[name, <base64 of the header's bytes>]]}`` (Kafka's side: SimpleHeaderConverter, Kafka's default
``header.converter``), ``{"dropped": True}``, or ``{"error": <exception class>, "stage", "message"}``. Both sides
write key and value with JsonConverter with the input's ``schemas.enable``: envelopes out of envelopes, so a schema
difference (names, optional flags, logical types) is a difference of results; bare JSON out of schemaless JSON.
"""

from __future__ import annotations

import base64
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


def _output_converters(config: Mapping[str, str]) -> dict[str, str]:
    """JsonConverter for key and value with the input's ``schemas.enable`` (default true): envelopes out of
    envelopes, bare JSON out of schemaless JSON; and the input's ``decimal.format`` and ``replace.null.with.default``
    (what they change is in what JsonConverter writes)."""
    options = {k: v for k, v in config.items() for side in ("key", "value")
               for option in ("decimal.format", "replace.null.with.default") if k == f"{side}.converter.{option}"}
    return {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER, **options,
            "key.converter.schemas.enable": config.get("key.converter.schemas.enable", "true"),
            "value.converter.schemas.enable": config.get("value.converter.schemas.enable", "true")}


RECORD_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                            StructField("headers", HEADERS_TYPE)])


#: the record columns of a result row as JsonConverter's bytes and Kafka's coordinates
_COLUMNS = {"key": "binary", "value": "binary", "topic": "string", "partition": "int"}


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

    def _ask(self, request: dict[str, Any]) -> Any:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("FuzzTransforms.java exited:\n" + "".join(self._stderr[-40:]))
        return json.loads(line)

    def run(self, config: Mapping[str, str], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return _config_error_first(self._ask({"config": dict(config), "records": _wire_records(records)}))

    def run_many(self, configs: Mapping[str, Mapping[str, str]], cases: Sequence[Sequence[Mapping[str, Any]]]
                 ) -> list[dict[str, list[dict[str, Any]]]]:
        """Every named config over every case in one round trip: per case, name -> that case's results."""
        answer = self._ask({"configs": {n: dict(c) for n, c in configs.items()},
                            "cases": [_wire_records(records) for records in cases]})
        return [{name: _config_error_first(answer[name][i]) for name in configs} for i in range(len(cases))]

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()


def _wire_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "key": _b64(r["key"]), "value": _b64(r["value"]),
             "headers": [[k, _b64(v)] for k, v in r.get("headers", ())]} for r in records]


def _config_error_first(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if results and "config_error" in results[0]:
        return [{"config_error": results[0]["config_error"], "message": results[0]["message"]}]
    return results


def _envelope(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


_CONVERTER_PREFIXES = ("key.converter", "value.converter", "header.converter")


def _converters_of(config: Mapping[str, str]) -> str:
    return json.dumps({k: v for k, v in config.items() if k.startswith(_CONVERTER_PREFIXES)}, sort_keys=True)


def ours(spark: Any, configs: Mapping[str, Mapping[str, str]], records: Sequence[Mapping[str, Any]]
         ) -> dict[str, list[dict[str, Any]]]:
    """The same records through ours, for each named config (:func:`ours_batch`)."""
    return ours_batch(spark, configs, records)


def _sql_binary(data: bytes | None) -> str:
    return "CAST(NULL AS BINARY)" if data is None else f"X'{data.hex()}'"


def _sql_text(text: str) -> str:
    assert "'" not in text and "\\" not in text, text
    return f"'{text}'"


def batch_frame(spark: Any, records: Sequence[Mapping[str, Any]]) -> Any:
    """The records as a batch DataFrame of binary records (:data:`RECORD_SCHEMA`), an inline table (``VALUES``):
    Spark holds it as a local relation, and its optimizer evaluates the projections and filters of a chain over
    it on the driver (``ConvertToLocalRelation``, interpreted expressions), so a case's results come back without
    a Spark job (a job per case and chain made the fuzzer slow: ~2-4 s each, most of it scheduling and code
    generation for a few records)."""
    rows = []
    for r in records:
        headers = ", ".join(f"named_struct('key', {_sql_text(k)}, 'value', {_sql_binary(v)})"
                            for k, v in r.get("headers", ()))
        rows.append(f"({_sql_binary(r['key'])}, {_sql_binary(r['value'])}, {_sql_text(r['topic'])}, "
                    f"{int(r['partition'])}, {int(r['offset'])}L, timestamp_millis({int(r['timestamp'])}L), "
                    f"CAST(array({headers}) AS {HEADERS_TYPE.simpleString()}))")
    df = spark.sql("SELECT * FROM VALUES " + ", ".join(rows) + " AS t(" + ", ".join(RECORD_SCHEMA.names) + ")")
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in RECORD_SCHEMA.fields])


def local_frame(spark: Any, df: Any) -> Any:
    """``df`` evaluated once, as a local relation of its rows with its schema (column metadata included): the
    queries over it (a chain each) read its rows on the driver, not the plan that made them again. A
    converter's parse of a wide envelope is hundreds of ``from_json`` expressions; evaluated in every chain's
    query it cost seconds a chain (a Spark job each, as its projection is not folded into the local relation)."""
    return spark.createDataFrame(df.collect(), df.schema, verifySchema=False)


def ours_batch(spark: Any, configs: Mapping[str, Mapping[str, str]], records: Sequence[Mapping[str, Any]]
               ) -> dict[str, list[dict[str, Any]]]:
    """The records through ours, for each named config: a batch DataFrame of binary records
    (:func:`batch_frame`), ``errors.tolerance=all``'s error column, the sink-side converters (once for the
    configs that share them, evaluated once: :func:`local_frame`), the chain of the config, then JsonConverter's
    JSON of key and value with the input's ``schemas.enable`` (headers as their bytes). A config ours refuses at
    plan time gives ``[{"config_error": ..., "message": ...}]``. One query per config, over the local rows of
    its converters: the frame does not grow with the configs or the records."""
    source = enable_error_column(batch_frame(spark, records))
    converted: dict[str, Any] = {}
    results: dict[str, list[dict[str, Any]]] = {}
    for name, config in configs.items():
        try:
            group = _converters_of(config)
            if group not in converted:
                try:
                    converted[group] = local_frame(spark, apply_sink_converters(source, config))
                except ConfigError as e:
                    converted[group] = e
            df = converted[group]
            if isinstance(df, ConfigError):
                raise df
            if str(config.get("transforms", "")).strip():
                df = build_chain(config).apply(df)
            failed = F.col(_CHAIN_ERROR)
            out = apply_source_converters(df.withColumn(_CHAIN_ERROR, F.col(ERROR_COL)), _output_converters(config))
            rows = out.select(
                "offset", *[F.when(failed.isNull(), F.col(c).cast(t)).alias(c) for c, t in _COLUMNS.items()],
                F.when(failed.isNull(), F.unix_millis("timestamp")).alias("timestamp"),
                F.when(failed.isNull(), F.col("headers").cast(HEADERS_TYPE)).alias("headers"),
                failed.alias("error")).collect()
        except ConfigError as e:
            results[name] = [{"config_error": type(e).__name__, "message": str(e)}]
            continue
        found: dict[int, dict[str, Any]] = {}
        for row in rows:
            err = row["error"]
            found[row["offset"]] = {
                "key": _envelope(row["key"]), "value": _envelope(row["value"]), "topic": row["topic"],
                "partition": row["partition"], "timestamp": row["timestamp"],
                "headers": [[h["key"], _b64(h["value"])] for h in row["headers"] or ()]} if err is None else {
                "stage": err["stage"], "error": err["exception_class"], "message": err["message"]}
        results[name] = [found.get(r["offset"], {"dropped": True}) for r in records]
    return results


#: the chain's error of a record, kept apart from the output converters' (compared: the chain's)
_CHAIN_ERROR = "_fuzz_chain_error"
