"""Reading a byte range of one segment into Arrow record batches.

The scan walks batches from a start position (a batch boundary found through the
offset index), verifies checksums, hides control batches (unless their records are asked
for) and, for read_committed, aborted transactional batches, and keeps the records inside
an offset range. With include_metadata, each row also gets its batch's metadata.
"""
import bisect
import os
from dataclasses import dataclass, replace
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa

from ..errors import CorruptLogError, SegmentShrankError
from ..storage import LOCAL, LogBytes, Store
from .compression import DEFAULT_MAX_INFLATED_BYTES
from .crc import crc32c
from .arrow import with_batch_columns
from .control import is_transaction_marker, parse_control_record
from .entries import (BatchHeader, check_offset_order, ends_data, read_entry_header,
                      read_entry_or_end, verify_checksum)
from .fastpath import (NO_COORDINATOR_EPOCH, NOT_CONTROL, RUN_DONE, RUN_END,
                       RUN_ENTRY_FOR_PYTHON, RUN_FLUSH, batch_entry_expander,
                       make_accumulator)
from .indexes import AbortedTransaction
from .layout import MAX_OFFSET
from .legacy import decode_legacy_entry, decode_legacy_message, legacy_first_offset
from .v2 import batch_records_payload, decode_v2_records


# Rows in an Arrow batch by default: Spark's own for the batches it hands Python
# (spark.sql.execution.arrow.maxRecordsPerBatch).
DEFAULT_MAX_BATCH_ROWS = 10_000


@dataclass
class ScanOptions:
    verify_checksums: bool = True
    include_headers: bool = False
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS
    max_batch_bytes: int = 64 << 20
    use_fast_path: bool = True
    max_batch_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES  # per compressed batch
    include_metadata: bool = False  # each row's batch metadata (arrow.METADATA_FIELDS)
    # Control records as rows too, with arrow.CONTROL_FIELDS
    include_control_records: bool = False

    @property
    def tracks_batches(self) -> bool:
        return self.include_metadata or self.include_control_records


class TransactionFilter:
    """Visibility for read_committed: aborted transactional batches and the LSO cut."""

    def __init__(self, aborted: Iterable[AbortedTransaction], last_stable_offset: int):
        self.last_stable_offset = last_stable_offset
        ranges: Dict[int, List[AbortedTransaction]] = {}
        for txn in aborted:
            ranges.setdefault(txn.producer_id, []).append(txn)
        self._firsts = {}
        self._lasts = {}
        for pid, spans in ranges.items():
            spans.sort(key=lambda txn: (txn.first_offset, txn.last_offset))
            for before, after in zip(spans, spans[1:]):
                # A producer's transactions follow one another: overlapping entries are
                # damage, and would hide records of its other transactions.
                if after.first_offset <= before.last_offset:
                    # Named: the one written later, whose offsets went back.
                    other, named = sorted((before, after),
                                          key=lambda txn: (txn.path or "", txn.position or 0))
                    raise CorruptLogError(
                        named.path, named.position,
                        f"aborted transaction entry of producer {pid} with offsets "
                        f"{named.first_offset}..{named.last_offset} overlaps the one with "
                        f"{other.first_offset}..{other.last_offset} (at byte {other.position} "
                        f"of {os.path.basename(other.path or '')})")
            self._firsts[pid] = [txn.first_offset for txn in spans]
            self._lasts[pid] = [txn.last_offset for txn in spans]

    def is_aborted(self, header: BatchHeader) -> bool:
        firsts = self._firsts.get(header.producer_id)
        if not firsts:
            return False
        i = bisect.bisect_right(firsts, header.base_offset) - 1
        return i >= 0 and header.base_offset <= self._lasts[header.producer_id][i]


def _entry_or_torn_tail(view, pos: int, size: int, path, allow_torn_tail: bool
                        ) -> Optional[BatchHeader]:
    """The entry at `pos`, or None where the last segment's data ends (see
    entries.read_entry_or_end)."""
    return read_entry_or_end(view, pos, pos, path, size - pos, allow_torn_tail)


def _last_entry_test(data: LogBytes, header: BatchHeader, size: int, allow_torn_tail: bool):
    """For verify_checksum: whether `header` is the last entry of an active segment."""
    if not allow_torn_tail:
        return None

    def is_last():
        data.ensure(header.end_position, HEADER_PEEK_BYTES)
        return ends_data(data.view, header.end_position, size - header.end_position)

    return is_last


# What ends_data and a header read look at past a position.
HEADER_PEEK_BYTES = 64


def iter_segment_batches(path: str, size: int, start_position: int, end_position: int,
                         allow_torn_tail: bool, verify_checksums: bool = True,
                         base_offset: int = -(1 << 63), store: Store = LOCAL,
                         log_chunks: Optional[tuple] = None) -> Iterator[tuple]:
    """(header, view) for each entry starting in [start_position, end_position), whose
    offsets must increase from `base_offset` (the segment's)."""
    with store.open_log(path, size, log_chunks) as data:
        try:
            yield from _segment_entries(data, path, size, start_position, end_position,
                                        allow_torn_tail, verify_checksums, base_offset)
            data.check()  # the end found may be where the file was cut
        except Exception as error:
            _raise_shrink_instead(data, error)
            raise


def _segment_entries(data: LogBytes, path: str, size: int, start_position: int,
                     end_position: int, allow_torn_tail: bool, verify_checksums: bool,
                     base_offset: int) -> Iterator[tuple]:
    """iter_segment_batches over an open segment: check() before each entry is read,
    which is after the caller read the one before."""
    view = data.view
    pos = start_position
    end_position = min(end_position, size)
    while pos < end_position:
        data.check()
        data.ensure_entry(pos)
        header = _entry_or_torn_tail(view, pos, size, path, allow_torn_tail)
        if header is None:
            return
        check_offset_order(header, base_offset, path)
        base_offset = header.last_offset + 1
        if verify_checksums and not verify_checksum(
                view, pos, header, path, _last_entry_test(data, header, size,
                                                          allow_torn_tail)):
            return  # the active segment's damaged last entry: its data ends here
        yield header, view
        pos += header.size


@dataclass(frozen=True)
class SegmentRange:
    """What one scan reads: the entries of one segment that start in a byte range, keeping
    the records with min_offset <= offset < end_offset.

    The range starts on an entry boundary (an offset index position). `log_size` is the
    file size at planning: later appends are not read. A torn entry at the end of the
    data is allowed only in a partition's last segment (a live or crashed broker's).
    """

    topic: str
    partition: int
    log_path: str
    log_size: int
    start_position: int
    end_position: int
    min_offset: int
    end_offset: int
    allow_torn_tail: bool
    transactions: Optional[TransactionFilter] = None  # read_committed: what to hide
    # What the offset index tells of the entries around the range, so that offsets are
    # checked to increase across range boundaries too (planning fills them in):
    min_entry_offset: Optional[int] = None  # no entry of the range starts below it
    # (offset, entry number) of the offset index entry at start_position, if any
    start_index_entry: Optional[Tuple[int, int]] = None
    entry_follows: bool = False  # a valid entry starts at end_position
    store: Store = LOCAL  # where log_path is
    # A rolled segment's successor's base offset: its last entry must end below it (no
    # checksum covers a base offset, and nothing after that entry in its file shows it)
    next_base_offset: Optional[int] = None
    log_chunks: Optional[tuple] = None  # the .log object is compressed (see storage.Chunk)

    @property
    def bytes(self) -> int:
        return self.end_position - self.start_position


def scan_segment(segment_range: SegmentRange, options: ScanOptions
                 ) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of `segment_range` (see SegmentRange).

    A segment that shrinks while it is read (retention, a follower truncating its log)
    ends the scan with SegmentShrankError, whenever it happens; the rows that go out
    were read from the file as it was."""
    path, size = segment_range.log_path, segment_range.log_size
    with segment_range.store.open_log(path, size, segment_range.log_chunks) as mapped:
        try:
            for batch in _decoded_batches(mapped, segment_range, options):
                mapped.check()  # its rows may hold zeros read where the file had shrunk
                yield batch
        except Exception as error:
            _raise_shrink_instead(mapped, error)
            raise


def _raise_shrink_instead(data: LogBytes, error: Exception) -> None:
    """Reading failed: if the file shrank, that explains it (a torn entry at its new end,
    zeros where a mapped page was lost): raise SegmentShrankError instead."""
    if not isinstance(error, SegmentShrankError):
        shrank = data.shrink_error()
        if shrank is not None:
            raise shrank from None


def _decoded_batches(mapped: LogBytes, segment_range: SegmentRange, options: ScanOptions
                     ) -> Iterator[pa.RecordBatch]:
    """scan_segment's batches, read from the open segment `mapped`. That the file did not
    shrink is checked before each batch goes out (by scan_segment), at the end, and when
    reading fails: a page lost to a shrink reads as zeros meanwhile (storage/local.py)."""
    topic, partition = segment_range.topic, segment_range.partition
    path, size = segment_range.log_path, segment_range.log_size
    min_offset, end_offset = segment_range.min_offset, segment_range.end_offset
    allow_torn_tail = segment_range.allow_torn_tail
    transactions = segment_range.transactions
    if transactions is not None:
        end_offset = min(end_offset, transactions.last_stable_offset)
    accumulator = make_accumulator(options.include_headers, options.use_fast_path)
    tracks_batches = options.tracks_batches
    if tracks_batches:
        accumulator.track_batches(options.include_control_records)
    take = _taker(accumulator, topic, partition, path, options)
    if segment_range.min_entry_offset is not None:
        accumulator.next_offset = segment_range.min_entry_offset
    verify = options.verify_checksums
    end_position = min(segment_range.end_position, size)
    view = mapped.view
    pos = segment_range.start_position
    if pos < end_position:
        mapped.available(pos, end_position)  # a remote range: its first chunk, one GET
    if segment_range.start_index_entry is not None and pos < end_position:
        mapped.ensure_entry(pos)
        _check_indexed_entry(view, pos, size, path, segment_range.start_index_entry,
                             verify)
    stopped_at = None  # where the scan stopped before its range ended, or the end
    while pos < end_position:
        # Where the bytes at hand end (all of them for a local file; a remote range
        # arrives in chunks, and an entry across a chunk's end goes to the loop below).
        readable = mapped.available(pos, end_position)
        # The accumulator walks runs of plain batches itself and stops at entries
        # (compressed, legacy, transactional, damaged) that the rest of the loop handles.
        pos, state = accumulator.decode_run(
            view, pos, min(end_position, readable), readable, crc32c if verify else None,
            min_offset, end_offset, options.max_batch_rows, options.max_batch_bytes,
            transactions is not None)
        if state & RUN_FLUSH:
            yield take()
        if state & RUN_DONE:
            if accumulator.next_offset < end_offset:
                # The run stopped at the entry at `pos` (verified), which starts at or
                # past the end of the offset range; otherwise it read one that reaches it.
                mapped.ensure_entry(pos)
                done = read_entry_header(view, pos, pos, path, remaining=size - pos)
                accumulator.next_offset = min(done.last_offset + 1, MAX_OFFSET)
                pos = done.end_position
            stopped_at = pos
            break
        if state & RUN_END:
            if pos < end_position:
                continue  # the end of the bytes at hand, not of the range
            stopped_at = pos
            break
        if state != RUN_ENTRY_FOR_PYTHON:
            continue
        mapped.ensure_entry(pos)
        header = _entry_or_torn_tail(view, pos, size, path, allow_torn_tail)
        if header is None:
            break
        pos += header.size
        check_offset_order(header, accumulator.next_offset, path)
        lowest_offset = accumulator.next_offset
        accumulator.next_offset = min(header.last_offset + 1, MAX_OFFSET)
        # Before any decision is taken from the header. A mismatch in the active
        # segment's last entry ends its data, as Kafka's recovery does.
        if verify and not verify_checksum(view, header.position, header, path,
                                          _last_entry_test(mapped, header, size,
                                                           allow_torn_tail)):
            break
        if header.last_offset < min_offset:
            continue
        if header.magic == 2 and header.base_offset >= end_offset:
            stopped_at = pos
            break
        if header.magic == 2:
            if not header.record_count:
                continue
            if header.is_control:
                # Shown whatever the isolation (a marker closes a transaction, aborted or not)
                if not options.include_control_records:
                    continue
                _add_control_records(view, header, accumulator, min_offset, end_offset, path,
                                     options.max_batch_inflated_bytes)
            else:
                if transactions is not None and header.is_transactional and \
                        transactions.is_aborted(header):
                    continue
                data = batch_records_payload(view, header.position, header, path,
                                             options.max_batch_inflated_bytes)
                accumulator.add_v2_batch(data, header.record_count, header, min_offset,
                                         end_offset, path)
                if tracks_batches:
                    _note_batch(accumulator, header, header.base_offset)
        else:
            _, first_offset = decode_legacy_entry(
                view, header.position, header, accumulator, min_offset, end_offset, verify,
                path, options.max_batch_inflated_bytes, lowest_offset)
            if tracks_batches:
                _note_batch(accumulator, header, first_offset)
        if len(accumulator) >= options.max_batch_rows or \
                accumulator.payload_bytes >= options.max_batch_bytes:
            yield take()
        if header.last_offset >= end_offset - 1:
            stopped_at = pos
            break
    else:
        stopped_at = pos
    # The entry after the last one read holds higher offsets: its base offset is outside
    # the checksum, and a moved one would hide the rows of the entries it skipped. It is
    # known to be an entry when it starts inside the range, or where another range does.
    if stopped_at is not None and stopped_at < size and (
            stopped_at < end_position or
            (stopped_at == end_position and segment_range.entry_follows)):
        mapped.check()
        mapped.ensure_entry(stopped_at)
        _check_next_entry(view, stopped_at, size, path, accumulator.next_offset,
                          options.max_batch_inflated_bytes)
    if stopped_at == size and segment_range.next_base_offset is not None and \
            accumulator.next_offset > segment_range.next_base_offset:
        last = _last_entry(mapped, segment_range.start_position, size, path)
        raise CorruptLogError(
            path, last.position,
            f"entry with offsets {last.base_offset}..{last.last_offset} runs into the "
            f"next segment, which starts at offset {segment_range.next_base_offset}")
    if len(accumulator):
        yield take()
    else:
        mapped.check()  # the end found may be where the file was cut


def _taker(accumulator, topic: str, partition: int, path: str, options: ScanOptions):
    """take() -> the accumulated rows as one Arrow batch, with the columns `options` ask
    for (their batch entries are taken with the rows)."""
    if not options.tracks_batches:
        return lambda: accumulator.take(topic, partition)
    segment = os.path.basename(path)
    expand = batch_entry_expander(options.use_fast_path)

    def take():
        batch = accumulator.take(topic, partition)
        return with_batch_columns(batch, accumulator.take_batch_entries(), segment,
                                  options.include_headers, options.include_metadata,
                                  options.include_control_records, expand)

    return take


def _note_batch(accumulator, header: BatchHeader, base_offset: int,
                control_type: int = NOT_CONTROL,
                coordinator_epoch: int = NO_COORDINATOR_EPOCH) -> None:
    accumulator.note_batch(base_offset, header.producer_id, header.producer_epoch,
                           header.base_sequence, header.partition_leader_epoch,
                           header.attributes, header.magic, header.position, control_type,
                           coordinator_epoch)


class _Records:
    """A sink collecting decoded records as tuples."""

    def __init__(self):
        self.rows = []

    def add(self, *record):
        self.rows.append(record)


def _add_control_records(view, header: BatchHeader, accumulator, min_offset: int,
                         end_offset: int, path, max_inflated: int) -> None:
    """The records of a control batch as rows, each with its control type: a transaction
    marker's value is null (its coordinator epoch goes to its own column), other types
    keep their value's bytes, the only place their content is."""
    records = _Records()
    data = batch_records_payload(view, header.position, header, path, max_inflated)
    decode_v2_records(data, header.record_count, header, records, min_offset, end_offset, path)
    for offset, timestamp, timestamp_type, key, value, headers in records.rows:
        type_id, epoch = parse_control_record(key, value, path, header.position, offset)
        if is_transaction_marker(type_id):
            value = None
        accumulator.add(offset, timestamp, timestamp_type, key, value, headers)
        _note_batch(accumulator, header, header.base_offset, type_id,
                    NO_COORDINATOR_EPOCH if epoch is None else epoch)


def _last_entry(data: LogBytes, position: int, size: int, path) -> BatchHeader:
    """The last entry of a segment whose entries from `position` on were all read."""
    last = None
    while position < size:
        data.ensure_entry(position)
        last = read_entry_header(data.view, position, position, path, remaining=size - position)
        position = last.end_position
    return last


def _check_indexed_entry(view, pos: int, size: int, path, index_entry: Tuple[int, int],
                         verify: bool) -> None:
    """An offset index entry points at a whole, valid entry (planning starts no range at
    or past the end of the data), which holds no offset past the index entry's: that is
    the last offset of the append starting there."""
    indexed_offset, number = index_entry
    index_path = path[:-len(".log")] + ".index" if path.endswith(".log") else path
    try:
        header = read_entry_header(view, pos, pos, path, remaining=size - pos)
        if header is None:
            raise CorruptLogError(path, pos, "the entry is torn or zero-filled")
    except CorruptLogError as damage:
        raise CorruptLogError(
            index_path, number * 8,
            f"offset index entry {number} (offset {indexed_offset}, position {pos}) does "
            f"not point at an entry of {os.path.basename(path)}: {damage.reason}"
        ) from None
    if verify:
        verify_checksum(view, pos, header, path)  # not the active segment's end: see above
    if header.last_offset > indexed_offset:
        raise CorruptLogError(
            path, pos,
            f"entry with offsets {header.base_offset}..{header.last_offset} is past "
            f"offset {indexed_offset}, which the offset index gives for this position")


def _check_next_entry(view, pos: int, size: int, path, next_offset: int,
                      max_inflated: int) -> None:
    """The entry at `pos` (after a range's last entry read) starts at `next_offset` or
    later; a compressed legacy wrapper is opened for its first offset."""
    try:
        header = read_entry_header(view, pos, pos, path, remaining=size - pos)
        if header is None:
            return
        if header.magic < 2 and header.compression:
            first = legacy_first_offset(view, pos, header, path, max_inflated)
            header = replace(header, base_offset=first)
    except CorruptLogError:
        return  # the range that starts there reports it
    check_offset_order(header, next_offset, path)


def first_offset_at_or_after_time(log, segment, timestamp: int, from_offset: int = 0
                                  ) -> Optional[int]:
    """In one segment, the offset of the first record at or past `from_offset` (the log
    start) with timestamp >= `timestamp`."""
    _, indexed_offset = segment.time_index.lookup(timestamp)
    index = segment.offset_index
    entry_offset, position = index.lookup(max(indexed_offset, from_offset))
    number = bisect.bisect_left(index.positions, position)
    with segment.store.open_log(segment.log_path, segment.size, segment.log_chunks) as data:
        try:
            found = _first_at_or_after(data, log, segment, timestamp, from_offset,
                                       position, entry_offset, number, index)
            data.check()  # what was read, to the offset found or the end, was the file's
        except Exception as error:
            _raise_shrink_instead(data, error)
            raise
    return found


def _first_at_or_after(data: LogBytes, log, segment, timestamp: int, from_offset: int,
                       position: int, entry_offset: int, number: int, index
                       ) -> Optional[int]:
    if number < len(index) and index.positions[number] == position and \
            index.offsets[number] == entry_offset:
        data.ensure_entry(position)
        _check_indexed_entry(data.view, position, segment.size, segment.log_path,
                             (entry_offset, number), verify=False)
    finder = _FirstAtOrAfter(timestamp)
    for header, view in _segment_entries(data, segment.log_path, segment.size, position,
                                         segment.size, log.is_last(segment), True,
                                         segment.base_offset):
        if header.max_timestamp < timestamp and header.magic != 1:
            continue
        if header.magic == 2:
            if not header.record_count:
                continue
            data_bytes = batch_records_payload(view, header.position, header,
                                               segment.log_path)
            decode_v2_records(data_bytes, header.record_count, header, finder, from_offset,
                              MAX_OFFSET, segment.log_path)
        else:
            decode_legacy_message(view, header.position, header, finder, from_offset,
                                  MAX_OFFSET, False, segment.log_path)
        if finder.offset is not None:
            return finder.offset
    return None


class _FirstAtOrAfter:
    def __init__(self, timestamp):
        self.timestamp = timestamp
        self.offset = None

    def add(self, offset, timestamp, *_):
        if self.offset is None and timestamp >= self.timestamp:
            self.offset = offset
