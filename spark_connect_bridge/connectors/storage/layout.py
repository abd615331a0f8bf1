"""Which records go into which object, and the object's name, as Confluent's storage sinks decide them.

Per Kafka partition, in offset order, records are written to one open file per encoded partition (directory); the
files of the partition are committed together when

* ``flush.size`` records have been written since the last commit (after the record that reaches it), or
* with ``rotate.interval.ms`` and a time-based partitioner, a record's time is that long after the first record
  since the last commit, or its directory differs from the previous record's (before that record), or
* here, the micro-batch ends: no file stays open across micro-batches (Confluent's task keeps a short file open
  until one of its rotations; a trigger interval at or under ``rotate.schedule.interval.ms`` matches it).

An object is named ``<topics.dir>/<topic>/<encodedPartition>/<topic>+<partition>+<start offset>.<ext>`` (the start
offset zero-padded to ``filename.offset.zero.pad.width`` digits; ``/`` is ``directory.delim``, ``+`` ``file.delim``):
the name depends only on the records, so a replayed micro-batch writes the same objects under the same names.
Confluent's HDFS sinks add the last record's offset: ``<topic>+<partition>+<start offset>+<end offset>.<ext>``.

>>> object_key("topics", "orders", "partition=0", 0, 42, ".json")
'topics/orders/partition=0/orders+0+0000000042.json'
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Chunk", "plan_chunks", "object_key"]


@dataclass(frozen=True)
class Chunk:
    """The records of one object: rows of the (offset-sorted) table."""

    topic: str
    partition: int
    encoded: str
    start_offset: int
    rows: Any  # numpy int64 row indices, in offset order


def object_key(topics_dir: str, topic: str, encoded: str, partition: int, start_offset: int, extension: str, *,
               directory_delim: str = "/", file_delim: str = "+", pad_width: int = 10,
               end_offset: int | None = None) -> str:
    """The object name Confluent's S3 sink gives a file (see the module doc); with ``end_offset``, the name
    Confluent's HDFS sinks give it.

    >>> object_key("topics", "orders", "partition=0", 0, 3, ".avro", end_offset=5)
    'topics/orders/partition=0/orders+0+0000000003+0000000005.avro'
    """
    end = "" if end_offset is None else f"{file_delim}{end_offset:0{pad_width}d}"
    name = f"{topic}{file_delim}{partition}{file_delim}{start_offset:0{pad_width}d}{end}{extension}"
    parts = [topics_dir, topic, encoded, name] if topics_dir else [topic, encoded, name]
    return directory_delim.join(parts)


def _runs(values: Any) -> Any:
    """Start indices of the runs of equal neighbours in ``values`` (a numpy array), plus its length."""
    n = len(values)
    if n == 0:
        return np.array([0], dtype=np.int64)
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    return np.concatenate(([0], change, [n])).astype(np.int64)


def plan_chunks(table: Any, encoded: Any, *, flush_size: int, rotate_interval_ms: int = -1,
                times: Any = None) -> Iterator[Chunk]:
    """The objects of ``table`` (sorted by topic, partition, offset), with ``encoded`` its rows' directories.
    ``times`` (epoch ms per row) enables ``rotate.interval.ms``."""
    n = table.num_rows
    if n == 0:
        return
    topics = table.column("topic").combine_chunks()
    topic_codes = np.asarray(pc.dictionary_encode(topics).indices)
    partitions = np.asarray(table.column("partition").combine_chunks().fill_null(-1), dtype=np.int64)
    offsets = np.asarray(table.column("offset").combine_chunks().fill_null(-1), dtype=np.int64)
    enc = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
    dictionary = enc if pa.types.is_dictionary(enc.type) else pc.dictionary_encode(enc)
    enc_codes = np.asarray(dictionary.indices, dtype=np.int64)
    enc_names = dictionary.dictionary.to_pylist()
    key = topic_codes.astype(np.int64) * (1 << 32) + partitions
    bounds = _runs(key)
    timed = rotate_interval_ms > 0 and times is not None
    for lo, hi in itertools.pairwise(bounds):
        topic, partition = topics[int(lo)].as_py(), int(partitions[lo])
        start = int(lo)
        while start < hi:
            end = min(int(hi), start + flush_size)
            if timed and end - start > 1:
                span = slice(start + 1, end)
                rotate = (times[span] - times[start] >= rotate_interval_ms) | \
                    (enc_codes[span] != enc_codes[start:end - 1])
                first = np.flatnonzero(rotate)
                if len(first):
                    end = start + 1 + int(first[0])
            segment = np.arange(start, end, dtype=np.int64)
            codes = enc_codes[start:end]
            if codes[0] == codes[-1] and bool(np.all(codes == codes[0])):  # one directory (DefaultPartitioner's)
                yield Chunk(topic, partition, enc_names[codes[0]], int(offsets[start]), segment)
                start = end
                continue
            # One object per directory of the segment, each starting at its first record's offset.
            _, first_rows = np.unique(codes, return_index=True)
            for first_row in sorted(first_rows):
                code = codes[first_row]
                rows = segment[codes == code]
                yield Chunk(topic, partition, enc_names[code], int(offsets[rows[0]]), rows)
            start = end
