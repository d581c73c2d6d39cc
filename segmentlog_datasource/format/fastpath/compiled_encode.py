"""The compiled twin of v2_encode.encode_batches_python.

Record batches are encoded in C (_fastencode) straight from the Arrow buffers of the
keys and values (offsets, data, validity bitmap) and the timestamps: batches are cut
as a producer fills them and every record is written in one pass, without the GIL.
Uncompressed batches come out whole (headers and CRC32C included); compressed ones get
their records sections from C, compressed by the codec's library one batch at a time,
then headers and CRCs in C. The output is a buffer of Arrow's memory pool, which reuses
freed memory: fresh pages fault in at about the cost of the encoding itself. Headers are encoded per record by the same numpy code as
the pure twin's (v2_encode._EncodedHeaders) and copied in.

Importing this module raises ImportError, saying why, when no usable build of the
extension is found (loading.py); encode.encode_batches then warns once and encodes
with the pure twin.
"""
from typing import Optional

import numpy as np
import pyarrow as pa

from .. import compression
from ..arrow import as_binary, as_binary_chunks
from ..layout import CREATE_TIME, LOG_APPEND_TIME
from ..v2_encode import EncodedBatches, RecordColumns, batch_attributes, check_batch_sizes
from .buildinfo import ENCODER_C_SOURCE
from .loading import load_extension

_fastencode = load_extension("_fastencode", ENCODER_C_SOURCE)


def _column(array: pa.Array) -> tuple:
    """A binary array as the C encoder takes it: (offsets, data, validity, bit offset)."""
    validity, offsets, data = array.buffers()[:3]
    rows = len(array)
    if offsets is None:
        offsets = np.zeros(rows + 1, dtype=np.int32)
    else:
        wide = np.int64 if pa.types.is_large_binary(array.type) else np.int32
        offsets = np.frombuffer(offsets, dtype=wide)[array.offset : array.offset + rows + 1]
    return offsets, data, validity if array.null_count else None, array.offset


def murmur2_compiled(keys: pa.Array, num_partitions: Optional[int] = None) -> np.ndarray:
    """partitioner.murmur2_array in C: Kafka's murmur2 of every key, as uint32 (nulls
    hash as empty keys); with `num_partitions`, each key's partition as int64, as
    partitioner.partitions_from_hashes gives it from those hashes."""
    keys = as_binary(keys)
    if num_partitions is None:
        return np.frombuffer(_fastencode.murmur2(_column(keys), len(keys)), dtype=np.uint32)
    if num_partitions < 1:
        raise ValueError(f"a partition count must be at least 1, got {num_partitions}")
    raw = _fastencode.murmur2(_column(keys), len(keys), num_partitions)
    return np.frombuffer(raw, dtype=np.int64)


def _int64(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=np.int64)


def encode_batches_compiled(columns: RecordColumns, *, codec: int = compression.NONE,
                            batch_size: int = 16384, timestamp_type: int = CREATE_TIME,
                            log_append_time=None, compression_level=None,
                            max_batch_bytes=None, batch_starts=None,
                            rows=None) -> EncodedBatches:
    """encode.encode_batches, in C."""
    columns = columns.combined()
    n = len(columns) if rows is None else len(rows)
    attributes = batch_attributes(codec, timestamp_type, log_append_time)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return EncodedBatches(bytearray(), empty, empty.copy(), empty.copy(), empty.copy())
    headers = columns.encoded_headers()
    header_parts = None if headers.blob is None else (
        np.ascontiguousarray(headers.counts, dtype=np.int64), _column(headers.blob))
    timestamps = columns.timestamps
    if rows is not None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        timestamps = np.ascontiguousarray(timestamps[rows])
    if batch_starts is not None:
        batch_starts = np.ascontiguousarray(batch_starts, dtype=np.int64)
    framed = codec == compression.NONE
    data, starts, counts, sizes, max_timestamps = _fastencode.encode(
        _column(columns.keys), _column(columns.values), timestamps, header_parts,
        batch_starts, batch_size, attributes,
        log_append_time if timestamp_type == LOG_APPEND_TIME else None, framed, rows,
        pa.allocate_buffer)
    starts, counts, sizes = _int64(starts), _int64(counts), _int64(sizes)
    max_timestamps = _int64(max_timestamps)
    if not framed:
        data, sizes = _compress_and_frame(data, sizes, counts, timestamps[starts],
                                          max_timestamps, codec, compression_level, attributes)
    check_batch_sizes(sizes, counts, starts, max_batch_bytes)
    return EncodedBatches(data, sizes, counts, max_timestamps, starts)


def _compress_and_frame(records, sizes, counts, base_timestamps, max_timestamps, codec,
                        compression_level, attributes):
    """Records sections back to back, compressed one by one and framed as batches."""
    compress = compression.compressor(codec, compression_level)
    ends = np.cumsum(sizes)
    view = memoryview(records)
    payloads = [compress(view[start:end])
                for start, end in zip((ends - sizes).tolist(), ends.tolist())]
    data, sizes = _fastencode.frame(payloads, counts, base_timestamps, max_timestamps,
                                    attributes, pa.allocate_buffer)
    return data, _int64(sizes)


def _chunk_columns(keys, values) -> tuple:
    """Keys and values as lists of chunks with the same rows each, as encode_groups takes
    them: the values' chunks (no copy), keys cut alike (copied only when chunked otherwise)."""
    values = as_binary_chunks(values)
    keys = as_binary_chunks(keys)
    lengths = [len(chunk) for chunk in values]
    if [len(chunk) for chunk in keys] != lengths:
        whole = as_binary(pa.chunked_array(keys, pa.binary()))
        starts = np.cumsum([0] + lengths[:-1]).tolist()
        keys = [whole.slice(start, length) for start, length in zip(starts, lengths)]
    return [_column(chunk) for chunk in keys], [_column(chunk) for chunk in values]


def encode_groups_compiled(columns: RecordColumns, groups: np.ndarray, group_count: int, *,
                           codec: int = compression.NONE, batch_size: int = 16384,
                           timestamp_type: int = CREATE_TIME, log_append_time=None,
                           compression_level=None) -> list:
    """encode.encode_groups, in C: every group's records in one pass over the rows."""
    attributes = batch_attributes(codec, timestamp_type, log_append_time)
    groups = np.ascontiguousarray(groups, dtype=np.int64)
    if len(groups) != len(columns):
        raise ValueError("groups must hold one group number per record")
    if not len(groups):
        return [None] * group_count
    headers = columns.encoded_headers()
    header_parts = None if headers.blob is None else (
        np.ascontiguousarray(headers.counts, dtype=np.int64), _column(headers.blob))
    keys, values = _chunk_columns(columns.keys, columns.values)
    framed = codec == compression.NONE
    encoded = _fastencode.encode_groups(
        keys, values, columns.timestamps, header_parts, groups, group_count, batch_size,
        attributes, log_append_time if timestamp_type == LOG_APPEND_TIME else None, framed,
        pa.allocate_buffer)
    results = []
    for group in encoded:
        if group is None:
            results.append(None)
            continue
        data, starts, counts, sizes, max_timestamps, base_timestamps = group
        starts, counts, sizes = _int64(starts), _int64(counts), _int64(sizes)
        max_timestamps = _int64(max_timestamps)
        if not framed:
            data, sizes = _compress_and_frame(data, sizes, counts, _int64(base_timestamps),
                                              max_timestamps, codec, compression_level,
                                              attributes)
        results.append(EncodedBatches(data, sizes, counts, max_timestamps, starts))
    return results
