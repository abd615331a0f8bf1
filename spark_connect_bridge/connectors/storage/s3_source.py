"""Confluent's S3 source (``io.confluent.connect.s3.source.S3SourceConnector``) in its backup-and-restore mode:
the records that Confluent's S3 sink (or ours) wrote under ``topics.dir`` with the DefaultPartitioner
(``<topics.dir>/<topic>/partition=<p>/<topic>+<p>+<start offset>.<ext>``), read back as a stream.

Each Kafka partition directory is a source partition (``{"topic", "partition"}``); its position is the last record
read, ``{"object": <name>, "index": <record index in the object>}``, checkpointed by Spark: a restarted query reads
on from there, and objects written later are picked up on the next trigger. A record comes back with its topic and
partition, ``offset`` the object's start offset plus the record's index (the original offset when the sink wrote
every record), ``value`` the bytes of its line (JsonFormat: the JSON text; ByteArrayFormat: the value), no key.

>>> (spark.readStream.format("kconnect")                                       # doctest: +SKIP
...    .option("connector.class", "io.confluent.connect.s3.source.S3SourceConnector")
...    .option("s3.bucket.name", "lake")
...    .option("format.class", "io.confluent.connect.s3.format.json.JsonFormat").load())
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa

from ...config import ConfigDef, Importance, Range, Type
from ...core.records import no_headers, record_schema
from ...errors import ConfigProblem, ConnectError
from ..base import ReadRange, SourceConnector
from ..offsets import Offsets, partition_key
from .common import short_class
from .object_sink import endpoint_problem
from .s3 import S3_CONNECTION_KEYS, S3Store

__all__ = ["S3SourceConnector"]

log = logging.getLogger(__name__)

_FORMAT_PACKAGE = "io.confluent.connect.s3.format."
_FORMATS = {"JsonFormat": "json", "ByteArrayFormat": "bytearray"}
_S3 = "S3"
S3_SOURCE_KEYS = S3_CONNECTION_KEYS.merge(
    ConfigDef()
    .define("s3.part.retries", Type.INT, 3, Range.at_least(0), Importance.LOW, group=_S3,
            doc="Retries of a failed request.")
    .define("topics.dir", Type.STRING, "topics", importance=Importance.HIGH, group="Storage",
            doc="The top-level directory the sink wrote under.")
    .define("directory.delim", Type.STRING, "/", importance=Importance.MEDIUM, group="Storage",
            doc="The directory delimiter of the object names.")
    .define("format.class", Type.CLASS, validator=None, importance=Importance.HIGH, group="Storage",
            doc="The format of the objects: JsonFormat (a value per line) or ByteArrayFormat; gzip-compressed "
                "objects (.gz) are read too.")
    .define("format.bytearray.extension", Type.STRING, ".bin", importance=Importance.LOW, group="Storage",
            doc="The extension of ByteArrayFormat objects.")
    .define("format.bytearray.separator", Type.STRING, None, importance=Importance.LOW, group="Storage",
            doc="What follows each value in ByteArrayFormat objects (default: a line separator, \\n).")
    .define("partitioner.class", Type.CLASS, "io.confluent.connect.storage.partitioner.DefaultPartitioner",
            importance=Importance.HIGH, group="Storage",
            doc="Only the DefaultPartitioner's layout (<topics.dir>/<topic>/partition=<p>/) is read back here.")
    .define("topic.regex.list", Type.LIST, [], importance=Importance.MEDIUM, group="Storage",
            doc="The generalized mode's <topic>:<regex> pairs: not supported here (empty only).")
    .define("record.batch.max.size", Type.INT, 200, Range.at_least(1), Importance.LOW, group="Storage",
            doc="The most records in one Arrow batch handed to Spark.")
    .define("s3.poll.interval.ms", Type.LONG, 60000, Range.at_least(1), Importance.LOW, group="Storage",
            doc="Accepted; new objects are looked for on every trigger (the query's trigger interval).")
)


def _problems(config: Any) -> list[ConfigProblem]:
    problems = []
    value = str(config.format_class)
    if short_class(value) not in _FORMATS or not (value.startswith(_FORMAT_PACKAGE) or "." not in value):
        problems.append(ConfigProblem("format.class", f"Invalid value {value} for configuration format.class: one of "
                                      f"{_FORMAT_PACKAGE}json.JsonFormat, {_FORMAT_PACKAGE}bytearray.ByteArrayFormat "
                                      f"(Avro and Parquet objects are not read back yet, issue #35)"))
    if short_class(config.partitioner_class) != "DefaultPartitioner":
        problems.append(ConfigProblem("partitioner.class", f"Invalid value {config.partitioner_class} for "
                                      f"configuration partitioner.class: only the DefaultPartitioner's layout is read "
                                      f"back here (issue #35)"))
    if config.topic_regex_list:
        problems.append(ConfigProblem("topic.regex.list", "Configuration topic.regex.list (the generalized mode) is "
                                                          "not supported here yet (issue #35); leave it unset"))
    url = endpoint_problem(config.store_url, "aws.access.key.id / aws.secret.access.key")
    if url:
        problems.append(url)
    secret = config.aws_secret_access_key.value() if config.aws_secret_access_key else None
    if bool(config.aws_access_key_id) != bool(secret):
        problems.append(ConfigProblem("aws.secret.access.key" if config.aws_access_key_id else "aws.access.key.id",
                                      "aws.access.key.id and aws.secret.access.key go together: set both, or neither "
                                      "for the AWS default credentials chain"))
    return problems


Position = tuple[int, int]  # (the object's start offset, the record's index in it)


class S3SourceConnector(SourceConnector):
    """Reads back the objects Confluent's S3 sink wrote (``io.confluent.connect.s3.source.S3SourceConnector``,
    backup-and-restore mode), as a stream whose positions are object names and record indexes."""

    kafka_class = "io.confluent.connect.s3.source.S3SourceConnector"
    partition_fields: ClassVar[dict[str, type] | None] = {"topic": str, "partition": int}
    offset_fields: ClassVar[dict[str, type] | None] = {"object": str, "index": int}
    destination_keys: ClassVar[tuple[str, ...]] = ("store.url", "s3.bucket.name", "s3.region",
                                                    "s3.path.style.access.enabled")
    object_store_keys: ClassVar[tuple[str, ...]] = ("topics.dir",)
    config_def = S3_SOURCE_KEYS.check(_problems)

    @classmethod
    def worker_credentials_destination(cls, props: Any) -> tuple[str, str] | None:
        """(key, URI) this config would read with the worker's own AWS credentials (no aws.access.key.id), for
        the worker's ``connector.allowed.paths`` check over REST; ``None`` when the config brings its own."""
        if str(props.get("aws.access.key.id") or "").strip():
            return None
        bucket = str(props.get("s3.bucket.name") or "").strip()
        prefix = str(props.get("topics.dir") or "topics").strip().strip("/")
        endpoint = str(props.get("store.url") or "").strip().rstrip("/")
        if endpoint:
            return "store.url", f"{endpoint}/{bucket}/{prefix}"
        return "s3.bucket.name", f"s3://{bucket}/{prefix}"

    def __init__(self, config: Any, *, name: str):
        super().__init__(config, name=name)
        self._counts: dict[str, int] = {}  # object name -> records (driver cache: objects are written whole)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_counts": {}}

    def store(self) -> S3Store:
        config = self.config
        return S3Store(config.s3_bucket_name, config.s3_region, config.store_url, config.s3_path_style_access_enabled,
                       config.aws_access_key_id, config.aws_secret_access_key, config.s3_part_retries)

    def schema(self) -> Any:
        return record_schema()

    # -- the objects ------------------------------------------------------------------------------
    def _name_pattern(self) -> re.Pattern[str]:
        delim = re.escape(self.config.directory_delim)
        if short_class(self.config.format_class) == "JsonFormat":
            extension = re.escape(".json")
        else:
            extension = re.escape(self.config.format_bytearray_extension)
        return re.compile(rf"{re.escape(self.config.topics_dir.strip('/'))}{delim}(?P<topic>[^/]+?){delim}"
                          rf"partition=(?P<partition>\d+){delim}(?P=topic)\+(?P=partition)\+(?P<start>\d+)"
                          rf"{extension}(?P<gzip>\.gz)?")

    def _objects(self, prefix: str) -> dict[tuple[str, int], list[tuple[int, str]]]:
        """(topic, partition) -> [(start offset, object name)] in offset order, of the objects under ``prefix``."""
        pattern = self._name_pattern()
        out: dict[tuple[str, int], list[tuple[int, str]]] = {}
        for name in self.store().list_keys(prefix):
            match = pattern.fullmatch(name)
            if match:  # .keys/.headers objects and anything else under the directory are not records
                out.setdefault((match["topic"], int(match["partition"])), []).append((int(match["start"]), name))
        for objects in out.values():
            objects.sort()
        return out

    def _values(self, name: str) -> list[bytes | None]:
        data = self.store().get(name)
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        if short_class(self.config.format_class) == "JsonFormat":
            lines = data.split(b"\n")
            return [None if line == b"null" else line for line in (lines[:-1] if lines[-1] == b"" else lines)]
        separator = self.config.format_bytearray_separator
        parts = data.split(("\n" if separator is None else separator).encode())
        return list(parts[:-1] if parts[-1] == b"" else parts)

    def _count(self, name: str) -> int:
        if name not in self._counts:
            self._counts[name] = len(self._values(name))
        return self._counts[name]

    @staticmethod
    def _position(offset: dict[str, Any] | None, start_of: dict[str, int]) -> Position | None:
        if offset is None:
            return None
        name = str(offset["object"])
        if name not in start_of:
            raise ConnectError(f"The object {name!r} of the committed position is no longer in the bucket: restore "
                               f"it, or reset the connector's offsets to read the partition from the start")
        return start_of[name], int(offset["index"])

    # -- driver -----------------------------------------------------------------------------------
    def initial_offsets(self) -> Offsets:
        return {}

    def latest_offsets(self, start: Offsets, max_records: int | None, until: Offsets | None) -> Offsets:
        out = dict(start)
        budget = max_records
        for (topic, partition), objects in sorted(self._objects(self.config.topics_dir).items()):
            key = partition_key({"topic": topic, "partition": partition})
            start_of = {name: so for so, name in objects}
            pos = self._position(start.get(key), start_of)
            bound = self._position(until.get(key), start_of) if until is not None else None
            if until is not None and bound is None:
                continue  # not in the AvailableNow target
            for so, name in objects:
                if pos is not None and so < pos[0]:
                    continue
                first = pos[1] + 1 if pos is not None and so == pos[0] else 0
                last = self._count(name) - 1
                if bound is not None:
                    if so > bound[0]:
                        break
                    if so == bound[0]:
                        last = min(last, bound[1])
                if budget is not None:
                    last = min(last, first + budget - 1)
                if last < first:
                    if budget == 0:
                        break
                    continue
                if budget is not None:
                    budget -= last - first + 1
                out[key] = {"object": name, "index": last}
                if last < self._count(name) - 1:
                    break
            if budget == 0:
                break
        return out

    def lag(self, current: Offsets) -> int | None:
        return None

    # -- executor ---------------------------------------------------------------------------------
    def read_range(self, rng: ReadRange) -> Iterator[Any]:
        topic, partition = str(rng.partition["topic"]), int(rng.partition["partition"])
        delim = self.config.directory_delim
        prefix = f"{self.config.topics_dir.strip('/')}{delim}{topic}{delim}partition={partition}"
        objects = self._objects(prefix).get((topic, partition), [])
        start_of = {name: so for so, name in objects}
        pos = self._position(rng.start, start_of)
        end = self._position(rng.end, start_of)
        assert end is not None
        step = self.config.record_batch_max_size
        for so, name in objects:
            if (pos is not None and so < pos[0]) or so > end[0]:
                continue
            values = self._values(name)
            first = pos[1] + 1 if pos is not None and so == pos[0] else 0
            last = end[1] if so == end[0] else len(values) - 1
            if last >= len(values):
                raise ConnectError(f"The object {name!r} holds {len(values)} records, fewer than the position "
                                   f"{rng.end} read before: it was rewritten with other records")
            for i in range(first, last + 1, step):
                chunk = values[i:min(last + 1, i + step)]
                n = len(chunk)
                yield pa.RecordBatch.from_arrays(
                    [pa.nulls(n, pa.binary()), pa.array(chunk, pa.binary()),
                     pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
                     pa.array(range(so + i, so + i + n), pa.int64()), pa.nulls(n, pa.timestamp("us", tz="UTC")),
                     no_headers(n)],
                    names=["key", "value", "topic", "partition", "offset", "timestamp", "headers"])

