"""The object formats of Confluent's storage sinks: the bytes of one object from an Arrow table of its records, and
the extension its name ends with.

* ``JsonFormat``: one line per value, the JSON Kafka's JsonConverter writes (:mod:`.json_lines`), ``\\n`` after
  each; ``.json`` (``.json.gz`` with ``s3.compression.type=gzip``);
* ``ParquetFormat``: the value's fields as the file's columns, compressed with ``parquet.codec``;
  ``.<codec>.parquet`` (``.snappy.parquet``; ``.parquet`` uncompressed), as parquet-mr names its codecs;
* ``ByteArrayFormat``: each value's bytes then ``format.bytearray.separator`` (``\\n`` by default);
  ``format.bytearray.extension`` (``.bin``) plus ``.gz`` with gzip.

>>> fmt = JsonFormat(compression="gzip"); fmt.extension                  # doctest: +SKIP
'.json.gz'
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import DataError
from .json_lines import json_text

__all__ = ["Format", "JsonFormat", "ParquetFormat", "ByteArrayFormat", "FORMATS", "PARQUET_CODEC_EXTENSIONS"]

#: parquet-mr's ``CompressionCodecName.getExtension()`` of each ``parquet.codec``.
PARQUET_CODEC_EXTENSIONS = {"none": "", "snappy": ".snappy", "gzip": ".gz", "lz4": ".lz4", "zstd": ".zstd",
                            "brotli": ".br"}
_COMPRESSION_EXTENSIONS = {"none": "", "gzip": ".gz"}


class Format:
    extension: str

    def encode(self, values: Any) -> bytes:
        """The object's bytes from the values (an Arrow array) of its records, in offset order."""
        raise NotImplementedError


def _joined(texts: Any, separator: bytes) -> bytes:
    """Each value followed by ``separator``, as one buffer (one kernel, no per-record Python)."""
    if len(texts) == 0:
        return b""
    joined = pc.binary_join_element_wise(texts.cast(pa.binary()), pa.scalar(separator, pa.binary()),
                                         pa.scalar(b"", pa.binary())).cast(pa.large_binary())
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset: joined.offset + len(joined) + 1]
    return joined.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]


def _compressed(data: bytes, compression: str, level: int) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6 if level < 0 else level, mtime=0)  # -1: zlib's default
    return data


@dataclass(frozen=True)
class JsonFormat(Format):
    compression: str = "none"
    level: int = -1
    schemaless: bool = False
    decimal_numeric: bool = False

    @property
    def extension(self) -> str:  # type: ignore[override]
        return ".json" + _COMPRESSION_EXTENSIONS[self.compression]

    def encode(self, values: Any) -> bytes:
        text = json_text(values, schemaless=self.schemaless, decimal_numeric=self.decimal_numeric)
        return _compressed(_joined(text, b"\n"), self.compression, self.level)


@dataclass(frozen=True)
class ByteArrayFormat(Format):
    separator: bytes = b"\n"
    base_extension: str = ".bin"
    compression: str = "none"
    level: int = -1

    @property
    def extension(self) -> str:  # type: ignore[override]
        return self.base_extension + _COMPRESSION_EXTENSIONS[self.compression]

    def encode(self, values: Any) -> bytes:
        t = values.type
        if not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
                or pa.types.is_large_string(t)):
            raise DataError(f"ByteArrayFormat writes bytes: the record value has the type {t} (set "
                            f"value.converter=org.apache.kafka.connect.converters.ByteArrayConverter)")
        return _compressed(_joined(pc.fill_null(values.cast(pa.binary()), b""), self.separator), self.compression,
                           self.level)


@dataclass(frozen=True)
class ParquetFormat(Format):
    codec: str = "snappy"

    @property
    def extension(self) -> str:  # type: ignore[override]
        return PARQUET_CODEC_EXTENSIONS[self.codec] + ".parquet"

    def encode(self, values: Any) -> bytes:
        import pyarrow.parquet as pq

        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not pa.types.is_struct(values.type):
            raise DataError(f"ParquetFormat writes records with a struct value: the record value has the type "
                            f"{values.type} (Confluent's sink needs a schema'd value too: Avro, JSON Schema or "
                            f"Protobuf converters, or JsonConverter with schemas)")
        table = pa.Table.from_batches([pa.RecordBatch.from_struct_array(values)])
        out = io.BytesIO()
        pq.write_table(table, out, compression=self.codec if self.codec != "none" else None)
        return out.getvalue()


FORMATS = {"json": JsonFormat, "parquet": ParquetFormat, "bytearray": ByteArrayFormat}
