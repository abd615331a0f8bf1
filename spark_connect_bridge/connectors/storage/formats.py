"""The object formats of Confluent's storage sinks: the bytes of one object from an Arrow table of its records, and
the extension its name ends with.

* ``JsonFormat``: one line per value, the JSON Kafka's JsonConverter writes (:mod:`.json_lines`), ``\\n`` after
  each; ``.json`` (``.json.gz`` with ``s3.compression.type=gzip``);
* ``ParquetFormat``: the value's fields as the file's columns, compressed with ``parquet.codec``;
  ``.<codec>.parquet`` (``.snappy.parquet``; ``.parquet`` uncompressed), as parquet-mr names its codecs;
* ``ByteArrayFormat``: each value's bytes then ``format.bytearray.separator`` (``\\n`` by default);
  ``format.bytearray.extension`` (``.bin``) plus ``.gz`` with gzip;
* ``AvroFormat``: an Avro container file (``.avro``) whose schema is the value's Connect schema as Confluent's
  ``AvroData`` maps it (:func:`~spark_connect_bridge.converters.avro_data.spark_to_avro`), blocks compressed with
  ``avro.codec``; the sync marker derives from the schema, so the same records give the same bytes;
* ``CsvFormat``: the CSV of Confluent's ``CsvFormat`` (kafka-connect-storage-cloud pull request #606, never in a
  release): a header line of the struct's field names in snake case (nested fields ``parent_child``), then one line
  per struct value, every non-null field quoted (``"1"``, ``"a""b"``), a null field empty; ``csv.field.sep``,
  ``csv.fields.list``; ``.csv`` (``.csv.gz`` with gzip).

>>> fmt = JsonFormat(compression="gzip"); fmt.extension                  # doctest: +SKIP
'.json.gz'
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import DataError
from .json_lines import json_text

__all__ = ["Encoded", "Format", "whole", "JsonFormat", "ParquetFormat", "ByteArrayFormat", "AvroFormat", "CsvFormat",
           "FORMATS", "PARQUET_CODEC_EXTENSIONS", "AVRO_CODECS"]

#: parquet-mr's ``CompressionCodecName.getExtension()`` of each ``parquet.codec``.
PARQUET_CODEC_EXTENSIONS = {"none": "", "snappy": ".snappy", "gzip": ".gz", "lz4": ".lz4", "zstd": ".zstd",
                            "brotli": ".br"}
_COMPRESSION_EXTENSIONS = {"none": "", "gzip": ".gz"}


class Format:
    extension: str

    def encode(self, values: Any) -> Encoded:
        """The object's bytes from the values (an Arrow array, or Spark's chunks of it) of its records, in offset
        order."""
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
    return joined.buffers()[2][offsets[0]:offsets[-1]].to_pybytes()  # the buffer's slice: one copy


#: An object's bytes: one buffer, or parts sent one after the other (slices of Arrow buffers, never copied into one).
Encoded = bytes | list[Any]


def whole(data: Encoded) -> bytes:
    """The bytes of ``data`` as one buffer (for a client that needs them so)."""
    return data if isinstance(data, bytes) else b"".join(data)


def _line_parts(texts: Any) -> list[Any]:
    """The values' bytes back to back (each ends with its separator already, as the JVM made it): a slice of each
    Arrow chunk's data buffer, not copied; no per-record work."""
    parts = []
    for chunk in texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]:
        if len(chunk) == 0:
            continue
        width = np.int64 if pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset: chunk.offset + len(chunk) + 1]
        if chunk.buffers()[2] is not None and offsets[-1] > offsets[0]:
            parts.append(chunk.buffers()[2][int(offsets[0]):int(offsets[-1])])  # a zero-copy Buffer slice
    return parts


def compressed(data: bytes, compression: str, level: int) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6 if level < 0 else level, mtime=0)  # -1: zlib's default
    return data


@dataclass(frozen=True)
class JsonFormat(Format):
    compression: str = "none"
    level: int = -1
    schemaless: bool = False
    decimal_numeric: bool = False
    #: The values are JSON text already: a schemaless VARIANT's (core.records.VARIANT_JSON_META), written as is.
    json_text: bool = False
    #: The values are JSON lines already, each text ending with ``\n`` (made in the JVM: ``object_sink.
    #: JSON_LINES_META``): the object is their bytes back to back, a null value the line ``null``.
    lines: bool = False

    @property
    def extension(self) -> str:  # type: ignore[override]
        return ".json" + _COMPRESSION_EXTENSIONS[self.compression]

    def encode(self, values: Any) -> Encoded:
        if self.lines:
            parts = _line_parts(pc.fill_null(values, "null\n") if values.null_count else values)
            return parts if self.compression == "none" else compressed(whole(parts), self.compression, self.level)
        if self.json_text:
            text = pc.fill_null(values.cast(pa.string()), "null")
        else:
            text = json_text(values, schemaless=self.schemaless, decimal_numeric=self.decimal_numeric)
        return compressed(_joined(text, b"\n"), self.compression, self.level)


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
        return compressed(_joined(pc.fill_null(values.cast(pa.binary()), b""), self.separator), self.compression,
                           self.level)


@dataclass(frozen=True)
class ParquetFormat(Format):
    codec: str = "snappy"

    @property
    def extension(self) -> str:  # type: ignore[override]
        return PARQUET_CODEC_EXTENSIONS[self.codec] + ".parquet"

    def encode(self, values: Any) -> bytes:
        import pyarrow.parquet as pq

        if not pa.types.is_struct(values.type):
            raise DataError(f"ParquetFormat writes records with a struct value: the record value has the type "
                            f"{values.type} (Confluent's sink needs a schema'd value too: Avro, JSON Schema or "
                            f"Protobuf converters, or JsonConverter with schemas)")
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        # Spark's Arrow batches as they came: no copy into one array before the Parquet writer reads them
        table = pa.Table.from_batches([pa.RecordBatch.from_struct_array(c) for c in chunks if len(c)] or
                                      [pa.RecordBatch.from_struct_array(pa.array([], values.type))])
        out = io.BytesIO()
        pq.write_table(table, out, compression=self.codec if self.codec != "none" else None)
        return out.getvalue()


#: ``avro.codec`` values (Avro's ``CodecFactory.fromString`` names) -> fastavro's codec names.
AVRO_CODECS = {"null": "null", "deflate": "deflate", "snappy": "snappy", "bzip2": "bzip2", "xz": "xz",
               "zstandard": "zstandard"}


@dataclass(frozen=True)
class AvroFormat(Format):
    """``schema``: the Avro schema (JSON text) of the values; ``spark_type``: their Spark type (JSON), for the
    Python forms fastavro takes (a map with non-string keys is an array of ``MapEntry`` records)."""

    schema: str
    spark_type: str
    codec: str = "null"
    extension: str = ".avro"

    def encode(self, values: Any) -> bytes:
        import fastavro

        from ...converters.avro import _fixer, _parsed, _type_from_json

        if values.null_count:
            raise DataError("AvroFormat cannot write a null value (its schema is the value's, not optional): set "
                            "behavior.on.null.values=ignore")
        parsed = _parsed(self.schema)
        fix = _fixer(_type_from_json(self.spark_type), False)
        rows = values.to_pylist()
        out = io.BytesIO()
        marker = hashlib.md5(self.schema.encode(), usedforsecurity=False).digest()
        fastavro.writer(out, parsed, [fix(r) for r in rows] if fix else rows, codec=AVRO_CODECS[self.codec],
                        sync_marker=marker)
        return out.getvalue()


_CASE_CHANGE = re.compile("([a-z])([A-Z])")


def _snake(name: str) -> str:
    return _CASE_CHANGE.sub(r"\1_\2", name).lower()


def _csv_quoted(text: Any) -> Any:
    """``"text"`` with ``"`` doubled; null stays null."""
    escaped = pc.replace_substring(text, '"', '""')
    return pc.binary_join_element_wise('"', escaped, '"', "")


def _csv_text(arr: Any) -> Any:
    """The text Java's ``String.valueOf`` gives a Connect value, per the CsvConverter (before quoting)."""
    from ...core.connect_text import java_floating_text

    t = arr.type
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_floating(t):
        return java_floating_text(arr)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        # Instant.toString(): ISO-8601 in UTC, seconds always, the fraction only when not zero
        ms = pc.cast(pc.cast(arr, pa.timestamp("ms", tz="UTC")) if pa.types.is_timestamp(t)
                     else pc.cast(arr.cast(pa.date32()), pa.timestamp("ms", tz="UTC")), pa.int64())
        rest = pc.subtract(ms, pc.multiply(pc.floor(pc.divide(pc.cast(ms, pa.float64()), 1000.0)).cast(pa.int64()),
                                           1000))
        seconds = pc.cast(pc.cast(pc.subtract(ms, rest), pa.timestamp("ms", tz="UTC")), pa.timestamp("s", tz="UTC"))
        whole = pc.strftime(seconds, format="%Y-%m-%dT%H:%M:%S")
        millis = pc.utf8_slice_codeunits(pc.cast(pc.add(rest, 1000), pa.string()), 1)  # "1xyz" -> "xyz"
        with_frac = pc.binary_join_element_wise(whole, ".", millis, "Z", "")
        return pc.if_else(pc.equal(rest, 0), pc.binary_join_element_wise(whole, "Z", ""), with_frac)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return pc.cast(arr, pa.string())
    raise DataError(f"CsvFormat writes flat fields (numbers, text, booleans, timestamps) and nested structs: a "
                    f"field has the type {t}")


@dataclass(frozen=True)
class CsvFormat(Format):
    separator: str = ","
    fields: tuple[str, ...] = ()
    compression: str = "none"
    level: int = -1

    @property
    def extension(self) -> str:  # type: ignore[override]
        return ".csv" + _COMPRESSION_EXTENSIONS[self.compression]

    def _columns(self, values: Any) -> tuple[list[str], list[Any]]:
        """(header names, text columns) of the struct values: every leaf field, or ``csv.fields.list``'s paths."""
        if self.fields:
            texts = []
            for path in self.fields:
                col, ok = values, True
                for part in path.split("."):
                    if not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
                        ok = False
                        break
                    col = pc.struct_field(col, part)
                texts.append(_csv_quoted(_csv_text(col)) if ok else pa.nulls(len(values), pa.string()))
            return ['"' + _snake(p.replace(".", "_")).replace('"', '""') + '"' for p in self.fields], texts
        names: list[str] = []
        texts = []

        def leaves(col: Any, prefix: str, valid: Any) -> None:
            for i, field in enumerate(col.type):
                name = _snake(field.name if not prefix else f"{prefix}_{field.name}")
                child = pc.struct_field(col, [i])
                child_valid = pc.and_kleene(valid, child.is_valid()) if pa.types.is_struct(child.type) else valid
                if pa.types.is_struct(child.type):
                    leaves(child, name, child_valid)
                else:
                    names.append(f'"{name}"')
                    texts.append(pc.if_else(valid, _csv_quoted(_csv_text(child)), pa.scalar(None, pa.string())))

        leaves(values, "", values.is_valid())
        return names, texts

    def encode(self, values: Any) -> bytes:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not pa.types.is_struct(values.type):
            raise DataError(f"CsvFormat writes records with a struct value: the record value has the type "
                            f"{values.type}")
        values = values.filter(values.is_valid())  # only struct values are written (a null one is skipped)
        if len(values) == 0:
            return compressed(b"", self.compression, self.level)
        names, texts = self._columns(values)
        empty = pa.scalar("", pa.string())
        lines = pc.binary_join_element_wise(*[pc.fill_null(t, empty) for t in texts], self.separator) \
            if len(texts) > 1 else pc.fill_null(texts[0], empty) if texts else pa.array([""] * len(values))
        header = self.separator.join(names).encode() + b"\n"
        return compressed(header + _joined(lines, b"\n"), self.compression, self.level)


FORMATS = {"json": JsonFormat, "parquet": ParquetFormat, "bytearray": ByteArrayFormat, "avro": AvroFormat,
           "csv": CsvFormat}
