"""`segmentlog verify`: every entry and index of a log checked, each finding located.

A finding is damage (the exit status says so), a torn tail (the last segment of a live or
crashed broker ends inside an entry, or in preallocated zeros: Kafka's recovery
truncates it, nothing is lost that was acknowledged) or a note.
"""
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional

from ..errors import CorruptLogError
from ..format import PartitionLog, Segment
from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY, parse_transaction_index
from ..format.log import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .entries import LogEntry, LogStop, walk_log
from .files import offset_index_entries, time_index_entries

DAMAGE, TORN_TAIL, NOTE = "damage", "torn tail", "note"


@dataclass
class Finding:
    kind: str  # DAMAGE, TORN_TAIL or NOTE
    file: str
    position: Optional[int]
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def read_segment_file(segment: Segment, suffix: str) -> Optional[bytes]:
    """An index file's bytes, None when the segment has none (a tiered segment's index
    may be a slice of a packed object)."""
    if segment.locations is not None:
        located = segment.locations.get(suffix)
        if located is None:
            return None
        path, position, length = located
        return segment.store.read_bytes(path, position, length) if length else b""
    path = {INDEX_SUFFIX: segment.index_path, TIME_INDEX_SUFFIX: segment.time_index_path,
            TXN_INDEX_SUFFIX: segment.txn_index_path}[suffix]
    return segment.store.read_optional(path)


class PartitionCheck:
    """The checks of one partition, segment by segment; `advance(n)` is told of every
    n bytes of entries read (for a progress bar)."""

    def __init__(self, log: PartitionLog, advance: Callable[[int], None] = lambda n: None):
        self.log = log
        self.advance = advance
        self.findings: List[Finding] = []
        self.next_offset: Optional[int] = None  # one past the previous entry's offsets

    def damage(self, file, position, message):
        self.findings.append(Finding(DAMAGE, file, position, message))

    def run(self) -> List[Finding]:
        segments = self.log.segments
        for number, segment in enumerate(segments):
            following = segments[number + 1].base_offset if number + 1 < len(segments) else None
            entries = self.check_log(segment, following)
            self.check_offset_index(segment, entries)
            self.check_time_index(segment, entries)
        self.check_transaction_indexes()
        return self.findings

    def check_log(self, segment: Segment, following: Optional[int]) -> List[LogEntry]:
        path = segment.log_path
        is_last = self.log.is_last(segment)
        entries: List[LogEntry] = []
        lowest = segment.base_offset if self.next_offset is None else \
            max(segment.base_offset, self.next_offset)
        with segment.store.reader(path, segment.size, segment.log_chunks) as reader:
            for item in walk_log(reader, path, segment.size):
                if isinstance(item, LogStop):
                    self.advance(item.remaining)
                    if is_last and item.kind in ("torn", "zero-filled"):
                        self.findings.append(Finding(TORN_TAIL, path, item.position, item.reason))
                    elif item.kind == "torn":
                        self.damage(path, item.position,
                                    f"{item.reason}, and this is not the last segment: the "
                                    f"segment was truncated")
                    else:
                        self.damage(path, item.position, item.reason +
                                    ("" if is_last else "; this is not the last segment"))
                    break
                header = item.header
                self.advance(header.size)
                entries.append(item)
                if not item.crc_valid:
                    self.damage(path, header.position,
                                f"checksum mismatch in the entry at offset {header.base_offset}: "
                                f"stored {header.crc:#010x}, computed {item.computed_crc:#010x}")
                    lowest = max(lowest, header.last_offset + 1)
                    continue
                first = header.base_offset
                try:
                    records = item.records(path)
                    if item.legacy_wrapper and records:
                        first = records[0].offset
                except CorruptLogError as damage:
                    self.damage(path, header.position, damage.reason)
                if first < lowest:
                    self.damage(path, header.position,
                                f"entry offsets {first}..{header.last_offset} do not increase: "
                                f"the offsets had reached {lowest}")
                if following is not None and header.last_offset >= following:
                    self.damage(path, header.position,
                                f"entry offsets {first}..{header.last_offset} run into the next "
                                f"segment, which starts at offset {following}")
                lowest = max(lowest, header.last_offset + 1)
        if segment.size == 0 and not is_last:
            self.findings.append(Finding(NOTE, path, 0, "empty segment"))
        self.next_offset = lowest
        return entries

    def check_offset_index(self, segment: Segment, entries: List[LogEntry]) -> None:
        data = read_segment_file(segment, INDEX_SUFFIX)
        if data is None:
            return
        path = segment.index_path
        self._whole_entries(path, data, OFFSET_ENTRY.size)
        by_position: Dict[int, int] = {e.header.position: n for n, e in enumerate(entries)}
        data_end = entries[-1].header.end_position if entries else 0
        previous = None
        for entry in self._real_entries(segment, path, offset_index_entries(data, segment.base_offset)):
            where = entry["index_position"]
            offset, position = entry["offset"], entry["position"]
            described = f"offset index entry (offset {offset}, position {position})"
            if previous is not None and (offset <= previous["offset"]
                                         or position <= previous["position"]):
                self.damage(path, where, f"{described} is not above the entry before it "
                                         f"(offset {previous['offset']}, position "
                                         f"{previous['position']})")
            elif position >= data_end:
                self.damage(path, where, f"{described} points past the end of the log's "
                                         f"entries (byte {data_end} of {segment.log_path})")
            elif position not in by_position:
                self.damage(path, where, f"{described} is not on an entry boundary of "
                                         f"{segment.log_path}")
            else:
                number = by_position[position]
                at = entries[number].header
                before = entries[number - 1].header if number else None
                if at.base_offset > offset and not entries[number].legacy_wrapper:
                    self.damage(path, where, f"{described}: the entry there starts at offset "
                                             f"{at.base_offset}, past the indexed offset")
                elif before is not None and before.last_offset >= offset:
                    self.damage(path, where, f"{described}: the entry before that position "
                                             f"reaches offset {before.last_offset}")
            previous = entry

    def check_time_index(self, segment: Segment, entries: List[LogEntry]) -> None:
        data = read_segment_file(segment, TIME_INDEX_SUFFIX)
        if data is None:
            return
        path = segment.time_index_path
        self._whole_entries(path, data, TIME_ENTRY.size)
        last_offset = entries[-1].header.last_offset if entries else None
        last_offsets = {e.header.last_offset for e in entries}
        previous = None
        real = self._real_entries(segment, path, time_index_entries(data, segment.base_offset))
        for entry in real:
            where = entry["index_position"]
            timestamp, offset = entry["timestamp"], entry["offset"]
            described = f"time index entry (timestamp {timestamp}, offset {offset})"
            if previous is not None and timestamp <= previous["timestamp"]:
                self.damage(path, where, f"{described} goes back in time: the entry before it "
                                         f"has timestamp {previous['timestamp']}")
            elif previous is not None and offset < previous["offset"]:
                self.damage(path, where, f"{described} goes back in offsets: the entry before "
                                         f"it has offset {previous['offset']}")
            elif last_offset is None or offset > last_offset:
                self.damage(path, where, f"{described} points past the segment's last offset "
                                         f"({last_offset})")
            else:
                # Kafka's entry: the latest timestamp so far, at the last offset of the
                # entry that holds it.
                reached = max((e.header.max_timestamp for e in entries
                               if e.header.last_offset <= offset), default=None)
                if offset not in last_offsets:
                    self.damage(path, where, f"{described}: no entry of {segment.log_path} "
                                             f"ends at that offset")
                elif timestamp != reached:
                    self.damage(path, where, f"{described}: the latest timestamp of the "
                                             f"entries up to that offset is {reached}")
            previous = entry
        latest = max((e.header.max_timestamp for e in entries), default=None)
        if real and not self.log.is_last(segment) and real[-1]["timestamp"] != latest:
            # Kafka adds the segment's latest timestamp when it rolls the segment.
            self.findings.append(Finding(
                NOTE, path, real[-1]["index_position"],
                f"the last time index entry of a rolled segment has timestamp "
                f"{real[-1]['timestamp']}, not the segment's latest, {latest}"))

    def check_transaction_indexes(self) -> None:
        end_offset = self.next_offset if self.next_offset is not None else self.log.start_offset
        for segment in self.log.segments:
            data = read_segment_file(segment, TXN_INDEX_SUFFIX)
            if data is None:
                continue
            try:
                aborted = parse_transaction_index(data, segment.txn_index_path)
                for txn in aborted:
                    self.log.check_abort_marker(txn, end_offset)
            except CorruptLogError as damage:
                self.damage(damage.path, damage.position, damage.reason)

    def _whole_entries(self, path, data: bytes, size: int) -> None:
        if len(data) % size:
            self.damage(path, len(data) - len(data) % size,
                        f"index size {len(data)} is not a multiple of its {size}-byte entries")

    def _real_entries(self, segment: Segment, path, raw: List[dict]) -> List[dict]:
        """The entries before the zero padding; padding anywhere but at the end is damage,
        and in a rolled segment (whose index Kafka trims) a note."""
        real = []
        for number, entry in enumerate(raw):
            if entry["zero"]:
                after = [e for e in raw[number:] if not e["zero"]]
                if after:
                    self.damage(path, after[0]["index_position"],
                                "index entry after the zero padding of a preallocated index")
                elif not self.log.is_last(segment):
                    self.findings.append(Finding(
                        NOTE, path, entry["index_position"],
                        f"untrimmed index of a rolled segment: {len(raw) - number} zero entries"))
                break
            real.append(entry)
        return real


def verify_partition(log: PartitionLog, advance: Callable[[int], None] = lambda n: None
                     ) -> List[Finding]:
    check = PartitionCheck(log, advance)
    try:
        check.run()
    except CorruptLogError as damage:  # what the format layer refuses to read further
        check.damage(damage.path, damage.position, damage.reason)
    return check.findings
