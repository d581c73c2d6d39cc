"""Readers for the three per-segment index files, as Kafka writes and reads them.

Offset index: 8-byte entries (int32 offset relative to the segment's base offset,
int32 file position); each entry is (last offset of an append, position where that
append starts). Time index: 12-byte entries (int64 timestamp, int32 relative offset);
each entry is (max timestamp so far in the segment, last offset of the batch holding it).
Transaction index: 34-byte entries of aborted transactions.

An active segment's offset and time indexes are preallocated and zero-filled past their
real entries; the real entries are the strictly increasing prefix, and everything after
it must be zeros.
"""
import bisect
import os
import struct
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ..errors import CorruptLogError

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
TXN_ENTRY = struct.Struct(">hqqqq")


def _read_file(path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _check_zero_tail(path, data, start, entry_size):
    tail = memoryview(data)[start:]
    if tail.nbytes and any(tail.tobytes()):
        # Name the first entry past the real ones that is not zero padding.
        for pos in range(start, len(data), entry_size):
            if any(data[pos : pos + entry_size]):
                raise CorruptLogError(
                    path, pos, "index entry is not in increasing order after the real entries"
                )


def _whole_entries(path, data, entry_size) -> int:
    # Kafka sizes index files (preallocated ones too) in whole entries.
    if len(data) % entry_size:
        raise CorruptLogError(
            path, len(data) - len(data) % entry_size,
            f"index size {len(data)} is not a multiple of its {entry_size}-byte entries",
        )
    return len(data)


class OffsetIndex:
    """Sparse offset -> file position map of one segment."""

    __slots__ = ("path", "base_offset", "offsets", "positions")

    def __init__(self, path, base_offset: int, offsets: List[int], positions: List[int]):
        self.path = path
        self.base_offset = base_offset
        self.offsets = offsets  # absolute offsets, strictly increasing
        self.positions = positions  # strictly increasing

    @classmethod
    def empty(cls, base_offset: int, path=None) -> "OffsetIndex":
        return cls(path, base_offset, [], [])

    @classmethod
    def load(cls, path, base_offset: int, log_size: Optional[int] = None,
             growing: bool = False) -> "OffsetIndex":
        if not os.path.exists(path):
            return cls.empty(base_offset, path)
        return cls.parse(_read_file(path), base_offset, path=path, log_size=log_size,
                         growing=growing)

    @classmethod
    def parse(cls, data: bytes, base_offset: int, path=None, log_size=None,
              growing: bool = False) -> "OffsetIndex":
        """`growing`: the index of an active segment whose log was sized before the index
        was read; entries for data appended since (at or past `log_size`) are left out."""
        size = _whole_entries(path, data, OFFSET_ENTRY.size)
        offsets, positions = [], []
        last_rel, last_pos = -1, -1
        end = size
        for pos in range(0, size, OFFSET_ENTRY.size):
            rel, file_pos = OFFSET_ENTRY.unpack_from(data, pos)
            if rel == 0 and file_pos == 0:
                end = pos  # preallocated zero tail of an active segment
                break
            if rel < 0 or rel <= last_rel or file_pos <= last_pos:
                raise CorruptLogError(
                    path, pos, f"offset index entry ({rel}, {file_pos}) is not in increasing order"
                )
            if log_size is not None and file_pos >= log_size:
                if growing:
                    return cls(path, base_offset, offsets, positions)
                raise CorruptLogError(
                    path, pos, f"offset index entry points at position {file_pos}, "
                    f"past the end of its {log_size}-byte log",
                )
            offsets.append(base_offset + rel)
            positions.append(file_pos)
            last_rel, last_pos = rel, file_pos
        _check_zero_tail(path, data[:size], end, OFFSET_ENTRY.size)
        return cls(path, base_offset, offsets, positions)

    def __len__(self):
        return len(self.offsets)

    def entries(self) -> List[Tuple[int, int]]:
        return list(zip(self.offsets, self.positions))

    def lookup(self, target_offset: int) -> Tuple[int, int]:
        """(offset, position) of the last entry with offset <= target, as Kafka's lookup.

        The batches before that position all end below the entry's offset, so a scan
        for `target_offset` may start there. Without such an entry: (base offset, 0).
        """
        i = bisect.bisect_right(self.offsets, target_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    def position_after(self, target_offset: int) -> Optional[int]:
        """A position from which every batch starts above `target_offset`, or None.

        An entry's append may hold batches below its offset, so the bound is the
        position of the entry after the first entry whose offset reaches the target.
        """
        i = bisect.bisect_left(self.offsets, target_offset)
        if i + 1 < len(self.positions):
            return self.positions[i + 1]
        return None


class TimeIndex:
    """Sparse max-timestamp-so-far -> offset map of one segment."""

    __slots__ = ("path", "base_offset", "timestamps", "offsets")

    def __init__(self, path, base_offset: int, timestamps: List[int], offsets: List[int]):
        self.path = path
        self.base_offset = base_offset
        self.timestamps = timestamps  # strictly increasing
        self.offsets = offsets  # absolute, non-decreasing

    @classmethod
    def empty(cls, base_offset: int, path=None) -> "TimeIndex":
        return cls(path, base_offset, [], [])

    @classmethod
    def load(cls, path, base_offset: int) -> "TimeIndex":
        if not os.path.exists(path):
            return cls.empty(base_offset, path)
        return cls.parse(_read_file(path), base_offset, path=path)

    @classmethod
    def parse(cls, data: bytes, base_offset: int, path=None) -> "TimeIndex":
        size = _whole_entries(path, data, TIME_ENTRY.size)
        timestamps, offsets = [], []
        end = size
        for pos in range(0, size, TIME_ENTRY.size):
            ts, rel = TIME_ENTRY.unpack_from(data, pos)
            if ts == 0 and rel == 0:
                end = pos  # preallocated zero tail of an active segment
                break
            if rel < 0 or (timestamps and (ts <= timestamps[-1] or base_offset + rel < offsets[-1])):
                raise CorruptLogError(
                    path, pos, f"time index entry ({ts}, {rel}) is not in increasing order"
                )
            timestamps.append(ts)
            offsets.append(base_offset + rel)
        _check_zero_tail(path, data[:size], end, TIME_ENTRY.size)
        return cls(path, base_offset, timestamps, offsets)

    def __len__(self):
        return len(self.timestamps)

    def entries(self) -> List[Tuple[int, int]]:
        return list(zip(self.timestamps, self.offsets))

    @property
    def max_timestamp(self) -> Optional[int]:
        return self.timestamps[-1] if self.timestamps else None

    def lookup(self, target_timestamp: int) -> Tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, as Kafka's lookup.

        Without such an entry: (-1, base offset).
        """
        i = bisect.bisect_right(self.timestamps, target_timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.timestamps[i], self.offsets[i]

    def offset_below(self, min_timestamp: int) -> Optional[int]:
        """The largest offset up to which every record is older than `min_timestamp`.

        Entry timestamps are maxima of everything up to the entry's offset, so every
        record at or below the offset of the last entry older than the bound is older.
        None when no entry proves anything.
        """
        i = bisect.bisect_left(self.timestamps, min_timestamp) - 1
        if i < 0:
            return None
        return self.offsets[i]


@dataclass(frozen=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # of the transaction's ABORT marker
    last_stable_offset: int
    version: int = 0
    # where the entry was read from: the .txnindex file and byte
    path: Optional[str] = field(default=None, compare=False)
    position: Optional[int] = field(default=None, compare=False)


def read_transaction_index(path) -> List[AbortedTransaction]:
    if not os.path.exists(path):
        return []
    return parse_transaction_index(_read_file(path), path)


def parse_transaction_index(data: bytes, path=None) -> List[AbortedTransaction]:
    if len(data) % TXN_ENTRY.size:
        raise CorruptLogError(
            path, len(data) - len(data) % TXN_ENTRY.size,
            f"transaction index size {len(data)} is not a multiple of {TXN_ENTRY.size}",
        )
    entries = []
    for pos in range(0, len(data), TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        if version != 0:
            raise CorruptLogError(path, pos, f"unknown aborted transaction entry version {version}")
        if last < first:
            raise CorruptLogError(
                path, pos, f"aborted transaction ends at {last} before it begins at {first}"
            )
        entries.append(AbortedTransaction(pid, first, last, lso, version, path, pos))
    return entries
