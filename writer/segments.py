"""Where batches land: segment rolls and sparse index entries, as a Kafka broker does them.

The writer appends one batch per append, as a partition leader does. Before each append
a segment rolls when (Kafka's `LogSegment.shouldRoll`)

* the segment holds data and the batch would take it past `segment.bytes`,
* the segment holds data and the batch's max timestamp is more than `segment.ms` after
  the max timestamp of the segment's first batch,
* the offset index is full (`segment.index.bytes` / 8 entries) or the time index is
  full (one slot short of `segment.index.bytes` / 12, the last slot being kept for the
  roll entry), or
* the batch's last offset would not fit the segment's 32-bit relative offsets.

Index entries follow `LogSegment.append`: when more than `index.interval.bytes` bytes
were appended since the last entry, the append gets an offset index entry (the append's
last offset, the position where it starts) and the time index gets (max timestamp so
far, last offset of the batch holding it) if that timestamp is newer than its last
entry. A closing segment gets one more time index entry for its max timestamp.
"""
from dataclasses import dataclass, field
from typing import List

import numpy as np

from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY
from ..format.layout import INT32_MAX

NO_TIMESTAMP = -1


@dataclass
class SegmentPlan:
    base_offset: int
    first_batch: int  # index into the partition's batch list
    end_batch: int = 0  # one past the last batch
    size: int = 0
    next_offset: int = 0  # one past the last offset in the segment
    index_offsets: List[int] = field(default_factory=list)  # absolute
    index_positions: List[int] = field(default_factory=list)
    time_timestamps: List[int] = field(default_factory=list)
    time_offsets: List[int] = field(default_factory=list)  # absolute

    @property
    def batch_count(self) -> int:
        return self.end_batch - self.first_batch

    def offset_index_bytes(self) -> bytes:
        if not self.index_offsets:
            return b""
        entries = np.empty(len(self.index_offsets), dtype=[("rel", ">i4"), ("pos", ">i4")])
        entries["rel"] = np.asarray(self.index_offsets, dtype=np.int64) - self.base_offset
        entries["pos"] = self.index_positions
        data = entries.tobytes()
        assert len(data) == OFFSET_ENTRY.size * len(self.index_offsets)
        return data

    def time_index_bytes(self) -> bytes:
        if not self.time_timestamps:
            return b""
        entries = np.empty(len(self.time_timestamps), dtype=[("ts", ">i8"), ("rel", ">i4")])
        entries["ts"] = self.time_timestamps
        entries["rel"] = np.asarray(self.time_offsets, dtype=np.int64) - self.base_offset
        data = entries.tobytes()
        assert len(data) == TIME_ENTRY.size * len(self.time_timestamps)
        return data


class _OpenSegment:
    def __init__(self, plan: SegmentPlan):
        self.plan = plan
        self.bytes_since_index_entry = 0
        self.rolling_timestamp = None  # max timestamp of the first batch
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = plan.base_offset

    def maybe_append_time_entry(self):
        plan = self.plan
        last = plan.time_timestamps[-1] if plan.time_timestamps else NO_TIMESTAMP
        if self.max_timestamp > last:
            plan.time_timestamps.append(self.max_timestamp)
            plan.time_offsets.append(self.offset_of_max_timestamp)


def plan_segments(start_offset: int, sizes, record_counts, max_timestamps, *,
                  segment_bytes: int, segment_ms: int, segment_index_bytes: int,
                  index_interval_bytes: int) -> List[SegmentPlan]:
    """Segments (base offsets, batch ranges, index entries) for batches appended in order.

    Offsets are contiguous from `start_offset`; `record_counts` gives each batch's
    lastOffsetDelta + 1. Returns no segment when there are no batches.
    """
    offset_index_max = segment_index_bytes // OFFSET_ENTRY.size
    time_index_max = segment_index_bytes // TIME_ENTRY.size
    segments: List[SegmentPlan] = []
    current = None
    next_offset = start_offset
    for b, (size, count, max_ts) in enumerate(zip(
            np.asarray(sizes).tolist(), np.asarray(record_counts).tolist(),
            np.asarray(max_timestamps).tolist())):
        last_offset = next_offset + count - 1
        if current is None:
            current = _OpenSegment(SegmentPlan(next_offset, b))
        else:
            plan = current.plan
            if plan.size > 0 and (
                plan.size + size > segment_bytes
                or (current.rolling_timestamp is not None and current.rolling_timestamp >= 0
                    and max_ts - current.rolling_timestamp > segment_ms)
                or len(plan.index_offsets) >= offset_index_max
                or len(plan.time_timestamps) >= time_index_max - 1
                or last_offset - plan.base_offset > INT32_MAX
            ):
                _close(current, b, next_offset)
                segments.append(plan)
                current = _OpenSegment(SegmentPlan(next_offset, b))
        plan = current.plan
        position = plan.size
        if position == 0:
            current.rolling_timestamp = max_ts
        if max_ts > current.max_timestamp:
            current.max_timestamp = max_ts
            current.offset_of_max_timestamp = last_offset
        if current.bytes_since_index_entry > index_interval_bytes:
            plan.index_offsets.append(last_offset)
            plan.index_positions.append(position)
            current.maybe_append_time_entry()
            current.bytes_since_index_entry = 0
        current.bytes_since_index_entry += size
        plan.size += size
        next_offset = last_offset + 1
    if current is not None:
        _close(current, len(np.asarray(sizes)), next_offset)
        segments.append(current.plan)
    return segments


def _close(segment: _OpenSegment, end_batch: int, next_offset: int) -> None:
    segment.plan.end_batch = end_batch
    segment.plan.next_offset = next_offset
    segment.maybe_append_time_entry()
