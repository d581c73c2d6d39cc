"""Planning a read: topic-partitions, offset ranges and constraints into fragments.

Free of Spark. Fragments (read.fragments) are cut at offset index entries to about
maxPartitionBytes / maxRecordsPerPartition, then packed into groups, one per task.
"""
import bisect
import math
from dataclasses import dataclass, replace
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from ..errors import SegmentLogError
from ..format.layout import MAX_OFFSET
from ..format.log import PartitionLog, Segment
from ..format.scan import TransactionFilter
from .fragments import Fragment
from .options import EARLIEST, EXCLUDE_INTERNAL_OPTION, LATEST, OffsetSpec, ReadOptions
from .replicas import check_replicas, consumer_partitions, read_bound

# What opening one more fragment costs, in bytes of reading, when packing small ones into
# one Spark partition (Spark's file sources count spark.sql.files.openCostInBytes alike).
FRAGMENT_OPEN_COST_BYTES = 4 << 20


@dataclass
class Constraints:
    """What pushed filters demand, all applied exactly by the scan."""

    topics: Optional[FrozenSet[str]] = None
    partitions: Optional[FrozenSet[int]] = None
    offset_low: int = 0  # inclusive
    offset_high: int = MAX_OFFSET  # exclusive
    offset_values: Optional[FrozenSet[int]] = None
    timestamp_low_us: Optional[int] = None  # inclusive, microseconds since epoch
    timestamp_high_us: Optional[int] = None  # exclusive

    def restrict_topics(self, values):
        values = frozenset(values)
        self.topics = values if self.topics is None else self.topics & values

    def restrict_partitions(self, values):
        values = frozenset(values)
        self.partitions = values if self.partitions is None else self.partitions & values

    def restrict_offsets(self, low=None, high=None, values=None):
        if low is not None:
            self.offset_low = max(self.offset_low, low)
        if high is not None:
            self.offset_high = min(self.offset_high, high)
        if values is not None:
            values = frozenset(values)
            self.offset_values = values if self.offset_values is None else self.offset_values & values

    def restrict_timestamps(self, low_us=None, high_us=None):
        if low_us is not None:
            self.timestamp_low_us = low_us if self.timestamp_low_us is None else max(
                self.timestamp_low_us, low_us)
        if high_us is not None:
            self.timestamp_high_us = high_us if self.timestamp_high_us is None else min(
                self.timestamp_high_us, high_us)

    @property
    def timestamp_low_ms(self) -> Optional[int]:
        if self.timestamp_low_us is None:
            return None
        return -((-self.timestamp_low_us) // 1000)  # ceiling: records are whole ms


def select_partitions(read: ReadOptions, constraints: Constraints) -> List[PartitionLog]:
    logs = consumer_partitions(read.paths, read.store)
    if not logs:
        raise SegmentLogError(
            "no <topic>-<partition> directories found under " + ", ".join(read.paths))
    chosen = [log for log in logs if read.selection.matches(log.topic, log.partition)]
    internal = sorted({log.topic for log in logs if read.selection.passes_over(log.topic)})
    if internal and not chosen:
        raise SegmentLogError(
            "the topics selected under " + ", ".join(read.paths) + " are Kafka's internal "
            "topics (" + ", ".join(internal) + "), which are read only when named: "
            "subscribe to them (option 'subscribe' or 'assign'), or set "
            f"{EXCLUDE_INTERNAL_OPTION}=false")
    if read.selection.assigned is not None:
        present = {log.topic_partition for log in logs}
        missing = [tp for tp in read.selection.assigned if tp not in present]
        if missing:
            raise SegmentLogError(
                "option 'assign': no directory for " + ", ".join(f"{t}-{p}" for t, p in missing)
                + " under " + ", ".join(read.paths))
    if read.selection.topics is not None:
        present_topics = {log.topic for log in logs}
        missing = [t for t in read.selection.topics if t not in present_topics]
        if missing:
            held = sorted(present_topics)
            raise SegmentLogError(
                f"{read.selection.chosen_by}: no partition directories for topic(s) "
                + ", ".join(repr(t) for t in missing) + " under " + ", ".join(read.paths)
                + " (its topics: " + ", ".join(held[:10]) + (", ..." if len(held) > 10 else "")
                + ")")
    return [
        log for log in chosen
        if (constraints.topics is None or log.topic in constraints.topics)
        and (constraints.partitions is None or log.partition in constraints.partitions)
    ]


def _specific_offsets(spec: OffsetSpec, option: str, logs: List[PartitionLog]) -> Dict:
    wanted = set(spec.offsets)
    present = {log.topic_partition for log in logs}
    missing = sorted(present - wanted)
    extra = sorted(wanted - present)
    if missing or extra:
        parts = []
        if missing:
            parts.append("no value for " + ", ".join(f"{t}-{p}" for t, p in missing))
        if extra:
            parts.append("no such partition: " + ", ".join(f"{t}-{p}" for t, p in extra))
        raise SegmentLogError(
            f"option {option!r} must name every selected topic-partition exactly: "
            + "; ".join(parts))
    return spec.offsets


def _resolve(spec: OffsetSpec, which: str, log: PartitionLog, read: ReadOptions,
             specific: Optional[Dict], log_end, unbounded_end: int) -> int:
    """An offset for `spec`; `log_end()` finds where the log ends for this read (the high
    watermark, or the log end offset), only when needed; `unbounded_end` is the end of
    a read to the latest offset (MAX_OFFSET: the sizes seen when a split is read)."""
    option = f"{which}Offsets"
    if spec.kind == "earliest":
        return log.start_offset
    if spec.kind == "latest":
        # Reading to the end needs no offset: splits stop at the sizes seen now.
        return unbounded_end if which == "ending" else log_end()
    if spec.kind in ("timestamp", "timestamps"):
        timestamp = spec.timestamp if spec.kind == "timestamp" else specific[log.topic_partition]
        found = log.offset_for_timestamp(timestamp)
        if found is not None:
            return found
        if which == "starting" and read.starting_by_timestamp_strategy == "error":
            raise SegmentLogError(
                f"{which}: no record in {log.topic}-{log.partition} has a timestamp >= "
                f"{timestamp}; set startingOffsetsByTimestampStrategy=latest to start at the end")
        return unbounded_end if which == "ending" else log_end()
    value = specific[log.topic_partition]
    if value == EARLIEST:
        return log.start_offset
    if value == LATEST:
        return unbounded_end if which == "ending" else log_end()
    end = log_end()
    if value < log.start_offset or value > end:
        if read.fail_on_data_loss:
            raise SegmentLogError(
                f"option {option!r}: offset {value} for {log.topic}-{log.partition} is outside "
                f"the log [{log.start_offset}, {end}]; set failOnDataLoss=false to clamp it")
        value = min(max(value, log.start_offset), end)
    return value


def offset_ranges(read: ReadOptions, logs: List[PartitionLog]) -> Dict:
    """{(topic, partition): (start, end)} from the starting/ending options."""
    specific_start = specific_end = None
    if read.starting.kind in ("offsets", "timestamps"):
        specific_start = _specific_offsets(read.starting, f"starting{_suffix(read.starting)}", logs)
    if read.ending.kind in ("offsets", "timestamps"):
        specific_end = _specific_offsets(read.ending, f"ending{_suffix(read.ending)}", logs)
    ranges = {}
    for log in logs:
        cache = []

        bound = read_bound(log, read)

        def log_end(log=log, cache=cache, bound=bound):
            if not cache:
                end = log.end_offset(verify=read.verify_checksums)
                cache.append(end if bound is None else min(end, bound))
            return cache[0]

        unbounded = MAX_OFFSET if bound is None else bound
        start = _resolve(read.starting, "starting", log, read, specific_start, log_end, unbounded)
        end = _resolve(read.ending, "ending", log, read, specific_end, log_end, unbounded)
        ranges[log.topic_partition] = (start, end if bound is None else min(end, bound))
    return ranges


def _suffix(spec: OffsetSpec) -> str:
    return "OffsetsByTimestamp" if spec.kind == "timestamps" else "Offsets"


def plan_fragments(read: ReadOptions, constraints: Constraints) -> List[Fragment]:
    logs = select_partitions(read, constraints)
    ranges = offset_ranges(read, logs)
    return plan_ranges(logs, ranges, read, constraints)


def plan_ranges(logs: List[PartitionLog], ranges: Dict, read: ReadOptions,
                constraints: Optional[Constraints] = None,
                last_stable: Optional[Dict] = None) -> List[Fragment]:
    """Fragments of the offset ranges {(topic, partition): (start, end)} of `logs`, cut to
    the read's split size; a partition without a range is not read. For read_committed,
    `last_stable` gives known last stable offsets (else each log is scanned for its own)."""
    constraints = constraints or Constraints()
    planned = []  # (log, start, end, transactions) of each partition read
    for log in logs:
        if log.topic_partition not in ranges:
            continue
        start, end = ranges[log.topic_partition]
        start = max(start, constraints.offset_low, log.start_offset)
        end = min(end, constraints.offset_high)
        if constraints.offset_values is not None:
            if not constraints.offset_values:
                continue
            start = max(start, min(constraints.offset_values))
            end = min(end, max(constraints.offset_values) + 1)
        lso = None
        bound = read_bound(log, read)
        if bound is not None:
            end = min(end, bound)
        if read.read_committed:
            if last_stable is not None and log.topic_partition in last_stable:
                lso = last_stable[log.topic_partition]
            else:
                lso = log.last_stable_offset(verify=read.verify_checksums, up_to=bound)
            end = min(end, lso)
        if start >= end or not log.segments:
            continue
        if log.replicas:
            check_replicas(log, start, end if end < MAX_OFFSET else log.end_offset())
        transactions = None
        if read.read_committed:
            aborted = [t for t in log.aborted_transactions()
                       if t.last_offset >= start and t.first_offset < end]
            log_end = log.end_offset(read.verify_checksums) if aborted else None
            for entry in aborted:
                log.check_abort_marker(entry, log_end)
            transactions = TransactionFilter(aborted, lso)
        planned.append((log, start, end, transactions))
    if constraints.offset_values is None and constraints.timestamp_low_us is None:
        # Then every segment of each range is planned with its offset index.
        _load_offset_indexes([segment for log, start, end, _ in planned for segment in
                              log.segments[log.segment_index_for(start):
                                           log.segment_index_for(end - 1) + 1]])
    pieces: List[Tuple[Segment, Fragment]] = []
    # Without minPartitions the split size is known before any segment is sized.
    cut_size = None if read.min_partitions else read.max_partition_bytes
    for log, start, end, transactions in planned:
        segments = {segment.log_path: segment for segment in log.segments}
        for fragment in _fragments_for_windows(log, _offset_windows(start, end, constraints),
                                               constraints, read.verify_checksums,
                                               cut_size, read.max_records_per_partition):
            pieces.append((segments[fragment.log_path],
                           replace(fragment, transactions=transactions)))
    max_bytes = _split_size(pieces, read)
    return [cut for segment, fragment in pieces
            for cut in _cut(segment, fragment, max_bytes, read.max_records_per_partition)]


# Offset indexes read at once from a store when planning (each is a HEAD and a GET).
INDEX_READS_AT_ONCE = 8


def _load_offset_indexes(segments: List[Segment]) -> None:
    """Read the offset indexes of remote `segments` several at a time: one after the
    other, a read of many segments waits for two requests' round trips per segment."""
    remote = [segment for segment in segments if segment.store.remote]
    if len(remote) < 2:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(INDEX_READS_AT_ONCE, len(remote))) as pool:
        for _ in pool.map(lambda segment: segment.offset_index, remote):
            pass  # the first failure is raised, naming its object


# Beyond this many offsets, an IN list is planned as one range from its least to its
# greatest value instead of one lookup each.
MAX_OFFSET_LOOKUPS = 10_000


def _offset_windows(start: int, end: int, constraints: Constraints) -> List[Tuple[int, int]]:
    """Offset ranges to plan: the whole [start, end), or one per value of an IN list."""
    values = constraints.offset_values
    if values is None or len(values) > MAX_OFFSET_LOOKUPS:
        return [(start, end)]
    return [(v, v + 1) for v in sorted(values) if start <= v < end]


def _fragments_for_windows(log: PartitionLog, windows, constraints: Constraints,
                           verify: bool = True, cut_size: Optional[int] = None,
                           max_records: Optional[int] = None) -> List[Fragment]:
    """Whole-segment-range fragments of every window, merging those that overlap."""
    merged: List[Fragment] = []
    for low, high in windows:
        for fragment in _segment_fragments(log, low, high, constraints, verify, cut_size,
                                           max_records):
            last = merged[-1] if merged else None
            if last is not None and last.log_path == fragment.log_path and \
                    fragment.start_position <= last.end_position:
                further = fragment if fragment.end_position > last.end_position else last
                merged[-1] = replace(last, end_position=further.end_position,
                                     entry_follows=further.entry_follows,
                                     end_offset=max(last.end_offset, fragment.end_offset))
            else:
                merged.append(fragment)
    return merged


def _split_size(pieces, read: ReadOptions) -> int:
    """maxPartitionBytes, lowered until minPartitions splits result (if index entries allow)."""
    max_bytes = read.max_partition_bytes
    if not read.min_partitions:
        return max_bytes
    total = sum(fragment.bytes for _, fragment in pieces)
    if not total:
        return max_bytes
    max_bytes = min(max_bytes, max(1, math.ceil(total / read.min_partitions)))

    def count(size):
        return sum(1 for segment, fragment in pieces
                   for _ in _cut(segment, fragment, size, read.max_records_per_partition))

    splits = count(max_bytes)
    while splits < read.min_partitions and max_bytes > 1:
        smaller = max(1, max_bytes * 3 // 4)
        more = count(smaller)
        if more == splits and smaller == 1:
            break
        max_bytes, splits = smaller, more
    return max_bytes


def _segment_fragments(log: PartitionLog, start: int, end: int, constraints: Constraints,
                       verify: bool = True, cut_size: Optional[int] = None,
                       max_records: Optional[int] = None) -> Iterator[Fragment]:
    """A fragment per segment that can hold offsets in [start, end), before cutting
    (`cut_size`, `max_records`: what _cut will be given, None when not known yet)."""
    ts_low = constraints.timestamp_low_ms
    first = log.segment_index_for(start)
    last = log.segment_index_for(end - 1)
    for i in range(first, last + 1):
        segment = log.segments[i]
        is_last_segment = log.is_last(segment)
        index = segment.offset_index
        if ts_low is not None and not is_last_segment:
            # A rolled segment's last time index entry is its largest timestamp.
            max_ts = segment.time_index.max_timestamp
            if max_ts is not None and max_ts < ts_low:
                continue
        # A joined tiered log's segments may hold offsets another segment serves.
        low = max(start, segment.first_served)
        high = end if segment.serves_to is None else min(end, segment.serves_to)
        if low >= high:
            continue
        _, start_position = index.lookup(low)
        if ts_low is not None:
            older_through = segment.time_index.offset_below(ts_low)
            if older_through is not None:
                start_position = max(start_position, index.lookup(older_through + 1)[1])
        end_position = data_end = segment.size
        bound = index.position_after(high - 1) if i == last or high < end else None
        fragment = Fragment(
            topic=log.topic, partition=log.partition, log_path=segment.log_path,
            log_size=segment.size, start_position=start_position, end_position=end_position,
            min_offset=low, end_offset=high, allow_torn_tail=is_last_segment,
            entry_follows=False, **_entry_bounds(segment, start_position),
            offset_values=constraints.offset_values,
            timestamp_low_us=constraints.timestamp_low_us,
            timestamp_high_us=constraints.timestamp_high_us, store=segment.store,
            next_base_offset=None if is_last_segment or segment.serves_to is not None
            else log.segments[i + 1].base_offset,
            log_chunks=segment.log_chunks)
        if is_last_segment and len(index):
            # Splits could start at index entries past the end of the valid data (after a
            # torn entry, in zero-filled space): no split reaches past that end.
            known = segment.known_valid_end(verify)
            if known is not None:
                end_position = data_end = known
            elif not _scan_finds_end(segment, fragment, bound, cut_size, max_records):
                end_position = data_end = segment.valid_end(verify)
        if bound is not None:
            end_position = min(end_position, bound)
        if start_position >= end_position:
            continue
        yield replace(fragment, end_position=end_position,
                      entry_follows=end_position < data_end)


def _scan_finds_end(segment: Segment, fragment: Fragment, bound: Optional[int],
                    cut_size: Optional[int], max_records: Optional[int]) -> bool:
    """Whether the active segment's fragment, read whole from its first entry, may be left
    to end where its scan finds the data to end (the first torn, zero-filled or
    unframeable entry, or a damaged last one: the walk's rule, applied by the scan as it
    reads every entry from the same start). Only one split may read it: a split starting
    at a later index entry could not know whether the data ended before it. This saves
    the walk over every header, which over a store downloads the segment a second time."""
    if fragment.start_position != 0 or bound is not None or cut_size is None:
        return False
    pieces = _cut(segment, fragment, cut_size, max_records)
    next(pieces)
    return next(pieces, None) is None


def _cut(segment: Segment, fragment: Fragment, max_bytes: int, max_records: Optional[int]
         ) -> Iterator[Fragment]:
    """Cut a fragment at index entry positions into pieces of about max_bytes / max_records.

    Cuts fall only on index entries, so a piece may pass a limit by up to one index
    interval, and a segment without entries stays whole.
    """
    index = segment.offset_index
    piece_start = fragment.start_position
    piece_first_offset = fragment.min_offset
    for offset, position in zip(index.offsets, index.positions):
        if not fragment.start_position < position < fragment.end_position:
            continue
        bytes_so_far = position - piece_start
        records_so_far = offset - piece_first_offset
        if bytes_so_far >= max_bytes or (max_records is not None and records_so_far >= max_records):
            yield replace(fragment, start_position=piece_start, end_position=position,
                          entry_follows=True, **_entry_bounds(segment, piece_start))
            piece_start, piece_first_offset = position, offset
    yield replace(fragment, start_position=piece_start, end_position=fragment.end_position,
                  **_entry_bounds(segment, piece_start))


def _entry_bounds(segment: Segment, position: int) -> dict:
    """What the offset index says of the entries from `position` (an entry boundary) on:
    they start past the previous index entry's offset (the last offset of an earlier
    append), and the entry at an index position holds no offset past that entry's."""
    index = segment.offset_index
    at = bisect.bisect_left(index.positions, position)
    indexed = at < len(index) and index.positions[at] == position
    return {
        "min_entry_offset": index.offsets[at - 1] + 1 if at else segment.base_offset,
        "start_index_entry": (index.offsets[at], at) if indexed else None,
    }


def group_fragments(fragments: List[Fragment], read: ReadOptions) -> List[List[Fragment]]:
    """Pack consecutive small fragments into tasks of about maxPartitionBytes.

    A log of many small segments would otherwise cost one task each. Each fragment still
    starts at its own index entry; only the task that reads it is shared. Fragments stay
    alone when maxRecordsPerPartition asks for record-bounded partitions, and packing
    never leaves fewer partitions than minPartitions.
    """
    if read.max_records_per_partition is not None or len(fragments) <= 1:
        return [[fragment] for fragment in fragments]
    target = read.max_partition_bytes
    if read.min_partitions:
        total = sum(fragment.bytes + FRAGMENT_OPEN_COST_BYTES for fragment in fragments)
        target = min(target, max(1, total // read.min_partitions))
    groups: List[List[Fragment]] = []
    group_bytes = 0
    for fragment in fragments:
        cost = fragment.bytes + FRAGMENT_OPEN_COST_BYTES
        if groups and group_bytes + cost <= target:
            groups[-1].append(fragment)
            group_bytes += cost
        else:
            groups.append([fragment])
            group_bytes = cost
    return groups
