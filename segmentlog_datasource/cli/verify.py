"""`segmentlog verify`: every entry and index of a log checked, each finding located.

A finding is damage (the exit status says so), a torn tail (the last segment of a live or
crashed broker ends inside an entry, or in preallocated zeros: Kafka's recovery
truncates it, nothing is lost that was acknowledged) or a note.

Beside the segments: each offset checkpoint of a log dir, and each partition's
leader-epoch-checkpoint and partition.metadata, must parse as Kafka loads them; a
checkpointed high watermark and log start offset must lie within the log they describe;
leader epochs must grow with their start offsets; and the copies of a partition (several
brokers' log dirs) must hold the same batches below the high watermark, as far as each
holds the leader's data. A checkpoint finding names its file and line.
"""
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import CheckpointError, CorruptLogError, SegmentLogError
from ..format import PartitionLog, Segment, checkpoints
from ..format.checkpoints import leader_epoch_faults
from ..format.log import LogDirState, RemotePartitionLog
from ..read.tiered import TieredLog, join_tiered
from ..read.replicas import check_replicas, choose_leader, diverges_at
from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY, parse_transaction_index
from ..format.log import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .entries import LogEntry, LogStop, walk_log
from .files import offset_index_entries, time_index_entries

DAMAGE, TORN_TAIL, NOTE = "damage", "torn tail", "note"
TOPIC_ID_LINE = 2  # of partition.metadata, after its version line


@dataclass
class Finding:
    kind: str  # DAMAGE, TORN_TAIL or NOTE
    file: str
    position: Optional[int]  # a byte of the file, None when a line is at fault
    message: str
    line: Optional[int] = None  # the line of a checkpoint file, from 1

    @property
    def where(self) -> str:
        if self.line is not None:
            return f"{self.file} line {self.line}"
        if self.position is not None:
            return f"{self.file} at byte {self.position}"
        return self.file

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


def _checkpoint_damage(error: CheckpointError) -> Finding:
    return Finding(DAMAGE, error.path, None, f"{error.reason}; {error.remedy}", error.line)


def verify_log_dir(log_dir: LogDirState) -> List[Finding]:
    """Each offset checkpoint file of the log dir parses (entries for partitions that are
    not there are fine: Kafka ignores them)."""
    findings = []
    for name in checkpoints.OFFSET_CHECKPOINT_FILES:
        if log_dir.has_file(name):
            try:
                log_dir.entries(name)
            except CheckpointError as error:
                findings.append(_checkpoint_damage(error))
    return findings


def verify_beside_segments(log: PartitionLog, tiered: bool = False) -> List[Finding]:
    """The partition's own checkpoint files, and its log dir's offsets for it against
    its log (`tiered`: its older segments are in a remote store read with it). A log dir
    file that does not parse is verify_log_dir's finding."""
    findings: List[Finding] = []
    epochs_path = log.store.join(log.directory, checkpoints.LEADER_EPOCH_FILE)
    try:
        epochs = log.leader_epochs()
    except CheckpointError as error:
        findings.append(_checkpoint_damage(error))
    else:
        for line, problem in leader_epoch_faults(epochs or []):
            remedy = CheckpointError(epochs_path, line, problem).remedy
            findings.append(Finding(DAMAGE, epochs_path, None, f"{problem}; {remedy}", line))
    try:
        log.topic_id()
    except CheckpointError as error:
        findings.append(_checkpoint_damage(error))
    try:
        end = log.end_offset()
        high_watermark = log.checkpointed(checkpoints.HIGH_WATERMARK_FILE)
        log_start = log.checkpointed(checkpoints.LOG_START_FILE)
    except (CorruptLogError, CheckpointError):
        return findings  # found by the segment checks, or by verify_log_dir
    name = f"{log.topic}-{log.partition}"
    if high_watermark is not None and high_watermark.offset > end:
        findings.append(Finding(
            DAMAGE, log.log_dir.file_path(checkpoints.HIGH_WATERMARK_FILE), None,
            f"high watermark {high_watermark.offset} of {name} is past its log end {end}: "
            f"records the cluster acknowledged are missing from {log.directory}",
            high_watermark.line))
    if log_start is not None:
        path = log.log_dir.file_path(checkpoints.LOG_START_FILE)
        if log_start.offset > end:
            findings.append(Finding(
                DAMAGE, path, None,
                f"log start offset {log_start.offset} of {name} is past its log end {end}",
                log_start.line))
        elif log_start.offset < log.first_segment_offset:
            # Retention deletes segments before the next checkpoint is written: Kafka
            # then starts the log at its first segment.
            findings.append(Finding(
                NOTE, path, None,
                f"log start offset {log_start.offset} of {name} is below its first "
                f"segment's base offset {log.first_segment_offset}" + (
                    ": the offsets below are in the remote store" if tiered
                    else ", where the log starts"),
                log_start.line))
    return findings


def verify_replicas(copies: List[PartitionLog]
                    ) -> Tuple[Dict[Tuple[str, int], PartitionLog], Dict[str, List[Finding]]]:
    """The copy that serves each partition, as a read chooses it (read.replicas; the
    first copy where a checkpoint that does not parse leaves no choice), and findings by
    copy directory: the copies compared as a read compares them, over [log start, high
    watermark) of the leader's copy. A copy that diverges from the leader's (its records
    past that point are not data) is a note."""
    groups: Dict[Tuple[str, int], List[PartitionLog]] = {}
    for copy in copies:
        groups.setdefault(copy.topic_partition, []).append(copy)
    leaders = {key: group[0] for key, group in groups.items()}
    findings: Dict[str, List[Finding]] = {}
    for key, group in groups.items():
        if len(group) < 2:
            continue
        try:
            leader = choose_leader(group)
            leaders[key] = leader
            leader.replicas = [copy for copy in group if copy is not leader]
            end = leader.high_watermark
            check_replicas(leader, leader.start_offset,
                           leader.end_offset() if end is None else end)
        except CorruptLogError as damage:
            at_fault = next((copy for copy in group
                             if copy.store.dirname(damage.path or "") == copy.directory), None)
            # A disagreement names the files of two copies; other damage, in one copy's
            # segments, is what that copy's own checks report.
            if at_fault is not None and any(copy.directory in damage.reason
                                            for copy in group if copy is not at_fault):
                findings.setdefault(at_fault.directory, []).append(
                    Finding(DAMAGE, damage.path, damage.position, damage.reason))
            continue
        except SegmentLogError:
            continue  # a checkpoint that does not parse: its own finding
        _note_divergence(leader, findings)
        _check_topic_ids(leader, findings)
    return leaders, findings


def _note_divergence(leader: PartitionLog, findings: Dict[str, List[Finding]]) -> None:
    for copy in leader.replicas:
        try:
            point = diverges_at(copy, leader)
        except SegmentLogError:
            continue
        if point is not None:
            findings.setdefault(copy.directory, []).append(Finding(
                NOTE, copy.directory, None,
                f"this copy diverges from the leader's ({leader.directory}) at offset "
                f"{point}: its records from there on are not data (Kafka truncates them "
                f"when the copy next fetches)"))


def _check_topic_ids(leader: PartitionLog, findings: Dict[str, List[Finding]]) -> None:
    try:
        expected = leader.topic_id()
    except CheckpointError:
        return
    for copy in leader.replicas:
        try:
            found = copy.topic_id()
        except CheckpointError:
            continue
        if None not in (expected, found) and found != expected:
            path = copy.store.join(copy.directory, checkpoints.PARTITION_METADATA_FILE)
            findings.setdefault(copy.directory, []).append(Finding(
                DAMAGE, path, None,
                f"topic id {found} differs from the leader's copy's {expected} "
                f"({leader.directory}): the copies are of two topics of one name (one "
                f"deleted and created again); read them apart", TOPIC_ID_LINE))


def verify_copies(copies: List[PartitionLog], advance: Callable[[int], None] = lambda n: None,
                  starting: Callable[[PartitionLog], None] = lambda log: None
                  ) -> Tuple[List[dict], List[dict]]:
    """(log dirs, partitions) of a verify report: per log dir its offset checkpoint
    findings; per copy of a partition its segments', indexes' and checkpoints' findings,
    and the comparison with the other copies. `starting(copy)` is told of each copy
    before its segments are read, `advance(n)` of every n bytes (for a progress bar)."""
    remotes = [copy for copy in copies if isinstance(copy, RemotePartitionLog)]
    copies = [copy for copy in copies if not isinstance(copy, RemotePartitionLog)]
    log_dirs: Dict[str, LogDirState] = {}
    for copy in copies:
        if copy.log_dir.path is not None:
            log_dirs.setdefault(copy.log_dir.path, copy.log_dir)
    dir_report = [{"path": path, "findings": [f.as_dict() for f in verify_log_dir(state)]}
                  for path, state in log_dirs.items()]
    leaders, by_copy = verify_replicas(copies)
    partitions = []
    tiered = set()
    if remotes:
        partitions.extend(verify_remote(remotes, leaders, advance, starting))
        tiered = {(p["topic"], p["partition"]) for p in partitions if "remote_segments" in p}
    for copy in copies:
        starting(copy)
        findings = verify_partition(copy, advance) + \
            verify_beside_segments(copy, copy.topic_partition in tiered) + \
            by_copy.get(copy.directory, [])
        partitions.append({"topic": copy.topic, "partition": copy.partition,
                           "directory": copy.directory,
                           "leader": leaders[copy.topic_partition] is copy,
                           "findings": [f.as_dict() for f in findings]})
    return dir_report, partitions


def verify_remote(remotes: List[RemotePartitionLog], leaders: Dict[Tuple[str, int], PartitionLog],
                  advance: Callable[[int], None] = lambda n: None,
                  starting: Callable[[PartitionLog], None] = lambda log: None) -> List[dict]:
    """Each remote partition of a tiered-storage layout: every segment the store holds
    checked on its own (entries, indexes), and, where the `__remote_log_metadata`
    partitions are among the paths, which segments count and why the others do not
    (read.tiered); without them, a note where the layout alone cannot tell."""
    joined, join_error = {}, None
    try:
        joined = join_tiered(leaders, remotes)
    except SegmentLogError as error:  # noted below for the partition it names
        join_error = error
    report = []
    for remote in remotes:
        starting(remote)
        findings: List[Finding] = []
        for copy in remote.copies:
            if copy.missing:
                continue  # an upload or a deletion not finished: the metadata says which
            segment = remote.segments_by_id[copy.segment_id]
            alone = PartitionLog(remote.directory, remote.topic, remote.partition, [segment],
                                 remote.store)
            findings.extend(verify_partition(alone, advance))
        log = joined.get(remote.topic_partition)
        counted = log.describe_remote() if isinstance(log, TieredLog) and \
            log.remote is remote else None
        if counted is None:
            problem = remote.layout_error
            if problem is None and join_error is not None and \
                    remote.directory in str(join_error):
                problem = join_error
            if problem is not None:
                findings.append(Finding(NOTE, remote.directory, None, str(problem)))
        report.append({"topic": remote.topic, "partition": remote.partition,
                       "directory": remote.directory, "leader": False, "remote": True,
                       "findings": [f.as_dict() for f in findings],
                       **({"remote_segments": counted} if counted is not None else {})})
    return report


def verified_bytes(copies: List[PartitionLog]) -> int:
    """What verify reads of `copies`' segments (every remote segment the store holds)."""
    total = 0
    for copy in copies:
        if isinstance(copy, RemotePartitionLog):
            total += sum(c.log_size for c in copy.copies if not c.missing)
        else:
            total += sum(segment.size for segment in copy.segments)
    return total
