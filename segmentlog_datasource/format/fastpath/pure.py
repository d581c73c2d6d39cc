"""The pure-Python accumulator: decoded records collected into Arrow record batches.

Its decode_run() is the compiled twin's in Python: it walks the same plain batches and
stops at the same positions with the same states and rows, so scan_segment drives both
accumulators alike.
"""
import os
import struct

import numpy as np
import pyarrow as pa

from ...errors import CorruptLogError
from ..arrow import finish_batch, micros_from_millis
from ..entries import BatchHeader
from ..layout import (
    ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_TRANSACTIONAL, LOG_OVERHEAD, MAX_OFFSET,
    V2_CRC_START, V2_HEAD, V2_HEADER, V2_HEADER_SIZE, V2_LAST_OFFSET_DELTA, V2_MAGIC,
    V2_RECORD_COUNT,
)
from ..v2 import decode_v2_records
from .protocol import (
    ENTRY_FIELDS, NO_COORDINATOR_EPOCH, NOT_CONTROL, RUN_DONE, RUN_END, RUN_ENTRY_FOR_PYTHON,
    RUN_FLUSH,
)

_MIN_V2_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD

run_hook = None  # tests: called with the position after each batch decode_run decodes


class RecordAccumulator:
    """Collects decoded records (pure-Python path) until a batch is taken."""

    def __init__(self, include_headers: bool):
        self.include_headers = include_headers
        # The lowest base offset the next entry may have (see decode_run); kept by take().
        self.next_offset = -(1 << 63)
        # After track_batches(): entries of the rows' batch metadata (fastpath/protocol.py)
        self.tracks_batches = False
        self.stops_at_control = False
        self.batch_entries = []
        self._reset()

    def _reset(self):
        self.offsets = []
        self.timestamps = []
        self.timestamp_types = []
        self.keys = []
        self.values = []
        self.headers = []
        self.payload_bytes = 0
        self.noted_rows = 0

    def _rewind(self, rows: int, payload_bytes: int):
        for column in (self.offsets, self.timestamps, self.timestamp_types, self.keys,
                       self.values, self.headers):
            del column[rows:]
        self.payload_bytes = payload_bytes

    def add(self, offset, timestamp, timestamp_type, key, value, headers):
        self.offsets.append(offset)
        self.timestamps.append(timestamp)
        self.timestamp_types.append(timestamp_type)
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.payload_bytes += (len(key) if key else 0) + (len(value) if value else 0)

    def __len__(self):
        return len(self.offsets)

    def track_batches(self, include_control_records):
        """From now on note the metadata of the rows' batches (take_batch_entries); with
        include_control_records, decode_run leaves control batches to the scan loop."""
        self.tracks_batches = True
        self.stops_at_control = bool(include_control_records)

    def note_batch(self, base_offset, producer_id, producer_epoch, base_sequence,
                   leader_epoch, attributes, magic, position, control_type, coordinator_epoch):
        """The rows added since the last entry share this metadata: one entry for them."""
        rows = len(self.offsets)
        if rows > self.noted_rows:
            self.batch_entries.append((rows, base_offset, producer_id, producer_epoch,
                                       base_sequence, leader_epoch, attributes, magic,
                                       position, control_type, coordinator_epoch))
            self.noted_rows = rows

    def take_batch_entries(self) -> np.ndarray:
        """The entries noted since the last take, one int64 row each: take them with the
        rows (take()) they cover."""
        entries = np.array(self.batch_entries, dtype=np.int64).reshape(-1, ENTRY_FIELDS)
        self.batch_entries = []
        return entries

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        batch = finish_batch(
            topic, partition, self.offsets,
            micros_from_millis(self.timestamps, len(self.offsets)), self.timestamp_types,
            self.keys, self.values, self.headers, self.include_headers,
        )
        self._reset()
        return batch

    def add_v2_batch(self, data, count, header, min_offset, end_offset, path=None) -> int:
        return decode_v2_records(data, count, header, self, min_offset, end_offset, path)

    def decode_run(self, view, position, end_position, size, crc32c, min_offset, end_offset,
                   max_rows, max_bytes, transactions):
        """Walk plain batches of `view` from `position`: (position reached, state).

        What the compiled DecodedColumns.decode_run does (its docstring has the states),
        stop for stop: the entries it leaves to the scan loop are left here too.
        """
        size = min(size, len(view))
        end_position = min(end_position, size)
        offsets = self.offsets
        while position < end_position:
            remaining = size - position
            if remaining < V2_HEADER_SIZE or view[position + V2_MAGIC] != 2:
                return position, RUN_ENTRY_FOR_PYTHON
            (base_offset, length, leader_epoch, _, stored_crc, attributes, last_delta,
             base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
             count) = V2_HEADER.unpack_from(view, position)
            last_offset = base_offset + last_delta
            # Errors and torn tails go to the loop, which reports or allows them; so do
            # offsets at the int64 edge, which the compiled twin cannot represent.
            if length < _MIN_V2_LENGTH or LOG_OVERHEAD + length > remaining or \
                    last_delta < 0 or count < 0 or last_offset >= MAX_OFFSET:
                return position, RUN_ENTRY_FOR_PYTHON
            if base_offset < self.next_offset:
                return position, RUN_ENTRY_FOR_PYTHON  # backwards: the loop reports it
            entry_size = LOG_OVERHEAD + length
            skip = last_offset < min_offset
            done = not skip and base_offset >= end_offset
            for_python = attributes & ATTR_COMPRESSION_MASK or (
                transactions and attributes & ATTR_TRANSACTIONAL and
                not attributes & ATTR_CONTROL) or (
                self.stops_at_control and attributes & ATTR_CONTROL)
            # Skipping or stopping decides from the header's offsets, so the header is
            # verified first; entries left to the loop are verified there, once.
            if crc32c is not None and (skip or done or not for_python) and \
                    crc32c(view[position + V2_CRC_START : position + entry_size]) != stored_crc:
                return position, RUN_ENTRY_FOR_PYTHON
            if skip:
                self.next_offset = last_offset + 1
                position += entry_size
                continue
            if done:
                return position, RUN_DONE
            if for_python:
                return position, RUN_ENTRY_FOR_PYTHON
            if attributes & ATTR_CONTROL or not count:
                self.next_offset = last_offset + 1
                position += entry_size
                continue
            header = BatchHeader(position, base_offset, last_offset, entry_size, 2, attributes,
                                 stored_crc, leader_epoch, max_timestamp, base_timestamp,
                                 producer_id, producer_epoch, base_sequence, count)
            rows, payload_bytes = len(offsets), self.payload_bytes
            try:
                decode_v2_records(view[position + V2_HEADER_SIZE : position + entry_size],
                                  count, header, self, min_offset, end_offset)
            except CorruptLogError:
                # As the compiled twin: no rows of a malformed batch; add_v2_batch, called
                # by the loop, raises the error with the segment's path.
                self._rewind(rows, payload_bytes)
                return position, RUN_ENTRY_FOR_PYTHON
            if self.tracks_batches:
                self.note_batch(base_offset, producer_id, producer_epoch, base_sequence,
                                leader_epoch, attributes, 2, position, NOT_CONTROL,
                                NO_COORDINATOR_EPOCH)
            self.next_offset = last_offset + 1
            position += entry_size
            if run_hook is not None:
                run_hook(position)
            state = 0
            if len(offsets) >= max_rows or self.payload_bytes >= max_bytes:
                state |= RUN_FLUSH
            if last_offset >= end_offset - 1:
                state |= RUN_DONE
            if state:
                return position, state
        return position, RUN_END


_ROW = struct.Struct("=qqq")
_INT32 = struct.Struct(">i")


def v2_batch_headers(source, position: int, end: int, next_offset: int):
    """The compiled v2_batch_headers in Python: (stop, last, rows), rows packed as native
    int64 triples (base offset, last offset, CRC) of the whole magic-2 batches of `source`
    (a buffer, or an open file's descriptor) from `position` with offsets in order from
    `next_offset`, stopping at `end` or at the first entry it does not take; last is
    where the last batch walked starts (-1: none)."""
    if isinstance(source, int):
        def header(at):
            head = os.pread(source, V2_HEADER_SIZE, at)
            return head if len(head) == V2_HEADER_SIZE else None
    else:
        view = memoryview(source)
        end = min(end, len(view))

        def header(at):
            return view[at:at + V2_HEADER_SIZE]
    rows = bytearray()
    last_start = -1
    while 0 <= position and position + V2_HEADER_SIZE <= end:
        head = header(position)
        if head is None:
            break
        base, length, _, magic, crc = V2_HEAD.unpack_from(head, 0)
        if magic != 2 or length < _MIN_V2_LENGTH or position + LOG_OVERHEAD + length > end:
            break
        last_delta = _INT32.unpack_from(head, V2_LAST_OFFSET_DELTA)[0]
        count = _INT32.unpack_from(head, V2_RECORD_COUNT)[0]
        if last_delta < 0 or count < 0 or base < next_offset or \
                base + last_delta >= MAX_OFFSET:
            break
        rows += _ROW.pack(base, base + last_delta, crc)
        next_offset = base + last_delta + 1
        last_start = position
        position += LOG_OVERHEAD + length
    return position, last_start, bytes(rows)
