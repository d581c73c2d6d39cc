"""A cluster's partitions as a consumer sees them: copies made one, bounded as Kafka serves.

Several copies of one partition (the log dirs of several brokers, or one broker's JBOD
dirs) are one partition. The copy whose leader-epoch-checkpoint ends with the highest
epoch (ties: the highest log end offset) is the leader's: it serves every read, and its
log dir's checkpoints give the log start offset and high watermark. Another copy holds
the leader's batches up to where Kafka would truncate it on its next fetch (its last
epoch's end in the leader's epochs); past that it has diverged. Within what a read
plans, every copy's batch headers must equal the leader's (base offset, last offset,
CRC) up to that point and below the read's end; only headers are read, never records.
Copies without leader epochs are compared over all that both hold.
"""
import bisect
import os
from array import array
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, Optional, Tuple

from ..errors import CorruptLogError
from ..format.entries import BatchHeader
from ..format.fastpath import batch_header_walker
from ..format.log import PartitionLog, RemotePartitionLog, discover_copies, walk_local_file
from ..storage import StoreConfig
from .options import ReadOptions
from .tiered import join_tiered


def consumer_partitions(paths, config: Optional[StoreConfig] = None) -> List[PartitionLog]:
    """One log per topic-partition under `paths`: the serving copy, its other copies in
    its `replicas`."""
    groups: Dict[Tuple[str, int], List[PartitionLog]] = {}
    remotes: List[RemotePartitionLog] = []
    for log in discover_copies(paths, config):
        if isinstance(log, RemotePartitionLog):
            remotes.append(log)
        else:
            groups.setdefault(log.topic_partition, []).append(log)
    leaders = {}
    for topic_partition, copies in groups.items():
        leader = choose_leader(copies)
        leader.replicas = [copy for copy in copies if copy is not leader]
        leaders[topic_partition] = leader
    if remotes:
        joined = join_tiered(leaders, remotes)
        for topic_partition, log in joined.items():
            if topic_partition in leaders and log is not leaders[topic_partition]:
                log.replicas = leaders[topic_partition].replicas
        return sorted(joined.values(), key=lambda log: log.topic_partition)
    return list(leaders.values())


def last_epoch(log: PartitionLog) -> Optional[int]:
    epochs = log.leader_epochs()
    return epochs[-1].epoch if epochs else None


def choose_leader(copies: List[PartitionLog]) -> PartitionLog:
    if len(copies) == 1:
        return copies[0]

    def rank(log):
        epoch = last_epoch(log)
        return (-1 if epoch is None else epoch, log.end_offset())

    return max(copies, key=rank)  # the first of equals: the earlier path


def read_bound(log: PartitionLog, read: ReadOptions) -> Optional[int]:
    """Where a read of `log` stops: its high watermark (readUpTo=highWatermark, the
    default, where a checkpoint covers it), else None: at the log end."""
    return log.high_watermark if read.to_high_watermark else None


def agreed_end(copy: PartitionLog, leader: PartitionLog) -> int:
    """Where `copy` stops holding the leader's data: at its log end, or where Kafka
    would truncate it (the end, in the leader's epochs, of the copy's last epoch)."""
    end = copy.end_offset()
    mine, theirs = copy.leader_epochs(), leader.leader_epochs()
    if mine and theirs:
        last = mine[-1].epoch
        later = [entry.start_offset for entry in theirs if entry.epoch > last]
        end = min(end, later[0] if later else leader.end_offset())
    return end


def diverges_at(copy: PartitionLog, leader: PartitionLog) -> Optional[int]:
    """The first offset `copy` holds that the leader does not (None: it diverges nowhere)."""
    end = agreed_end(copy, leader)
    return end if end < copy.end_offset() else None


def check_replicas(log: PartitionLog, start: int, end: int) -> None:
    """Every other copy of `log` holds the same batches in [start, end), as far as it
    holds the leader's data (see agreed_end); a CorruptLogError naming both files and
    the offset otherwise. Magic-2 batch headers are walked by the compiled walk where the
    segments are local files; what it leaves (legacy messages, a torn tail, a store)
    is compared header by header in Python."""
    spans = {}
    for copy in log.replicas:
        until = min(end, agreed_end(copy, log))
        # Below the serving copy's local segments, a joined log's remote ones serve; a
        # copy on a broker is compared with the serving copy's own segments only.
        begin = max(start, copy.start_offset, log.local_start_offset)
        if begin < until:
            spans[id(copy)] = (begin, until)
    if not spans:
        return
    # The leader's headers once, over the widest span, for every copy; the copies are
    # walked side by side (the compiled walk lets go of the GIL while it reads).
    widest = (min(b for b, _ in spans.values()), max(u for _, u in spans.values()))
    copies = [copy for copy in log.replicas if id(copy) in spans]
    walks = [(log, widest)] + [(copy, spans[id(copy)]) for copy in copies]
    with ThreadPoolExecutor(max_workers=min(len(walks), os.cpu_count() or 1)) as pool:
        leader, *followers = pool.map(lambda walk: _WalkedHeaders(walk[0], *walk[1]), walks)
    for copy, theirs in zip(copies, followers):
        begin, until = spans[id(copy)]
        reached = min(leader.reached, theirs.reached, until)
        if leader.rows(begin, reached) != theirs.rows(begin, reached):
            _compare_headers(log, copy, begin, reached)  # names the files and the offset
        _compare_headers(log, copy, max(begin, reached), until)


_TRIPLE = 24  # bytes of one walked row: base offset, last offset, CRC (native int64 each)


class _WalkedHeaders:
    """(base offset, last offset, CRC) of the batches of `log` holding offsets in
    [begin, until), as far as the compiled walk goes (`reached`: until when it saw them
    all), packed as the walk packs them, so that two copies compare as bytes."""

    def __init__(self, log: PartitionLog, begin: int, until: int):
        walk = batch_header_walker()
        packed = []
        reached = begin
        first = log.segment_index_for(begin)
        for number, segment in enumerate(log.segments[first:], first):
            if segment.base_offset >= until or segment.store.remote or segment.log_chunks:
                break
            following = log.segments[number + 1].base_offset \
                if number + 1 < len(log.segments) else None
            # The offset index only where the span starts or ends inside this segment.
            position = 0
            if number == first and begin > segment.base_offset:
                position = segment.offset_index.lookup(begin)[1]
            end = segment.size
            if (following is None and until < log.end_offset()) or \
                    (following is not None and following > until):
                stop_at = segment.offset_index.position_after(until - 1)
                end = segment.size if stop_at is None else min(stop_at, segment.size)
            stop, _, rows = walk_local_file(walk, segment.log_path, position, end,
                                            segment.base_offset)
            packed.append(rows)
            if stop < end:
                # An entry the walk does not take: the Python comparison goes on from it.
                if rows:
                    reached = max(reached, array("q", rows[-_TRIPLE:])[1] + 1)
                break
            if following is None or end < segment.size:
                reached = until
                break
            reached = max(reached, following)
        self.packed = b"".join(packed)
        self.reached = min(reached, until)
        triples = array("q", self.packed)
        self._bases, self._lasts = triples[0::3], triples[1::3]

    def rows(self, begin: int, until: int) -> bytes:
        """The packed rows of the batches holding offsets in [begin, until)."""
        low = bisect.bisect_left(self._lasts, begin)
        high = bisect.bisect_left(self._bases, until)
        return self.packed[low * _TRIPLE:max(low, high) * _TRIPLE]


def _compare_headers(log: PartitionLog, copy: PartitionLog, begin: int, until: int) -> None:
    if begin >= until:
        return
    theirs = _headers(copy, begin, until)
    for mine in _headers(log, begin, until):
        other = next(theirs, None)
        if other is None:
            break
        if (mine.base_offset, mine.last_offset, mine.crc) != \
                (other.base_offset, other.last_offset, other.crc):
            raise CorruptLogError(
                other.path, other.position,
                f"copies of {log.topic}-{log.partition} disagree at offset "
                f"{min(mine.base_offset, other.base_offset)}: {mine.path} holds offsets "
                f"{mine.base_offset}..{mine.last_offset} (CRC {mine.crc:#010x}) at byte "
                f"{mine.position}, this copy offsets {other.base_offset}.."
                f"{other.last_offset} (CRC {other.crc:#010x}); below the high watermark "
                f"the copies of a partition hold the same batches. Read the copies "
                f"apart (one path each) to see which holds what")


def _headers(log: PartitionLog, start: int, end: int) -> Iterator["_WithPath"]:
    """Batch headers of `log` holding offsets in [start, end), each with its file path."""
    first = log.segment_index_for(start)
    for number, segment in enumerate(log.segments[first:], first):
        if segment.base_offset >= end:
            return
        position = segment.offset_index.lookup(start)[1] if number == first else 0
        for header in segment.iter_headers(position, allow_torn_tail=log.is_last(segment)):
            if header.base_offset >= end:
                return
            if header.last_offset >= start:
                yield _WithPath(header, segment.log_path)


class _WithPath:
    __slots__ = ("header", "path")

    def __init__(self, header: BatchHeader, path: str):
        self.header, self.path = header, path

    def __getattr__(self, name):
        return getattr(self.header, name)


def replica_report(log: PartitionLog) -> List[dict]:
    """Per copy, leader first: where it is, its last epoch, log end, checkpointed high
    watermark and log start, and where it diverges from the leader."""
    from ..format import checkpoints

    rows = []
    for copy in [log] + log.replicas:
        hw = copy.checkpointed(checkpoints.HIGH_WATERMARK_FILE)
        rows.append({
            "directory": copy.directory,
            "leader": copy is log,
            "last_epoch": last_epoch(copy),
            "log_start_offset": copy.start_offset,
            "log_end_offset": copy.end_offset(),
            "high_watermark_checkpoint": None if hw is None else hw.offset,
            "lag": None if copy is log else log.end_offset() - agreed_end(copy, log),
            "diverges_at": None if copy is log else diverges_at(copy, log),
        })
    return rows
