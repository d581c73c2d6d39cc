"""What a write finds in the log dir: topics, partition counts, partition tails.

Nothing here changes data: it lists `<topic>-<partition>` directories, checks that a
partition's last segment can be continued (complete last batch with a valid CRC, indexes
trimmed), and takes fingerprints to notice concurrent changes.
"""
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import CorruptLogError, InvalidOptionError, SegmentLogError, StoreError
from ..format.indexes import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from ..format.checkpoints import OFFSET_CHECKPOINT_FILES
from ..format.log import (
    PartitionLog, SEGMENT_NAME, discover_copies, parse_partition_dir_name, partition_dir_name,
)
from ..format.entries import read_entry_header, verify_checksum
from ..format.pending import STAGING_PREFIX  # readers skip staging areas by it
from ..storage.local import raise_if_link_loop

from .errors import InvalidInputError, TopicLayoutError

# Names a write keeps in the log dir; readers skip dot-prefixed names, so topics may not
# start with '.'.
LOCK_PREFIX = ".segmentlog-lock-"
MAX_TOPIC_LENGTH = 249
# What Kafka keeps beside the partition directories of a log dir.
KAFKA_LOGDIR_FILES = frozenset(OFFSET_CHECKPOINT_FILES) | {"meta.properties"}
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic, source: str = "option 'topic'") -> str:
    """Kafka's topic name rules, plus: no leading '.' (readers skip dot-prefixed dirs)."""
    if not isinstance(topic, str) or not topic:
        raise InvalidInputError(f"{source}: a topic name must be a non-empty string, got {topic!r}")
    if topic in (".", ".."):
        raise InvalidInputError(f"{source}: topic name {topic!r} is not allowed by Kafka")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidInputError(
            f"{source}: topic name {topic[:40]!r}... is {len(topic)} characters; Kafka allows "
            f"{MAX_TOPIC_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidInputError(
            f"{source}: topic name {topic!r} has characters Kafka does not allow "
            f"(only ASCII letters, digits, '.', '_' and '-')"
        )
    if topic.startswith("."):
        raise InvalidInputError(
            f"{source}: topic name {topic!r} starts with '.'; segmentlog keeps dot-prefixed "
            f"names for staging areas that readers skip"
        )
    return topic


def list_topics(logdir: str) -> Dict[str, List[int]]:
    """Partitions of each topic found as `<topic>-<partition>` directories (sorted)."""
    topics: Dict[str, List[int]] = {}
    if not os.path.isdir(logdir):
        return topics
    for name in os.listdir(logdir):
        if name.startswith("."):
            continue
        parsed = parse_partition_dir_name(name)
        if parsed is None or not os.path.isdir(os.path.join(logdir, name)):
            continue
        topics.setdefault(parsed[0], []).append(parsed[1])
    for partitions in topics.values():
        partitions.sort()
    return topics


def check_written_logdir(logdir: str) -> None:
    """Refuse, before anything is created, a log dir that a read would not find again: a
    symbolic link that loops or leads nowhere, or a directory of other data (a Parquet
    table, photos) that holds no partition directory, which a read refuses as not a log."""
    try:
        os.stat(logdir)
    except FileNotFoundError:
        if os.path.islink(logdir):
            raise InvalidOptionError(
                f"{logdir} is a symbolic link to {os.readlink(logdir)}, which does not "
                f"exist: create that directory, or write to another path") from None
        return
    except OSError as exc:
        raise_if_link_loop(exc, logdir)
        raise
    if not os.path.isdir(logdir) or list_topics(logdir):
        return
    try:
        discover_copies([logdir])
        return
    except StoreError:
        raise
    except SegmentLogError:
        foreign = sorted(name for name in os.listdir(logdir)
                         if not name.startswith(".") and name not in KAFKA_LOGDIR_FILES)
        if not foreign:
            raise  # refused for another reason, which the read's error names
    shown = ", ".join(repr(name) for name in foreign[:5]) + (", ..." if len(foreign) > 5 else "")
    raise InvalidOptionError(
        f"{logdir} is not a Kafka log dir: it holds {shown} and no <topic>-<partition> "
        f"directory, and a read of it fails. Write into a new or empty directory, or into a "
        f"log dir")


def partition_count(logdir: str, topic: str, partitions: List[int]) -> int:
    """The topic's partition count; its directories must be partitions 0..n-1."""
    expected = list(range(len(partitions)))
    if partitions != expected:
        missing = sorted(set(range(max(partitions) + 1)) - set(partitions))
        raise TopicLayoutError(
            f"topic {topic!r} in {logdir} has partition directories {partitions}; "
            f"partition(s) {missing} are missing, so its partition count is unknown"
        )
    return len(partitions)


def check_num_partitions(option_value: Optional[int], topic: str, existing: int) -> None:
    if option_value is not None and option_value != existing:
        raise InvalidOptionError(
            f"option 'numPartitions' is {option_value} but topic {topic!r} already has "
            f"{existing} partitions; appending cannot change a topic's partition count "
            f"(drop the option, or use mode 'overwrite' to rewrite the topic)"
        )


def partition_dir(logdir: str, topic: str, partition: int) -> str:
    return os.path.join(logdir, partition_dir_name(topic, partition))


# ----------------------------------------------------------------- fingerprints

def partition_fingerprint(path: str) -> Optional[Tuple]:
    """What changes when anything appends to, rolls, replaces or deletes the partition."""
    try:
        dir_stat = os.stat(path)
        logs = sorted(name for name in os.listdir(path)
                      if name.endswith(".log") and SEGMENT_NAME.match(name))
    except FileNotFoundError:
        return None
    last = None
    if logs:
        try:
            st = os.stat(os.path.join(path, logs[-1]))
            last = (st.st_ino, st.st_size)
        except FileNotFoundError:
            last = None
    return (dir_stat.st_ino, tuple(logs), last)


def topic_fingerprint(logdir: str, topic: str, partitions: List[int]) -> Dict[int, Tuple]:
    return {p: partition_fingerprint(partition_dir(logdir, topic, p)) for p in partitions}


# ---------------------------------------------------------------------- tails

@dataclass
class PartitionTail:
    log_end_offset: int
    leader_epoch: int  # of the last batch, -1 when unknown


def inspect_tail(directory: str) -> PartitionTail:
    """Check that the partition can be continued and find its log end offset.

    Refuses a last segment whose indexes are still preallocated (a live broker's active
    segment), one that ends in a torn or partial batch, and one whose last batch fails
    its CRC.
    """
    try:
        log = PartitionLog.open(directory)
    except SegmentLogError as exc:
        raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
    if not log.segments:
        return PartitionTail(0, -1)
    segment = log.segments[-1]
    for path, entry_size, parse in ((segment.index_path, OFFSET_ENTRY.size, OffsetIndex.parse),
                                    (segment.time_index_path, TIME_ENTRY.size, TimeIndex.parse)):
        if not os.path.exists(path):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            entries = len(parse(data, segment.base_offset, path=path))
        except CorruptLogError as exc:
            raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
        if len(data) != entries * entry_size:
            raise TopicLayoutError(
                f"cannot append to {directory}: {os.path.basename(path)} is {len(data)} bytes "
                f"for {entries} entries, i.e. still preallocated. This is the active segment "
                f"of a running (or uncleanly stopped) Kafka broker; stop the broker cleanly "
                f"(or let it recover the log) before appending with segmentlog"
            )
    end_offset, epoch = _scan_tail(directory, segment)
    if end_offset is None:  # empty last segment: the log end offset is its base offset
        end_offset = segment.base_offset
        for earlier in reversed(log.segments[:-1]):
            _, epoch = _scan_tail(directory, earlier, quiet=True)
            if epoch is not None:
                break
    return PartitionTail(end_offset, -1 if epoch is None else epoch)


def _scan_tail(directory, segment, quiet=False):
    """(log end offset, leader epoch of the last batch) of one segment; (None, None) if empty."""
    if segment.size == 0:
        return None, None
    try:
        segment.offset_index
    except CorruptLogError as exc:
        if quiet:
            return None, None
        raise TopicLayoutError(f"cannot append to {directory}: {exc}") from exc
    try:
        last = segment.last_entry(allow_torn_tail=False)
    except CorruptLogError as exc:
        if quiet:
            return None, None
        raise TopicLayoutError(
            f"cannot append to {directory}: its last segment {os.path.basename(segment.log_path)} "
            f"does not end with a complete batch ({exc.reason}). A broker would truncate it "
            f"during recovery; restore or recover the partition before appending"
        ) from exc
    if last is None:
        return None, None
    with open(segment.log_path, "rb") as handle:
        data = os.pread(handle.fileno(), last.size, last.position)
    try:
        verify_checksum(data, 0, read_entry_header(data, 0, last.position, segment.log_path),
                        segment.log_path)
    except CorruptLogError as exc:
        if quiet:
            return last.last_offset + 1, None
        raise TopicLayoutError(
            f"cannot append to {directory}: the last batch of its log is damaged ({exc})"
        ) from exc
    epoch = last.partition_leader_epoch if last.magic == 2 else -1
    return last.last_offset + 1, epoch
