"""Consumer groups' committed offsets and lag, from `__consumer_offsets` and the
partitions beside it: what `kafka-consumer-groups --describe` shows, with no cluster.

The committed offsets are those Kafka's group coordinator loads from its partitions: the
last commit of each group, topic and partition in offset order (LegacyOffsetCommit and
OffsetCommit records alike); a tombstone removes it; a transactional commit counts once
its transaction's COMMIT marker is read and never after an ABORT. Groups of every protocol
commit so: classic groups, consumer groups of the KIP-848 protocol, streams groups; each
row says which (the type of the group's latest metadata record; a group with commits
alone is a classic one, as Kafka's coordinator makes it). The lag is the partition's high watermark (what a consumer can read, the
`LOG-END-OFFSET` Kafka's tool shows) minus the committed offset.
"""
import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from ..errors import InvalidOptionError, SegmentLogError
from ..format.internal.group_records import GROUP_TYPES, OFFSET_COMMIT_TYPES
from ..format.internal.registry import internal_topics
from .fragments import scan_fragments, scan_options
from .options import ReadOptions, parse_read_options
from .planning import offset_ranges, plan_ranges
from .replicas import consumer_partitions, read_bound

CONSUMER_OFFSETS = "__consumer_offsets"
CLASSIC = "classic"
GroupTopicPartition = Tuple[str, str, int]


@dataclass
class CommittedOffset:
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: Optional[int]
    metadata: Optional[str]
    commit_timestamp: Optional[int]
    expire_timestamp: Optional[int]
    written_at: int  # the commit record's offset in __consumer_offsets


@dataclass
class PartitionLag:
    group: str
    group_type: str  # classic, consumer, streams (share groups commit no offsets)
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: Optional[int]
    metadata: Optional[str]
    commit_timestamp: Optional[int]
    log_start_offset: Optional[int]  # None: no directory of the partition is loaded
    log_end_offset: Optional[int]
    high_watermark: Optional[int]
    lag: Optional[int]

    def to_dict(self) -> dict:
        return asdict(self)


LAG_COLUMNS = [name for name in PartitionLag.__dataclass_fields__]
AS_OF_EXAMPLE = "2026-11-25T03:00:00Z"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def as_of_millis(at, option: str) -> Optional[int]:
    """The moment `at` (the `at` of consumer_lag, the command line's --at, named
    `option` in errors) as epoch milliseconds: epoch milliseconds (an int, or text of
    digits), an ISO 8601 time with Z or an offset (text without one is UTC, on the
    command line and in Python alike), or a datetime (a naive one is local time, as
    Python's datetime.timestamp() takes it); None stays None. Anything else, or a moment
    before 1970, is an InvalidOptionError naming `option`."""
    if at is None:
        return None
    text = at.strip() if isinstance(at, str) else None
    if isinstance(at, int) and not isinstance(at, bool):
        millis = at
    elif text is not None and text.lstrip("-").isdigit():
        millis = int(text)
    elif text is not None:
        try:
            moment = dt.datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
        except ValueError:
            raise InvalidOptionError(
                f"{option}: {at!r} is neither epoch milliseconds nor an ISO 8601 time such "
                f"as {AS_OF_EXAMPLE} or {AS_OF_EXAMPLE[:-1]}+01:00 (without Z or an offset, "
                f"a time is UTC)", option) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        millis = (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    elif isinstance(at, dt.datetime):
        moment = at if at.tzinfo is not None else at.astimezone()
        millis = (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    else:
        raise InvalidOptionError(
            f"{option}: {at!r} (a {type(at).__name__}) is not a moment: give epoch "
            f"milliseconds, an ISO 8601 time such as {AS_OF_EXAMPLE}, or a datetime", option)
    if millis < 0:
        raise InvalidOptionError(f"{option}: {at!r} is before 1970", option)
    return millis


def internal_read_options(paths: List[str], options: Optional[dict], topic: str
                          ) -> ReadOptions:
    """The read of an internal topic's partitions under `paths`, markers included."""
    given = dict(options or {})
    given.pop("path", None)
    given["paths"] = json.dumps(list(paths))
    given["subscribe"] = topic
    given["includeMetadata"] = "true"
    given["includeControlRecords"] = "true"
    return parse_read_options(given)


def topic_rows(read: ReadOptions, logs: Dict, topic_name: str, progress=None
               ) -> Iterator[dict]:
    """The rows of `topic_name`'s partitions among `logs`, markers included, in offset
    order. `progress` (see consumer_lag) is told of the bytes scanned."""
    scan = scan_options(read)  # includeMetadata and includeControlRecords: see
    # internal_read_options
    chosen = [log for (topic, _), log in logs.items() if topic == topic_name]
    fragments = plan_ranges(chosen, offset_ranges(read, chosen), read)
    fragments.sort(key=lambda f: (f.partition, f.min_offset, f.start_position))
    columns = ("partition", "offset", "timestamp", "key", "value", "producerId",
               "isTransactional", "controlType")
    if progress is not None:
        progress.phase(f"reading {topic_name}",
                       sum(f.end_position - f.start_position for f in fragments), "bytes")
    for fragment in fragments:
        for batch in scan_fragments([fragment], scan):
            data = [batch.column(name).to_pylist() for name in columns]
            for row in zip(*data):
                yield dict(zip(columns, row))
        if progress is not None:
            progress.advance(fragment.end_position - fragment.start_position)


def committed_offsets(paths: List[str], options: Optional[dict] = None,
                      group: Optional[str] = None, as_of: Optional[int] = None
                      ) -> Dict[GroupTopicPartition, CommittedOffset]:
    """The committed offset of each (group, topic, partition) in the `__consumer_offsets`
    partitions under `paths` (read options such as readUpTo and store.* apply), of
    `group` alone if given, as of epoch millisecond `as_of` (the commits written by then)
    if given."""
    read = internal_read_options(paths, options, CONSUMER_OFFSETS)
    return _committed(read, topic_partitions(read, CONSUMER_OFFSETS), group, as_of)[0]


def topic_partitions(read: ReadOptions, topic_name: str) -> Dict:
    """The partitions under the read's paths, one log each; an error without any
    partition of the internal topic `topic_name`."""
    logs = {log.topic_partition: log for log in consumer_partitions(read.paths, read.store)}
    if not any(topic == topic_name for topic, _ in logs):
        raise SegmentLogError(
            f"no {topic_name} partition under {', '.join(read.paths)}: it is read from a "
            f"broker's log dir holding {topic_name}-<n> directories")
    return logs


def _committed(read: ReadOptions, logs: Dict, group: Optional[str], as_of: Optional[int],
               progress=None
               ) -> Tuple[Dict[GroupTopicPartition, CommittedOffset], Dict[str, str]]:
    """The committed offsets, and each group's type (by its latest metadata record)."""
    records = internal_topics()["consumerOffsets"]
    committed: Dict[GroupTopicPartition, CommittedOffset] = {}
    group_types: Dict[str, str] = {}
    pending: Dict[Tuple[int, int], Dict[GroupTopicPartition, Optional[CommittedOffset]]] = {}
    for row in topic_rows(read, logs, CONSUMER_OFFSETS, progress):
        if as_of is not None and _millis(row["timestamp"]) > as_of:
            continue
        producer = (row["partition"], row["producerId"])
        if row["controlType"] is not None:
            applied = pending.pop(producer, {})
            if row["controlType"] == "COMMIT":
                _apply(committed, applied)
            continue
        record = _decoded(records, row)
        if record.record_type in GROUP_TYPES:
            name = record.key.get("group", record.key.get("groupId"))
            if record.deleted:
                group_types.pop(name, None)
            else:
                group_types[name] = GROUP_TYPES[record.record_type]
            continue
        if record.record_type not in OFFSET_COMMIT_TYPES:
            continue
        key = (record.key["group"], record.key["topic"], record.key["partition"])
        if group is not None and key[0] != group:
            continue
        value = None if record.deleted else _commit(key, record.value, row["offset"])
        if row["isTransactional"]:
            pending.setdefault(producer, {})[key] = value
        else:
            _apply(committed, {key: value})
    return committed, group_types


def _millis(timestamp) -> int:
    return int(timestamp.timestamp() * 1000) if hasattr(timestamp, "timestamp") \
        else int(timestamp)


def _decoded(records, row):
    from ..errors import RecordDecodeError

    try:
        return records.decode(row["key"], row["value"])
    except RecordDecodeError as error:
        raise error.at(CONSUMER_OFFSETS, row["partition"], row["offset"]) from None


def _commit(key: GroupTopicPartition, value: dict, written_at: int) -> CommittedOffset:
    return CommittedOffset(
        group=key[0], topic=key[1], partition=key[2], offset=value["offset"],
        leader_epoch=value.get("leaderEpoch"), metadata=value.get("metadata"),
        commit_timestamp=value.get("commitTimestamp"),
        expire_timestamp=value.get("expireTimestamp"), written_at=written_at)


def _apply(committed: Dict, changes: Dict) -> None:
    for key, value in changes.items():
        if value is None:
            committed.pop(key, None)
        else:
            committed[key] = value


def consumer_lag(paths: List[str], options: Optional[dict] = None,
                 group: Optional[str] = None, as_of: Optional[int] = None, progress=None
                 ) -> List[PartitionLag]:
    """Per group, topic and partition: the committed offset, the partition's log start,
    log end and high watermark from the directories under `paths`, and the lag (high
    watermark - committed; the log end where no checkpoint gives a high watermark, or
    with readUpTo=logEnd). With `as_of` (epoch ms), the commits written by then and each
    partition's end then: its first offset with a later timestamp. `progress`, for a
    progress bar, is told of each step (`progress.phase(description, total, unit)`) and
    of the work done in it (`progress.advance(amount)`): the bytes of __consumer_offsets
    scanned, then the partitions whose ends are found."""
    read = internal_read_options(paths, options, CONSUMER_OFFSETS)
    logs = topic_partitions(read, CONSUMER_OFFSETS)
    committed, group_types = _committed(read, logs, group, as_of, progress)
    if progress is not None:
        progress.phase("finding the partitions' ends", len(committed), "commits")
    result = []
    for key in sorted(committed):
        if progress is not None:
            progress.advance(1)
        commit = committed[key]
        log = logs.get((commit.topic, commit.partition))
        start = end = watermark = lag = None
        if log is not None:
            start = log.start_offset
            end = log.end_offset(verify=read.verify_checksums)
            bound = read_bound(log, read)
            watermark = end if bound is None else min(end, bound)
            if as_of is not None:
                found = log.offset_for_timestamp(as_of + 1)
                if found is not None:
                    end = min(end, found)
                    watermark = min(watermark, found)
            lag = watermark - commit.offset
        result.append(PartitionLag(
            group=commit.group, group_type=group_types.get(commit.group, CLASSIC),
            topic=commit.topic, partition=commit.partition,
            committed_offset=commit.offset, leader_epoch=commit.leader_epoch,
            metadata=commit.metadata, commit_timestamp=commit.commit_timestamp,
            log_start_offset=start, log_end_offset=end, high_watermark=watermark, lag=lag))
    return result
