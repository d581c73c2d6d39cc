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


def plan_segments(start_offset: int, sizes, record_counts, max_timestamps, *,
                  segment_bytes: int, segment_ms: int, segment_index_bytes: int,
                  index_interval_bytes: int, roll_before=()) -> List[SegmentPlan]:
    """Segments (base offsets, batch ranges, index entries) for batches appended in order.

    Offsets are contiguous from `start_offset`; `record_counts` gives each batch's
    lastOffsetDelta + 1. A segment also rolls before each batch index in `roll_before`.
    Returns no segment when there are no batches. Worked out with array operations a
    segment at a time (and an index entry at a time where batches are smaller than
    index.interval.bytes), rather than a batch at a time.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(record_counts, dtype=np.int64)
    max_ts = np.asarray(max_timestamps, dtype=np.int64)
    n = len(sizes)
    if n == 0:
        return []
    ends = np.empty(n + 1, dtype=np.int64)  # ends[b]: bytes of the batches before b
    ends[0] = 0
    np.cumsum(sizes, out=ends[1:])
    last_offsets = np.cumsum(counts) + (start_offset - 1)
    offset_index_max = segment_index_bytes // OFFSET_ENTRY.size
    time_index_room = segment_index_bytes // TIME_ENTRY.size - 1  # one slot kept for the roll
    rolls = np.unique(np.asarray(roll_before, dtype=np.int64))
    segments: List[SegmentPlan] = []
    first = 0
    while first < n:
        following = rolls[np.searchsorted(rolls, first, side="right"):]
        limit = int(following[0]) if len(following) else n
        plan = _plan_one(first, min(limit, n),
                         start_offset if first == 0 else int(last_offsets[first - 1]) + 1,
                         sizes, ends, last_offsets, max_ts, segment_bytes, segment_ms,
                         offset_index_max, time_index_room, index_interval_bytes)
        segments.append(plan)
        first = plan.end_batch
    return segments


def _plan_one(first, n, base, sizes, ends, last_offsets, max_ts, segment_bytes, segment_ms,
              offset_index_max, time_index_room, index_interval_bytes) -> SegmentPlan:
    """The segment that starts with batch `first` and ends by batch `n`: where it rolls
    and its index entries."""
    # The batch that rolls it, as far as sizes, timestamps and offsets tell (a segment
    # holding data always takes its first batch).
    end = int(np.searchsorted(ends, ends[first] + segment_bytes, side="right")) - 1
    end = min(max(end, first + 1), n)
    rolling = int(max_ts[first])
    if rolling >= 0 and end > first + 1:
        late = np.flatnonzero(max_ts[first + 1:end] - rolling > segment_ms)
        if len(late):
            end = first + 1 + int(late[0])
    too_far = int(np.searchsorted(last_offsets, base + INT32_MAX, side="right"))
    end = min(end, max(too_far, first + 1))
    if offset_index_max <= 0 or time_index_room <= 0:
        end = first + 1  # no room for an entry: every batch after the first rolls
    entries = _index_entries(first, end, sizes, ends, index_interval_bytes)
    # Running max timestamp and the last offset of the batch that first reached it.
    running = np.maximum.accumulate(np.maximum(max_ts[first:end], NO_TIMESTAMP))
    rises = np.flatnonzero(np.diff(running, prepend=NO_TIMESTAMP) > 0)
    stamps = running[entries - first]
    appended = stamps > np.concatenate(([NO_TIMESTAMP], stamps[:-1]))
    # A full index rolls the segment before the batch after the entry that fills it.
    time_entries = np.flatnonzero(appended)
    cut = end
    if 0 < offset_index_max <= len(entries):
        cut = min(cut, int(entries[offset_index_max - 1]) + 1)
    if 0 < time_index_room <= len(time_entries):
        cut = min(cut, int(entries[time_entries[time_index_room - 1]]) + 1)
    if cut < end:
        end = cut
        keep = entries < end
        entries, appended = entries[keep], appended[keep]
        running = running[: end - first]
        rises = rises[rises < end - first]
        stamps = stamps[keep]
    plan = SegmentPlan(base, first, end, int(ends[end] - ends[first]),
                       int(last_offsets[end - 1]) + 1)
    plan.index_offsets = last_offsets[entries].tolist()
    plan.index_positions = (ends[entries] - ends[first]).tolist()
    if len(rises):
        # the batch each entry's max timestamp came from
        holders = rises[np.searchsorted(rises, entries - first, side="right") - 1] + first
        plan.time_timestamps = stamps[appended].tolist()
        plan.time_offsets = last_offsets[holders[appended]].tolist()
        top = int(running[-1])
        if top > (plan.time_timestamps[-1] if plan.time_timestamps else NO_TIMESTAMP):
            plan.time_timestamps.append(top)
            plan.time_offsets.append(int(last_offsets[rises[-1] + first]))
    return plan


def _index_entries(first, end, sizes, ends, interval) -> np.ndarray:
    """The batches of [first, end) that get an offset index entry: each one before which
    more than `interval` bytes were appended since the last entry (or the segment start).

    A batch larger than `interval` puts the entry on the next batch, so runs of them are
    taken at once; only from a smaller batch is the next entry searched for."""
    small = np.flatnonzero(sizes[first:end] <= interval) + first
    runs = []
    at = first  # the segment start or the latest entry
    while True:
        k = int(np.searchsorted(small, at))
        if k == len(small):  # large batches from `at` on: each next one gets an entry
            runs.append(np.arange(at + 1, end, dtype=np.int64))
            break
        stop = int(small[k])
        runs.append(np.arange(at + 1, stop + 1, dtype=np.int64))
        at = int(np.searchsorted(ends, ends[stop] + interval, side="right"))
        if at >= end:
            break
        runs.append(np.array([at], dtype=np.int64))
    return np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
