"""Encoding magic-2 record batches, vectorised over Arrow columns.

A batch is written the way a non-idempotent, non-transactional producer leaves it:
producerId -1, producerEpoch -1, baseSequence -1, no control or transactional bit.
Records are laid out as

    varint length | int8 attributes (0) | varlong timestampDelta | varint offsetDelta |
    varint keyLength (-1 = null) | key | varint valueLength (-1 = null) | value |
    varint headerCount | headers (varint keyLength, key, varint valueLength, value)

with zig-zag varints. baseTimestamp is the first record's timestamp and timestamp
deltas are relative to it; maxTimestamp is the largest record timestamp, or the append
time for LogAppendTime batches (attribute bit 3). Compressed batches compress the whole
records section. The CRC32C covers everything from the attributes on, so neither the
baseOffset nor the partitionLeaderEpoch is covered: batches are encoded at base offset
0 and re-based later by overwriting those fields (`patch_batch_headers`).

`encode.encode_batches` is the one place that picks the encoder: the compiled one
(fastpath/compiled_encode.py, _fastencode.c), which writes whole batches from the Arrow
buffers in one pass, or its pure twin here, `encode_batches_python`, which works on
whole columns: varint bytes come from numpy, and each record's bytes are assembled by
Arrow's `binary_join_element_wise`, so no Python object is built per record; only the
per-batch work (header, CRC, compression) runs in a Python loop. Both give the same bytes.
"""
import struct
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np
import pyarrow as pa

from . import compression
from .arrow import HEADER_TYPE, as_binary, as_binary_column, binary_lengths, binary_offsets
from .layout import (
    ATTR_COMPRESSION_MASK, ATTR_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, V2_CRC_COVERED,
    V2_HEADER_SIZE,
    V2_BASE_OFFSET, V2_HEAD, V2_LEADER_EPOCH, V2_LENGTH_OVERHEAD, V2_MAGIC, V2_MAGIC_VALUE,
)
from .varint import positive_varint_sizes, signed_varint_sizes, varint_concat, varint_sizes

from .crc import crc32c as _crc32c, crc32c_continuing


@dataclass
class RecordColumns:
    """The records to encode, column by column (one row per record).

    keys/values: binary (or string) arrays, nulls allowed. timestamps: int64 epoch
    milliseconds. headers: None, or list<struct<key: string, value: binary>> (a null list
    means no headers; header keys must not be null, header values may be).
    """

    keys: pa.Array
    values: pa.Array
    timestamps: np.ndarray
    headers: Optional[pa.Array] = None
    _encoded_headers: Optional["_EncodedHeaders"] = field(default=None, repr=False,
                                                          compare=False)

    def __post_init__(self):
        # Keys and values of several chunks stay chunked: encode_groups reads them in
        # place; everything else takes them combined (`combined`).
        self.keys = as_binary_column(self.keys)
        self.values = as_binary_column(self.values)
        self.timestamps = np.ascontiguousarray(self.timestamps, dtype=np.int64)
        if isinstance(self.headers, pa.ChunkedArray):
            self.headers = self.headers.combine_chunks()
        n = len(self.values)
        if len(self.keys) != n or len(self.timestamps) != n or \
                (self.headers is not None and len(self.headers) != n):
            raise ValueError("record columns have different lengths")

    def __len__(self):
        return len(self.values)

    def encoded_headers(self) -> "_EncodedHeaders":
        """Every row's headers encoded, once for all the partitions taken from these rows."""
        if self._encoded_headers is None:
            self._encoded_headers = _EncodedHeaders(self.headers, len(self))
        return self._encoded_headers

    def combined(self) -> "RecordColumns":
        """These columns with keys and values each in one array (a copy only if chunked)."""
        if not isinstance(self.keys, pa.ChunkedArray) and \
                not isinstance(self.values, pa.ChunkedArray):
            return self
        return RecordColumns(as_binary(self.keys), as_binary(self.values), self.timestamps,
                             self.headers, self._encoded_headers)

    def take(self, rows: np.ndarray) -> "RecordColumns":
        """The records at `rows`, in that order."""
        index = pa.array(rows, pa.int64())
        return RecordColumns(self.keys.take(index), self.values.take(index),
                             self.timestamps[rows],
                             None if self.headers is None else self.headers.take(index))

    @classmethod
    def from_records(cls, records: Iterable) -> "RecordColumns":
        """From (key, value, timestamp_ms, headers) tuples; headers as [(str, bytes|None)]."""
        keys, values, timestamps, headers = [], [], [], []
        any_headers = False
        for key, value, timestamp, record_headers in records:
            keys.append(key)
            values.append(value)
            timestamps.append(timestamp)
            record_headers = list(record_headers or [])
            any_headers = any_headers or bool(record_headers)
            headers.append([{"key": k, "value": v} for k, v in record_headers])
        return cls(
            pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            np.array(timestamps, dtype=np.int64),
            pa.array(headers, HEADER_TYPE) if any_headers else None,
        )


class _EncodedHeaders:
    """Per record: header count and the encoded header bytes (as a binary array)."""

    def __init__(self, headers: Optional[pa.Array], n: int):
        if headers is None or headers.null_count == len(headers) or len(headers) == 0:
            self.counts = np.zeros(n, dtype=np.int64)
            self.blob = None
            self.blob_lengths = np.zeros(n, dtype=np.int64)
            return
        if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)):
            raise TypeError(f"headers must be a list of structs, got {headers.type}")
        valid = np.asarray(headers.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        offsets = np.asarray(headers.offsets.to_numpy(), dtype=np.int64)
        elements = headers.values  # absolute offsets index into this
        import pyarrow.compute as pc  # the pure twin alone: a fresh worker's import costs 80 ms

        hkeys = as_binary(pc.struct_field(elements, [0]))
        hvalues = as_binary(pc.struct_field(elements, [1]))
        key_lengths = binary_lengths(hkeys)
        if np.any(key_lengths < 0):
            # Only elements inside a non-null list count; others are unreachable padding.
            marks = np.zeros(len(elements) + 1, dtype=np.int64)
            np.add.at(marks, offsets[:-1][valid], 1)
            np.add.at(marks, offsets[1:][valid], -1)
            used = np.cumsum(marks[:-1]) > 0
            if np.any(key_lengths[used] < 0):
                raise ValueError("a header key is null; Kafka header keys must be strings")
        value_lengths = binary_lengths(hvalues)
        element_bytes = pc.binary_join_element_wise(
            varint_concat([np.maximum(key_lengths, 0)]), hkeys,
            varint_concat([value_lengths]), hvalues, b"",
            null_handling="replace", null_replacement=b"",
        )
        element_offsets = binary_offsets(element_bytes)
        counts = np.where(valid, offsets[1:] - offsets[:-1], 0)
        blob_offsets = element_offsets[offsets]
        # Rows whose list is null may still point at elements: make them empty.
        blob_offsets_start = blob_offsets[:-1]
        blob_offsets_end = np.where(valid, blob_offsets[1:], blob_offsets_start)
        self.counts = counts.astype(np.int64)
        self.blob_lengths = (blob_offsets_end - blob_offsets_start).astype(np.int64)
        data = element_bytes.buffers()[2]
        if valid.all():
            self.blob = pa.Array.from_buffers(
                pa.binary(), n,
                [None, pa.py_buffer(blob_offsets.astype(np.int32)), data],
            )
        else:
            starts32 = blob_offsets_start.astype(np.int32)
            lengths = self.blob_lengths
            # Gather the valid rows' byte ranges into a fresh array.
            new_offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(lengths, out=new_offsets[1:])
            src = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
            total = int(new_offsets[-1])
            if total:
                row_of_byte = np.repeat(np.arange(n), lengths)
                index = starts32[row_of_byte] + (np.arange(total) - new_offsets[:-1][row_of_byte])
                gathered = src[index]
            else:
                gathered = np.zeros(0, dtype=np.uint8)
            self.blob = pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(gathered.tobytes())]
            )


# ------------------------------------------------------------------------- encoding

@dataclass
class EncodedBatches:
    """Record batches encoded back to back at base offset 0, with their metadata."""

    data: object  # writable bytes: a bytearray (pure twin) or a pa.Buffer (compiled)
    sizes: np.ndarray  # int64, whole batch including the 12-byte prefix
    record_counts: np.ndarray  # int64
    max_timestamps: np.ndarray  # int64, as written in the header
    first_rows: np.ndarray  # int64, index of each batch's first record in the input

    def __len__(self):
        return len(self.sizes)

    @property
    def positions(self) -> np.ndarray:
        positions = np.zeros(len(self.sizes), dtype=np.int64)
        if len(self.sizes) > 1:
            np.cumsum(self.sizes[:-1], out=positions[1:])
        return positions


class RecordTooLargeError(ValueError):
    """A single record batch is larger than a limit a broker enforces."""


class _Sizes:
    """Per-record sizes that do not depend on the batch a record ends up in."""

    def __init__(self, columns: RecordColumns, headers: _EncodedHeaders):
        self.key_lengths = binary_lengths(columns.keys)
        self.value_lengths = binary_lengths(columns.values)
        self.fixed = (
            1  # attributes
            + varint_sizes(self.key_lengths) + np.maximum(self.key_lengths, 0)
            + varint_sizes(self.value_lengths) + np.maximum(self.value_lengths, 0)
            + varint_sizes(headers.counts) + headers.blob_lengths
        )


def plan_batches(fixed: np.ndarray, timestamps: np.ndarray, batch_size: int) -> np.ndarray:
    """First record index of each batch, filling batches as a producer does.

    A record joins the open batch when the batch, with the record added, stays within
    `batch_size` bytes (header included); an empty batch takes any record. Record sizes
    depend on the offset and timestamp deltas inside their batch, so each batch is
    measured exactly over a window of candidate records.
    """
    n = len(fixed)
    if batch_size <= 0:  # batching disabled: one record per batch
        return np.arange(n, dtype=np.int64)
    same_time = n == 0 or bool((timestamps == timestamps[0]).all())
    # A record is never smaller than 7 bytes, which bounds how many fit in a batch.
    most = max(1, (batch_size - V2_HEADER_SIZE) // 7 + 1)
    delta_sizes = positive_varint_sizes(np.arange(min(n, most) + 1, dtype=np.int64))
    starts = []
    i = 0
    window = 64
    limit = batch_size - V2_HEADER_SIZE
    while i < n:
        starts.append(i)
        while True:
            window = min(window, most + 1)  # more records than `most` never fit
            end = min(n, i + window)
            body = fixed[i:end] + delta_sizes[: end - i]
            if same_time:
                body += 1
            else:
                body += signed_varint_sizes(timestamps[i:end] - timestamps[i])
            body += positive_varint_sizes(body)
            cumulative = np.cumsum(body)
            fit = int(np.searchsorted(cumulative, limit, side="right"))
            if fit < end - i or end == n or window > most:
                break
            window *= 2
        take = max(1, fit)
        i += take
        # Start the next window near the size of this batch.
        window = max(16, min(window, 2 * take + 16))
    return np.asarray(starts, dtype=np.int64)


def encode_groups_python(columns: RecordColumns, groups: np.ndarray, group_count: int,
                         **options) -> list:
    """encode_groups one group at a time: the compiled encode_groups' pure twin."""
    groups = np.asarray(groups, dtype=np.int64)
    if len(groups) != len(columns):
        raise ValueError("groups must hold one group number per record")
    if len(groups) and (groups.min() < 0 or groups.max() >= group_count):
        raise ValueError("a group number is out of range")
    columns = columns.combined()
    order = np.argsort(groups, kind="stable")
    cuts = np.searchsorted(groups[order], np.arange(group_count + 1))
    return [encode_batches_python(columns, rows=order[cuts[g]:cuts[g + 1]], **options)
            if cuts[g + 1] > cuts[g] else None for g in range(group_count)]


def check_batch_sizes(sizes: np.ndarray, counts: np.ndarray, first_rows: np.ndarray,
                      max_batch_bytes: Optional[int]) -> None:
    """RecordTooLargeError for the first batch larger than `max_batch_bytes` (None: none)."""
    if max_batch_bytes is not None:
        over = np.flatnonzero(sizes > max_batch_bytes)
        if len(over):
            b = int(over[0])
            raise too_large(int(sizes[b]), int(counts[b]), int(first_rows[b]),
                            max_batch_bytes)


def batch_attributes(codec: int, timestamp_type: int, log_append_time: Optional[int]) -> int:
    """The attributes of the batches a write encodes (checking LogAppendTime's time)."""
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime batches need a log_append_time")
        return (codec & ATTR_COMPRESSION_MASK) | ATTR_TIMESTAMP_TYPE
    return codec & ATTR_COMPRESSION_MASK


def too_large(size: int, count: int, first_row: int, max_batch_bytes: int):
    return RecordTooLargeError(
        f"a record batch of {size} bytes ({count} record(s) starting at input row "
        f"{first_row}) is larger than the {max_batch_bytes}-byte limit"
    )


def encode_batches_python(columns: RecordColumns, *, codec: int = compression.NONE,
                          batch_size: int = 16384, timestamp_type: int = CREATE_TIME,
                          log_append_time: Optional[int] = None, compression_level=None,
                          max_batch_bytes: Optional[int] = None,
                          batch_starts: Optional[np.ndarray] = None,
                          rows: Optional[np.ndarray] = None) -> EncodedBatches:
    """encode_batches in Python and numpy: the compiled encoder's pure twin."""
    columns = columns.combined()
    if rows is not None:
        columns = columns.take(rows)
    n = len(columns)
    attributes = batch_attributes(codec, timestamp_type, log_append_time)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return EncodedBatches(bytearray(), empty, empty.copy(), empty.copy(), empty.copy())
    headers = columns.encoded_headers()
    sizes = _Sizes(columns, headers)
    timestamps = columns.timestamps
    if batch_starts is None:
        batch_starts = plan_batches(sizes.fixed, timestamps, batch_size)
    batch_starts = np.asarray(batch_starts, dtype=np.int64)
    counts = np.diff(np.append(batch_starts, n))
    batch_of_row = np.repeat(np.arange(len(batch_starts)), counts)
    first_row = batch_starts[batch_of_row]
    offset_deltas = np.arange(n, dtype=np.int64) - first_row
    timestamp_deltas = timestamps - timestamps[first_row]
    body = sizes.fixed + varint_sizes(timestamp_deltas) + varint_sizes(offset_deltas)

    import pyarrow.compute as pc  # the pure twin alone: a fresh worker's import costs 80 ms

    prefix = varint_concat([body, b"\x00", timestamp_deltas, offset_deltas, sizes.key_lengths])
    middle = varint_concat([sizes.value_lengths])
    if headers.blob is None:
        tail = pa.scalar(b"\x00", pa.binary())
    else:
        tail = pc.binary_join_element_wise(
            varint_concat([headers.counts]), headers.blob, b"",
            null_handling="replace", null_replacement=b"",
        )
    joined = pc.binary_join_element_wise(
        prefix, columns.keys, middle, columns.values, tail, b"",
        null_handling="replace", null_replacement=b"",
    )
    record_offsets = binary_offsets(joined)
    data_buffer = joined.buffers()[2]
    records = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")

    if timestamp_type == LOG_APPEND_TIME:
        max_timestamps = np.full(len(batch_starts), log_append_time, dtype=np.int64)
    else:
        max_timestamps = np.maximum.reduceat(timestamps, batch_starts)
    base_timestamps = timestamps[batch_starts]
    byte_starts = record_offsets[batch_starts]
    byte_ends = record_offsets[np.append(batch_starts[1:], n)]

    out = bytearray()
    batch_sizes = np.empty(len(batch_starts), dtype=np.int64)
    head_pack = V2_HEAD.pack
    tail_pack = V2_CRC_COVERED.pack
    compress = compression.compressor(codec, compression_level)
    continuing = crc32c_continuing()  # crcmod alone cannot continue: the bytes are joined
    for b, (start, end, count, base_ts, max_ts) in enumerate(zip(
            byte_starts.tolist(), byte_ends.tolist(), counts.tolist(),
            base_timestamps.tolist(), max_timestamps.tolist())):
        payload = records[start:end]
        if codec != compression.NONE:
            payload = compress(payload)
        tail_bytes = tail_pack(attributes, count - 1, base_ts, max_ts, NO_PRODUCER_ID,
                               NO_PRODUCER_EPOCH, NO_SEQUENCE, count)
        if continuing is not None:
            crc = continuing(payload, continuing(tail_bytes))
        else:
            crc = _crc32c(tail_bytes + bytes(payload))
        length = V2_LENGTH_OVERHEAD + len(payload)
        size = LOG_OVERHEAD + length
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise too_large(size, count, int(batch_starts[b]), max_batch_bytes)
        out += head_pack(0, length, NO_PARTITION_LEADER_EPOCH, V2_MAGIC_VALUE, crc)
        out += tail_bytes
        out += payload
        batch_sizes[b] = size
    return EncodedBatches(out, batch_sizes, counts.astype(np.int64), max_timestamps,
                          batch_starts)


# ------------------------------------------------------------------------ placing

# The fields a writer sets when it places an encoded batch, none of them CRC-covered.
V2_PLACEMENT_FIELDS = np.dtype([("base_offset", ">i8"), ("length", ">i4"),
                                ("leader_epoch", ">i4")])
assert V2_PLACEMENT_FIELDS.itemsize == V2_MAGIC  # the magic byte follows them
_BASE_OFFSET_BYTES = np.arange(V2_BASE_OFFSET, V2_BASE_OFFSET + 8, dtype=np.int64)
_EPOCH_BYTES = np.arange(V2_LEADER_EPOCH, V2_LEADER_EPOCH + 4, dtype=np.int64)


def placement_fields(base_offsets, sizes, partition_leader_epoch: int) -> np.ndarray:
    """baseOffset, batchLength and partitionLeaderEpoch of batches placed at `base_offsets`.

    These are each batch's first bytes and none is CRC-covered; `sizes` are whole batch
    sizes. One record per batch, of dtype V2_PLACEMENT_FIELDS.
    """
    fields = np.empty(len(sizes), dtype=V2_PLACEMENT_FIELDS)
    fields["base_offset"] = base_offsets
    fields["length"] = np.asarray(sizes, dtype=np.int64) - LOG_OVERHEAD
    fields["leader_epoch"] = partition_leader_epoch
    return fields


def patch_batch_headers(buffer, positions: np.ndarray, base_offsets: np.ndarray,
                        partition_leader_epoch: Optional[int] = None) -> None:
    """Set baseOffset (and partitionLeaderEpoch) of the batches at `positions` in place.

    Neither field is covered by the batch CRC, so the batches stay valid.
    """
    if not len(positions):
        return
    view = np.frombuffer(buffer, dtype=np.uint8)
    positions = np.asarray(positions, dtype=np.int64)
    offsets = np.asarray(base_offsets, dtype=">i8").view(np.uint8).reshape(-1, 8)
    view[positions[:, None] + _BASE_OFFSET_BYTES] = offsets
    if partition_leader_epoch is not None:
        epoch = np.frombuffer(struct.pack(">i", partition_leader_epoch), dtype=np.uint8)
        view[positions[:, None] + _EPOCH_BYTES] = epoch
