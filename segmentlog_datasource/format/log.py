"""The partition-log view: topic-partition directories, their segments, and lookups.

A log dir holds `<topic>-<partition>` directories; a partition directory holds segments
named by their base offset (`%020d.log`) with `.index`, `.timeindex` and `.txnindex`
beside them. Everything else Kafka leaves there is recognised and skipped.
"""
import bisect
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import CorruptLogError, SegmentLogError
from ..storage import LOCAL, Chunk, Store, StoreConfig, TreeView, resolve
from . import checkpoints, pending
from .checkpoints import EpochEntry, OffsetEntry
from .indexes import AbortedTransaction, OffsetIndex, TimeIndex, parse_transaction_index
from .entries import (BatchHeader, check_offset_order, ends_data, read_entry_or_end,
                      verify_checksum)
from .layout import V2_HEADER_SIZE

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
# Files of interrupted or pending Kafka operations: never data to read, except a .swap
# segment, which recovery swaps in (see PartitionLog.open).
SWAP_SUFFIX = ".swap"
CLEANED_SUFFIX = ".cleaned"
PENDING_SUFFIXES = (".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)
SWAP_SEGMENT_NAME = re.compile(r"^(\d{20})\.log\.swap$")
CLEANED_FILE_NAME = re.compile(r"^(\d{20})\.[a-z]+\.cleaned$")
KNOWN_FILES = {"leader-epoch-checkpoint", "partition.metadata"}
# The topic part must be a name Kafka allows (ASCII letters, digits, '.', '_', '-', at
# most 249 characters), so `date=2023-01-01` or `my photos-1` are never partitions.
MAX_TOPIC_LENGTH = 249
PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,%d})-(?P<partition>\d+)$" % MAX_TOPIC_LENGTH)
# Inside a partition directory, names Kafka writes besides segments (temporary copies of
# its checkpoint and metadata files end in .tmp).
_PARTITION_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
                            ".snapshot", "-checkpoint", ".tmp") + PENDING_SUFFIXES
# Beside partition directories in a log dir: Kafka's bookkeeping files, and the
# directories of partitions being deleted or moved (`<topic>-<p>.<uuid>-delete`).
_LOGDIR_FILE = re.compile(r"^(meta\.properties|.*[-.]checkpoint|.*\.tmp)$")
_LOGDIR_MOVED = re.compile(
    r"^(?P<directory>.+-\d+)\.[0-9a-f]{32}-(?P<kind>delete|future|stray)$")
HEADER_READ_SIZE = V2_HEADER_SIZE


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> Optional[Tuple[str, int]]:
    match = PARTITION_DIR.match(name)
    if not match or match.group("topic") in (".", ".."):
        return None
    return match.group("topic"), int(match.group("partition"))


def parse_moved_dir_name(name: str) -> Optional[Tuple[str, int, str]]:
    """(topic, partition, kind) of a partition directory a broker renamed: kind "future"
    (`<topic>-<p>.<id>-future`, a copy being moved to this log dir from another one of the
    broker's), "delete" (a deleted partition) or "stray"; None for any other name. A
    listing of a log dir passes over them; one named alone is read as a partition."""
    match = _LOGDIR_MOVED.match(name)
    parsed = parse_partition_dir_name(match.group("directory")) if match else None
    return None if parsed is None else (parsed[0], parsed[1], match.group("kind"))


@dataclass
class Segment:
    directory: str
    base_offset: int
    size: int  # bytes in the .log file when the partition was opened
    active: bool = False  # the last segment, which a running broker may be appending to
    store: Store = field(default=LOCAL, repr=False)
    # Index files the listing showed absent (a remote store is not asked for them again)
    absent: frozenset = field(default=frozenset(), repr=False)
    # Where a tiered-storage segment's files are, by suffix (".log", ".index", ...):
    # (path, position, length), an index possibly a slice of one packed object; a suffix
    # not there has no file. None: the files of a log dir, named by the base offset.
    locations: Optional[Dict[str, Tuple[str, int, int]]] = field(default=None, repr=False)
    # The .log object holds the segment as independent zstd frames (storage.Chunk each)
    log_chunks: Optional[tuple] = field(default=None, repr=False)
    _offset_index: Optional[OffsetIndex] = field(default=None, repr=False)
    _time_index: Optional[TimeIndex] = field(default=None, repr=False)
    _valid_ends: Dict[bool, int] = field(default_factory=dict, repr=False)
    _aborted: Optional[List[AbortedTransaction]] = field(default=None, repr=False)
    # ".swap": the files of a swap that Kafka's recovery would complete (see PartitionLog.open)
    file_suffix: str = ""
    # A tiered-storage segment's id; the offsets it serves in a read that joins several
    # copies of a range (read.tiered): from `serves_from`, below `serves_to` (None: from
    # the base offset, to the end)
    segment_id: Optional[str] = None
    serves_from: Optional[int] = None
    serves_to: Optional[int] = None

    @property
    def first_served(self) -> int:
        return self.base_offset if self.serves_from is None else self.serves_from

    def serves_entry(self, header: BatchHeader, first: bool = False) -> bool:
        """Whether a walk of a joined log's segments (read.tiered) takes this entry of
        the segment: one starting in the offsets it serves (the log's first segment: one
        reaching them), so that overlapping segments give each batch once."""
        if self.serves_from is None and self.serves_to is None:
            return True
        low = self.first_served
        return (header.last_offset >= low if first else header.base_offset >= low) and \
            (self.serves_to is None or header.base_offset < self.serves_to)

    def _file(self, suffix: str) -> str:
        located = self.locations.get(suffix) if self.locations is not None else None
        if located is not None:
            return located[0]
        return self.store.join(self.directory,
                               segment_file_name(self.base_offset, suffix) + self.file_suffix)

    @property
    def log_path(self) -> str:
        return self._file(LOG_SUFFIX)

    @property
    def index_path(self) -> str:
        return self._file(INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        return self._file(TIME_INDEX_SUFFIX)

    @property
    def txn_index_path(self) -> str:
        return self._file(TXN_INDEX_SUFFIX)

    def _read_index(self, path: str, suffix: str) -> Optional[bytes]:
        if self.locations is not None:
            located = self.locations.get(suffix)
            if located is None:
                return None
            path, position, length = located
            return self.store.read_bytes(path, position, length) if length else b""
        return None if suffix in self.absent else self.store.read_optional(path)

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            data = self._read_index(self.index_path, INDEX_SUFFIX)
            self._offset_index = OffsetIndex.empty(self.base_offset, self.index_path) \
                if data is None else OffsetIndex.parse(
                    data, self.base_offset, path=self.index_path, log_size=self.size,
                    growing=self.active)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            data = self._read_index(self.time_index_path, TIME_INDEX_SUFFIX)
            self._time_index = TimeIndex.empty(self.base_offset, self.time_index_path) \
                if data is None else TimeIndex.parse(data, self.base_offset,
                                                     path=self.time_index_path)
        return self._time_index

    def aborted_transactions(self) -> List[AbortedTransaction]:
        if self.store.remote:
            # Read once per planning: a remote segment is not appended to.
            if self._aborted is None:
                data = self._read_index(self.txn_index_path, TXN_INDEX_SUFFIX)
                self._aborted = [] if data is None else \
                    parse_transaction_index(data, self.txn_index_path)
            return list(self._aborted)
        data = self._read_index(self.txn_index_path, TXN_INDEX_SUFFIX)
        return [] if data is None else parse_transaction_index(data, self.txn_index_path)

    def iter_headers(self, start_position: int = 0, allow_torn_tail: bool = False,
                     verify: bool = False, end: Optional[int] = None,
                     next_offset: Optional[int] = None) -> Iterator[BatchHeader]:
        """Batch headers from `start_position` on (to `end`, default the size), reading
        only the header bytes, or with `verify` each whole entry, whose checksum must
        match before it is yielded. Offsets must increase from `next_offset` (default
        the base offset)."""
        with self.store.reader(self.log_path, self.size, self.log_chunks) as reader:
            yield from iter_file_headers(reader, self.log_path, start_position,
                                         self.size if end is None else end,
                                         allow_torn_tail, verify,
                                         self.base_offset if next_offset is None else next_offset)

    def valid_end(self, verify: bool = False) -> int:
        """Where the valid data of this segment, taken as the active one, ends: at the
        first torn, zero-filled or unframeable entry, or before a last entry that fails
        its checksum (with `verify`). Planning cuts no split past it, so every split agrees on it.
        Walks every header once (Kafka's recovery reads the whole active segment too): the
        plain magic-2 batches of a local file with the compiled walk, the rest in Python."""
        if verify not in self._valid_ends:
            start, next_offset, walked_last = self._walk_plain_batches()
            last = None
            for last in self.iter_headers(start, allow_torn_tail=True, next_offset=next_offset):
                pass
            if last is None and walked_last >= 0:
                last = next(self.iter_headers(walked_last, allow_torn_tail=True), None)
            end = 0 if last is None else last.end_position
            if verify and last is not None:
                with self.store.reader(self.log_path, self.size, self.log_chunks) as reader:
                    entry = reader.pread(last.size, last.position)
                if not verify_checksum(entry, 0, last, self.log_path, lambda: True):
                    end = last.position
            self._valid_ends[verify] = end
        return self._valid_ends[verify]

    def _walk_plain_batches(self) -> Tuple[int, int, int]:
        """(where the compiled walk of whole, ordered magic-2 batches stopped, the offset
        after the last it took, where that batch starts or -1): (0, base, -1) where the
        file is not local or the walk is not built."""
        if self.store.remote or self.log_chunks is not None or self.locations is not None:
            return 0, self.base_offset, -1
        from .fastpath import batch_header_walker

        walk = batch_header_walker(allow_pure=False)
        if walk is None:
            return 0, self.base_offset, -1
        stop, last_start, rows = walk_local_file(walk, self.log_path, 0, self.size,
                                                 self.base_offset)
        if last_start < 0:
            return 0, self.base_offset, -1
        last_offset = int.from_bytes(rows[-16:-8], sys.byteorder, signed=True)
        return stop, last_offset + 1, last_start

    def known_valid_end(self, verify: bool) -> Optional[int]:
        """valid_end(verify) when it is known without a walk (walked already, or found by
        a streaming tail scan), else None."""
        return self._valid_ends.get(verify)

    def found_valid_end(self, verify: bool, position: int) -> None:
        """Record where a walk of every header under the same rule (a streaming tail scan)
        found the valid data to end, so that valid_end need not walk them again."""
        self._valid_ends[verify] = position

    def last_entry(self, allow_torn_tail: bool = False, verify: bool = False
                   ) -> Optional[BatchHeader]:
        """The last complete entry, None when there is none; the log end offset is its
        last offset + 1. A rolled segment is walked from its last offset index entry, so
        only its tail is read; an active one up to its valid end (see valid_end)."""
        index = self.offset_index
        end = self.valid_end(verify) if allow_torn_tail else self.size
        below = bisect.bisect_left(index.positions, end) - 1  # the last entry before it
        start = index.positions[below] if below >= 0 else 0
        last = None
        for header in self.iter_headers(start, allow_torn_tail, verify, end):
            last = header
        if last is None and start:
            # The indexed entry is itself a torn tail (the index entry reached the disk,
            # the append did not): the complete entries end before it.
            for header in self.iter_headers(0, allow_torn_tail, verify, end):
                last = header
        return last


def walk_local_file(walk, path: str, position: int, end: int, next_offset: int):
    """`walk` (fastpath's batch header walk) over a local file's headers, read with pread:
    a header a batch touches no more of the file than its own bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return walk(fd, position, end, next_offset)
    finally:
        os.close(fd)


def _absent_indexes(store: Store, base: str, file_suffix: str, present) -> frozenset:
    """The index suffixes a remote listing showed absent (a local read just tries)."""
    if not store.remote:
        return frozenset()
    return frozenset(suffix for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                     if base + suffix + file_suffix not in present)


def _complete_swaps(segments: List[Segment], swaps: List[Segment],
                    cleaned_from: Optional[int]) -> List[Segment]:
    """The segments as Kafka's recovery leaves them after an interrupted swap: a .swap
    segment takes the place of the segments whose base offsets lie in the offsets it
    holds. A .swap at or past the first .cleaned file's offset belongs to a cleaning or
    split that never finished, and recovery deletes it: it is not data."""
    for swap in sorted(swaps, key=lambda s: s.base_offset):
        if cleaned_from is not None and swap.base_offset >= cleaned_from:
            continue
        last = swap.last_entry()
        if last is None:
            continue
        end = last.last_offset + 1
        segments = [s for s in segments if not swap.base_offset <= s.base_offset < end]
        segments.append(swap)
    return sorted(segments, key=lambda s: s.base_offset)


def iter_file_headers(reader, path, position: int, end: int, allow_torn_tail: bool,
                      verify: bool = False, base_offset: Optional[int] = None
                      ) -> Iterator[BatchHeader]:
    """Headers from `position` on; their offsets must increase from `base_offset`. With
    `allow_torn_tail` (the active segment), the data ends at the first torn, zero-filled
    or unframeable entry, or at a last entry that fails its checksum (docs/reading.md,
    "What checksums catch")."""
    next_offset = -(1 << 63) if base_offset is None else base_offset
    pread = reader.pread  # (length, position), as os.pread without the descriptor
    while position < end:
        head = pread(HEADER_READ_SIZE, position)
        header = read_entry_or_end(head, 0, position, path, end - position, allow_torn_tail)
        if header is None:
            return
        if verify:
            # Callers decide from the header's fields: the checksum comes first.
            def is_last(after=header.end_position):
                return ends_data(pread(HEADER_READ_SIZE, after), 0, end - after)

            if not verify_checksum(pread(header.size, position), 0, header, path,
                                   is_last if allow_torn_tail else None):
                return  # the active segment's damaged last entry: its data ends here
        check_offset_order(header, next_offset, path)
        next_offset = header.last_offset + 1
        yield header
        position += header.size


class LogDirState:
    """The offset checkpoints of one log dir (see format.checkpoints), each file read and
    parsed when first asked for: a read needs the log start and high watermark files only.
    `present`: the names a listing showed there (None: not listed, try each)."""

    def __init__(self, path: Optional[str], store: Store = LOCAL,
                 present: Optional[frozenset] = None,
                 before: Optional[pending.BeforePublishes] = None):
        self.path = path
        self.store = store
        self.present = present
        # entries as they were before unfinished publishes (see format.pending), and the
        # jobs of those publishes
        self.before = before.offsets if before else {}
        self.unfinished_jobs = list(before.jobs) if before else []
        self._files: Dict[str, Dict[Tuple[str, int], OffsetEntry]] = {}

    def file_path(self, name: str) -> Optional[str]:
        return None if self.path is None else self.store.join(self.path, name)

    def entries(self, name: str) -> Dict[Tuple[str, int], OffsetEntry]:
        if name not in self._files:
            found = {}
            if self.path is not None and (self.present is None or name in self.present):
                data = self.store.read_optional(self.file_path(name))
                if data is not None:
                    found = checkpoints.parse_offset_checkpoint(data, self.file_path(name))
            for key, offset in self.before.get(name, {}).items():
                if offset is None:
                    found.pop(key, None)
                else:
                    found[key] = OffsetEntry(offset, found[key].line if key in found else 0)
            self._files[name] = found
        return self._files[name]

    def has_file(self, name: str) -> bool:
        """Whether the file is there (read to find out when the dir was not listed)."""
        if self.path is None:
            return False
        if self.present is not None:
            return name in self.present
        return self.store.read_optional(self.file_path(name)) is not None


NO_LOG_DIR = LogDirState(None)


class PartitionLog:
    """One `<topic>-<partition>` directory: its segments in base-offset order, read with
    the offset checkpoints of the log dir that holds it."""

    def __init__(self, directory: str, topic: str, partition: int, segments: List[Segment],
                 store: Store = LOCAL, log_dir: LogDirState = NO_LOG_DIR,
                 files_before: Optional[Dict[str, Optional[bytes]]] = None):
        self.directory = directory
        # leader-epoch-checkpoint and partition.metadata as they were before an unfinished
        # publish (see format.pending), by name; None: no file then
        self.files_before = files_before or {}
        self.topic = topic
        self.partition = partition
        self.segments = segments
        self.store = store
        self.log_dir = log_dir
        self._base_offsets = [s.base_offset for s in segments]
        self._start_offset: Optional[int] = None
        self._leader_epochs = None
        # The other copies of this partition in one read (other brokers, JBOD dirs), when
        # this copy is the one that serves it (see read.replicas).
        self.replicas: List["PartitionLog"] = []

    @classmethod
    def open(cls, directory: str, store: Optional[Store] = None,
             tree: Optional[TreeView] = None, log_dir: Optional[LogDirState] = None,
             view: Optional[pending.BeforePublishes] = None, logical: Optional[str] = None
             ) -> "PartitionLog":
        """The partition in `directory` (a local path, or a path of `store`), listed live or
        from `tree`, a listing made beforehand; `log_dir`: the checkpoints of the log dir
        that holds it (default: those in its parent directory). `view`: unfinished
        publishes not to see; `logical`: where the log dir names the directory, when an
        unfinished overwrite moved the partition's old copy to `directory`."""
        if store is None:
            store, directory = resolve(directory)
        elif not store.remote:
            directory = os.path.abspath(directory)
        directory = directory.rstrip("/") if store.remote else directory
        parsed = parse_partition_dir_name(store.basename(directory))
        moved = None if parsed is not None else parse_moved_dir_name(store.basename(directory))
        if moved is not None:
            parsed = moved[:2]
        if parsed is None:
            raise SegmentLogError(
                f"{directory}: not a partition directory (expected <topic>-<partition>)"
            )
        topic, partition = parsed
        if moved is not None and store.size_of(
                store.join(store.dirname(directory), partition_dir_name(topic, partition))) \
                is not None:
            log_dir = NO_LOG_DIR  # its log dir's checkpoints are of the current copy beside it
        if log_dir is None:
            log_dir = LogDirState(store.dirname(directory), store)
        tree = tree or store.tree(directory)
        names = sorted(tree.names(directory))
        named = logical or directory
        files_before = {}
        if view:
            names = [name for name in names if store.join(named, name) not in view.hidden]
            files_before = view.files.get(named, {})
        present = set(names)
        segments = []
        swaps = []
        cleaned_from = None
        for name in names:
            match = SEGMENT_NAME.match(name)
            if match:
                if match.group(2) == "snapshot":
                    continue
                path = store.join(directory, name)
                entry = tree.entry(path)
                if entry is None:
                    continue  # deleted since the listing (retention)
                if entry.kind != "file":
                    kind = "a directory" if entry.kind == "dir" else "not a regular file"
                    raise CorruptLogError(
                        path, None,
                        f"is {kind}; a segment's .{match.group(2)} file must be a regular file")
                if match.group(2) == "log":
                    segments.append(Segment(directory, int(match.group(1)), entry.size,
                                            store=store,
                                            absent=_absent_indexes(store, match.group(1), "",
                                                                   present)))
                continue
            swap = SWAP_SEGMENT_NAME.match(name)
            if swap:
                entry = tree.entry(store.join(directory, name))
                if entry is not None and entry.kind == "file":
                    swaps.append(Segment(directory, int(swap.group(1)), entry.size, store=store,
                                         absent=_absent_indexes(store, swap.group(1), SWAP_SUFFIX,
                                                                present),
                                         file_suffix=SWAP_SUFFIX))
                continue
            cleaned = CLEANED_FILE_NAME.match(name)
            if cleaned:
                offset = int(cleaned.group(1))
                cleaned_from = offset if cleaned_from is None else min(cleaned_from, offset)
                continue
            if name in KNOWN_FILES or name.endswith(PENDING_SUFFIXES) or name.endswith("-checkpoint"):
                continue
            if name.endswith(LOG_SUFFIX):
                raise SegmentLogError(
                    f"{store.join(directory, name)}: segment file name is not a 20-digit "
                    f"base offset followed by .log"
                )
        segments = _complete_swaps(segments, swaps, cleaned_from)
        if segments:
            segments[-1].active = True
        return cls(directory, topic, partition, segments, store, log_dir, files_before)

    # ------------------------------------------------------------ beside the segments
    def checkpointed(self, name: str) -> Optional[OffsetEntry]:
        """This partition's entry in the log dir's offset checkpoint file `name`."""
        return self.log_dir.entries(name).get(self.topic_partition)

    @property
    def first_segment_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else 0

    @property
    def local_start_offset(self) -> int:
        """Where the segments of this directory begin to serve (read.tiered's joined logs
        serve remote segments below it)."""
        return self.first_segment_offset

    @property
    def high_watermark(self) -> Optional[int]:
        """The checkpointed high watermark, at least the log start; None when no checkpoint
        covers the partition. Kafka also takes it at most at the log end when it loads the
        log: a read bounded by it stops at the log end anyway, and high_watermark_now
        applies that clamp where the value itself is shown."""
        entry = self.checkpointed(checkpoints.HIGH_WATERMARK_FILE)
        if entry is None:
            return None
        return max(entry.offset, self.start_offset)

    def high_watermark_now(self) -> Optional[int]:
        """The high watermark as Kafka loads it: within [log start, log end]."""
        bound = self.high_watermark
        if bound is None or (self.segments and bound <= self.segments[-1].base_offset):
            return bound
        return min(bound, self.end_offset())

    def leader_epochs(self) -> Optional[List[EpochEntry]]:
        """The partition's leader-epoch-checkpoint entries; None when it has no such file."""
        if self._leader_epochs is None:
            path = self.store.join(self.directory, checkpoints.LEADER_EPOCH_FILE)
            data = self._partition_file(checkpoints.LEADER_EPOCH_FILE, path)
            self._leader_epochs = [None if data is None
                                   else checkpoints.parse_leader_epochs(data, path)]
        return self._leader_epochs[0]

    def topic_id(self) -> Optional[str]:
        path = self.store.join(self.directory, checkpoints.PARTITION_METADATA_FILE)
        data = self._partition_file(checkpoints.PARTITION_METADATA_FILE, path)
        return None if data is None else checkpoints.parse_partition_metadata(data, path)

    def _partition_file(self, name: str, path: str) -> Optional[bytes]:
        if name in self.files_before:
            return self.files_before[name]
        return self.store.read_optional(path)

    def __repr__(self):
        return f"PartitionLog({self.topic!r}, {self.partition}, {len(self.segments)} segments)"

    @property
    def topic_partition(self) -> Tuple[str, int]:
        return self.topic, self.partition

    def is_last(self, segment: Segment) -> bool:
        return bool(self.segments) and segment is self.segments[-1]

    def segment_index_for(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (the last with base <= offset)."""
        return max(0, bisect.bisect_right(self._base_offsets, offset) - 1)

    @property
    def start_offset(self) -> int:
        """The log start offset: the first segment's base, raised by the log dir's
        log-start-offset-checkpoint (DeleteRecords, retention inside a segment), at most
        the log end, as Kafka loads it. Nothing below it is read."""
        if self._start_offset is None:
            start = self.first_segment_offset
            entry = self.checkpointed(checkpoints.LOG_START_FILE)
            if entry is not None and entry.offset > start:
                start = entry.offset
                if not self.segments or start > self.segments[-1].base_offset:
                    start = min(start, self.end_offset())
            self._start_offset = start
        return self._start_offset

    def end_offset(self, verify: bool = False) -> int:
        """Log end offset: one past the last complete batch of the last segment (with
        `verify`, the batches it is found from must pass their checksums)."""
        for segment in reversed(self.segments):
            last = segment.last_entry(allow_torn_tail=self.is_last(segment), verify=verify)
            if last is not None:
                return last.last_offset + 1
        return self.first_segment_offset

    def aborted_transactions(self) -> List[AbortedTransaction]:
        aborted = []
        for segment in self.segments:
            aborted.extend(segment.aborted_transactions())
        return aborted

    def check_abort_marker(self, aborted: AbortedTransaction, end_offset: int) -> None:
        """An aborted transaction entry ends at its producer's transaction marker: Kafka
        writes the entry, in the marker's segment, when it appends the marker. A damaged
        producer id or last offset would hide other records from read_committed. Entries
        of a marker at or past `end_offset` (one a live broker appended since the log was
        sized) are right while the data read holds no marker of that producer's after the
        entry's first offset."""
        last = aborted.last_offset
        if last < self.start_offset:
            return
        if last >= end_offset:
            for header in self._headers_from(max(aborted.first_offset, self.start_offset)):
                if header.base_offset >= end_offset:
                    return
                if header.is_control and header.producer_id == aborted.producer_id and \
                        header.base_offset >= aborted.first_offset:
                    raise CorruptLogError(
                        aborted.path, aborted.position,
                        f"aborted transaction entry (producer {aborted.producer_id}, offsets "
                        f"{aborted.first_offset}..{last}) ends past the log's end, but that "
                        f"transaction ends with the marker at offset {header.base_offset} in "
                        f"{self.directory}")
            return
        segment = self.segments[self.segment_index_for(last)]
        position = segment.offset_index.lookup(last)[1]
        for header in segment.iter_headers(position, allow_torn_tail=self.is_last(segment)):
            if header.last_offset < last:
                continue
            if header.base_offset == last and header.is_control and \
                    header.producer_id == aborted.producer_id:
                return
            break
        raise CorruptLogError(
            aborted.path, aborted.position,
            f"aborted transaction entry (producer {aborted.producer_id}, offsets "
            f"{aborted.first_offset}..{last}) has no transaction marker of that producer at "
            f"offset {last} in {self.directory}")

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the entries from the one holding `offset` to the end of the log."""
        first = self.segment_index_for(offset)
        for number, segment in enumerate(self.segments[first:], first):
            position = segment.offset_index.lookup(offset)[1] if number == first else 0
            yield from segment.iter_headers(position, allow_torn_tail=self.is_last(segment))

    def last_stable_offset(self, verify: bool = False, up_to: Optional[int] = None) -> int:
        """First offset of the earliest transaction still open at the end of the log, or
        at `up_to` (a high watermark: batches from there on do not count yet), at most
        that end and at least the log start.

        With `verify` every batch is checksummed before its header counts (any header's
        attributes, producer id or offsets can move the result), which reads the whole log.
        """
        open_since: Dict[int, int] = {}
        end = self.first_segment_offset
        for segment in self.segments:
            if up_to is not None and segment.base_offset >= up_to:
                break
            for header in segment.iter_headers(0, allow_torn_tail=self.is_last(segment),
                                               verify=verify):
                if up_to is not None and header.base_offset >= up_to:
                    break
                end = header.last_offset + 1
                if not header.is_transactional:
                    continue
                if header.is_control:
                    open_since.pop(header.producer_id, None)
                else:
                    open_since.setdefault(header.producer_id, header.base_offset)
        stable = min(open_since.values(), default=end)
        if up_to is not None:
            stable = min(stable, up_to)
        return max(stable, self.start_offset)

    def offset_for_timestamp(self, timestamp: int) -> Optional[int]:
        """Earliest offset whose record timestamp is >= `timestamp`, found as Kafka finds it.

        The first segment whose largest timestamp reaches the target is searched from the
        time index entry below the target, never below the log start; None when no record
        is that recent.
        """
        from .scan import first_offset_at_or_after_time

        start = self.start_offset
        for segment in self.segments[self.segment_index_for(start):]:
            max_ts = segment.time_index.max_timestamp
            if not self.is_last(segment) and max_ts is not None and max_ts < timestamp:
                continue
            found = first_offset_at_or_after_time(self, segment, timestamp, start)
            if found is not None:
                return found
        return None


def discover_partitions(paths: Iterable[str], config: Optional[StoreConfig] = None
                        ) -> List[PartitionLog]:
    """One partition log per topic-partition under the paths (see discover_copies); a
    partition found twice is an error here (read.replicas.consumer_partitions makes
    several copies one partition, as a read does)."""
    logs = discover_copies(paths, config)
    for before, log in zip(logs, logs[1:]):
        if before.topic_partition == log.topic_partition:
            raise SegmentLogError(
                f"topic {log.topic!r} partition {log.partition} appears twice: "
                f"{before.directory} and {log.directory} (copies of one partition, from "
                f"several brokers or log dirs, are read as one by a read, or by "
                f"segmentlog_datasource.read.replicas.consumer_partitions)")
    return logs


def discover_copies(paths: Iterable[str], config: Optional[StoreConfig] = None
                    ) -> List[PartitionLog]:
    """Partition logs under each path: a log dir, or a partition directory itself; local
    paths, file: URIs or URIs of a store (see storage), listed once each. Each is read
    with the offset checkpoints of the log dir that holds it. Several copies of one
    partition (several brokers' dirs, JBOD dirs) are all returned, in path order.

    A segmentlog write's unfinished publish is not seen: the log dir is read as it was
    before it (see format.pending).

    A path that holds neither a partition directory nor segments, but other things (a
    Parquet table, a folder of photos), is an error: it is not a Kafka log. An empty
    directory, or one with only Kafka's bookkeeping files, holds no partitions yet.
    """
    found: List[PartitionLog] = []
    seen = set()
    for given in paths:
        store, path = resolve(given, config)
        for log in _listed_whole(store, path):
            if (type(store), log.directory) in seen:
                continue  # the same directory given twice
            seen.add((type(store), log.directory))
            found.append(log)
    order = {id(log): number for number, log in enumerate(found)}
    return sorted(found, key=lambda log: (log.topic, log.partition, order[id(log)]))


def _listed_whole(store: Store, path: str) -> List[PartitionLog]:
    """The partitions under `path` as one state of its log dir, listed again while
    segmentlog writes begin publishing during the listing (see format.pending): the
    publish token and the journals are read first, the token again last."""
    logdirs = [path]
    if parse_partition_dir_name(store.basename(path)) is not None or \
            parse_moved_dir_name(store.basename(path)) is not None:
        logdirs.append(store.dirname(path))  # a partition directory given alone
    delay = 0.001
    for _ in range(pending.LISTING_ATTEMPTS):
        tokens = [pending.read_token(store, logdir) for logdir in logdirs]
        journals = {logdir: pending.find_journals(store, logdir, store.child_names(logdir))
                    for logdir in logdirs}
        tree = store.tree(path)
        if not tree.isdir(path):
            entry = tree.entry(path)
            if entry is not None and entry.kind == "file":
                raise SegmentLogError(
                    f"{path}: is a file; give the partition directory that holds it "
                    f"({store.dirname(path)}) or the log dir above that")
            raise SegmentLogError(f"{path}: no such directory" + (
                " (no objects under this prefix)" if store.remote else ""))
        alone = _is_partition_dir(store, tree, path, named=True)
        logdir = logdirs[-1] if alone else path
        view = pending.before_publishes(store, logdir, journals[logdir])
        logs = _listed(store, tree, path, alone, view)
        if [pending.read_token(store, d) for d in logdirs] == tokens and (
                not view or pending.before_publishes(store, logdir, journals[logdir]) == view):
            return logs
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    raise pending.listing_changed(path)


def _listed(store: Store, tree: TreeView, path: str, alone: bool,
            view: pending.BeforePublishes) -> List[PartitionLog]:
    """The partitions under `path` (`alone`: itself a partition directory) in `tree`,
    as they were before the unfinished publishes `view` describes."""
    candidates = []
    log_dir = None
    if alone:
        if path not in view.hidden:
            candidates.append(view.moved.get(path, path))
    else:
        foreign = []
        names = sorted(tree.names(path))
        log_dir = LogDirState(path, store, frozenset(
            name for name in names if name in checkpoints.OFFSET_CHECKPOINT_FILES), view)
        for name in names:
            child = store.join(path, name)
            # Dot-prefixed names are staging areas and records of segmentlog writes.
            if name.startswith("."):
                continue
            if child in view.hidden:
                continue  # published by a write not finished yet
            if tree.isdir(child) and _is_partition_dir(store, tree, child):
                candidates.append(view.moved.get(child, child))
            elif not (_LOGDIR_FILE.match(name) or _LOGDIR_MOVED.match(name)):
                foreign.append(name)
        # partition directories an unfinished overwrite dropped
        candidates.extend(view.moved[logical] for logical in view.extra_dirs(path, store)
                          if not tree.isdir(logical))
        if not candidates:
            tiered = _tiered_partitions(store, tree, path)
            if tiered:
                return tiered
        if not candidates and foreign:
            shown = ", ".join(repr(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise SegmentLogError(
                f"{path}: not a Kafka log dir or partition directory: it holds no "
                f"<topic>-<partition> directory and no segment file, but {shown}. Point "
                f"the source at the directory that holds the <topic>-<partition> "
                f"directories (or at one of them)"
            )
    if alone and view:
        log_dir = LogDirState(store.dirname(path), store, None, view)
    logical = {actual: logical for logical, actual in view.moved.items()}
    return [PartitionLog.open(directory, store, tree, log_dir, view=view,
                              logical=logical.get(directory))
            for directory in candidates]


def _tiered_partitions(store: Store, tree: TreeView, root: str) -> List["RemotePartitionLog"]:
    """Partitions under `root` in a tiered-storage (KIP-405) layout (see format.tiered)."""
    from . import tiered

    listing = tree.files_under(root)
    logs = []
    for remote in tiered.find_remote_partitions(listing):
        directory = store.join(root, remote.prefix.rstrip("/"))

        def read(name, position, length, directory=directory):
            return store.read_bytes(store.join(directory, name), position, length)

        files = tiered.partition_listing(listing, remote.prefix)
        copies = tiered.segment_copies(remote.layout, files, read)
        try:
            chosen = tiered.settle_by_layout(remote.layout, copies)
            layout_error = None
        except tiered.AmbiguousLayoutError as error:
            chosen, layout_error = [], error
        segments = {copy.segment_id: _remote_segment(store, directory, copy) for copy in copies}
        logs.append(RemotePartitionLog(
            directory, remote.topic, remote.partition,
            [segments[copy.segment_id] for copy in chosen], store,
            topic_id=remote.topic_id, layout=remote.layout, copies=copies,
            segments_by_id=segments, layout_error=layout_error))
    return logs


def _remote_segment(store: Store, directory: str, found) -> Segment:
    chunks = None if found.log_chunks is None else tuple(
        Chunk(c.original_offset, c.original_size, c.stored_offset, c.stored_size)
        for c in found.log_chunks)
    locations = {}
    if found.log_object is not None:
        locations[LOG_SUFFIX] = (store.join(directory, found.log_object), 0, found.log_size)
    for suffix, where in ((INDEX_SUFFIX, found.offset_index),
                          (TIME_INDEX_SUFFIX, found.time_index),
                          (TXN_INDEX_SUFFIX, found.txn_index),
                          (REMOTE_EPOCHS_SUFFIX, found.leader_epoch_index)):
        if where is not None:
            locations[suffix] = (store.join(directory, where.name), where.offset, where.length)
    return Segment(directory, found.base_offset, found.log_size, store=store,
                   locations=locations, log_chunks=chunks, segment_id=found.segment_id)


# Where a remote segment's leader epochs up to its end are (the uploading broker's
# leader-epoch-checkpoint; a file of its own or a slice of Aiven's packed indexes)
REMOTE_EPOCHS_SUFFIX = ".leader_epoch_checkpoint"


class RemotePartitionLog(PartitionLog):
    """A partition of a tiered-storage layout. `segments` are those the layout alone
    shows a consumer (reading it raises `layout_error` where the layout cannot tell);
    `copies` are every segment the objects show, `segments_by_id` each as a Segment,
    for the remote log metadata to choose from (read.tiered)."""

    def __init__(self, directory, topic, partition, segments, store, *, topic_id, layout,
                 copies, segments_by_id, layout_error=None):
        self.layout_error = layout_error
        super().__init__(directory, topic, partition, segments, store)
        self.remote_topic_id = topic_id
        self.layout = layout
        self.copies = copies
        self.segments_by_id = segments_by_id

    @property
    def segments(self) -> List[Segment]:
        if self.layout_error is not None:
            raise self.layout_error
        return self._segments

    @segments.setter
    def segments(self, segments: List[Segment]) -> None:
        self._segments = segments

    def topic_id(self) -> Optional[str]:
        return self.remote_topic_id


def _is_partition_dir(store: Store, tree: TreeView, path: str, named: bool = False) -> bool:
    """A `<topic>-<partition>` directory that holds a segment, or else only what Kafka
    keeps in a partition directory (an empty one counts: a partition with no data);
    `named` (a path given, not one listed): a renamed one too (parse_moved_dir_name)."""
    name = store.basename(path)
    if parse_partition_dir_name(name) is None and not (named and parse_moved_dir_name(name)):
        return False
    try:
        names = tree.names(path)
    except OSError:
        return False
    if any(SEGMENT_NAME.match(name) for name in names):
        return True
    return all(
        name in KNOWN_FILES or name.endswith(_PARTITION_FILE_SUFFIXES)
        and (tree.entry(store.join(path, name)) or (None, 0))[0] == "file"
        for name in names
    )
